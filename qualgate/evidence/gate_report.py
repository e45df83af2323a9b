"""The gate report file: the evidence contract between ``qualgate gate``/``run`` and ``check``.

One writer (:meth:`Evidence.to_dict`, used by the fixed and the sequential gate) and one
reader (:meth:`Evidence.from_dict`, :meth:`Evidence.read`) of ``"kind": "qualgate.gate_report"``,
whose parts are the typed classes of :mod:`qualgate.evidence.contract` (settings, sides,
candidates, missingness, :class:`~qualgate.evidence.contract.Verdict`),
version 2 (documented in the README, "The gate report"). The reader refuses anything the
writer would not write: duplicate JSON keys, ``NaN``/``Infinity``, unknown top-level or
settings keys, verdicts outside ``PASS``/``FAIL``/``INCONCLUSIVE`` (case included), two
candidates with one config id or name, a margin that is not a number in (0, 1), a verdict or
exit code that does not follow from the candidates', and (fixed design) a candidate verdict
that does not follow from its own p-values.

What binds the file to its evidence:

- ``baseline.files`` / ``candidates[].side.files``: the SHA-256 of every record file read;
- ``plan``: the plan file's SHA-256 and the run's fingerprint digest, for a harness run;
- ``settings``: every setting that can change a verdict (policy, margin, alpha, pairing and
  missingness options, the sequential design's);
- ``baseline.config``: what the baseline serves (model, resolved speculative config,
  numerics), whose :func:`qualgate.config.decoding.config_id` must be the baseline's config id;
- ``signature``: an HMAC-SHA256 over :func:`canonical` of the rest, with the key in
  ``QUALGATE_EVIDENCE_KEY`` when the writer had one;
- ``chain`` (optional; absent from reports of unchained plans): the chained design of
  :mod:`qualgate.run.chain`. A lossless leg has ``{"leg": "lossless", "identity": ...}``; a
  chained report ``{"leg": "candidate", "identity": ..., "margin": δ1 + δ2, "lossless": the
  leg's report or null, "reason": why it is missing}``, and the reader refuses a margin that is
  not the two legs' sum or an embedded leg it would not read on its own.

This module also holds what the two gates share about their reports: :func:`now`,
:func:`names` and :func:`decide_exit`, the one verdict → exit code mapping.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import hmac
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qualgate import __version__
from qualgate.config.options import INCONCLUSIVE_AS, MISSING, MULTIPLICITIES, ON_MISSING, ORDERS, POLICIES, WEIGHTINGS
from qualgate.errors import DataError, ExitCode
from qualgate.evidence.contract import (
    CANDIDATES,
    SETTINGS,
    Baseline,
    Candidate,
    FixedSettings,
    SequentialSettings,
    Verdict,
)

__all__ = [
    "DESIGNS",
    "KEY_ENV",
    "REPORT_KIND",
    "REPORT_VERSION",
    "VERDICTS",
    "Evidence",
    "Verdict",
    "ReportError",
    "canonical",
    "decide_exit",
    "describe_config",
    "evidence_key",
    "names",
    "now",
]

REPORT_KIND = "qualgate.gate_report"
REPORT_VERSION = 2
VERDICTS = tuple(v.value for v in Verdict)  #: as written: ``PASS``, ``FAIL``, ``INCONCLUSIVE``
DESIGNS = tuple(SETTINGS)
KEY_ENV = "QUALGATE_EVIDENCE_KEY"
LOSSLESS = ("target", "standard", "block")
_ALGORITHM = "hmac-sha256"
_TOP = (
    "kind",
    "version",
    "created_at",
    "qualgate_version",
    "design",
    "settings",
    "plan",
    "baseline",
    "candidates",
    "verdict",
    "exit_code",
    "signature",
)
_OPTIONAL_TOP = ("chain", "warnings")
_CHAIN_LEGS = ("lossless", "candidate")
_SETTINGS = {design: cls.keys() for design, cls in SETTINGS.items()}


class ReportError(DataError):
    """A gate report that the writer would not have written (see the module docstring)."""


def evidence_key(key: str | None = None) -> str | None:
    """The HMAC key: ``key`` when given, else ``$QUALGATE_EVIDENCE_KEY``; ``None`` when unset.

    A key that is set but empty (``QUALGATE_EVIDENCE_KEY=""``, e.g. a CI secret that does not
    exist in a fork) is a configuration error, never "no key": reading it as unset would turn
    off the signature checks the workflow asked for.
    """
    if key is None:
        key = os.environ.get(KEY_ENV)
        if key is None:
            return None
    if not key.strip():
        raise DataError(
            f"{KEY_ENV} is set but empty: unset it to work without a key, or set the secret",
            field=KEY_ENV,
        )
    return key


def now() -> str:
    """The current UTC time, ISO 8601 to the second with a ``Z``: every timestamp qualgate writes."""
    return datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def names(paths) -> list[str]:
    """Candidate labels from their paths: the file stems, or the paths when stems collide."""
    paths = [getattr(p, "path", p) for p in paths]  # a RecordSet names its path
    stems = [Path(p).stem if Path(p).suffix else Path(p).name for p in paths]
    return stems if len(set(stems)) == len(stems) else [str(p) for p in paths]


def decide_exit(verdicts: Sequence[str], inconclusive: str = "inconclusive") -> tuple[Verdict, ExitCode]:
    """The overall verdict (the worst of ``verdicts``) and the exit code it maps to.

    PASS 0, FAIL 1, INCONCLUSIVE 4, or 1 / 0 with ``inconclusive='fail'`` / ``'pass'``.

    >>> decide_exit(["PASS", "INCONCLUSIVE"])
    (<Verdict.INCONCLUSIVE: 'INCONCLUSIVE'>, <ExitCode.INCONCLUSIVE: 4>)
    >>> decide_exit(["PASS", "INCONCLUSIVE"], "fail")[1]
    <ExitCode.FAIL: 1>
    """
    if not verdicts or any(v not in VERDICTS for v in verdicts):
        raise ValueError(f"verdicts must be a non-empty list of {VERDICTS}, got {list(verdicts)!r}")
    overall = Verdict.worst(verdicts)
    code = {Verdict.PASS: ExitCode.OK, Verdict.FAIL: ExitCode.FAIL, Verdict.INCONCLUSIVE: ExitCode.INCONCLUSIVE}[
        overall
    ]
    if overall is Verdict.INCONCLUSIVE and inconclusive != "inconclusive":
        code = ExitCode.FAIL if inconclusive == "fail" else ExitCode.OK
    return overall, code


def describe_config(model, speculative, numerics: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a config serves, resolved, with its config id: the report's ``baseline.config``."""
    from qualgate.config.decoding import config_id
    from qualgate.vllm033.speculative import resolve_speculative

    numerics = {k: v for k, v in sorted((numerics or {}).items()) if v is not None}
    spec = resolve_speculative(speculative)
    return {
        "config_id": config_id(model, speculative, **numerics),
        "model": str(model),
        "speculative_config": spec,
        "numerics": numerics,
        "method": (spec or {}).get("rejection_sample_method", "standard") if spec else "target",
    }


def resolved_method(description: Any) -> tuple[str | None, str]:
    """``(method, problem)`` of a ``baseline.config``: the verifier its *resolved* config uses,
    recomputed from the description (its config id included); ``problem`` is empty when the
    description is complete and its id is the one recomputed."""
    if not isinstance(description, Mapping):
        return None, "the report does not say what the baseline serves (baseline.config is missing)"
    try:
        again = describe_config(description["model"], description["speculative_config"], description["numerics"])
    except (KeyError, TypeError, ValueError) as exc:
        return None, f"baseline.config cannot be resolved: {exc}"
    if again["config_id"] != description.get("config_id"):
        return None, (
            f"baseline.config resolves to config id {again['config_id']}, not the "
            f"{description.get('config_id')!r} it states"
        )
    return again["method"], ""


def canonical(document: Mapping[str, Any]) -> bytes:
    """The bytes an HMAC covers: the document without ``signature``, keys sorted, no spaces."""
    body = {k: v for k, v in document.items() if k != "signature"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def _hmac(document, key: str) -> str:
    return hmac.new(key.encode(), canonical(document), hashlib.sha256).hexdigest()


# --------------------------------------------------------------------------- the document


@dataclasses.dataclass(frozen=True)
class Evidence:
    """A gate report, as written to and read from ``REPORT.json``.

    Its parts are typed (:mod:`qualgate.evidence.contract`): ``settings`` the design's
    (:class:`~qualgate.evidence.contract.FixedSettings` or ``SequentialSettings``),
    ``baseline`` a :class:`~qualgate.evidence.contract.Baseline`, each of ``candidates`` the
    design's candidate (``name``, ``config_id``, ``mode``, ``verdict``, ``reason``,
    ``loss_upper_bound``, ``side`` with its record files and their SHA-256, ``missing`` with
    the verdict without imputation and what was incomplete, plus the design's statistics).
    Parts given as mappings (a parsed document) are read into their classes.
    """

    created_at: str
    design: str
    settings: FixedSettings | SequentialSettings
    baseline: Baseline
    candidates: tuple[Candidate, ...]
    verdict: Verdict
    exit_code: int
    plan: dict | None = None
    qualgate_version: str = __version__
    signature: dict | None = None
    chain: dict | None = None  #: the chained design (:mod:`qualgate.run.chain`); absent: none
    #: what the gate warned about (:func:`qualgate.evidence.binding.binding_warnings`); absent: nothing
    warnings: tuple[str, ...] = ()

    def __post_init__(self):
        if self.design not in SETTINGS:
            raise ValueError(f"design must be one of {list(SETTINGS)}, got {self.design!r}")
        read = {
            "settings": SETTINGS[self.design].from_dict(self.settings),
            "baseline": Baseline.from_dict(self.baseline),
            "candidates": tuple(CANDIDATES[self.design].from_dict(c) for c in self.candidates),
            "verdict": Verdict(self.verdict),
        }
        for name, value in read.items():
            object.__setattr__(self, name, value)

    def candidate(self, config_id: str) -> Candidate | None:
        """The candidate with this config id (the reader refuses two), or ``None``."""
        return next((c for c in self.candidates if c.config_id == config_id), None)

    def to_dict(self) -> dict[str, Any]:
        """The report file's content (JSON-ready; NaN written as ``null``)."""
        from qualgate.formatting import json_ready

        chain = {} if self.chain is None else {"chain": self.chain}
        chain |= {"warnings": list(self.warnings)} if self.warnings else {}
        return json_ready(
            {
                "kind": REPORT_KIND,
                "version": REPORT_VERSION,
                "created_at": self.created_at,
                "qualgate_version": self.qualgate_version,
                "design": self.design,
                "settings": self.settings,
                "plan": self.plan,
                "baseline": self.baseline,
                "candidates": list(self.candidates),
                "verdict": self.verdict.value,
                "exit_code": int(self.exit_code),
                "signature": self.signature,
            }
            | chain
        )

    def signed(self, key: str | None = None) -> Evidence:
        """This report with an HMAC under ``key`` (default: ``$QUALGATE_EVIDENCE_KEY``; unsigned when unset)."""
        key = evidence_key(key)
        if key is None:
            return dataclasses.replace(self, signature=None)
        doc = dataclasses.replace(self, signature=None).to_dict()
        return dataclasses.replace(self, signature={"algorithm": _ALGORITHM, "value": _hmac(doc, key)})

    def signature_problem(self, key: str) -> str:
        """Empty when the HMAC under ``key`` matches, else why not."""
        if self.signature is None:
            return "the report is not signed"
        expected = _hmac(self.to_dict(), key)
        if not hmac.compare_digest(str(self.signature.get("value")), expected):
            return "the report's signature does not match (it was changed after signing, or signed with another key)"
        return ""

    def write(self, path, *, key: str | None = None) -> Path:
        """Write the report atomically, signed when a key is given or set in the environment."""
        from qualgate.formatting import to_json, write_atomic

        return write_atomic(path, to_json(self.signed(key).to_dict()) + "\n")

    @classmethod
    def read(cls, path) -> Evidence:
        """Read and validate a report file (:class:`ReportError` for what the writer would not write,
        :class:`DataError` for an unreadable file)."""
        from qualgate.records.strict import load_json

        p = Path(path)
        # the strict reader refuses what is not a JSON file (a FIFO, a device, gzip, UTF-16, a
        # byte-order mark, duplicate keys, NaN, deep nesting, over the size limit): exit 3
        data = load_json(p)
        if not isinstance(data, dict):
            raise DataError("a gate report is a JSON object", file=str(p), value=type(data).__name__)
        return cls.from_dict(data, path=str(p))

    @classmethod
    def from_dict(cls, data: Any, *, path: str = "<report>") -> Evidence:
        """Validate a parsed report (see the module docstring)."""
        _Check(path).document(data)
        return cls(
            created_at=data["created_at"],
            design=data["design"],
            settings=data["settings"],
            baseline=data["baseline"],
            candidates=tuple(data["candidates"]),
            verdict=data["verdict"],
            exit_code=data["exit_code"],
            plan=data["plan"],
            qualgate_version=data["qualgate_version"],
            signature=data["signature"],
            chain=data.get("chain"),
            warnings=tuple(data.get("warnings") or ()),
        )

    @property
    def created(self) -> datetime.datetime:
        return _parse_time(self.created_at)

    def record_files(self) -> list[tuple[str, str, str]]:
        """``(side, path, sha256)`` of every record file the report was computed from."""
        out = [("baseline", f.path, f.sha256) for f in self.baseline.files]
        for c in self.candidates:
            out += [(c.name, f.path, f.sha256) for f in c.side.files]
        return out


def _parse_time(value) -> datetime.datetime:
    t = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    if t.tzinfo is None:
        raise ValueError("no time zone")
    return t


class _Check:
    """The reader's rules, each failure a :class:`ReportError` naming the field."""

    def __init__(self, path):
        self.path = path

    def fail(self, message, field=None, value=None):
        raise ReportError(message, file=self.path, field=field, value=value)

    def document(self, d):
        if not isinstance(d, dict):
            self.fail("a gate report is a JSON object", value=type(d).__name__)
        if d.get("kind") != REPORT_KIND:
            self.fail(
                f"not a qualgate gate report (expected kind {REPORT_KIND!r}; produce one with "
                "`qualgate gate ... --output REPORT.json`)",
                "kind",
                d.get("kind"),
            )
        if d.get("version") != REPORT_VERSION or isinstance(d.get("version"), bool):
            self.fail(
                f"gate report version {d.get('version')!r}; this qualgate reads version {REPORT_VERSION} "
                "(gate the records again)",
                "version",
                d.get("version"),
            )
        for key in _TOP:
            if key not in d:
                self.fail("missing", key)
        extra = sorted(set(d) - set(_TOP) - set(_OPTIONAL_TOP))
        if extra:
            self.fail(f"unknown keys {extra}", extra[0])
        try:
            _parse_time(d["created_at"])
        except (TypeError, ValueError):
            self.fail("must be an ISO 8601 time with a time zone", "created_at", d["created_at"])
        self.string(d["qualgate_version"], "qualgate_version")
        self.choice(d["design"], DESIGNS, "design")
        self.settings(d["settings"], d["design"])
        if d["plan"] is not None and not isinstance(d["plan"], dict):
            self.fail("must be an object or null", "plan")
        self.side(d["baseline"], "baseline")
        cands = d["candidates"]
        if not isinstance(cands, list) or not cands:
            self.fail("must be a non-empty list", "candidates")
        for i, c in enumerate(cands):
            self.candidate(c, f"candidates[{i}]", d)
        for key in ("config_id", "name"):
            seen = [c[key] for c in cands]
            dup = sorted({v for v in seen if seen.count(v) > 1})
            if dup:
                self.fail(f"two candidates have {key} {dup[0]!r}", f"candidates[].{key}", dup[0])
        if any(c["config_id"] == d["baseline"]["config_id"] for c in cands):
            self.fail("a candidate has the baseline's config id", "candidates[].config_id")
        self.choice(d["verdict"], VERDICTS, "verdict")
        overall, code = decide_exit([c["verdict"] for c in cands], d["settings"]["inconclusive"])
        if d["verdict"] != overall:
            self.fail(f"the candidates' verdicts give {overall}", "verdict", d["verdict"])
        if d["exit_code"] != int(code) or isinstance(d["exit_code"], bool):
            self.fail(f"verdict {overall} exits {int(code)}", "exit_code", d["exit_code"])
        sig = d["signature"]
        if sig is not None and (
            not isinstance(sig, dict)
            or set(sig) != {"algorithm", "value"}
            or sig["algorithm"] != _ALGORITHM
            or not isinstance(sig["value"], str)
        ):
            self.fail(f"must be null or {{'algorithm': {_ALGORITHM!r}, 'value': HEX}}", "signature")
        if "chain" in d:
            self.chain(d["chain"], d)
        if "warnings" in d and (
            not isinstance(d["warnings"], list)
            or not d["warnings"]
            or not all(isinstance(w, str) and w for w in d["warnings"])
        ):
            self.fail("must be a non-empty list of non-empty strings", "warnings")

    def chain(self, c, d):
        """``chain``: a lossless leg's identity, or a chained report's claim and embedded leg."""
        if not isinstance(c, dict) or c.get("leg") not in _CHAIN_LEGS:
            self.fail(f"must be an object with 'leg' one of {list(_CHAIN_LEGS)}", "chain", c)
        if not isinstance(c.get("identity"), dict) or not c["identity"]:
            self.fail("must be an object (what the lossless leg depends on)", "chain.identity")
        keys = {"leg", "identity"} | ({"margin", "lossless", "reason"} if c["leg"] == "candidate" else set())
        extra = sorted(set(c) - keys)
        if extra:
            self.fail(f"unknown keys {extra}", f"chain.{extra[0]}")
        if c["leg"] == "lossless":
            return
        for key in ("margin", "lossless"):
            if key not in c:
                self.fail("missing", f"chain.{key}")
        self.number(c["margin"], "chain.margin", 0, 1)
        leg = c["lossless"]
        if leg is None:
            self.string(c.get("reason"), "chain.reason")
            return
        if not isinstance(leg, dict):
            self.fail("must be the lossless leg's gate report or null", "chain.lossless")
        try:
            _Check(self.path).document(leg)
        except ReportError as exc:
            self.fail(f"the embedded lossless leg is not a gate report: {exc}", "chain.lossless")
        if (leg.get("chain") or {}).get("leg") != "lossless":
            self.fail("must be a lossless leg (its chain.leg 'lossless')", "chain.lossless.chain.leg")
        total = d["settings"]["margin"] + leg["settings"]["margin"]
        if not math.isclose(c["margin"], total, rel_tol=1e-9, abs_tol=1e-12):
            self.fail(f"the legs' margins add up to {total:g}", "chain.margin", c["margin"])

    def string(self, v, field):
        if not isinstance(v, str) or not v:
            self.fail("must be a non-empty string", field, v)

    def choice(self, v, options, field):
        if not isinstance(v, str) or v not in options:
            self.fail(f"must be one of {list(options)} (exactly)", field, v)

    def number(self, v, field, low, high, *, integer=False, none=False):
        if v is None and none:
            return
        kinds = (int,) if integer else (int, float)
        if isinstance(v, bool) or not isinstance(v, kinds) or not math.isfinite(v) or not low <= v <= high:
            self.fail(f"must be a {'whole ' if integer else ''}number in [{low}, {high}]", field, v)

    def settings(self, s, design):
        if not isinstance(s, dict):
            self.fail("must be an object", "settings")
        keys = _SETTINGS[design]
        optional = {"final"} if design == "sequential" else set()  # written only when false
        if not set(keys) - optional <= set(s) <= set(keys):
            self.fail(f"must have exactly the keys {list(keys)} (final only when false)", "settings", sorted(s))
        self.choice(s["policy"], POLICIES if design == "fixed" else ("noninferiority",), "settings.policy")
        for name, high in (("margin", 1), ("alpha", 0.5)):
            self.number(s[name], f"settings.{name}", 0, high)
            if s[name] in (0, high):
                self.fail(f"must be strictly between 0 and {high}", f"settings.{name}", s[name])
        self.choice(s["inconclusive"], INCONCLUSIVE_AS, "settings.inconclusive")
        self.choice(s["missing"], MISSING, "settings.missing")
        self.choice(s["on_missing"], ON_MISSING, "settings.on_missing")
        self.number(s["max_errors"], "settings.max_errors", 0, 1e15, integer=True)
        for flag in ("drop_truncated", "allow_unknown"):
            if not isinstance(s[flag], bool):
                self.fail("must be true or false", f"settings.{flag}", s[flag])
        if design == "fixed":
            self.choice(s["weighting"], WEIGHTINGS, "settings.weighting")
            if s["suite_policy"] is not None and not isinstance(s["suite_policy"], dict):
                self.fail("must be null or the policy file's rules", "settings.suite_policy")
        else:
            self.number(s["power"], "settings.power", 0, 1)
            self.choice(s["order"], ORDERS, "settings.order")
            self.number(s["order_seed"], "settings.order_seed", 0, 2**63, integer=True, none=True)
            self.number(s["max_questions"], "settings.max_questions", 1, 1e15, integer=True, none=True)
            self.choice(s["multiplicity"], MULTIPLICITIES, "settings.multiplicity")
            if "final" in s and s["final"] is not False:
                self.fail("must be false when present (records not declared final)", "settings.final", s["final"])

    def side(self, side, field):
        if not isinstance(side, dict):
            self.fail("must be an object", field)
        self.string(side.get("config_id"), f"{field}.config_id")
        for key in ("mode", "engine", "engine_version"):  # optional (engine: issue 45)
            if side.get(key) is not None:
                self.string(side[key], f"{field}.{key}")
        files = side.get("files")
        if not isinstance(files, list) or not files:
            self.fail("must list the record files read", f"{field}.files")
        for j, f in enumerate(files):
            if (
                not isinstance(f, dict)
                or not isinstance(f.get("path"), str)
                or not isinstance(f.get("sha256"), str)
                or len(f["sha256"]) != 64
                or any(ch not in "0123456789abcdef" for ch in f["sha256"])
            ):
                self.fail("must be {'path': ..., 'sha256': 64 hex digits}", f"{field}.files[{j}]", f)

    def candidate(self, c, field, d):
        if not isinstance(c, dict):
            self.fail("must be an object", field)
        self.string(c.get("name"), f"{field}.name")
        self.string(c.get("config_id"), f"{field}.config_id")
        self.choice(c.get("verdict"), VERDICTS, f"{field}.verdict")
        self.side(c.get("side"), f"{field}.side")
        if c["side"]["config_id"] != c["config_id"]:
            self.fail("differs from the config id of its records", f"{field}.config_id", c["config_id"])
        m = c.get("missing")
        if not isinstance(m, dict):
            self.fail("must be an object", f"{field}.missing")
        for key in ("verdict_worst_case", "verdict_dropped"):
            self.choice(m.get(key), VERDICTS, f"{field}.missing.{key}")
        decisive = m["verdict_worst_case"] if d["settings"]["missing"] == "worst-case" else m["verdict_dropped"]
        if decisive != c["verdict"]:
            self.fail(f"the {d['settings']['missing']} verdict is {decisive}", f"{field}.verdict", c["verdict"])
        if d["design"] == "fixed" and d["settings"]["suite_policy"] is None:
            # (under a policy file the blocking suites decide: qualgate.verdict.policy)
            self.fixed_verdict(c, field, d["settings"])

    def fixed_verdict(self, c, field, s):
        """A fixed-design verdict must follow from its own pooled p-values (Holm-adjusted)."""
        from qualgate.verdict.scope import decide

        pooled = c.get("pooled")
        p_holm = c.get("pvalue_holm")
        if not isinstance(pooled, dict):
            self.fail("must be an object", f"{field}.pooled")
        self.number(p_holm, f"{field}.pvalue_holm", 0, 1)
        self.number(pooled.get("pvalue_loss"), f"{field}.pooled.pvalue_loss", 0, 1)
        if s["policy"] == "noninferiority":
            v = decide(
                "noninferiority", pvalue_noninferiority=p_holm, pvalue_loss=pooled["pvalue_loss"], alpha=s["alpha"]
            )
        else:
            v = decide("mcnemar", pvalue_noninferiority=None, pvalue_loss=p_holm, alpha=s["alpha"])
        if v != c["verdict"]:
            self.fail(f"its p-values give {v}", f"{field}.verdict", c["verdict"])
