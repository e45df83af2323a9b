"""``qualgate check``: may this serving config be deployed, given this evidence?

A lossless config (no speculative decoding, or ``standard``/``block`` verification) is
allowed without evidence. A lossy one (``fly``, ``synthetic``, anything not known lossless) is
allowed only with a gate report (``qualgate gate --output REPORT.json``, read by
:class:`qualgate.evidence.gate_report.Evidence`, which refuses what the writer would not write) such that

1. a candidate has exactly this config's id (:func:`qualgate.config.decoding.config_id`, the id the
   harness stores with every record) and its verdict is PASS;
2. that PASS does not depend on incomplete pairs (its worst-case verdict is PASS too), unless
   ``allow_missing_dependence``;
3. the baseline's *resolved* config (``baseline.config``, whose id must be the baseline's) is
   lossless, and is not this config;
4. the margin is at most ``max_margin`` (default 0.02), alpha at most ``max_alpha`` (0.05),
   and the report is at most ``max_age`` old (default 30 days) and not from the future;
5. the report is *verified*, in order of strength:
   (a) with the record files available (``records``, a directory searched for files with the
   report's SHA-256s, or the paths in the report): their digests match and the verdicts
   recomputed from them with the report's settings equal the report's;
   (b) with a key in ``QUALGATE_EVIDENCE_KEY``: the report's HMAC matches (always checked
   when a key is set; an unsigned report is refused);
   (c) otherwise it is refused unless ``trust_unsigned`` (all three in :mod:`qualgate.ci._verify`).

A record file found at its path with another digest (rewritten after the report) is refused
whatever else holds. Every unmet condition becomes one refusal reason.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qualgate.evidence.contract import Verdict
from qualgate.evidence.gate_report import LOSSLESS, Evidence, ReportError, evidence_key, resolved_method
from qualgate.vllm033.deployments import NoServeCommand
from qualgate.vllm033.rules import cite
from qualgate.vllm033.serving import ServingConfig, read_serving_config
from qualgate.vllm033.speculative import SPECULATIVE_KEYS, normalise_speculative, resolve_speculative

from ..errors import DataError
from ._chain import chain_reasons
from ._lint import lint_config, method_unknown_offline, stated_method
from ._release import Release, deployment_release, evidence_release_notes
from ._verify import verify

__all__ = [
    "DEFAULT_MAX_AGE",
    "DEFAULT_MAX_ALPHA",
    "DEFAULT_MAX_MARGIN",
    "WAIVABLE_KEYS",
    "CheckResult",
    "check",
    "parse_age",
]

DEFAULT_MAX_MARGIN = 0.02  #: 2 accuracy points
DEFAULT_MAX_ALPHA = 0.05
DEFAULT_MAX_AGE = "30d"
#: The only ``speculative_config`` keys ``--allow-key`` may leave out of the config id: where
#: the drafter runs, not what it proposes or how drafts are accepted
#: (``config/speculative.py:406-430, 468-478``). Every other key (the method, the drafter, K,
#: the verifier, the FLy and sampling keys) can change what the lossy verifier accepts, so
#: no escape hatch waives it.
WAIVABLE_KEYS = ("draft_tensor_parallel_size", "enforce_eager", "disable_lookahead_block_hashes")
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "": 86400}


def parse_age(text: str) -> _dt.timedelta:
    """``"30d"``, ``"12h"``, ``"90m"``, ``"3600s"``, ``"2w"``; a bare number means days.

    >>> parse_age("36h")
    datetime.timedelta(days=1, seconds=43200)
    """
    m = _AGE.match(str(text))
    if not m:
        raise ValueError(f"max_age must be a number with a unit s, m, h, d or w (e.g. '30d'), got {text!r}")
    seconds = float(m.group(1)) * _UNITS[m.group(2)]
    if not seconds < _dt.timedelta.max.total_seconds():  # older than any date: no limit
        return _dt.timedelta.max
    return _dt.timedelta(seconds=seconds)


def _fmt_age(td: _dt.timedelta) -> str:
    s = td.total_seconds()
    if s >= 86400:
        return f"{s / 86400:.1f} days"
    if s >= 3600:
        return f"{s / 3600:.1f} hours"
    return f"{s / 60:.0f} minutes"


@dataclass(frozen=True)
class CheckResult:
    """The decision about one serving config."""

    config: ServingConfig
    config_id: str | None
    lossy: bool
    method: str  #: target | standard | block | fly | synthetic
    reasons: tuple[str, ...]  #: why it is refused (empty: allowed)
    evidence: dict[str, Any] | None = None  #: what the evidence says about this config
    notes: tuple[str, ...] = field(default_factory=tuple)
    release: Release | None = None  #: the vLLM release the deployment runs (issue 45)
    #: the reasons (among ``reasons``) that the evidence's baseline is not this config's own
    #: reference: a configuration error, exit 3 (:func:`_belongs`)
    unbound: tuple[str, ...] = ()

    @property
    def allowed(self) -> bool:
        return not self.reasons

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "qualgate.check_result",
            "version": 1,
            "decision": "allowed" if self.allowed else "refused",
            "allowed": self.allowed,
            "config": self.config.to_dict(),
            "config_id": self.config_id,
            "rejection_sample_method": self.method,
            "lossy": self.lossy,
            "reasons": list(self.reasons),
            "evidence": self.evidence,
            "notes": list(self.notes),
            "vllm": self.release.to_dict() if self.release else None,
            "unbound": list(self.unbound),
        }


def _describe(cfg: ServingConfig, allow_keys) -> str:
    """What this config's id is computed from, resolved, in one line."""
    spec = resolve_speculative({k: v for k, v in (cfg.speculative or {}).items() if k not in allow_keys})
    parts = [f"model {cfg.model}", "speculative_config " + json.dumps(spec, separators=(", ", ": "))]
    parts += [f"{k} {v}" for k, v in cfg.numerics.items()]
    return "; ".join(parts)


def _as_vllm_reads(
    cfg: ServingConfig, drafter_model_type: str | None = None, release: str = "0.33"
) -> dict[str, Any] | None:
    """The speculative config as vLLM ``release`` reads it (:func:`normalise_speculative`): keys
    with hyphens, lax types and the method vLLM infers. A config vLLM refuses (whatever
    :func:`~qualgate.ci.lint_config` reports as ``vllm-rejects``: one reader, one table for
    both commands), one with no served model, or one that qualgate cannot resolve exactly,
    is a :class:`DataError` (exit 3), never "lossless"."""
    if not cfg.model:
        raise NoServeCommand(
            f"no vLLM serving command found in {cfg.path}: no served model, so qualgate cannot say "
            "what runs nor that it is lossless",
            file=cfg.path,
            field="model",
        )
    linted = lint_config(cfg, drafter_model_type=drafter_model_type, release=release)
    rejects = [f for f in linted.findings if f.rule == "vllm-rejects"]
    if rejects:
        raise DataError(
            f"vLLM {release} refuses this config: {rejects[0].message}",
            file=cfg.path,
            line=rejects[0].line,
            field=rejects[0].key,
        )
    if not cfg.speculative:
        return None
    try:
        return normalise_speculative(cfg.speculative, drafter_model_type=drafter_model_type, release=release)
    except ValueError as exc:
        raise DataError(
            f"speculative_config cannot be resolved as vLLM {release} would: {exc}",
            file=cfg.file_of("speculative_config"),
            line=cfg.line_of("speculative_config"),
            field="speculative_config",
        ) from exc


def check(
    config: str | Path | ServingConfig,
    evidence: str | Path | None = None,
    *,
    max_margin: float | None = DEFAULT_MAX_MARGIN,
    max_age: _dt.timedelta | str | None = DEFAULT_MAX_AGE,
    max_alpha: float | None = DEFAULT_MAX_ALPHA,
    allow_keys: tuple[str, ...] = (),
    records: str | Path | None = None,
    trust_unsigned: bool = False,
    allow_missing_dependence: bool = False,
    key: str | None = None,
    now: _dt.datetime | None = None,
    suite_policy=None,
    manifests: tuple = (),
    assume_entrypoint: str | None = None,
    drafter_model_type: str | None = None,
    against_target: bool = False,
    progress=None,
    vllm_version: str | None = None,
) -> CheckResult:
    """Decide whether ``config`` may be deployed (see the module docstring).

    Parameters
    ----------
    config : path or ServingConfig
        The serving config (any format :func:`read_serving_config` reads).
    evidence : path, optional
        A gate report JSON (``qualgate gate --output``). Needed only for a lossy config.
    max_margin, max_alpha : float, optional
        The loosest non-inferiority margin and level accepted (``None``: no limit).
    max_age : timedelta or str, optional
        The oldest report accepted (``"30d"``, ``"12h"``, ...; ``None``: no limit).
    allow_keys : tuple of str
        ``speculative_config`` keys outside qualgate's config id that the caller asserts do
        not change outputs (e.g. ``draft_tensor_parallel_size``); they are left out of the id.
    records : path, optional
        A directory holding the report's record files (found by their SHA-256).
    trust_unsigned : bool
        Accept a report that can be verified neither from records nor by a signature.
    allow_missing_dependence : bool
        Accept a PASS that is not a PASS with incomplete candidate pairs counted as lost.
    key : str, optional
        The HMAC key (default: ``$QUALGATE_EVIDENCE_KEY``).
    now : datetime, optional
        The current time (UTC), for tests.
    suite_policy : qualgate.verdict.policy.Policy, optional
        A policy file the evidence must meet: every blocking suite PASS at a margin no looser
        (:func:`qualgate.verdict.policy.evidence_reasons`).
    manifests : tuple of paths
        More Kubernetes files whose ConfigMaps the config's containers read.
    assume_entrypoint : str, optional
        ``serve``, ``api_server`` or ``none``: what an image started with only its arguments
        runs (otherwise such a file is refused unless the image is ``vllm/vllm-openai``).
    drafter_model_type : str, optional
        The ``model_type`` of the drafter's config.json. A lossy config that names a drafter
        and no ``method`` is refused without it: vLLM decides the method from that file.
    against_target : bool
        Refuse evidence against a lossless speculative baseline that has no passing lossless
        leg against target-only (a chained report: :mod:`qualgate.ci._chain`).
    progress : callable, optional
        ``progress(stage)``, called as each stage of the records' recomputation starts.
    vllm_version : str, optional
        The vLLM release the deployment runs (``--vllm-version``), when its files do not state
        it (:func:`qualgate.ci.deployment_release`: without either, or with ``latest``, the
        config is refused, exit 3). That release's rules apply, and evidence decoded by
        another minor release is refused.

    Raises
    ------
    DataError
        The config or the evidence cannot be read, or the config is invalid.
    """
    for name, v, high in (("max_margin", max_margin, 1), ("max_alpha", max_alpha, 0.5)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < high):
            raise ValueError(f"{name} must be in (0, {high}), got {v!r}")
    if isinstance(max_age, str):
        max_age = parse_age(max_age)
    now = now or _dt.datetime.now(_dt.UTC)
    key = evidence_key(key)
    cfg = (
        config
        if isinstance(config, ServingConfig)
        else read_serving_config(config, manifests=manifests, assume_entrypoint=assume_entrypoint)
    )
    release = deployment_release(cfg, vllm_version)
    spec = _as_vllm_reads(cfg, drafter_model_type, release.minor)
    method = spec.get("rejection_sample_method", "standard") if spec else "target"
    # anything not known to be lossless needs evidence (an unknown verifier name included)
    lossy = method not in LOSSLESS
    raw = {str(k).replace("-", "_"): v for k, v in (cfg.speculative or {}).items()}
    if lossy and method_unknown_offline(raw, spec, drafter_model_type, release.minor):
        raise DataError(
            _method_unknown(release),
            file=cfg.file_of("speculative_config.model"),
            line=cfg.line_of("speculative_config.model"),
            field="speculative_config.model",
        )
    cfg = stated_method(cfg, drafter_model_type, release.minor)

    not_waivable = sorted(set(allow_keys) - set(WAIVABLE_KEYS))
    allow_keys = tuple(k for k in allow_keys if k in WAIVABLE_KEYS)
    unknown = sorted(set(spec or {}) - set(SPECULATIVE_KEYS) - set(allow_keys))
    notes: list[str] = list(cfg.notes)
    if allow_keys and spec:
        left = sorted(set(allow_keys) & set(spec))
        if left:
            notes.append(f"left out of the config id by --allow-key: {', '.join(left)}")
    cid = None
    if not unknown:
        try:
            cid = cfg.config_id(drop=tuple(allow_keys))
        except DataError:
            if lossy:  # a lossless config needs no id; lint reports what is wrong with it
                raise

    unclassed = cfg.arguments_by_class()["unknown"]
    if not lossy:
        why = "no speculative decoding" if method == "target" else f"{method} verification"
        notes.append(f"lossless ({why}): no evidence needed")
        if unknown:
            notes.append(f"keys outside qualgate's config id: {', '.join(unknown)}")
        if unclassed:
            notes.append(f"arguments qualgate does not class: {', '.join(unclassed)}")
        return CheckResult(cfg, cid, False, method, (), None, tuple(notes), release)

    if unclassed:
        from qualgate.vllm033.arguments import ARGUMENTS

        named = [
            f"{k} ({ARGUMENTS[k].cite})" if k in ARGUMENTS else f"{k} (not an option vLLM 0.33 registers)"
            for k in unclassed
        ]
        return CheckResult(
            cfg,
            cid,
            True,
            method,
            (
                f"the lossy config sets argument(s) whose effect on outputs qualgate has not classed: "
                f"{'; '.join(named)}; no evidence can be bound to what they do (remove them, or classify "
                "them in qualgate/vllm033/arguments.py)",
            ),
            None,
            tuple(notes),
            release,
        )

    if not_waivable:
        return CheckResult(
            cfg,
            None,
            True,
            method,
            (
                f"--allow-key {', '.join(not_waivable)}: these keys can change what a lossy verifier "
                f"accepts, so no escape hatch may leave them out of the config id; --allow-key "
                f"accepts only {', '.join(WAIVABLE_KEYS)}",
            ),
            None,
            tuple(notes),
            release,
        )
    if unknown:
        return CheckResult(
            cfg,
            None,
            True,
            method,
            (
                f"the lossy config sets speculative_config key(s) {unknown} that qualgate's config "
                "id does not model, so no gate report can be bound to it; remove them"
                + (
                    ", or pass " + " ".join(f"--allow-key {k}" for k in unknown) + " if they do not change outputs"
                    if set(unknown) <= set(WAIVABLE_KEYS)
                    else f" (--allow-key may waive only {', '.join(WAIVABLE_KEYS)})"
                ),
            ),
            None,
            tuple(notes),
            release,
        )
    if evidence is None:
        return CheckResult(
            cfg,
            cid,
            True,
            method,
            (
                f"lossy verification (rejection_sample_method={method!r}) needs evidence: pass "
                f"--evidence REPORT.json, a qualgate gate report with verdict PASS for a candidate "
                f"with config id {cid}",
            ),
            None,
            tuple(notes),
            release,
        )

    epath = str(evidence)
    try:
        report = Evidence.read(evidence)
    except ReportError as exc:
        return CheckResult(
            cfg, cid, True, method, (f"{epath} is not valid evidence: {exc}",), None, tuple(notes), release
        )
    s = report.settings
    info: dict[str, Any] = {
        "path": epath,
        "created_at": report.created_at,
        "age_seconds": round((now - report.created).total_seconds()),
        "design": report.design,
        "policy": s.policy,
        "margin": s.margin,
        "alpha": s.alpha,
        "baseline": {
            "config_id": report.baseline.config_id,
            "mode": report.baseline.mode,
            "config": report.baseline.config,
        },
        "candidate": None,
        "verified": [],
    }
    engine_notes = evidence_release_notes(report, cid, release, epath)  # exit 3 on another minor release
    reasons = _binding(report, cfg, cid, allow_keys, epath, info, allow_missing_dependence, suite_policy)
    reasons += _limits(report, max_margin, max_alpha)
    reasons += _design(report, cid)
    verified, found_mtime, why = verify(report, Path(evidence), records, key, trust_unsigned, progress)
    info["verified"] = verified
    reasons += why
    reasons += _age(report, max_age, now, found_mtime)
    chained, chain_notes, info["chain"] = chain_reasons(
        report,
        Path(evidence),
        records=records,
        key=key,
        trust_unsigned=trust_unsigned,
        allow_missing_dependence=allow_missing_dependence,
        max_margin=max_margin,
        max_alpha=max_alpha,
        max_age=max_age,
        now=now,
        against_target=against_target,
    )
    reasons += chained
    notes += chain_notes
    unbound, other = _belongs(report, cfg, cid)
    reasons += unbound
    if "signature" not in verified and not reasons:
        notes.append(
            "not verifiable without QUALGATE_EVIDENCE_KEY: the report's created_at (a report re-dated "
            "looks fresh) and its plan and baseline description; the records give the verdicts again, "
            "but not who wrote them or when (docs/ci.md, 'What needs the key')"
        )
    if "trusted-unsigned" in verified:
        notes.append(
            "the report was neither recomputed from its records nor signed: accepted only because of --trust-unsigned"
        )
    notes += other
    return CheckResult(cfg, cid, True, method, tuple(reasons), info, (*notes, *engine_notes), release, tuple(unbound))


def _method_unknown(release: Release) -> str:
    """Why a lossy config naming a drafter and no method cannot be bound (rules
    ``spec-drafter-config``, and ``spec-method-infer`` of 0.34)."""
    if release.minor == "0.34":
        return (
            "no method is set: vLLM 0.34 detects it from the draft checkpoint (the speculator its config "
            "declares, else its name), which qualgate cannot read, so the config id of what runs is not "
            f"known; set `method` ({cite('spec-method-infer', '0.34')})"
        )
    return (
        f"no method is set and the drafter's name does not decide it: vLLM {release.minor} runs mtp if the "
        "drafter's config.json has an MTP model_type (gemma4_assistant becomes gemma4_mtp) and "
        "draft_model otherwise, so the config id of what runs is not known; set `method`, or pass "
        f"--drafter-model-type TYPE ({cite('spec-drafter-config', release.minor)})"
    )


def _belongs(report: Evidence, cfg: ServingConfig, cid) -> tuple[list[str], list[str]]:
    """``(reasons, notes)``: whether the report's baseline is this config's own reference
    (:func:`qualgate.evidence.binding.compare_sides`): the same target, tokenizer and chat
    template, sampling, numerics and engine, differing only in the speculative block (none, or
    lossless verification of the same drafter). What differs, or what the report does not
    record, is a reason; other engine options that differ are notes."""
    from qualgate.evidence.binding import compare_sides, describe_side

    cand = report.candidate(cid)
    bmethod, problem = resolved_method(report.baseline.config)
    if cand is None or problem or bmethod not in LOSSLESS:
        return [], []  # (refused already: no candidate has this id, or the baseline is unknown or lossy)
    mine = cand.config
    if mine is None:  # what the deployment itself says (no sampling: a server does not choose it)
        mine = describe_side(cfg.model, cfg.speculative, cfg.numerics, sampling=cfg.sampling or None)
    elif mine.get("config_id") != cid:
        return [
            f"the report's description of candidate {cand.name} is config {mine.get('config_id')}, not this "
            f"config's {cid}: the report does not say what this config serves"
        ], []
    b = compare_sides(report.baseline.config, mine, baseline_mode=report.baseline.mode, candidate_mode=cand.mode)
    reasons = []
    if b.differences:
        reasons.append(
            f"the report's baseline {report.baseline.config_id} is not this config's own reference: it differs "
            "in more than the speculative block (" + "; ".join(b.differences) + "); evidence must compare the "
            "candidate with its own target-only config (or, chained, the standard speculative config of its "
            "own drafter) at the same sampling and numerics"
        )
    reasons += [f"the baseline's binding to this config cannot be checked: {u}" for u in b.unknown]
    notes = [f"the sides differ in engine options outside the config id: {'; '.join(b.other)}"] if b.other else []
    return reasons, notes


def _binding(
    report: Evidence, cfg, cid, allow_keys, epath, info, allow_missing_dependence, suite_policy=None
) -> list[str]:
    """This config is a candidate with PASS (not by dropping pairs); the baseline is lossless."""
    reasons = []
    cand = report.candidate(cid)  # the reader refuses two candidates with one id
    if cand is None:
        listed = "; ".join(f"{c.name} {c.config_id} (mode {c.mode})" for c in report.candidates)
        reasons.append(
            f"no candidate in {epath} has this config's id {cid} (its candidates: {listed}); "
            f"the id is computed from: {_describe(cfg, allow_keys)}. Gate exactly this "
            "config: the harness config must resolve to the same model, speculative_config "
            "(an unset fly_window_size is min(6, K - 1)) and output-changing arguments (dtype, "
            "quantization, kv_cache_dtype, max_model_len, revision, tokenizer, hf_overrides, ...)"
        )
    else:
        info["candidate"] = {
            "name": cand.name,
            "config_id": cand.config_id,
            "mode": cand.mode,
            "verdict": cand.verdict.value,
            "reason": cand.reason,
            "loss_upper_bound": cand.loss_upper_bound,
            "missing": cand.missing.to_dict(),
        }
        if cand.verdict is not Verdict.PASS:
            why = f": {cand.reason}" if cand.reason else ""
            reasons.append(f"the gate's verdict for candidate {cand.name} ({cid}) is {cand.verdict}, not PASS{why}")
        elif cand.missing.verdict_worst_case is not Verdict.PASS and not allow_missing_dependence:
            m = cand.missing
            reasons.append(
                f"the PASS depends on incomplete pairs: with the {m.imputed_as_lost} errors or gaps "
                f"that may hide a loss counted as lost the verdict is "
                f"{m.verdict_worst_case} (gate without --missing drop, or pass --allow-missing-dependence)"
            )
        if suite_policy is not None:
            from qualgate.verdict.policy import evidence_reasons

            reasons += evidence_reasons(suite_policy, report, cand)
    base = report.baseline
    if base.config_id == cid:
        reasons.append(f"in {epath} this config is the baseline, not a candidate")
    bmethod, problem = resolved_method(base.config)
    if problem:
        reasons.append(f"{problem}; gate with --baseline-config (qualgate gate) or from a plan (qualgate run)")
    elif base.config.get("config_id") != base.config_id:
        reasons.append(
            f"baseline.config is config {base.config['config_id']}, but the baseline records carry {base.config_id}"
        )
    elif bmethod not in LOSSLESS:
        reasons.append(
            f"the report's baseline {base.config_id} is itself lossy (its resolved config uses "
            f"{bmethod!r} verification; mode label {base.mode!r}): evidence must compare "
            "against a lossless baseline"
        )
    return reasons


def _design(report: Evidence, cid) -> list[str]:
    """Settings that make a report no evidence whatever its verdict (issue 34 items 1 and 6)."""
    s, reasons = report.settings, []
    if report.design == "sequential":
        if s.order != "seeded":
            reasons.append(
                f"the sequential report took the questions in order {s.order!r}: an always-valid test is "
                "valid only in an order fixed before the outcomes are seen, so only the seeded order "
                "(gate --sequential --order seeded, as qualgate run --sequential schedules it) is evidence"
            )
        elif s.order_seed != 0:
            reasons.append(
                f"the sequential report's order seed is {s.order_seed}, not the default 0: a seed chosen "
                "after the outcomes can pick a favourable order, so only seed 0 is evidence"
            )
    cand = report.candidate(cid)
    if cand is not None:
        incomplete = cand.missing.incomplete or {}
        differ = {k: incomplete[k] for k in ("prompt_hash_differences", "suite_version_differences") if k in incomplete}
        if differ:
            reasons.append(
                "the report paired records whose prompts differ ("
                + ", ".join(f"{v} pairs differ in {k.removesuffix('_differences')}" for k, v in differ.items())
                + ", gate --prompt-mismatch report): evidence must come from pairs that asked the same prompts"
            )
    return reasons


def _limits(report: Evidence, max_margin, max_alpha) -> list[str]:
    s, reasons = report.settings, []
    if max_margin is not None:
        if s.policy != "noninferiority":
            reasons.append(
                f"--max-margin {max_margin} needs a non-inferiority gate; the report's policy is "
                f"{s.policy!r} with margin {s.margin!r}"
            )
        elif s.margin > max_margin + 1e-12:
            reasons.append(f"the gate's non-inferiority margin {s.margin} is looser than --max-margin {max_margin}")
    if max_alpha is not None and s.alpha > max_alpha + 1e-12:
        reasons.append(f"the gate's alpha {s.alpha} is larger than --max-alpha {max_alpha}")
    return reasons


def _age(report: Evidence, max_age, now, found_mtime) -> list[str]:
    created, reasons = report.created, []
    if created - now > _dt.timedelta(minutes=5):
        reasons.append(f"the report's created_at {report.created_at} is in the future")
    if max_age is not None:
        if now - created > max_age:
            reasons.append(
                f"the report was created {report.created_at} ({_fmt_age(now - created)} ago), older "
                f"than --max-age {_fmt_age(max_age)}"
            )
        elif found_mtime is not None and now - found_mtime > max_age:
            reasons.append(
                f"its record files were last written {_fmt_age(now - found_mtime)} ago, longer than "
                f"--max-age {_fmt_age(max_age)} (the report's created_at {report.created_at} is later)"
            )
    return reasons
