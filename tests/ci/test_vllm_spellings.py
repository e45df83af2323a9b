"""Every spelling of a serving config that vLLM 0.33 accepts is resolved as vLLM resolves it,
and every spelling qualgate cannot resolve exactly is refused (exit 3), never "lossless".

Each case names the row of :data:`qualgate.vllm033.rules.TABLE` (and so the vLLM 0.33.0 file and
line) that decides it. The table's own examples are walked too.
"""

import pytest
from click.testing import CliRunner

from qualgate.ci import read_serving_config
from qualgate.cli import cli
from qualgate.errors import DataError
from qualgate.vllm033.rules import TABLE, cite, rule, rules_of
from qualgate.vllm033.speculative import LOSSY_METHODS, SPECULATIVE_METHODS, normalise_speculative, resolve_speculative

D = '"method": "draft_model", "model": "Qwen/Qwen3-0.6B"'
FLY = "{" + D + ', "num_speculative_tokens": 8, "rejection_sample_method": "fly", "fly_window_size": 2}'
STD = "{" + D + ', "num_speculative_tokens": 8}'
S = "vllm serve Qwen/Qwen3-8B "
FLY_W2 = {"method": "draft_model", "rejection_sample_method": "fly", "fly_window_size": 2, "num_speculative_tokens": 8}
LOSSLESS = {"rejection_sample_method": "standard"}
TARGET = {"speculative": None}

FLY_CFG = (
    "model: Qwen/Qwen3-8B\nspeculative-config:\n  method: draft_model\n"
    "  model: Qwen/Qwen3-0.6B\n  num_speculative_tokens: 8\n"
    "  rejection_sample_method: fly\n  fly_window_size: 2\n"
)

# (id, deciding rule, file name, text, expected resolution, {other files})
CASES = [
    ("long-option", "cli-sc-alias", "s.sh", S + f"--speculative-config '{FLY}'", FLY_W2),
    ("sc-alias", "cli-sc-alias", "s.sh", S + f"-sc '{FLY}'", FLY_W2),
    ("sc-equals", "cli-sc-alias", "s.sh", S + f"-sc='{FLY}'", FLY_W2),
    ("long-equals", "cli-sc-alias", "s.sh", S + f"--speculative-config='{FLY}'", FLY_W2),
    ("underscore-option", "cli-underscores", "s.sh", S + f"--speculative_config '{FLY}'", FLY_W2),
    (
        "hyphen-keys",
        "spec-key-hyphens",
        "s.sh",
        S + '-sc \'{"model": "Qwen/Qwen3-0.6B", '
        '"num-speculative-tokens": 8, "rejection-sample-method": "fly", "fly-window-size": 2}\'',
        FLY_W2,
    ),
    (
        "hyphen-key-wins-later",
        "spec-key-hyphens",
        "s.sh",
        S + '-sc \'{"model": "Qwen/Qwen3-0.6B", '
        '"num_speculative_tokens": 8, "rejection_sample_method": "standard", '
        '"rejection-sample-method": "fly"}\'',
        {"rejection_sample_method": "fly", "fly_window_size": 6},
    ),
    (
        "dotted",
        "cli-dotted",
        "s.sh",
        S + "--speculative-config.model Qwen/Qwen3-0.6B "
        "--speculative-config.num_speculative_tokens 8 --speculative-config.rejection_sample_method "
        "fly --speculative-config.fly_window_size 2",
        FLY_W2,
    ),
    (
        "dotted-equals",
        "cli-dotted",
        "s.sh",
        S + "--speculative-config.model=Qwen/Qwen3-0.6B "
        "--speculative-config.num_speculative_tokens=8 --speculative-config.rejection_sample_method=fly "
        "--speculative-config.fly_window_size=2",
        FLY_W2,
    ),
    (
        "dotted-sc",
        "cli-dotted",
        "s.sh",
        S + "-sc.model Qwen/Qwen3-0.6B -sc.num_speculative_tokens 8 "
        "-sc.rejection_sample_method fly -sc.fly_window_size 2",
        FLY_W2,
    ),
    (
        "dotted-underscored-option",
        "cli-dotted",
        "s.sh",
        S + "--speculative_config.model Qwen/Qwen3-0.6B "
        "--speculative_config.num_speculative_tokens 8 --speculative_config.rejection_sample_method fly",
        {"rejection_sample_method": "fly", "fly_window_size": 6},
    ),
    (
        "dotted-replaces-json",
        "cli-dotted",
        "s.sh",
        S + f"-sc '{STD}' --speculative-config.rejection_sample_method fly",
        {"error": "without speculative model"},
    ),
    (
        "dotted-replaces-json-2",
        "cli-dotted",
        "s.sh",
        S + f"-sc '{FLY}' -sc.num_speculative_tokens 4",
        {"error": "without speculative model"},
    ),
    (
        "spec-flags",
        "cli-spec-flags",
        "s.sh",
        S + "--spec-method draft_model --spec-model Qwen/Qwen3-0.6B --spec-tokens 8",
        {**LOSSLESS, "num_speculative_tokens": 8, "method": "draft_model"},
    ),
    (
        "spec-flags-underscored",
        "cli-underscores",
        "s.sh",
        S + "--spec_model Qwen/Qwen3-0.6B --spec_tokens 8",
        {**LOSSLESS, "num_speculative_tokens": 8},
    ),
    (
        "spec-flag-with-json",
        "cli-spec-flags",
        "s.sh",
        S + "--spec-model Qwen/Qwen3-0.6B -sc "
        '\'{"num_speculative_tokens": 8, "rejection_sample_method": "fly", "fly_window_size": 2}\'',
        FLY_W2,
    ),
    (
        "spec-flag-conflict",
        "cli-spec-flags-merge",
        "s.sh",
        S + f"--spec-tokens 4 -sc '{FLY}'",
        {"error": "mutually exclusive"},
    ),
    (
        "spec-flag-vs-hyphen-key",
        "cli-spec-flags-merge",
        "s.sh",
        S + '--spec-tokens 4 -sc \'{"model": "Qwen/Qwen3-0.6B", "num-speculative-tokens": 8}\'',
        {"num_speculative_tokens": 4},
    ),
    ("abbreviated-option", "cli-abbrev", "s.sh", S + f"--speculative '{FLY}'", {"error": "prefix"}),
    ("abbreviated-flag", "cli-abbrev", "s.sh", S + "--spec-mod Qwen/Qwen3-0.6B --spec-tokens 4", {"error": "prefix"}),
    ("typo-option", "cli-spec-flags", "s.sh", S + f"--speculative-confg '{FLY}'", {"error": "--speculative-confg"}),
    (
        "removed-option",
        "cli-spec-flags",
        "s.sh",
        S + "--speculative-model Qwen/Qwen3-0.6B --num-speculative-tokens 8",
        {"error": "--speculative-model"},
    ),
    (
        "last-wins-lossless",
        "cli-last-wins",
        "s.sh",
        S + f"-sc '{FLY}' --speculative-config '{STD}'",
        {**LOSSLESS, "num_speculative_tokens": 8},
    ),
    ("last-wins-lossy", "cli-last-wins", "s.sh", S + f"--speculative-config '{STD}' -sc '{FLY}'", FLY_W2),
    ("json-none", "cli-json-none", "s.sh", S + "--speculative-config None", TARGET),
    ("json-empty", "cli-json-none", "s.sh", S + "--speculative-config ''", TARGET),
    (
        "model-option-moved",
        "serve-model",
        "s.sh",
        f"vllm serve --model Qwen/Qwen3-8B -sc '{FLY}'",
        {**FLY_W2, "model": "Qwen/Qwen3-8B"},
    ),
    (
        "api-server",
        "api-server-model",
        "s.sh",
        f"python -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-8B -sc '{FLY}'",
        {**FLY_W2, "model": "Qwen/Qwen3-8B"},
    ),
    (
        "api-server-positional",
        "api-server-model",
        "s.sh",
        f"python -m vllm.entrypoints.openai.api_server Qwen/Qwen3-8B -sc '{FLY}'",
        {"error": "names no model"},
    ),
    ("cli-main", "serve-model", "s.sh", f"python -m vllm.entrypoints.cli.main serve Qwen/Qwen3-8B -sc '{FLY}'", FLY_W2),
    (
        "docker-ambiguous-model",
        "api-server-model",
        "s.sh",
        f"docker run vllm/vllm-openai:v0.33.0 Qwen/Qwen3-8B --model Qwen/Qwen3-32B -sc '{FLY}'",
        {"error": "positional"},
    ),
    (
        "docker",
        "api-server-model",
        "s.sh",
        f"docker run --gpus all vllm/vllm-openai:v0.33.0 --model Qwen/Qwen3-8B -sc '{FLY}'",
        FLY_W2,
    ),
    (
        "shell-continuations",
        "cli-sc-alias",
        "s.sh",
        "#!/bin/sh\n# FLy, W = 2\nVLLM_LOGGING_LEVEL=INFO "
        'vllm serve Qwen/Qwen3-8B \\\n  --max-num-seqs 64 \\\n  -sc \'{"model": "Qwen/Qwen3-0.6B",\n'
        '    "num_speculative_tokens": 8, "rejection_sample_method": "fly",\n'
        '    "fly_window_size": 2}\'\n',
        FLY_W2,
    ),
    (
        "variable-indirection",
        "cli-spec-flags",
        "s.sh",
        f"ARGS='-sc {FLY}'\nvllm serve Qwen/Qwen3-8B $ARGS\n",
        {"error": "outside the vllm command"},
    ),
    (
        "unexpanded-variable",
        "cli-sc-alias",
        "s.sh",
        'vllm serve Qwen/Qwen3-8B "$SPEC_ARGS"\n',
        {"error": "expanded by the shell"},
    ),
    (
        "unbalanced-quote",
        "cli-sc-alias",
        "s.sh",
        S + '-sc \'{"model": "Qwen/Qwen3-0.6B", "rejection_sample_method": "fly"}\n',
        {"error": "unterminated"},
    ),
    ("args-file", "cli-sc-alias", "a.args", f"--model Qwen/Qwen3-8B\n-sc '{FLY}'\n", FLY_W2),
    ("yaml-mapping", "cli-config-file", "c.yaml", FLY_CFG, FLY_W2),
    ("yaml-json-string", "cli-config-file", "c.yaml", f"model: Qwen/Qwen3-8B\nspeculative_config: '{FLY}'\n", FLY_W2),
    (
        "yaml-dotted-keys",
        "cli-dotted",
        "c.yaml",
        "model: Qwen/Qwen3-8B\nspeculative-config.model: "
        "Qwen/Qwen3-0.6B\nspeculative-config.num_speculative_tokens: 8\n"
        "speculative-config.rejection_sample_method: fly\n",
        {"rejection_sample_method": "fly"},
    ),
    (
        "yaml-abbreviated-key",
        "cli-abbrev",
        "c.yaml",
        "model: Qwen/Qwen3-8B\nspeculative:\n"
        "  model: Qwen/Qwen3-0.6B\n  num_speculative_tokens: 8\n  rejection_sample_method: fly\n",
        {"error": "prefix"},
    ),
    (
        "yaml-typo-key",
        "cli-spec-flags",
        "c.yaml",
        "model: Qwen/Qwen3-8B\nspeculative_confg:\n"
        "  model: Qwen/Qwen3-0.6B\n  num_speculative_tokens: 8\n  rejection_sample_method: fly\n",
        {"error": "speculative-confg"},
    ),
    (
        "yaml-nested-under-serve",
        "cli-config-file",
        "c.yaml",
        "serve:\n  " + FLY_CFG.replace("\n", "\n  "),
        {"error": "not understood"},
    ),
    (
        "kubernetes-container",
        "cli-config-file",
        "c.yaml",
        "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n"
        "  - name: vllm\n    image: vllm/vllm-openai:v0.33.0\n    args: [--model, Qwen/Qwen3-8B, -sc, "
        f"'{FLY}']\n",
        FLY_W2,
    ),
    ("config-file", "cli-config-file", "s.sh", S + "--config fly.yaml", FLY_W2, {"fly.yaml": FLY_CFG}),
    (
        "config-file-overridden",
        "cli-config-file",
        "s.sh",
        S + f"--config fly.yaml -sc '{STD}'",
        {**LOSSLESS, "num_speculative_tokens": 8},
        {"fly.yaml": FLY_CFG},
    ),
    ("config-equals-not-read", "cli-config-equals", "s.sh", S + "--config=fly.yaml", TARGET, {"fly.yaml": FLY_CFG}),
    (
        "config-not-yaml",
        "cli-config-file",
        "s.sh",
        S + "--config fly.json",
        {"error": ".yaml/.yml"},
        {"fly.json": "{}"},
    ),
    (
        "lax-int-strings",
        "spec-lax-types",
        "s.sh",
        S + '-sc \'{"model": "Qwen/Qwen3-0.6B", '
        '"num_speculative_tokens": "8", "rejection_sample_method": "fly", "fly_window_size": 2.0}\'',
        FLY_W2,
    ),
    (
        "lax-int-bool",
        "spec-lax-types",
        "s.sh",
        S + '-sc \'{"model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": true, "rejection_sample_method": "fly"}\'',
        {"error": "FLy requires num_speculative_tokens >= 2"},
    ),
    (
        "lax-int-fraction",
        "spec-lax-types",
        "s.sh",
        S + '-sc \'{"model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 8.5}\'',
        {"error": "num_speculative_tokens"},
    ),
    (
        "method-inferred",
        "spec-method-infer",
        "s.sh",
        S + '-sc \'{"model": "Qwen/Qwen3-0.6B", '
        '"num_speculative_tokens": 8, "rejection_sample_method": "fly", "fly_window_size": 2}\'',
        FLY_W2,
    ),
    (
        "ngram-by-model",
        "spec-method-infer",
        "s.sh",
        S + '-sc \'{"model": "[ngram]", "num_speculative_tokens": 3}\'',
        {"method": "ngram", **LOSSLESS},
    ),
    (
        "custom-class",
        "spec-method-infer",
        "s.sh",
        S + '-sc \'{"model": "my_pkg.MyProposer", "num_speculative_tokens": 3}\'',
        {"method": "custom_class"},
    ),
    (
        "eagle3-by-name",
        "spec-method-by-name",
        "s.sh",
        "vllm serve meta-llama/Llama-3.1-8B-Instruct -sc "
        '\'{"model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3}\'',
        {"method": "eagle3", **LOSSLESS},
    ),
    (
        "dflash-by-name",
        "spec-method-by-name",
        "s.sh",
        S + '-sc \'{"method": "draft_model", '
        '"model": "z-lab/Qwen3-8B-DFlash-b16", "num_speculative_tokens": 8, '
        '"rejection_sample_method": "fly", "fly_window_size": 2}\'',
        {"method": "dflash", "rejection_sample_method": "fly"},
    ),
    (
        "mtp-alias",
        "spec-mtp-alias",
        "s.sh",
        S + '-sc \'{"method": "deepseek_mtp", "num_speculative_tokens": 1}\'',
        {"method": "mtp"},
    ),
    (
        "medusa",
        "spec-method-literal",
        "s.sh",
        S + '-sc \'{"method": "medusa", "model": "m", "num_speculative_tokens": 5}\'',
        {"error": "medusa"},
    ),
    (
        "upper-case-verifier",
        "spec-method-literal",
        "s.sh",
        S + '-sc \'{"model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 8, "rejection_sample_method": "FLY"}\'',
        {"error": "'FLY'"},
    ),
    (
        "unknown-key",
        "spec-extra-forbid",
        "s.sh",
        S + '-sc \'{"model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 8, "rejection_method": "fly"}\'',
        {"error": "rejection_method"},
    ),
    (
        "negative-threshold-standard",
        "spec-field-bounds",
        "s.sh",
        S + '-sc \'{"model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 8, "fly_entropy_threshold": -0.1}\'',
        {"error": "fly_entropy_threshold must be >= 0"},
    ),
    (
        "zero-window-standard",
        "spec-field-bounds",
        "s.sh",
        S + '-sc \'{"model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 8, "fly_window_size": 0}\'',
        {"error": "fly_window_size must be >= 1"},
    ),
    (
        "suffix-default-k",
        "spec-k-default",
        "s.sh",
        S + '-sc \'{"method": "suffix"}\'',
        {"method": "suffix", "num_speculative_tokens": 24},
    ),
    ("no-drafter", "spec-model-needed", "s.sh", S + "--spec-tokens 4", {"error": "without speculative model"}),
    (
        "fly-default-window",
        "fly-rules",
        "s.sh",
        S + '-sc \'{"model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 8, "rejection_sample_method": "fly"}\'',
        {"rejection_sample_method": "fly", "fly_window_size": 6},
    ),
    ("target-only", "serve-model", "s.sh", S + "--max-num-seqs 128", TARGET),
    # issue 35 item 7: nargs="+" takes both names, so the model stays the positional
    ("served-model-names", "cli-nargs", "s.sh", S + f"--served-model-name a b -sc '{FLY}'", FLY_W2),
    (
        "list-option-swallows-the-model",
        "cli-nargs",
        "s.sh",
        f"vllm serve --served-model-name a b Qwen/Qwen3-8B -sc '{FLY}'",
        {"error": "no vLLM serving command found"},
    ),
    # issue 35 item 4: vLLM does not start with a backend that is not an AttentionBackendEnum member
    (
        "attention-backend-unknown",
        "cli-attention-backend",
        "s.sh",
        S + "--attention-backend B12X_MLA_SPARSE",
        {"error": "AttentionBackendEnum"},
    ),
    ("attention-backend-member", "cli-attention-backend", "s.sh", S + "--attention-backend flashinfer", TARGET),
    # issue 35 item 5: inside a container vLLM opens --config there, not next to the script
    (
        "config-in-container-through-a-mount",
        "container-config-path",
        "s.sh",
        "docker run --gpus all -v ./configs/fly.yaml:/app/serve.yaml -w /app vllm/vllm-openai:v0.33.0 "
        "--model Qwen/Qwen3-8B --config serve.yaml",
        {"rejection_sample_method": "fly", "fly_window_size": 2},
        {"serve.yaml": "model: Qwen/Qwen3-8B\n", "configs/fly.yaml": FLY_CFG},
    ),
    (
        "config-in-container-no-workdir",
        "container-config-path",
        "s.sh",
        "docker run -v ./configs/fly.yaml:/app/serve.yaml vllm/vllm-openai:v0.33.0 "
        "--model Qwen/Qwen3-8B --config serve.yaml",
        {"error": "working directory"},
        {"serve.yaml": "model: Qwen/Qwen3-8B\n", "configs/fly.yaml": FLY_CFG},
    ),
    (
        "config-in-container-unmounted",
        "container-config-path",
        "s.sh",
        "docker run -v hf:/root/.cache vllm/vllm-openai:v0.33.0 --model Qwen/Qwen3-8B --config /app/serve.yaml",
        {"error": "in no mount"},
        {"serve.yaml": "model: Qwen/Qwen3-8B\n"},
    ),
    (
        "parallel",
        "cli-parallel",
        "s.sh",
        S + f"-tp 2 --distributed_executor_backend ray -sc '{FLY}'",
        {**FLY_W2, "options": {"tensor_parallel_size": 2, "distributed_executor_backend": "ray"}},
    ),
]


def resolve(path, release="0.33"):
    """What qualgate says vLLM ``release`` runs: the resolved speculative config (or the error)."""
    cfg = read_serving_config(path)
    if not cfg.speculative:
        return cfg, None
    norm = normalise_speculative(cfg.speculative, release=release)
    if norm["method"] in SPECULATIVE_METHODS:
        return cfg, resolve_speculative(norm, allow_unknown=True)
    return cfg, norm


def write(tmp_path, name, text, extra):
    for fname, ftext in (extra or {}).items():
        (tmp_path / fname).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / fname).write_text(ftext)
    p = tmp_path / name
    p.write_text(text)
    return p


def assert_resolves(path, expect, why, release="0.33"):
    if "error" in expect:
        with pytest.raises((DataError, ValueError)) as e:
            resolve(path, release)
        assert expect["error"] in str(e.value), f"{why}: {e.value}"
        return
    cfg, spec = resolve(path, release)
    for key, value in expect.items():
        if key == "speculative":
            assert spec is value, why
        elif key == "model":
            assert cfg.model == value, why
        elif key == "options":
            assert {k: cfg.options.get(k) for k in value} == value, why
        elif key != "check":
            assert spec is not None and spec.get(key) == value, f"{why}: {key} in {spec}"


def _method_from_config_json(path) -> bool:
    raw = {k.replace("-", "_"): v for k, v in (read_serving_config(path).speculative or {}).items()}
    return raw.get("method") is None and normalise_speculative(raw)["method"] == "draft_model"


def test_the_corpus_covers_at_least_40_spellings_and_every_cli_rule():
    assert len(CASES) >= 40
    assert {c[1] for c in CASES} >= {r.id for r in TABLE if r.id.startswith(("cli-", "serve-", "api-"))}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_spelling_resolves_as_vllm_resolves_it(tmp_path, case):
    name, rule_id, fname, text, expect, *extra = case
    path = write(tmp_path, fname, text, extra[0] if extra else None)
    assert_resolves(path, expect, f"{name}, decided by {cite(rule_id)}")


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_check_refuses_what_it_cannot_resolve_and_every_lossy_spelling(tmp_path, case):
    name, rule_id, fname, text, expect, *extra = case
    path = write(tmp_path, fname, text, extra[0] if extra else None)
    r = CliRunner().invoke(cli, ["check", "--vllm-version", "0.33.0", str(path)])
    want = expect.get("check") or (
        3 if "error" in expect else 1 if expect.get("rejection_sample_method") in LOSSY_METHODS else 0
    )
    if want == 1 and _method_from_config_json(path):
        # no method and a drafter whose name decides nothing: vLLM reads its config.json
        # (rule spec-drafter-config), so check refuses until the model_type is stated
        assert r.exit_code == 3 and "--drafter-model-type" in r.stderr, f"{name}: {r.output}"
        r = CliRunner().invoke(cli, ["check", "--vllm-version", "0.33.0", "--drafter-model-type", "qwen3", str(path)])
    assert r.exit_code == want, f"{name} ({cite(rule_id)}): {r.output}"
    if want == 1:
        assert "refused (fly, lossy" in r.output


@pytest.mark.parametrize("name", ["sc-alias", "hyphen-keys", "spec-flag-with-json", "dotted-sc"])
def test_lint_flags_the_bypasses(tmp_path, name):
    (case,) = [c for c in CASES if c[0] == name]
    path = write(tmp_path, case[2], case[3], None)
    r = CliRunner().invoke(cli, ["lint", str(path)])
    assert r.exit_code == 1 and "lossy-verification" in r.output


def test_lint_refuses_an_abbreviated_option_as_a_data_error(tmp_path):
    (case,) = [c for c in CASES if c[0] == "abbreviated-option"]
    path = write(tmp_path, case[2], case[3], None)
    r = CliRunner().invoke(cli, ["lint", str(path)])
    assert r.exit_code == 3 and "prefix" in r.stderr


@pytest.mark.parametrize(
    "row, release",
    [(r, release) for r in TABLE if r.example for release in r.cites],
    ids=lambda v: v if isinstance(v, str) else v.id,
)
def test_every_table_example_resolves_as_the_table_says_in_each_release_of_its_row(tmp_path, row, release):
    path = write(tmp_path, "s.sh", row.example, None)
    expect = dict(row.expect)
    if "fly" in row.example and "fly-rules" not in rules_of(release):  # 0.32: no FLy, refused by name
        expect = {"error": "fly"}
    assert_resolves(path, expect, f"{row.id} ({cite(row.id, release)})", release)


def test_rule_lookup_names_an_unknown_id():
    with pytest.raises(KeyError):
        rule("no-such-rule")


@pytest.mark.parametrize("case", [c for c in CASES if "error" in c[4]], ids=lambda c: c[0])
def test_lint_never_reports_a_refused_spelling_as_clean(tmp_path, case):
    # a spelling qualgate cannot read exits 3 naming it; one vLLM refuses is a vllm-rejects error
    name, rule_id, fname, text, expect, *extra = case
    path = write(tmp_path, fname, text, extra[0] if extra else None)
    r = CliRunner().invoke(cli, ["lint", "--fail-on", "error", str(path)])
    if r.exit_code == 3:
        assert expect["error"] in r.stderr, name
    else:
        assert r.exit_code == 1 and "[vllm-rejects]" in r.stdout, f"{name}: {r.output}"
