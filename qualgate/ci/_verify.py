"""Verifying a gate report for ``qualgate check`` (condition 5 of :mod:`qualgate.ci._check`).

In order of strength: the record files (found under ``--records`` by SHA-256, or at the
report's paths) give the report's verdicts again when gated with the report's settings; the
report's HMAC matches the key in ``QUALGATE_EVIDENCE_KEY``; or the report is trusted unsigned
when asked. A record file found with another digest than the report's is a refusal reason.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
import tempfile
from pathlib import Path

from qualgate.evidence.contract import FixedSettings
from qualgate.evidence.gate_report import KEY_ENV, Evidence

from ..errors import DataError

__all__ = ["verify"]


def verify(report: Evidence, where: Path, records, key, trust_unsigned, progress=None):
    """``(how it was verified, newest record mtime, reasons)`` (condition 5 of :mod:`._check`);
    ``progress(stage)`` is called as each stage of the recomputation starts."""
    verified, reasons, newest = [], [], None
    located, why = _locate(report, where, records)
    reasons += why
    if located is not None:
        mismatch = _recompute(report, located, progress or (lambda stage: None))
        if mismatch:
            reasons.append("the verdicts recomputed from the record files differ from the report: " + mismatch)
        else:
            verified.append("records")
        newest = max(_dt.datetime.fromtimestamp(Path(p).stat().st_mtime, _dt.UTC) for p in located.values())
    if key:
        problem = report.signature_problem(key)
        if problem:
            reasons.append(f"{problem} ({KEY_ENV} is set, so the report must carry its HMAC)")
        else:
            verified.append("signature")
    if not verified and not reasons:
        if trust_unsigned:
            verified.append("trusted-unsigned")
        else:
            reasons.append(
                "the report cannot be verified: its record files are not available (pass --records DIR) "
                f"and {KEY_ENV} is not set to check its signature; pass --trust-unsigned to accept it as it is"
            )
    return verified, newest, reasons


def _locate(report: Evidence, where: Path, records):
    """``({report path: local path} or None, reasons)``: every record file, by its SHA-256."""
    from qualgate.verdict.pairing import sha256_file

    from ..records import RECORD_SUFFIXES
    from ..records.strict import LIMITS

    wanted = report.record_files()

    def digest(f: Path) -> str | None:  # None: over the size limit, never hashed
        return None if f.stat().st_size > LIMITS["records"] else sha256_file(f)

    if records is not None:
        root = Path(records)
        if not root.is_dir():
            raise DataError("--records must be a directory of record files", file=str(root))
        # only the files the report names (by file name) are hashed, each within the size limit
        names = {Path(p).name for _, p, _ in wanted}
        by_digest: dict[str, str] = {}
        for f in sorted(root.rglob("*")):
            if f.name in names and f.suffix in RECORD_SUFFIXES and f.is_file() and (h := digest(f)) is not None:
                by_digest.setdefault(h, str(f))
        missing = [p for _, p, h in wanted if h not in by_digest]
        if missing:
            return None, [
                f"--records {root} holds no file of the name and SHA-256 the report gives for "
                f"{', '.join(missing[:3])}"
                + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
                + f" (changed, renamed, missing or over {LIMITS['records']:,} bytes)"
            ]
        return {p: by_digest[h] for _, p, h in wanted}, []
    found, changed = {}, []
    for side, p, h in wanted:
        # a relative path is the report's: beside the report first, then the working directory;
        # the file with the report's digest wins, a different one elsewhere does not refuse it
        places = [Path(p)] if Path(p).is_absolute() else [where.parent / p, Path(p)]
        present = [c for c in dict.fromkeys(places) if c.is_file()]
        match = next((c for c in present if digest(c) == h), None)
        if match is not None:
            found[p] = str(match)
        elif present:
            changed.append(f"{present[0]} ({side})")
    if changed:
        return None, [f"record files were changed after the report (their SHA-256 differs): {', '.join(changed[:3])}"]
    return (found if len(found) == len(wanted) else None), []


def _recompute(report: Evidence, located: dict[str, str], progress) -> str:
    """Empty when the records give the report's verdicts and statistics, else the first differences."""
    from qualgate.verdict.fixed import gate
    from qualgate.verdict.pairing import load_side, pair_records
    from qualgate.verdict.policy import policy_from_dict
    from qualgate.verdict.sequential import sequential_gate

    s = report.settings
    opts = {"drop_truncated": s.drop_truncated, "allow_unknown": s.allow_unknown}
    with tempfile.TemporaryDirectory(prefix="qualgate-check-") as tmp:

        def side(i, files):
            d = Path(tmp) / str(i)
            d.mkdir()
            for k, f in enumerate(files):  # numbered: two files of one side may share a name
                (d / f"{k:05d}-{Path(f.path).name}").symlink_to(Path(located[f.path]).resolve())
            return load_side(d, **opts)

        try:
            progress("recomputing: reading the baseline's records")
            base = side("b", report.baseline.files)
            pairings = []
            for i, c in enumerate(report.candidates):
                progress(f"recomputing: reading and pairing candidate {i + 1} of {len(report.candidates)}")
                pairings.append(
                    pair_records(base, side(i, c.side.files), on_missing=s.on_missing, max_errors=s.max_errors)
                )
        except DataError as exc:
            return f"the records cannot be gated with the report's settings: {exc}"
        names = [c.name for c in report.candidates]
        progress(f"recomputing the verdicts of {len(names)} candidate(s)")
        if isinstance(s, FixedSettings):
            rules = policy_from_dict(s.suite_policy) if s.suite_policy else None
            again = gate(
                pairings,
                names=names,
                policy=s.policy,
                margin=None if rules else s.margin,
                alpha=s.alpha,
                weighting=s.weighting,
                inconclusive=s.inconclusive,
                missing=s.missing,
                suite_policy=rules,
            )
        else:
            again = sequential_gate(
                pairings,
                names=names,
                margin=s.margin,
                alpha=s.alpha,
                power=s.power,
                order=s.order,
                seed=s.order_seed or 0,
                max_questions=s.max_questions,
                inconclusive=s.inconclusive,
                missing=s.missing,
                multiplicity=s.multiplicity,
                final=s.final,  # an interim look is recomputed as one: it cannot pass as final
            )
        again = dataclasses.replace(
            again,
            reading=s.reading,
            baseline_config=report.baseline.config,
            plan=report.plan,
            candidate_configs=tuple(c.config for c in report.candidates),
        )
        diffs = _diff(again.to_dict(), report.to_dict(), "")
    return "; ".join(diffs[:3]) + (f" (and {len(diffs) - 3} more)" if len(diffs) > 3 else "")


#: not part of the decision: the flips (outputs of the verified record files, for people to read),
#: the warnings (sentences for people, derived from what the report records, e.g. whether the
#: sides' configs bind; check decides binding itself); the chain's lossless leg is verified on its
#: own (qualgate.ci._chain)
_NOT_RECOMPUTED = {
    "warnings",
    "created_at",
    "signature",
    "qualgate_version",
    "path",
    "notes",
    "dropped_truncated",
    "flips",
    "chain",
}


def _diff(a, b, where) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k in _NOT_RECOMPUTED:
                continue
            if k not in b and a.get(k) is None:
                continue  # a field a later writer keeps, absent from an earlier report: null either way
            if k not in a or k not in b:
                out.append(f"{where}{k} only in {'the report' if k in b else 'the recomputation'}")
            else:
                out += _diff(a[k], b[k], f"{where}{k}.")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where.rstrip('.')} has {len(b)} entries, recomputed {len(a)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _diff(x, y, f"{where.rstrip('.')}[{i}].")]
    if (
        (isinstance(a, float) or isinstance(b, float))
        and not isinstance(a, bool)
        and not isinstance(b, bool)
        and isinstance(a, (int, float))
        and isinstance(b, (int, float))
    ):
        if math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12):
            return []
    elif a == b and type(a) is type(b):
        return []
    return [f"{where.rstrip('.')} is {json.dumps(b)} in the report, {json.dumps(a)} recomputed"]
