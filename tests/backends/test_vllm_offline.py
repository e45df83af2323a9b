"""``engine: vllm``: what the backend asks of ``vllm.LLM`` and what it records.

``vllm.LLM`` is replaced by a recording double (``conftest.RecordingLLM``) at that class
boundary only; ``SamplingParams`` is vLLM's own when vLLM is installed.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import sys
import weakref

import pytest
from click.testing import CliRunner

from qualgate.backends import Request, open_backend
from qualgate.backends.vllm import VLLMBackend, llm_kwargs, sampling_params
from qualgate.cli import cli
from qualgate.config.decoding import load_config, load_plan, parse_config
from qualgate.errors import DataError
from qualgate.run.runner import request_seed
from qualgate.vllm033.speculative import FLY_LOSSY_WARNING

from support import REPO

PLAN = REPO / "configs" / "plans" / "qwen3-8b-fly.yaml"
HAVE_VLLM = importlib.util.find_spec("vllm") is not None

# Expected vllm.LLM arguments, written out by hand from the YAML files in configs/qwen3-8b/
# and vLLM 0.33's defaults (fly_window_size unset -> min(6, K - 1) = 6,
# vllm/config/speculative.py; threshold 0.3 and top-k 3, its field defaults).
COMMON = {
    "model": "Qwen/Qwen3-8B",
    "seed": 0,
    "tensor_parallel_size": 1,
    "max_num_seqs": 128,
    "gpu_memory_utilization": 0.90,
    "max_model_len": 40960,
    "per_request_spec_decode_metrics": "summary",
    "disable_log_stats": False,
}
DRAFT = {
    "method": "draft_model",
    "model": "Qwen/Qwen3-0.6B",
    "num_speculative_tokens": 8,
    "draft_sample_method": "greedy",
}
EXPECTED_SPEC = {
    "target": None,
    "standard": {**DRAFT, "rejection_sample_method": "standard"},
    "fly-w2": {
        **DRAFT,
        "rejection_sample_method": "fly",
        "fly_window_size": 2,
        "fly_entropy_threshold": 0.3,
        "fly_entropy_top_k": 3,
    },
    "fly-default": {
        **DRAFT,
        "rejection_sample_method": "fly",
        "fly_window_size": 6,
        "fly_entropy_threshold": 0.3,
        "fly_entropy_top_k": 3,
    },
}
QUESTIONS = ["What is 2 + 3?", "What is 10 * 4 - 7?", "What is 99 - 98?"]


def requests_for(cfg, questions=QUESTIONS, suite="tinyarith"):
    """Requests as the harness builds them: the config's sampling and a per-request seed."""
    return [
        Request(({"role": "user", "content": q},), {**cfg.sampling, "seed": request_seed(suite, str(i), 0, 0)})
        for i, q in enumerate(questions)
    ]


def small_config(**spec):
    return parse_config(
        {
            "name": "x",
            "engine": "vllm",
            "model": "Qwen/Qwen3-8B",
            "speculative": spec or None,
            "sampling": {"temperature": 0.0, "max_tokens": 64},
            "engine_options": {"max_num_seqs": 256, "max_num_batched_tokens": 2048},
        }
    )


@pytest.mark.parametrize("name", list(EXPECTED_SPEC))
@pytest.mark.slow
def test_llm_is_built_with_the_exact_arguments_of_each_example_config(fake_llm, name):
    cfg = load_plan(PLAN).configs[name]
    with open_backend(cfg) as backend:
        assert isinstance(backend, VLLMBackend)
    (llm,) = fake_llm.instances
    expected = {**COMMON, "speculative_config": EXPECTED_SPEC[name]}
    if EXPECTED_SPEC[name] is None:  # vLLM refuses per-request metrics without speculation
        del expected["per_request_spec_decode_metrics"]
    assert llm.kwargs == expected


def test_the_target_config_carries_no_per_request_metrics_option_and_vllm_refuses_one(fake_llm):
    # vllm/config/vllm.py:1734-1741 (rule per-request-metrics)
    assert "per_request_spec_decode_metrics" not in llm_kwargs(load_plan(PLAN).configs["target"])
    with pytest.raises(ValueError, match="requires speculative decoding to be enabled"):
        fake_llm(model="Qwen/Qwen3-8B", speculative_config=None, per_request_spec_decode_metrics="summary")


@pytest.mark.slow
def test_a_validation_error_at_run_time_is_an_error_record_not_a_traceback(fake_llm):
    # SamplingParams raises VLLMValidationError, a VLLMClientError and not a ValueError
    # (vllm/exceptions.py:10-28); a request that skipped the config check must not escape
    cfg = small_config()
    good, bad = requests_for(cfg, QUESTIONS[:2])
    bad = Request(bad.messages, {**bad.sampling, "temperature": 3.0})
    with open_backend(cfg) as backend:
        gens = backend.generate([good, bad])
    assert gens[0].error is None and gens[0].text == "#### 5"
    assert gens[1].text is None and "VLLMValidationError" in gens[1].error
    assert "temperature" in gens[1].error
    assert not issubclass(sys.modules["vllm.exceptions"].VLLMValidationError, ValueError)


@pytest.mark.parametrize(
    "key, value",
    [
        ("temperature", 2.5),
        ("temperature", float("nan")),
        ("min_p", 1.5),
        ("presence_penalty", -3),
        ("frequency_penalty", 2.1),
        ("repetition_penalty", 0),
        ("top_p", 0),
    ],
)
def test_a_sampling_value_vllm_refuses_is_a_config_error_before_any_engine(fake_llm, tmp_path, tiny_suite, key, value):
    # vllm/sampling_params.py:634-702 (rule sampling-ranges)
    cfg = json.loads(
        json.dumps(
            {"name": "hot", "engine": "vllm", "model": "Qwen/Qwen3-8B", "sampling": {"max_tokens": 64, key: value}}
        )
    )
    (tmp_path / "hot.yaml").write_text(json.dumps(cfg).replace("NaN", ".nan"))
    with pytest.raises(DataError, match=f"sampling.{key}"):
        load_config(tmp_path / "hot.yaml")
    plan = {
        "name": "p",
        "suites": [{"suite": "tiny.yaml"}],
        "configs": {"hot": "hot.yaml", "base": str(REPO / "configs" / "qwen3-8b" / "target.yaml")},
        "baseline": "base",
    }
    (tmp_path / "plan.yaml").write_text(json.dumps(plan))
    r = CliRunner().invoke(cli, ["run", str(tmp_path / "plan.yaml"), "--out", str(tmp_path / "out"), "-q"])
    assert r.exit_code == 3 and f"sampling.{key}" in r.stderr
    assert fake_llm.instances == []


@pytest.mark.slow
def test_parallel_options_pass_through_under_vllms_names(fake_llm):
    cfg = parse_config(
        {
            "name": "tp",
            "engine": "vllm",
            "model": "Qwen/Qwen3-8B",
            "sampling": {"max_tokens": 64},
            "engine_options": {"tensor_parallel_size": 4, "distributed_executor_backend": "ray"},
        }
    )
    with open_backend(cfg):
        pass
    (llm,) = fake_llm.instances
    assert (llm.kwargs["tensor_parallel_size"], llm.kwargs["distributed_executor_backend"]) == (4, "ray")
    assert "data_parallel_size" not in llm.kwargs


@pytest.mark.parametrize(
    "options, field",
    [
        ({"data_parallel_size": 2}, "data_parallel_size"),  # vllm/entrypoints/llm.py:280-293
        ({"distributed_executor_backend": "slurm"}, "distributed_executor_backend"),
        ({"tensor_parallel_size": 0}, "tensor_parallel_size"),
    ],
)
def test_parallel_options_vllm_refuses_are_config_errors(options, field):
    with pytest.raises(DataError, match=f"engine_options.{field}"):
        parse_config(
            {"name": "x", "engine": "vllm", "model": "m", "sampling": {"max_tokens": 8}, "engine_options": options}
        )


@pytest.mark.slow
def test_data_parallel_with_the_external_launcher_passes_through(fake_llm):
    cfg = parse_config(
        {
            "name": "dp",
            "engine": "vllm",
            "model": "Qwen/Qwen3-8B",
            "sampling": {"max_tokens": 64},
            "engine_options": {"data_parallel_size": 2, "distributed_executor_backend": "external_launcher"},
        }
    )
    with open_backend(cfg):
        pass
    assert fake_llm.instances[0].kwargs["data_parallel_size"] == 2


def test_every_config_file_in_configs_is_covered():
    files = sorted(p.stem for p in (REPO / "configs" / "qwen3-8b").glob("*.yaml"))
    assert files == sorted(EXPECTED_SPEC)
    for stem in files:
        cfg = load_config(REPO / "configs" / "qwen3-8b" / f"{stem}.yaml")
        assert llm_kwargs(cfg)["speculative_config"] == EXPECTED_SPEC[stem]


@pytest.mark.parametrize("name", list(EXPECTED_SPEC))
@pytest.mark.slow
def test_one_sampling_params_per_request_with_its_seed_and_the_config_sampling(fake_llm, name):
    cfg = load_plan(PLAN).configs[name]
    reqs = requests_for(cfg)
    with open_backend(cfg) as backend:
        gens = backend.generate(reqs)
    (call,) = fake_llm.instances[0].chat_calls
    assert call["chat_template_kwargs"] == {"enable_thinking": True}
    assert call["use_tqdm"] is False
    assert call["messages"] == [[{"role": "user", "content": q}] for q in QUESTIONS]
    assert len(call["params"]) == len(reqs)
    for p, r in zip(call["params"], reqs):
        assert p.seed == r.sampling["seed"]
        assert (p.temperature, p.top_p, p.top_k, p.max_tokens) == (0.6, 0.95, 20, 32768)
    assert len({p.seed for p in call["params"]}) == len(reqs)
    assert [g.text for g in gens] == ["#### 5", "#### 33", "#### 1"]


@pytest.mark.slow
def test_a_request_without_max_tokens_fails_alone_and_never_reaches_the_engine(fake_llm):
    cfg = small_config()
    good, bad = requests_for(cfg, QUESTIONS[:2])
    bad = Request(bad.messages, {k: v for k, v in bad.sampling.items() if k != "max_tokens"})
    with open_backend(cfg) as backend:
        gens = backend.generate([good, bad])
    assert gens[0].text == "#### 5" and gens[0].error is None
    assert gens[1].text is None and "max_tokens" in gens[1].error
    (call,) = fake_llm.instances[0].chat_calls
    assert [p.max_tokens for p in call["params"]] == [64]


@pytest.mark.slow
def test_a_request_the_engine_refuses_fails_alone(fake_llm):
    cfg = small_config()
    reqs = requests_for(cfg, ["What is 1 + 1?", "REFUSE: What is 2 + 2?", "What is 3 + 3?"])
    with open_backend(cfg) as backend:
        gens = backend.generate(reqs)
    assert [g.text for g in gens] == ["#### 2", None, "#### 6"]
    assert gens[1].error.startswith("ValueError: The decoder prompt")


@pytest.mark.slow
def test_per_request_acceptance_comes_from_spec_decode_metrics(fake_llm):
    cfg = load_plan(PLAN).configs["fly-w2"]
    reqs = requests_for(cfg)
    with open_backend(cfg) as backend:
        gens = backend.generate(reqs)
    for g, r in zip(gens, reqs):
        seed = r.sampling["seed"]
        per_step = [(seed >> (3 * j)) % 9 for j in range(4)]  # conftest.accepted_per_step, K=8
        assert (g.spec_steps, g.draft_tokens, g.accepted_tokens) == (4, 32, sum(per_step))
        assert g.deferred_tokens is None  # vLLM 0.33 does not report FLy deferrals
        assert g.output_tokens == 3 + seed % 5


@pytest.mark.slow
def test_target_only_generations_have_no_acceptance(fake_llm):
    cfg = load_plan(PLAN).configs["target"]
    with open_backend(cfg) as backend:
        gens = backend.generate(requests_for(cfg))
        assert backend.info()["spec_decode"] is None
    assert all(g.spec_steps is None and g.accepted_tokens is None for g in gens)


@pytest.mark.slow
def test_info_carries_the_aggregate_counters_of_get_metrics(fake_llm):
    cfg = load_plan(PLAN).configs["standard"]
    with open_backend(cfg) as backend:
        info = backend.info()
        gens = backend.generate(requests_for(cfg))
        gens += backend.generate(requests_for(cfg, QUESTIONS[:1], suite="other"))
        assert backend.info() is info  # updated in place: the harness rewrites it per batch
    sd = info["spec_decode"]
    accepted = sum(g.accepted_tokens for g in gens)
    assert sd["num_drafts"] == sum(g.spec_steps for g in gens) == 16
    assert sd["num_draft_tokens"] == 16 * 8
    assert sd["num_accepted_tokens"] == accepted
    assert sum(sd["num_accepted_tokens_per_pos"]) == accepted
    assert sd["mean_acceptance_length"] == pytest.approx(1 + accepted / 16)
    assert sd["draft_acceptance_rate"] == pytest.approx(accepted / 128)


@pytest.mark.slow
def test_fly_warning_is_captured_into_info(fake_llm):
    with open_backend(load_plan(PLAN).configs["fly-w2"]) as backend:
        info = backend.info()
    assert info["fly_warning"] == {"message": FLY_LOSSY_WARNING, "logged": "by this engine"}
    assert FLY_LOSSY_WARNING in info["engine_warnings"]


@pytest.mark.slow
def test_a_fly_warning_logged_once_by_an_earlier_engine_is_still_recorded(fake_llm):
    plan = load_plan(PLAN)
    with open_backend(plan.configs["fly-w2"]):
        pass
    with open_backend(plan.configs["fly-default"]) as backend:  # vLLM stays silent now
        info = backend.info()
    assert FLY_LOSSY_WARNING not in info["engine_warnings"]
    assert info["fly_warning"] == {
        "message": FLY_LOSSY_WARNING,
        "logged": "earlier in this process (vLLM logs it once)",
    }


@pytest.mark.slow
def test_lossless_configs_record_no_fly_warning(fake_llm):
    with open_backend(load_plan(PLAN).configs["standard"]) as backend:
        assert backend.info()["fly_warning"] is None


@pytest.mark.slow
def test_scheduler_override_is_captured_into_info(fake_llm):
    cfg = small_config(method="dflash", model="z-lab/Qwen3-8B-DFlash", num_speculative_tokens=15)
    with open_backend(cfg) as backend:
        info = backend.info()
    (ov,) = info["scheduler_overrides"]
    assert (ov["from"], ov["to"]) == (256, 2048 // 16)
    assert "Overriding max_num_active_seqs from 256 to 128" in ov["message"]


@pytest.mark.slow
def test_batch_invariant_sets_the_environment_for_the_engine_and_restores_it(fake_llm):
    cfg = small_config()
    inv = parse_config(
        {
            "name": "inv",
            "engine": "vllm",
            "model": cfg.model,
            "sampling": cfg.sampling,
            "engine_options": {"batch_invariant": True},
        }
    )
    with open_backend(inv) as backend:
        assert os.environ["VLLM_BATCH_INVARIANT"] == "1"
        info = backend.info()
    assert fake_llm.instances[0].env_batch_invariant == "1"
    assert (info["batch_invariant"], info["VLLM_BATCH_INVARIANT"]) == (True, "1")
    assert "VLLM_BATCH_INVARIANT" not in os.environ
    with open_backend(cfg) as backend:
        assert backend.info()["batch_invariant"] is False
    assert fake_llm.instances[1].env_batch_invariant is None


def test_a_config_vllm_refuses_is_a_data_error_and_leaves_the_environment_alone(fake_llm):
    cfg = parse_config(
        {
            "name": "tight",
            "engine": "vllm",
            "model": "Qwen/Qwen3-8B",
            "speculative": {"model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 8},
            "sampling": {"max_tokens": 64},
            "engine_options": {"max_num_batched_tokens": 8, "batch_invariant": True},
        }
    )
    with pytest.raises(DataError, match="vLLM refused this config: ValueError: VllmConfig does not have enough slots"):
        open_backend(cfg)
    assert "VLLM_BATCH_INVARIANT" not in os.environ


@pytest.mark.slow
def test_close_shuts_the_engine_down_and_drops_it(fake_llm):
    backend = open_backend(small_config())
    llm = fake_llm.instances[0]
    ref = weakref.ref(llm)
    fake_llm.instances.clear()
    del llm
    backend.close()
    gc.collect()
    assert backend.llm is None
    assert ref() is None  # nothing keeps the engine (and its GPU memory) alive
    backend.close()  # a second close is harmless


@pytest.mark.slow
def test_close_calls_the_engine_core_shutdown(fake_llm):
    backend = open_backend(small_config())
    llm = fake_llm.instances[0]
    backend.close()
    assert llm.shutdowns == 1


def test_missing_vllm_is_a_data_error_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ModuleNotFoundError
    with pytest.raises(DataError, match=r"pip install 'qualgate\[vllm\]'"):
        VLLMBackend(small_config())


def test_run_without_vllm_exits_3_with_the_install_hint(monkeypatch, tmp_path, tiny_suite):
    monkeypatch.setitem(sys.modules, "vllm", None)
    plan = _offline_plan(tmp_path)
    r = CliRunner().invoke(cli, ["run", str(plan), "--out", str(tmp_path / "out"), "-q"])
    assert r.exit_code == 3, r.output
    assert "pip install 'qualgate[vllm]'" in r.stderr


def _offline_plan(tmp_path):
    """Two of the example configs over the tiny suite (the ``tiny_suite`` fixture)."""
    configs = {n: str(REPO / "configs" / "qwen3-8b" / f"{n}.yaml") for n in ("target", "fly-w2")}
    plan = {
        "name": "offline",
        "suites": [{"suite": "tiny.yaml"}],
        "seeds": [0, 1],
        "configs": configs,
        "baseline": "target",
        "gate": {"policy": "noninferiority", "margin": 0.3},
    }
    (tmp_path / "plan.yaml").write_text(json.dumps(plan))
    return tmp_path / "plan.yaml"


@pytest.mark.slow
def test_qualgate_run_records_seeds_acceptance_and_engine_facts(fake_llm, tmp_path, tiny_suite):
    out = tmp_path / "out"
    r = CliRunner().invoke(cli, ["run", str(_offline_plan(tmp_path)), "--out", str(out), "-q", "--format", "json"])
    # both configs answer all 6 questions correctly: no discordance, too few questions to
    # bound the loss below the margin, so the gate says INCONCLUSIVE (exit 4)
    assert r.exit_code == 4, r.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["gate"]["verdicts"] == {"fly-w2": "INCONCLUSIVE"}
    target, fly = fake_llm.instances
    assert target.kwargs["speculative_config"] is None
    assert fly.kwargs["speculative_config"] == EXPECTED_SPEC["fly-w2"]
    recs = [json.loads(x) for x in (out / "records" / "fly-w2.jsonl").read_text().splitlines()]
    (call,) = fly.chat_calls
    assert len(recs) == len(call["params"]) == 12  # 6 questions x 2 seeds, one batch
    for rec, p in zip(recs, call["params"]):
        assert p.seed == request_seed("tinyarith", rec["question_id"], rec["seed"], 0)
        assert rec["outcome"] == "correct" and rec["spec_steps"] == 4
    info = manifest["configs"]["fly-w2"]["info"]
    assert info["fly_warning"]["message"] == FLY_LOSSY_WARNING
    assert info["spec_decode"]["num_accepted_tokens"] == sum(x["accepted_tokens"] for x in recs)
    assert info["llm_kwargs"]["per_request_spec_decode_metrics"] == "summary"
    assert manifest["configs"]["target"]["info"]["spec_decode"] is None


@pytest.mark.skipif(
    not HAVE_VLLM,
    reason="vllm is not installed here (the 'vllm' extra needs "
    "a CUDA machine); the recording SamplingParams double was used instead",
)
def test_real_sampling_params_are_built_from_each_example_config():
    from vllm import SamplingParams

    for name, cfg in load_plan(PLAN).configs.items():
        for r in requests_for(cfg):
            p = sampling_params(r)
            assert isinstance(p, SamplingParams), name
            assert (p.seed, p.max_tokens) == (r.sampling["seed"], 32768)
            assert (p.temperature, p.top_p, p.top_k) == (0.6, 0.95, 20)


@pytest.mark.parametrize(
    "missing, field", [("Qwen/Qwen3-8B-typo", "model"), ("Qwen/no-such-drafter", "speculative.model")]
)
def test_a_model_the_hub_does_not_know_is_a_data_error_naming_it(fake_llm, monkeypatch, missing, field):
    # vllm/transformers_utils/config.py:889-923 (rule model-not-found)
    monkeypatch.setattr(fake_llm, "missing_models", {missing})
    target = missing if field == "model" else "Qwen/Qwen3-8B"
    drafter = missing if field != "model" else "Qwen/Qwen3-0.6B"
    cfg = parse_config(
        {
            "name": "typo",
            "engine": "vllm",
            "model": target,
            "speculative": {"model": drafter, "num_speculative_tokens": 3},
            "sampling": {"max_tokens": 64},
        }
    )
    with pytest.raises(DataError, match=f"vLLM cannot load the model '{missing}'") as exc:
        with open_backend(cfg):
            pass
    assert (exc.value.field, exc.value.value) == (field, missing)
    assert "VLLM_BATCH_INVARIANT" not in os.environ
