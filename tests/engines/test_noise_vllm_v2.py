"""The ``vllm-v2`` noise mode: vLLM 0.34's counter-based draws and the couplings they give.

First the two generators against published known answers and independent implementations;
then the engine: the target's Gumbel draw is keyed by (seed, position, token), so standard
and FLy emit identical tokens up to FLy's first deferral, and a standard run whose drafts
are all rejected with probability 0 emits exactly the target-only tokens; the drafter's
stream is salted apart. 500 prompts of the tiny random-weight pair, K = 3, FLy W = 1.
"""

from __future__ import annotations

import copy
import json
import math
import os
import struct
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from qualgate.backends.reference import _noise  # noqa: E402
from qualgate.config.decoding import parse_config  # noqa: E402
from qualgate.engines import _noise_v2 as v2  # noqa: E402
from qualgate.engines._sampling import process_logits, split_seed  # noqa: E402
from qualgate.engines.reference import ReferenceEngine  # noqa: E402

N = 500
GREEDY = {"temperature": 0.0, "max_tokens": 24, "ignore_eos": True}
SAMPLED = {"temperature": 0.9, "top_p": 0.95, "max_tokens": 24, "ignore_eos": True}
STANDARD = {"num_speculative_tokens": 3}
PROBABILISTIC = {"num_speculative_tokens": 3, "draft_sample_method": "probabilistic"}
FLY = {"num_speculative_tokens": 3, "rejection_sample_method": "fly", "fly_window_size": 1}
M32 = 0xFFFFFFFF


def prompts(n, vocab=32):
    g = torch.Generator().manual_seed(n)
    return [torch.randint(3, vocab, (1 + i % 12,), generator=g).tolist() for i in range(n)]


def seeded(settings, n=N):
    return [dict(settings, seed=100 + i) for i in range(n)]


def words(message: bytes) -> list[int]:
    assert len(message) % 4 == 0
    return list(struct.unpack(f"<{len(message) // 4}I", message))


# ----------------------------------------------------------------------- the generators

# MurmurHash3 x86_32 test vectors of the reference implementation (SMHasher's
# MurmurHash3.cpp), as collected in "MurmurHash3 test vectors" (Stack Overflow question
# 14747343, Ian Boyd's answer); the ones whose length is a multiple of 4 bytes. Each was also
# checked against the mmh3 package (below, on random messages).
MURMUR3_VECTORS = [
    (b"", 0, 0),
    (b"", 1, 0x514E28B7),
    (b"", 0xFFFFFFFF, 0x81F16F39),
    (b"\xff\xff\xff\xff", 0, 0x76293B50),
    (b"\x21\x43\x65\x87", 0, 0xF55B516B),
    (b"\x21\x43\x65\x87", 0x5082EDEE, 0x2362F9DE),
    (b"\0\0\0\0", 0, 0x2362F9DE),
    (b"aaaa", 0x9747B28C, 0x5A97808A),
    (b"abcd", 0x9747B28C, 0xF0478627),
    (b"a" * 256, 0x9747B28C, 0x37405BDC),
    (b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 0, 0xEE925B90),
]


@pytest.mark.parametrize(("message", "seed", "expected"), MURMUR3_VECTORS)
def test_murmur3_matches_the_published_test_vectors(message, seed, expected):
    assert int(v2.murmur3_32([torch.tensor(w) for w in words(message)], seed)) == expected


def test_murmur3_of_vllms_16_byte_message_matches_the_mmh3_package():
    mmh3 = pytest.importorskip("mmh3")  # the reference C++ code, wrapped (inspect-ai's dependency)
    g = torch.Generator().manual_seed(0)
    w = torch.randint(0, 2**32, (500, 4), generator=g)
    got = v2.murmur3_32([w[:, i] for i in range(4)])
    want = [mmh3.hash(struct.pack("<4I", *row), 0, signed=False) for row in w.tolist()]
    assert got.tolist() == want


# Philox4x32-10 known answers from Random123's kat_vectors (D. E. Shaw Research, Random123
# 1.14, examples/kat_vectors: "philox4x32 10 <ctr x4> <key x2> <out x4>").
PHILOX_KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((M32, M32, M32, M32), (M32, M32), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize(("counter", "key", "expected"), PHILOX_KAT)
def test_philox4x32_10_matches_the_random123_known_answers(counter, key, expected):
    out = v2.philox4x32([torch.tensor(c) for c in counter], [torch.tensor(k) for k in key])
    assert tuple(int(x) for x in out) == expected


SEEDS = [0, 1, 0x123456789ABC, -7, 2**63 - 1]
OFFSETS = [0, 1, 2, 17, 1000, 2**30 + 3, 2**31 + 5, 2**33 + 7, 12345678901]


# tl.rand through Triton's interpreter, which must be switched on before triton is imported
TRITON_RAND = """
import json, sys
import torch, triton, triton.language as tl

@triton.jit
def kernel(out_ptr, offset_ptr, seed, n: tl.constexpr):
    i = tl.arange(0, n)
    tl.store(out_ptr + i, tl.rand(seed, tl.load(offset_ptr + i)))

seeds, offsets = json.loads(sys.argv[1])
padded = torch.tensor(offsets + [0] * (16 - len(offsets)))
result = []
for seed in seeds:
    out = torch.zeros(16)
    kernel[(1,)](out, padded, seed, n=16)
    result.append(out[: len(offsets)].tolist())
print(json.dumps(result))
"""


@pytest.mark.slow
def test_rand32_equals_tritons_tl_rand_run_by_its_interpreter():
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}  # numpy on the CPU: no GPU needed
    args = json.dumps([SEEDS, OFFSETS])
    run = subprocess.run(
        [sys.executable, "-c", TRITON_RAND, args], env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-2000:]
    for seed, want in zip(SEEDS, json.loads(run.stdout)):
        lo, hi = split_seed(seed)
        got = v2.rand32(torch.tensor([lo]), torch.tensor([hi]), torch.tensor([OFFSETS]))[0]
        # vLLM's tl_rand32(includes_zero=False) clamps tl.rand's 0 to its smallest positive value
        assert got.tolist() == torch.tensor(want).clamp(min=v2.TL_RAND_MIN).tolist(), seed


def test_the_gumbel_noise_is_minus_log_one_minus_u_of_murmur3_of_seed_position_and_token():
    seeds = [5, 2**64 - 1, 0x9E3779B97F4A7C15]
    lo, hi = (torch.tensor(x) for x in zip(*(split_seed(s) for s in seeds)))
    pos = torch.tensor([[0, 11], [2**31, 7], [2**30 + 4, 2**33 + 1]])
    noise = v2.exponential(lo, hi, pos, 50)
    r = v2.murmur3_32([lo[:, None, None], hi[:, None, None], pos[..., None], torch.arange(50)])
    u = ((r.double() + 0.5) * 2.0**-32).float()  # exact in float64, then one rounding
    assert torch.equal(v2.uniform(r), u)
    assert torch.equal(noise, -torch.log1p(-u))


# ----------------------------------------------------------------------- the engine


@pytest.fixture(scope="module")
def decoded(engine32):
    """{(settings, mode): Generation} for the 500 prompts in vllm-v2 noise."""
    ps = prompts(N)
    out = {}
    for name, settings in (("greedy", GREEDY), ("sampled", SAMPLED)):
        for mode, spec in (("target", None), ("standard", STANDARD), ("fly", FLY)):
            out[name, mode] = engine32.generate(ps, sampling=seeded(settings), speculative=spec, noise="vllm-v2")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("settings", ["greedy", "sampled"])
def test_standard_and_fly_emit_identical_tokens_up_to_the_first_deferral(decoded, settings):
    std, fly = decoded[settings, "standard"], decoded[settings, "fly"]
    deferred = 0
    for s, f in zip(std, fly):
        k = f.first_deferred_token
        if k is None:  # no deferral: FLy is standard verification, draw for draw
            assert f.token_ids == s.token_ids
            continue
        deferred += 1
        assert f.token_ids[:k] == s.token_ids[:k]
        assert f.token_ids[k] != s.token_ids[k]  # standard rejected the draft FLy kept
    assert deferred > 0.8 * N


@pytest.mark.slow
def test_greedy_decoding_is_the_same_as_in_independent_noise(engine32, decoded):
    ps = prompts(N)[:50]
    for mode, spec in (("target", None), ("fly", FLY)):
        ind = engine32.generate(ps, sampling=seeded(GREEDY, 50), speculative=spec)
        assert [o.token_ids for o in ind] == [o.token_ids for o in decoded["greedy", mode]][:50]


@pytest.fixture(scope="module")
def models(make_pair):
    target, _ = make_pair(32)
    return target


@pytest.mark.slow
def test_standard_emits_the_target_only_tokens_when_every_draft_has_probability_zero(models, device):
    # The drafter is the target with its head negated: its greedy draft is the target's least
    # likely token, outside top-k, so every draft is rejected and the residual is p itself.
    # vllm-v2 resamples that position with the target's own draw there, murmur3(seed, pos,
    # token): standard then emits target-only's tokens, token for token. vllm-v1 draws the
    # recovered token from another generator call, so there the outputs differ.
    anti = copy.deepcopy(models)
    with torch.no_grad():
        anti.lm_head.weight.neg_()
    engine = ReferenceEngine(models, anti, device=device)
    ps, sampling = prompts(N)[:200], seeded({"temperature": 1.0, "top_k": 8, "max_tokens": 24, "ignore_eos": True}, 200)
    for noise in ("vllm-v2", "vllm-v1"):
        tgt = engine.generate(ps, sampling=sampling, noise=noise)
        std = engine.generate(ps, sampling=sampling, speculative=STANDARD, noise=noise)
        assert std.metrics.num_accepted_tokens == 0
        same = sum(a.token_ids == b.token_ids for a, b in zip(tgt, std))
        assert same == 200 if noise == "vllm-v2" else same < 10, noise


@pytest.mark.slow
def test_the_drafters_draws_are_salted_apart_from_the_targets(models, device):
    # A probabilistic drafter identical to the target: q = p, so every draft is accepted and
    # the second token is the drafter's first draw, at the position where target-only draws
    # its second token. Unsalted (murmur3(seed, pos, token) for both) they would always agree;
    # salted, they agree as independent draws from p do, with probability sum p^2.
    engine = ReferenceEngine(models, copy.deepcopy(models), device=device)
    ps, sampling = prompts(N), seeded({"temperature": 0.9, "max_tokens": 6, "ignore_eos": True})
    tgt = engine.generate(ps, sampling=sampling, noise="vllm-v2")
    std = engine.generate(ps, sampling=sampling, speculative=PROBABILISTIC, noise="vllm-v2")
    assert std.metrics.num_accepted_tokens >= 0.99 * std.metrics.num_draft_tokens
    assert [o.token_ids[0] for o in tgt] == [o.token_ids[0] for o in std]  # the target's draw
    agree = sum(a.token_ids[1] == b.token_ids[1] for a, b in zip(tgt, std))
    expected = variance = 0.0
    with torch.inference_mode():
        for o in tgt:
            ids = torch.tensor([list(o.prompt_token_ids) + [o.token_ids[0]]], device=engine.device)
            logits = models(input_ids=ids).logits[:, -1].float()
            one = torch.ones(1, device=ids.device)
            q = float((process_logits(logits, 0.9 * one, 0 * one.long(), one)[0] ** 2).sum())
            expected, variance = expected + q, variance + q * (1 - q)
    assert abs(agree - expected) <= 4 * math.sqrt(variance)  # (normal approximation, 4 sd)


@pytest.mark.slow
@pytest.mark.parametrize("spec", [None, PROBABILISTIC, FLY], ids=["target", "standard", "fly"])
def test_a_request_gets_the_same_tokens_alone_in_any_batch_order_and_when_run_again(engine32, spec):
    ps, sampling = prompts(32), seeded(SAMPLED, 32)
    batch = engine32.generate(ps, sampling=sampling, speculative=spec, noise="vllm-v2")
    again = engine32.generate(ps, sampling=sampling, speculative=spec, noise="vllm-v2")
    assert [o.token_ids for o in again] == [o.token_ids for o in batch]
    reversed_ = engine32.generate(ps[::-1], sampling=sampling[::-1], speculative=spec, noise="vllm-v2")
    assert [o.token_ids for o in reversed_][::-1] == [o.token_ids for o in batch]
    for i in (0, 13, 31):
        alone = engine32.generate([ps[i]], sampling=sampling[i], speculative=spec, noise="vllm-v2")
        assert alone[0].token_ids == batch[i].token_ids
    other = engine32.generate(ps, sampling=seeded(SAMPLED, 32)[1:] + [sampling[0]], speculative=spec, noise="vllm-v2")
    assert sum(a.token_ids != b.token_ids for a, b in zip(other, batch)) > 16  # the seed matters


def test_the_config_reader_and_the_backend_take_noise_vllm_v2():
    config = {"name": "c", "engine": "reference", "model": "m", "sampling": {"max_tokens": 8}}
    cfg = parse_config({**config, "engine_options": {"noise": "vllm-v2"}})
    assert cfg.engine_options["noise"] == "vllm-v2"
    assert cfg.config_id == parse_config(config).config_id  # how the engine draws, not what is served
    assert _noise({"noise": "vllm-v2"}, False) == "vllm-v2"
    with pytest.raises(ValueError, match=r"engine_options\.coupled: true contradicts engine_options\.noise"):
        _noise({"noise": "vllm-v2"}, True)
