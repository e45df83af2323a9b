"""Gate policy files: per-suite margins, absolute or relative drops, and tiers.

A policy file (YAML) says, for each suite, how large a loss is tolerable and what a loss
there means for the exit code::

    version: 1
    default: {margin: 0.02}                 # suites not listed (optional)
    suites:
      gsm8k:   {margin: 0.02}               # absolute: 2 accuracy points
      math500: {margin: 0.05, drop: relative, tier: warning}   # 5% of the baseline's accuracy
      aime25:  {margin: 0.10, tier: advisory}

Keys of a suite entry (and of ``default``): ``margin`` (required, in (0, 1)); ``drop``:
``absolute`` (default; the margin is in accuracy units) or ``relative`` (the margin is a
fraction of the baseline's observed accuracy on that suite, which is then treated as fixed:
the absolute margin used is ``margin × accuracy_baseline``); ``tier``:

- ``blocking`` (default): the suite's verdict decides the exit code (the worst blocking
  verdict wins; Holm's adjustment runs over every blocking (candidate, suite) decision);
- ``warning``: a FAIL or INCONCLUSIVE verdict is reported as a warning but does not change
  the exit code;
- ``advisory``: reported in the table only.

A suite in the records that the policy does not list (and no ``default``) is an error, and so
is a blocking suite listed in the policy but absent from the records (the gate fails closed).
Every error names the file, the key path and the value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from qualgate.errors import DataError
from qualgate.evidence.contract import Candidate, Verdict
from qualgate.formatting import fmt_p, fmt_points
from qualgate.records.yaml_schema import Choice, Field, Number, Where
from qualgate.records.yaml_schema import Mapping as Schema

__all__ = [
    "DROPS",
    "TIERS",
    "Policy",
    "PolicyDecision",
    "SuitePolicy",
    "evidence_reasons",
    "policy_from_dict",
    "read_policy",
]

TIERS = ("blocking", "warning", "advisory")
DROPS = ("absolute", "relative")
_KEYS = ("margin", "drop", "tier")
_TOP = ("version", "default", "suites")
_MARGIN = "margin must be a number in (0, 1) (0.02 = 2 points, or 2% with drop: relative)"
_SUITES = "must be a non-empty mapping of suite name to rule"
_WORST = {Verdict.PASS: 0, Verdict.INCONCLUSIVE: 1, Verdict.FAIL: 2}


@dataclass(frozen=True)
class SuitePolicy:
    """One suite's rule: ``margin`` with its ``drop`` kind, and its ``tier``."""

    margin: float
    drop: str = "absolute"
    tier: str = "blocking"

    def absolute_margin(self, accuracy_baseline: float) -> float:
        """The margin in accuracy units (``relative``: a fraction of the baseline's accuracy)."""
        return self.margin if self.drop == "absolute" else self.margin * accuracy_baseline

    def to_dict(self) -> dict:
        return {"margin": self.margin, "drop": self.drop, "tier": self.tier}


@dataclass(frozen=True)
class PolicyDecision:
    """One candidate's verdict under a policy file (:meth:`Policy.decide`)."""

    verdict: Verdict
    pvalue: float  #: the decisive blocking suite's Holm-adjusted p-value
    reason: str
    tiers: tuple[str, ...]  #: each suite's tier
    suite_verdicts: tuple[Verdict, ...]  #: each suite's verdict, blocking ones after Holm
    notes: tuple[str, ...]  #: warning suites that do not PASS


@dataclass(frozen=True)
class Policy:
    """A validated policy: per-suite rules and an optional default."""

    path: str
    suites: Mapping[str, SuitePolicy]
    default: SuitePolicy | None = None

    def for_suite(self, suite: str) -> SuitePolicy:
        """The rule of ``suite``; a suite neither listed nor covered by a default is a DataError."""
        rule = self.suites.get(suite, self.default)
        if rule is None:
            raise DataError(
                f"suite {suite!r} is in the records but not in the policy file (listed: "
                f"{', '.join(self.suites) or 'none'}); add it or a default",
                file=self.path,
                field=f"suites.{suite}",
            )
        return rule

    def check_present(self, suites) -> list[str]:
        """Raise for blocking suites missing from ``suites``; return notes for the others."""
        missing = [s for s in self.suites if s not in set(suites)]
        blocking = [s for s in missing if self.suites[s].tier == "blocking"]
        if blocking:
            raise DataError(
                f"blocking suites of the policy have no records: {', '.join(blocking)} "
                "(the gate fails closed; run them, or lower their tier)",
                file=self.path,
                field=f"suites.{blocking[0]}",
            )
        return [f"policy suite {s} ({self.suites[s].tier}) has no records" for s in missing]

    def decide(self, suites, adjusted: Mapping[int, float], verdict_at, n_decisions: int):
        """One candidate's verdict from its per-suite analyses (:class:`qualgate.verdict.scope.Analysis`).

        ``adjusted`` maps the index of each blocking suite to its Holm-adjusted decisive
        p-value (over ``n_decisions`` blocking decisions); ``verdict_at(analysis, p)`` is the
        gate's decision rule. The worst blocking verdict decides; warning suites that do not
        PASS become notes.
        """
        tiers = tuple(self.for_suite(a.scope).tier for a in suites)
        verdicts = tuple(verdict_at(a, adjusted[j]) if j in adjusted else a.verdict for j, a in enumerate(suites))
        notes = [
            f"warning: suite {a.scope} is {v} (tier warning: it does not block): {a.reason}"
            for a, tier, v in zip(suites, tiers, verdicts)
            if tier == "warning" and v != Verdict.PASS
        ]
        blocking = [j for j, tier in enumerate(tiers) if tier == "blocking"]
        if not blocking:
            return PolicyDecision(
                Verdict.PASS,
                1.0,
                "no suite in the records is blocking under the policy file",
                tiers,
                verdicts,
                tuple(notes),
            )
        worst = max(blocking, key=lambda j: (_WORST[verdicts[j]], adjusted[j]))
        a, verdict, rule = suites[worst], verdicts[worst], self.for_suite(suites[worst].scope)
        margin = f"{fmt_points(a.margin)}-point margin" + (
            f" ({rule.margin:.0%} of the baseline's accuracy)" if rule.drop == "relative" else ""
        )
        reason = f"blocking suite {a.scope} ({margin}) decides: {a.reason}"
        if verdict != a.verdict:
            reason += (
                f"; but after Holm's adjustment over {n_decisions} blocking decisions (adjusted p = "
                f"{fmt_p(adjusted[worst])}) its verdict is {verdict}"
            )
        if len(blocking) > 1:
            reason += "; " + ", ".join(f"{suites[j].scope} {verdicts[j]}" for j in blocking if j != worst)
        return PolicyDecision(verdict, adjusted[worst], reason, tiers, verdicts, tuple(notes))

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "default": self.default.to_dict() if self.default else None,
            "suites": {name: rule.to_dict() for name, rule in self.suites.items()},
        }


def policy_from_dict(data: Mapping) -> Policy:
    """The :class:`Policy` that ``Policy.to_dict()`` wrote (a gate report's ``settings.suite_policy``)."""
    default = data.get("default")
    return Policy(
        str(data["path"]),
        {str(k): SuitePolicy(**v) for k, v in data["suites"].items()},
        SuitePolicy(**default) if default else None,
    )


_RULE = Schema(
    {
        "margin": Field(
            Number(0, 1, low_open=True, high_open=True, message=_MARGIN),
            required=True,
            missing=_MARGIN,
        ),
        "drop": Field(Choice(DROPS, message=f"must be one of {', '.join(DROPS)}"), default="absolute"),
        "tier": Field(Choice(TIERS, message=f"must be one of {', '.join(TIERS)}"), default="blocking"),
    },
    message="must be a mapping with margin, drop, tier",
    unknown=f"unknown key (valid: {', '.join(_KEYS)})",
)
_FILE = Schema(
    {
        "version": Field(
            Choice((1,), message="unsupported policy version (this qualgate reads 1)"),
            default=1,
        ),
        "suites": Field(
            Schema(values=_RULE, empty=False, message=_SUITES),
            required=True,
            null=True,
            missing=_SUITES,
        ),
        "default": Field(_RULE, null=True),
    },
    message="a policy file must be a mapping with suites (and optionally version, default)",
    unknown=f"unknown key (valid: {', '.join(_TOP)})",
    unknown_value=False,
)


def _rule(rule: Mapping) -> SuitePolicy:
    return SuitePolicy(float(rule["margin"]), rule["drop"], rule["tier"])


def read_policy(path) -> Policy:
    """Read and validate a policy file (see the module docstring)."""
    import yaml

    p = str(path)
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError("no such file", file=p) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise DataError(
            f"not valid YAML ({getattr(exc, 'problem', exc)})", file=p, line=mark.line + 1 if mark else None
        ) from None
    data = _FILE.check(data, Where(p))
    rules = {str(name): _rule(rule) for name, rule in data["suites"].items()}
    return Policy(p, rules, _rule(data["default"]) if data.get("default") is not None else None)


def evidence_reasons(policy: Policy, report, candidate: Candidate) -> list[str]:
    """Why a gate report (:class:`qualgate.evidence.gate_report.Evidence`) does not meet
    ``policy`` for ``candidate`` (one of its candidates).

    The report must have been gated with a policy file, and for every blocking suite of
    ``policy`` the candidate's entry must be blocking there too, decided PASS, at a margin no
    looser than the policy's (a relative drop is converted with the recorded baseline
    accuracy). Warning and advisory suites add no condition.
    """
    if not getattr(report.settings, "suite_policy", None):
        return [
            f"the evidence was gated without a policy file; `qualgate check --policy-file {policy.path}` "
            f"needs `qualgate gate --policy-file` evidence"
        ]
    entries = {s.get("scope"): s for s in getattr(candidate, "suites", ()) if isinstance(s, Mapping)}
    reasons = []
    for suite, rule in policy.suites.items():
        if rule.tier != "blocking":
            continue
        entry = entries.get(suite)
        if entry is None:
            reasons.append(f"the evidence has no result for blocking suite {suite}")
            continue
        if entry.get("tier") != "blocking":
            reasons.append(f"suite {suite} was gated at tier {entry.get('tier')!r}; the policy makes it blocking")
        if entry.get("verdict_decisive") != Verdict.PASS:
            reasons.append(f"suite {suite}: verdict {entry.get('verdict_decisive')}, not PASS")
        used, acc = entry.get("margin"), entry.get("accuracy_baseline")
        if not isinstance(used, (int, float)) or not isinstance(acc, (int, float)):
            reasons.append(f"suite {suite}: the evidence records no margin or baseline accuracy")
        elif used > rule.absolute_margin(acc) + 1e-12:
            reasons.append(
                f"suite {suite} was gated at a margin of {used:.4g}, looser than the policy's "
                f"{rule.absolute_margin(acc):.4g}"
            )
    return reasons
