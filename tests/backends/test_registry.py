"""The backend interface: registry by engine name, clear errors, per-request failures."""

from __future__ import annotations

import pytest

from qualgate.backends import BACKENDS, Backend, Generation, open_backend, register_backend
from qualgate.config.decoding import parse_config
from qualgate.errors import DataError

CONFIG = {"engine": "reference", "model": "m", "sampling": {"max_tokens": 4}, "name": "x"}


def test_a_registered_backend_is_accepted_in_a_config_file_and_opened(tmp_path, monkeypatch):
    from qualgate.backends import Backend, Generation, register_backend
    from qualgate.config.decoding import load_config

    class Echo(Backend):
        def generate(self, requests):
            return [Generation(text=str(r.prompt)) for r in requests]

        def info(self):
            return {"engine": "echo"}

    path = tmp_path / "echo.yaml"
    path.write_text("engine: echo\nmodel: m\nsampling: {max_tokens: 4}\n")
    with pytest.raises(DataError, match="registered engine"):
        load_config(path)
    register_backend("echo", Echo)
    try:
        cfg = load_config(path)
        assert cfg.engine == "echo" and isinstance(open_backend(cfg), Echo)
    finally:
        BACKENDS.pop("echo")


def test_an_unregistered_engine_is_a_data_error(monkeypatch):
    cfg = parse_config(CONFIG)
    monkeypatch.delitem(BACKENDS, "reference")
    with pytest.raises(DataError, match="no backend for this engine"):
        open_backend(cfg)


def test_a_missing_package_is_a_data_error_naming_it(monkeypatch):
    monkeypatch.setitem(BACKENDS, "reference", "not_an_installed_package.sub:Backend")
    with pytest.raises(DataError) as e:
        open_backend(parse_config(CONFIG))
    assert "not_an_installed_package" in str(e.value) and "qualgate[reference]" in str(e.value)


def test_a_registered_backend_is_constructed_with_the_config(monkeypatch):
    class Echo(Backend):
        engine = "reference"

        def generate(self, requests):
            return [Generation(text=str(r.sampling["seed"])) for r in requests]

        def info(self):
            return {"engine": "echo"}

    monkeypatch.setitem(BACKENDS, "reference", BACKENDS["reference"])
    register_backend("reference", Echo)
    cfg = parse_config({**CONFIG, "engine_options": {"batch_size": 3}})
    with open_backend(cfg) as b:
        assert b.config is cfg and b.batch_size == 3


def test_a_failed_generation_keeps_the_exception_type_and_message():
    g = Generation.failed(ValueError("prompt too long"))
    assert g.text is None and g.error == "ValueError: prompt too long"


@pytest.mark.slow
def test_the_reference_backend_resolves_model_paths_beside_the_config(tmp_path, models):
    import shutil

    shutil.copytree(models / "target", tmp_path / "weights" / "t")
    (tmp_path / "c.yaml").write_text(
        "engine: reference\nmodel: weights/t\nsampling: {max_tokens: 3}\nengine_options: {device: cpu}\n"
    )
    from qualgate.config.decoding import load_config

    with open_backend(load_config(tmp_path / "c.yaml")) as b:
        info = b.info()
    assert info["target"] == str((tmp_path / "weights" / "t").resolve())
    assert info["device"] == "cpu" and info["versions"]["torch"]


@pytest.mark.parametrize("key", ["coupled", "cuda_graphs", "compile"])
@pytest.mark.parametrize("value", ["false", 0, 1, None])
def test_reference_switches_that_are_not_booleans_are_refused_naming_the_option(tmp_path, models, key, value):
    from qualgate.backends.reference import ReferenceBackend

    cfg = parse_config({**CONFIG, "model": str(models / "target"), "engine_options": {"device": "cpu", key: value}})
    with pytest.raises(ValueError, match=rf"engine_options\.{key} must be true or false, got {value!r}"):
        ReferenceBackend(cfg)


@pytest.mark.slow
def test_the_reference_backend_passes_its_switches_to_the_engine(models):
    cfg = parse_config(
        {
            **CONFIG,
            "model": str(models / "target"),
            "engine_options": {"device": "cpu", "cuda_graphs": False, "compile": False},
        }
    )
    with open_backend(cfg) as b:
        info = b.info()
    assert (info["cuda_graphs"], info["compile"], info["coupled"]) == (False, False, False)


@pytest.mark.slow
def test_the_reference_backend_returns_token_ids_and_top2_margins(models):
    cfg = parse_config({**CONFIG, "model": str(models / "target"), "engine_options": {"device": "cpu"}})
    with open_backend(cfg) as b:
        from qualgate.backends import Request

        (gen,) = b.generate([Request([{"role": "user", "content": "hi"}], {"seed": 1, "max_tokens": 4})])
    assert gen.output_tokens == len(gen.token_ids) == len(gen.top2_margins) > 0
    assert all(type(t) is int for t in gen.token_ids)
    assert all(0 <= m <= 1 and m == round(m, 6) for m in gen.top2_margins)


@pytest.mark.slow  # opens the reference engine on the tiny models
def test_a_request_with_sampling_the_reference_engine_refuses_fails_alone_and_the_rest_stay_one_batch(tmp_path, models):
    from qualgate.backends import Request
    from qualgate.config.decoding import load_config

    (tmp_path / "c.yaml").write_text(
        f"engine: reference\nmodel: {models / 'target'}\nsampling: {{max_tokens: 3}}\nengine_options: {{device: cpu}}\n"
    )
    messages = [{"role": "user", "content": "1+2"}]
    sampling = [{"max_tokens": 3, "seed": i} for i in range(4)]
    sampling[2]["presence_penalty"] = 0.5  # a vLLM field the reference engine does not implement
    with open_backend(load_config(tmp_path / "c.yaml")) as b:
        calls = []
        real = b.engine_.generate
        b.engine_.generate = lambda prompts, **kw: calls.append(len(prompts)) or real(prompts, **kw)
        gens = b.generate([Request(messages, s) for s in sampling])
    assert calls == [3]  # one engine call for the three it takes, none request by request
    assert [g.text is None for g in gens] == [False, False, True, False]
    assert "presence_penalty" in gens[2].error
