"""Decoding configurations and evaluation plans: YAML, validated, resolved and identified.

A *decoding config* says how one engine decodes: which engine, which target model, the
``speculative`` block (vLLM 0.33's ``speculative_config`` keys, exactly), the ``sampling``
block (``max_tokens`` required: vLLM's default of 16 silently truncates reasoning) and
``engine_options``::

    name: fly-w2                 # label; defaults to the file's stem
    engine: vllm                 # vllm | vllm-server | reference
    model: Qwen/Qwen3-8B
    speculative:
      method: draft_model
      model: Qwen/Qwen3-0.6B
      num_speculative_tokens: 8
      rejection_sample_method: fly
      fly_window_size: 2
    sampling: {temperature: 0.6, top_p: 0.95, top_k: 20, max_tokens: 8192}
    engine_options: {max_num_seqs: 128, chat_template_kwargs: {enable_thinking: true}}

The **config id** (:func:`config_id`) identifies what a serving engine is asked to run: the
target model, the resolved speculative config (vLLM's defaults filled in, e.g. FLy's window
``min(6, K - 1)``) and every argument that can change an output (``dtype``, ``quantization``,
``kv_cache_dtype``, ``max_model_len``, and the output-changing vLLM arguments of
:mod:`qualgate.vllm033.arguments`). It is computed the same way from a harness config and from a vLLM
serving config (``qualgate check``), so evidence binds to exactly the configuration that is
deployed. Sampling settings are chosen per request by the client, not by the server: they
belong to the evaluation, are stored in the run manifest and the gate report, and do not
enter the id.

An *evaluation plan* names the suites, seeds, configs, baseline, candidates and gate
settings; config paths are relative to the plan file::

    name: qwen3-8b-fly
    suites:
      - {suite: gsm8k, limit: 500}
      - {suite: aime25, data_file: data/aime25.jsonl}
    seeds: [0, 1, 2]
    configs: {target: ../qwen3-8b/target.yaml, fly-w2: ../qwen3-8b/fly-w2.yaml}
    baseline: target
    candidates: [fly-w2]         # default: every config but the baseline
    gate: {policy: noninferiority, margin: 0.02, alpha: 0.05}

The gate settings take the vocabularies of :mod:`qualgate.config.options`.

A **chained** plan (:class:`Chain`) gates lossy candidates against a lossless speculative
baseline (standard verification, same drafter and seeds) and adds a *lossless leg*: that
baseline against target-only at ``chain.margin``. The claim "each candidate loses less than
``gate.margin + chain.margin`` against target-only" holds when both legs pass, each at ``alpha``
(an intersection-union test: :mod:`qualgate.run.chain`)::

    baseline: standard
    candidates: [fly-w2]
    chain: {lossless: target, margin: 0.01}   # target: a target-only config of the plan
    # or reuse a stored leg (gate.json's lossless leg, or a run's lossless.json):
    # chain: {report: ../runs/std-vs-target/lossless.json}

This module is longer than the others (about 580 lines) because it is one declarative schema:
the two kinds of input file, each key declared once as a spec of
:mod:`qualgate.records.yaml_schema`, share the YAML reader that locates every error at its line
(``_line_of``, ``_where``), and a plan is read by reading its configs. If it grows, the seam is the plan (:class:`SuiteRef`, :class:`Plan`,
:func:`load_plan`), which would go to a module of its own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from qualgate.config.engines import BACKENDS
from qualgate.config.options import INCONCLUSIVE_AS, NOISE_MODES, POLICIES, WEIGHTINGS
from qualgate.errors import DataError
from qualgate.records import strict as _strict
from qualgate.records.yaml_schema import AnyOf, Choice, Field, Int, ListOf, Number, Str, Where
from qualgate.records.yaml_schema import Mapping as Schema
from qualgate.vllm033.rules import cite, rule, sampling_ranges
from qualgate.vllm033.speculative import is_lossy, resolve_speculative

__all__ = [
    "DecodingConfig",
    "IDENTITY_OPTIONS",
    "Chain",
    "check_model_sources",
    "Plan",
    "SuiteRef",
    "config_id",
    "load_config",
    "load_plan",
    "load_yaml",
    "parse_config",
]

#: Engine options that change the numerics of the served model and so enter the config id.
#: (Every output-changing vLLM argument enters it too: :mod:`qualgate.vllm033.arguments`.)
IDENTITY_OPTIONS = ("dtype", "quantization", "kv_cache_dtype", "max_model_len")
SAMPLING_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "max_tokens",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
    "stop",
    "stop_token_ids",
)
ENGINE_OPTION_KEYS = (
    *IDENTITY_OPTIONS,
    # vLLM (offline and server)
    "tensor_parallel_size",
    "data_parallel_size",
    "distributed_executor_backend",
    "max_num_seqs",
    "max_num_batched_tokens",
    "gpu_memory_utilization",
    "chat_template_kwargs",
    "seed",
    "batch_invariant",
    "enforce_eager",
    # vllm-server
    "base_urls",
    "api_key_env",
    "served_model_name",
    "concurrency",
    "timeout_s",
    "max_retries",
    "retry_backoff_s",
    "max_wait_s",
    "max_response_bytes",
    "recheck_s",
    # reference engine
    "device",
    "batch_size",
    "coupled",
    "noise",
    "tokenizer",
    "compile",
    "cuda_graphs",
)
CONFIG_KEYS = ("name", "engine", "model", "speculative", "sampling", "engine_options")
PLAN_KEYS = ("name", "suites", "seeds", "samples", "configs", "baseline", "candidates", "gate", "chain")
CHAIN_KEYS = ("lossless", "margin", "report")
GATE_KEYS = ("policy", "margin", "alpha", "inconclusive", "weighting")
SUITE_REF_KEYS = ("suite", "limit", "data_file", "revision")
#: A config name in a plan: it names a file (``records/<name>.jsonl``), so a plain name only.
CONFIG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: Bounds on a plan's seeds and samples (each multiplies the work of every config).
MAX_SEEDS, MAX_SAMPLES, MAX_SEED = 10_000, 10_000, 2**63 - 1
#: Bound on seeds x samples, the requests per question and config (each bound alone let
#: 10,000 x 10,000 through: minutes of work before the first record).
MAX_DRAWS = 10_000


def load_yaml(path: str | Path) -> Any:
    """Read one YAML document strictly (:func:`qualgate.records.strict.load_yaml`: a regular file,
    no anchors or aliases, no duplicate keys, no NaN): :class:`DataError` names the line."""
    return _strict.load_yaml(path)


def _line_of(path, dotted: str) -> int | None:
    """The 1-based line of ``dotted`` (``a.b[2].c``) in a YAML file, or of its nearest parent."""
    if path is None:
        return None
    try:
        node = _strict.compose_yaml(_strict.read_text(path, kind="yaml", bom="strip"))
    except DataError:
        return None
    line = None
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", dotted):
        if node is None:
            break
        if part.startswith("[") and isinstance(node, yaml.SequenceNode):
            i = int(part[1:-1])
            node = node.value[i] if i < len(node.value) else None
        elif isinstance(node, yaml.MappingNode):
            match = [(k, v) for k, v in node.value if k.value == part]
            if not match:
                break
            line = match[0][0].start_mark.line + 1
            node = match[0][1]
            continue
        else:
            break
        if node is not None:
            line = node.start_mark.line + 1
    return line


def _err(msg, *, path=None, key=None, value=None) -> DataError:
    return DataError(msg, file=path, line=_line_of(path, key) if key else None, field=key, value=value)


def _where(path, key: str = "") -> Where:
    """The place ``key`` of the YAML file ``path``, whose errors name their line."""
    return Where(path, key, (lambda dotted: _line_of(path, dotted)) if path is not None else None)


def _keys(*keys: str, where: str = "", **fields: Field) -> Schema:
    """A mapping of the known ``keys`` (``fields``: those checked here), as a config file's."""
    return Schema(
        {k: fields.get(k, Field()) for k in keys},
        message=f"{where or 'the document'} must be a mapping",
        unknown_value=False,
    )


_NON_EMPTY = Str(empty=True, pattern="(?s).+", message="must be a non-empty string")
_SAMPLING = _keys(
    *SAMPLING_KEYS,
    where="sampling",
    max_tokens=Field(
        Int(min=1, message="required, a positive integer (vLLM's default of 16 truncates answers)"),
        required=True,
        missing="required, a positive integer (vLLM's default of 16 truncates answers)",
    ),
    temperature=Field(Number(low=0, message="must be a number >= 0"), default=1.0),
    top_p=Field(Number(low=0, high=1, low_open=True, message="must be in (0, 1]"), default=1.0),
    top_k=Field(Int(min=-1, message="must be an integer >= -1 (0 or -1: off)"), default=0),
)
#: vLLM 0.33's SamplingParams ranges (rule ``sampling-ranges`` of :mod:`qualgate.vllm033.rules`),
#: checked before any engine starts, so a value vLLM refuses is a config error (exit 3).
_VLLM_SAMPLING = _keys(
    *SAMPLING_KEYS,
    where="sampling",
    **{key: Field(spec, null=True) for key, spec in sampling_ranges().items()},
    stop=Field(
        AnyOf((Str(empty=True), ListOf(Str(empty=True))), message="must be a string or a list of strings"), null=True
    ),
    stop_token_ids=Field(AnyOf((ListOf(Int(min=0)),), message="must be a list of token ids"), null=True),
)
_POSITIVE = Int(min=1, message="must be a positive integer")
_ENGINE_OPTIONS = _keys(
    *ENGINE_OPTION_KEYS,
    where="engine_options",
    tensor_parallel_size=Field(_POSITIVE, null=True),
    data_parallel_size=Field(_POSITIVE, null=True),
    distributed_executor_backend=Field(
        Choice(
            tuple(rule("cli-parallel").data["backends"]),
            message=f"must be one of {list(rule('cli-parallel').data['backends'])} ({cite('cli-parallel')})",
        ),
        null=True,
    ),
    noise=Field(Choice(NOISE_MODES, message=f"must be one of {list(NOISE_MODES)}"), null=True),
)
_CONFIG = _keys(*CONFIG_KEYS)
_MODEL = Field(
    Str(empty=True, pattern="(?s).+", message="the target model (hub id or path) is required"),
    required=True,
    missing="the target model (hub id or path) is required",
)
_SAMPLING_FIELD = Field(
    required=True, null=True, missing="required (with max_tokens: vLLM's default of 16 truncates answers)"
)

_SUITE_REF = _keys(  # its message names the suite's index (_suite_ref)
    *SUITE_REF_KEYS,
    suite=Field(
        Str(empty=True, message="needs 'suite' (a built-in name or a YAML path)"),
        required=True,
        missing="needs 'suite' (a built-in name or a YAML path)",
    ),
    limit=Field(_POSITIVE, null=True),
    data_file=Field(_NON_EMPTY, null=True),
    revision=Field(_NON_EMPTY, null=True),
)
_SEEDS = Field(
    AnyOf(
        (Int(min=1, max=MAX_SEEDS), ListOf(Int(min=0, max=MAX_SEED), empty=False, unique=True, max_items=MAX_SEEDS)),
        message=f"a count (1 to {MAX_SEEDS}) or a list of at most {MAX_SEEDS} distinct integers in [0, 2**63)",
    ),
    default=[0],
)
_SAMPLES = Field(Int(min=1, max=MAX_SAMPLES), default=1)
_GATE = _keys(
    *GATE_KEYS,
    where="gate",
    policy=Field(Choice(POLICIES), default="noninferiority"),
    margin=Field(Number(0, 1, low_open=True, high_open=True, message="must be in (0, 1)"), default=0.02),
    alpha=Field(Number(0, 0.5, low_open=True, high_open=True, message="must be in (0, 0.5)"), default=0.05),
    inconclusive=Field(Choice(INCONCLUSIVE_AS), default="inconclusive"),
    weighting=Field(Choice(WEIGHTINGS), default="pooled"),
)


def config_id(
    model: str,
    speculative: Mapping[str, Any] | None = None,
    **numerics: Any,
) -> str:
    """Identify a serving configuration: ``cfg-`` and 16 hex digits of a SHA-256.

    Parameters
    ----------
    model : str
        The target model as the engine is given it (hub id or path, as written).
    speculative : mapping or None
        A raw ``speculative_config``; it is resolved first, so an unset FLy window and an
        explicit ``min(6, K - 1)`` give the same id.
    **numerics
        ``dtype``, ``quantization``, ``kv_cache_dtype``, ``max_model_len`` and every other
        output-changing vLLM 0.33 argument (:mod:`qualgate.vllm033.arguments`, by its
        destination: ``revision``, ``tokenizer``, ``hf_overrides``, ...); ``None`` values are
        ignored. Text that is JSON counts as its value (``"40960"`` is ``40960``), so a
        command line and a YAML mapping give one id; a config that sets none of the newer
        keys keeps the id it always had.
    """
    from qualgate.vllm033.arguments import ARGUMENTS, SEPARATE, identity_arguments

    allowed = set(IDENTITY_OPTIONS) | {k for k, a in ARGUMENTS.items() if a.klass == "output"} - SEPARATE
    unknown = set(numerics) - allowed
    if unknown:
        raise ValueError(
            f"config_id takes only {list(IDENTITY_OPTIONS)} and output-changing vLLM arguments, got {sorted(unknown)}"
        )
    ident = {"model": str(model), "speculative_config": resolve_speculative(speculative)}
    ident.update(identity_arguments({k: v for k, v in numerics.items() if v is not None}))
    blob = json.dumps(ident, sort_keys=True, separators=(",", ":"))
    return "cfg-" + hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class DecodingConfig:
    """One resolved decoding configuration (see the module docstring)."""

    name: str
    engine: str
    model: str
    speculative: dict[str, Any] | None
    sampling: dict[str, Any]
    engine_options: dict[str, Any] = field(default_factory=dict)
    path: str | None = None

    @property
    def config_id(self) -> str:
        from qualgate.vllm033.arguments import ARGUMENTS, SEPARATE

        # engine arguments passed through (engine: vllm) that change outputs enter the id too
        output = {
            k: v
            for k, v in self.engine_options.items()
            if k not in ENGINE_OPTION_KEYS
            and k not in SEPARATE
            and getattr(ARGUMENTS.get(k), "klass", None) == "output"
        }
        return config_id(
            self.model,
            self.speculative,
            **{k: self.engine_options.get(k) for k in IDENTITY_OPTIONS},
            **output,
        )

    @property
    def lossy(self) -> bool:
        return is_lossy(self.speculative)

    @property
    def mode(self) -> str:
        """``target``, or the verifier: ``standard``, ``fly``, ``block``, ``synthetic``."""
        return self.speculative["rejection_sample_method"] if self.speculative else "target"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "config_id": self.config_id,
            "engine": self.engine,
            "model": self.model,
            "speculative": self.speculative,
            "sampling": self.sampling,
            "engine_options": self.engine_options,
        }


def _check_parallel(options: Mapping, *, path) -> None:
    """data_parallel_size > 1 as vLLM 0.33's offline LLM takes it (rule ``llm-data-parallel``)."""
    data_parallel = options.get("data_parallel_size") or 1
    if data_parallel > 1 and options.get("distributed_executor_backend") != "external_launcher":
        raise _err(
            "vLLM 0.33's offline LLM refuses data_parallel_size > 1 unless "
            "distributed_executor_backend is 'external_launcher' (one process per "
            f"rank, started by torchrun) ({cite('llm-data-parallel')})",
            path=path,
            key="engine_options.data_parallel_size",
            value=options["data_parallel_size"],
        )


#: engines that read the model as a name only (the test double)
_NAMES_ONLY = ("toy",)
#: a Hugging Face hub id: ``name`` or ``org/name`` of letters, digits, ``-``, ``_``, ``.``
_HUB_ID = re.compile(r"^(?!.*(?:--|\.\.))[A-Za-z0-9][\w.-]{0,95}(?:/[A-Za-z0-9][\w.-]{0,95})?$")


def _check_model_source(model: str, *, path, key: str) -> None:
    """A model is a directory holding ``config.json`` (a path, relative to the config file or
    absolute) or a hub id; a file, a device (``/dev/zero``) or a path that does not exist is a
    config error here, before any engine or hub client is started."""
    local = Path(model).expanduser()
    if not local.is_absolute() and path is not None:
        local = Path(path).parent / local
    looks_like_path = model.startswith(("/", "./", "../", "~")) or "\\" in model
    if local.exists() or looks_like_path:
        if not local.is_dir():
            what = (
                "does not exist" if not local.exists() else "is not a directory (a model is a folder with config.json)"
            )
            raise _err(f"the model path {local} {what}", path=path, key=key, value=model)
        if not (local / "config.json").is_file():
            raise _err(f"the model folder {local} has no config.json", path=path, key=key, value=model)
        return
    if not _HUB_ID.match(model):
        raise _err(
            "neither an existing model folder nor a Hugging Face hub id (org/name)", path=path, key=key, value=model
        )


def check_model_sources(config: DecodingConfig) -> None:
    """Refuse a target or drafter that is neither a model folder nor a hub id (a
    :class:`DataError` naming the config file, line and field), before an engine or the hub
    client starts; the test double (``engine: toy``) reads names only."""
    if config.engine in _NAMES_ONLY:
        return
    _check_model_source(config.model, path=config.path, key="model")
    drafter = (config.speculative or {}).get("model")
    if isinstance(drafter, str):
        _check_model_source(drafter, path=config.path, key="speculative.model")


def parse_config(data: Any, *, path: str | Path | None = None, name: str | None = None) -> DecodingConfig:
    """Validate a decoding config mapping and resolve its defaults."""
    at = _where(path)
    _CONFIG.check(data, at)
    engines = f"must be a registered engine, one of {sorted(BACKENDS)} (qualgate.backends.register_backend)"
    engine = Field(Choice(tuple(BACKENDS), message=engines), required=True, missing=engines).get(
        data, "engine", at.at("engine")
    )
    model = _MODEL.get(data, "model", at.at("model"))
    raw_spec = data.get("speculative")

    try:
        speculative = resolve_speculative(raw_spec)
    except ValueError as exc:
        raise _err(str(exc), path=path, key="speculative", value=raw_spec) from exc

    sampling = _SAMPLING.check(_SAMPLING_FIELD.get(data, "sampling", at.at("sampling")), at.at("sampling"))
    if sampling["top_k"] == -1:
        sampling["top_k"] = 0
    _VLLM_SAMPLING.check(sampling, at.at("sampling"))

    raw_options = data.get("engine_options") or {}
    if not isinstance(raw_options, dict):
        raise _err(
            f"must be a mapping of option names to values, not {type(raw_options).__name__}",
            path=path,
            key="engine_options",
            value=raw_options,
        )
    passed = _engine_arguments(engine, raw_options, path)
    options = _ENGINE_OPTIONS.check({k: v for k, v in raw_options.items() if k not in passed}, at.at("engine_options"))
    options = {**options, **passed}
    _check_parallel(options, path=path)
    if engine == "vllm-server" and not options.get("base_urls"):
        raise _err("engine 'vllm-server' needs engine_options.base_urls", path=path, key="engine_options.base_urls")

    label = Field(_NON_EMPTY, null=True).get(data, "name", at.at("name")) or name or (Path(path).stem if path else None)
    if not label:
        raise _err("a config needs a name", path=path, key="name")
    return DecodingConfig(
        name=str(label),
        engine=engine,
        model=model,
        speculative=speculative,
        sampling=sampling,
        engine_options=dict(options),
        path=str(path) if path else None,
    )


def _engine_arguments(engine: str, options: Any, path) -> dict[str, Any]:
    """The ``engine_options`` of an ``engine: vllm`` config that are not qualgate's own keys but
    engine arguments of the installed vLLM (its ``EngineArgs`` fields, or vLLM 0.33's table
    without vLLM: :func:`qualgate.vllm033.installed.engine_arguments`): passed to ``vllm.LLM``
    as they are. Any other unknown key is refused with the list of valid ones."""
    if engine != "vllm" or not isinstance(options, Mapping):
        return {}
    extra = [k for k in options if k not in ENGINE_OPTION_KEYS]
    if not extra:
        return {}
    from qualgate.vllm033.installed import engine_arguments

    names, source = engine_arguments()
    for key in extra:
        if key not in names:
            raise _err(
                f"unknown key {key!r}: neither a qualgate engine option nor an engine argument of {source}; "
                f"valid keys: {sorted({*ENGINE_OPTION_KEYS, *names})}",
                path=path,
                key=f"engine_options.{key}",
                value=options[key],
            )
    return {k: options[k] for k in extra}


def load_config(path: str | Path, *, name: str | None = None) -> DecodingConfig:
    """Load and validate a decoding config YAML file."""
    return parse_config(load_yaml(path), path=path, name=name)


@dataclass(frozen=True)
class SuiteRef:
    """A suite in a plan: built-in name or YAML path, with an optional limit and local data."""

    suite: str
    limit: int | None = None
    data_file: str | None = None
    revision: str | None = None


@dataclass(frozen=True)
class Chain:
    """A plan's lossless leg: the baseline against the target-only config ``lossless`` at
    ``margin``, or a stored leg's gate report (``report``, whose margin it takes)."""

    margin: float | None
    lossless: str | None = None
    report: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"lossless": self.lossless, "margin": self.margin, "report": self.report}


@dataclass(frozen=True)
class Plan:
    """A validated evaluation plan (see the module docstring)."""

    name: str
    suites: tuple[SuiteRef, ...]
    seeds: tuple[int, ...]
    samples: int
    configs: dict[str, DecodingConfig]
    baseline: str
    candidates: tuple[str, ...]
    policy: str = "noninferiority"
    margin: float = 0.02
    alpha: float = 0.05
    inconclusive: str = "inconclusive"
    weighting: str = "pooled"
    path: str | None = None
    chain: Chain | None = None

    def to_dict(self) -> dict[str, Any]:
        return ({"chain": self.chain.to_dict()} if self.chain else {}) | {
            "name": self.name,
            "suites": [s.__dict__ for s in self.suites],
            "seeds": list(self.seeds),
            "samples": self.samples,
            "configs": {k: c.to_dict() for k, c in self.configs.items()},
            "baseline": self.baseline,
            "candidates": list(self.candidates),
            "gate": {
                "policy": self.policy,
                "margin": self.margin,
                "alpha": self.alpha,
                "inconclusive": self.inconclusive,
                "weighting": self.weighting,
            },
        }


def _resolve_relative(base: Path, value: str) -> str:
    p = Path(value)
    return str(p if p.is_absolute() else (base / p))


def load_plan(path: str | Path) -> Plan:
    """Load and validate an evaluation plan, with every config it names (in this order: the
    suites, seeds, samples, configs, baseline and candidates, gate settings, name)."""
    path = Path(path)
    data = load_yaml(path)
    at = _where(path)
    _keys(*PLAN_KEYS).check(data, at)
    suites = _plan_suites(data, path)
    seeds = _plan_seeds(data, path)
    samples = _SAMPLES.get(data, "samples", at.at("samples"))
    if len(seeds) * samples > MAX_DRAWS:
        raise _err(
            f"{len(seeds)} seeds x {samples} samples = {len(seeds) * samples:,} requests per question "
            f"and config, over the bound of {MAX_DRAWS:,}: use fewer seeds or samples",
            path=path,
            key="samples",
            value=samples,
        )
    configs = _plan_configs(data, path)
    baseline, candidates = _plan_roles(data, configs, path)
    gate = _GATE.check(data.get("gate") or {}, at.at("gate"))
    chain = _plan_chain(data, configs, baseline, path, float(gate["margin"]))
    if chain is not None and chain.lossless in candidates:
        if data.get("candidates"):
            raise _err(
                "the chain's lossless config is the baseline of the lossless leg, not a candidate",
                path=path,
                key="candidates",
                value=chain.lossless,
            )
        candidates = tuple(c for c in candidates if c != chain.lossless)
    name = Field(_NON_EMPTY, null=True).get(data, "name", at.at("name"))
    return Plan(
        name=name or path.stem,
        suites=suites,
        seeds=seeds,
        samples=samples,
        configs=configs,
        baseline=baseline,
        candidates=candidates,
        **{k: float(v) if k in ("margin", "alpha") else v for k, v in gate.items()},
        path=str(path),
        chain=chain,
    )


_CHAIN = _keys(
    *CHAIN_KEYS,
    where="chain",
    lossless=Field(Str(pattern=CONFIG_NAME.pattern, message="must name a config of the plan"), null=True),
    margin=Field(Number(0, 1, low_open=True, high_open=True, message="must be in (0, 1)"), null=True),
    report=Field(_NON_EMPTY, null=True),
)


def _plan_chain(data, configs, baseline: str, path: Path, margin: float) -> Chain | None:
    """The plan's ``chain`` (see :class:`Chain`), checked against its configs."""
    if data.get("chain") is None:
        return None
    raw = _CHAIN.check(data["chain"], _where(path, "chain"))
    lossless, report, leg_margin = raw.get("lossless"), raw.get("report"), raw.get("margin")
    if (lossless is None) == (report is None):
        raise _err(
            "give either 'lossless' (a target-only config of the plan) or 'report' (a stored lossless leg)",
            path=path,
            key="chain",
            value=raw,
        )
    base = configs[baseline]
    if base.lossy or base.mode == "target":
        raise _err(
            "a chain needs a lossless speculative baseline (standard verification): it is "
            f"the lossless leg's candidate, but {baseline!r} uses {base.mode!r}",
            path=path,
            key="baseline",
            value=baseline,
        )
    if report is not None:
        if not Path(_resolve_relative(path.parent, report)).is_file():
            raise _err("no such gate report file", path=path, key="chain.report", value=report)
        return Chain(
            margin=None if leg_margin is None else float(leg_margin), report=_resolve_relative(path.parent, report)
        )
    if leg_margin is None:
        raise _err("the lossless leg's margin is required", path=path, key="chain.margin")
    if lossless not in configs or lossless == baseline:
        raise _err(
            f"must name a config of the plan other than the baseline {list(configs)}",
            path=path,
            key="chain.lossless",
            value=lossless,
        )
    target = configs[lossless]
    if target.mode != "target":
        raise _err(
            f"the lossless leg's baseline must be target-only (no speculative block); {lossless!r} uses {target.mode!r}",
            path=path,
            key="chain.lossless",
            value=lossless,
        )
    for what, a, b in (
        ("engine", target.engine, base.engine),
        ("model", target.model, base.model),
        ("sampling", target.sampling, base.sampling),
    ):
        if a != b:
            raise _err(
                f"the lossless leg compares {baseline!r} with {lossless!r}, which differ in {what} "
                f"({b!r} against {a!r}): the chain's claim needs them equal but for speculative decoding",
                path=path,
                key="chain.lossless",
                value=lossless,
            )
    if margin + float(leg_margin) >= 1:
        raise _err("the two margins must add up to less than 1", path=path, key="chain.margin", value=leg_margin)
    return Chain(margin=float(leg_margin), lossless=lossless)


def _plan_suites(data, path: Path) -> tuple[SuiteRef, ...]:
    suites_raw = data.get("suites")
    if not isinstance(suites_raw, list) or not suites_raw:
        raise _err("a non-empty list of suites is required", path=path, key="suites", value=suites_raw)
    suites = tuple(_suite_ref(item, i, path) for i, item in enumerate(suites_raw))
    names = [s.suite for s in suites]
    if len(set(names)) != len(names):
        raise _err("a suite is listed twice", path=path, key="suites", value=names)
    return suites


def _suite_ref(item, i: int, path: Path) -> SuiteRef:
    """``suites[i]`` of a plan: a name or a mapping (paths relative to the plan's folder)."""
    base = path.parent
    if isinstance(item, str):
        item = {"suite": item}
    spec = dataclasses.replace(_SUITE_REF, message=f"suites[{i}] must be a mapping")
    item = spec.check(item, _where(path, f"suites[{i}]"))
    suite = item["suite"]
    if suite.endswith((".yaml", ".yml")):
        suite = _resolve_relative(base, suite)
    limit, data_file = item.get("limit"), item.get("data_file")
    if (
        data_file
        and Path(_resolve_relative(base, data_file)).exists()
        and not _strict.is_regular_file(_resolve_relative(base, data_file))
    ):
        raise _err(
            "not a regular file (a FIFO, a device or a directory): refused",
            path=path,
            key=f"suites[{i}].data_file",
            value=data_file,
        )
    return SuiteRef(
        suite=suite,
        limit=limit,
        data_file=_resolve_relative(base, data_file) if data_file else None,
        revision=item.get("revision"),
    )


def _plan_seeds(data, path: Path) -> tuple[int, ...]:
    seeds = _SEEDS.get(data, "seeds", _where(path, "seeds"))
    return tuple(range(seeds)) if isinstance(seeds, int) else tuple(seeds)


def _plan_configs(data, path: Path) -> dict[str, DecodingConfig]:
    """The plan's configs, each loaded from its file and named by the plan's key."""
    base = path.parent
    configs_raw = data.get("configs")
    if not isinstance(configs_raw, Mapping) or not configs_raw:
        raise _err("a mapping of name -> config YAML path is required", path=path, key="configs", value=configs_raw)
    configs = {}
    for cname, cpath in configs_raw.items():
        if not isinstance(cname, str) or not CONFIG_NAME.fullmatch(cname):
            raise _err(
                "a config name must be a plain name (letters, digits, '.', '_', '-'; "
                "starting with a letter or digit; at most 64): it names the records file",
                path=path,
                key="configs",
                value=cname,
            )
        if not isinstance(cpath, str):
            raise _err("must be a path to a decoding config YAML", path=path, key=f"configs.{cname}", value=cpath)
        if not Path(_resolve_relative(base, cpath)).exists():
            raise _err("no such decoding config file", path=path, key=f"configs.{cname}", value=cpath)
        # the plan's key is the label, whatever the file calls itself
        loaded = load_config(_resolve_relative(base, cpath))
        configs[str(cname)] = dataclasses.replace(loaded, name=str(cname))
    return configs


def _plan_roles(data, configs: Mapping[str, DecodingConfig], path: Path) -> tuple[str, tuple[str, ...]]:
    """``(baseline, candidates)``: names of configs, each serving another configuration."""
    baseline = data.get("baseline")
    if not isinstance(baseline, str) or baseline not in configs:
        raise _err(f"must name one of the configs {list(configs)}", path=path, key="baseline", value=baseline)
    candidates = data.get("candidates") or [c for c in configs if c != baseline]
    if not isinstance(candidates, list):
        raise _err("must be a list of config names", path=path, key="candidates", value=candidates)
    if len(set(map(str, candidates))) != len(candidates):
        raise _err("a candidate is listed twice", path=path, key="candidates", value=candidates)
    for c in candidates:
        if not isinstance(c, str) or c not in configs or c == baseline:
            raise _err(
                f"candidates must name configs other than the baseline {list(configs)}",
                path=path,
                key="candidates",
                value=c,
            )
    gated: dict[str, str] = {}  # config id -> the first gated config serving it
    for c in (baseline, *candidates):
        cid = configs[c].config_id
        if cid in gated:  # the gate report would refuse it (qualgate.evidence.gate_report), after every decode
            raise _err(
                f"gates {c!r} and {gated[cid]!r}, which serve one configuration ({cid}; options "
                "that change only the reference engine's noise, such as 'coupled' or 'noise', are not part of "
                "it): the gate's evidence names each config by what it serves, so list one of them",
                path=path,
                key="candidates",
                value=c,
            )
        gated[cid] = c
    return baseline, tuple(candidates)


def with_limit(plan, limit: int | None):
    """``plan`` with each suite cut to its first ``limit`` questions (a suite's own smaller
    limit stays): ``qualgate run --limit`` and ``qualgate sweep --limit``, for a small run
    without writing a new plan."""
    import dataclasses

    if limit is None:
        return plan
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a positive integer, got {limit!r}")
    suites = tuple(dataclasses.replace(s, limit=limit if s.limit is None else min(s.limit, limit)) for s in plan.suites)
    return dataclasses.replace(plan, suites=suites)
