"""``qualgate check`` on a chained gate report (:mod:`qualgate.run.chain`).

A report whose baseline is standard speculative decoding is evidence against that baseline.
With a chain it is also evidence against target-only, at the claim's margin δ1 + δ2, when

1. its lossless leg is there (``chain.lossless`` not null);
2. the leg's candidate is the report's baseline (same config id) and its verdict PASS (and not
   PASS only by dropping incomplete pairs, unless ``allow_missing_dependence``);
3. the leg's baseline is target-only (its resolved ``baseline.config``, id recomputed);
4. the leg was run on the same setup: the identity recorded with it equals the one recorded with
   the candidate leg (engine and its packages' versions, drafter, sampling, engine options, seed
   derivation, seeds, suites), and that identity names the report's baseline drafter and model;
5. the claim's margin δ1 + δ2 is at most ``max_margin``, the leg's alpha at most ``max_alpha``,
   and the leg is no older than ``max_age``;
6. the leg is verified as the report is (:func:`qualgate.ci._verify.verify`: its record files,
   its own signature, or ``trust_unsigned``).

Each unmet condition is one refusal reason. Without a chain, a report against a lossless
speculative baseline gets a note saying what it compares against; ``against_target`` refuses it.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from qualgate.evidence.contract import Verdict
from qualgate.evidence.gate_report import Evidence, ReportError, resolved_method

from ._verify import verify

__all__ = ["chain_reasons"]


def chain_reasons(
    report: Evidence,
    where: Path,
    *,
    records,
    key,
    trust_unsigned: bool,
    allow_missing_dependence: bool,
    max_margin,
    max_alpha,
    max_age,
    now: _dt.datetime,
    against_target: bool = False,
) -> tuple[list[str], list[str], dict | None]:
    """``(reasons, notes, info)`` for the chain of ``report`` (see the module docstring)."""
    from qualgate.run.chain import drafter, identity_differences

    chain = report.chain
    base_method, _ = resolved_method(report.baseline.config)
    if chain is None or chain.get("leg") != "candidate":
        if base_method in (None, "target"):
            return [], [], None
        note = (
            f"the evidence compares against {base_method} speculative decoding (lossless by construction), "
            "not target-only: the report has no lossless leg (a plan's chain) against target-only"
        )
        if against_target:
            return [note + " (--against-target)"], [], None
        return [], [note], None
    info = {"margin": chain["margin"], "lossless": None, "verified": []}
    leg_doc = chain.get("lossless")
    if leg_doc is None:
        return [f"the chain's lossless leg (standard against target-only) is missing: {chain.get('reason')}"], [], info
    try:
        leg = Evidence.from_dict(leg_doc, path=f"{where} (chain.lossless)")
    except ReportError as exc:  # the reader of the report read it already; kept closed
        return [f"the chain's lossless leg is not valid evidence: {exc}"], [], info
    reasons: list[str] = []
    cand = leg.candidate(report.baseline.config_id)
    info["lossless"] = {
        "baseline": leg.baseline.config_id,
        "margin": leg.settings.margin,
        "alpha": leg.settings.alpha,
        "verdict": None if cand is None else cand.verdict.value,
        "created_at": leg.created_at,
    }
    if cand is None:
        reasons.append(
            f"the chain's lossless leg does not gate this report's baseline {report.baseline.config_id} "
            f"(it gates {', '.join(c.config_id for c in leg.candidates)})"
        )
    elif cand.verdict is not Verdict.PASS:
        why = f": {cand.reason}" if cand.reason else ""
        reasons.append(
            f"the chain's lossless leg (standard against target-only, margin {leg.settings.margin:g}) is "
            f"{cand.verdict}, not PASS{why}"
        )
    elif cand.missing.verdict_worst_case is not Verdict.PASS and not allow_missing_dependence:
        reasons.append(
            "the chain's lossless leg passes only with its incomplete pairs dropped (worst case: "
            f"{cand.missing.verdict_worst_case}); pass --allow-missing-dependence to accept it"
        )
    leg_method, problem = resolved_method(leg.baseline.config)
    if problem:
        reasons.append(f"the chain's lossless leg: {problem}")
    elif leg_method != "target":
        reasons.append(f"the chain's lossless leg compares against {leg_method!r}, not target-only")
    differ = identity_differences((leg.chain or {}).get("identity"), chain.get("identity"))
    if differ:
        reasons.append(
            "the chain's lossless leg was run on another setup than the candidate leg (it is reusable only "
            "until the engine, drafter or seed derivation changes): " + "; ".join(differ[:4])
        )
    spec = (report.baseline.config or {}).get("speculative_config")
    identity = chain.get("identity") or {}
    if identity.get("drafter") != drafter(spec) or identity.get("model") != (report.baseline.config or {}).get("model"):
        reasons.append(
            "the chain's recorded identity does not name the report's baseline (its drafter "
            f"{identity.get('drafter')!r} and model {identity.get('model')!r})"
        )
    if max_margin is not None and chain["margin"] > max_margin + 1e-12:
        reasons.append(
            f"the chain's claim against target-only is at margin {chain['margin']:g} "
            f"({report.settings.margin:g} + {leg.settings.margin:g}), looser than --max-margin {max_margin}"
        )
    if leg.settings.policy != "noninferiority":
        reasons.append(f"the chain's lossless leg is a {leg.settings.policy!r} gate, not non-inferiority")
    if max_alpha is not None and leg.settings.alpha > max_alpha + 1e-12:
        reasons.append(f"the chain's lossless leg was gated at alpha {leg.settings.alpha}, larger than {max_alpha}")
    if max_age is not None and now - leg.created > max_age:
        reasons.append(f"the chain's lossless leg was created {leg.created_at}, older than --max-age")
    verified, _, why = verify(leg, where, records, key, trust_unsigned)
    info["verified"] = verified
    reasons += [f"the chain's lossless leg: {r}" for r in why]
    return reasons, [], info
