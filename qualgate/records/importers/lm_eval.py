"""lm-evaluation-harness ``--log_samples`` output -> records.

lm-eval (0.4.x) writes, under ``--output_path``, a folder per model holding
``results_<time>.json`` (the run: model arguments, task versions and configs) and one
``samples_<task>_<time>.jsonl`` per task with **one line per (document, filter)**. Mapping:

=========================  ====================================================================
record field               from
=========================  ====================================================================
question_id                ``doc_id`` (or ``doc[<id_field>]`` with ``id_field``)
suite / suite_version      the task name in the file name / ``versions[task]`` of the results
config_id                  :func:`~qualgate.records.importers.foreign_config_id` of ``config.model``,
                           ``config.model_args`` and ``config.gen_kwargs`` of the results
seed                       ``config.random_seed`` of the results (default 0)
sample_index               0 (lm-eval scores repeats jointly: ``repeats`` > 1 is refused)
outcome                    the metric (``metric``, default the line's first) as 0/1; a filtered
                           answer ``[invalid]`` (lm-eval's failed extraction) is ``no_answer``
prompt_hash                :func:`~qualgate.records.prompts.prompt_hash` of the rendered context
                           ``arguments.gen_args_0.arg_0``
answer_strict / gold       ``filtered_resps[0]`` / ``target``
decided_by                 ``lm-eval:<filter>`` (unless ``no_answer``)
output                     ``resps[0][0]`` when it is text
=========================  ====================================================================

Only the lines of one filter are read (``filter``, default the task's first in the results'
``filter_list``, else the first in the file). Refused: a line that is not JSON, a missing
field, a non-0/1 metric, a (document, filter) twice, an unknown filter, several responses per
line (repeats), no ``results_<time>.json`` beside a samples file (unless ``config_id`` is given).
"""

from __future__ import annotations

import re
from pathlib import Path

from qualgate.errors import DataError
from qualgate.records.prompts import prompt_hash
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
    require,
)

TOOL = "lm-eval"
INVALID = "[invalid]"  # lm-eval's regex filter fallback: nothing extracted
_SAMPLES = re.compile(r"^samples_(?P<task>.+)_(?P<time>\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}\.\d+)\.jsonl$")


def detect(path: Path) -> bool:
    if path.is_file():
        return bool(_SAMPLES.match(path.name))
    return any(_SAMPLES.match(p.name) for p in path.rglob("samples_*.jsonl"))


def read(path: Path, options: ImportOptions) -> list[Located]:
    out = []
    for f in files_in(path, "samples_*.jsonl", "lm-eval samples files"):
        out += _read_file(f, options)
    return out


def _results(f: Path, time: str, options: ImportOptions) -> dict:
    results = f.with_name(f"results_{time}.json")
    if not results.exists():
        if options.config_id is None:
            raise DataError(
                f"no {results.name} beside this samples file: the model arguments (config id) are "
                "unknown; keep lm-eval's output folder together or pass a config id",
                file=str(f),
            )
        return {}
    return json_file(results)


def _read_file(f: Path, options: ImportOptions) -> list[Located]:
    m = _SAMPLES.match(f.name)
    if not m:
        raise DataError("not an lm-eval samples file name (samples_<task>_<time>.jsonl)", file=str(f))
    task, time = m["task"], m["time"]
    results = _results(f, time, options)
    config = results.get("config") or {}
    config_id = options.config_id or foreign_config_id(TOOL, {
        "model": config.get("model"), "model_args": config.get("model_args"), "gen_kwargs": config.get("gen_kwargs"),
    })  # fmt: skip
    version = options.suite_version or str((results.get("versions") or {}).get(task, "unversioned"))
    task_config = (results.get("configs") or {}).get(task) or {}
    declared = [x.get("name") for x in task_config.get("filter_list") or [] if isinstance(x, dict)]
    if (task_config.get("repeats") or 1) > 1:
        raise DataError("repeats > 1: lm-eval scores repeats jointly, with no outcome per repeat",
                        file=str(f), field="repeats", value=task_config["repeats"])  # fmt: skip
    seed = options.seed if options.seed is not None else config.get("random_seed", 0)
    if not isinstance(seed, int):
        seed = 0
    chosen = options.filter or (declared[0] if declared else None)
    if options.filter and declared and options.filter not in declared:
        raise DataError(f"no filter {options.filter!r} in this task (filters: {', '.join(declared)})",
                        file=str(f), field="filter", value=options.filter)  # fmt: skip
    out, seen, filters = [], {}, []
    for line_no, row in json_lines(f):
        name = require(row, "filter", f, line_no, kind=str)
        if name not in filters:
            filters.append(name)
        chosen = chosen or name
        if name != chosen:
            continue
        doc_id = require(row, "doc_id", f, line_no, kind=int)
        if doc_id in seen:
            raise DataError(f"document {doc_id} with filter {name!r} twice (first at line {seen[doc_id]})",
                            file=str(f), line=line_no, field="doc_id", value=doc_id)  # fmt: skip
        seen[doc_id] = line_no
        out.append(_record(row, f, line_no, task, version, config_id, seed, time, options))
    if not out:
        raise DataError(f"no lines with filter {chosen!r} (filters in the file: {', '.join(filters) or 'none'})",
                        file=str(f), field="filter", value=chosen)  # fmt: skip
    return out


def _record(row, f, line, task, version, config_id, seed, time, options) -> Located:
    if options.id_field:
        doc = require(row, "doc", f, line, kind=dict)
        qid = require(doc, options.id_field, f, line, where="doc.", kind=(str, int))
    else:
        qid = row["doc_id"]
    args = require(row, "arguments", f, line, kind=(dict, list))
    first = next(iter(args.values()), None) if isinstance(args, dict) else (args[0] if args else None)
    context = first.get("arg_0") if isinstance(first, dict) else (first[0] if isinstance(first, list) and first else None)
    if not isinstance(context, str):
        raise DataError("no rendered prompt (arguments.gen_args_0.arg_0)", file=str(f), line=line, field="arguments")
    metrics = require(row, "metrics", f, line, kind=list)
    metric = options.metric or (metrics[0] if metrics else None)
    if metric is None or metric not in row:
        raise DataError(f"no metric value (metrics listed: {', '.join(map(str, metrics)) or 'none'})",
                        file=str(f), line=line, field=str(metric or "metrics"))  # fmt: skip
    filtered = row.get("filtered_resps")
    answer = as_text(filtered)
    resps = row.get("resps") or []
    if len(args) == 1 and resps and isinstance(resps[0], list) and len(resps[0]) > 1:
        raise DataError("several responses for one request (repeats): no outcome per repeat",
                        file=str(f), line=line, field="resps")  # fmt: skip
    output = resps[0][0] if resps and isinstance(resps[0], list) and resps[0] and isinstance(resps[0][0], str) else None
    if answer == INVALID:
        outcome, answer = "no_answer", None
    else:
        outcome = binary_outcome(row[metric], f, line, metric)
    data = {
        "schema_version": 1, "run_id": f"{TOOL}-{time}", "config_id": config_id,
        "suite": options.suite or task, "suite_version": version, "question_id": str(qid), "seed": seed,
        "sample_index": 0, "outcome": outcome, "prompt_hash": prompt_hash(context), "mode": None,
        "answer_strict": answer, "gold": as_text(row.get("target")), "output": output,
        "decided_by": f"lm-eval:{row['filter']}" if outcome != "no_answer" else None,
    }  # fmt: skip
    return located(data, f, line)
