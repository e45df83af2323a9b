"""vLLM 0.33's ``speculative_config``: its keys, defaults and validations, in one place.

The reference engine, the decoding-config schema (and so the config id), ``qualgate lint``
and the vLLM backends all resolve a ``speculative_config`` through
:func:`resolve_speculative`, so they agree on what a configuration means.

Rules (vLLM 0.33, ``rejection_sample_method="fly"``): ``num_speculative_tokens`` K >= 2;
``fly_window_size`` W >= 1 and W < K, unset meaning ``min(6, K - 1)``;
``fly_entropy_threshold`` (default 0.3, nats) and ``fly_entropy_top_k`` (default 3, > 0,
capped at the vocabulary size by the engine). With the default window and K <= 7, only draft
position 0 can ever be deferred, because a rejection at position i is deferred only when
``i + W < K``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = [
    "DRAFT_SAMPLE_METHODS",
    "FLY_KEYS",
    "FLY_LOSSY_WARNING",
    "LOSSY_METHODS",
    "REJECTION_SAMPLE_METHODS",
    "SPECULATIVE_KEYS",
    "SPECULATIVE_METHODS",
    "default_fly_window",
    "is_lossy",
    "resolve_speculative",
]

#: Logged once by vLLM 0.33 (and by the reference engine) when FLy is enabled.
FLY_LOSSY_WARNING = (
    "FLy verification is a lossy speculative decoding method and may degrade model outputs."
)

SPECULATIVE_METHODS = (
    "draft_model",
    "eagle",
    "eagle3",
    "mtp",
    "ngram",
    "dflash",
    "dspark",
    "suffix",
)
REJECTION_SAMPLE_METHODS = ("standard", "fly", "block", "synthetic")
LOSSY_METHODS = frozenset({"fly", "synthetic"})
DRAFT_SAMPLE_METHODS = ("greedy", "probabilistic")
FLY_KEYS = ("fly_window_size", "fly_entropy_threshold", "fly_entropy_top_k")
FLY_DEFAULT_THRESHOLD = 0.3
FLY_DEFAULT_TOP_K = 3
#: Keys of vLLM's ``speculative_config`` that qualgate understands.
SPECULATIVE_KEYS = (
    "method",
    "model",
    "num_speculative_tokens",
    "rejection_sample_method",
    "draft_sample_method",
    *FLY_KEYS,
)


def default_fly_window(num_speculative_tokens: int) -> int:
    """vLLM 0.33's default ``fly_window_size``: ``min(6, K - 1)``."""
    return min(6, num_speculative_tokens - 1)


def is_lossy(speculative: Mapping[str, Any] | None) -> bool:
    """Whether a (raw or resolved) speculative config uses a lossy verifier."""
    if not speculative:
        return False
    return speculative.get("rejection_sample_method", "standard") in LOSSY_METHODS


def _int(name, value, *, minimum):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return value


def resolve_speculative(
    speculative: Mapping[str, Any] | None, *, allow_unknown: bool = False
) -> dict[str, Any] | None:
    """Validate a ``speculative_config`` and fill in vLLM 0.33's defaults.

    Parameters
    ----------
    speculative : mapping or None
        vLLM ``speculative_config`` keys (:data:`SPECULATIVE_KEYS`). ``None`` or an empty
        mapping means target-only decoding and resolves to ``None``.
    allow_unknown : bool
        Keep keys qualgate does not know instead of rejecting them.

    Returns
    -------
    dict or None
        A new dict with every key of :data:`SPECULATIVE_KEYS` that applies, defaults
        resolved. FLy keys are present only when the method is ``fly``: elsewhere they have
        no effect and are dropped, so that they cannot change the config id.

    Raises
    ------
    ValueError
        Naming the key and the value, with the valid options.
    """
    if not speculative:
        return None
    if not isinstance(speculative, Mapping):
        raise ValueError(f"speculative_config must be a mapping, got {speculative!r}")
    unknown = sorted(set(speculative) - set(SPECULATIVE_KEYS))
    if unknown and not allow_unknown:
        raise ValueError(
            f"unknown speculative_config key(s) {unknown}; valid keys: {list(SPECULATIVE_KEYS)}"
        )
    out: dict[str, Any] = {k: speculative[k] for k in unknown}

    method = speculative.get("method", "draft_model" if speculative.get("model") else None)
    if method not in SPECULATIVE_METHODS:
        raise ValueError(
            f"speculative_config method must be one of {list(SPECULATIVE_METHODS)}, got {method!r}"
        )
    out["method"] = method
    if speculative.get("model") is not None:
        out["model"] = str(speculative["model"])
    if method == "draft_model" and "model" not in out:
        raise ValueError("speculative_config method 'draft_model' needs 'model' (the drafter)")

    if "num_speculative_tokens" not in speculative:
        raise ValueError("speculative_config needs 'num_speculative_tokens'")
    k = _int("num_speculative_tokens", speculative["num_speculative_tokens"], minimum=1)
    out["num_speculative_tokens"] = k

    rsm = speculative.get("rejection_sample_method", "standard")
    if rsm not in REJECTION_SAMPLE_METHODS:
        raise ValueError(
            "rejection_sample_method must be one of "
            f"{list(REJECTION_SAMPLE_METHODS)}, got {rsm!r}"
        )
    out["rejection_sample_method"] = rsm

    dsm = speculative.get("draft_sample_method", "greedy")
    if dsm not in DRAFT_SAMPLE_METHODS:
        raise ValueError(
            f"draft_sample_method must be one of {list(DRAFT_SAMPLE_METHODS)}, got {dsm!r}"
        )
    out["draft_sample_method"] = dsm

    if rsm == "fly":
        if k < 2:
            raise ValueError(
                f"FLy requires num_speculative_tokens >= 2, got {k!r}"
            )
        w = speculative.get("fly_window_size")
        w = default_fly_window(k) if w is None else _int("fly_window_size", w, minimum=1)
        if w >= k:
            raise ValueError(
                f"fly_window_size must be smaller than num_speculative_tokens ({k}), got {w!r}"
            )
        tau = speculative.get("fly_entropy_threshold", FLY_DEFAULT_THRESHOLD)
        if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not math.isfinite(tau):
            raise ValueError(f"fly_entropy_threshold must be a finite number, got {tau!r}")
        if tau < 0:
            raise ValueError(f"fly_entropy_threshold must be >= 0, got {tau!r}")
        top_k = _int(
            "fly_entropy_top_k",
            speculative.get("fly_entropy_top_k", FLY_DEFAULT_TOP_K),
            minimum=1,
        )
        out.update(
            fly_window_size=w, fly_entropy_threshold=float(tau), fly_entropy_top_k=top_k
        )
    return out
