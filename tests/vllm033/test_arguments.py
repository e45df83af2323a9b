"""The conformance table of vLLM 0.33's arguments (qualgate/vllm033/arguments.py): every
engine and server destination classed, with its citation, and the config id built from it."""

import ast
import os
from pathlib import Path

import pytest

from qualgate.ci import read_serving_config
from qualgate.config.decoding import config_id, load_config
from qualgate.vllm033.arguments import ARGUMENTS, CLASSES, SEPARATE, dest_of

SRC = os.environ.get("VLLM033_SRC")
DATA = Path(__file__).parents[1] / "ci" / "data"


def _add_argument_calls(tree, first_line=0):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            options = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            dest = next((k.value.value for k in node.keywords if k.arg == "dest"), None)
            if options and node.lineno >= first_line:
                longs = [o for o in options if o.startswith("--")] or options
                yield dest or longs[0].lstrip("-").replace("-", "_"), options, node.lineno


def extract(root: Path) -> dict[str, tuple[set, str]]:
    """Every destination `vllm serve` registers: ``{dest: (option strings, first file:line)}``
    (argparse's dest: ``dest=``, else the first long option with ``-`` read as ``_``)."""
    out: dict[str, tuple[set, str]] = {}

    def add(dest, options, cite):
        if dest in out:
            out[dest][0].update(options)
        else:
            out[dest] = (set(options), cite)

    engine = "engine/arg_utils.py"
    for dest, options, line in _add_argument_calls(ast.parse((root / engine).read_text())):
        add(dest, options, f"{engine}:{line}")
    frontend = "entrypoints/common/cli_args.py"
    tree = ast.parse((root / frontend).read_text())
    for cls in tree.body:  # BaseFrontendArgs.add_cli_args: one option per dataclass field
        if isinstance(cls, ast.ClassDef) and cls.name in ("BaseFrontendArgs", "FrontendArgs"):
            for st in cls.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    add(st.target.id, ["--" + st.target.id.replace("_", "-")], f"{frontend}:{st.lineno}")
    make = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "make_arg_parser")
    for dest, options, line in _add_argument_calls(make):
        add(dest, options, f"{frontend}:{line}")
    return out


@pytest.mark.skipif(not SRC, reason="VLLM033_SRC (the unpacked vllm-0.33.0 wheel) is not set")
def test_the_table_holds_exactly_the_destinations_of_the_wheel_with_their_options_and_lines():
    found = extract(Path(SRC) / "vllm")
    assert len(found) == len(ARGUMENTS) == 321
    assert set(found) == set(ARGUMENTS)
    for dest, (options, cite) in found.items():
        assert set(ARGUMENTS[dest].options) == options, dest
        assert ARGUMENTS[dest].cite == cite, dest


@pytest.mark.skipif(not SRC, reason="VLLM033_SRC (the unpacked vllm-0.33.0 wheel) is not set")
def test_every_citation_points_at_the_line_that_registers_its_option():
    for a in ARGUMENTS.values():
        file, line = a.cite.split(":")
        text = (Path(SRC) / "vllm" / file).read_text().splitlines()[int(line) - 1 : int(line) + 3]
        assert any(o in " ".join(text) for o in (*a.options, a.dest)), a


def test_every_argument_has_one_class_and_every_option_string_maps_to_its_row():
    assert {a.klass for a in ARGUMENTS.values()} <= set(CLASSES)
    for a in ARGUMENTS.values():
        for option in a.options:
            assert dest_of(option) == a.dest
    assert (
        dest_of("--max_model_len") == "max_model_len"
        and dest_of("--no-enable-prefix-caching") == "enable_prefix_caching"
    )
    assert dest_of("--frobnicate") is None


def test_what_changes_outputs_is_classed_so():
    for dest in ("dtype", "quantization", "quantization_config", "hf_overrides", "revision", "tokenizer"):
        assert ARGUMENTS[dest].klass == "output", dest
    for dest in ("host", "port", "max_num_seqs", "tensor_parallel_size", "gpu_memory_utilization", "seed"):
        assert ARGUMENTS[dest].klass == "transport", dest
    assert SEPARATE <= set(ARGUMENTS)


SERVE = "vllm serve Qwen/Qwen3-8B --dtype bfloat16 -sc '{\"method\": \"draft_model\", \"model\": \"Qwen/Qwen3-0.6B\", " \
    "\"num_speculative_tokens\": 8, \"rejection_sample_method\": \"fly\", \"fly_window_size\": 2}'"  # fmt: skip


def served(tmp_path, extra):
    p = tmp_path / "serve.sh"
    p.write_text(f"{SERVE} {extra}\n")
    return read_serving_config(p)


@pytest.mark.parametrize(
    "extra",
    [
        "--quantization fp8",
        "-q fp8",
        '--quantization-config \'{"activation_scheme": "dynamic"}\'',
        "--hf-overrides '{\"num_hidden_layers\": 1}'",
        "--revision 0123abc",
        "--tokenizer Qwen/Qwen3-0.6B",
        "--dtype float16",
        "--max-model-len 4096",
        "--trust-remote-code",
        "--generation-config vllm",
    ],
)
def test_an_output_changing_argument_changes_the_id(tmp_path, extra):
    assert served(tmp_path, extra).config_id() != read_serving_config(DATA / "fly-w2.yaml").config_id()


@pytest.mark.parametrize(
    "extra", ["--port 9000 --host 0.0.0.0", "--max-num-seqs 64 -tp 2", "--seed 3", "--enable-eplb"]
)
def test_a_transport_argument_keeps_the_id(tmp_path, extra):
    assert served(tmp_path, extra).config_id() == read_serving_config(DATA / "fly-w2.yaml").config_id()


def test_the_served_and_the_harness_config_agree_on_output_changing_options(tmp_path):
    harness = tmp_path / "fly.yaml"
    harness.write_text(
        (DATA / "fly-w2.decoding.yaml")
        .read_text()
        .replace("max_num_seqs: 128", "max_num_seqs: 128, max_model_len: 40960")
    )
    assert load_config(harness).config_id == served(tmp_path, "--max-model-len 40960").config_id()
    assert load_config(harness).config_id == read_serving_config(harness).config_id()
    yaml_serve = tmp_path / "serve.yaml"
    yaml_serve.write_text((DATA / "fly-w2.yaml").read_text() + "max-model-len: 40960\n")
    assert read_serving_config(yaml_serve).config_id() == load_config(harness).config_id


def test_a_config_without_the_newer_keys_keeps_its_id():
    # cfg-9c6ae06571fc0aa1: the id of fly-w2 before output-changing arguments entered the id
    assert read_serving_config(DATA / "fly-w2.yaml").config_id() == "cfg-9c6ae06571fc0aa1"
    spec = {"method": "draft_model", "model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 8}
    assert config_id("m", spec, dtype="bfloat16") == config_id("m", spec, dtype="bfloat16", revision=None)


def test_check_refuses_a_lossy_config_with_an_unclassed_or_unregistered_argument(tmp_path):
    from qualgate.ci import check

    for extra, named in (
        ("--enable-elastic-ep", "enable_elastic_ep (engine/arg_utils.py:"),
        ("--frobnicate 3", "--frobnicate (not an option"),
    ):
        res = check(served(tmp_path, extra), vllm_version="0.33.0")
        assert not res.allowed
        assert "has not classed" in res.reasons[0] and named in res.reasons[0], res.reasons
    lossless = tmp_path / "target.sh"
    lossless.write_text("vllm serve Qwen/Qwen3-8B --enable-elastic-ep\n")
    assert check(lossless, vllm_version="0.33.0").allowed  # no evidence needed: only a note
