"""Loading a suite: rows from the Hub, local files or a generator -> questions and a grader."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from qualgate.records.prompts import prompt_hash

from .. import graders
from ..errors import DataError
from ._spec import GENERATORS, LETTERS, SuiteSpec, read_spec, render
from ._traffic import traffic_questions

_FILE_BUILDERS = {
    ".jsonl": "json",
    ".json": "json",
    ".parquet": "parquet",
    ".csv": "csv",
    ".jsonl.gz": "json",
    ".json.gz": "json",
}  # datasets reads gzip by the suffix


@dataclass(frozen=True)
class Question:
    """One question of a suite: its id, rendered chat prompt, gold answer and metadata.

    ``gold`` is None only in a traffic suite without a gold column. ``sampling`` holds the
    request's own sampling fields, which override the decoding config's (a traffic suite
    with ``sampling: request``); it is empty for every other suite.
    """

    id: str
    prompt: tuple[dict, ...]
    gold: str
    prompt_hash: str
    meta: dict = field(default_factory=dict, compare=False)
    #: multiple choice: the option texts in the order shown (A, B, ...), for the extractors
    options: tuple[str, ...] = field(default=(), compare=False)
    sampling: dict = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict:
        out = {
            "id": self.id,
            "prompt": [dict(m) for m in self.prompt],
            "gold": self.gold,
            "prompt_hash": self.prompt_hash,
            "meta": dict(self.meta),
        }
        if self.sampling:
            out["sampling"] = dict(self.sampling)
        return out


@dataclass(frozen=True, eq=False)
class Suite:
    """A loaded suite. ``grade(question, text)`` grades one model output.

    ``source`` says where the rows came from (the Hub id and revision used, or the local
    files, or the generator and its params); ``path`` is the suite file.
    """

    name: str
    version: int
    questions: tuple[Question, ...]
    generation: dict
    decides: str
    description: str = ""
    source: dict = field(default_factory=dict)
    path: str = ""
    _spec: SuiteSpec | None = field(default=None, repr=False)

    def grade(self, question: Question, text: str) -> graders.Grade:
        """Grade ``text`` (a model's output) against ``question.gold``.

        The suite's ``think`` setting removes reasoning blocks first; a grader that takes a
        ``problem`` (``math_verify`` with ``canonical``) gets the question's last user message.
        """
        spec = self._spec
        if hasattr(spec.grader, "grade_many"):  # a judge model (qualgate.judge)
            return self.grade_many([(question, text)])[0]
        users = [m["content"] for m in question.prompt if m.get("role") == "user"]
        return graders.grade(
            text,
            question.gold,
            strict=spec.strict,
            lenient=spec.lenient,
            grader=spec.grader,
            decides=self.decides,
            think=spec.think,
            problem=users[-1] if users else None,
            options=question.options,
        )

    def grade_many(self, items) -> list[graders.Grade]:
        """Grade ``(question, text)`` pairs; a judge grader sends them as one batch of judge requests."""
        spec = self._spec
        if hasattr(spec.grader, "grade_many"):
            return spec.grader.grade_many([(q.prompt, q.gold, t) for q, t in items], think=spec.think)
        return [self.grade(q, t) for q, t in items]

    def close(self) -> None:
        """Release what the grader holds (a judge's backend); grading after it reopens nothing."""
        close = getattr(self._spec.grader, "close", None)
        if close is not None:
            close()

    def to_dict(self, *, questions: bool = True) -> dict:
        out = {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "decides": self.decides,
            "generation": dict(self.generation),
            "source": dict(self.source),
            "path": self.path,
            "n_questions": len(self.questions),
        }
        if questions:
            out["questions"] = [q.to_dict() for q in self.questions]
        return out


# --- finding suite files ----------------------------------------------------------------------


def _builtin_dirs() -> list[Path]:
    dirs = []
    try:
        spec = importlib.util.find_spec("qualgate._suites")
    except ImportError:
        spec = None
    if spec is not None:
        dirs += [Path(p) for p in (spec.submodule_search_locations or [])]
    import qualgate

    checkout = Path(qualgate.__file__).resolve().parents[1] / "suites"
    if checkout.is_dir() and (checkout.parent / "pyproject.toml").is_file():
        dirs.append(checkout)
    return [d for d in dirs if d.is_dir()]


def _builtin_files() -> dict[str, Path]:
    files: dict[str, Path] = {}
    for d in _builtin_dirs():
        for p in sorted(d.glob("*.yaml")):
            files.setdefault(p.stem, p)
    return files


def list_suites() -> list[str]:
    """Names of the built-in suites, sorted."""
    return sorted(_builtin_files())


def suite_path(name_or_path: str | os.PathLike) -> Path:
    """The YAML file of a built-in suite name, or the given path to a suite file."""
    text = os.fspath(name_or_path)
    files = _builtin_files()
    if text in files:
        return files[text]
    p = Path(text)
    if p.suffix in (".yaml", ".yml") or os.sep in text or "/" in text or p.is_file():
        if not p.is_file():
            raise DataError("suite file not found", file=text)
        return p
    raise ValueError(
        f"name_or_path: no built-in suite {text!r}; valid names: {sorted(files)} "
        "(or give the path of a suite YAML file)"
    )


# --- rows -----------------------------------------------------------------------------------


def _suffix(path: str) -> str:
    """A data file's type: its suffix, with the one before for gzip (``.jsonl.gz``)."""
    p = Path(path)
    return "".join(p.suffixes[-2:] if p.suffix.lower() == ".gz" else [p.suffix]).lower()


def _load_rows(spec: SuiteSpec, data_files, revision, cache_dir) -> tuple[list[dict], dict, str]:
    """Rows, the resolved source (for provenance) and a label for error messages."""
    src = spec.source
    if data_files is not None:
        files = [data_files] if isinstance(data_files, (str, os.PathLike)) else list(data_files)
        if not files:
            raise ValueError("data_files: give at least one file")
        files = [os.fspath(f) for f in files]
        suffixes = {_suffix(f) for f in files}
        if len(suffixes) != 1 or next(iter(suffixes)) not in _FILE_BUILDERS:
            raise ValueError(
                f"data_files: all files must share one of the suffixes {sorted(_FILE_BUILDERS)}, got {files}"
            )
        for f in files:
            if not os.path.isfile(f):
                raise DataError("data file not found", file=f)
            if os.path.getsize(f) == 0:
                raise DataError("no rows: the data file is empty", file=f)
        builder = _FILE_BUILDERS[suffixes.pop()]
        label = files[0] if len(files) == 1 else f"{files[0]} (+{len(files) - 1} files)"
        import datasets

        try:
            ds = datasets.load_dataset(builder, data_files={"data": files}, split="data", cache_dir=cache_dir)
        except Exception as exc:  # datasets' many parser errors: report them as data errors
            raise DataError(f"cannot read with datasets ({type(exc).__name__}: {exc})", file=label) from exc
        return ds.to_list(), {"data_files": files, "builder": builder}, label
    if "generator" in src:
        module, _, attr = GENERATORS[src["generator"]].partition(":")
        fn = getattr(importlib.import_module(module), attr)
        params = dict(src.get("params") or {})
        rows = fn(**params)
        if not isinstance(rows, list) or not all(isinstance(r, Mapping) for r in rows):
            raise DataError(
                "generator must return a list of row dicts",
                file=spec.path,
                field="source.generator",
                value=src["generator"],
            )
        resolved = {"generator": src["generator"], "params": params}
        return [dict(r) for r in rows], resolved, f"{spec.path} (generator {src['generator']})"
    rev = revision or src["revision"]
    resolved = {k: src.get(k) for k in ("dataset", "config", "split")} | {"revision": rev}
    label = f"{src['dataset']}@{rev[:12]}"
    unreachable = None if _offline() else _hub_unreachable()
    if unreachable:  # (datasets would retry for ~25 s before saying so)
        raise DataError(
            f"cannot reach the Hugging Face Hub ({unreachable}); with the dataset in the local cache, "
            "set HF_HUB_OFFLINE=1 to load it from there; else pass data_files (CLI: --data-file) with a local copy",
            file=label,
        )
    import datasets

    try:
        ds = datasets.load_dataset(
            src["dataset"], src.get("config"), split=src["split"], revision=rev, cache_dir=cache_dir
        )
    except Exception as exc:  # network, gating, missing revision: all end the load here
        raise DataError(
            f"cannot load from the Hugging Face Hub ({type(exc).__name__}: {exc}); "
            "on an offline machine pass data_files (CLI: --data-file) with a local copy",
            file=label,
        ) from exc
    return ds.to_list(), resolved, label


def _offline() -> bool:
    """Offline mode asked for (``HF_HUB_OFFLINE`` or ``HF_DATASETS_OFFLINE``): datasets then reads
    its local cache only, and fails at once when the dataset is not there."""
    return any(os.environ.get(k, "").strip().lower() in ("1", "true", "yes", "on") for k in HUB_OFFLINE_VARS)


#: environment variables that put the Hub libraries in offline mode
HUB_OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
#: seconds to wait for a TCP connection to the Hub before calling it unreachable
HUB_CONNECT_S = 3.0


def _hub_unreachable() -> str | None:
    """Why the Hub (``HF_ENDPOINT``, default https://huggingface.co) cannot be reached, from one
    TCP connection; None when it connects (or a proxy is configured: the proxy decides)."""
    import socket
    from urllib.parse import urlsplit

    if any(os.environ.get(k) for k in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY")):
        return None
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    url = urlsplit(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=HUB_CONNECT_S).close()
    except OSError as exc:
        return f"{endpoint}: {type(exc).__name__}: {exc}"
    return None


# --- questions --------------------------------------------------------------------------------


def _value(row: dict, column: str, i: int, label: str, key: str):
    if column not in row:
        raise DataError(
            f"row {i}: missing column {column!r} (used by {key}); columns: {sorted(row)}",
            file=label,
            field=key,
            value=column,
        )
    value = row[column]
    if value is None:
        raise DataError(f"row {i}: column {column!r} is null", file=label, field=key, value=column)
    return value


def _question(spec: SuiteSpec, row: dict, i: int, label: str) -> Question:
    idspec = spec.id
    if "field" in idspec:
        qid = str(_value(row, idspec["field"], i, label, "id.field"))
    elif idspec["rule"] == "row_index":
        qid = f"{idspec.get('prefix', '')}{i}"
    else:
        values = [_value(row, c, i, label, "id.fields") for c in idspec["fields"]]
        canonical = json.dumps(values, ensure_ascii=False, separators=(",", ":"))
        digest = hashlib.sha256(canonical.encode("utf-8"))
        qid = f"{idspec.get('prefix', '')}{digest.hexdigest()[:16]}"
    if not qid.strip():
        raise DataError(f"row {i}: empty id", file=label, field="id")

    variables = {var: str(_value(row, col, i, label, f"fields.{var}")).strip() for var, col in spec.fields.items()}
    if spec.choices is not None:
        c = spec.choices
        options = [c["correct"], *c["incorrect"]]
        texts = [str(_value(row, col, i, label, "choices")).strip() for col in options]
        for col, text in zip(options, texts):
            if not text:
                raise DataError(f"row {i}: empty option", file=label, field="choices", value=col)
        order = graders.choice_permutation(qid, len(texts), salt=c.get("salt", spec.name))
        letters = LETTERS[: len(texts)]
        shown = [texts[j] for j in order]
        variables.update(zip(letters, shown))
        variables["choices"] = "\n".join(f"{ltr}) {t}" for ltr, t in zip(letters, shown))
        gold = letters[order.index(0)]
    else:
        if "fields" in spec.gold:  # several columns: the parser gets {part: value}
            raw = {part: _value(row, col, i, label, f"gold.fields.{part}") for part, col in spec.gold["fields"].items()}
        else:
            raw = _value(row, spec.gold["field"], i, label, "gold.field")
        try:
            gold = spec.gold_parse(raw)
        except ValueError as exc:
            key = "gold.fields" if "fields" in spec.gold else "gold.field"
            raise DataError(
                f"row {i}: {exc}", file=label, field=key, value=spec.gold.get("field", spec.gold.get("fields"))
            ) from None

    messages = []
    if spec.system is not None:
        messages.append({"role": "system", "content": render(spec.system, variables)})
    messages.append({"role": "user", "content": render(spec.user, variables)})
    meta = {c: _value(row, c, i, label, "meta") for c in spec.meta}
    return Question(
        id=qid,
        prompt=tuple(messages),
        gold=gold,
        prompt_hash=prompt_hash(messages),
        meta=meta,
        options=tuple(shown) if spec.choices is not None else (),
    )


def load_suite(
    name_or_path: str | os.PathLike,
    *,
    data_files: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
    revision: str | None = None,
    limit: int | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> Suite:
    """Load a suite by built-in name or YAML path.

    Parameters
    ----------
    name_or_path : str or path
        A name from :func:`list_suites` or the path of a suite YAML file.
    data_files : path or list of paths, optional
        Local JSONL/JSON/Parquet/CSV copies of the data, read with ``datasets`` instead of
        the Hub (or instead of the generator); for a traffic suite, the JSON Lines files of
        requests to read instead of its ``source.traffic``.
    revision : str, optional
        Hub revision to load instead of the pinned one (only for Hub loading).
    limit : int, optional
        Keep the first ``limit`` questions (after every row was checked).
    cache_dir : path, optional
        The ``datasets`` cache folder (default: ``datasets``' own).

    Raises
    ------
    DataError
        Invalid suite file; missing columns, null values, malformed gold answers; no rows;
        duplicate ids; a Hub or file read that failed.
    ValueError
        Unknown suite name, invalid ``limit``/``data_files``/``revision``.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")
    path = suite_path(name_or_path)
    spec = read_spec(path)
    if revision is not None and (data_files is not None or "dataset" not in spec.source):
        raise ValueError(
            f"revision={revision!r} applies only to loading a Hub dataset, not to "
            f"{'data_files' if data_files is not None else 'a generator suite'}"
        )
    if "traffic" in spec.source:  # ids are unique and duplicates removed (qualgate.suites._traffic)
        questions, source = traffic_questions(spec, data_files, Question)
        label = source["traffic"][0]
    else:
        rows, source, label = _load_rows(spec, data_files, revision, cache_dir)
        if not rows:
            raise DataError("no rows: the data is empty", file=label)
        questions = [_question(spec, row, i, label) for i, row in enumerate(rows)]
    first: dict[str, int] = {}
    dups = []
    for i, q in enumerate(questions):
        if q.id in first:
            dups.append(f"{q.id!r} (rows {first[q.id]} and {i})")
        first.setdefault(q.id, i)
    if dups:
        shown = ", ".join(dups[:5]) + (f" and {len(dups) - 5} more" if len(dups) > 5 else "")
        raise DataError(f"duplicate question ids: {shown}", file=label, field="id")
    if limit is not None:
        questions = questions[:limit]
    return Suite(
        name=spec.name,
        version=spec.version,
        questions=tuple(questions),
        generation=dict(spec.generation),
        decides=spec.decides,
        description=spec.description,
        source=source,
        path=str(path),
        _spec=spec,
    )
