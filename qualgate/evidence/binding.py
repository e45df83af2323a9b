"""Whether a gate report's baseline is the candidate's own reference (issue 46 item 1).

A gate report is evidence that a candidate loses no quality *against its baseline*; that says
something about the candidate only when the baseline serves what the candidate serves but for
speculative decoding: the same target weights, tokenizer and chat template, the same sampling,
the same numerics-affecting engine options (dtype, quantization, KV-cache dtype, max model
length, every other output-changing vLLM argument), the same engine and version. The baseline
may differ only in its speculative block: none at all (target-only), or lossless verification
of the same drafter (the chained design's standard speculative baseline).

:func:`describe_side` is what a report records about each side (``baseline.config``,
``candidates[].config``: :func:`qualgate.evidence.gate_report.describe_config` with the
sampling, the engine and the request options); :func:`compare_sides` compares two such
descriptions; ``qualgate check`` refuses evidence whose :attr:`Binding.differences` or
:attr:`Binding.unknown` is not empty, and ``qualgate gate`` warns about each
(:func:`binding_warnings`, recorded in the report's ``warnings``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from qualgate.config.decoding import IDENTITY_OPTIONS
from qualgate.evidence.gate_report import LOSSLESS, describe_config

__all__ = [
    "DRAFTER_KEYS",
    "REQUEST_OPTIONS",
    "Binding",
    "binding_warnings",
    "compare_sides",
    "describe_side",
    "drafter",
]

#: The keys of a resolved speculative config that describe the drafter (not the verifier).
DRAFTER_KEYS = ("method", "model", "num_speculative_tokens", "draft_sample_method")
#: Engine options of a decoding config that shape the prompt or the tokens each request sees
#: (the chat template's arguments, the reference engine's tokenizer): they must be equal.
REQUEST_OPTIONS = ("chat_template_kwargs", "tokenizer")
#: Engine options that only say how to reach or pace an engine (as the run's fingerprint has them).
_TRANSPORT = frozenset({"base_urls", "api_key_env", "timeout_s", "max_retries", "retry_backoff_s"})


def drafter(speculative) -> dict[str, Any] | None:
    """The drafter of a resolved speculative config (:data:`DRAFTER_KEYS`), ``None`` without one."""
    if not speculative:
        return None
    return {k: speculative[k] for k in DRAFTER_KEYS if speculative.get(k) is not None}


def describe_side(
    model,
    speculative,
    numerics: Mapping[str, Any] | None = None,
    *,
    sampling: Mapping[str, Any] | None = None,
    engine: str | None = None,
    engine_version: str | None = None,
    engine_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What a side of a gate serves: :func:`~qualgate.evidence.gate_report.describe_config`
    (model, resolved speculative config, numerics, method, config id) with ``sampling`` (the
    request's sampling parameters; ``None``: not known, e.g. a ``vllm serve`` command),
    ``engine``, ``engine_version`` (each only when known) and ``engine_options`` (the
    decoding config's, less the transport ones)."""
    out = describe_config(model, speculative, numerics)
    out["sampling"] = None if sampling is None else dict(sampling)
    if engine is not None:
        out["engine"] = engine
    if engine_version is not None:
        out["engine_version"] = str(engine_version)
    if engine_options is not None:
        out["engine_options"] = {k: v for k, v in sorted(engine_options.items()) if k not in _TRANSPORT}
    return out


@dataclass(frozen=True)
class Binding:
    """How a baseline's description compares with a candidate's (:func:`compare_sides`)."""

    #: what the two sides serve differently outside the speculative block (refused by ``check``)
    differences: tuple[str, ...] = ()
    #: what cannot be compared because a side does not record it (refused by ``check``: fail closed)
    unknown: tuple[str, ...] = ()
    #: other engine options that differ (``gate`` warns; ``check`` does not refuse them)
    other: tuple[str, ...] = ()
    #: the baseline is lossy and the candidate lossless: the sides are swapped
    swapped: str | None = None

    @property
    def bound(self) -> bool:
        """The baseline is the candidate's own reference, as far as both descriptions say."""
        return not (self.differences or self.unknown or self.swapped)


def _show(v) -> str:
    text = json.dumps(v, sort_keys=True, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def _weights(model) -> str:
    """A model as the weights it names: a local path normalised (``~``, ``.``, ``..``,
    a trailing ``/``) and resolved through links when it exists; a hub id as written."""
    text = str(model)
    looks_local = text.startswith(("/", ".", "~")) or os.path.isdir(os.path.expanduser(text))
    if not looks_local:
        return text
    path = os.path.normpath(os.path.expanduser(text))
    return os.path.realpath(path) if os.path.exists(path) else path


def _method(description: Mapping | None, mode: str | None) -> tuple[str | None, str]:
    """``(method, how it is known)``: the resolved config's verifier, else the records' mode label."""
    if isinstance(description, Mapping) and description.get("method"):
        return str(description["method"]), "config"
    if mode:
        return str(mode), "mode label"
    return None, ""


def compare_sides(
    baseline: Mapping | None,
    candidate: Mapping | None,
    *,
    baseline_mode: str | None = None,
    candidate_mode: str | None = None,
) -> Binding:
    """Compare what the baseline serves with what the candidate serves (see the module docstring).

    ``baseline``/``candidate`` are :func:`describe_side` descriptions (``None``: not recorded);
    the modes are the records' labels, used to tell swapped sides when no config says.
    """
    b_method, b_how = _method(baseline, baseline_mode)
    c_method, c_how = _method(candidate, candidate_mode)
    swapped = None
    if b_method and c_method and b_method not in LOSSLESS and c_method in LOSSLESS:
        swapped = (
            f"swapped sides: the baseline is lossy ({b_method!r} by its {b_how}) and the candidate is "
            f"lossless ({c_method!r} by its {c_how}); a gate measures the candidate against the baseline, "
            "so this says nothing about the lossy config (give the lossless config as the baseline)"
        )
    missing = [side for side, d in (("baseline", baseline), ("candidate", candidate)) if not isinstance(d, Mapping)]
    if missing:
        return Binding(
            unknown=(
                f"the report does not record what the {' and the '.join(missing)} serve(s), so it cannot "
                "be checked that the baseline is the candidate's own reference (same target, tokenizer, "
                "sampling and numerics): gate from a plan (qualgate run), or with --baseline-config and "
                "--candidate-config",
            ),
            swapped=swapped,
        )
    diffs: list[str] = []
    unknown: list[str] = []
    other: list[str] = []
    if _weights(baseline.get("model")) != _weights(candidate.get("model")):
        diffs.append(
            f"target model: the baseline serves {baseline.get('model')!r}, the candidate {candidate.get('model')!r}"
        )
    nb, nc = dict(baseline.get("numerics") or {}), dict(candidate.get("numerics") or {})
    for k in sorted(set(nb) | set(nc)):
        if nb.get(k) != nc.get(k):
            diffs.append(f"{k}: baseline {_show(nb.get(k))}, candidate {_show(nc.get(k))}")
    sb, sc = baseline.get("sampling"), candidate.get("sampling")
    if sb is None or sc is None:
        who = " and ".join(s for s, v in (("baseline", sb), ("candidate", sc)) if v is None)
        unknown.append(
            f"sampling: not recorded for the {who} (a serving command does not state it): gate from a plan "
            "or with decoding configs (--baseline-config/--candidate-config) that state it"
        )
    else:
        for k in sorted(set(sb) | set(sc)):
            if sb.get(k) != sc.get(k):
                diffs.append(f"sampling {k}: baseline {_show(sb.get(k))}, candidate {_show(sc.get(k))}")
    for k in ("engine", "engine_version"):  # compared where both sides record them
        if k in baseline and k in candidate:
            if baseline[k] != candidate[k]:
                diffs.append(f"{k}: baseline {_show(baseline[k])}, candidate {_show(candidate[k])}")
        elif k in baseline or k in candidate:
            unknown.append(f"{k}: recorded for the {'baseline' if k in baseline else 'candidate'} only")
    ob, oc = baseline.get("engine_options"), candidate.get("engine_options")
    if ob is not None and oc is not None:  # (a serving command's options are its numerics)
        for k in sorted((set(ob) | set(oc)) - set(nb) - set(nc) - set(IDENTITY_OPTIONS)):
            if ob.get(k) != oc.get(k):
                line = f"engine option {k}: baseline {_show(ob.get(k))}, candidate {_show(oc.get(k))}"
                (diffs if k in REQUEST_OPTIONS else other).append(line)
    db = drafter(baseline.get("speculative_config"))
    if db is not None and db != drafter(candidate.get("speculative_config")):
        diffs.append(
            f"drafter: a speculative baseline must be the standard speculative config of the candidate's own "
            f"drafter; the baseline drafts with {_show(db)}, the candidate with "
            f"{_show(drafter(candidate.get('speculative_config')))}"
        )
    return Binding(tuple(diffs), tuple(unknown), tuple(other), swapped)


def binding_warnings(
    baseline: Mapping | None,
    candidates: Sequence[Mapping | None] | None,
    names: Sequence[str],
    *,
    baseline_mode: str | None = None,
    candidate_modes: Sequence[str | None] = (),
) -> list[str]:
    """What ``qualgate gate`` warns about (and records in the report's ``warnings``): per
    candidate, swapped sides and sides that differ in more than the speculative block; once,
    when neither side's config is known, that the binding cannot be checked."""
    candidates = list(candidates or [None] * len(names))
    modes = list(candidate_modes) or [None] * len(names)
    out: list[str] = []
    if baseline is None and not any(isinstance(c, Mapping) for c in candidates):
        out.append(
            "the binding of the baseline to the candidates cannot be checked: the records carry no "
            "config (imported logs, or no --baseline-config/--candidate-config), so nothing says the "
            "baseline serves the candidates' target, tokenizer, sampling and numerics; qualgate check "
            "refuses such evidence for a lossy config"
        )
    for name, cand, mode in zip(names, candidates, modes):
        b = compare_sides(baseline, cand, baseline_mode=baseline_mode, candidate_mode=mode)
        if b.swapped:
            out.append(f"{name}: {b.swapped}")
        if b.unknown and (baseline is not None or isinstance(cand, Mapping)):  # (else said once above)
            out.append(f"{name}: the binding cannot be checked: " + "; ".join(b.unknown))
        differ = list(b.differences) + list(b.other)
        if differ:
            out.append(
                f"{name}: the sides differ in more than the speculative block, so a loss or a gain may come "
                "from that and not from speculative decoding: " + "; ".join(differ)
            )
    return out
