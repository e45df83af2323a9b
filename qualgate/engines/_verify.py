"""Speculative verification as pure functions on tensors: standard and FLy, vLLM 0.33's rules.

Shapes: B requests, K draft tokens, V vocabulary. Position i of a request's draft is scored
by the target distribution ``target_probs[:, i]``; ``target_probs[:, K]`` is the bonus
position. ``target_probs`` are the request's processed probabilities (after temperature,
top-k and top-p for sampled rows; ``softmax`` of the raw logits, i.e. temperature 1, for
greedy rows) and ``target_logits`` the raw logits (greedy rows decide on their argmax).

Native acceptance ``NAT_i`` (vLLM 0.33):

- greedy rows: ``d_i == argmax target_logits[:, i]``;
- sampled rows: ``d_i`` is a valid id, ``q_i(d_i) > 0`` and ``p_i(d_i) / q_i(d_i) >= u_i``
  (``q == 1`` for a greedy drafter, i.e. ``draft_probs=None``);
- sampled rows in *coupled* mode: ``d_i`` valid, ``q_i(d_i) > 0`` and ``d_i == x_i``, where
  ``x_i = argmax(p_i / E_i)`` is the target's own sample at that position under the
  request's position-keyed noise ``E_i`` (``coupled_sample``). For a greedy drafter this
  accepts with probability ``p_i(d_i)`` and, when it rejects, ``x_i`` is a draw from ``p_i``
  conditioned on ``x_i != d_i``, the residual: standard verification, exactly. For a
  probabilistic drafter that drew ``d_i = argmax(q_i / E_i)`` with the *same* noise, the
  emitted token is always ``x_i``, so the output is still exactly the target's, with the
  Gumbel coupling's acceptance ``P(x_i = d_i)`` instead of ``sum min(p, q)``.

FLy (``fly=FlyRule(...)``): a native rejection at i is *deferred* (``d_i`` kept) iff all of
``i + W < K``; ``H_i >= tau`` with ``H_i = -sum_{top-k of p_i} p ln p`` (nats, float32, no
renormalisation, ``0 ln 0 = 0``); ``d_i`` valid and not masked (greedy: its target logit is
not ``-inf``; sampled: ``p_i(d_i) > 0`` and ``q_i(d_i) > 0``); and ``NAT_{i+1..i+W}`` all hold,
judged on the native decisions. In coupled mode ``NAT`` is the coupled test and the rule is
otherwise unchanged. Tokens are then emitted left to right: ``d_i`` while native or
deferred, then the correction at the first other position (greedy: the argmax; sampled: a
draw from the residual ``norm(max(p - q, 0))``, which for a greedy drafter is ``p`` with
``d_i`` removed; coupled: ``x_i``), or the bonus token from ``p_K`` when all K passed.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from ._sampling import sample

__all__ = [
    "Acceptance",
    "FlyRule",
    "Verification",
    "accept_drafts",
    "correction_tokens",
    "fly_entropy",
    "verify",
]


class FlyRule(NamedTuple):
    """FLy's parameters: window W, entropy threshold tau (nats), entropy top-k."""

    window: int
    threshold: float
    top_k: int

    @classmethod
    def from_config(cls, resolved: dict) -> FlyRule | None:
        """From a resolved ``speculative_config`` (``None`` unless the method is ``fly``)."""
        if resolved is None or resolved.get("rejection_sample_method") != "fly":
            return None
        return cls(
            resolved["fly_window_size"],
            resolved["fly_entropy_threshold"],
            resolved["fly_entropy_top_k"],
        )


class Acceptance(NamedTuple):
    num_accepted: torch.Tensor  #: (B,) draft tokens kept (native or deferred), 0..K
    native: torch.Tensor  #: (B, K) bool, NAT_i
    deferred: torch.Tensor  #: (B, K) bool, deferred *and* emitted


class Verification(NamedTuple):
    token_ids: torch.Tensor  #: (B, K + 1) emitted tokens, -1 after the last
    num_accepted: torch.Tensor  #: (B,)
    num_deferred: torch.Tensor  #: (B,)


def fly_entropy(probs: torch.Tensor, top_k: int) -> torch.Tensor:
    """FLy's entropy: ``-sum p ln p`` over the ``top_k`` largest probabilities, in nats.

    Computed in float32 on the unrenormalised top-k probabilities, with ``0 ln 0 = 0``;
    ``top_k`` is capped at the vocabulary size.
    """
    k = min(int(top_k), probs.shape[-1])
    top = probs.float().topk(k, dim=-1).values
    terms = torch.where(top > 0, top * top.log(), torch.zeros_like(top))
    return -terms.sum(dim=-1)


def _gather(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return x.gather(-1, index.unsqueeze(-1)).squeeze(-1)


def accept_drafts(
    draft_token_ids: torch.Tensor,
    target_logits: torch.Tensor,
    target_probs: torch.Tensor,
    is_greedy: torch.Tensor,
    *,
    draft_probs: torch.Tensor | None = None,
    uniform: torch.Tensor | None = None,
    coupled_sample: torch.Tensor | None = None,
    fly: FlyRule | None = None,
) -> Acceptance:
    """Which draft tokens are kept (see the module docstring for the rules).

    Parameters
    ----------
    draft_token_ids : (B, K) integer tensor
    target_logits, target_probs : (B, K + 1, V) tensors (only the first K positions are read)
    is_greedy : (B,) bool tensor
    draft_probs : (B, K, V) tensor or None
        The drafter's processed probabilities; ``None`` for a greedy drafter (``q == 1``).
    uniform : (B, K) tensor in (0, 1)
        Acceptance uniforms for sampled rows (independent noise).
    coupled_sample : (B, K + 1) integer tensor or None
        The target's coupled samples ``x_i``; when given, sampled rows use the coupled test
        and ``uniform`` is not read. With neither ``uniform`` nor ``coupled_sample`` every
        row is decided greedily.
    fly : FlyRule or None
    """
    d = draft_token_ids.long()
    batch, k = d.shape
    vocab = target_probs.shape[-1]
    probs = target_probs[:, :k]
    logits = target_logits[:, :k]
    valid = (d >= 0) & (d < vocab)
    ds = d.clamp(0, vocab - 1)
    p_d = torch.where(valid, _gather(probs, ds), 0.0)
    if draft_probs is None:
        q_d = valid.to(p_d.dtype)
    else:
        q_d = torch.where(valid, _gather(draft_probs[:, :k], ds), 0.0)
    greedy = is_greedy.view(batch, 1)
    nat_greedy = d == logits.argmax(dim=-1)
    if coupled_sample is not None:
        nat_sampled = valid & (q_d > 0) & (d == coupled_sample[:, :k])
    elif uniform is not None:
        ratio = p_d / torch.where(q_d > 0, q_d, 1.0)
        nat_sampled = valid & (q_d > 0) & (ratio >= uniform)
    else:  # no noise given: every row is decided greedily
        nat_sampled = nat_greedy
    native = torch.where(greedy, nat_greedy, nat_sampled)
    accepted = native
    deferred = torch.zeros_like(native)
    if fly is not None:
        w = int(fly.window)
        i = torch.arange(k, device=d.device)
        in_draft = i + w < k
        entropy = fly_entropy(probs, fly.top_k)
        logit_d = _gather(logits.float(), ds)
        unmasked = valid & torch.where(greedy, logit_d > -math.inf, (p_d > 0) & (q_d > 0))
        # window_ok[i]: NAT_{i+1} .. NAT_{i+W} all hold (sum over the window equals W)
        csum = torch.nn.functional.pad(native.long().cumsum(dim=1), (1, 0))
        window = csum[:, (i + w + 1).clamp(max=k)] - csum[:, (i + 1).clamp(max=k)]
        deferred = ~native & in_draft & (entropy >= fly.threshold) & unmasked & (window == w)
        accepted = native | deferred
    num_accepted = accepted.long().cumprod(dim=1).sum(dim=1)
    emitted = torch.arange(k, device=d.device) < num_accepted.unsqueeze(1)
    return Acceptance(num_accepted, native, deferred & emitted)


def correction_tokens(
    num_accepted: torch.Tensor,
    draft_token_ids: torch.Tensor,
    target_logits: torch.Tensor,
    target_probs: torch.Tensor,
    is_greedy: torch.Tensor,
    *,
    draft_probs: torch.Tensor | None = None,
    noise: torch.Tensor | None = None,
    coupled_sample: torch.Tensor | None = None,
) -> torch.Tensor:
    """The token emitted after the kept drafts: correction at ``a < K``, bonus at ``a == K``.

    ``noise`` is (B, V) ``Exp(1)`` noise for position ``a`` (independent mode);
    ``coupled_sample`` (B, K + 1) replaces it in coupled mode; with neither, every row is
    decided greedily. Returns (B,) token ids.
    If the residual ``max(p - q, 0)`` is all zero (only possible through rounding, as a
    rejection then has probability 0) the token is drawn from ``p``.
    """
    d = draft_token_ids.long()
    batch, k = d.shape
    rows = torch.arange(batch, device=d.device)
    a = num_accepted.long()
    greedy_token = target_logits[rows, a].argmax(dim=-1)
    if coupled_sample is not None:
        sampled = coupled_sample[rows, a]
    elif noise is not None:
        p = target_probs[rows, a].float()
        rejected = (a < k).unsqueeze(-1)
        ai = a.clamp(max=k - 1)
        if draft_probs is None:
            vocab = p.shape[-1]
            d_a = d[rows, ai]
            hit = rejected.squeeze(-1) & (d_a >= 0) & (d_a < vocab)
            idx = d_a.clamp(0, vocab - 1).unsqueeze(-1)
            residual = p.clone()
            residual.scatter_(-1, idx, torch.where(hit.unsqueeze(-1), 0.0, p.gather(-1, idx)))
        else:
            residual = torch.where(rejected, (p - draft_probs[rows, ai].float()).clamp(min=0), p)
        residual = torch.where(residual.sum(dim=-1, keepdim=True) > 0, residual, p)
        sampled = sample(residual, noise)
    else:  # no noise given: every row is decided greedily
        return greedy_token
    return torch.where(is_greedy, greedy_token, sampled)


def verify(
    draft_token_ids: torch.Tensor,
    target_logits: torch.Tensor,
    target_probs: torch.Tensor,
    is_greedy: torch.Tensor,
    *,
    draft_probs: torch.Tensor | None = None,
    uniform: torch.Tensor | None = None,
    noise: torch.Tensor | None = None,
    coupled_sample: torch.Tensor | None = None,
    fly: FlyRule | None = None,
) -> Verification:
    """One verification step: :func:`accept_drafts` then :func:`correction_tokens`.

    ``noise`` here is (B, K + 1, V) ``Exp(1)`` noise, one row per position; the one at the
    correction position is used. Returns the emitted tokens (B, K + 1), padded with -1.
    """
    acc = accept_drafts(
        draft_token_ids,
        target_logits,
        target_probs,
        is_greedy,
        draft_probs=draft_probs,
        uniform=uniform,
        coupled_sample=coupled_sample,
        fly=fly,
    )
    a = acc.num_accepted
    d = draft_token_ids.long()
    batch, k = d.shape
    rows = torch.arange(batch, device=d.device)
    noise_a = None if noise is None else noise[rows, a]
    last = correction_tokens(
        a,
        d,
        target_logits,
        target_probs,
        is_greedy,
        draft_probs=draft_probs,
        noise=noise_a,
        coupled_sample=coupled_sample,
    )
    j = torch.arange(k + 1, device=d.device).unsqueeze(0)
    padded = torch.nn.functional.pad(d, (0, 1), value=-1)
    tokens = torch.where(j < a.unsqueeze(1), padded, torch.where(j == a.unsqueeze(1), last.unsqueeze(1), -1))
    return Verification(tokens, a, acc.deferred.sum(dim=1))
