"""Sampling settings, vLLM's logits processing, and the counter-based noise."""

from __future__ import annotations

import math

import pytest
from scipy import stats as scipy_stats

torch = pytest.importorskip("torch")

from qualgate.engines._sampling import (  # noqa: E402
    STREAM_ACCEPT,
    STREAM_TARGET,
    exponential,
    noise_keys,
    process_logits,
    resolve_sampling,
    sample,
    split_seed,
    uniform,
)

# ----------------------------------------------------------------------- resolve_sampling


def test_max_tokens_is_required_with_a_message_about_vllms_default():
    with pytest.raises(ValueError, match=r"max_tokens.*16"):
        resolve_sampling({"temperature": 0.6})


def test_unknown_sampling_fields_are_rejected_with_the_valid_ones_listed():
    with pytest.raises(ValueError, match=r"unknown sampling field\(s\) \['min_p'\].*temperature"):
        resolve_sampling({"max_tokens": 8, "min_p": 0.1})


@pytest.mark.parametrize(
    "field, value",
    [
        ("max_tokens", 0),
        ("max_tokens", 2.0),
        ("temperature", -0.1),
        ("temperature", math.nan),
        ("top_p", 0.0),
        ("top_p", 1.5),
        ("top_k", -2),
        ("seed", "7"),
        ("stop", [""]),
        ("stop_token_ids", "2"),
        ("ignore_eos", 1),
        ("n", 2),
    ],
)
def test_invalid_sampling_values_name_the_field_and_echo_the_value(field, value):
    with pytest.raises(ValueError, match=field) as info:
        resolve_sampling({"max_tokens": 8, field: value})
    assert repr(value) in str(info.value)


def test_temperature_below_1e_5_is_greedy_and_ignores_top_k_and_top_p():
    p = resolve_sampling({"max_tokens": 8, "temperature": 9e-6, "top_p": 0.5, "top_k": 3})
    assert p.greedy and p.top_p == 1.0 and p.top_k == 0
    assert not resolve_sampling({"max_tokens": 8, "temperature": 1e-5}).greedy


def test_top_k_minus_one_means_disabled_and_a_single_stop_string_is_a_tuple():
    p = resolve_sampling({"max_tokens": 8, "top_k": -1, "stop": "\n\n", "stop_token_ids": [5]})
    assert p.top_k == 0 and p.stop == ("\n\n",) and p.stop_token_ids == (5,)
    assert p.to_dict()["stop"] == ["\n\n"]


# ----------------------------------------------------------------------- process_logits


def _process(logits, temperature=1.0, top_k=0, top_p=1.0):
    x = torch.tensor([logits], dtype=torch.float32)
    return process_logits(x, torch.tensor([temperature]), torch.tensor([top_k]), torch.tensor([top_p]))[0].tolist()


def test_temperature_divides_the_logits():
    got = _process([0.0, 1.0, 2.0], temperature=0.5)
    expected = torch.tensor([0.0, 2.0, 4.0]).softmax(-1).tolist()
    assert got == pytest.approx(expected, abs=1e-7)


def test_top_k_keeps_every_token_tied_with_the_kth_largest_logit():
    got = _process([1.0, 2.0, 2.0, 3.0], top_k=2)
    assert got[0] == 0.0 and all(p > 0 for p in got[1:])


def test_top_p_keeps_the_smallest_most_likely_set_reaching_p():
    logits = [math.log(p) for p in (0.5, 0.3, 0.15, 0.05)]
    assert _process(logits, top_p=0.75) == pytest.approx([0.625, 0.375, 0.0, 0.0], abs=1e-6)


def test_top_p_always_keeps_the_most_likely_token():
    assert _process([0.0, 1.0, 0.5], top_p=1e-3) == pytest.approx([0.0, 1.0, 0.0])


def test_top_p_applies_to_the_top_k_renormalised_distribution():
    logits = [math.log(p) for p in (0.4, 0.3, 0.2, 0.1)]
    # top-3 renormalised: (.444, .333, .222); top-p .75 then drops .222 (vLLM's order)
    assert _process(logits, top_k=3, top_p=0.75) == pytest.approx([4 / 7, 3 / 7, 0, 0], abs=1e-6)
    # top-p alone keeps three tokens
    assert _process(logits, top_p=0.75)[2] > 0


def test_disabled_filters_leave_the_softmax_unchanged():
    logits = torch.randn(3, 11, generator=torch.Generator().manual_seed(0))
    got = process_logits(logits, torch.ones(3), torch.zeros(3, dtype=torch.long), torch.ones(3))
    torch.testing.assert_close(got, logits.softmax(-1))


# ----------------------------------------------------------------------- noise


def _py_mix(x):
    m = 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x21F0AAAD) & m
    x ^= x >> 15
    x = (x * 0x735A2D97) & m
    return x ^ (x >> 15)


def test_noise_keys_match_a_pure_python_transcription_of_the_hash():
    seed, stream, pos, step = 2**40 + 12345, STREAM_ACCEPT, 77, 5
    lo, hi = split_seed(seed)
    k = _py_mix(_py_mix(lo) ^ hi)
    k = _py_mix(k ^ ((stream << 28) | step))
    k = _py_mix(k ^ pos)
    got = noise_keys(torch.tensor([lo]), torch.tensor([hi]), stream, torch.tensor([pos]), step)
    assert got.tolist() == [k]
    u = ((_py_mix(k ^ 0x5BD1E995) >> 8) + 0.5) / 2**24
    assert uniform(got).tolist() == [pytest.approx(u, rel=1e-7)]


def _keys(seeds, positions, stream=STREAM_TARGET, step=0):
    lo, hi = zip(*(split_seed(s) for s in seeds))
    return noise_keys(torch.tensor(lo), torch.tensor(hi), stream, torch.tensor(positions), step)


def test_noise_depends_only_on_its_own_key_not_on_the_batch():
    alone = exponential(_keys([7], [3]), 50)
    batch = exponential(_keys([1, 7, 9], [3, 3, 3]), 50)
    assert torch.equal(alone[0], batch[1])
    assert not torch.equal(batch[0], batch[1])


def test_noise_differs_across_streams_positions_and_steps():
    base = _keys([7], [3])
    for other in (_keys([7], [4]), _keys([7], [3], stream=STREAM_ACCEPT), _keys([7], [3], step=1), _keys([8], [3])):
        assert other.tolist() != base.tolist()


@pytest.mark.slow
def test_uniforms_are_uniform_and_strictly_inside_the_unit_interval():
    keys = _keys(range(20000), [0] * 20000)
    u = uniform(keys)
    assert float(u.min()) > 0 and float(u.max()) < 1
    assert scipy_stats.kstest(u.numpy(), "uniform").pvalue > 1e-3  # fixed keys: deterministic


def test_exponential_noise_has_unit_mean_and_exponential_tail():
    e = exponential(_keys(range(200), [5] * 200), 500).flatten().double()
    assert float(e.mean()) == pytest.approx(1.0, abs=0.01)  # sd of the mean 1/sqrt(1e5) = 0.003
    assert scipy_stats.kstest(e.numpy(), "expon").pvalue > 1e-3


@pytest.mark.slow
def test_exponential_race_samples_the_given_probabilities():
    probs = torch.tensor([0.5, 0.25, 0.125, 0.125, 0.0])
    noise = exponential(_keys(range(40000), [0] * 40000), 5)
    counts = torch.bincount(sample(probs.expand(40000, -1), noise), minlength=5)
    assert counts[4] == 0
    res = scipy_stats.chisquare(counts[:4].numpy(), (probs[:4] * 40000).numpy())
    assert res.pvalue > 1e-3
