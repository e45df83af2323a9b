"""The ``vllm-v1`` noise mode: the couplings vLLM 0.33's per-request generator gives.

vLLM draws a seeded request's noise from one ``torch.Generator``, call after call
(docs/engine.md, "Randomness"): standard and FLy verification make the same calls, so with
one seed they emit the same tokens up to FLy's first deferral; target-only decoding makes
other calls after the first token, so at T > 0 its samples are independent of standard's.
500 prompts of the tiny random-weight pair, K = 3, FLy W = 1 at tau = 0.3.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from qualgate.config.decoding import parse_config  # noqa: E402
from qualgate.engines._sampling import process_logits  # noqa: E402
from qualgate.errors import DataError  # noqa: E402

N = 500
GREEDY = {"temperature": 0.0, "max_tokens": 24, "ignore_eos": True}
SAMPLED = {"temperature": 0.9, "top_p": 0.95, "max_tokens": 24, "ignore_eos": True}
STANDARD = {"num_speculative_tokens": 3}
FLY = {"num_speculative_tokens": 3, "rejection_sample_method": "fly", "fly_window_size": 1}


def prompts(n, vocab=32):
    g = torch.Generator().manual_seed(n)
    return [torch.randint(3, vocab, (1 + i % 12,), generator=g).tolist() for i in range(n)]


def seeded(settings):
    return [dict(settings, seed=100 + i) for i in range(N)]


@pytest.fixture(scope="module")
def decoded(engine32):
    """{(settings, mode): Generation} for the 500 prompts in vllm-v1 noise."""
    ps = prompts(N)
    out = {}
    for name, settings in (("greedy", GREEDY), ("sampled", SAMPLED)):
        for mode, spec in (("target", None), ("standard", STANDARD), ("fly", FLY)):
            out[name, mode] = engine32.generate(ps, sampling=seeded(settings), speculative=spec, noise="vllm-v1")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("settings", ["greedy", "sampled"])
def test_standard_and_fly_emit_identical_tokens_up_to_the_first_deferral(decoded, settings):
    std, fly = decoded[settings, "standard"], decoded[settings, "fly"]
    deferred = 0
    for s, f in zip(std, fly):
        k = f.first_deferred_token
        if k is None:  # no deferral: FLy is standard verification, draw for draw
            assert f.metrics.num_deferred_tokens == 0 or len(f.token_ids) <= 1
            assert f.token_ids == s.token_ids
            continue
        deferred += 1
        assert f.token_ids[:k] == s.token_ids[:k]
        # the deferred draft was natively rejected: standard emits another token there
        assert f.token_ids[k] != s.token_ids[k]
    assert deferred > 0.8 * N  # most sequences see a deferral: the check is about them


@pytest.mark.slow
def test_target_only_and_standard_share_only_the_first_draw_when_sampling(decoded, engine32):
    tgt, std = decoded["sampled", "target"], decoded["sampled", "standard"]
    # the first token is generator call 0 in every mode
    assert [o.token_ids[0] for o in tgt] == [o.token_ids[0] for o in std]
    # the second token: target-only's call 1 against standard's acceptance and recovered
    # calls, so the two agree as independent draws from p do, with probability sum p^2
    agree = sum(a.token_ids[1] == b.token_ids[1] for a, b in zip(tgt, std))
    expected = variance = 0.0
    with torch.inference_mode():
        for o in tgt:
            ids = torch.tensor([list(o.prompt_token_ids) + [o.token_ids[0]]], device=engine32.device)
            logits = engine32.target(input_ids=ids).logits[:, -1].float()
            one = torch.ones(1, device=ids.device)
            p = process_logits(logits, 0.9 * one, 0 * one.long(), 0.95 * one)[0]
            q = float((p * p).sum())
            expected, variance = expected + q, variance + q * (1 - q)
    assert abs(agree - expected) <= 4 * math.sqrt(variance)  # (normal approximation, 4 sd)
    assert sum(a.token_ids == b.token_ids for a, b in zip(tgt, std)) <= 0.02 * N


@pytest.mark.slow
def test_target_only_and_standard_emit_the_same_tokens_in_coupled_noise_but_not_in_vllm_v1(engine32, decoded):
    ps = prompts(N)
    tgt = engine32.generate(ps, sampling=seeded(SAMPLED), noise="coupled")
    std = engine32.generate(ps, sampling=seeded(SAMPLED), speculative=STANDARD, noise="coupled")
    assert [o.token_ids for o in tgt] == [o.token_ids for o in std]
    v_tgt, v_std = decoded["sampled", "target"], decoded["sampled", "standard"]
    assert [o.token_ids for o in v_tgt] != [o.token_ids for o in v_std]


@pytest.mark.slow
def test_greedy_decoding_is_the_same_in_every_noise_mode(engine32, decoded):
    ps = prompts(N)[:50]
    for mode, spec in (("target", None), ("fly", FLY)):
        ind = engine32.generate(ps, sampling=seeded(GREEDY)[:50], speculative=spec)
        assert [o.token_ids for o in ind] == [o.token_ids for o in decoded["greedy", mode]][:50]


def test_an_unknown_noise_mode_is_refused_naming_the_modes(engine32):
    with pytest.raises(ValueError, match=r"noise must be one of \['independent', 'coupled', 'vllm-v1', 'vllm-v2'\]"):
        engine32.generate([[3]], sampling=GREEDY, noise="vllm")


def test_coupled_true_contradicting_the_noise_mode_is_refused(engine32):
    with pytest.raises(ValueError, match="coupled: true contradicts noise='vllm-v1'"):
        engine32.generate([[3]], sampling=GREEDY, speculative={**STANDARD, "coupled": True}, noise="vllm-v1")


CONFIG = {"name": "c", "engine": "reference", "model": "m", "sampling": {"max_tokens": 8}}


def test_the_config_reader_takes_engine_options_noise():
    cfg = parse_config({**CONFIG, "engine_options": {"noise": "vllm-v1"}})
    assert cfg.engine_options["noise"] == "vllm-v1"
    # noise changes how the reference engine draws, not what is served
    assert cfg.config_id == parse_config(CONFIG).config_id


@pytest.mark.parametrize("value", ["vllm", "VLLM-V1", True, 1])
def test_the_config_reader_refuses_an_unknown_noise_mode_naming_the_field(value):
    with pytest.raises(DataError, match=r"engine_options\.noise.*must be one of \['independent', 'coupled'"):
        parse_config({**CONFIG, "engine_options": {"noise": value}})


@pytest.mark.parametrize(
    ("options", "expected"),
    [({}, "independent"), ({"coupled": True}, "coupled"), ({"noise": "vllm-v1"}, "vllm-v1")],
)
def test_the_reference_backend_resolves_its_noise_mode(options, expected):
    from qualgate.backends.reference import _noise

    assert _noise(options, bool(options.get("coupled"))) == expected


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"noise": "vllm"}, r"engine_options\.noise must be one of"),
        ({"noise": "vllm-v1", "coupled": True}, r"engine_options\.coupled: true contradicts engine_options\.noise"),
    ],
)
def test_the_reference_backend_refuses_a_bad_or_contradicted_noise_mode(options, match):
    from qualgate.backends.reference import _noise

    with pytest.raises(ValueError, match=match):
        _noise(options, bool(options.get("coupled")))
