"""The toy engine of the harness tests (``tests/toy_engine.py``): the backend contract, its
seeded rules, and the refusals it shares with the reference engine (checked against the
reference engine itself where torch is installed)."""

from __future__ import annotations

import pytest

from qualgate.backends import BACKENDS, Request, open_backend
from qualgate.config.decoding import parse_config
from qualgate.demo.task import extract_answer, generate, messages

from toy_engine import RULES, SAMPLING_KEYS, ToyBackend, prompt_length

SPEC = {"model": "toy/drafter", "num_speculative_tokens": 3}
FLY0 = {**SPEC, "rejection_sample_method": "fly", "fly_window_size": 1, "fly_entropy_threshold": 0.0}


def toy(speculative=None, temperature=1.0, **options):
    doc = {"engine": "toy", "model": "toy/target", "sampling": {"temperature": temperature, "max_tokens": 12}}
    doc["name"], doc["engine_options"] = "c", {"device": "cpu", **options}
    if speculative:
        doc["speculative"] = speculative
    return open_backend(parse_config(doc))


def requests(n, *, temperature=1.0, max_tokens=16):
    rows = generate(n=n, seed=0, split="test")
    return [
        Request(messages(r["question"]), {"temperature": temperature, "max_tokens": max_tokens, "seed": i})
        for i, r in enumerate(rows)
    ], [r["answer"] for r in rows]


def accuracy(backend, reqs, gold):
    gens = backend.generate(reqs)
    return sum(g.text.endswith(f"The answer is {a}.") for g, a in zip(gens, gold)) / len(gold)


def test_the_toy_is_registered_and_opened_from_a_config():
    assert BACKENDS["toy"] == "toy_engine:ToyBackend"
    with toy() as b:
        assert isinstance(b, ToyBackend) and b.batch_size == 256 and b.info()["engine"] == "toy"


def test_it_answers_the_question_in_the_prompt_and_the_answer_is_gradeable():
    reqs, gold = requests(200)
    with toy() as b:
        gens = b.generate(reqs)
    right = [g.text.endswith(f"The answer is {a}.") for g, a in zip(gens, gold)]
    assert abs(sum(right) / len(right) - RULES["p_correct"]) < 0.1
    # a wrong answer is a number too (an incorrect answer, not a missing one)
    assert not all(right) and all(extract_answer(g.text) is not None for g in gens)


def test_it_is_deterministic_per_request_whatever_shares_its_batch():
    reqs, _ = requests(12)
    with toy(SPEC) as b:
        together = b.generate(reqs)
        alone = [b.generate([r])[0] for r in reversed(reqs)][::-1]
    strip = lambda g: {**g.to_dict(), "latency_s": None}  # noqa: E731
    assert [strip(g) for g in together] == [strip(g) for g in alone]


def test_max_tokens_cuts_the_output_with_finish_reason_length():
    reqs, _ = requests(5, max_tokens=3)
    with toy() as b:
        gens = b.generate(reqs)
    assert all(g.output_tokens == len(g.text.split()) == 3 and g.finish_reason == "length" for g in gens)
    reqs, _ = requests(5, max_tokens=16)
    with toy() as b:
        assert all(g.finish_reason == "stop" and g.output_tokens < 16 for g in b.generate(reqs))


def test_speculative_counts_are_set_for_speculative_configs_only():
    reqs, _ = requests(20)
    with toy() as t, toy(SPEC) as s, toy(FLY0) as f:
        target, standard, fly = t.generate(reqs), s.generate(reqs), f.generate(reqs)
    assert all(g.spec_steps is g.draft_tokens is g.accepted_tokens is g.deferred_tokens is None for g in target)
    for g in standard + fly:
        assert g.draft_tokens == 3 * g.spec_steps and 0 <= g.accepted_tokens <= g.draft_tokens
        assert g.output_tokens == g.spec_steps + g.accepted_tokens  # each step: accepted + one
    assert all(g.deferred_tokens == 0 for g in standard) and sum(g.deferred_tokens for g in fly) > 0


def test_standard_decoding_is_the_target_when_greedy_or_coupled_and_as_accurate_when_not():
    reqs, gold = requests(300)
    greedy, _ = requests(30, temperature=0.0)
    with toy() as t, toy(SPEC) as s, toy(SPEC, coupled=True) as c:
        assert [g.text for g in t.generate(greedy)] == [g.text for g in s.generate(greedy)]
        assert [g.text for g in t.generate(reqs)] == [g.text for g in c.generate(reqs)]
        assert [g.text for g in t.generate(reqs)] != [g.text for g in s.generate(reqs)]
        assert abs(accuracy(t, reqs, gold) - accuracy(s, reqs, gold)) < 0.1


def test_fly_at_threshold_zero_loses_answers_and_a_high_threshold_almost_none():
    reqs, gold = requests(300)
    high = {**FLY0, "fly_entropy_threshold": 0.6, "fly_window_size": 2}
    with toy(coupled=True) as t, toy(FLY0, coupled=True) as f0, toy(high, coupled=True) as f6:
        base, lossy, mild = accuracy(t, reqs, gold), accuracy(f0, reqs, gold), accuracy(f6, reqs, gold)
        assert f0.info()["warnings"] and not t.info()["warnings"]
    assert base - lossy > 0.1 and base - mild < 0.02


def test_a_device_it_does_not_have_is_refused_when_it_opens():
    with pytest.raises(RuntimeError, match="only a CPU"):
        toy(device="cuda")


def test_a_prompt_longer_than_its_positions_fails_that_request_alone():
    reqs, _ = requests(3)
    long = Request([{"role": "user", "content": "What is 1 + 1? " + "x" * 250}], {"max_tokens": 8, "seed": 0})
    assert prompt_length(long.messages) + 8 > RULES["max_positions"]
    with toy() as b:
        gens = b.generate([reqs[0], long, reqs[1]])
    assert gens[0].text and gens[2].text
    assert gens[1].text is None and "max_position_embeddings (256)" in gens[1].error


BAD_SAMPLING = [
    {"max_tokens": 8, "seed": 0, "presence_penalty": 0.5},
    {"seed": 0},
    {"max_tokens": 0, "seed": 0},
    {"max_tokens": 8, "seed": 0, "n": 2},
    {"max_tokens": 8, "seed": 0, "temperature": -1.0},
]


@pytest.mark.parametrize("sampling", BAD_SAMPLING)
def test_the_toy_refuses_a_bad_sampling_field_for_that_request(sampling):
    with toy() as b:
        (g,) = b.generate([Request([{"role": "user", "content": "What is 1 + 2?"}], sampling)])
    assert g.text is None and g.error.startswith("ValueError: ") and "sampling" in g.error


@pytest.mark.slow  # (imports torch)
def test_the_toy_accepts_the_sampling_fields_of_the_reference_engine():
    torch_sampling = pytest.importorskip("qualgate.engines._sampling", reason="the reference extra (torch)")
    assert SAMPLING_KEYS == torch_sampling.SAMPLING_KEYS


@pytest.mark.slow
def test_the_toy_refuses_bad_sampling_with_the_reference_engines_messages(models):
    prompt = [{"role": "user", "content": "What is 1 + 2?"}]
    cfg = {"engine": "reference", "model": str(models / "target"), "sampling": {"max_tokens": 4}, "name": "r"}
    with open_backend(parse_config({**cfg, "engine_options": {"device": "cpu"}})) as ref, toy() as t:
        for sampling in BAD_SAMPLING:
            (want,), (got,) = ref.generate([Request(prompt, sampling)]), t.generate([Request(prompt, sampling)])
            assert want.text is None and got.error == want.error, sampling
