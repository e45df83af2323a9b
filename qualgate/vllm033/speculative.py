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
import re
from collections.abc import Mapping
from typing import Any

from qualgate.vllm033.rules import DEFAULT_RELEASE, cite, rule, rules_of

__all__ = [
    "DRAFT_SAMPLE_METHODS",
    "FLY_KEYS",
    "FLY_LOSSY_WARNING",
    "LOSSLESS_METHODS",
    "LOSSY_METHODS",
    "REJECTION_SAMPLE_METHODS",
    "SPECULATIVE_KEYS",
    "SPECULATIVE_METHODS",
    "default_fly_window",
    "is_lossy",
    "normalise_speculative",
    "resolve_speculative",
]

#: Logged once by vLLM 0.33 (and by the reference engine) when FLy is enabled.
FLY_LOSSY_WARNING = "FLy verification is a lossy speculative decoding method and may degrade model outputs."

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
#: The verifiers that may change answers, and those that keep the target distribution; a name in
#: neither is treated as lossy wherever evidence is at stake (fail closed).
LOSSY_METHODS = frozenset({"fly", "synthetic"})
LOSSLESS_METHODS = frozenset({"standard", "block"})
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


# --------------------------------------------------------------------------- vLLM's reading

#: the type of each SpeculativeConfig field qualgate reads (vllm/config/speculative.py:406-660)
_FIELD_KINDS = {
    "num_speculative_tokens": "int",
    "model": "str?",
    "method": "method?",
    "rejection_sample_method": "rsm",
    "draft_sample_method": "dsm",
    "fly_window_size": "int?",
    "fly_entropy_threshold": "float",
    "fly_entropy_top_k": "int",
    "draft_tensor_parallel_size": "int?",
    "tensor_parallel_size": "int?",
    "use_heterogeneous_vocab": "bool",
    "use_local_argmax_reduction": "bool",
    "parallel_drafting": "bool",
    "suffix_decoding_max_tree_depth": "int",
    "prompt_lookup_max": "int?",
    "prompt_lookup_min": "int?",
    "synthetic_acceptance_length": "float?",
}
#: a string pydantic's lax mode reads as an int (pydantic-core 2.x, checked against
#: ``TypeAdapter(int).validate_python`` in tests/ci/test_read_whole.py): ASCII digits with single
#: underscores between them, an optional ``.0...`` (``"8."`` and a full-width ``"８"`` are refused);
#: only ASCII whitespace is taken around it (other whitespace: refused, where pydantic may accept)
_INT_TEXT = re.compile(r"^[ \t\n\r\f\v]*[+-]?[0-9]+(?:_[0-9]+)*(?:\.0+)?[ \t\n\r\f\v]*$")
_TRUE = {"1", "on", "t", "true", "y", "yes"}
_FALSE = {"0", "off", "f", "false", "n", "no"}


def _lax(name: str, kind: str, value: Any, release: str = DEFAULT_RELEASE) -> Any:
    """``value`` as pydantic's lax mode validates it for a field of ``kind`` (rule
    ``spec-lax-types``). Where qualgate is not sure pydantic accepts a spelling, it refuses."""
    if kind.endswith("?"):
        if value is None:
            return None
        kind = kind[:-1]
    bad = ValueError(f"{name}: vLLM cannot read {value!r} as {kind.replace('?', '')}")
    if kind == "int":
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, int):
            return value
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)
        if isinstance(value, str) and _INT_TEXT.match(value):
            return int(value.strip().split(".")[0])
        raise bad
    if kind == "float":
        if isinstance(value, (bool, int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                raise bad from None
        raise bad
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, float)) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
        raise bad
    if kind == "str":
        if isinstance(value, str):
            return value
        raise bad
    allowed = rule("spec-method-literal", release).data[
        {"method": "methods", "rsm": "rejection_sample_methods", "dsm": "draft_sample_methods"}[kind]
    ]
    if isinstance(value, str) and value in allowed:
        return value
    raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r} ({cite('spec-method-literal', release)})")


def _is_custom_proposer_path(model: str | None) -> bool:
    """vLLM's test for a dotted import path given as the drafter (rule ``spec-method-infer``)."""
    if model is None or model.startswith(("http://", "https://", "file://")) or "/" in model:
        return False
    parts = model.split(".")
    return len(parts) >= 2 and all(p.isidentifier() for p in parts)


def normalise_speculative(
    speculative: Mapping[str, Any], *, drafter_model_type: str | None = None, release: str = DEFAULT_RELEASE
) -> dict[str, Any]:
    """A raw ``speculative_config`` as vLLM ``release`` (``"0.33"``; :data:`~qualgate.vllm033.rules.RELEASES`)
    reads it, before qualgate's defaults: each rule below is that release's row.

    ``drafter_model_type``: the ``model_type`` of the drafter's config.json, which vLLM reads
    and qualgate cannot (rule ``spec-drafter-config``); ``None``: not known.

    Applies, in vLLM's order (rules of :mod:`qualgate.vllm033.rules`): ``-`` to ``_`` in keys
    (``spec-key-hyphens``), the refusal of keys that are not SpeculativeConfig fields
    (``spec-extra-forbid``), pydantic's lax types (``spec-lax-types``) and the field bounds
    that hold whatever the method (``spec-field-bounds``), method inference from the drafter
    (``spec-method-infer``, ``spec-mtp-alias``, ``spec-method-by-name``), the drafter
    requirement (``spec-model-needed``) and the default K (``spec-k-default``).

    Raises ``ValueError`` naming the key, the value and the vLLM rule.
    """
    spec: dict[str, Any] = {}
    for key, value in speculative.items():
        spec[str(key).replace("-", "_")] = value  # later spellings win, as in vLLM
    rules = rules_of(release)
    fields = rules["spec-extra-forbid"].data["fields"]
    extra = sorted(k for k in spec if k not in fields)
    if extra:
        raise ValueError(
            f"vLLM {release} refuses speculative_config key(s) {extra}: not fields of "
            f"SpeculativeConfig ({cite('spec-extra-forbid', release)})"
        )
    for key, kind in _FIELD_KINDS.items():
        if key in spec:
            spec[key] = _lax(key, kind, spec[key], release)
    if spec.get("tensor_parallel_size") is not None:  # rule spec-tp-in-spec
        raise ValueError(
            "'tensor_parallel_size' is not a valid argument in the "
            "speculative_config. Please pass 'draft_tensor_parallel_size' instead."
        )
    for key, (op, bound) in rules["spec-field-bounds"].data["bounds"].items():
        v = spec.get(key)
        if v is not None and not (v > bound if op == "gt" else v >= bound):
            raise ValueError(
                f"{key} must be {'>' if op == 'gt' else '>='} {bound}, got {v!r} ({cite('spec-field-bounds', release)})"
            )

    model, method = spec.get("model"), spec.get("method")
    # 0.34 (rule spec-method-infer of 0.34): a drafter without a method is detected from its
    # checkpoint, which qualgate cannot read; the method is kept as draft_model here and
    # method_unknown_offline() says it is not known
    from_checkpoint = "spec-method-infer" in rules and rules["spec-method-infer"].data.get("from_checkpoint")
    methods = rules["spec-method-literal"].data["methods"]
    if method is None:
        if "custom_class" in methods and _is_custom_proposer_path(model):
            method = "custom_class"
        elif model in ("ngram", "[ngram]"):
            method = "ngram"
        else:
            method = "draft_model"
    if method in methods and method.endswith("_mtp"):
        method = "mtp"  # spec-mtp-alias
    needs = rules["spec-model-needed"].data
    if model is None and method not in needs["self_drafting"] + needs["model_free"]:
        raise ValueError(
            f"num_speculative_tokens was provided but without speculative model. ({cite('spec-model-needed', release)})"
        )
    explicit = ("eagle", "eagle3", "dflash", "dspark", *needs["model_free"], "custom_class")
    if model is not None and method not in explicit and "spec-method-by-name" in rules:
        for part, named in rules["spec-method-by-name"].data["by_name"]:
            if part in model.lower():
                method = named
                break
    if (
        drafter_model_type is not None
        and model is not None
        and method not in explicit
        and "spec-drafter-config" in rules
        and not from_checkpoint
    ):
        drafter = rules["spec-drafter-config"].data
        typ = "gemma4_mtp" if drafter_model_type in drafter["gemma4_assistants"] else drafter_model_type
        if typ in drafter["mtp_model_types"]:
            method = "mtp"
        method = drafter.get("by_model_type", {}).get(typ, method)  # 0.32: medusa, mlp_speculator
    spec["method"] = method
    _checks_of_the_method(spec, release)
    if spec.get("num_speculative_tokens") is None:
        k_default = rules["spec-k-default"].data
        if method == "suffix":
            depth = spec.get("suffix_decoding_max_tree_depth", k_default["suffix_default"])
            cap = k_default.get("suffix_cap")  # 0.34: min(8, depth)
            spec["num_speculative_tokens"] = depth if cap is None or not isinstance(depth, int) else min(cap, depth)
        else:
            raise ValueError(
                "num_speculative_tokens is not set: vLLM takes it from the drafter's config "
                "(n_predict, or block_size for dspark), which qualgate cannot read, and "
                "otherwise refuses the config; set it explicitly "
                f"({cite('spec-k-default', release)})"
            )
    return spec


def _checks_of_the_method(spec: dict[str, Any], release: str = DEFAULT_RELEASE) -> None:
    """vLLM's refusals that depend on the method and verifier (rules ``spec-prompt-lookup``,
    ``synthetic-rates``, ``spec-attention-backend``)."""
    if spec["method"] == "ngram":
        lo, hi = spec.get("prompt_lookup_min"), spec.get("prompt_lookup_max")
        lo, hi = (lo if lo is not None else hi), (hi if hi is not None else lo)
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(
                f"prompt_lookup_min={lo} must be <= prompt_lookup_max={hi} ({cite('spec-prompt-lookup', release)})"
            )
    if spec.get("rejection_sample_method", "standard") != "synthetic" and any(
        spec.get(k) is not None for k in ("synthetic_acceptance_rates", "synthetic_acceptance_length")
    ):
        raise ValueError(
            "synthetic_acceptance_rates / synthetic_acceptance_length are only valid with "
            f"rejection_sample_method='synthetic' ({cite('synthetic-rates', release)})"
        )
    backend = spec.get("attention_backend")
    if isinstance(backend, str) and backend.lower() != "auto":
        if backend.upper() not in rule("cli-attention-backend", release).data["members"]:
            raise ValueError(
                f"attention_backend {backend!r} is not a member of AttentionBackendEnum "
                f"({cite('spec-attention-backend', release)})"
            )


def resolve_speculative(
    speculative: Mapping[str, Any] | None, *, allow_unknown: bool = False, release: str = DEFAULT_RELEASE
) -> dict[str, Any] | None:
    """Validate a ``speculative_config`` and fill in vLLM 0.33's defaults.

    Parameters
    ----------
    speculative : mapping or None
        vLLM ``speculative_config`` keys (:data:`SPECULATIVE_KEYS`). ``None`` or an empty
        mapping means target-only decoding and resolves to ``None``.
    allow_unknown : bool
        Keep keys qualgate does not know instead of rejecting them.
    release : str
        The vLLM minor version whose reading applies (:func:`normalise_speculative`).

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
    speculative = normalise_speculative(speculative, release=release)
    unknown = sorted(set(speculative) - set(SPECULATIVE_KEYS))
    if unknown and not allow_unknown:
        raise ValueError(
            f"speculative_config key(s) {unknown} are valid for vLLM but not modelled by "
            f"qualgate; modelled keys: {list(SPECULATIVE_KEYS)}"
        )
    out: dict[str, Any] = {k: speculative[k] for k in unknown}

    method = speculative["method"]
    if method not in SPECULATIVE_METHODS:
        raise ValueError(
            f"speculative_config method {method!r} is valid for vLLM 0.33 but not one "
            f"qualgate models {list(SPECULATIVE_METHODS)}"
        )
    out["method"] = method
    if speculative.get("model") is not None:
        out["model"] = str(speculative["model"])
    k = _int("num_speculative_tokens", speculative["num_speculative_tokens"], minimum=1)
    out["num_speculative_tokens"] = k

    rsm = speculative.get("rejection_sample_method", "standard")
    if rsm not in REJECTION_SAMPLE_METHODS:
        raise ValueError(f"rejection_sample_method must be one of {list(REJECTION_SAMPLE_METHODS)}, got {rsm!r}")
    out["rejection_sample_method"] = rsm

    dsm = speculative.get("draft_sample_method", "greedy")
    if dsm not in DRAFT_SAMPLE_METHODS:
        raise ValueError(f"draft_sample_method must be one of {list(DRAFT_SAMPLE_METHODS)}, got {dsm!r}")
    out["draft_sample_method"] = dsm

    if rsm == "fly":  # rule fly-rules
        if k < 2:
            raise ValueError(f"FLy requires num_speculative_tokens >= 2, got {k!r}")
        w = speculative.get("fly_window_size")
        w = default_fly_window(k) if w is None else _int("fly_window_size", w, minimum=1)
        if w >= k:
            raise ValueError(f"fly_window_size must be smaller than num_speculative_tokens ({k}), got {w!r}")
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
        out.update(fly_window_size=w, fly_entropy_threshold=float(tau), fly_entropy_top_k=top_k)
    return out
