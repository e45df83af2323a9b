"""What :meth:`ReferenceEngine.generate <qualgate.engines.reference.ReferenceEngine.generate>` returns."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

__all__ = ["Generation", "GenerationOutput", "RequestMetrics"]


@dataclasses.dataclass(frozen=True)
class RequestMetrics:
    """Speculative-decoding counters of one request (or summed over requests).

    ``num_accepted_tokens`` counts the verifier's kept drafts (native or deferred), before
    any truncation at a stop token or ``max_tokens``, as vLLM counts them;
    ``acceptance_histogram[a]`` is the number of drafting steps that kept ``a`` drafts
    (length K + 1; empty for target-only decoding).
    """

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    num_deferred_tokens: int = 0
    acceptance_histogram: tuple[int, ...] = ()
    num_output_tokens: int = 0
    wall_time_s: float = 0.0

    @property
    def mean_acceptance_length(self) -> float | None:
        """``1 + accepted / drafting steps`` (None without drafting steps)."""
        return 1 + self.num_accepted_tokens / self.num_drafts if self.num_drafts else None

    @property
    def draft_acceptance_rate(self) -> float | None:
        """``accepted / drafted tokens`` (None without drafts)."""
        if not self.num_draft_tokens:
            return None
        return self.num_accepted_tokens / self.num_draft_tokens

    @property
    def accepted_per_position(self) -> tuple[int, ...]:
        """Steps whose draft token at position j was kept, for j < K (vLLM's per-position counter)."""
        h = self.acceptance_histogram
        return tuple(sum(h[j + 1 :]) for j in range(max(len(h) - 1, 0)))

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["acceptance_histogram"] = list(self.acceptance_histogram)
        d["mean_acceptance_length"] = self.mean_acceptance_length
        d["draft_acceptance_rate"] = self.draft_acceptance_rate
        return d


@dataclasses.dataclass(frozen=True)
class GenerationOutput:
    """One request's result. ``finish_reason`` is ``'stop'`` or ``'length'``.

    ``first_deferred_token``: the index in ``token_ids`` of the first token that FLy kept
    by deferring a native rejection (None: no deferred token was emitted).
    ``top2_margins[i]``: the target's top-1 minus top-2 probability at ``token_ids[i]``, in
    the distribution the sampler or verifier decided that token on (the processed one;
    temperature 1 without filters for greedy rows), so a flip at a near-tie is told apart
    from a changed decision.
    """

    index: int
    prompt_token_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    text: str | None
    finish_reason: str
    seed: int
    metrics: RequestMetrics
    first_deferred_token: int | None = None
    top2_margins: tuple[float, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "prompt_token_ids": list(self.prompt_token_ids),
            "token_ids": list(self.token_ids),
            "text": self.text,
            "finish_reason": self.finish_reason,
            "seed": self.seed,
            "metrics": self.metrics.to_dict(),
            "first_deferred_token": self.first_deferred_token,
            "top2_margins": list(self.top2_margins),
        }


@dataclasses.dataclass(frozen=True)
class Generation(Sequence):
    """The outputs of one :meth:`ReferenceEngine.generate` call, in prompt order.

    Behaves as a sequence of :class:`GenerationOutput`; ``speculative`` is the resolved
    configuration (with ``coupled``) or None for target-only decoding.
    """

    outputs: tuple[GenerationOutput, ...]
    mode: str
    speculative: dict[str, Any] | None
    wall_time_s: float

    def __len__(self) -> int:
        return len(self.outputs)

    def __getitem__(self, i):
        return self.outputs[i]

    @property
    def num_output_tokens(self) -> int:
        return sum(len(o.token_ids) for o in self.outputs)

    @property
    def tokens_per_second(self) -> float:
        """Output tokens of all requests per second of wall time."""
        return self.num_output_tokens / self.wall_time_s if self.wall_time_s > 0 else math.inf

    @property
    def metrics(self) -> RequestMetrics:
        """Counters summed over requests; ``wall_time_s`` is the call's."""
        ms = [o.metrics for o in self.outputs]
        width = max((len(m.acceptance_histogram) for m in ms), default=0)
        hist = [0] * width
        for m in ms:
            for a, c in enumerate(m.acceptance_histogram):
                hist[a] += c
        return RequestMetrics(
            num_drafts=sum(m.num_drafts for m in ms),
            num_draft_tokens=sum(m.num_draft_tokens for m in ms),
            num_accepted_tokens=sum(m.num_accepted_tokens for m in ms),
            num_deferred_tokens=sum(m.num_deferred_tokens for m in ms),
            acceptance_histogram=tuple(hist),
            num_output_tokens=sum(m.num_output_tokens for m in ms),
            wall_time_s=self.wall_time_s,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "speculative": self.speculative,
            "wall_time_s": self.wall_time_s,
            "num_output_tokens": self.num_output_tokens,
            "tokens_per_second": self.tokens_per_second,
            "metrics": self.metrics.to_dict(),
            "outputs": [o.to_dict() for o in self.outputs],
        }
