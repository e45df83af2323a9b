"""Pair baseline and candidate records on ``(suite, question_id, seed, sample_index)``.

:func:`pair_records` never pairs on row order. It refuses, with counts and examples
(:class:`~qualgate.errors.DataError`, exit 3 on the command line):

- a side whose records carry more than one ``config_id`` (or ``mode``): one file set must
  hold one configuration;
- a key present twice on one side;
- keys present on one side only (unless ``on_missing='drop'``, which pairs the intersection
  and reports what it dropped);
- pairs whose ``suite_version`` or ``prompt_hash`` differ between the sides (the two runs did
  not ask the same question), unless ``on_prompt_mismatch='report'``: then they are paired by
  question id anyway and the differences are counted and reported (a note with examples, and
  ``dropped['prompt_differences']``), never silently ignored. This is the mode for pairing a
  qualgate run with another tool's run of the same questions, whose prompt hash covers a
  differently rendered prompt (:mod:`qualgate.records.prompts`);
- pairs where either side has outcome ``error`` (an engine failure is not a wrong answer),
  unless ``max_errors`` allows that many.

``no_answer`` counts as not correct, and is counted apart on each side.

Missingness that cannot hide a loss: a pair whose candidate side is missing or an ``error``
while the baseline answered correctly is kept as a *lost* pair (baseline correct, candidate
not), flagged in :attr:`Pairing.imputed` (the worst case for the candidate: a config that
fails exactly where it would have been wrong cannot pass by failing). The same worst case is
taken on the baseline side: a pair whose baseline side is missing (a key only in the
candidate, with ``on_missing='drop'``) or an ``error`` while the candidate is not correct is
kept as lost too (a baseline made to fail where the candidate lost cannot hide the losses).
:meth:`Pairing.without_imputed` drops them, for the verdict without imputation. Every other
incomplete pair (a candidate-side gap on a question the baseline got wrong, a baseline-side
gap where the candidate is correct) is dropped. :attr:`Pairing.dropped` counts all of them by side and by the
baseline's outcome.

The result, :class:`Pairing`, holds per-pair arrays (correctness on each side, the suite, the
question as the cluster) that the gate, the sequential gate and calibration read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import operator
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qualgate.config.options import ON_MISSING, ON_PROMPT_MISMATCH
from qualgate.errors import DataError
from qualgate.records import Record, RecordSet, read_records, record_files
from qualgate.records.files import gc_paused
from qualgate.records.strict import LIMITS

__all__ = ["IMPUTED_BASELINE", "IMPUTED_ERROR", "IMPUTED_MISSING", "Pairing", "Side", "load_side", "pair_records"]

#: codes of :attr:`Pairing.imputed`: the candidate side an error or missing (baseline correct),
#: the baseline side an error or missing (candidate not correct)
IMPUTED_ERROR, IMPUTED_MISSING, IMPUTED_BASELINE = 1, 2, 3
_EXAMPLES = 3


@dataclass(frozen=True)
class Side:
    """What one side's records say about themselves."""

    path: str  #: the file or directory given
    config_id: str
    mode: str | None
    run_ids: tuple[str, ...]
    files: tuple[str, ...]
    n_records: int
    dropped_truncated: tuple[str, ...] = ()  #: incomplete last lines dropped on reading
    sha256: tuple[str, ...] = ()  #: of each of ``files``, as read
    #: (decided_by, records) for the records that carry ``decided_by``, most frequent first
    decided_by: tuple[tuple[str, int], ...] = ()

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "config_id": self.config_id,
            "mode": self.mode,
            "run_ids": list(self.run_ids),
            "files": [{"path": f, "sha256": h} for f, h in zip(self.files, self.sha256)],
            "records": self.n_records,
            "dropped_truncated": list(self.dropped_truncated),
            "decided_by": dict(self.decided_by),
        }


@dataclass(frozen=True, eq=False)
class Pairing:
    """Paired outcomes of one baseline and one candidate, one entry per pair.

    Pairs are in the baseline's record order, then the candidate-only keys counted as lost. ``question`` numbers the (suite, question_id)
    clusters from 0; ``suite`` indexes :attr:`suites`.
    """

    baseline: Side
    candidate: Side
    suites: tuple[str, ...]
    suite: np.ndarray  #: int, index into ``suites``
    question: np.ndarray  #: int, cluster id of (suite, question_id)
    baseline_correct: np.ndarray  #: bool
    candidate_correct: np.ndarray  #: bool
    baseline_no_answer: np.ndarray  #: bool
    candidate_no_answer: np.ndarray  #: bool
    notes: tuple[str, ...] = ()  #: what was dropped, in sentences
    dropped: dict | None = None  #: counts of what was dropped (JSON-ready)
    question_keys: tuple[tuple[str, str], ...] = ()  #: (suite, question_id) of each cluster id
    imputed: np.ndarray | None = None  #: int8 per pair: 0, IMPUTED_ERROR, IMPUTED_MISSING or IMPUTED_BASELINE

    @property
    def n_imputed(self) -> int:
        return int(np.count_nonzero(self.imputed)) if self.imputed is not None else 0

    def subset(self, keep: np.ndarray) -> Pairing:
        """The pairs where ``keep`` is true, questions and suites renumbered from 0."""
        keep = np.asarray(keep, dtype=bool)
        qs, question = np.unique(self.question[keep], return_inverse=True)
        keys = tuple(self.question_keys[q] for q in qs.tolist()) if self.question_keys else ()
        ss, suite = np.unique(self.suite[keep], return_inverse=True)
        imputed = self.imputed[keep] if self.imputed is not None else None
        return dataclasses.replace(
            self,
            suites=tuple(self.suites[s] for s in ss.tolist()),
            suite=suite.astype(np.intp),
            question=question.astype(np.intp),
            baseline_correct=self.baseline_correct[keep],
            candidate_correct=self.candidate_correct[keep],
            baseline_no_answer=self.baseline_no_answer[keep],
            candidate_no_answer=self.candidate_no_answer[keep],
            question_keys=keys,
            imputed=imputed,
        )

    def without_imputed(self) -> Pairing:
        """The pairing with the imputed (worst-case) pairs dropped instead."""
        return self if not self.n_imputed else self.subset(self.imputed == 0)

    @property
    def n_pairs(self) -> int:
        return len(self.suite)

    @property
    def n_questions(self) -> int:
        return int(self.question.max()) + 1 if len(self.question) else 0

    @property
    def max_cluster_size(self) -> int:
        """Most pairs sharing one question (seeds × samples); > 1 means a clustered analysis."""
        return int(np.bincount(self.question).max()) if len(self.question) else 0


def load_side(path, *, drop_truncated: bool = False, allow_unknown: bool = False) -> RecordSet:
    """Read one side (a record file or a directory of them), with the SHA-256 of each file."""
    files = record_files(path)
    if not all(Path(f).is_file() for f in files):  # a FIFO, a device, a directory: never hashed
        read_records(path, drop_truncated=drop_truncated, allow_unknown=allow_unknown)  # names it
    before = _digests(files)
    records = read_records(path, drop_truncated=drop_truncated, allow_unknown=allow_unknown)
    if _digests(records.files) != before:
        raise DataError("the record files changed while they were read; gate them again", file=str(path))
    return HashedRecordSet(
        **{f.name: getattr(records, f.name) for f in dataclasses.fields(records)}, sha256=tuple(before)
    )


@dataclass(frozen=True, eq=False)
class HashedRecordSet(RecordSet):
    """A :class:`~qualgate.records.RecordSet` with the SHA-256 of each of its files."""

    sha256: tuple[str, ...] = ()


def sha256_file(path, *, limit: int | None = None) -> str:
    """The hex SHA-256 of a file's bytes; a file over ``limit`` bytes is a
    :class:`~qualgate.errors.DataError`, refused before a byte is hashed."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        if limit is not None and (size := os.fstat(fh.fileno()).st_size) > limit:
            raise DataError(f"{size:,} bytes, over the {limit:,} byte limit for a records file", file=str(path))
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _digests(files) -> list[str]:
    return [sha256_file(f, limit=LIMITS["records"]) for f in files]


_USED = (
    "suite",
    "question_id",
    "seed",
    "sample_index",
    "suite_version",
    "prompt_hash",
    "outcome",
    "config_id",
    "mode",
    "run_id",
)


def _columns(records: Sequence[Record]) -> dict[str, tuple]:
    """The fields pairing reads, as one tuple per field (one pass over the records)."""
    rows = list(map(operator.attrgetter(*_USED), getattr(records, "records", records)))
    return dict(zip(_USED, zip(*rows))) if rows else dict.fromkeys(_USED, ())


def _describe(records: Sequence[Record], cols: dict, label: str, path) -> Side:
    if not records:
        raise DataError(f"{label} has no records", file=str(path))
    configs, modes = set(cols["config_id"]), set(cols["mode"])
    if len(configs) > 1:
        raise DataError(
            f"{label} records carry {len(configs)} config ids ({', '.join(sorted(configs)[:5])}): "
            "a baseline or candidate argument must hold exactly one configuration",
            file=str(path),
            field="config_id",
        )
    if len(modes) > 1:
        shown = ", ".join(sorted(str(m) for m in modes))
        raise DataError(
            f"{label} records carry {len(modes)} mode labels ({shown}) for one config id",
            file=str(path),
            field="mode",
        )
    files = getattr(records, "files", (str(path),))
    dropped = tuple(t.describe() for t in getattr(records, "dropped", ()))
    decided = Counter(r.decided_by for r in getattr(records, "records", records) if r.decided_by is not None)
    return Side(
        str(path),
        configs.pop(),
        modes.pop(),
        tuple(sorted(set(cols["run_id"]))),
        tuple(files),
        len(records),
        dropped,
        tuple(getattr(records, "sha256", ())),
        tuple(sorted(decided.items(), key=lambda kv: (-kv[1], kv[0]))),
    )


def _keys(records: Sequence[Record], cols: dict, label: str, path) -> tuple[list, dict]:
    keys = list(zip(cols["suite"], cols["question_id"], cols["seed"], cols["sample_index"]))
    index = dict(zip(keys, range(len(keys))))
    if len(index) == len(keys):
        return keys, index
    first: dict = {}
    duplicates = [(first[k], i) for i, k in enumerate(keys) if first.setdefault(k, i) != i]
    where = getattr(records, "origin", lambda k: f"record {k}")
    shown = "; ".join(f"{_fmt_key(keys[i])} at {where(j)} and {where(i)}" for j, i in duplicates[:_EXAMPLES])
    raise DataError(
        f"{label}: {len(duplicates)} duplicated keys (suite, question_id, seed, sample_index), e.g. {shown}",
        file=str(path),
    )


def _fmt_key(key) -> str:
    suite, qid, seed, sample = key
    return f"{suite}/{qid} seed {seed} sample {sample}"


def pair_records(
    baseline: Sequence[Record],
    candidate: Sequence[Record],
    *,
    on_missing: str = "error",
    max_errors: int = 0,
    baseline_path=None,
    candidate_path=None,
    on_prompt_mismatch: str = "error",
) -> Pairing:
    """Pair two sides' records on their keys; refuse inconsistent data.

    Parameters
    ----------
    baseline, candidate : sequence of Record
        Typically :class:`~qualgate.records.RecordSet` from :func:`load_side` (whose file
        and line numbers then appear in messages).
    on_missing : {'error', 'drop'}
        What to do with keys present on one side only.
    max_errors : int
        How many pairs with an ``error`` outcome (on either side) may be dropped; more is an
        error.
    baseline_path, candidate_path : str, optional
        Names for messages; default to the record sets' paths.
    on_prompt_mismatch : {'error', 'report'}
        Pairs whose ``prompt_hash`` or ``suite_version`` differ: refuse them, or pair them by
        question id and report how many differ (in ``notes`` and ``dropped``).

    Raises
    ------
    qualgate.errors.DataError
        Listing every problem found, each with a count and examples.
    ValueError
        For an invalid ``on_missing`` or ``max_errors``.
    """
    if on_missing not in ON_MISSING:
        raise ValueError(f"on_missing must be one of {', '.join(map(repr, ON_MISSING))}; got {on_missing!r}")
    if isinstance(max_errors, bool) or not isinstance(max_errors, int) or max_errors < 0:
        raise ValueError(f"max_errors must be a non-negative integer, got {max_errors!r}")
    if on_prompt_mismatch not in ON_PROMPT_MISMATCH:
        raise ValueError(
            f"on_prompt_mismatch must be one of {', '.join(map(repr, ON_PROMPT_MISMATCH))}; got {on_prompt_mismatch!r}"
        )
    with gc_paused():
        return _pair(baseline, candidate, on_missing, max_errors, baseline_path, candidate_path, on_prompt_mismatch)


def _pair(
    baseline, candidate, on_missing, max_errors, baseline_path, candidate_path, on_prompt_mismatch="error"
) -> Pairing:
    bpath = baseline_path or getattr(baseline, "path", "baseline")
    cpath = candidate_path or getattr(candidate, "path", "candidate")
    bcols, ccols = _columns(baseline), _columns(candidate)
    bside = _describe(baseline, bcols, "baseline", bpath)
    cside = _describe(candidate, ccols, "candidate", cpath)
    bkeys, bindex = _keys(baseline, bcols, "baseline", bpath)
    ckeys, cindex = _keys(candidate, ccols, "candidate", cpath)

    # positions of the pairs, in the baseline's order
    matched = list(map(cindex.get, bkeys))
    if None in matched:
        bi = np.flatnonzero(np.array([j is not None for j in matched], dtype=bool))
        cj = np.array([matched[i] for i in bi], dtype=np.intp)
    else:
        bi, cj = np.arange(len(matched)), np.array(matched, dtype=np.intp)

    problems, notes, prompt_diffs = [], [], {}
    for label, count, keys, other in (
        ("baseline", len(bkeys) - len(bi), bkeys, cindex),
        ("candidate", len(ckeys) - len(bi), ckeys, bindex),
    ):
        if count:
            shown = ", ".join(_fmt_key(k) for k in sorted(k for k in keys if k not in other)[:_EXAMPLES])
            text = f"{count} keys only in the {label} (e.g. {shown})"
            if on_missing == "error":
                problems.append(text + "; pass --on-missing drop to pair the intersection")
            else:
                notes.append(f"incomplete: {text}")

    for name in ("suite_version", "prompt_hash"):
        bv, cv = np.array(bcols[name], dtype=object)[bi], np.array(ccols[name], dtype=object)[cj]
        bad = np.flatnonzero(bv != cv)
        if len(bad):
            shown = "; ".join(f"{_fmt_key(bkeys[bi[k]])}: {bv[k]!r} vs {cv[k]!r}" for k in bad[:_EXAMPLES])
            if on_prompt_mismatch == "report":
                notes.append(
                    f"{len(bad)} of {len(bi)} pairs differ in {name} (paired by question id as asked: "
                    f"check that both runs rendered the same prompts), e.g. {shown}"
                )
                prompt_diffs[f"{name}_differences"] = len(bad)
                continue
            problems.append(
                f"{len(bad)} pairs differ in {name} between baseline and candidate "
                f"(the runs did not ask the same questions), e.g. {shown}; to pair them by question id "
                "and report the differences, pass --prompt-mismatch report"
            )
    # a judge that failed to grade (judge_error) is a failure like an engine error: same rules
    judged_failures = "judge_error" in bcols["outcome"] or "judge_error" in ccols["outcome"]
    bcols["outcome"], ccols["outcome"] = _failures(bcols["outcome"]), _failures(ccols["outcome"])
    bo, co = np.array(bcols["outcome"], dtype=object)[bi], np.array(ccols["outcome"], dtype=object)[cj]
    errors = np.flatnonzero((bo == "error") | (co == "error"))
    if len(errors):
        shown = "; ".join(
            f"{_fmt_key(bkeys[bi[k]])}: " + _failed_sides(baseline[bi[k]], candidate[cj[k]]) for k in errors[:_EXAMPLES]
        )
        what = (
            "an 'error' outcome (an engine failure, not a wrong answer)"
            if not judged_failures
            else "an 'error' or 'judge_error' outcome (an engine or judge failure, not a wrong answer)"
        )
        text = f"{len(errors)} pairs have {what}, e.g. {shown}"
        if len(errors) > max_errors:
            problems.append(f"{text}; --max-errors allows {max_errors}")
        else:
            notes.append(f"incomplete: {text}")

    # every baseline key: kept, imputed as lost (worst case) or dropped
    ball = np.array(bcols["outcome"], dtype=object)
    status = np.zeros(len(bkeys), dtype=np.int8)  # 0 kept, IMPUTED_*, _DROPPED
    cout = np.full(len(bkeys), "missing", dtype=object)
    cout[bi] = co
    b_ok = ball == "correct"
    status[(cout == "missing")] = np.where(b_ok[cout == "missing"], IMPUTED_MISSING, _DROPPED)
    c_err = (cout == "error") & (ball != "error")
    status[c_err] = np.where(b_ok[c_err], IMPUTED_ERROR, _DROPPED)
    # the worst case on the baseline side too: a baseline error where the candidate is not
    # correct may hide a loss, so it counts as one (baseline correct); else it is dropped
    b_err = ball == "error"
    status[b_err] = np.where(cout[b_err] == "correct", _DROPPED, IMPUTED_BASELINE)
    dropped = _dropped_counts(ball, cout, len(ckeys) - len(bi)) | prompt_diffs
    # keys only in the candidate (with on_missing='drop'): lost when the candidate is not correct
    keys = list(bkeys)
    if len(ckeys) > len(bi):
        call = np.array(ccols["outcome"], dtype=object)
        only = [j for j, k in enumerate(ckeys) if k not in bindex and call[j] != "correct"]
        if only:
            keys += [ckeys[j] for j in only]
            ball = np.concatenate([ball, np.full(len(only), "correct", dtype=object)])
            cout = np.concatenate([cout, call[only]])
            status = np.concatenate([status, np.full(len(only), IMPUTED_BASELINE, dtype=np.int8)])
    ball = np.where(status == IMPUTED_BASELINE, "correct", ball)
    n_imputed = int(np.count_nonzero((status > 0) & (status < _DROPPED)))
    dropped["imputed_as_lost"] = n_imputed
    if not problems and not (status == 0).any():
        problems.append("no pairs left to compare")
    if problems:
        sep = " " if len(problems) == 1 else "\n  - "
        raise DataError(f"cannot pair {bpath} with {cpath}:{sep}" + "\n  - ".join(problems))
    n_base = int(np.count_nonzero(status == IMPUTED_BASELINE))
    if n_imputed - n_base:
        notes.append(
            f"{n_imputed - n_base} pairs whose candidate side is missing or an error on a question the "
            "baseline answered correctly count as lost (worst case)"
        )
    if n_base:
        notes.append(
            f"{n_base} pairs whose baseline side is missing or an error where the candidate is not correct "
            "count as lost (worst case)"
        )

    rows = np.flatnonzero(status < _DROPPED)
    bo, co = ball[rows], cout[rows]
    qids: dict = {}
    question = np.array([qids.setdefault(keys[i][:2], len(qids)) for i in rows.tolist()], dtype=np.intp)
    # suites numbered in sorted order, through the (few) questions
    suites = {suite: 0 for suite, _ in qids}
    suites = {suite: i for i, suite in enumerate(sorted(suites))}
    suite_of_question = np.array([suites[suite] for suite, _ in qids], dtype=np.intp)
    return Pairing(
        bside,
        cside,
        tuple(suites),
        suite_of_question[question],
        question,
        bo == "correct",
        co == "correct",
        bo == "no_answer",
        co == "no_answer",
        tuple(notes),
        dropped,
        tuple(qids),
        status[rows],
    )


_DROPPED = 9


def _failures(outcomes: list) -> list:
    """``outcomes`` with ``judge_error`` read as ``error`` (the same list when there is none)."""
    return ["error" if o == "judge_error" else o for o in outcomes] if "judge_error" in outcomes else outcomes


def _failed_sides(base: Record, cand: Record) -> str:
    """The failed side(s) of a pair and each distinct message once, as written (first line,
    at most 200 characters; not repr-escaped)."""
    failed = [
        (side, r) for side, r in (("baseline", base), ("candidate", cand)) if r.outcome in ("error", "judge_error")
    ]
    texts: dict = {}
    for side, r in failed:
        message = " ".join((r.error or "(no message)").split("\n", 1)[0].split())
        message = message if len(message) <= 200 else message[:197] + "..."
        texts.setdefault((r.outcome, message), []).append(side)
    return " | ".join(f"{' and '.join(sides)} {outcome}: {message}" for (outcome, message), sides in texts.items())


def _dropped_counts(b_outcome, c_outcome, baseline_missing: int) -> dict:
    """Incomplete pairs by side and by the baseline's outcome (JSON-ready)."""
    c_missing, c_error = c_outcome == "missing", c_outcome == "error"
    b_error = b_outcome == "error"
    incomplete = c_missing | c_error | b_error
    by_side = {
        "candidate_missing": int(np.count_nonzero(c_missing)),
        "candidate_error": int(np.count_nonzero(c_error & ~b_error)),
        "baseline_missing": int(baseline_missing),
        "baseline_error": int(np.count_nonzero(b_error & ~c_error & ~c_missing)),
        "both_error": int(np.count_nonzero(b_error & c_error)),
        "baseline_error_candidate_missing": int(np.count_nonzero(b_error & c_missing)),
    }
    by_outcome = {
        o: int(np.count_nonzero(incomplete & (b_outcome == o))) for o in ("correct", "incorrect", "no_answer", "error")
    }
    by_outcome["missing"] = int(baseline_missing)
    imputed = int(np.count_nonzero((c_missing | c_error) & (b_outcome == "correct")))
    return {
        "pairs": int(np.count_nonzero(incomplete)) + int(baseline_missing),
        "imputed_as_lost": imputed,
        "by_side": by_side,
        "by_baseline_outcome": by_outcome,
        # the counts of earlier versions
        "baseline_only": int(np.count_nonzero(c_missing)),
        "candidate_only": int(baseline_missing),
        "errors": int(np.count_nonzero(c_error | b_error)),
    }
