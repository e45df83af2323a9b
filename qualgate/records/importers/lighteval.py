"""lighteval details Parquet -> records.

lighteval (0.13) writes ``details/<model>/<time>/details_<task>_<time>.parquet`` (one row per
document, with nested ``doc``, ``model_response`` and ``metric`` columns) and
``results/<model>/results_<time>.json`` (``config_general.model_config`` and ``versions``).
Mapping (``line`` in messages is the 1-based row):

==================  ===========================================================================
record field        from
==================  ===========================================================================
question_id         ``doc.id`` (or ``doc.specific[<id_field>]`` with ``id_field``)
suite               ``doc.task_name`` (else the task in the file name)
suite_version       ``versions[<task>]`` of the results (default ``unversioned``)
config_id           :func:`~qualgate.records.importers.foreign_config_id` of
                    ``config_general.model_config`` (its set fields)
seed                ``model_config.generation_parameters.seed`` (default 0)
sample_index        0 (several generations per document are scored jointly: refused)
outcome             the metric as 0/1: ``metric``, else the row's one metric that the results'
                    ``config_tasks[<task>].metrics`` do not declare lower-is-better
                    (``higher_is_better: false``, e.g. ``extract_fail``, ``idk_freq``).
                    lighteval (0.11 to 0.13) names no primary metric, and its details store a
                    row's metrics in alphabetical order, not the task's: a row with several
                    that could be the outcome (``trad_score`` and ``idk_score``) is refused
                    without ``metric``. An empty generated response is ``no_answer``. Loglikelihood rows (multiple choice:
                    ``doc.sampling_methods`` ``LOGPROBS``; lighteval stores no text for them,
                    ``model_response.text == []``) take the metric as it is
prompt_hash         :func:`~qualgate.records.prompts.prompt_hash` of ``model_response.input`` (the text or
                    the messages sent); the transformers (``lighteval accelerate``), dummy,
                    nanotron, sglang and endpoint backends of 0.13 record no input (``None``):
                    then ``doc.query``, the document's query before lighteval adds few-shot
                    examples, instruction and chat template (so two runs that differ only in
                    those have the same hash)
gold / output       ``doc.choices[doc.gold_index]`` / ``model_response.text[0]``
decided_by          ``lighteval:<metric>`` (unless ``no_answer``)
==================  ===========================================================================

Refused: an unreadable Parquet file, missing ``doc`` / ``model_response`` / ``metric``, a
non-0/1 metric, a document twice, several generations per document, a row with neither
``model_response.input`` nor ``doc.query``, no results file (unless a config id is given).
"""

from __future__ import annotations

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
    located,
    pick_metric,
    require,
)
from qualgate.records.prompts import prompt_hash

TOOL = "lighteval"
_DETAILS = re.compile(r"^details_(?P<task>.+)_(?P<time>\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}\.\d+)\.parquet$")


def detect(path: Path) -> bool:
    if path.is_file():
        return bool(_DETAILS.match(path.name))
    return any(_DETAILS.match(p.name) for p in path.rglob("details_*.parquet"))


def read(path: Path, options: ImportOptions) -> list[Located]:
    out = []
    for f in files_in(path, "details_*.parquet", "lighteval details files"):
        out += _read_file(f, options)
    return out


PICK_RUN = "give one run per side: its details folder details/<model>/<time>/ or its details files"


def run_file(file: str) -> str:
    """The results file that stands for a details file's run (the details folder without one)."""
    m = _DETAILS.match(Path(file).name)
    return str(_results_path(Path(file), m["time"]) or Path(file).parent) if m else file


def _results_path(f: Path, time: str) -> Path | None:
    """``results/<model>/results_<time>.json`` for ``details/<model>/<time>/details_...``."""
    parts = f.parts
    if "details" not in parts[:-2]:
        return None
    i = len(parts) - 1 - parts[::-1].index("details")
    model = parts[i + 1 : -2]
    return Path(*parts[:i], "results", *model, f"results_{time}.json")


def _results(f: Path, time: str) -> dict | None:
    candidate = _results_path(f, time)
    if candidate is None or not candidate.exists():
        return None
    return json_file(candidate)


def _read_file(f: Path, options: ImportOptions) -> list[Located]:
    m = _DETAILS.match(f.name)
    if not m:
        raise DataError("not a lighteval details file name (details_<task>_<time>.parquet)", file=str(f))
    task, time = m["task"], m["time"]
    results = _results(f, time)
    if results is None and options.config_id is None:
        raise DataError(
            "no results_<time>.json for this details file (results/<model>/ beside details/): "
            "the model config is unknown; keep lighteval's output folder or give a config id",
            file=str(f),
        )
    model_config = ((results or {}).get("config_general") or {}).get("model_config") or {}
    set_fields = {k: v for k, v in model_config.items() if v is not None}
    if isinstance(set_fields.get("generation_parameters"), dict):
        set_fields["generation_parameters"] = {
            k: v for k, v in set_fields["generation_parameters"].items() if v is not None
        }
    config_id = options.config_id or foreign_config_id(TOOL, set_fields)
    seed = options.seed if options.seed is not None else set_fields.get("generation_parameters", {}).get("seed", 0)
    seed = seed if isinstance(seed, int) and not isinstance(seed, bool) else 0
    versions = (results or {}).get("versions") or {}
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow is in the test extra
        raise DataError("reading Parquet needs pyarrow (pip install pyarrow)", file=str(f)) from None
    try:
        rows = pq.read_table(f).to_pylist()
    except Exception as exc:  # noqa: BLE001 - any reader failure is invalid data
        raise DataError(f"not a readable Parquet file ({exc})", file=str(f)) from None
    lower = _lower_is_better((results or {}).get("config_tasks") or {}, task)
    out, seen, chosen = [], {}, None
    for line, row in enumerate(rows, 1):
        doc = require(row, "doc", f, line, kind=dict)
        response = require(row, "model_response", f, line, kind=dict)
        metric = require(row, "metric", f, line, kind=dict)
        qid = require(doc, "id", f, line, where="doc.", kind=(str, int))
        if options.id_field:
            qid = require(doc.get("specific") or {}, options.id_field, f, line, where="doc.specific.", kind=(str, int))
        if qid in seen:
            raise DataError(
                f"document {qid!r} twice (first at row {seen[qid]})", file=str(f), line=line, field="doc.id", value=qid
            )
        seen[qid] = line
        texts = response.get("text") or []
        if len(texts) > 1:
            raise DataError(
                f"{len(texts)} generations for one document are scored jointly: no outcome per generation",
                file=str(f),
                line=line,
                field="model_response.text",
            )
        name = chosen = pick_metric(
            [k for k, v in metric.items() if v is not None],
            options.metric or chosen,
            lower_is_better=lower,
            tool="lighteval",
            file=f,
            line=line,
            field="metric",
        )
        output = texts[0] if texts and isinstance(texts[0], str) else None
        methods = doc.get("sampling_methods") or []
        generative = "GENERATIVE" in methods if methods else bool(texts)
        if generative and not output:
            outcome = "no_answer"
        else:
            outcome = binary_outcome(metric[name], f, line, f"metric.{name}")
        prompt = response.get("input")
        if prompt is None:  # backends that record no input: the document's query
            prompt = doc.get("query")
        if isinstance(prompt, list):
            prompt = [dict(m) for m in prompt]
        if not isinstance(prompt, (str, list)) or not prompt:
            raise DataError(
                "no prompt recorded (neither the input sent nor the document's query)",
                file=str(f),
                line=line,
                field="model_response.input",
            )
        suite = options.suite or doc.get("task_name") or task
        gold = None
        choices, gi = doc.get("choices") or [], doc.get("gold_index")
        if isinstance(gi, int) and 0 <= gi < len(choices):
            gold = as_text(choices[gi])
        elif isinstance(gi, list):
            gold = as_text([choices[i] for i in gi if isinstance(i, int) and 0 <= i < len(choices)])
        data = {
            "schema_version": 1,
            "run_id": f"{TOOL}-{time}",
            "config_id": config_id,
            "suite": suite,
            "suite_version": options.suite_version or str(versions.get(task, versions.get(suite, "unversioned"))),
            "question_id": str(qid),
            "seed": seed,
            "sample_index": 0,
            "outcome": outcome,
            "prompt_hash": prompt_hash(prompt),
            "gold": gold,
            "output": output or None,
            "decided_by": f"{TOOL}:{name}" if outcome != "no_answer" else None,
        }
        out.append(located(data, f, line))
    return out


def _lower_is_better(config_tasks: dict, task: str) -> list[str]:
    """The metrics the task's config (``config_tasks[task].metrics`` of the results) declares
    lower-is-better: ``higher_is_better`` false, or false for that name of a metric group."""
    out = []
    config = config_tasks.get(task) or {}
    for m in config.get("metrics") or [] if isinstance(config, dict) else []:
        if not isinstance(m, dict):
            continue
        names, up = m.get("metric_name"), m.get("higher_is_better")
        for n in names if isinstance(names, list) else [names]:
            if (up.get(n) if isinstance(up, dict) else up) is False:
                out.append(n)
    return out
