"""Pairwise judging: which of two configs' answers is better, asked in both orders.

:func:`judge_pairs` is what ``qualgate judge BASELINE CANDIDATE --judge JUDGE.yaml --out DIR``
calls. Records are paired on ``(suite, question_id, seed, sample_index)`` (each key once per
side, the same keys and prompt hashes on both sides), and for every pair:

- **identical outputs** (byte-equal) are a tie without a judge call: whatever a judge says,
  the pair is concordant. They are counted (``identical``);
- otherwise the judge is asked twice, the baseline's answer shown first (as A) and then
  second. The pair is **lost** only if the judge prefers the baseline in both orders,
  **gained** only if it prefers the candidate in both, and **tied** otherwise (a judge that
  favours a position, or calls one order a tie, ties the pair);
- a reply the parser cannot read, or a request that failed (timeout, refusal, HTTP error
  after the retries), makes the pair a ``judge_error``;
- a pair with an ``error`` record on either side (the engine failed, no output) is not
  judged: both judged records keep outcome ``error`` and the engine's message.

Every reply is cached in an append-only JSON Lines file under the SHA-256 of the judge's
identity and the exact messages sent (so the prompt and both outputs, in their order): a
rerun, or a sweep that judges a new candidate against the same baseline, asks only about
requests not asked before. A transport failure is not cached (it is asked again next time);
an unreadable reply is stored but not final: the next run (a resume into the same cache) asks
again, up to :data:`MAX_ASKS` replies per request, and the last reply decides.

Written into ``DIR`` (each file atomically; the cache by appending):

- ``baseline/<name>.jsonl`` and ``candidate/<name>.jsonl``: records ``qualgate gate`` reads.
  A lost pair is baseline ``correct`` / candidate ``incorrect``, a gained pair the reverse, a
  tie both ``correct``, so the gate's lost and gained counts are the judged ones (its
  accuracies are not pass rates: they read "share of pairs the other side did not win").
  Both carry ``decided_by: judge:<name>@<judge_id>``, ``run_id`` the judge id and
  ``answer_strict`` the two verdicts (baseline-first order, then candidate-first);
- ``pairs.jsonl``: per pair, the key, the outcome, and for each order the verdict, the
  judge's text (its reasons) or error, and whether it came from the cache;
- ``judge.json``: the judge's identity (config, sampling, template hash, judge id), the input
  files and their SHA-256, and the counts (:class:`JudgeSummary`), with the *decisive rate*:
  the share of judged (non-identical) pairs the judge called lost or gained. On an A/A pair
  (two runs of one lossless config) that is the judge's noise: how often it declares a
  winner between equivalent outputs.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from qualgate.errors import DataError
from qualgate.records import Record
from qualgate.records.prompts import prompt_hash

from ._judge import Judge, Reply
from ._prompts import Unreadable, variables
from ._sensitivity import DEFAULT_CONFIDENCE, Sensitivity, planted_pairs

__all__ = ["JudgeSummary", "VerdictCache", "judge_pairs", "judged_reasons", "load_questions", "questions_from_suite"]

CACHE_NAME = "verdict_cache.jsonl"
#: replies asked for one request at most: an unreadable one is asked again on the next run
MAX_ASKS = 3
#: a pair's verdict per order, from the side's point of view
_SIDE = {
    "baseline_first": {"A": "baseline", "B": "candidate", "tie": "tie"},
    "candidate_first": {"A": "candidate", "B": "baseline", "tie": "tie"},
}


@dataclass(frozen=True)
class JudgeSummary:
    """The counts of one :func:`judge_pairs` call (``judge.json``'s ``counts``)."""

    pairs: int
    identical: int  #: byte-identical outputs: ties, never sent to the judge
    judged: int  #: pairs asked about (both orders)
    lost: int
    gained: int
    tied: int  #: judged pairs tied (either order a tie, or the orders disagree)
    order_inconsistent: int  #: judged pairs whose two orders named different winners
    position_a: int  #: judged pairs where the answer shown first won in both orders
    judge_error: int
    engine_error: int  #: pairs with an ``error`` record (not judged)
    calls: int  #: judge requests sent now
    cached: int  #: judge requests answered from the cache
    seconds: float

    @property
    def decisive_rate(self) -> float | None:
        """Share of the judged pairs called lost or gained (the noise rate on an A/A pair)."""
        n = self.lost + self.gained + self.tied
        return (self.lost + self.gained) / n if n else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"decisive_rate": self.decisive_rate}


class VerdictCache:
    """Judge replies by request hash, in an append-only JSON Lines file.

    Each line is ``{"key", "judge_id", "text"}``. An incomplete last line (a writer that was
    killed mid-line: never a whole entry) is cut before the next append; any other unreadable
    line is a :class:`DataError` naming the line.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.entries: dict[str, str] = {}
        self.asked: dict[str, int] = {}  #: replies stored per key (an unreadable one is asked again)
        self._tail_cut = 0
        if self.path.exists():
            data = self.path.read_bytes()
            complete = data[: data.rfind(b"\n") + 1]
            self._tail_cut = len(data) - len(complete)
            for i, line in enumerate(complete.splitlines(), 1):
                try:
                    row = json.loads(line)
                    key, text = row["key"], row["text"]
                    if not isinstance(key, str) or not isinstance(text, str):
                        raise TypeError
                except (ValueError, KeyError, TypeError):
                    raise DataError(
                        'not a judge cache entry ({"key", "judge_id", "text"})', file=str(self.path), line=i
                    ) from None
                self.entries[key] = text
                self.asked[key] = self.asked.get(key, 0) + 1

    @staticmethod
    def key(judge_id: str, messages) -> str:
        blob = json.dumps([judge_id, list(messages)], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def append(self, judge_id: str, new: Mapping[str, str]) -> None:
        """Add entries (one write and fsync for all of them)."""
        if not new:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        blob = b"".join(
            json.dumps({"key": k, "judge_id": judge_id, "text": t}, ensure_ascii=False).encode() + b"\n"
            for k, t in new.items()
        )
        if self._tail_cut:  # the incomplete line a killed writer left: never a whole entry
            with open(self.path, "r+b") as fh:
                fh.truncate(fh.seek(0, os.SEEK_END) - self._tail_cut)
            self._tail_cut = 0
        with open(self.path, "ab") as fh:  # O_APPEND: runs sharing the cache never overwrite each other
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        self.entries.update(new)
        for k in new:
            self.asked[k] = self.asked.get(k, 0) + 1


def load_questions(path: str | Path) -> dict[tuple[str, str], tuple[list, Any]]:
    """Questions from JSON Lines ``{"suite", "question_id", "messages", "reference"?}``:
    ``(suite, question_id) -> (messages, reference)``; ``reference`` a string or a list (one
    per user turn)."""
    from qualgate.records import strict

    out: dict[tuple[str, str], tuple[list, Any]] = {}
    text = strict.read_text(path, kind="records", bom="strip")
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        row = strict.loads_json(line, file=str(path), line=i)
        if not isinstance(row, dict) or set(row) - {"suite", "question_id", "messages", "reference"}:
            raise DataError(
                "a question line must be an object with suite, question_id, messages and an optional reference",
                file=str(path),
                line=i,
            )
        for key in ("suite", "question_id"):
            if not isinstance(row.get(key), str) or not row[key]:
                raise DataError("must be a non-empty string", file=str(path), line=i, field=key, value=row.get(key))
        msgs = row.get("messages")
        if (
            not isinstance(msgs, list)
            or not msgs
            or not all(
                isinstance(m, dict)
                and m.get("role") in ("system", "user", "assistant")
                and isinstance(m.get("content"), str)
                for m in msgs
            )
        ):
            raise DataError(
                "must be a non-empty list of {role: system|user|assistant, content: str}",
                file=str(path),
                line=i,
                field="messages",
            )
        ref = row.get("reference")
        if ref is not None and not (
            isinstance(ref, str) or (isinstance(ref, list) and all(isinstance(r, str) for r in ref))
        ):
            raise DataError(
                "must be a string or a list of strings", file=str(path), line=i, field="reference", value=ref
            )
        key = (row["suite"], row["question_id"])
        if key in out:
            raise DataError(
                "question listed twice", file=str(path), line=i, field="question_id", value=row["question_id"]
            )
        out[key] = (msgs, ref)
    return out


def questions_from_suite(suite) -> dict[tuple[str, str], tuple[list, Any]]:
    """The questions of a loaded :class:`qualgate.suites.Suite` (its gold is the reference)."""
    return {(suite.name, str(q.id)): ([dict(m) for m in q.prompt], q.gold) for q in suite.questions}


def _by_key(records, label, path) -> dict:
    out = {}
    for r in records:
        if r.key in out:
            raise DataError(f"the {label} holds {r.key} twice", file=str(path))
        out[r.key] = r
    if not out:
        raise DataError(f"the {label} has no records", file=str(path))
    return out


def _side_name(path) -> str:
    p = Path(getattr(path, "path", path))
    return p.stem if p.suffix else p.name


def _record(r: Record, run_id: str, outcome: str, decided_by: str, verdicts: str | None, error: str | None) -> dict:
    d = r.to_dict()
    for k in ("answer_strict", "answer_lenient", "decided_by", "error"):
        d.pop(k, None)
    d.update(run_id=run_id, outcome=outcome, decided_by=decided_by)
    if verdicts:
        d["answer_strict"] = verdicts
    if error:
        d["error"] = error
    return d


def _jsonl(rows) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def judge_pairs(
    baseline,
    candidate,
    judge: Judge,
    questions: Mapping,
    out: str | Path,
    *,
    cache: str | Path | None = None,
    baseline_path=None,
    candidate_path=None,
    log=None,
    sensitivity: int | None = None,
    sensitivity_seed: int = 0,
    sensitivity_confidence: float = DEFAULT_CONFIDENCE,
) -> JudgeSummary:
    """Judge every pair of ``baseline`` and ``candidate`` records into ``out`` (module docstring).

    ``questions`` maps ``(suite, question_id)`` to ``(messages, reference)``
    (:func:`load_questions`, :func:`questions_from_suite`); each record's ``prompt_hash`` must be
    the hash of its question's messages. ``cache`` defaults to ``out/verdict_cache.jsonl``.
    ``sensitivity``: also ask about that many planted pairs (None: up to 200, 0: none) (the baseline's answers against
    degraded copies, :mod:`._sensitivity`), into ``judge.json``'s ``sensitivity`` and
    ``planted.jsonl``.
    """
    from qualgate.formatting import to_json, write_atomic
    from qualgate.verdict.pairing import sha256_file

    t0 = time.perf_counter()
    log = log or (lambda msg: None)
    bpath = baseline_path or getattr(baseline, "path", "baseline")
    cpath = candidate_path or getattr(candidate, "path", "candidate")
    b, c = _by_key(baseline, "baseline", bpath), _by_key(candidate, "candidate", cpath)
    only = sorted(set(b) ^ set(c))
    if only:
        raise DataError(
            f"{len(only)} keys are on one side only (e.g. {only[0]}): judge two runs of the same questions",
            file=str(bpath if only[0] in b else cpath),
        )
    if judge.template.kind != "pairwise":
        raise DataError(
            "a pairwise judge needs a pairwise template",
            file=judge.template.path,
            field="kind",
            value=judge.template.kind,
        )
    out = Path(out)
    vcache = VerdictCache(cache if cache is not None else out / CACHE_NAME)
    jid, decided_by = judge.judge_id, judge.decided_by

    plans, asks = [], {}  # per pair: (key, kind, requests); request hash -> messages
    for key in sorted(b, key=str):
        rb, rc = b[key], c[key]
        if rb.prompt_hash != rc.prompt_hash or rb.suite_version != rc.suite_version:
            raise DataError(
                f"{key}: the two sides answered different prompts (prompt hash or suite version)",
                file=str(cpath),
                field="prompt_hash",
                value=rc.prompt_hash,
            )
        if "error" in (rb.outcome, rc.outcome) or rb.output is None or rc.output is None:
            plans.append((key, "engine_error", None))
            continue
        if rb.output == rc.output:
            plans.append((key, "identical", None))
            continue
        q = questions.get(key[:2])
        if q is None:
            raise DataError(
                f"no question for {key[0]}/{key[1]} (give the suite, or a questions file holding it)",
                file=str(bpath),
                field="question_id",
                value=key[1],
            )
        messages, reference = q
        if prompt_hash(messages) != rb.prompt_hash:
            raise DataError(
                f"{key[0]}/{key[1]}: the question's messages do not hash to the records' prompt_hash "
                "(the judge would see another prompt than the one answered)",
                file=str(bpath),
                field="prompt_hash",
                value=rb.prompt_hash,
            )
        orders = {"baseline_first": (rb.output, rc.output), "candidate_first": (rc.output, rb.output)}
        plans.append((key, "judged", _requests(judge, jid, vcache, asks, messages, reference, orders)))

    planted = []  # (key, kind, {order: request hash})
    for key, kind, original, degraded in planted_pairs(list(b.values()), sensitivity, seed=sensitivity_seed):
        if key[:2] not in questions:
            raise DataError(
                f"no question for {key[0]}/{key[1]} (the planted pairs show the judge the baseline's questions)",
                file=str(bpath),
                field="question_id",
                value=key[1],
            )
        messages, reference = questions[key[:2]]
        orders = {"original_first": (original, degraded), "degraded_first": (degraded, original)}
        planted.append((key, kind, _requests(judge, jid, vcache, asks, messages, reference, orders)))

    hashes = list(asks)
    log(
        f"judge {judge.name}: {len(hashes)} requests to send, "
        f"{(sum(1 for p in plans if p[1] == 'judged') + len(planted)) * 2 - len(hashes)} answered by the cache"
        + (f" ({len(planted)} planted pairs for the sensitivity)" if planted else "")
    )
    replies: dict[str, Reply] = dict(zip(hashes, judge.ask([asks[h] for h in hashes])))
    vcache.append(jid, {h: r.text for h, r in replies.items() if r.error is None})

    counts = dict(
        pairs=len(plans),
        identical=0,
        judged=0,
        lost=0,
        gained=0,
        tied=0,
        order_inconsistent=0,
        position_a=0,
        judge_error=0,
        engine_error=0,
        calls=len(hashes),
        cached=(sum(1 for p in plans if p[1] == "judged") + len(planted)) * 2 - len(hashes),
    )
    brecs, crecs, pairs = [], [], []
    for key, kind, requests in plans:
        rb, rc = b[key], c[key]
        entry: dict[str, Any] = {"suite": key[0], "question_id": key[1], "seed": key[2], "sample_index": key[3]}
        if kind == "engine_error":
            counts["engine_error"] += 1
            for r, side in ((rb, brecs), (rc, crecs)):
                side.append(
                    _record(r, jid, r.outcome if r.outcome == "error" else "correct", decided_by, None, r.error)
                )
            if rb.outcome != "error" and rc.outcome != "error":  # an output missing: not judgeable
                brecs[-1]["outcome"] = crecs[-1]["outcome"] = "judge_error"
                brecs[-1]["error"] = crecs[-1]["error"] = "a side has no output to judge"
            pairs.append(entry | {"outcome": "engine_error"})
            continue
        if kind == "identical":
            counts["identical"] += 1
            brecs.append(_record(rb, jid, "correct", decided_by, "identical", None))
            crecs.append(_record(rc, jid, "correct", decided_by, "identical", None))
            pairs.append(entry | {"outcome": "tie", "identical": True})
            continue
        counts["judged"] += 1
        verdicts, errors, shown = {}, [], []
        for order, h in requests.items():
            cached = h not in replies
            reply = Reply(vcache.entries[h]) if cached else replies[h]
            item = {"order": order, "cached": cached}
            if reply.error is not None:
                errors.append(f"{order}: the judge failed: {reply.error}")
                item |= {"verdict": "error", "error": reply.error}
            else:
                try:
                    v = _SIDE[order][judge.template.parse(reply.text)]
                    item |= {"verdict": v, "text": reply.text}
                    verdicts[order] = v
                except Unreadable as exc:
                    errors.append(f"{order}: {exc}")
                    item |= {"verdict": "error", "error": str(exc), "text": reply.text}
            shown.append(item)
        if errors:
            counts["judge_error"] += 1
            outcome, bo, co = "judge_error", "judge_error", "judge_error"
        else:
            v1, v2 = verdicts["baseline_first"], verdicts["candidate_first"]
            if v1 == v2 == "baseline":
                outcome, bo, co = "lost", "correct", "incorrect"
            elif v1 == v2 == "candidate":
                outcome, bo, co = "gained", "incorrect", "correct"
            else:
                outcome, bo, co = "tie", "correct", "correct"
            counts["lost" if outcome == "lost" else "gained" if outcome == "gained" else "tied"] += 1
            if "tie" not in (v1, v2) and v1 != v2:
                counts["order_inconsistent"] += 1
                if v1 == "baseline":  # the answer shown first (A) won both times
                    counts["position_a"] += 1
        label = ",".join(it["verdict"] for it in shown)
        err = "; ".join(errors) or None
        brecs.append(_record(rb, jid, bo, decided_by, label, err))
        crecs.append(_record(rc, jid, co, decided_by, label, err))
        pairs.append(entry | {"outcome": outcome, "verdicts": shown})

    sens, planted_rows = _planted_verdicts(planted, replies, vcache, judge, sensitivity_confidence)
    summary = JudgeSummary(**counts, seconds=round(time.perf_counter() - t0, 3))
    bname, cname = _side_name(bpath), _side_name(cpath)
    files = {"baseline": out / "baseline" / f"{bname}.jsonl", "candidate": out / "candidate" / f"{cname}.jsonl"}
    write_atomic(files["baseline"], _jsonl(brecs))
    write_atomic(files["candidate"], _jsonl(crecs))
    write_atomic(out / "pairs.jsonl", _jsonl(pairs))
    if planted:
        write_atomic(out / "planted.jsonl", _jsonl(planted_rows))
    inputs = {}
    for label, side in (("baseline", baseline), ("candidate", candidate)):
        inputs[label] = [
            {"file": str(f), "sha256": sha256_file(f)} for f in getattr(side, "files", ()) if Path(f).is_file()
        ]
    doc = {
        "kind": "qualgate.judged_pairs",
        "version": 1,
        "judge": judge.identity
        | {
            "judge_id": jid,
            "decided_by": decided_by,
            "config_path": judge.config.path,
            "template_path": judge.template.path,
        },
        "judge_backend": judge.info(),
        "inputs": inputs,
        "records": {k: str(v.relative_to(out)) for k, v in files.items()},
        "records_sha256": {k: sha256_file(v) for k, v in files.items()},
        "cache": str(vcache.path),
        "counts": summary.to_dict(),
        "sensitivity": sens.to_dict() if sens is not None else None,
    }
    write_atomic(out / "judge.json", to_json(doc) + "\n")
    return summary


def _requests(judge: Judge, jid: str, vcache: VerdictCache, asks: dict, messages, reference, orders) -> dict[str, str]:
    """``{order: request hash}`` of one pair asked in each order (``orders``: order -> (A, B));
    requests the cache cannot answer are added to ``asks`` (hash -> messages)."""
    requests = {}
    for order, (first, second) in orders.items():
        turns, var = variables(messages, reference, {"_a": first, "_b": second})
        msgs = judge.template.render(judge.template.variant(turns, "reference" in var), var)
        h = VerdictCache.key(jid, msgs)
        requests[order] = h
        if h not in vcache.entries or (_unreadable(judge, vcache.entries[h]) and vcache.asked.get(h, 0) < MAX_ASKS):
            asks[h] = msgs
    return requests


def _unreadable(judge: Judge, text: str) -> bool:
    try:
        judge.template.parse(text)
    except Unreadable:
        return True
    return False


def _planted_verdicts(planted, replies, vcache, judge, confidence):
    """The :class:`Sensitivity` of the planted pairs and their ``planted.jsonl`` rows."""
    if not planted:
        return None, []
    names = {"original_first": {"A": "original", "B": "degraded"}, "degraded_first": {"A": "degraded", "B": "original"}}
    counts = dict(detected=0, inverted=0, missed=0, judge_error=0)
    by_kind: dict[str, dict[str, int]] = {}
    rows = []
    for key, kind, requests in planted:
        won, shown, failed = [], [], False
        for order, h in requests.items():
            reply = replies.get(h) or Reply(vcache.entries[h])
            item = {"order": order}
            try:
                if reply.error is not None:
                    raise Unreadable(f"the judge failed: {reply.error}")
                v = judge.template.parse(reply.text)
                won.append(names[order].get(v, "tie"))
                item |= {"verdict": won[-1], "text": reply.text}
            except Unreadable as exc:
                failed = True
                item |= {"verdict": "error", "error": str(exc)}
            shown.append(item)
        if failed:
            outcome = "judge_error"
        elif won[0] == won[1] != "tie":
            outcome = "detected" if won[0] == "original" else "inverted"
        else:
            outcome = "missed"
        counts["judge_error" if failed else outcome] += 1
        k = by_kind.setdefault(kind, {"pairs": 0, "detected": 0, "inverted": 0})
        k["pairs"] += 1
        if outcome in ("detected", "inverted"):
            k[outcome] += 1
        rows.append(
            {"suite": key[0], "question_id": key[1], "seed": key[2], "sample_index": key[3], "kind": kind}
            | {"outcome": outcome, "verdicts": shown}
        )
    missed = counts["missed"] + counts["judge_error"]
    sens = Sensitivity(
        pairs=len(planted),
        detected=counts["detected"],
        inverted=counts["inverted"],
        missed=missed,
        judge_error=counts["judge_error"],
        by_kind=by_kind,
        confidence_level=confidence,
    )
    return sens, rows


def judged_reasons(records_path) -> dict:
    """The judge's text per pair, for records ``qualgate judge`` wrote (``OUT/candidate/x.jsonl``
    or ``OUT/candidate``): key -> ``[(order, verdict, text or error)]``; empty for other records."""
    p = Path(records_path)
    root = p.parent.parent if p.suffix else p.parent
    pairs = root / "pairs.jsonl"
    if not (root / "judge.json").is_file() or not pairs.is_file():
        return {}
    out = {}
    for line in pairs.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        key = (row["suite"], row["question_id"], row["seed"], row["sample_index"])
        out[key] = [(v["order"], v["verdict"], v.get("text") or v.get("error") or "") for v in row.get("verdicts", ())]
    return out
