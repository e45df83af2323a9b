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
import heapq
import os
import types
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qualgate.config.options import INPUT_FORMATS, ON_MISSING, ON_PROMPT_MISMATCH
from qualgate.errors import DataError
from qualgate.records import Record, RecordSet, read_records, record_files
from qualgate.records.columns import columns_of, factorize, key_codes, read_columns
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
    #: (suite, metric) of records imported from another tool's log: the ``decided_by`` their
    #: importer wrote (``<tool>:<metric>``), one per suite (:mod:`qualgate.records.importers`)
    metrics: tuple[tuple[str, str], ...] = ()
    #: the engine and version its records name (``None``: records written before qualgate kept them)
    engine: str | None = None
    engine_version: str | None = None

    def to_dict(self) -> dict:
        engine = {"engine": self.engine, "engine_version": self.engine_version} if self.engine else {}
        return (
            engine
            | {
                "path": self.path,
                "config_id": self.config_id,
                "mode": self.mode,
                "run_ids": list(self.run_ids),
                "files": [{"path": f, "sha256": h} for f, h in zip(self.files, self.sha256)],
                "records": self.n_records,
                "dropped_truncated": list(self.dropped_truncated),
                "decided_by": dict(self.decided_by),
            }
            | ({"metric": dict(self.metrics)} if self.metrics else {})
        )


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
    question_keys: Sequence[tuple[str, str]] = ()  #: (suite, question_id) of each cluster id (a QuestionKeys)
    imputed: np.ndarray | None = None  #: int8 per pair: 0, IMPUTED_ERROR, IMPUTED_MISSING or IMPUTED_BASELINE

    @property
    def n_imputed(self) -> int:
        return int(np.count_nonzero(self.imputed)) if self.imputed is not None else 0

    def subset(self, keep: np.ndarray) -> Pairing:
        """The pairs where ``keep`` is true, questions and suites renumbered from 0."""
        keep = np.asarray(keep, dtype=bool)
        qs, question = np.unique(self.question[keep], return_inverse=True)
        if isinstance(self.question_keys, QuestionKeys):
            keys = self.question_keys.take(qs)
        else:
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
    """Read one side (a record file or a directory of them), with the SHA-256 of each file.

    Each file is read on the columnar path (:func:`qualgate.records.columns.read_columns`:
    columns, no Python object per record) when it accepts the file, else by the strict reader;
    the result is the same. On the columnar path the records themselves are read only when
    asked for (:class:`LazyRecords`).
    """
    files = record_files(path)
    if not all(Path(f).is_file() for f in files):  # a FIFO, a device, a directory: never hashed
        read_records(path, drop_truncated=drop_truncated, allow_unknown=allow_unknown)  # names it
    if not allow_unknown:
        read = [read_columns(f) for f in files]
        if all(r is not None for r in read):
            tables, digests = zip(*read)
            table = pa.concat_tables(tables, promote_options="default") if len(tables) > 1 else tables[0]
            lines = tuple(range(1, t.num_rows + 1) for t in tables)
            records = LazyRecords(tuple(map(str, files)), digests, table.num_rows)
            return ColumnarRecordSet(str(path), records.files, records, (), lines, (), digests, table)
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


@dataclass(frozen=True, eq=False)
class ColumnarRecordSet(HashedRecordSet):
    """A side read on the columnar path: ``columns`` (an Arrow table of
    :data:`qualgate.records.columns.KEPT`) for pairing, ``records`` read when asked for."""

    columns: object = None


class LazyRecords(Sequence):
    """The records of files read on the columnar path, read by the strict reader when first
    asked for; a file that no longer has the SHA-256 it was gated with is refused."""

    def __init__(self, files: tuple[str, ...], sha256: tuple[str, ...], n: int):
        self.files, self.sha256, self.n = files, sha256, n
        self._records: tuple | None = None

    def __len__(self) -> int:
        return self.n

    def _read(self) -> tuple:
        if self._records is None:
            records = []
            for f, digest in zip(self.files, self.sha256):
                got = read_records(f).records
                if sha256_file(f, limit=LIMITS["records"]) != digest or len(got) == 0:
                    raise DataError("the record file changed since it was read; gate it again", file=f)
                records.extend(got)
            if len(records) != self.n:
                raise DataError("the record files changed since they were read; gate them again", file=self.files[0])
            self._records = tuple(records)
        return self._records

    def __getitem__(self, i):
        return self._read()[i]

    def __iter__(self):
        return iter(self._read())

    def __eq__(self, other):
        return tuple(self) == tuple(other) if isinstance(other, Sequence) else NotImplemented

    __hash__ = None


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


def _table(records):
    """The columns of one side: read on the columnar path, or taken from its records."""
    table = getattr(records, "columns", None)
    return table if table is not None else columns_of(records)


def _describe(records, table, label: str, path) -> Side:
    if not table.num_rows:
        raise DataError(f"{label} has no records", file=str(path))
    configs, modes = set(pc.unique(table["config_id"]).to_pylist()), set(pc.unique(table["mode"]).to_pylist())
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
    counts = pc.value_counts(pc.drop_null(table["decided_by"])).to_pylist()
    decided = sorted(((c["values"], c["counts"]) for c in counts), key=lambda kv: (-kv[1], kv[0]))
    return Side(
        str(path),
        configs.pop(),
        modes.pop(),
        tuple(sorted(pc.unique(table["run_id"]).to_pylist())),
        tuple(files),
        table.num_rows,
        dropped,
        tuple(getattr(records, "sha256", ())),
        tuple(decided),
        _imported_metrics(table, decided),
        *_engine(table, label, path),
    )


_IMPORTED = tuple(f"{fmt}:" for fmt in INPUT_FORMATS[1:])  # decided_by of imported records: <tool>:...


def _imported_metrics(table, decided) -> tuple[tuple[str, str], ...]:
    """(suite, decided_by) for records an importer wrote, one per suite; several in a suite (two logs
    of one task read on different metrics) are joined with ' + ' and refused on pairing."""
    if not any(label.startswith(_IMPORTED) for label, _ in decided):
        return ()
    kept = pa.table({"s": table["suite"], "d": table["decided_by"]}).group_by(["s", "d"]).aggregate([])
    pairs = kept.to_pylist()
    by_suite: dict[str, set] = {}
    for p in pairs:
        if p["d"] is not None and p["d"].startswith(_IMPORTED):
            by_suite.setdefault(p["s"], set()).add(p["d"])
    return tuple((s, " + ".join(sorted(d))) for s, d in sorted(by_suite.items()))


def _engine(table, label: str, path) -> tuple[str | None, str | None]:
    """The one (engine, engine_version) a side's records name (``None``: records written before
    qualgate kept them); refused when they name several, or only some of them name one."""
    if "engine" not in table.column_names:
        return None, None
    engines = set(pc.unique(table["engine"]).to_pylist())
    versions = set(pc.unique(table["engine_version"]).to_pylist())
    if engines == versions == {None}:
        return None, None
    if len(engines) > 1 or len(versions) > 1:
        shown = ", ".join(sorted(f"{e} {v}" for e in engines for v in versions))
        raise DataError(
            f"{label} records name more than one engine or version (among {shown}; absent: None): a "
            "baseline or candidate argument must come from one engine at one version",
            file=str(path),
            field="engine_version",
        )
    return engines.pop(), versions.pop()


def _key_tuples(table, rows) -> list:
    """``(suite, question_id, seed, sample_index)`` of the table's ``rows``."""
    rows = pa.array(np.asarray(rows, dtype=np.int64))
    return list(zip(*(table[name].take(rows).to_pylist() for name in _KEY_FIELDS)))


_KEY_FIELDS = ("suite", "question_id", "seed", "sample_index")


def _no_duplicates(records, table, keys: np.ndarray, label: str, path) -> None:
    unique, first = np.unique(keys, return_index=True)
    if len(unique) == len(keys):
        return
    firsts = first[np.searchsorted(unique, keys)]
    later = np.flatnonzero(firsts != np.arange(len(keys)))
    where = getattr(records, "origin", lambda k: f"record {k}")
    shown = "; ".join(
        f"{_fmt_key(key)} at {where(int(firsts[i]))} and {where(int(i))}"
        for key, i in zip(_key_tuples(table, later[:_EXAMPLES]), later[:_EXAMPLES].tolist())
    )
    raise DataError(
        f"{label}: {len(later)} duplicated keys (suite, question_id, seed, sample_index), e.g. {shown}",
        file=str(path),
    )


def _no_common_keys(bt, ct) -> str:
    """Why two sides share no key, in the fields that differ (suites, seeds, samples), so that
    the hint leads somewhere (``--on-missing drop`` would leave no pair)."""
    said = []
    for name, what in (("suite", "suites"), ("seed", "seeds"), ("sample_index", "sample indices")):
        a, b = (sorted({str(v) for v in t[name].to_pylist()}) for t in (bt, ct))
        if a != b:
            fmt = lambda vs: ", ".join(vs[:5]) + (f" (+{len(vs) - 5})" if len(vs) > 5 else "")
            said.append(f"{what}: baseline {fmt(a)}, candidate {fmt(b)}")
    if not said:
        said.append("their question ids do not overlap")
    return (
        "no question is in both sides, so --on-missing drop would leave no pair: "
        + "; ".join(said)
        + " (run both configs on the same suites, questions and seeds: a qualgate plan does)"
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
    bt, ct = _table(baseline), _table(candidate)
    bside = _describe(baseline, bt, "baseline", bpath)
    cside = _describe(candidate, ct, "candidate", cpath)
    (bk, ck), (bq, cq) = key_codes([bt, ct])
    _no_duplicates(baseline, bt, bk, "baseline", bpath)
    nb, nc = len(bk), len(ck)
    if ck is bk:  # the same keys in the same order (key_codes): every pair in place
        bi = cj = matched = np.arange(nb)
        c_only = np.zeros(0, dtype=np.int64)
    else:
        _no_duplicates(candidate, ct, ck, "candidate", cpath)
        # positions of the pairs, in the baseline's order
        n_keys = int(max(bk.max(), ck.max())) + 1
        where_c = np.full(n_keys, -1, dtype=np.int64)
        where_c[ck] = np.arange(nc)
        where_b = np.full(n_keys, -1, dtype=np.int64)
        where_b[bk] = np.arange(nb)
        matched = where_c[bk]
        bi = np.flatnonzero(matched >= 0)
        cj = matched[bi]
        c_only = np.flatnonzero(where_b[ck] < 0)
        del where_b, where_c

    problems, notes, prompt_diffs = [], [], {}
    bm, cm = dict(bside.metrics), dict(cside.metrics)
    differ = [(s, bm[s], cm[s]) for s in bm if s in cm and (bm[s] != cm[s] or " + " in bm[s])]
    if differ:
        shown = "; ".join(f"{s}: baseline {b}, candidate {c}" for s, b, c in differ[:_EXAMPLES])
        problems.append(
            f"the two logs were read on different metrics ({shown}): their outcomes are not the same "
            "measurement; read both on one metric (--metric NAME)"
        )
    for label, table, only in (
        ("baseline", bt, np.flatnonzero(matched < 0)),
        ("candidate", ct, c_only),
    ):
        if len(only):
            shown = ", ".join(_fmt_key(k) for k in heapq.nsmallest(_EXAMPLES, _key_tuples(table, only)))
            text = f"{len(only)} keys only in the {label} (e.g. {shown})"
            if on_missing == "error" and not len(bi):  # nothing to drop to: say why no key pairs
                problems.append(text + "; " + _no_common_keys(bt, ct))
                break
            if on_missing == "error":
                problems.append(text + "; pass --on-missing drop to pair the intersection")
            else:
                notes.append(f"incomplete: {text}")

    for name in ("suite_version", "prompt_hash"):
        bad = _differing(bt[name], ct[name], bi, cj)
        if len(bad):
            keys = _key_tuples(bt, bi[bad[:_EXAMPLES]])
            shown = "; ".join(
                f"{_fmt_key(key)}: {bt[name][int(bi[k])].as_py()!r} vs {ct[name][int(cj[k])].as_py()!r}"
                for key, k in zip(keys, bad[:_EXAMPLES].tolist())
            )
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
    (bo_codes, co_codes), _, outcomes = factorize(bt["outcome"], ct["outcome"])
    outcomes = outcomes.to_pylist()
    judged_failures = "judge_error" in outcomes
    code = np.array([_CODE[o] for o in outcomes], dtype=np.int8)
    ball, call = code[bo_codes], code[co_codes]
    errors = np.flatnonzero((ball[bi] == _ERROR) | (call[cj] == _ERROR))
    if len(errors):
        shown = "; ".join(
            f"{_fmt_key(key)}: " + _failed_sides(_failure(bt, bi[k]), _failure(ct, cj[k]))
            for key, k in zip(_key_tuples(bt, bi[errors[:_EXAMPLES]]), errors[:_EXAMPLES].tolist())
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
    status = np.zeros(nb, dtype=np.int8)  # 0 kept, IMPUTED_*, _DROPPED
    cout = np.full(nb, _MISSING, dtype=np.int8)
    cout[bi] = call[cj]
    b_ok = ball == _CORRECT
    missing = cout == _MISSING
    status[missing] = np.where(b_ok[missing], IMPUTED_MISSING, _DROPPED)
    c_err = (cout == _ERROR) & (ball != _ERROR)
    status[c_err] = np.where(b_ok[c_err], IMPUTED_ERROR, _DROPPED)
    # the worst case on the baseline side too: a baseline error where the candidate is not
    # correct may hide a loss, so it counts as one (baseline correct); else it is dropped
    b_err = ball == _ERROR
    status[b_err] = np.where(cout[b_err] == _CORRECT, _DROPPED, IMPUTED_BASELINE)
    dropped = _dropped_counts(ball, cout, len(c_only)) | prompt_diffs
    # keys only in the candidate (with on_missing='drop'): lost when the candidate is not correct
    only = c_only[call[c_only] != _CORRECT]
    question = np.concatenate([bq, cq[only]])
    ball = np.concatenate([ball, np.full(len(only), _CORRECT, dtype=np.int8)])
    cout = np.concatenate([cout, call[only]])
    status = np.concatenate([status, np.full(len(only), IMPUTED_BASELINE, dtype=np.int8)])
    ball = np.where(status == IMPUTED_BASELINE, _CORRECT, ball)
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
    # questions numbered in the order they first appear
    clusters, first, inverse = np.unique(question[rows], return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(clusters), dtype=np.intp)
    rank[order] = np.arange(len(clusters))
    firsts = rows[first[order]]  # a row of each question, in question order
    qkeys = _question_keys(bt, ct, firsts, only, nb)
    # suites numbered in sorted order, through the (few) questions
    suites = sorted(pc.unique(qkeys.suites).to_pylist())
    suite_of_question = np.asarray(pc.index_in(qkeys.suites, value_set=pa.array(suites, pa.string())), dtype=np.intp)
    question = rank[inverse.ravel()].astype(np.intp)
    return Pairing(
        bside,
        cside,
        tuple(suites),
        suite_of_question[question],
        question,
        bo == _CORRECT,
        co == _CORRECT,
        bo == _NO_ANSWER,
        co == _NO_ANSWER,
        tuple(notes),
        dropped,
        qkeys,
        status[rows],
    )


def _differing(b, c, bi: np.ndarray, cj: np.ndarray) -> np.ndarray:
    """Positions k of the pairs (bi[k], cj[k]) whose values in ``b`` and ``c`` differ; in
    blocks, so that no copy of a whole column is made."""
    if len(bi) == len(b) == len(c) and np.array_equal(bi, cj) and np.array_equal(bi, np.arange(len(bi))):
        return np.flatnonzero(~np.asarray(pc.equal(b, c), dtype=bool))
    step, bad = 1 << 18, []
    for start in range(0, len(bi), step):
        bv = b.take(pa.array(bi[start : start + step]))
        cv = c.take(pa.array(cj[start : start + step]))
        bad.append(start + np.flatnonzero(~np.asarray(pc.equal(bv, cv), dtype=bool)))
    return np.concatenate(bad) if bad else np.zeros(0, dtype=np.int64)


def _question_keys(bt, ct, firsts, only, nb) -> QuestionKeys:
    """The (suite, question_id) of each question, from the row of its first pair (a baseline
    row below ``nb``, else candidate row ``only[row - nb]``)."""
    from_b = firsts < nb
    taken = [(bt, firsts[from_b]), (ct, only[firsts[~from_b] - nb])]
    parts = {name: [t[name].take(pa.array(r)).combine_chunks() for t, r in taken if len(r)] for name in _KEY_FIELDS[:2]}
    columns = {name: pa.concat_arrays(a) if a else pa.array([], pa.string()) for name, a in parts.items()}
    if from_b.any() and not from_b.all():  # back into question order
        perm = pa.array(np.argsort(np.concatenate([np.flatnonzero(from_b), np.flatnonzero(~from_b)]), kind="stable"))
        columns = {name: a.take(perm) for name, a in columns.items()}
    return QuestionKeys(columns["suite"], columns["question_id"])


class QuestionKeys(Sequence):
    """The ``(suite, question_id)`` of each question of a pairing, as tuples when first asked
    for (a million questions' tuples cost a tenth of a second and a hundred MB)."""

    def __init__(self, suites, question_ids):
        self.suites, self.question_ids = suites, question_ids
        self._keys: tuple | None = None

    def _tuples(self) -> tuple:
        if self._keys is None:
            self._keys = tuple(zip(self.suites.to_pylist(), self.question_ids.to_pylist()))
        return self._keys

    def __len__(self) -> int:
        return len(self.question_ids)

    def __getitem__(self, i):
        return self._tuples()[i]

    def __iter__(self):
        return iter(self._tuples())

    def __eq__(self, other):
        return tuple(self) == tuple(other) if isinstance(other, Sequence) else NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return f"QuestionKeys({len(self)} questions)"

    def take(self, positions) -> QuestionKeys:
        positions = pa.array(np.asarray(positions, dtype=np.int64))
        return QuestionKeys(self.suites.take(positions), self.question_ids.take(positions))


#: outcome codes: judge_error is read as error (a failure to grade, like an engine failure)
_CORRECT, _INCORRECT, _NO_ANSWER, _ERROR, _MISSING = range(5)
_CODE = {"correct": _CORRECT, "incorrect": _INCORRECT, "no_answer": _NO_ANSWER, "error": _ERROR, "judge_error": _ERROR}


def _failure(table, i):
    """The outcome and error message of row ``i`` (for :func:`_failed_sides`)."""
    i = int(i)
    return types.SimpleNamespace(outcome=table["outcome"][i].as_py(), error=table["error"][i].as_py())


_DROPPED = 9


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
    """Incomplete pairs by side and by the baseline's outcome (JSON-ready); outcome codes."""
    c_missing, c_error = c_outcome == _MISSING, c_outcome == _ERROR
    b_error = b_outcome == _ERROR
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
        o: int(np.count_nonzero(incomplete & (b_outcome == _CODE[o])))
        for o in ("correct", "incorrect", "no_answer", "error")
    }
    by_outcome["missing"] = int(baseline_missing)
    imputed = int(np.count_nonzero((c_missing | c_error) & (b_outcome == _CORRECT)))
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
