"""``qualgate lint``: what a speculative-decoding serving config really does under the vLLM
release it runs (0.32, 0.33 or 0.34: :mod:`qualgate.vllm033.rules`).

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
    The vLLM release refuses to start with this config (its own message where known).
``no-effect``
    Settings that change nothing, e.g. ``fly_*`` keys without ``fly``.
``not-modelled``
    A method or key qualgate's config id does not model: ``qualgate check`` cannot bind
    evidence to such a config (warning when lossy, info otherwise).
``runner``
    The model runner the server's environment selects (``VLLM_USE_V2_MODEL_RUNNER``, rule
    ``runner-v1-v2``): on 0.33 ``0`` runs ModelRunner V1 and its FLy implementation (info); on
    0.34, which removed V1, any value but ``1`` is refused (``vllm-rejects``) and ``1`` has no effect.

Every rule is that of the vLLM release the config runs (:func:`qualgate.ci.deployment_release`:
``--vllm-version`` or the version its files state; 0.33 when neither says, with a note):
a key 0.34 removed is refused on 0.34, one it added is refused on 0.33.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from qualgate.vllm033.rules import DEFAULT_RELEASE, RELEASES, cite, rules_of
from qualgate.vllm033.serving import ServingConfig, read_serving_config
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

__all__ = ["RULES", "SEVERITIES", "Finding", "LintReport", "lint", "lint_config", "max_topk_entropy"]

SEVERITIES = ("info", "warning", "error")

RULES = {
    "lossy-verification": "a lossy verifier (fly: warning; synthetic: error)",
    "block-acts-as-standard": "block verification behaves as standard on V1 and for greedy requests",
    "fly-implicit-window": "FLy without an explicit fly_window_size",
    "fly-first-position-only": "a FLy window that lets only draft position 0 be deferred",
    "fly-threshold-unreachable": "an entropy threshold no top-k entropy can reach",
    "vllm-rejects": "a config the vLLM release refuses",
    "no-effect": "settings that change nothing",
    "not-modelled": "a method or key outside qualgate's config id",
    "runner": "the model runner the server's environment selects",
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
    #: the file where the setting is, when not the config given (a ``--config`` YAML, a compose override)
    file: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "key": self.key,
            "line": self.line,
            "file": self.file,
        }


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


def lint_config(cfg: ServingConfig, *, drafter_model_type: str | None = None, release: str | None = None) -> LintReport:
    """Lint one serving config (see the module docstring for the rules).

    ``release``: the vLLM minor version whose rules apply (``"0.34"``); ``None``: the one
    :func:`~qualgate.ci.deployment_release` finds in the config, else 0.33 (with a note).

    ``drafter_model_type``: the ``model_type`` of the drafter's config.json, which decides the
    method vLLM runs when the config states none (rule ``spec-drafter-config``).

    Each step is one function, named for the rule it applies (a row of
    :data:`qualgate.vllm033.rules.TABLE`, or one of :data:`RULES`), in the order of the findings.
    """
    from ._release import deployment_release

    if release is None:
        found = deployment_release(cfg, required=False)
        release = found.minor if found else DEFAULT_RELEASE
        note = (
            f"vLLM {found.version} ({found.source}): its rules apply"
            if found
            else f"no vLLM version stated (an image tag, a pinned requirement, a version field or "
            f"--vllm-version): linted with vLLM {RELEASES[release]}'s rules"
        )
    else:  # given (--vllm-version, or check's release): nothing to say
        note = None
    lint = _Lint(cfg, drafter_model_type=drafter_model_type, release=release)
    lint.notes += [note] if note else []
    _cli_config_equals(lint)
    _runner(lint)
    if cfg.speculative:
        _read_speculative(lint)
        for step in (
            _spec_method_by_name,
            _spec_method_by_arch,
            _spec_drafter_config,
            _spec_k_default,
            _fly_rules,
            _synthetic_rates,
            _hetero_vocab,
            _not_modelled,
            _resolve,
            _lossy_verification,
            _fly_window,
            _fly_threshold_unreachable,
            _no_effect,
            _config_id,
        ):
            step(lint)
    elif cfg.model:
        lint.cid = cfg.config_id()
    order = {s: i for i, s in enumerate(SEVERITIES)}
    findings = tuple(sorted(lint.out, key=lambda f: (-order[f.severity], f.line or 0)))
    return LintReport(cfg, findings, lint.resolved, lint.cid, lint.lossy, tuple(dict.fromkeys(lint.notes)))


@dataclass
class _Lint:
    """What :func:`lint_config` has found so far about one config."""

    cfg: ServingConfig
    drafter_model_type: str | None = None
    release: str = DEFAULT_RELEASE  #: the vLLM minor version whose rules apply
    out: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)  #: the speculative config, keys with underscores
    norm: dict[str, Any] | None = None  #: as vLLM reads it (None: it cannot be read)
    spec: dict[str, Any] = field(default_factory=dict)  #: ``norm`` where read, else ``raw``
    rsm: str = "standard"
    lossy: bool = False
    rejected: bool = False  #: vLLM refuses it, or qualgate cannot resolve it
    unknown: list[str] = field(default_factory=list)  #: keys outside qualgate's config id
    modelled: bool = False
    resolved: dict[str, Any] | None = None
    cid: str | None = None

    def __post_init__(self):
        self.notes = list(self.cfg.notes)

    def rule(self, rule_id):
        """The row of this release (``None``: it does not hold there)."""
        return rules_of(self.release).get(rule_id)

    def cite(self, rule_id) -> str:
        return cite(rule_id, self.release)

    def add(self, rule_id, severity, message, key=None):
        where = self.cfg.file_of(key) if key else None
        self.out.append(
            Finding(
                rule_id,
                severity,
                message,
                key,
                self.cfg.line_of(key) if key else None,
                where if where != self.cfg.path else None,
            )
        )

    def reject(self, message, key):
        self.rejected = True
        self.add("vllm-rejects", "error", message, key)

    @property
    def K(self) -> int | None:
        K = self.spec.get("num_speculative_tokens")
        return K if isinstance(K, int) and not isinstance(K, bool) else None

    @property
    def method(self):
        return self.spec.get("method")


def _k_of(key):
    return f"speculative_config.{key}"


def _cli_config_equals(lint: _Lint) -> None:
    """Rule ``cli-config-equals``: a ``--config=FILE`` that vLLM never reads."""
    for note in lint.cfg.notes:
        if "--config" in note:
            lint.add("no-effect", "warning", note, "--config=")


def _runner(lint: _Lint) -> None:
    """Rule ``runner-v1-v2``: the model runner ``VLLM_USE_V2_MODEL_RUNNER`` selects, read from the
    server's environment (:attr:`ServingConfig.environment`)."""
    row = lint.rule("runner-v1-v2")
    name = row.data["variable"]
    value = lint.cfg.environment.get(name)
    if value is None:
        return
    key, where = f"environment.{name}", lint.cite("runner-v1-v2")
    if row.data.get("removed"):  # 0.34: ModelRunner V1 is gone; the variable is only checked
        if str(value).strip() != "1":
            lint.reject(
                f"{name}={value} is no longer supported: Model Runner V1 has been removed. Unset this "
                f"variable. (vLLM {lint.release} refuses to start: {where})",
                key,
            )
        else:
            lint.add(
                "no-effect",
                "warning",
                f"{name}=1 is redundant on vLLM {lint.release}: ModelRunner V1 was removed and the variable "
                f"no longer selects a runner; vLLM logs that it can be unset ({where}).",
                key,
            )
        return
    try:
        v2 = bool(int(str(value)))
    except ValueError:
        lint.reject(f"{name}={value!r}: vLLM {lint.release} reads it with int() and fails ({where}).", key)
        return
    if v2:
        lint.add("runner", "info", f"{name}=1 selects ModelRunner V2 ({where}).", key)
    else:
        lint.add(
            "runner",
            "info",
            f"{name}=0 selects ModelRunner V1 ({where}): "
            + (
                "FLy runs as v1/sample/rejection_sampler.py and v1/spec_decode/fly.py implement it, with V1's "
                "sampling noise (the reference engine's vllm-v1 noise mode mirrors it); block verification "
                "behaves as standard there."
                if lint.rule("fly-rules")
                else "the CPU build 0.32 has no FLy."
            ),
            key,
        )


def _read_speculative(lint: _Lint) -> None:
    """The speculative config as vLLM reads it (rules spec-key-hyphens, spec-model-needed,
    spec-k-default, spec-extra-forbid, spec-field-bounds, ...)."""
    raw = lint.raw = {str(k).replace("-", "_"): v for k, v in lint.cfg.speculative.items()}  # rule spec-key-hyphens
    lint.rsm = raw.get("rejection_sample_method", "standard")
    lint.lossy = lint.rsm in LOSSY_METHODS
    if not _spec_model_needed(lint):
        try:
            lint.norm = normalise_speculative(raw, drafter_model_type=lint.drafter_model_type, release=lint.release)
        except ValueError as exc:  # rules spec-extra-forbid, spec-field-bounds, ...
            msg = str(exc)
            key = next((k for k in sorted(raw, key=len, reverse=True) if k in msg), None)
            lint.reject(
                msg if msg.endswith(")") or msg.endswith(".") else msg + ".",
                _k_of(key) if key else "speculative_config",
            )
    lint.spec = lint.norm or raw


def _spec_model_needed(lint: _Lint) -> bool:
    """No ``num_speculative_tokens``: vLLM takes it from a drafter's ``n_predict``, or refuses
    without one (rules spec-model-needed, spec-k-default); True when it is not set."""
    raw, needs = lint.raw, lint.rule("spec-model-needed").data
    if raw.get("num_speculative_tokens") is not None or raw.get("method") == "suffix":
        return False
    if raw.get("model") is None and raw.get("method", "draft_model") not in (
        *needs["self_drafting"],
        *needs["model_free"],
    ):
        # no drafter to take n_predict from (vllm/config/speculative.py)
        lint.reject(
            "num_speculative_tokens must be provided with speculative model unless the "
            "draft model config contains an n_predict parameter. (no drafter model: "
            f"{lint.cite('spec-model-needed')})",
            "speculative_config",
        )
    else:  # vLLM may take K from the drafter's n_predict (MTP, EAGLE heads)
        lint.rejected = True
        lint.add(
            "not-modelled",
            "warning",
            "num_speculative_tokens is not set: vLLM takes it from the draft model's "
            "n_predict (block_size for dspark) if it has one and otherwise refuses the "
            "config ('num_speculative_tokens must be provided with speculative model "
            "unless the draft model config contains an n_predict parameter.'); qualgate "
            "cannot resolve the config or compute its id without it. Set it explicitly "
            f"({lint.cite('spec-k-default')}).",
            "speculative_config",
        )
    return True


def _spec_method_by_name(lint: _Lint) -> None:
    """Rule ``spec-method-by-name``: the method vLLM runs, from the drafter's name or an alias."""
    if (
        lint.norm is not None
        and lint.raw.get("method") != lint.method
        and not method_unknown_offline(lint.raw, lint.norm, lint.drafter_model_type, lint.release)
    ):
        by_name = lint.raw.get("method") in (None, "draft_model")
        how = "from the drafter's name" if by_name else "as its alias"
        lint.notes.append(
            f"vLLM runs method {lint.method!r} ({how}; "
            f"{lint.cite('spec-method-by-name' if by_name else 'spec-mtp-alias')}); "
            "the config id is computed with it"
        )


def _spec_method_by_arch(lint: _Lint) -> None:
    """Rule ``spec-method-by-arch``: what vLLM decides from the drafter's config.json."""
    if lint.norm is not None and lint.method == "draft_model" and lint.rule("spec-method-by-arch"):
        lint.notes.append(
            f"vLLM {lint.release} also switches a draft_model drafter to dflash, dspark or mtp "
            "by its config.json (architectures, model_type), which qualgate cannot "
            f"read ({lint.cite('spec-method-by-arch')})"
        )


def stated_method(cfg: ServingConfig, drafter_model_type: str | None, release: str = DEFAULT_RELEASE) -> ServingConfig:
    """``cfg`` with the method vLLM runs written out when it follows from ``drafter_model_type``
    (rule ``spec-drafter-config``), and the K ``release`` uses when the config leaves it out
    (rule ``spec-k-default``: suffix's default is 24 on 0.33, 8 on 0.34), so that the config id
    is computed with what runs."""
    raw = {str(k).replace("-", "_"): v for k, v in (cfg.speculative or {}).items()}
    if not raw or (not drafter_model_type and raw.get("num_speculative_tokens") is not None):
        return cfg
    norm = normalise_speculative(raw, drafter_model_type=drafter_model_type, release=release)
    stated = {**raw, "num_speculative_tokens": norm["num_speculative_tokens"]}
    return dataclasses.replace(cfg, speculative={**stated, "method": norm["method"]} if drafter_model_type else stated)


def method_unknown_offline(
    raw: dict[str, Any], norm: dict[str, Any], drafter_model_type: str | None, release: str = DEFAULT_RELEASE
) -> bool:
    """Rule ``spec-drafter-config``: no ``method`` is stated, a drafter is named, its name does
    not decide the method, and the drafter's ``model_type`` (which does) is not given. On 0.34
    (rule ``spec-method-infer``) vLLM detects the method of any drafter without one from its
    checkpoint, so neither its name nor a model_type decides it."""
    if norm.get("method") != "draft_model" or raw.get("method") is not None:
        return False
    infer = rules_of(release).get("spec-method-infer")
    if infer is not None and infer.data.get("from_checkpoint"):
        return norm.get("model") is not None
    return drafter_model_type is None


def _spec_drafter_config(lint: _Lint) -> None:
    """Rule ``spec-drafter-config``: the method vLLM runs can depend on the drafter's config.json."""
    if lint.norm is None:
        return
    if method_unknown_offline(lint.raw, lint.norm, lint.drafter_model_type, lint.release):
        lint.rejected = True  # no config id: the method is not known
        if lint.rule("spec-drafter-config") is None:  # 0.34: detected from the checkpoint
            why = (
                f"no method is set: vLLM {lint.release} detects it from the draft checkpoint (the "
                "speculator its config declares, else its name), which qualgate cannot read, so it "
                f"gives no config id. Set `method` ({lint.cite('spec-method-infer')})."
            )
        else:
            why = (
                f"no method is set: vLLM {lint.release} runs mtp if the drafter's config.json has an MTP "
                "model_type (a gemma4_assistant drafter is rewritten to gemma4_mtp) and draft_model otherwise; "
                "qualgate cannot read config.json, so it gives no config id. Set `method`, or pass "
                f"--drafter-model-type ({lint.cite('spec-drafter-config')})."
            )
        lint.add("not-modelled", "warning" if lint.lossy else "info", why, _k_of("model"))
    elif lint.drafter_model_type and lint.raw.get("method") != lint.method:
        lint.notes.append(
            f"with a drafter of model_type {lint.drafter_model_type!r} vLLM runs method {lint.method!r} "
            f"({lint.cite('spec-drafter-config')}); the config id is computed with it"
        )


def _spec_k_default(lint: _Lint) -> None:
    """Rule ``spec-k-default``: the K vLLM uses when the config leaves it out."""
    if lint.norm is not None and lint.raw.get("num_speculative_tokens") is None:
        lint.notes.append(
            f"num_speculative_tokens is not set: vLLM uses {lint.K} for {lint.method} ({lint.cite('spec-k-default')})"
        )


def _fly_rules(lint: _Lint) -> None:
    """Rule ``fly-rules``: what vLLM refuses of FLy's settings, in its own words (0.32 has no FLy:
    its method literal refuses ``fly`` before)."""
    if lint.norm is None or lint.rsm != "fly" or lint.K is None or lint.rule("fly-rules") is None:
        return
    K, w, fly_msgs = lint.K, lint.spec.get("fly_window_size"), lint.rule("fly-rules").data["messages"]
    if K < 2:
        lint.reject(f"{fly_msgs[0]} (num_speculative_tokens = {K})", _k_of("num_speculative_tokens"))
    elif isinstance(w, int) and w >= K:
        lint.reject(f"{fly_msgs[1]} (fly_window_size = {w}, num_speculative_tokens = {K})", _k_of("fly_window_size"))


def _synthetic_rates(lint: _Lint) -> None:
    """Rule ``synthetic-rates``: the synthetic verifier's rates, and those keys without it."""
    synth = [k for k in SYNTHETIC_KEYS if lint.spec.get(k) is not None]
    if lint.norm is None:
        return
    if lint.rsm == "synthetic":  # the keys without synthetic: normalise_speculative refuses them
        msg = _synthetic_problem(lint.spec, lint.K)
        if msg:
            lint.reject(msg, _k_of(synth[0]) if synth else _k_of("rejection_sample_method"))


def _hetero_vocab(lint: _Lint) -> None:
    """Rule ``hetero-vocab``: what a heterogeneous-vocabulary drafter needs."""
    spec = lint.spec
    if lint.norm is None or not spec.get("use_heterogeneous_vocab") or lint.rule("hetero-vocab") is None:
        return
    problems = (
        lint.method != "draft_model",
        spec.get("draft_sample_method", "greedy") != "greedy",
        bool(spec.get("use_local_argmax_reduction")),
    )
    for bad, msg in zip(problems, lint.rule("hetero-vocab").data["messages"]):
        if bad:
            lint.reject(msg, _k_of("use_heterogeneous_vocab"))


def _not_modelled(lint: _Lint) -> None:
    """What qualgate's config id does not model."""
    if lint.norm is not None:
        lint.unknown = sorted(set(lint.spec) - set(SPECULATIVE_KEYS) - set(SYNTHETIC_KEYS))
    lint.modelled = lint.method in SPECULATIVE_METHODS
    sev = "warning" if lint.lossy else "info"
    if lint.norm is not None and not lint.modelled:
        lint.add(
            "not-modelled",
            sev,
            f"method {lint.method!r} is not one qualgate models {list(SPECULATIVE_METHODS)}: "
            "qualgate check cannot bind evidence to this config.",
            _k_of("method"),
        )
    for key in lint.unknown:
        lint.add(
            "not-modelled",
            sev,
            f"{key!r} is not part of qualgate's config id: qualgate check refuses a lossy "
            f"config with it unless told `--allow-key {key}` (an assertion that it does not "
            "change outputs).",
            _k_of(key),
        )


def _resolve(lint: _Lint) -> None:
    """Everything else vLLM refuses, as qualgate's resolver (which mirrors vLLM) says."""
    if lint.rejected or not lint.modelled:
        return
    try:
        resolved = resolve_speculative(
            stated_method(lint.cfg, lint.drafter_model_type, lint.release).speculative,
            allow_unknown=True,
            release=lint.release,
        )
    except ValueError as exc:
        lint.reject(f"{exc}.", "speculative_config")
    else:
        lint.resolved = {k: v for k, v in resolved.items() if k not in lint.unknown}


def _lossy_verification(lint: _Lint) -> None:
    """Lossy verifiers, and block verification, and what they really do."""
    where = _k_of("rejection_sample_method")
    if lint.rsm == "fly":
        lint.add(
            "lossy-verification",
            "warning",
            "FLy verification is lossy: outputs no longer follow the target model's "
            "distribution. Deploy it only with paired evidence that exactly this config "
            "keeps quality (qualgate check --evidence).",
            where,
        )
    elif lint.rsm == "synthetic":
        lint.add(
            "lossy-verification",
            "error",
            "synthetic verification accepts drafts at preset rates and ignores the target "
            "model: a benchmarking mode whose outputs are not the target's.",
            where,
        )
    elif lint.rsm == "block":
        lint.add(
            "block-acts-as-standard",
            "info",
            "block verification is lossless, but it runs only on the V2 model runner and "
            "for sampled requests: on the V1 runner and for greedy requests (temperature "
            "0) it silently behaves as standard verification, so its speed-up there is "
            "standard's." + _greedy_note(lint.cfg),
            where,
        )


def _fly_window(lint: _Lint) -> None:
    """Rules fly-implicit-window and fly-first-position-only."""
    K, w = lint.K, lint.spec.get("fly_window_size")
    if lint.rsm != "fly" or K is None or K < 2:
        return
    if w is None:
        W = default_fly_window(K)
        lint.add(
            "fly-implicit-window",
            "warning",
            f"fly_window_size is not set: vLLM uses min(6, K - 1) = {W} for K = {K}, "
            f"not the W = {BENCHMARKED_FLY_WINDOW} of the published benchmarks, so "
            "evidence for W = 2 does not cover this config (another config id); and "
            f"since a rejection at position i is deferred only if i + W < K, "
            f"{_positions(K, W)} can ever be deferred"
            + (" (with the default window, for any K <= 7)." if K <= 7 else ".")
            + " Set fly_window_size explicitly.",
            _k_of("rejection_sample_method"),
        )
    elif isinstance(w, int) and 1 <= w == K - 1:
        lint.add(
            "fly-first-position-only",
            "info",
            f"fly_window_size = {w} = K - 1: {_positions(K, w)} can ever be deferred "
            "(a rejection at position i is deferred only if i + W < K).",
            _k_of("fly_window_size"),
        )


def _fly_threshold_unreachable(lint: _Lint) -> None:
    """An entropy threshold above the largest top-k entropy: FLy never defers."""
    if lint.rsm != "fly" or lint.K is None or lint.K < 2:
        return
    tau = lint.spec.get("fly_entropy_threshold", FLY_DEFAULT_THRESHOLD)
    top_k = lint.spec.get("fly_entropy_top_k", FLY_DEFAULT_TOP_K)
    if (
        isinstance(tau, (int, float))
        and not isinstance(tau, bool)
        and isinstance(top_k, int)
        and not isinstance(top_k, bool)
        and top_k >= 1
        and tau > max_topk_entropy(top_k)
    ):
        lint.add(
            "fly-threshold-unreachable",
            "warning",
            f"fly_entropy_threshold = {tau} exceeds the largest possible top-{top_k} "
            f"entropy ({max_topk_entropy(top_k):.4f} nats): FLy never defers a "
            "rejection, so it costs an entropy pass and behaves as standard.",
            _k_of("fly_entropy_threshold"),
        )


def _no_effect(lint: _Lint) -> None:
    """``fly_*`` keys without FLy."""
    if lint.rsm == "fly":
        return
    for key in FLY_KEYS:
        if key in lint.spec:
            lint.add(
                "no-effect",
                "warning",
                f"{key} has no effect: rejection_sample_method is {lint.rsm!r}, not 'fly'.",
                _k_of(key),
            )


def _config_id(lint: _Lint) -> None:
    """The config id, for a config qualgate resolves and models fully."""
    if lint.resolved is not None and not lint.unknown and lint.modelled:
        try:
            cfg = stated_method(lint.cfg, lint.drafter_model_type, lint.release)
            lint.cid = cfg.config_id() if cfg.model else None
        except ValueError:
            lint.cid = None


def _greedy_note(cfg: ServingConfig) -> str:
    temp = (cfg.sampling or {}).get("temperature")
    if isinstance(temp, (int, float)) and temp < 1e-5:
        return " This config samples greedily (temperature 0): block verification never applies."
    return ""


def _synthetic_problem(spec, K) -> str | None:
    """vLLM 0.33's checks of the synthetic verifier's rates, with its messages."""
    rates, length = spec.get("synthetic_acceptance_rates"), spec.get("synthetic_acceptance_length")
    if (rates is None) == (length is None):
        return (
            "rejection_sample_method='synthetic' requires exactly one of "
            "synthetic_acceptance_rates or synthetic_acceptance_length."
        )
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


def lint(
    path,
    *,
    manifests: tuple = (),
    assume_entrypoint: str | None = None,
    drafter_model_type: str | None = None,
    vllm_version: str | None = None,
) -> LintReport:
    """Read a serving config file (:func:`read_serving_config`, with its ``manifests`` and
    ``assume_entrypoint``) and lint it with the rules of the vLLM release it runs
    (``vllm_version``, else the version its files state, else 0.33)."""
    from ._release import deployment_release

    cfg = read_serving_config(path, manifests=manifests, assume_entrypoint=assume_entrypoint)
    found = deployment_release(cfg, vllm_version, required=False) if vllm_version else None
    return lint_config(cfg, drafter_model_type=drafter_model_type, release=found.minor if found else None)
