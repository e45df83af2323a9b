"""lm-evaluation-harness ``--log_samples`` output -> records.

lm-eval (0.4.3 on) writes, under ``--output_path``, a folder per model holding
``results_<time>.json`` (the run: model arguments, task versions and configs) and one
``samples_<task>_<time>.jsonl`` per task with **one line per (document, filter)**, the lines
of each filter together in the ``filter_list`` order. Mapping:

=========================  ====================================================================
record field               from
=========================  ====================================================================
question_id                ``doc_id`` (or ``doc[<id_field>]`` with ``id_field``)
suite / suite_version      the task name in the file name / ``versions[task]`` of the results
config_id                  :func:`~qualgate.records.importers.foreign_config_id` of ``config.model``,
                           ``config.model_args`` and ``config.gen_kwargs`` of the results
seed                       ``config.random_seed`` of the results (default 0)
sample_index               0 (lm-eval scores repeats jointly: ``repeats`` > 1 is refused)
outcome                    the metric as 0/1 (``metric``; else the line's one metric that the
                           results' ``higher_is_better`` does not declare lower-is-better; lm-eval
                           names no primary metric, so a line with several, e.g. ``acc`` and
                           ``acc_norm``, is refused without ``metric``); a filtered answer
                           ``[invalid]`` (lm-eval's failed extraction) is ``no_answer``
prompt_hash                :func:`~qualgate.records.prompts.prompt_hash` of the rendered context
                           ``arguments.gen_args_0.arg_0``; a chat run (an API model with
                           ``--apply_chat_template``) records there a one-element list holding
                           the JSON of the chat messages (lm-eval's ``JsonChatStr``): its
                           messages' ``role`` and ``content`` are hashed, as qualgate hashes
                           its own chat prompts (0.4.9 adds ``"type": "text"`` to each message,
                           a marker of lm-eval's that is not hashed)
answer_strict / gold       ``filtered_resps[0]`` (none for loglikelihood lines, which hold a
                           log-probability per choice) / ``target``
decided_by                 ``lm-eval:<filter>:<metric>`` (unless ``no_answer``)
output                     ``resps[0][0]`` when it is text
=========================  ====================================================================

Only the lines of one filter are read (``filter``, default the task's first in the results'
``filter_list``, else the first in the file).

Older layouts are read too: lines without ``filter`` and ``metrics`` (lm-eval 0.4.3 to 0.4.6;
both appear in 0.4.7) take their filter from their position (the file is cut into equal blocks,
one per filter of ``filter_list``, each holding every document once) and their metrics from
their own keys (every key but the sample's fields ``doc_id``, ``doc``, ``target``,
``arguments``, ``resps``, ``filtered_resps`` and the hashes: lm-eval 0.4.3 to 0.4.6's
``evaluator.py`` adds the metrics to the sample dict, whatever the task's ``metric_list`` says); lm-eval 0.4.0 to 0.4.2 wrote ``results.json`` beside one
``<model_args>_<task>.jsonl`` per task (the model arguments with ``/`` and ``=`` replaced by
``__``) holding a JSON array of the samples; published samples named
``samples_<task>_<time>.json`` (JSON lines or one JSON array) are read as ``.jsonl`` files.

A run is one results file and its samples files: a path may be a samples file, a results file
(``results_<time>.json`` stands for every ``samples_<task>_<time>.jsonl`` beside it, e.g. the
subtasks of a group task) or a folder; a folder holding runs of different models is refused by
:func:`~qualgate.records.importers.import_records`, naming each run's results file.

A results file (given, or in a folder) stands for its run: the tasks its ``n-samples`` (else
``configs``) lists without a ``samples_<task>_<time>.jsonl`` beside it are named and the run is
refused as partial (``partial`` reads the tasks it holds). lmms-eval logs (lm-eval's results
layout with ``lmms_eval_version``; ``<date>_results.json`` and ``<date>_samples_<task>.jsonl``
from lmms-eval 0.3) are recognised and refused: their samples drop the document and the request
arguments, and keep only the text of multimodal prompts, so no prompt hash can be made.

Refused: a line that is not JSON, a missing field (a line without ``doc_id``: a file cut at the
front or not written by lm-eval), a non-0/1 metric, a (document, filter)
twice, an unknown filter, several responses per line (repeats), no results file beside a
samples file (unless ``config_id`` is given), a samples file holding fewer documents than the
results' ``n-samples.<task>.effective`` (a truncated or excerpted log; ``partial`` reads it),
older lines that cannot be assigned to filters, naming lm-eval's version.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from qualgate.errors import DataError
from qualgate.records.importers import (
    ImportOptions,
    Located,
    as_text,
    binary_outcome,
    files_in,
    foreign_config_id,
    json_file,
    json_lines,
    located,
    pick_metric,
    require,
)
from qualgate.records.prompts import prompt_hash

TOOL = "lm-eval"
INVALID = "[invalid]"  # lm-eval's regex filter fallback: nothing extracted
_TIME = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}\.\d+"
_SAMPLES = re.compile(rf"^samples_(?P<task>.+)_(?P<time>{_TIME})\.jsonl?$")
_RESULTS = re.compile(rf"^results_(?P<time>{_TIME})\.json$")
_LMMS = re.compile(r"^\d{8}_\d{6}_(results\.json|samples_.+\.jsonl)$")  # lmms-eval 0.3 on: <date>_results.json
#: the fields of a samples line that are not metrics (lm-eval 0.4.3 to 0.4.13 ``evaluator.py``)
_SAMPLE_FIELDS = frozenset(
    {"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics"}
    | {"doc_hash", "prompt_hash", "target_hash"}
)
LEGACY_RESULTS = "results.json"  # lm-eval 0.4.0 to 0.4.2
PICK_RUN = (
    "give one run per side: its results_<time>.json (which stands for all its samples files, "
    "e.g. a group task's subtasks) or its samples files"
)


def detect(path: Path) -> bool:
    if path.is_file():
        return (
            bool(_SAMPLES.match(path.name) or _LMMS.match(path.name))
            or bool(_run_samples(path))
            or _legacy_task(path) is not None
        )
    return (
        any(_SAMPLES.match(p.name) for p in path.rglob("samples_*.json*"))
        or any(_legacy_files(p) for p in path.rglob(LEGACY_RESULTS))
        or any(_LMMS.match(p.name) for p in path.rglob("*_results.json"))
    )


def _refuse_lmms(path: Path) -> None:
    """lmms-eval's logs: recognised by their names (0.3 on) or ``lmms_eval_version``, and refused."""
    results = [path] if path.is_file() else sorted(path.rglob("*results*.json"))
    if path.is_file() and _LMMS.match(path.name) and not path.name.endswith("_results.json"):
        results = [path.with_name(path.name.split("_samples_")[0] + "_results.json")]
    for r in results:
        try:
            version = json.loads(r.read_text(encoding="utf-8")).get("lmms_eval_version")
        except (OSError, ValueError, AttributeError):
            version = None
        if version is not None or _LMMS.match(r.name):
            raise DataError(
                f"an lmms-eval log (lmms_eval_version {version or 'unknown'}), not lm-eval's: lmms-eval writes "
                "lm-eval's layout but its samples drop the document and the request arguments and keep only "
                "the text of multimodal prompts (no images), so qualgate cannot hash the prompt or map it "
                "faithfully; lmms-eval logs are not read",
                file=str(r),
                field="lmms_eval_version",
                value=version,
            )


def run_file(file: str) -> str:
    """The results file that stands for the run a samples file belongs to."""
    f = Path(file)
    m = _SAMPLES.match(f.name)
    return str(f.with_name(f"results_{m['time']}.json") if m else f.with_name(LEGACY_RESULTS))


def read(path: Path, options: ImportOptions) -> list[Located]:
    _refuse_lmms(path)
    out = []
    units = _units(path)
    if not (path.is_file() and _SAMPLES.match(path.name)):  # a run (results file or folder): all its tasks
        _check_complete(units, options)
    for f, task, time, legacy in units:
        out += _read_file(f, task, time, legacy, options)
    return out


def _units(path: Path) -> list[tuple[Path, str, str | None, Path | None]]:
    """(samples file, task, time or None, legacy results.json or None) for each samples file."""
    if path.is_file():
        files = _run_samples(path) or [path]
    else:
        files = sorted(p for p in path.rglob("samples_*.json*") if p.is_file() and _SAMPLES.match(p.name))
        files += [f for r in sorted(path.rglob(LEGACY_RESULTS)) for f in _legacy_files(r)]
        if not files:
            files_in(path, "samples_*.jsonl", "lm-eval samples files")  # raises: none found
    units = []
    for f in files:
        m = _SAMPLES.match(f.name)
        if m:
            units.append((f, m["task"], m["time"], None))
            continue
        task = _legacy_task(f)
        if task is None:
            raise DataError(
                "not an lm-eval samples file name (samples_<task>_<time>.jsonl, or "
                "<model_args>_<task>.jsonl beside the results.json of lm-eval 0.4.0 to 0.4.2)",
                file=str(f),
            )
        units.append((f, task, None, f.with_name(LEGACY_RESULTS)))
    return units


def _check_complete(units, options: ImportOptions) -> None:
    """Refuse a run whose results file lists tasks with no samples file beside it (``partial`` reads the rest)."""
    runs: dict = {}
    for f, task, time, _ in units:
        if time is not None:
            runs.setdefault(f.with_name(f"results_{time}.json"), set()).add(task)
    for results, tasks in runs.items():
        data = json_file(results) if results.is_file() else {}
        listed = data.get("n-samples") or data.get("configs") or {}
        missing = sorted(t for t in listed if t not in tasks)
        if missing and not options.partial:
            raise DataError(
                f"a partial run: {results.name} lists {len(listed)} tasks with samples but {len(missing)} have no "
                f"samples_<task>_{results.stem[8:]}.jsonl beside it ({', '.join(missing)}); their questions would be "
                "missing from the gate without a word: keep the run's samples files together, or pass "
                "--allow-partial to read the tasks it holds",
                file=str(results),
                field="n-samples",
            )


def _run_samples(path: Path) -> list[Path]:
    """A run's samples files, for the path of its results file (none for any other path)."""
    if path.name == LEGACY_RESULTS:
        return _legacy_files(path)
    m = _RESULTS.match(path.name)
    if not m:
        return []
    return sorted(p for p in path.parent.glob(f"samples_*_{m['time']}.json*") if _SAMPLES.match(p.name))


def _legacy_results(results: Path) -> dict | None:
    try:
        data = json.loads(results.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(data, dict) and isinstance(data.get("configs"), dict) and isinstance(data.get("config"), dict)
    return data if ok else None


def _legacy_name(model_args, task: str) -> str:
    """lm-eval 0.4.0 to 0.4.2's samples file name: ``<model_args>_<task>.jsonl``, ``/`` and ``=`` as ``__``."""
    return "{}_{}.jsonl".format(re.sub("/|=", "__", str(model_args)), task)


def _legacy_files(results: Path) -> list[Path]:
    data = _legacy_results(results) if results.is_file() else None
    if data is None:
        return []
    names = [_legacy_name(data["config"].get("model_args"), task) for task in data["configs"]]
    return [results.with_name(n) for n in names if results.with_name(n).is_file()]


def _legacy_task(f: Path) -> str | None:
    """The task of a 0.4.0 to 0.4.2 samples file, from the results.json beside it."""
    data = _legacy_results(f.with_name(LEGACY_RESULTS)) if f.suffix == ".jsonl" else None
    if data is None:
        return None
    tasks = [t for t in data["configs"] if _legacy_name(data["config"].get("model_args"), t) == f.name]
    return tasks[0] if tasks else None


def _results(f: Path, time: str | None, legacy: Path | None, options: ImportOptions) -> dict:
    results = legacy or f.with_name(f"results_{time}.json")
    if not results.exists():
        if options.config_id is None:
            raise DataError(
                f"no {results.name} beside this samples file: the model arguments (config id) are "
                "unknown; keep lm-eval's output folder together or pass a config id",
                file=str(f),
            )
        return {}
    return json_file(results)


def _rows(f: Path):
    """``(line or position, object)``: JSON lines, or one JSON array (0.4.0 to 0.4.2, some ``.json``)."""
    with open(f, encoding="utf-8") as fh:
        start = fh.read(256).lstrip()[:1]
    if start != "[":
        yield from json_lines(f)
        return
    try:
        rows = json.loads(f.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise DataError(f"not a JSON array of samples ({exc})", file=str(f)) from None
    for i, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise DataError("not a JSON object", file=str(f), line=i, value=str(row)[:60])
        yield i, row


def _version(results: dict, legacy: Path | None) -> str:
    if results.get("lm_eval_version"):
        return f"lm-eval {results['lm_eval_version']}"
    return "lm-eval 0.4.0 to 0.4.2" if legacy else "lm-eval before 0.4.7"


def _assign_filters(rows: list, declared: list, f: Path, version: str) -> list:
    """Lines without ``filter`` (before 0.4.7): written filter by filter in ``filter_list`` order,
    each filter's block holding every document once."""
    names = declared or ["none"]
    size, extra = divmod(len(rows), len(names))
    blocks = [rows[k * size : (k + 1) * size] for k in range(len(names))]
    docs = [[r.get("doc_id") for _, r in b] for b in blocks]
    if extra or any(len(set(d)) != len(d) or set(d) != set(docs[0]) for d in docs):
        raise DataError(
            f"{len(rows)} lines without 'filter' ({version}: lm-eval writes 'filter' from 0.4.7) cannot be "
            f"assigned to the task's {len(names)} filters ({', '.join(names)}) as blocks of every document once; "
            "re-run with lm-eval 0.4.7 or later",
            file=str(f),
            field="filter",
        )
    return [(line, dict(row, filter=name)) for name, b in zip(names, blocks) for line, row in b]


def _read_file(f: Path, task: str, time: str | None, legacy: Path | None, options: ImportOptions) -> list[Located]:
    results = _results(f, time, legacy, options)
    config = results.get("config") or {}
    config_id = options.config_id or foreign_config_id(
        TOOL,
        {
            "model": config.get("model"),
            "model_args": config.get("model_args"),
            "gen_kwargs": config.get("gen_kwargs"),
        },
    )
    version = options.suite_version or str((results.get("versions") or {}).get(task, "unversioned"))
    task_config = (results.get("configs") or {}).get(task) or {}
    declared = [x.get("name") for x in task_config.get("filter_list") or [] if isinstance(x, dict)]
    if (task_config.get("repeats") or 1) > 1:
        raise DataError(
            "repeats > 1: lm-eval scores repeats jointly, with no outcome per repeat",
            file=str(f),
            field="repeats",
            value=task_config["repeats"],
        )
    seed = options.seed if options.seed is not None else config.get("random_seed", 0)
    if not isinstance(seed, int):
        seed = 0
    chosen = options.filter or (declared[0] if declared else None)
    if options.filter and declared and options.filter not in declared:
        raise DataError(
            f"no filter {options.filter!r} in this task (filters: {', '.join(declared)})",
            file=str(f),
            field="filter",
            value=options.filter,
        )
    rows = list(_rows(f))
    tool_version = _version(results, legacy)
    lacking = [line for line, row in rows if "doc_id" not in row]
    if lacking:
        raise DataError(
            f"{len(lacking)} of {len(rows)} lines have no 'doc_id' (first: line {lacking[0]}): every line lm-eval "
            "writes starts with its document's doc_id, so the file was cut at the front or not written by lm-eval",
            file=str(f),
            line=lacking[0],
            field="doc_id",
        )
    if rows and not any("filter" in row for _, row in rows):
        rows = _assign_filters(rows, declared, f, tool_version)
    lower = [m for m, up in ((results.get("higher_is_better") or {}).get(task) or {}).items() if up is False]
    lower += [
        m.get("metric")
        for m in task_config.get("metric_list") or []
        if isinstance(m, dict) and m.get("higher_is_better") is False
    ]
    metric = None
    run_id = f"{TOOL}-{time}" if time else f"{TOOL}-{f.parent.name}"
    out, seen, filters = [], {}, []
    for line_no, row in rows:
        name = require(row, "filter", f, line_no, kind=str)
        if name not in filters:
            filters.append(name)
        chosen = chosen or name
        if name != chosen:
            continue
        doc_id = require(row, "doc_id", f, line_no, kind=int)
        if doc_id in seen:
            raise DataError(
                f"document {doc_id} with filter {name!r} twice (first at line {seen[doc_id]})",
                file=str(f),
                line=line_no,
                field="doc_id",
                value=doc_id,
            )
        seen[doc_id] = line_no
        if "metrics" not in row:  # before 0.4.7: the metrics are the line's other keys
            row = dict(row, metrics=[k for k in row if k not in _SAMPLE_FIELDS])
        present = [m for m in require(row, "metrics", f, line_no, kind=list) if m in row]
        metric = pick_metric(
            present, options.metric or metric, lower_is_better=lower, tool=tool_version, file=f, line=line_no
        )
        out.append(_record(row, metric, f, line_no, task, version, config_id, seed, run_id, options))
    if not out:
        raise DataError(
            f"no lines with filter {chosen!r} (filters in the file: {', '.join(filters) or 'none'})",
            file=str(f),
            field="filter",
            value=chosen,
        )
    effective = ((results.get("n-samples") or {}).get(task) or {}).get("effective")
    if isinstance(effective, int) and len(out) < effective and not options.partial:
        raise DataError(
            f"{len(out)} documents of the {effective} the run evaluated (n-samples.{task}.effective of "
            f"{(legacy or f.with_name(f'results_{time}.json')).name}): a truncated or excerpted log, whose "
            "missing questions would be missing from the gate without a word; use the complete samples file, "
            "or pass --allow-partial to read the documents it holds",
            file=str(f),
            field="doc_id",
        )
    return out


def _prompt(context, f, line):
    """The prompt to hash: the rendered text, or the chat messages of a ``JsonChatStr``."""
    if isinstance(context, str):
        return context
    if isinstance(context, list) and len(context) == 1 and isinstance(context[0], str):
        try:
            messages = json.loads(context[0])
        except ValueError:
            messages = None
        if (
            isinstance(messages, list)
            and messages
            and all(isinstance(m, dict) and isinstance(m.get("role"), str) and "content" in m for m in messages)
        ):
            return [{"role": m["role"], "content": m["content"]} for m in messages]
        raise DataError(
            "a one-element list that is not the JSON of chat messages (lm-eval's JsonChatStr)",
            file=str(f),
            line=line,
            field="arguments.gen_args_0.arg_0",
            value=context[0][:60],
        )
    raise DataError("no rendered prompt (arguments.gen_args_0.arg_0)", file=str(f), line=line, field="arguments")


def _record(row, metric, f, line, task, version, config_id, seed, run_id, options) -> Located:
    if options.id_field:
        doc = require(row, "doc", f, line, kind=dict)
        qid = require(doc, options.id_field, f, line, where="doc.", kind=(str, int))
    else:
        qid = row["doc_id"]
    args = require(row, "arguments", f, line, kind=(dict, list))
    first = next(iter(args.values()), None) if isinstance(args, dict) else (args[0] if args else None)
    context = (
        first.get("arg_0") if isinstance(first, dict) else (first[0] if isinstance(first, list) and first else None)
    )
    prompt = _prompt(context, f, line)
    filtered = row.get("filtered_resps")
    # loglikelihood (multiple choice) lines hold [logprob, is_greedy] per choice: no answer text
    answer = as_text(filtered) if not isinstance(filtered, list) or all(isinstance(x, str) for x in filtered) else None
    resps = row.get("resps") or []
    if len(args) == 1 and resps and isinstance(resps[0], list) and len(resps[0]) > 1:
        raise DataError(
            "several responses for one request (repeats): no outcome per repeat", file=str(f), line=line, field="resps"
        )
    output = resps[0][0] if resps and isinstance(resps[0], list) and resps[0] and isinstance(resps[0][0], str) else None
    if answer == INVALID:
        outcome, answer = "no_answer", None
    else:
        outcome = binary_outcome(row[metric], f, line, metric)
    data = {
        "schema_version": 1,
        "run_id": run_id,
        "config_id": config_id,
        "suite": options.suite or task,
        "suite_version": version,
        "question_id": str(qid),
        "seed": seed,
        "sample_index": 0,
        "outcome": outcome,
        "prompt_hash": prompt_hash(prompt),
        "mode": None,
        "answer_strict": answer,
        "gold": as_text(row.get("target")),
        "output": output,
        "decided_by": f"lm-eval:{row['filter']}:{metric}" if outcome != "no_answer" else None,
    }
    return located(data, f, line)
