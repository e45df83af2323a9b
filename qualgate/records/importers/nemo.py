"""NeMo Evaluator ``results.jsonl`` (and its run bundle) -> records.

NeMo Evaluator (0.3) writes, per benchmark run, ``results.jsonl`` (one line per
(problem, repeat)) beside the bundle ``<run_id>.json`` (``run_id``, ``config``, ``benchmark``).
Mapping:

==================  ===========================================================================
record field        from
==================  ===========================================================================
question_id         ``problem_idx`` (an integer; or ``metadata[<id_field>]`` with ``id_field``)
sample_index        ``repeat``
suite               the bundle's ``benchmark.name``; suite_version ``benchmark.version`` or
                    ``unversioned``
config_id           :func:`~qualgate.records.importers.foreign_config_id` of the bundle's ``config``
                    keys that describe the model and its sampling (``model``, ``model_url``,
                    ``temperature``, ``max_tokens``, ``top_p``, ``seed``, ``system_prompt``)
seed                the bundle's ``config.seed`` (default 0)
outcome             ``reward`` 1 / 0; 0 with ``extracted_answer`` null is ``no_answer``; a
                    ``scoring_details.error`` (a solver or infrastructure failure, which NeMo
                    Evaluator grades 0.0) is ``error`` with its message
prompt_hash         :func:`~qualgate.records.prompts.prompt_hash` of the chat request: the bundle's
                    ``system_prompt`` (if any) and ``prompt`` as the user message (a list of
                    messages is hashed as it is)
answer_strict       ``extracted_answer``;  gold: ``expected_answer``;  output: ``model_response``
latency_s           ``latency_ms`` / 1000
==================  ===========================================================================

Refused: a line that is not JSON, a missing or mistyped field, a reward other than 0 or 1
(partial credit), a (problem, repeat) twice, no bundle beside ``results.jsonl`` (unless a
config id and suite name are given).
"""

from __future__ import annotations

import json
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
    require,
)
from qualgate.records.prompts import prompt_hash

TOOL = "nemo-evaluator"
_MODEL_KEYS = ("model", "model_url", "temperature", "max_tokens", "top_p", "seed", "system_prompt")


def detect(path: Path) -> bool:
    if path.is_file():
        return path.name == "results.jsonl" and _bundle(path) is not None
    return any(_bundle(p) is not None for p in path.rglob("results.jsonl"))


def _bundle(results: Path) -> Path | None:
    """The bundle beside a results file: a JSON object with run_id, config_hash and benchmark."""
    for p in sorted(results.parent.glob("*.json")):
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (ValueError, OSError):
            continue
        if isinstance(data, dict) and {"run_id", "config_hash", "benchmark"} <= data.keys():
            return p
    return None


def read(path: Path, options: ImportOptions) -> list[Located]:
    out = []
    for f in files_in(path, "results.jsonl", "NeMo Evaluator results"):
        out += _read_file(f, options)
    return out


def _read_file(f: Path, options: ImportOptions) -> list[Located]:
    bundle_path = _bundle(f)
    if bundle_path is None:
        if options.config_id is None or options.suite is None:
            raise DataError(
                "no run bundle (<run_id>.json) beside this results file: the model config and "
                "benchmark are unknown; keep the bundle or give a config id and a suite name",
                file=str(f),
            )
        bundle = {}
    else:
        bundle = json_file(bundle_path)
    config = bundle.get("config") or {}
    benchmark = bundle.get("benchmark") or {}
    config_id = options.config_id or foreign_config_id(TOOL, {k: config.get(k) for k in _MODEL_KEYS})
    suite = options.suite or benchmark.get("name")
    if not isinstance(suite, str) or not suite:
        raise DataError("required field is missing", file=str(bundle_path), field="benchmark.name")
    version = options.suite_version or str(benchmark.get("version", "unversioned"))
    seed = options.seed if options.seed is not None else config.get("seed", 0)
    seed = seed if isinstance(seed, int) and not isinstance(seed, bool) else 0
    system = config.get("system_prompt")
    run_id = str(bundle.get("run_id") or f"{TOOL}-{f.parent.name}")
    out, seen = [], {}
    for line, row in json_lines(f):
        idx = require(row, "problem_idx", f, line, kind=int)
        rep = require(row, "repeat", f, line, kind=int)
        if (idx, rep) in seen:
            raise DataError(
                f"problem {idx} repeat {rep} twice (first at line {seen[idx, rep]})",
                file=str(f),
                line=line,
                field="problem_idx",
                value=idx,
            )
        seen[idx, rep] = line
        qid = idx
        if options.id_field:
            qid = require(row.get("metadata") or {}, options.id_field, f, line, where="metadata.", kind=(str, int))
        prompt = require(row, "prompt", f, line, kind=(str, list))
        if isinstance(prompt, str):
            prompt = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        try:
            phash = prompt_hash(prompt)
        except TypeError:
            raise DataError("must be a text or a list of messages", file=str(f), line=line, field="prompt") from None
        latency = row.get("latency_ms")
        data = {
            "schema_version": 1,
            "run_id": run_id,
            "config_id": config_id,
            "suite": suite,
            "suite_version": version,
            "question_id": str(qid),
            "seed": seed,
            "sample_index": rep,
            "prompt_hash": phash,
            "gold": as_text(row.get("expected_answer")),
            "output": row.get("model_response") or None,
            "latency_s": latency / 1000 if isinstance(latency, (int, float)) and latency >= 0 else None,
        }
        details = row.get("scoring_details") or {}
        if isinstance(details, dict) and details.get("error"):
            data |= {"outcome": "error", "error": str(details["error"])}
        else:
            reward = require(row, "reward", f, line, kind=(int, float))
            outcome = binary_outcome(reward, f, line, "reward")
            extracted = row.get("extracted_answer")
            if outcome == "incorrect" and "extracted_answer" in row and extracted is None:
                outcome = "no_answer"
            data |= {"outcome": outcome, "answer_strict": as_text(extracted)}
        out.append(located(data, f, line))
    return out
