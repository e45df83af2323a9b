"""Serving configs are read from YAML, JSON, serve command lines and args files, with one id."""

from pathlib import Path

import pytest

from qualgate.ci import read_serving_config
from qualgate.config.decoding import config_id, load_config
from qualgate.errors import DataError

DATA = Path(__file__).parent / "data"

FLY_W2 = {
    "method": "draft_model",
    "model": "Qwen/Qwen3-0.6B",
    "num_speculative_tokens": 8,
    "rejection_sample_method": "fly",
    "fly_window_size": 2,
}


@pytest.mark.parametrize(
    "name, fmt",
    [
        ("fly-w2.yaml", "serving-config"),
        ("fly-w2.docker.sh", "command-line"),
        ("fly-w2.api_server.sh", "command-line"),
        ("with-config-file.serve.sh", "command-line"),
    ],
)
def test_every_format_of_the_same_deployment_has_the_harness_id(name, fmt):
    cfg = read_serving_config(DATA / name)
    assert cfg.format == fmt
    assert cfg.model == "Qwen/Qwen3-8B"
    assert cfg.config_id() == config_id("Qwen/Qwen3-8B", FLY_W2, dtype="bfloat16")


def test_a_decoding_config_has_the_id_the_harness_stores():
    path = DATA / "block-greedy.decoding.yaml"
    cfg = read_serving_config(path)
    assert cfg.format == "decoding-config"
    assert cfg.config_id() == load_config(path).config_id


def test_dotted_speculative_options_build_the_config():
    cfg = read_serving_config(DATA / "eagle3-standard.serve.sh")
    assert cfg.speculative == {
        "method": "eagle3",
        "model": "RedHatAI/Qwen3-8B-speculator.eagle3",
        "num_speculative_tokens": 3,
    }
    assert cfg.options == {"dtype": "bfloat16"}


def test_an_args_file_is_read_as_serve_arguments():
    cfg = read_serving_config(DATA / "fly-window-too-big.args")
    assert (cfg.format, cfg.model) == ("args-file", "Qwen/Qwen3-8B")
    assert cfg.speculative["fly_window_size"] == 4


def test_keys_of_a_multiline_json_value_get_their_own_lines(tmp_path):
    p = tmp_path / "serve.sh"
    p.write_text('vllm serve m \\\n  --speculative-config \'{"model": "d",\n    "num_speculative_tokens": 4}\'\n')
    cfg = read_serving_config(p)
    assert cfg.line_of("speculative_config.model") == 2
    assert cfg.line_of("speculative_config.num_speculative_tokens") == 3


def test_yaml_keys_have_their_lines():
    cfg = read_serving_config(DATA / "fly-w2.yaml")
    assert cfg.line_of("speculative_config.fly_window_size") == 10
    assert cfg.line_of("model") == 2


def test_invalid_yaml_names_file_and_line():
    with pytest.raises(DataError) as e:
        read_serving_config(DATA / "broken.yaml")
    assert e.value.line == 4 and "broken.yaml:4" in str(e.value)


def test_invalid_json_in_the_command_line_names_the_option():
    with pytest.raises(DataError) as e:
        read_serving_config(DATA / "bad-json.serve.sh")
    assert e.value.field == "--speculative-config" and e.value.line == 1


def test_two_serve_commands_in_one_file_are_refused(tmp_path):
    p = tmp_path / "two.sh"
    p.write_text("vllm serve a --port 1\nvllm serve b --port 2\n")
    with pytest.raises(DataError, match="2 vllm serve commands .lines 1, 2."):
        read_serving_config(p)


def test_an_unterminated_quote_is_a_data_error(tmp_path):
    p = tmp_path / "q.sh"
    p.write_text('vllm serve m --speculative-config \'{"model": "d"}\n')
    with pytest.raises(DataError, match="unterminated single quote"):
        read_serving_config(p)


def test_a_missing_file_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="cannot read"):
        read_serving_config(tmp_path / "absent.yaml")


def test_a_config_without_a_model_has_no_id(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("speculative_config: {model: d, num_speculative_tokens: 4}\n")
    with pytest.raises(DataError, match="names no target model"):
        read_serving_config(p).config_id()
