"""Sampling settings, logits processing and counter-based noise for the reference engine.

Three pieces, each a pure function of its inputs:

- :func:`resolve_sampling` validates a dict of vLLM ``SamplingParams`` fields;
- :func:`process_logits` turns logits into the probabilities a request samples from, with
  vLLM's order and semantics (temperature, then top-k, then top-p; greedy rows at
  temperature 1 with neither);
- :func:`noise_keys`, :func:`uniform` and :func:`exponential` derive every random number from
  a request's seed and a few integers (stream, absolute position, drafting step) through an
  integer hash, so that a request's noise is the same whatever else shares its batch, on CPU
  and GPU alike (the hash is exact 64-bit integer arithmetic). Sampling from probabilities
  ``p`` is an exponential race, ``argmax(p / E)`` with ``E ~ Exp(1)`` per token, which is
  Gumbel-max sampling and what vLLM's samplers do.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

__all__ = [
    "SAMPLING_EPS",
    "SAMPLING_KEYS",
    "STREAM_ACCEPT",
    "STREAM_DRAFT",
    "STREAM_GENERATOR",
    "STREAM_GLOBAL",
    "STREAM_RESIDUAL",
    "STREAM_TARGET",
    "SamplingParams",
    "exponential",
    "noise_keys",
    "process_logits",
    "resolve_sampling",
    "sample",
    "uniform",
    "uniforms",
]

#: vLLM: a temperature below this means greedy decoding.
SAMPLING_EPS = 1e-5
#: The ``SamplingParams`` fields the reference engine understands.
SAMPLING_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "max_tokens",
    "seed",
    "stop",
    "stop_token_ids",
    "ignore_eos",
    "n",
)

# Noise streams: what a random number is used for. STREAM_TARGET is the coupled stream, keyed
# by (seed, position) only: target-only sampling, the first token of every mode, and all
# sampling noise of a coupled speculative run. The others are keyed by (seed, position,
# drafting step) and serve independent-noise speculative runs.
STREAM_TARGET = 1
STREAM_ACCEPT = 2
STREAM_RESIDUAL = 3
STREAM_DRAFT = 4
# vllm-v1 noise: STREAM_GENERATOR is the request's torch.Generator, keyed by (seed, call index)
# (each call advances vLLM's Philox offset by 4, so calls, not positions, index the draws);
# STREAM_GLOBAL stands for the device's unseeded generator that vLLM's drafter samples with.
STREAM_GENERATOR = 5
STREAM_GLOBAL = 6


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    """One request's sampling settings (a subset of vLLM 0.33's ``SamplingParams``)."""

    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False

    @property
    def greedy(self) -> bool:
        return self.temperature < SAMPLING_EPS

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["stop"], d["stop_token_ids"] = list(self.stop), list(self.stop_token_ids)
        return d


def _number(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"sampling {name} must be a finite number, got {value!r}")
    return float(value)


def _integer(name, value):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"sampling {name} must be an integer, got {value!r}")
    return value


def resolve_sampling(sampling: Mapping[str, Any]) -> SamplingParams:
    """Validate a mapping of vLLM ``SamplingParams`` fields.

    ``max_tokens`` is required: vLLM's default of 16 silently truncates answers. ``top_k`` of
    0 or -1 and ``top_p`` of 1 disable those filters; a temperature below ``1e-5`` means
    greedy decoding (top-k and top-p are then ignored, as vLLM does). ``seed=None`` draws a
    seed from torch's global generator when the request runs.

    Raises
    ------
    ValueError
        Naming the field and the value, with the valid options.
    """
    if isinstance(sampling, SamplingParams):
        return sampling
    if not isinstance(sampling, Mapping):
        raise ValueError(f"sampling must be a mapping of SamplingParams fields, got {sampling!r}")
    unknown = sorted(set(sampling) - set(SAMPLING_KEYS))
    if unknown:
        raise ValueError(f"unknown sampling field(s) {unknown}; valid fields: {list(SAMPLING_KEYS)}")
    if sampling.get("max_tokens") is None:
        raise ValueError(
            "sampling needs 'max_tokens' (vLLM's default of 16 silently truncates answers; set it explicitly)"
        )
    max_tokens = _integer("max_tokens", sampling["max_tokens"])
    if max_tokens < 1:
        raise ValueError(f"sampling max_tokens must be >= 1, got {max_tokens!r}")
    n = sampling.get("n", 1)
    if n != 1 or isinstance(n, bool):
        raise ValueError(f"sampling n must be 1 (one sample per prompt; repeat the prompt), got {n!r}")
    temperature = _number("temperature", sampling.get("temperature", 1.0))
    if temperature < 0:
        raise ValueError(f"sampling temperature must be >= 0, got {temperature!r}")
    top_p = _number("top_p", sampling.get("top_p", 1.0))
    if not 0 < top_p <= 1:
        raise ValueError(f"sampling top_p must be in (0, 1], got {top_p!r}")
    top_k = _integer("top_k", sampling.get("top_k", 0))
    if top_k < -1:
        raise ValueError(f"sampling top_k must be -1, 0 (disabled) or >= 1, got {top_k!r}")
    seed = sampling.get("seed")
    if seed is not None:
        seed = _integer("seed", seed)
    stop = sampling.get("stop") or ()
    if isinstance(stop, str):
        stop = (stop,)
    if not all(isinstance(s, str) and s for s in stop):
        raise ValueError(f"sampling stop must be a non-empty string or a list of them, got {stop!r}")
    stop_ids = sampling.get("stop_token_ids") or ()
    if isinstance(stop_ids, (str, bytes)) or not isinstance(stop_ids, Sequence):
        raise ValueError(f"sampling stop_token_ids must be a list of integers, got {stop_ids!r}")
    stop_ids = tuple(_integer("stop_token_ids", t) for t in stop_ids)
    ignore_eos = sampling.get("ignore_eos", False)
    if not isinstance(ignore_eos, bool):
        raise ValueError(f"sampling ignore_eos must be true or false, got {ignore_eos!r}")
    greedy = temperature < SAMPLING_EPS
    return SamplingParams(
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=1.0 if greedy else top_p,
        top_k=0 if greedy or top_k == -1 else top_k,
        seed=seed,
        stop=tuple(stop),
        stop_token_ids=stop_ids,
        ignore_eos=ignore_eos,
    )


# --------------------------------------------------------------------------- processing


def process_logits(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor,
    top_p: torch.Tensor,
    *,
    use_top_k: bool = True,
    use_top_p: bool = True,
) -> torch.Tensor:
    """Probabilities a request samples from, as vLLM computes them.

    Parameters
    ----------
    logits : (N, V) float tensor
    temperature : (N,) float tensor
        Greedy rows must carry 1.0 (vLLM scores greedy rows at temperature 1).
    top_k : (N,) integer tensor
        0 disables the filter. Tokens whose logit is below the k-th largest are removed
        (ties with the k-th largest are kept).
    top_p : (N,) float tensor
        1.0 disables the filter. Keeps the smallest set of most likely tokens whose
        probability (after top-k) reaches ``top_p``: sorting ascending, a token is removed
        when the cumulative probability up to and including it is ``<= 1 - top_p``; the most
        likely token is always kept.
    use_top_k, use_top_p : bool
        ``False`` skips a filter that no row uses (saves a sort).

    Returns
    -------
    (N, V) float32 tensor of probabilities (softmax after the filters).
    """
    x = logits.float() / temperature.float().unsqueeze(-1)
    if use_top_k or use_top_p:
        vocab = x.shape[-1]
        srt, idx = x.sort(dim=-1)
        if use_top_k:
            k = torch.where(top_k > 0, top_k.clamp(max=vocab), vocab).long()
            kth = srt.gather(-1, (vocab - k).unsqueeze(-1))
            srt = srt.masked_fill(srt < kth, -math.inf)
        if use_top_p:
            cum = srt.softmax(dim=-1).cumsum(dim=-1)
            drop = cum <= (1 - top_p.float()).unsqueeze(-1)
            drop[..., -1] = False
            srt = srt.masked_fill(drop, -math.inf)
        x = torch.empty_like(x).scatter_(-1, idx, srt)
    return x.softmax(dim=-1)


def sample(probs: torch.Tensor, exp_noise: torch.Tensor) -> torch.Tensor:
    """Exponential-race sample: ``argmax(probs / E)``; exact for ``E`` i.i.d. ``Exp(1)``."""
    return (probs / exp_noise).argmax(dim=-1)


# --------------------------------------------------------------------------- noise

_M32 = 0xFFFFFFFF
# Multipliers of Wellons' improved "lowbias32" integer hash; both are below 2**31, so the
# products of 32-bit values stay below 2**63 and int64 arithmetic never overflows.
_C1, _C2 = 0x21F0AAAD, 0x735A2D97
_VOCAB_TABLES: dict[tuple[int, str], torch.Tensor] = {}


def _mix(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash on int64 tensors holding values in [0, 2**32)."""
    x = x ^ (x >> 16)
    x = (x * _C1) & _M32
    x = x ^ (x >> 15)
    x = (x * _C2) & _M32
    return x ^ (x >> 15)


def _mix_(x: torch.Tensor) -> torch.Tensor:
    """In-place :func:`_mix` (for the large per-token tensors)."""
    x ^= x >> 16
    x.mul_(_C1).bitwise_and_(_M32)
    x ^= x >> 15
    x.mul_(_C2).bitwise_and_(_M32)
    x ^= x >> 15
    return x


def split_seed(seed: int) -> tuple[int, int]:
    """The low and high 32-bit words of ``seed`` taken modulo 2**64."""
    seed %= 1 << 64
    return seed & _M32, seed >> 32


def noise_keys(
    seed_lo: torch.Tensor,
    seed_hi: torch.Tensor,
    stream: int,
    position: torch.Tensor,
    step: torch.Tensor | int = 0,
) -> torch.Tensor:
    """32-bit keys from (seed, stream, absolute position, drafting step), broadcast together.

    ``seed_lo``/``seed_hi`` are the words of :func:`split_seed` as int64 tensors of shape
    (B,); ``position`` is (B,) or (B, T); ``step`` is an int or a (B,) tensor.
    """
    while seed_lo.dim() < position.dim():
        seed_lo, seed_hi = seed_lo.unsqueeze(-1), seed_hi.unsqueeze(-1)
    if isinstance(step, torch.Tensor):
        while step.dim() < position.dim():
            step = step.unsqueeze(-1)
    k = _mix(_mix(seed_lo) ^ seed_hi)
    k = _mix(k ^ ((stream << 28) | (step & 0x0FFFFFFF)))
    return _mix(k ^ (position & _M32))


def uniform(keys: torch.Tensor) -> torch.Tensor:
    """One uniform in (0, 1) per key (24 bits, exactly representable in float32)."""
    return ((_mix(keys ^ 0x5BD1E995) >> 8).float() + 0.5) * (1.0 / (1 << 24))


def uniforms(keys: torch.Tensor, n: int) -> torch.Tensor:
    """``n`` uniforms in (0, 1) per key, shape ``keys.shape + (n,)`` (one generator call's values)."""
    idx = torch.arange(n, dtype=torch.int64, device=keys.device) + 0x7F4A7C15
    return uniform(_mix(keys.unsqueeze(-1) ^ idx))


def _vocab_table(vocab: int, device: torch.device) -> torch.Tensor:
    key = (vocab, str(device))
    table = _VOCAB_TABLES.get(key)
    if table is None:
        table = _mix(torch.arange(vocab, dtype=torch.int64, device=device) + 0x9E3779B9)
        _VOCAB_TABLES[key] = table
    return table


def exponential(keys: torch.Tensor, vocab: int) -> torch.Tensor:
    """``Exp(1)`` noise of shape ``keys.shape + (vocab,)``, one value per (key, token)."""
    h = keys.unsqueeze(-1) ^ _vocab_table(vocab, keys.device)
    h = _mix_(h)
    u = (h >> 8).float().add_(0.5).mul_(1.0 / (1 << 24))
    return u.log_().neg_()
