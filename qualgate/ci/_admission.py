"""``qualgate admission``: how many requests a vLLM scheduler really runs at once.

Token-budget arithmetic. Each running decode request is charged ``charge`` tokens of the
per-step budget ``max_num_batched_tokens`` (with speculative decoding, one token plus its
draft slots), so at most ``budget // charge`` requests run, and never more than
``max_num_seqs``::

    admitted = min(max_num_seqs, budget // charge)

For dflash/dspark drafters vLLM also caps running requests at
``budget // num_lookahead_tokens`` (and logs "Overriding max_num_active_seqs from A to B"),
which :func:`admission` applies when ``lookahead`` is given.

:func:`method_charge` gives the charge and the lookahead of a speculative method from the
rules ``draft-slots``, ``scheduler-charge`` and ``lookahead`` of :mod:`qualgate.vllm033.rules`:
draft_model K + 2, PARD (draft_model with parallel drafting) 2K + 1, P-EAGLE 2K, every other
method K + 1; lookahead dflash K + 1, dspark K (K + 1 for a fill-in drafter), draft_model,
eagle, eagle3 and mtp K. vLLM logs the override line (rule ``override-line``) whenever
``budget // lookahead`` is below ``max_num_seqs``, whichever bound binds admission; and it can
run one request more than ``budget // charge`` as a partial chunk (rule ``partial-chunk``).

:func:`running_plateau` reads Prometheus samples of ``vllm:num_requests_running`` (and
``vllm:num_requests_waiting``) over time and says whether running requests level off below
``max_num_seqs`` while requests are waiting, the sign that a cap other than ``max_num_seqs``
binds.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qualgate.records.strict import read_text
from qualgate.vllm033.rules import rule

from ..errors import DataError

__all__ = [
    "AdmissionResult",
    "admission_for",
    "method_charge",
    "PlateauReport",
    "Scrape",
    "admission",
    "parse_exposition",
    "read_metrics",
    "running_plateau",
]

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


@dataclass(frozen=True)
class AdmissionResult:
    """The running-request bounds and the one that binds."""

    budget: int
    max_num_seqs: int
    charge: int
    lookahead: int | None
    bounds: dict[str, int]  #: name -> value: max_num_seqs, token_budget, lookahead_cap
    admitted: int
    method: str | None = None
    k: int | None = None

    @property
    def override(self) -> str | None:
        """vLLM's line "... Overriding max_num_active_seqs from A to B." when vLLM logs it
        (rule ``override-line``): a dflash/dspark lookahead whose cap is below max_num_seqs."""
        cap = self.bounds.get("lookahead_cap")
        if cap is None or cap >= self.max_num_seqs:
            return None
        line = rule("override-line").data["format"] % (
            self.method or "?",
            self.lookahead,
            self.budget,
            self.max_num_seqs,
            cap,
        )
        return line if self.method else "..." + line[line.index(" Overriding") :]

    @property
    def binding(self) -> tuple[str, ...]:
        """The bounds equal to ``admitted`` (several when they tie)."""
        return tuple(k for k, v in self.bounds.items() if v == self.admitted)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "qualgate.admission",
            "budget": self.budget,
            "max_num_seqs": self.max_num_seqs,
            "charge": self.charge,
            "lookahead": self.lookahead,
            "bounds": dict(self.bounds),
            "admitted": self.admitted,
            "binding": list(self.binding),
            "method": self.method,
            "num_speculative_tokens": self.k,
            "override_line": self.override,
        }


#: methods whose lookahead caps running requests (rule override-line)
CAPPING_METHODS = ("dflash", "dspark")


def method_charge(method: str, k: int, *, parallel_drafting: bool = False, fill_in: bool = False) -> tuple[int, int]:
    """``(charge, lookahead)`` of a decode request for ``method`` with K = ``k``.

    The charge is ``1 + K`` plus the drafting slots (rules ``draft-slots`` and
    ``scheduler-charge``); the lookahead is vLLM's ``num_lookahead_tokens`` (rule
    ``lookahead``). ``parallel_drafting``: PARD (draft_model) or P-EAGLE (eagle/eagle3);
    dflash and dspark always draft in parallel. ``fill_in``: a dspark drafter whose config
    sets ``sample_from_anchor: false``.

    >>> method_charge("draft_model", 8), method_charge("dspark", 5)
    ((10, 8), (6, 5))
    """
    _positive_int("k", k)
    if method in CAPPING_METHODS:
        slots = 0
    elif parallel_drafting and method == "draft_model":
        slots = k
    elif parallel_drafting and method in ("eagle", "eagle3"):
        slots = k - 1
    elif parallel_drafting:
        raise ValueError(f"parallel drafting is for draft_model, eagle or eagle3, not {method!r}")
    else:
        slots = 1 if method == "draft_model" else 0
    if method == "dflash" or (method == "dspark" and fill_in):
        lookahead = k + 1
    elif method in ("dspark", "eagle", "eagle3", "mtp", "draft_model"):
        lookahead = k
    elif method in ("ngram", "ngram_gpu", "suffix"):
        lookahead = 0
    else:
        raise ValueError(
            f"method must be one of draft_model, eagle, eagle3, mtp, dflash, dspark, ngram, suffix; got {method!r}"
        )
    return 1 + k + slots, lookahead


def admission_for(
    method: str, k: int, budget: int, max_num_seqs: int, *, parallel_drafting: bool = False, fill_in: bool = False
) -> AdmissionResult:
    """:func:`admission` with the charge and lookahead of ``method`` (:func:`method_charge`).

    Raises ``ValueError`` with vLLM's message when vLLM refuses the budget (rule
    ``budget-too-small``).

    >>> r = admission_for("dspark", 5, 512, 128)
    >>> r.admitted, r.binding, r.override.endswith("from 128 to 102.")
    (85, ('token_budget',), True)
    """
    charge, lookahead = method_charge(method, k, parallel_drafting=parallel_drafting, fill_in=fill_in)
    _positive_int("budget", budget)
    if budget <= lookahead:
        raise ValueError(
            "VllmConfig does not have enough slots to schedule a token and support the "
            f"speculative decoding settings. Got max_num_batched_tokens={budget} and "
            f"num_lookahead_tokens={lookahead}."
        )
    r = admission(budget, max_num_seqs, charge, lookahead=lookahead if method in CAPPING_METHODS else None)
    return AdmissionResult(r.budget, r.max_num_seqs, r.charge, r.lookahead, r.bounds, r.admitted, method, k)


def admission(budget: int, max_num_seqs: int, charge: int, *, lookahead: int | None = None) -> AdmissionResult:
    """Running requests admitted by a token budget.

    Parameters
    ----------
    budget : int
        Tokens per scheduler step (``max_num_batched_tokens``).
    max_num_seqs : int
        vLLM's ``max_num_seqs``.
    charge : int
        Tokens charged per running decode request (:func:`method_charge`: K + 2 for
        draft_model, K + 1 for eagle/eagle3/mtp/dflash/dspark, ...).
    lookahead : int, optional
        ``num_lookahead_tokens`` of a dflash/dspark drafter: adds the cap ``budget // lookahead``.

    Examples
    --------
    >>> r = admission(512, 128, 10)
    >>> r.admitted, r.binding
    (51, ('token_budget',))
    >>> admission(4096, 128, 6, lookahead=5).binding
    ('max_num_seqs',)
    """
    _positive_int("budget", budget)
    _positive_int("max_num_seqs", max_num_seqs)
    _positive_int("charge", charge)
    bounds = {"max_num_seqs": max_num_seqs, "token_budget": budget // charge}
    if lookahead is not None:
        _positive_int("lookahead", lookahead)
        bounds["lookahead_cap"] = budget // lookahead
    return AdmissionResult(budget, max_num_seqs, charge, lookahead, bounds, min(bounds.values()))


# --------------------------------------------------------------------------- metrics


@dataclass(frozen=True)
class Scrape:
    """One scrape: the gauges of one time point, per label set."""

    time: float | None  #: seconds (a sample's timestamp, or when it was fetched)
    line: int | None  #: first line of the scrape in its file
    running: dict[tuple, float]
    waiting: dict[tuple, float]


def parse_exposition(text: str, *, path: str = "<metrics>", fetched_at: float | None = None) -> list[Scrape]:
    """Parse Prometheus text exposition into scrapes of the running/waiting gauges.

    A file may hold several scrapes one after another: a new scrape starts when a sample's
    timestamp changes, or, without timestamps, when a series already seen reappears. Sample
    lines are parsed with :mod:`prometheus_client.parser`; an invalid line raises
    :class:`DataError` naming it.
    """
    from prometheus_client.parser import text_string_to_metric_families

    scrapes: list[Scrape] = []
    cur: Scrape | None = None
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            samples = [s for fam in text_string_to_metric_families(line + "\n") for s in fam.samples]
        except (ValueError, IndexError) as exc:
            raise DataError(f"not Prometheus text exposition: {exc}", file=path, line=n, value=raw[:120]) from exc
        for s in samples:
            if s.name not in (RUNNING, WAITING):
                continue
            key = tuple(sorted(s.labels.items()))
            ts = s.timestamp if s.timestamp is not None else fetched_at
            ts = float(ts) if ts is not None else None
            target = "running" if s.name == RUNNING else "waiting"
            new = cur is None or (
                (s.timestamp is not None and cur.time is not None and ts != cur.time) or key in getattr(cur, target)
            )
            if new:
                cur = Scrape(ts, n, {}, {})
                scrapes.append(cur)
            getattr(cur, target)[key] = s.value
    return scrapes


def read_metrics(
    source: str,
    *,
    samples: int = 1,
    interval: float = 1.0,
    timeout: float = 10.0,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Scrape]:
    """Scrapes from a file (all it holds) or a URL (``samples`` fetches ``interval`` s apart)."""
    if source.startswith(("http://", "https://")):
        _positive_int("samples", samples)
        out: list[Scrape] = []
        for i in range(samples):
            if i:
                sleep(interval)
            try:
                with urllib.request.urlopen(source, timeout=timeout) as resp:
                    body = resp.read().decode("utf-8", errors="replace")
            except (urllib.error.URLError, OSError, ValueError) as exc:
                raise DataError(f"cannot fetch metrics: {getattr(exc, 'reason', exc)}", file=source) from exc
            got = parse_exposition(body, path=source, fetched_at=clock())
            if len(got) > 1:  # one fetch is one scrape, whatever repeats inside it
                got = [
                    Scrape(
                        got[0].time,
                        None,
                        {k: v for s in got for k, v in s.running.items()},
                        {k: v for s in got for k, v in s.waiting.items()},
                    )
                ]
            out.extend(got)
        return out
    p = Path(source)
    text = read_text(p)  # a regular file, UTF-8
    return parse_exposition(text, path=str(p))


@dataclass(frozen=True)
class SeriesPlateau:
    """Running requests of one label set (one engine) over the scrapes."""

    labels: dict[str, str]
    samples: int
    loaded: int  #: scrapes with requests waiting
    peak_running: float
    plateau: float | None  #: the highest running count among loaded scrapes
    plateau_count: int
    capped: bool  #: running stayed below max_num_seqs while requests waited

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class PlateauReport:
    """Whether running requests plateau below ``max_num_seqs`` under load, per engine."""

    source: str
    max_num_seqs: int
    scrapes: int
    has_waiting: bool
    series: tuple[SeriesPlateau, ...]

    @property
    def capped(self) -> bool:
        return any(s.capped for s in self.series)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "qualgate.running_plateau",
            "source": self.source,
            "max_num_seqs": self.max_num_seqs,
            "scrapes": self.scrapes,
            "has_waiting_gauge": self.has_waiting,
            "capped": self.capped,
            "series": [s.to_dict() for s in self.series],
        }


def running_plateau(scrapes: list[Scrape], max_num_seqs: int, *, source: str = "<metrics>") -> PlateauReport:
    """Judge whether running requests level off below ``max_num_seqs`` under load.

    A scrape is *under load* for an engine when its ``vllm:num_requests_waiting`` is above 0
    (without that gauge, every scrape counts). The engine is *capped* when, in every loaded
    scrape, running requests stay below ``max_num_seqs``: requests were waiting although
    slots were free, so another bound (the token budget, a max_num_active_seqs override, the
    KV cache) held them back. The plateau is the highest running count while loaded, and
    ``plateau_count`` says in how many loaded scrapes running requests sat at it.
    """
    _positive_int("max_num_seqs", max_num_seqs)
    if not scrapes or not any(s.running for s in scrapes):
        raise DataError(f"no {RUNNING} samples", file=source)
    has_waiting = any(s.waiting for s in scrapes)
    keys = list(dict.fromkeys(k for s in scrapes for k in s.running))
    series = []
    for key in keys:
        runs = [(s.running[key], s.waiting.get(key)) for s in scrapes if key in s.running]
        loaded = [r for r, w in runs if (w is not None and w > 0) or not has_waiting]
        plateau = max(loaded) if loaded else None
        series.append(
            SeriesPlateau(
                labels=dict(key),
                samples=len(runs),
                loaded=len(loaded),
                peak_running=max(r for r, _ in runs),
                plateau=plateau,
                plateau_count=loaded.count(plateau) if loaded else 0,
                capped=bool(loaded) and max(loaded) < max_num_seqs,
            )
        )
    return PlateauReport(source, max_num_seqs, len(scrapes), has_waiting, tuple(series))


_BOUND_TEXT = {
    "max_num_seqs": "max_num_seqs",
    "token_budget": "the token budget (budget // charge)",
    "lookahead_cap": "the lookahead cap (budget // lookahead)",
}


def render_admission(admission=None, metrics=None) -> str:
    """The text of ``qualgate admission``: the admitted running requests and which bound
    binds (an :func:`admission_for` / :func:`admission` result), and the measured plateau
    (a :func:`running_plateau` result)."""
    lines = []
    emit = lines.append
    if admission is not None:
        a = admission
        if a.method:
            emit(
                f"{a.method}, K = {a.k}: charge {a.charge} tokens per decode request"
                + (f", lookahead {a.lookahead}" if a.lookahead is not None else "")
            )
        terms = [f"max_num_seqs {a.max_num_seqs}", f"{a.budget} // {a.charge} = {a.bounds['token_budget']}"]
        if a.lookahead is not None:
            terms.append(f"{a.budget} // {a.lookahead} = {a.bounds['lookahead_cap']}")
        emit(f"admitted running requests: {a.admitted} = min({', '.join(terms)})")
        emit("binding: " + " and ".join(_BOUND_TEXT[b] for b in a.binding))
        if a.override:
            emit(f"vLLM logs (WARNING, vllm.config.vllm): {a.override}")
    if metrics is not None:
        m = metrics
        emit(
            f"metrics: {m.scrapes} scrape(s) from {m.source}; max_num_seqs "
            f"{m.max_num_seqs}"
            + ("" if m.has_waiting else "; no vllm:num_requests_waiting gauge, so every scrape counts as under load")
        )
        for s in m.series:
            labels = ",".join(f'{k}="{v}"' for k, v in s.labels.items())
            head = f"  {{{labels}}}: " if labels else "  "
            if not s.loaded:
                emit(f"{head}never under load in {s.samples} scrape(s); running peaked at {s.peak_running:g}")
                continue
            verdict = (
                f"capped: running stays below max_num_seqs {m.max_num_seqs} while "
                "requests wait, so another bound binds (token budget, "
                "max_num_active_seqs override, KV cache)"
                if s.capped
                else f"reaches max_num_seqs {m.max_num_seqs} under load"
            )
            emit(
                f"{head}under load in {s.loaded} of {s.samples} scrape(s); running "
                f"plateaus at {s.plateau:g} ({s.plateau_count} loaded scrape(s)): "
                f"{verdict}"
            )
            if admission is not None:
                pred = admission.admitted
                rel = "matches" if s.plateau == pred else ("is below" if s.plateau < pred else "is above")
                emit(
                    f"    the plateau {s.plateau:g} {rel} the predicted {pred}; vLLM "
                    "can also run one request more as a partial chunk on leftover "
                    "budget (scheduler.py:844-848, 1062-1074), and the KV cache can "
                    "hold fewer"
                )
    return "\n".join(lines)
