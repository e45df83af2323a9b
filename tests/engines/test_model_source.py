"""A model is a folder with config.json or a hub id: anything else is a config error (exit 3)
before an engine or the hub client starts (issue 34 item 11)."""

import pytest

from qualgate.config.decoding import check_model_sources, load_config
from qualgate.errors import DataError

CONFIG = """\
engine: reference
model: {model}
sampling: {{temperature: 1.0, max_tokens: 8}}
"""


def config(tmp_path, model):
    p = tmp_path / "c.yaml"
    p.write_text(CONFIG.format(model=model))
    return p


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ("/dev/zero", "is not a directory"),
        ("/etc/passwd", "is not a directory"),
        ("./no-such-model", "does not exist"),
        ("'not a hub id!'", "neither an existing model folder nor a Hugging Face hub id"),
        ("org/../../etc", "neither an existing model folder nor a Hugging Face hub id"),
    ],
)
def test_a_model_that_is_not_a_folder_or_a_hub_id_is_a_config_error(tmp_path, model, says):
    p = config(tmp_path, model)
    with pytest.raises(DataError, match=says) as err:
        check_model_sources(load_config(p))
    assert str(err.value.file) == str(p) and err.value.field == "model" and err.value.line == 2


def test_a_folder_without_config_json_is_refused_and_a_folder_or_hub_id_accepted(tmp_path):
    (tmp_path / "m").mkdir()
    with pytest.raises(DataError, match="has no config.json"):
        check_model_sources(load_config(config(tmp_path, "m")))
    (tmp_path / "m" / "config.json").write_text("{}")
    check_model_sources(load_config(config(tmp_path, "m")))
    check_model_sources(load_config(config(tmp_path, "Qwen/Qwen3-8B")))


def test_a_drafter_path_is_checked_too(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(CONFIG.format(model="Qwen/Qwen3-8B") + "speculative: {model: /dev/zero, num_speculative_tokens: 2}\n")
    with pytest.raises(DataError, match="is not a directory") as err:
        check_model_sources(load_config(p))
    assert err.value.field == "speculative.model"


@pytest.mark.slow
def test_a_run_stops_at_a_bad_model_before_any_engine_starts(tmp_path):
    from click.testing import CliRunner

    from qualgate.cli import cli

    import support

    plan = support.write_plan(tmp_path / "p", configs=("target",))
    cfg = tmp_path / "p" / "target.yaml"
    cfg.write_text(cfg.read_text().replace("engine: toy", "engine: reference").replace("toy/target", "/dev/zero"))
    r = CliRunner().invoke(cli, ["run", str(plan), "--out", str(tmp_path / "out")])
    assert r.exit_code == 3 and "/dev/zero is not a directory" in r.output and str(cfg) in r.output, r.output


@pytest.mark.slow
def test_a_model_that_cannot_be_loaded_is_a_data_error_naming_it(tmp_path):
    pytest.importorskip("transformers")
    import torch

    from qualgate.engines._models import load_model

    (tmp_path / "config.json").write_text("{}")  # a folder transformers cannot read (no model_type)
    with pytest.raises(DataError, match="the target model cannot be loaded") as err:
        load_model(str(tmp_path), torch.device("cpu"), None, "target")
    assert err.value.value == str(tmp_path)
