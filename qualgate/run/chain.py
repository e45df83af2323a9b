"""The chained design: a lossy candidate against standard speculative decoding, and standard
against target-only (the *lossless leg*).

A plan with ``chain`` (:class:`qualgate.config.decoding.Chain`) gates its candidates against a
lossless speculative baseline S (standard verification) at ``gate.margin`` δ1, as any plan, and
the lossless leg, S against the target-only config T at ``chain.margin`` δ2. Accuracy losses add
up: acc(T) − acc(F) = (acc(T) − acc(S)) + (acc(S) − acc(F)). So if a candidate F loses δ1 + δ2
or more against T, at least one leg's null hypothesis is true, and both legs pass only if that
leg's test rejects a true null: probability at most ``alpha``. The claim "F loses less than
δ1 + δ2 against target-only" is therefore a level-``alpha`` test when *each* leg is tested at
``alpha``: an intersection-union test (Berger 1982), with no split of alpha between the legs
(``benchmarks/chain_size.py`` checks its size by simulation).

The lossless leg depends on the engine, the drafter, the sampling, the questions and the seed
derivation, not on FLy's settings, so one leg serves every candidate of the plan and every
point of a sweep. Its **identity** (:func:`leg_identity`) is recorded with it; a stored leg
(``chain.report``) is reused only by a plan whose baseline has the same identity, and
``qualgate check`` compares the two again (:mod:`qualgate.ci._chain`).

The run writes the leg as its own gate report, ``OUT/lossless.json`` (``chain.leg:
"lossless"``), and embeds it in ``OUT/gate.json`` (``chain.leg: "candidate"``, with
``chain.margin`` = δ1 + δ2 and ``chain.lossless`` the leg's document, or ``null`` with a
``reason`` when the leg could not be gated).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from qualgate.errors import DataError
from qualgate.evidence.binding import DRAFTER_KEYS, drafter

__all__ = ["DRAFTER_KEYS", "chained_evidence", "check_chain_plan", "drafter", "identity_differences", "leg_identity"]

#: The packages whose versions identify an engine's numerics, by engine.
ENGINE_PACKAGES = {"reference": ("torch", "transformers"), "vllm": ("vllm", "torch"), "vllm-server": ("vllm",)}


def leg_identity(plan, fingerprint: dict, packages: dict, seed_derivation: str) -> dict[str, Any]:
    """What the lossless leg of ``plan`` depends on: the baseline's engine (and its packages'
    versions), target model, drafter, numerics and other engine options, sampling, the seed
    derivation, the seeds and samples, and the suites' questions (``fingerprint``:
    :func:`qualgate.run.manifest.plan_fingerprint`; ``packages`` and ``seed_derivation``: a
    manifest's)."""
    from qualgate.config.decoding import IDENTITY_OPTIONS
    from qualgate.run.manifest import TRANSPORT_OPTIONS

    base = plan.configs[plan.baseline]
    return {
        "engine": base.engine,
        "packages": {k: packages.get(k) for k in ENGINE_PACKAGES.get(base.engine, ())},
        "model": base.model,
        "drafter": drafter(base.speculative),
        "numerics": {k: base.engine_options[k] for k in IDENTITY_OPTIONS if base.engine_options.get(k) is not None},
        "engine_options": {
            k: v
            for k, v in sorted(base.engine_options.items())
            if k not in TRANSPORT_OPTIONS and k not in IDENTITY_OPTIONS
        },
        "sampling": dict(base.sampling),
        "seed_derivation": seed_derivation,
        "seeds": list(plan.seeds),
        "samples": plan.samples,
        "suites": [
            {k: s.get(k) for k in ("name", "version", "revision", "questions", "digest")}
            for s in fingerprint.get("suites", [])
        ],
    }


def identity_differences(recorded: Any, current: Any) -> list[str]:
    """The keys in which two identities differ, each as ``key: recorded -> current``."""
    if not isinstance(recorded, dict) or not isinstance(current, dict):
        return ["identity: not recorded"] if recorded != current else []
    out = []
    for k in sorted(set(recorded) | set(current), key=str):
        a, b = recorded.get(k), current.get(k)
        if a != b:
            out.append(f"{k}: {_short(a)} -> {_short(b)}")
    return out


def _short(v) -> str:
    import json

    text = json.dumps(v, sort_keys=True, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def check_chain_plan(plan, sequential, suites, environment: dict) -> None:
    """Refuse, before any decoding, a chain the run cannot gate: a sequential run (and a sweep)
    decodes the baseline and the candidates only, so it reuses a stored lossless leg; a stored
    leg must have been run on this plan's setup (:func:`leg_identity`; ``environment``: the
    ``packages`` and ``seed_derivation`` the run's manifest will record)."""
    import json

    from qualgate.run.manifest import plan_fingerprint

    if plan.chain is None:
        return
    if plan.chain.lossless is not None and sequential is not None:
        raise DataError(
            "a sequential run (and a sweep) decodes only the baseline and its candidates: run the "
            "lossless leg with `qualgate run` first and give its report as chain.report",
            file=plan.path,
            field="chain.lossless",
            value=plan.chain.lossless,
        )
    if plan.chain.report is not None:
        fingerprint = json.loads(json.dumps(plan_fingerprint(plan, suites), default=str))
        identity = leg_identity(plan, fingerprint, environment["packages"], environment["seed_derivation"])
        _stored_leg(plan, identity)


def _gate_leg(plan, out: Path, max_errors: int, identity: dict):
    """Gate the lossless leg of the run in ``out``: the evidence, written to ``lossless.json``."""
    from qualgate.run.manifest import _provenance, describe_decoding
    from qualgate.verdict.fixed import run_gate

    target = plan.configs[plan.chain.lossless]
    records = out / "records"
    provenance = _provenance(plan, out)
    report = run_gate(
        records / f"{plan.chain.lossless}.jsonl",
        [records / f"{plan.baseline}.jsonl"],
        policy="noninferiority",
        margin=plan.chain.margin,
        alpha=plan.alpha,
        weighting=plan.weighting,
        inconclusive=plan.inconclusive,
        max_errors=max_errors,
        baseline_config=describe_decoding(target),
        candidate_configs=[describe_decoding(plan.configs[plan.baseline])],
        plan=provenance["plan"],
    )
    leg = dataclasses.replace(report.evidence(), chain={"leg": "lossless", "identity": identity})
    leg.write(out / "lossless.json")  # signed when QUALGATE_EVIDENCE_KEY is set
    return leg.signed()


def _stored_leg(plan, identity: dict):
    """The stored lossless leg ``chain.report``, checked against this plan's baseline."""
    from qualgate.evidence.gate_report import Evidence

    path = plan.chain.report
    doc = Evidence.read(path)
    chain = doc.chain or {}
    if chain.get("leg") == "candidate":  # a chained run's gate.json: its embedded leg
        if chain.get("lossless") is None:
            raise DataError("this chained report holds no lossless leg", file=path, field="chain.lossless")
        doc = Evidence.from_dict(chain["lossless"], path=path)
        chain = doc.chain or {}
    if chain.get("leg") != "lossless":
        raise DataError(
            "not a lossless leg (a gate report with chain.leg 'lossless', written by a chained run as "
            "lossless.json): its engine, drafter and seed derivation are not recorded",
            file=path,
            field="chain",
        )
    base = plan.configs[plan.baseline]
    if doc.candidate(base.config_id) is None:
        raise DataError(
            f"the stored leg gates {[c.config_id for c in doc.candidates]}, not this plan's baseline "
            f"{plan.baseline!r} ({base.config_id})",
            file=path,
            field="candidates",
        )
    differ = identity_differences(chain.get("identity"), identity)
    if differ:
        raise DataError(
            "the stored lossless leg was run with another setup than this plan's baseline, so it is not "
            "evidence for it: " + "; ".join(differ[:4]) + (f" (and {len(differ) - 4} more)" if len(differ) > 4 else ""),
            file=path,
            field="chain.identity",
        )
    if plan.chain.margin is not None and not math.isclose(doc.settings.margin, plan.chain.margin):
        raise DataError(
            f"the stored leg was gated at margin {doc.settings.margin}, not the plan's chain.margin {plan.chain.margin}",
            file=path,
            field="settings.margin",
        )
    if not math.isclose(doc.settings.alpha, plan.alpha) and doc.settings.alpha > plan.alpha:
        raise DataError(
            f"the stored leg was gated at alpha {doc.settings.alpha}, larger than the plan's {plan.alpha}",
            file=path,
            field="settings.alpha",
        )
    return doc


def chained_evidence(plan, out, evidence, *, manifest: dict, max_errors: int = 0):
    """``evidence`` (the gate report of the plan's candidates) with its chain, or as it is for a
    plan without one. A lossless leg that cannot be gated (a ``DataError``) is recorded as
    missing with its reason, so that ``qualgate check`` refuses the claim against target-only."""
    if plan.chain is None or evidence is None:
        return evidence
    identity = leg_identity(
        plan, manifest.get("fingerprint", {}), manifest.get("packages", {}), manifest.get("seed_derivation")
    )
    reason = None
    try:
        leg = _gate_leg(plan, Path(out), max_errors, identity) if plan.chain.lossless else _stored_leg(plan, identity)
    except DataError as exc:
        if plan.chain.report is not None:
            raise
        leg, reason = None, f"the lossless leg could not be gated: {exc}"
    block = {
        "leg": "candidate",
        "identity": identity,
        "margin": evidence.settings.margin + (leg.settings.margin if leg is not None else plan.chain.margin),
        "lossless": leg.to_dict() if leg is not None else None,
    }
    if reason:
        block["reason"] = reason
    return dataclasses.replace(evidence, chain=block)
