"""``qualgate check``: may this serving config be deployed, given this evidence?

A lossless config (no speculative decoding, or ``standard``/``block`` verification) is
allowed without evidence. A lossy one (``fly``, ``synthetic``) is allowed only with a gate
report (``qualgate gate --output REPORT.json``) in which

1. a candidate has exactly this config's id (:func:`qualgate.config.config_id`, the id the
   harness stores with every record: same target model, same resolved speculative config,
   same dtype/quantization/kv_cache_dtype);
2. that candidate's verdict is PASS;
3. the gate's non-inferiority margin is no looser than ``max_margin`` (when given);
4. the report is no older than ``max_age`` (when given).

Every unmet condition becomes one refusal reason that names what is missing or mismatched.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._strict import load_json
from ..errors import DataError
from ..speculative import (
    LOSSY_METHODS,
    SPECULATIVE_KEYS,
    normalise_speculative,
    resolve_speculative,
)
from ._serving import ServingConfig, read_serving_config

__all__ = ["CheckResult", "check", "parse_age"]

LOSSLESS = ("target", "standard", "block")
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "": 86400}


def parse_age(text: str) -> _dt.timedelta:
    """``"30d"``, ``"12h"``, ``"90m"``, ``"3600s"``, ``"2w"``; a bare number means days.

    >>> parse_age("36h")
    datetime.timedelta(days=1, seconds=43200)
    """
    m = _AGE.match(str(text))
    if not m:
        raise ValueError(f"max_age must be a number with a unit s, m, h, d or w (e.g. '30d'), "
                         f"got {text!r}")
    return _dt.timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])


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
        }


def _read_report(path) -> dict[str, Any]:
    p = Path(path)
    data = load_json(p)  # strict: a regular file, no duplicate keys, no NaN
    if not isinstance(data, dict):
        raise DataError("a gate report is a JSON object", file=p, value=type(data).__name__)
    return data


def _parse_time(value, *, path) -> _dt.datetime:
    if not isinstance(value, str):
        raise DataError("must be an ISO 8601 UTC time", file=path, field="created_at", value=value)
    try:
        t = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise DataError("must be an ISO 8601 UTC time", file=path, field="created_at",
                        value=value) from exc
    return t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)


def _entries(report, *, path) -> tuple[dict | None, list[dict]]:
    """The baseline and candidate entries of a gate report (dicts with config_id, mode, ...)."""
    base = report.get("baseline")
    cands = report.get("candidates")
    if not isinstance(cands, list) or not all(isinstance(c, dict) for c in cands):
        raise DataError("a gate report needs a list of candidates", file=path,
                        field="candidates", value=type(cands).__name__)
    for i, c in enumerate(cands):
        if not isinstance(c.get("config_id"), str) or "verdict" not in c:
            raise DataError("each candidate needs config_id and verdict", file=path,
                            field=f"candidates[{i}]", value=sorted(c))
    return (base if isinstance(base, dict) else None), cands


def _describe(cfg: ServingConfig, allow_keys) -> str:
    """What this config's id is computed from, resolved, in one line."""
    spec = resolve_speculative({k: v for k, v in (cfg.speculative or {}).items()
                                if k not in allow_keys})
    parts = [f"model {cfg.model}", "speculative_config "
             + json.dumps(spec, separators=(", ", ": "))]
    parts += [f"{k} {v}" for k, v in cfg.numerics.items()]
    return "; ".join(parts)


def _as_vllm_reads(cfg: ServingConfig) -> dict[str, Any] | None:
    """The speculative config as vLLM 0.33 reads it (:func:`normalise_speculative`): keys
    with hyphens, lax types and the method vLLM infers. A config vLLM refuses, or one that
    qualgate cannot resolve exactly, is a :class:`DataError` (exit 3), never "lossless"."""
    if not cfg.speculative:
        return None
    try:
        return normalise_speculative(cfg.speculative)
    except ValueError as exc:
        raise DataError(f"speculative_config cannot be resolved as vLLM 0.33 would: {exc}",
                        file=cfg.path, line=cfg.line_of("speculative_config"),
                        field="speculative_config") from exc


def check(
    config: str | Path | ServingConfig,
    evidence: str | Path | None = None,
    *,
    max_margin: float | None = None,
    max_age: _dt.timedelta | str | None = None,
    allow_keys: tuple[str, ...] = (),
    now: _dt.datetime | None = None,
    suite_policy=None,
) -> CheckResult:
    """Decide whether ``config`` may be deployed (see the module docstring).

    Parameters
    ----------
    config : path or ServingConfig
        The serving config (any format :func:`read_serving_config` reads).
    evidence : path, optional
        A gate report JSON (``qualgate gate --output``). Needed only for a lossy config.
    max_margin : float, optional
        The loosest non-inferiority margin accepted (e.g. 0.02 for 2 points).
    max_age : timedelta or str, optional
        The oldest report accepted (``"30d"``, ``"12h"``, ...).
    allow_keys : tuple of str
        ``speculative_config`` keys outside qualgate's config id that the caller asserts do
        not change outputs (e.g. ``draft_tensor_parallel_size``); they are left out of the id.
    now : datetime, optional
        The current time (UTC), for tests.
    suite_policy : qualgate.policy.Policy, optional
        A policy file the evidence must meet: every blocking suite PASS at a margin no looser
        (:func:`qualgate.policy.evidence_reasons`).

    Raises
    ------
    DataError
        The config or the evidence cannot be read, or the config is invalid.
    """
    if max_margin is not None and (isinstance(max_margin, bool) or not 0 < max_margin < 1):
        raise ValueError(f"max_margin must be in (0, 1), got {max_margin!r}")
    if isinstance(max_age, str):
        max_age = parse_age(max_age)
    now = now or _dt.datetime.now(_dt.timezone.utc)
    cfg = config if isinstance(config, ServingConfig) else read_serving_config(config)
    spec = _as_vllm_reads(cfg)
    method = spec.get("rejection_sample_method", "standard") if spec else "target"
    # anything not known to be lossless needs evidence (an unknown verifier name included)
    lossy = method not in LOSSLESS

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

    if not lossy:
        why = "no speculative decoding" if method == "target" else f"{method} verification"
        notes.append(f"lossless ({why}): no evidence needed")
        if unknown:
            notes.append(f"keys outside qualgate's config id: {', '.join(unknown)}")
        return CheckResult(cfg, cid, False, method, (), None, tuple(notes))

    if unknown:
        return CheckResult(cfg, None, True, method, (
            f"the lossy config sets speculative_config key(s) {unknown} that qualgate's config "
            "id does not model, so no gate report can be bound to it; remove them, or pass "
            + " ".join(f"--allow-key {k}" for k in unknown)
            + " if they do not change outputs",
        ), None, tuple(notes))
    if evidence is None:
        return CheckResult(cfg, cid, True, method, (
            f"lossy verification (rejection_sample_method={method!r}) needs evidence: pass "
            f"--evidence REPORT.json, a qualgate gate report with verdict PASS for a candidate "
            f"with config id {cid}",
        ), None, tuple(notes))

    from ..gate import REPORT_KIND, REPORT_VERSION  # the format qualgate gate writes

    epath = str(evidence)
    report = _read_report(evidence)
    reasons: list[str] = []
    if report.get("kind") != REPORT_KIND:
        return CheckResult(cfg, cid, True, method, (
            f"{epath} is not a qualgate gate report (kind {report.get('kind')!r}, expected "
            f"{REPORT_KIND!r}): produce it with `qualgate gate ... --output REPORT.json`",
        ), None, tuple(notes))
    if report.get("version") != REPORT_VERSION:
        return CheckResult(cfg, cid, True, method, (
            f"{epath} is gate report version {report.get('version')!r}; this qualgate reads "
            f"version {REPORT_VERSION}",
        ), None, tuple(notes))
    baseline, cands = _entries(report, path=epath)
    created = _parse_time(report.get("created_at"), path=epath)
    margin = report.get("margin")
    policy = report.get("policy")
    info: dict[str, Any] = {
        "path": epath,
        "created_at": report.get("created_at"),
        "age_seconds": round((now - created).total_seconds()),
        "policy": policy,
        "margin": margin,
        "alpha": report.get("alpha"),
        "baseline": baseline,
        "candidate": None,
    }

    match = [c for c in cands if c["config_id"] == cid]
    if not match:
        listed = "; ".join(f"{c.get('name', '?')} {c['config_id']} (mode {c.get('mode')})"
                           for c in cands) or "none"
        reasons.append(
            f"no candidate in {epath} has this config's id {cid} (its candidates: {listed}); "
            f"the id is computed from: {_describe(cfg, allow_keys)}. Gate exactly this "
            "config: the harness config must resolve to the same model, speculative_config "
            "(an unset fly_window_size is min(6, K - 1)) and dtype/quantization/kv_cache_dtype")
    else:
        cand = match[0]
        info["candidate"] = {k: cand.get(k) for k in ("name", "config_id", "mode", "verdict",
                                                      "reason", "loss_upper_bound")}
        verdict = str(cand["verdict"]).upper()
        if verdict != "PASS":
            why = f": {cand['reason']}" if cand.get("reason") else ""
            reasons.append(f"the gate's verdict for candidate {cand.get('name', cid)} "
                           f"({cid}) is {verdict}, not PASS{why}")
        if suite_policy is not None:
            from ..policy import evidence_reasons

            reasons += evidence_reasons(suite_policy, report, cand)
    if baseline is not None:
        bmode = baseline.get("mode")
        if baseline.get("config_id") == cid:
            reasons.append(f"in {epath} this config is the baseline, not a candidate")
        elif bmode in LOSSY_METHODS:
            reasons.append(f"the report's baseline {baseline.get('config_id')} is itself lossy "
                           f"(mode {bmode}): evidence must compare against a lossless baseline")
    if max_margin is not None:
        if policy != "noninferiority" or not isinstance(margin, (int, float)):
            reasons.append(f"--max-margin {max_margin} needs a non-inferiority gate; the "
                           f"report's policy is {policy!r} with margin {margin!r}")
        elif margin > max_margin + 1e-12:
            reasons.append(f"the gate's non-inferiority margin {margin} is looser than "
                           f"--max-margin {max_margin}")
    if max_age is not None and now - created > max_age:
        reasons.append(f"the report was created {report.get('created_at')} "
                       f"({_fmt_age(now - created)} ago), older than --max-age "
                       f"{_fmt_age(max_age)}")
    if created - now > _dt.timedelta(minutes=5):
        reasons.append(f"the report's created_at {report.get('created_at')} is in the future")
    return CheckResult(cfg, cid, True, method, tuple(reasons), info, tuple(notes))
