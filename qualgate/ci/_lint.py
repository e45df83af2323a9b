"""``qualgate lint``: what a speculative-decoding serving config really does under vLLM 0.33.

Each finding has a rule id, a severity (``info`` < ``warning`` < ``error``), the key it is
about and its line in the file. The rules (:data:`RULES`):

``lossy-verification``
    ``rejection_sample_method`` is ``fly`` (warning: deploy it only with paired evidence,
    see ``qualgate check``) or ``synthetic`` (error: it ignores the target model).
``block-acts-as-standard``
    ``block`` verification is lossless, but runs only on the V2 model runner and for sampled
    requests; on the V1 runner and for greedy requests it silently behaves as ``standard``.
``fly-implicit-window``
    FLy without ``fly_window_size``: vLLM uses ``min(6, K - 1)``, not the ``W = 2`` that was
    benchmarked, and with ``K <= 7`` only draft position 0 can ever be deferred.
``fly-first-position-only``
    An explicit window ``W = K - 1``: only draft position 0 can ever be deferred.
``fly-threshold-unreachable``
    ``fly_entropy_threshold`` above the largest top-k entropy: FLy never defers.
``vllm-rejects``
    vLLM 0.33 refuses to start with this config (its own message where known).
``no-effect``
    Settings that change nothing, e.g. ``fly_*`` keys without ``fly``.
``not-modelled``
    A method or key qualgate's config id does not model: ``qualgate check`` cannot bind
    evidence to such a config (warning when lossy, info otherwise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from qualgate.vllm033.speculative import (
    FLY_DEFAULT_THRESHOLD,
    FLY_DEFAULT_TOP_K,
    FLY_KEYS,
    LOSSY_METHODS,
    SPECULATIVE_KEYS,
    SPECULATIVE_METHODS,
    default_fly_window,
    normalise_speculative,
    resolve_speculative,
)
from qualgate.vllm033.rules import cite, rule
from qualgate.vllm033.serving import ServingConfig, read_serving_config

__all__ = ["RULES", "SEVERITIES", "Finding", "LintReport", "lint", "lint_config",
           "max_topk_entropy"]

SEVERITIES = ("info", "warning", "error")

RULES = {
    "lossy-verification": "a lossy verifier (fly: warning; synthetic: error)",
    "block-acts-as-standard": "block verification behaves as standard on V1 and for greedy requests",
    "fly-implicit-window": "FLy without an explicit fly_window_size",
    "fly-first-position-only": "a FLy window that lets only draft position 0 be deferred",
    "fly-threshold-unreachable": "an entropy threshold no top-k entropy can reach",
    "vllm-rejects": "a config vLLM 0.33 refuses",
    "no-effect": "settings that change nothing",
    "not-modelled": "a method or key outside qualgate's config id",
}

#: The FLy window of the published benchmarks (vLLM PR #53987 and its docs page).
BENCHMARKED_FLY_WINDOW = 2
#: speculative_config keys of vLLM 0.33 that only the synthetic verifier reads.
SYNTHETIC_KEYS = ("synthetic_acceptance_rates", "synthetic_acceptance_length")


@dataclass(frozen=True)
class Finding:
    """One lint finding."""

    rule: str
    severity: str
    message: str
    key: str | None = None
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "severity": self.severity, "message": self.message,
                "key": self.key, "line": self.line}


@dataclass(frozen=True)
class LintReport:
    """The findings for one config, with its resolved speculative config and id when valid."""

    config: ServingConfig
    findings: tuple[Finding, ...]
    resolved: dict[str, Any] | None
    config_id: str | None
    lossy: bool
    notes: tuple[str, ...] = ()  #: how vLLM resolves what the file leaves implicit

    def at_or_above(self, severity: str) -> tuple[Finding, ...]:
        if severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {list(SEVERITIES)}, got {severity!r}")
        rank = SEVERITIES.index(severity)
        return tuple(f for f in self.findings if SEVERITIES.index(f.severity) >= rank)

    def counts(self) -> dict[str, int]:
        return {s: sum(f.severity == s for f in self.findings) for s in SEVERITIES}

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "qualgate.lint_report",
            "version": 1,
            "config": self.config.to_dict(),
            "config_id": self.config_id,
            "lossy": self.lossy,
            "resolved_speculative_config": self.resolved,
            "counts": self.counts(),
            "findings": [f.to_dict() for f in self.findings],
            "notes": list(self.notes),
        }


def max_topk_entropy(k: int) -> float:
    """The largest value of FLy's entropy ``-sum p_j ln p_j`` over the ``k`` largest probabilities.

    The probabilities are not renormalised and sum to at most 1, so the maximum over
    ``s = sum p_j <= 1`` of ``s ln(k / s)`` is ``ln k`` for ``k >= 3`` (all equal to ``1/k``)
    and ``k / e`` for ``k <= 2`` (at ``s = k / e``).

    >>> round(max_topk_entropy(3), 4), round(max_topk_entropy(1), 4)
    (1.0986, 0.3679)
    """
    return math.log(k) if k / math.e >= 1 else k / math.e


def _positions(k: int, w: int) -> str:
    last = k - w - 1
    return "only the first draft position (0)" if last == 0 else f"only draft positions 0-{last}"


def lint_config(cfg: ServingConfig) -> LintReport:
    """Lint one serving config (see the module docstring for the rules)."""
    out: list[Finding] = []
    spec = cfg.speculative

    def add(rule, severity, message, key=None):
        out.append(Finding(rule, severity, message, key, cfg.line_of(key) if key else None))

    def k_of(key):
        return f"speculative_config.{key}"

    resolved = cid = None
    lossy = False
    notes: list[str] = list(cfg.notes)
    for note in cfg.notes:
        if "--config" in note:  # rule cli-config-equals
            add("no-effect", "warning", note, "--config=")
    if spec:
        raw = {str(k).replace("-", "_"): v for k, v in spec.items()}  # rule spec-key-hyphens
        rsm = raw.get("rejection_sample_method", "standard")
        lossy = rsm in LOSSY_METHODS
        rejected = False
        norm = None
        needs = rule("spec-model-needed").data
        no_k = raw.get("num_speculative_tokens") is None and raw.get("method") != "suffix"
        if no_k and raw.get("model") is None and raw.get("method", "draft_model") not in (
                *needs["self_drafting"], *needs["model_free"]):
            rejected = True  # no drafter to take n_predict from (vllm/config/speculative.py)
            add("vllm-rejects", "error",
                "num_speculative_tokens must be provided with speculative model unless the "
                "draft model config contains an n_predict parameter. (no drafter model: "
                f"{cite('spec-model-needed')})", "speculative_config")
        elif no_k:
            rejected = True  # vLLM may take K from the drafter's n_predict (MTP, EAGLE heads)
            add("not-modelled", "warning",
                "num_speculative_tokens is not set: vLLM takes it from the draft model's "
                "n_predict (block_size for dspark) if it has one and otherwise refuses the "
                "config ('num_speculative_tokens must be provided with speculative model "
                "unless the draft model config contains an n_predict parameter.'); qualgate "
                "cannot resolve the config or compute its id without it. Set it explicitly "
                f"({cite('spec-k-default')}).", "speculative_config")
        else:
            try:
                norm = normalise_speculative(raw)
            except ValueError as exc:  # rules spec-extra-forbid, spec-field-bounds, ...
                rejected = True
                msg = str(exc)
                key = next((k for k in sorted(raw, key=len, reverse=True) if k in msg), None)
                add("vllm-rejects", "error", msg if msg.endswith(")") or msg.endswith(".")
                    else msg + ".", k_of(key) if key else "speculative_config")
        spec = norm or raw
        K = spec.get("num_speculative_tokens")
        K = K if isinstance(K, int) and not isinstance(K, bool) else None
        method = spec.get("method")
        if norm is not None and raw.get("method") != method:
            how = ("from the drafter's name" if raw.get("method") is None or
                   raw.get("method") == "draft_model" else "as its alias")
            notes.append(f"vLLM runs method {method!r} ({how}; {cite('spec-method-by-name')}); "
                         "the config id is computed with it")
        if norm is not None and method == "draft_model":
            notes.append("vLLM 0.33 also switches a draft_model drafter to dflash, dspark or mtp "
                         "by its config.json (architectures, model_type), which qualgate cannot "
                         f"read ({cite('spec-method-by-arch')})")
        if norm is not None and raw.get("num_speculative_tokens") is None:
            notes.append(f"num_speculative_tokens is not set: vLLM uses {K} for {method} "
                         f"({cite('spec-k-default')})")

        # --- what vLLM 0.33 refuses, in its own words (rules fly-rules, synthetic-rates, ...)
        fly_msgs = rule("fly-rules").data["messages"]
        if norm is not None and rsm == "fly" and K is not None and K < 2:
            rejected = True
            add("vllm-rejects", "error", f"{fly_msgs[0]} (num_speculative_tokens = {K})",
                k_of("num_speculative_tokens"))
        w = spec.get("fly_window_size")
        if norm is not None and rsm == "fly" and isinstance(w, int) and K is not None \
                and K >= 2 and w >= K:
            rejected = True
            add("vllm-rejects", "error",
                f"{fly_msgs[1]} (fly_window_size = {w}, num_speculative_tokens = {K})",
                k_of("fly_window_size"))
        synth = [k for k in SYNTHETIC_KEYS if spec.get(k) is not None]
        if norm is None:
            pass
        elif rsm == "synthetic":
            msg = _synthetic_problem(spec, K)
            if msg:
                rejected = True
                add("vllm-rejects", "error", msg,
                    k_of(synth[0]) if synth else k_of("rejection_sample_method"))
        elif synth:
            rejected = True
            add("vllm-rejects", "error",
                "synthetic_acceptance_rates / synthetic_acceptance_length are only valid with "
                "rejection_sample_method='synthetic'.", k_of(synth[0]))
        if norm is not None and spec.get("use_heterogeneous_vocab"):
            for bad, msg in zip((
                method != "draft_model",
                spec.get("draft_sample_method", "greedy") != "greedy",
                bool(spec.get("use_local_argmax_reduction")),
            ), rule("hetero-vocab").data["messages"]):
                if bad:
                    rejected = True
                    add("vllm-rejects", "error", msg, k_of("use_heterogeneous_vocab"))

        # --- what qualgate's config id does not model
        unknown = (sorted(set(spec) - set(SPECULATIVE_KEYS) - set(SYNTHETIC_KEYS))
                   if norm is not None else [])
        modelled = method in SPECULATIVE_METHODS
        sev = "warning" if lossy else "info"
        if norm is not None and not modelled:
            add("not-modelled", sev,
                f"method {method!r} is not one qualgate models {list(SPECULATIVE_METHODS)}: "
                "qualgate check cannot bind evidence to this config.", k_of("method"))
        for key in unknown:
            add("not-modelled", sev,
                f"{key!r} is not part of qualgate's config id: qualgate check refuses a lossy "
                f"config with it unless told `--allow-key {key}` (an assertion that it does not "
                "change outputs).", k_of(key))

        # --- everything else vLLM refuses, as qualgate's resolver (which mirrors vLLM) says
        if not rejected and modelled:
            try:
                resolved = resolve_speculative(raw, allow_unknown=True)
            except ValueError as exc:
                rejected = True
                add("vllm-rejects", "error", f"{exc}.", "speculative_config")
            else:
                resolved = {k: v for k, v in resolved.items() if k not in unknown}

        # --- lossy verifiers and what they really do
        if rsm == "fly":
            add("lossy-verification", "warning",
                "FLy verification is lossy: outputs no longer follow the target model's "
                "distribution. Deploy it only with paired evidence that exactly this config "
                "keeps quality (qualgate check --evidence).", k_of("rejection_sample_method"))
        elif rsm == "synthetic":
            add("lossy-verification", "error",
                "synthetic verification accepts drafts at preset rates and ignores the target "
                "model: a benchmarking mode whose outputs are not the target's.",
                k_of("rejection_sample_method"))
        elif rsm == "block":
            add("block-acts-as-standard", "info",
                "block verification is lossless, but it runs only on the V2 model runner and "
                "for sampled requests: on the V1 runner and for greedy requests (temperature "
                "0) it silently behaves as standard verification, so its speed-up there is "
                "standard's." + _greedy_note(cfg), k_of("rejection_sample_method"))

        if rsm == "fly" and K is not None and K >= 2:
            tau = spec.get("fly_entropy_threshold", FLY_DEFAULT_THRESHOLD)
            top_k = spec.get("fly_entropy_top_k", FLY_DEFAULT_TOP_K)
            if w is None:
                W = default_fly_window(K)
                add("fly-implicit-window", "warning",
                    f"fly_window_size is not set: vLLM uses min(6, K - 1) = {W} for K = {K}, "
                    f"not the W = {BENCHMARKED_FLY_WINDOW} of the published benchmarks, so "
                    "evidence for W = 2 does not cover this config (another config id); and "
                    f"since a rejection at position i is deferred only if i + W < K, "
                    f"{_positions(K, W)} can ever be deferred"
                    + (" (with the default window, for any K <= 7)." if K <= 7 else ".")
                    + " Set fly_window_size explicitly.", k_of("rejection_sample_method"))
            elif isinstance(w, int) and 1 <= w == K - 1:
                add("fly-first-position-only", "info",
                    f"fly_window_size = {w} = K - 1: {_positions(K, w)} can ever be deferred "
                    "(a rejection at position i is deferred only if i + W < K).",
                    k_of("fly_window_size"))
            if (isinstance(tau, (int, float)) and not isinstance(tau, bool)
                    and isinstance(top_k, int) and not isinstance(top_k, bool) and top_k >= 1
                    and tau > max_topk_entropy(top_k)):
                add("fly-threshold-unreachable", "warning",
                    f"fly_entropy_threshold = {tau} exceeds the largest possible top-{top_k} "
                    f"entropy ({max_topk_entropy(top_k):.4f} nats): FLy never defers a "
                    "rejection, so it costs an entropy pass and behaves as standard.",
                    k_of("fly_entropy_threshold"))

        # --- settings with no effect
        if rsm != "fly":
            for key in FLY_KEYS:
                if key in spec:
                    add("no-effect", "warning",
                        f"{key} has no effect: rejection_sample_method is {rsm!r}, not 'fly'.",
                        k_of(key))

        if resolved is not None and not unknown and modelled:
            try:
                cid = cfg.config_id() if cfg.model else None
            except ValueError:
                cid = None
    elif cfg.model:
        cid = cfg.config_id()

    order = {s: i for i, s in enumerate(SEVERITIES)}
    findings = tuple(sorted(out, key=lambda f: (-order[f.severity], f.line or 0)))
    return LintReport(cfg, findings, resolved, cid, lossy, tuple(dict.fromkeys(notes)))


def _greedy_note(cfg: ServingConfig) -> str:
    temp = (cfg.sampling or {}).get("temperature")
    if isinstance(temp, (int, float)) and temp < 1e-5:
        return " This config samples greedily (temperature 0): block verification never applies."
    return ""


def _synthetic_problem(spec, K) -> str | None:
    """vLLM 0.33's checks of the synthetic verifier's rates, with its messages."""
    rates, length = spec.get("synthetic_acceptance_rates"), spec.get("synthetic_acceptance_length")
    if (rates is None) == (length is None):
        return ("rejection_sample_method='synthetic' requires exactly one of "
                "synthetic_acceptance_rates or synthetic_acceptance_length.")
    if K is None:
        return None
    if rates is not None:
        if not isinstance(rates, list) or len(rates) != K:
            return f"synthetic_acceptance_rates must have length {K}, got {rates}."
        if not all(isinstance(r, (int, float)) and 0.0 <= r <= 1.0 for r in rates):
            return f"synthetic_acceptance_rates entries must be in [0, 1], got {rates}."
        if any(rates[i] > rates[i - 1] for i in range(1, K)):
            return f"synthetic_acceptance_rates must be non-increasing, got {rates}."
        return None
    if not isinstance(length, (int, float)) or not 1.0 <= length <= float(K + 1):
        return f"synthetic_acceptance_length must be in [1, {K + 1}], got {length}."
    return None


def lint(path) -> LintReport:
    """Read a serving config file and lint it."""
    return lint_config(read_serving_config(path))
