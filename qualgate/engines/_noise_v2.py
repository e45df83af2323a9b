"""The ``vllm-v2`` noise mode: vLLM 0.34's counter-based draws, in torch.

vLLM 0.34 has one model runner (V2, ``vllm/v1/worker/gpu/``) and no per-request generator:
every random number is a function of the request's seed and a few integers, computed inside
its Triton kernels. File:line citations below are of the 0.34.0 wheel
(``pip download --no-deps vllm==0.34.0``), paths under ``vllm/v1/worker/gpu/``.

Two generators, implemented here from their specifications:

- **MurmurHash3 x86_32** (Austin Appleby's, as in SMHasher) of a 16-byte message, the four
  little-endian 32-bit words ``seed & 0xFFFFFFFF``, ``seed >> 32``, ``pos & 0xFFFFFFFF`` and the
  token id, with hash seed 0 (``sample/gumbel.py:104-116``, ``murmur3_hash32``; seeds are
  int64, so the words are those of ``seed mod 2**64``). Its 32 bits ``r`` become the uniform
  ``u = (r + 0.5) * 2**-32`` rounded once to float32 (``gumbel.py:119-132``), and the
  Gumbel noise ``-log(-log(1 - u))`` (``gumbel.py:205-209``, with ``log(1 - u)`` by a series
  below 0.25 and ``1 - u`` clamped at ``2**-24``, ``gumbel.py:151-168``). Adding it to the
  logits and taking the argmax samples ``p``; here, equivalently, ``argmax(p / E)`` with
  ``E = -log(1 - u)`` (:func:`exponential`).
- **Philox4x32-10** (Salmon et al., SC'11; Random123), as Triton's ``tl.rand(seed, offset)``
  uses it (``triton/language/random.py``): key ``(seed_lo, seed_hi)``, counter
  ``(offset_lo, offset_hi, 0, 0)``, the first output word read as int32, negative values
  complemented (``~x``), converted to float32 and multiplied by ``4.6566127342e-10``;
  vLLM's ``tl_rand32(..., includes_zero=False)`` clamps the result below at that same value
  (``gumbel.py:13``, ``gumbel.py:66-71``; :func:`rand32`).

The draw order (``pos`` is the position of the *input* token whose logits are sampled, i.e.
one less than the position of the token drawn: ``sample/sampler.py:141``,
``spec_decode/rejection_sampler.py:103-117``):

- a sampled token of the target (target-only decoding, the first token of every mode:
  ``model_runner.py:1749-1751``): Gumbel-max with ``murmur3(seed, pos, token)`` over the
  processed logits (temperature, top-k, top-p; ``sampler.py:287-356``). Seeded requests
  always take this path: the fused FlashInfer sampler is used only when no request of the
  batch has a seed (``sampler.py:304-309``);
- speculative verification (``spec_decode/rejection_sampler_utils.py``, ``_rejection_kernel``):
  draft ``i`` (verified on the logits at ``pos + i``) is accepted when
  ``log p(d) > log u + log q(d)`` with ``u = tl_rand32(seed, pos + i)`` (lines 587, 614-616,
  714-716; the step seed ``seed ^ (i << 32)`` there is for block verification only). FLy's
  rule runs on these native decisions (lines 717-745, greedy rows 753-757);
- the token after the kept drafts (``_resample_kernel``, lines 878-1044): the bonus token
  from ``p`` at ``pos + K``, or the rejected position ``pos + a`` resampled from the residual
  (``p`` with the draft removed for a greedy drafter, ``max(p - q, 0)`` for a probabilistic
  one, lines 942-1001), through the *same* Gumbel argmax, ``murmur3(seed, pos + a, token)``
  (lines 787-820: ``IS_DRAFTING=False``);
- the drafter (``spec_decode/speculator.py:612-627``; ``standalone_ar/speculator.py:177-188``
  and ``273-281``, ``autoregressive/speculator.py:241-261``): draft ``j`` comes from the
  drafter's logits at ``pos + j`` divided by the temperature (no top-k or top-p), by
  Gumbel-max with ``murmur3(seed ^ (j << 32), pos + j + 2**30, token)``: the drafting step
  mixed into the seed's high word (``spec_step_seed``, ``gumbel.py:74-77`` and 272-275) and the
  position salted by ``_DRAFT_NOISE_SALT = 1 << 30`` (``gumbel.py:15-19``, 199-200). A
  greedy drafter takes the argmax.

What two runs of one seed share, therefore: the target's Gumbel draw at each position
(target-only samples, bonus and resampled tokens alike), the acceptance uniform at each
position (standard and FLy), and nothing of the drafter's. The hashes are exact integer
arithmetic on int64 tensors (identical on CPU and GPU); the uniforms are vLLM's float32 values
and the final ``log`` may differ from Triton's in the last bit.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = [
    "DRAFT_NOISE_SALT",
    "exponential",
    "murmur3_32",
    "philox4x32",
    "rand32",
]

M32 = 0xFFFFFFFF
#: vLLM 0.34's ``_DRAFT_NOISE_SALT``: added to the drafter's positions (``gumbel.py:19``)
DRAFT_NOISE_SALT = 1 << 30
# MurmurHash3 x86_32's block constants and finalizer multipliers
_C1, _C2, _N = 0xCC9E2D51, 0x1B873593, 0xE6546B64
_F1, _F2 = 0x85EBCA6B, 0xC2B2AE35
# Philox4x32's round multipliers and key increments (Random123)
_PM0, _PM1 = 0xD2511F53, 0xCD9E8D57
_PW0, _PW1 = 0x9E3779B9, 0xBB67AE85
#: smallest value of Triton's float32 ``tl.rand``, vLLM's lower clamp (``gumbel.py:13``)
TL_RAND_MIN = 4.6566127342e-10
_KEY_TABLES: dict[tuple[int, str], torch.Tensor] = {}


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """``x * c mod 2**32`` for ``x`` in [0, 2**32) without int64 overflow (16-bit halves of c)."""
    return ((((x * (c >> 16)) & 0xFFFF) << 16) + x * (c & 0xFFFF)) & M32


def _mulhilo(c: int, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """High and low 32-bit words of the 64-bit product ``c * x`` (16-bit halves of x)."""
    t = c * (x & 0xFFFF)
    u = c * (x >> 16)
    return (u + (t >> 16)) >> 16, (((u & 0xFFFF) << 16) + t) & M32


def _rotl(x: torch.Tensor, r: int) -> torch.Tensor:
    return ((x << r) & M32) | (x >> (32 - r))


def _block(k: torch.Tensor) -> torch.Tensor:
    """A message word scrambled as MurmurHash3 does before mixing it in."""
    return _mul32(_rotl(_mul32(k, _C1), 15), _C2)


def _mix(h: torch.Tensor, scrambled: torch.Tensor) -> torch.Tensor:
    return (_rotl(h ^ scrambled, 13) * 5 + _N) & M32


def _fmix(h: torch.Tensor) -> torch.Tensor:
    h = h ^ (h >> 16)
    h = _mul32(h, _F1)
    h = h ^ (h >> 13)
    h = _mul32(h, _F2)
    return h ^ (h >> 16)


def _words(x) -> torch.Tensor:
    return torch.as_tensor(x, dtype=torch.int64) & M32


def murmur3_32(words: Sequence[torch.Tensor | int], seed: int = 0) -> torch.Tensor:
    """MurmurHash3 x86_32 of the little-endian message made of ``words`` (each taken mod 2**32).

    The words may be tensors of any broadcastable shapes; returns int64 values in [0, 2**32).
    vLLM 0.34's ``murmur3_hash32(seed, pos, offset)`` is ``murmur3_32([seed_lo, seed_hi,
    pos_lo, offset])``.
    """
    h = _words(seed)
    for w in words:
        h = _mix(h, _block(_words(w)))
    return _fmix(h ^ (4 * len(words)))


def _key_table(vocab: int, device: torch.device) -> torch.Tensor:
    key = (vocab, str(device))
    table = _KEY_TABLES.get(key)
    if table is None:
        table = _KEY_TABLES[key] = _block(torch.arange(vocab, dtype=torch.int64, device=device))
    return table


def uniform(r: torch.Tensor) -> torch.Tensor:
    """vLLM's ``(r + 0.5) * 2**-32`` as float32, rounded once (``gumbel.py:127-132``)."""
    hi = (r >> 16).float() * 2.0**-16
    lo = ((r & 0xFFFF).float() + 0.5) * 2.0**-32
    return hi + lo  # both halves are exact in float32: one rounding, of their sum


def exponential(seed_lo: torch.Tensor, seed_hi: torch.Tensor, pos: torch.Tensor, vocab: int) -> torch.Tensor:
    """``E = -log(1 - u)``, ``u`` from ``murmur3(seed, pos, token)`` for tokens 0..vocab-1.

    ``seed_lo``/``seed_hi`` are (B,) int64 words of the seed (the drafter passes
    ``seed_hi ^ j``); ``pos`` is (B,) or (B, T) (the drafter passes ``pos + j +``
    :data:`DRAFT_NOISE_SALT`). Returns float32 of shape ``pos.shape + (vocab,)``:
    ``argmax(p / E)`` is vLLM 0.34's Gumbel-max sample of ``p``.
    """
    while seed_lo.dim() < pos.dim():
        seed_lo, seed_hi = seed_lo.unsqueeze(-1), seed_hi.unsqueeze(-1)
    h = _mix(torch.zeros_like(pos), _block(seed_lo & M32))
    h = _mix(h, _block(seed_hi & M32))
    h = _mix(h, _block(pos & M32)).unsqueeze(-1)
    x = h ^ _key_table(vocab, pos.device)  # the token word, per vocabulary entry
    x = _rotl(x, 13).mul_(5).add_(_N).bitwise_and_(M32)
    x ^= 16  # the message length in bytes
    x = _fmix(x)
    u = uniform(x)
    return torch.log1p(u.clamp_(max=1 - 2.0**-24).neg_()).neg_()


def philox4x32(counter: Sequence[torch.Tensor], key: Sequence[torch.Tensor], rounds: int = 10) -> list[torch.Tensor]:
    """Philox4x32 (Random123): the four output words for four counter and two key words.

    All arguments are int64 tensors (or ints) holding values in [0, 2**32), broadcast together.
    """
    c0, c1, c2, c3 = (_words(c) for c in counter)
    k0, k1 = (_words(k) for k in key)
    for _ in range(rounds):
        hi0, lo0 = _mulhilo(_PM0, c0)
        hi1, lo1 = _mulhilo(_PM1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0, k1 = (k0 + _PW0) & M32, (k1 + _PW1) & M32
    return [c0, c1, c2, c3]


def rand32(seed_lo: torch.Tensor, seed_hi: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """vLLM 0.34's ``tl_rand32(seed, offset, includes_zero=False)``: Triton's ``tl.rand``.

    ``seed_lo``/``seed_hi`` (B,) int64 words of the seed; ``offset`` (B,) or (B, T), int64
    values >= 0. Returns float32 uniforms in ``[4.66e-10, 1)`` of ``offset``'s shape.
    """
    while seed_lo.dim() < offset.dim():
        seed_lo, seed_hi = seed_lo.unsqueeze(-1), seed_hi.unsqueeze(-1)
    zero = torch.zeros_like(offset)
    x = philox4x32((offset & M32, (offset >> 32) & M32, zero, zero), (seed_lo, seed_hi))[0]
    x = torch.where(x >= 1 << 31, M32 - x, x)  # int32 view, negatives complemented
    # a Python scalar, not a tensor made on the device: no host-to-device copy, which CUDA graph
    # capture refuses (the reference engine then fell back to eager decoding); float32 math either way
    return (x.float() * TL_RAND_MIN).clamp_(min=TL_RAND_MIN)
