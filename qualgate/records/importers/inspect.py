"""inspect_ai logs (``.eval`` and ``.json``) -> records, through inspect_ai's own log reader.

An ``.eval`` log is a zip archive of JSON members whose layout inspect_ai owns, so it is read
with ``inspect_ai.log.read_eval_log`` (the ``inspect`` extra: ``pip install 'qualgate[inspect]'``),
never parsed here. Mapping (``line`` in messages is the sample's 1-based position in the log):

==================  ===========================================================================
record field        from
==================  ===========================================================================
question_id         ``sample.id`` (or ``sample.metadata[<id_field>]`` with ``id_field``)
sample_index        ``sample.epoch`` − 1 (epochs count from 1)
suite / version     ``eval.task`` / ``eval.task_version``
config_id           :func:`~qualgate.records.importers.foreign_config_id` of ``eval.model``,
                    ``eval.model_args`` and the set fields of ``eval.model_generate_config``
seed                ``eval.model_generate_config.seed`` (default 0)
outcome             the score of the scorer ``metric`` names (``scorer.key``: one value of a
                    scorer whose value is a dict, e.g. ifeval's), else of the eval's headline
                    metric, which inspect_ai itself reports as the eval's primary number:
                    ``results.headline`` (0.3.285), else the task's declared
                    ``eval.headline_metric``, else inspect_ai's documented convention, the
                    first score of ``results.scores`` (``EvalResults.headline`` in
                    ``inspect_ai/log/_log.py``, 0.3.285); a log with several scorers and no
                    results is refused without ``metric``: ``C`` / ``I``
                    (or 1 / 0, True / False) correct / incorrect, ``N`` no_answer; a sample
                    ``error`` is ``error`` with its message
prompt_hash         :func:`~qualgate.records.prompts.prompt_hash` of ``sample.input`` (text, or the chat
                    messages' role and text)
answer_strict       ``score.answer``;  gold: ``sample.target``;  output: ``output.completion``
output_tokens       ``output.usage.output_tokens``;  latency_s: ``sample.total_time``
decided_by          ``inspect:<scorer>`` (``inspect:<scorer>.<key>``), unless ``no_answer``
==================  ===========================================================================

Refused: a log inspect_ai cannot read, a log without samples (``--no-log-samples``), a log
that was not scored (``--no-score``: score it with ``inspect score``), a log whose ``status``
is not ``success`` (``cancelled``, ``error``, ``started``: its samples are a part of the run)
or that holds fewer samples than ``results.total_samples`` (an excerpt; ``partial`` reads
both), a sample without the chosen score, a dict-valued score without a key,
a score other than C / I / N / 0 / 1 (``P`` partial credit, non-binary numbers).
"""

from __future__ import annotations

from pathlib import Path

from qualgate.errors import DataError
from qualgate.records.importers import (
    ImportOptions,
    Located,
    as_text,
    binary_outcome,
    files_in,
    foreign_config_id,
    located,
)
from qualgate.records.prompts import prompt_hash

TOOL = "inspect"
_LETTERS = {"C": "correct", "I": "incorrect", "N": "no_answer"}


def detect(path: Path) -> bool:
    if path.is_file():
        return path.suffix == ".eval" or (path.suffix == ".json" and _json_log(path))
    return any(True for _ in path.rglob("*.eval")) or any(_json_log(p) for p in path.rglob("*.json"))


def _json_log(path: Path) -> bool:
    """A JSON inspect log starts with its ``version`` and ``status``."""
    with open(path, "rb") as fh:
        head = fh.read(200).replace(b" ", b"").replace(b"\n", b"")
    return head.startswith(b'{"version":') and b'"status":' in head


def read(path: Path, options: ImportOptions) -> list[Located]:
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise DataError(
            "reading inspect_ai logs needs inspect_ai (pip install 'qualgate[inspect]')", file=str(path)
        ) from None
    logs = (
        [path]
        if path.is_file()
        else sorted(p for p in path.rglob("*") if p.suffix == ".eval" or (p.suffix == ".json" and _json_log(p)))
    )
    if not logs:
        files_in(path, "*.eval", "inspect_ai logs")  # raises: none found
    out = []
    for f in logs:
        try:
            log = read_eval_log(str(f))
        except Exception as exc:  # noqa: BLE001 - any reader failure is unreadable data
            raise DataError(f"inspect_ai cannot read this log ({type(exc).__name__}: {exc})", file=str(f)) from None
        out += _records(log, f, options)
    return out


def _records(log, f: Path, options: ImportOptions) -> list[Located]:
    spec = log.eval
    if not log.samples:
        raise DataError(
            "the log holds no samples (was it written with --no-log-samples?)", file=str(f), field="samples"
        )
    status = getattr(log, "status", "success")
    if status != "success" and not options.partial:
        error = getattr(getattr(log, "error", None), "message", None)
        why = f" ({' '.join(error.split())[:200]})" if error else ""
        raise DataError(
            f"log status {status!r}{why}: inspect_ai did not finish this run, so its {len(log.samples)} samples "
            f"are a part of it (the dataset has {spec.dataset.samples or 'an unknown number of'} samples); "
            "finish it with `inspect eval-retry LOG`, or pass --allow-partial to read the samples it holds",
            file=str(f),
            field="status",
            value=status,
        )
    total = getattr(log.results, "total_samples", None)
    if isinstance(total, int) and len(log.samples) < total and not options.partial:
        raise DataError(
            f"{len(log.samples)} samples of the {total} its results count (results.total_samples): a truncated or "
            "excerpted log, whose missing samples would be missing from the gate without a word; use the complete "
            "log, or pass --allow-partial to read the samples it holds",
            file=str(f),
            field="samples",
        )
    if not any(s.scores for s in log.samples) and not all(s.error for s in log.samples):
        raise DataError(
            "the log was not scored (no sample has a score: written with --no-score?): score it "
            "with `inspect score LOG` and import the scored log",
            file=str(f),
            field="samples.scores",
        )
    generate = spec.model_generate_config.model_dump(exclude_none=True) if spec.model_generate_config else {}
    config_id = options.config_id or foreign_config_id(
        TOOL, {"model": spec.model, "model_args": spec.model_args, "generate": generate}
    )
    seed = options.seed if options.seed is not None else generate.get("seed", 0)
    version = options.suite_version or str(spec.task_version)
    run_id = f"{TOOL}-{spec.run_id or spec.eval_id}"
    metric = options.metric or _headline(log) or _only_scorer(log.samples, f)
    out = []
    for line, s in enumerate(log.samples, 1):
        qid = s.id
        if options.id_field:
            qid = (s.metadata or {}).get(options.id_field)
            if qid is None:
                raise DataError(
                    "required field is missing", file=str(f), line=line, field=f"metadata.{options.id_field}"
                )
        data = {
            "schema_version": 1,
            "run_id": run_id,
            "config_id": config_id,
            "suite": options.suite or spec.task,
            "suite_version": version,
            "question_id": str(qid),
            "seed": seed,
            "sample_index": s.epoch - 1,
            "prompt_hash": prompt_hash(_prompt(s.input)),
            "gold": as_text(s.target),
            "output": s.output.completion if s.output and s.output.completion else None,
            "latency_s": s.total_time,
        }
        usage = s.output.usage if s.output else None
        if usage is not None and usage.output_tokens is not None:
            data["output_tokens"] = usage.output_tokens
        if s.error is not None:
            data |= {"outcome": "error", "error": s.error.message or "(no message)"}
        else:
            data |= _score(s.scores or {}, metric, f, line)
        out.append(located(data, f, line))
    return out


def _prompt(value):
    if isinstance(value, str):
        return value
    return [{"role": m.role, "content": m.text} for m in value]


def _score(scores: dict, name, f, line) -> dict:
    # name: --metric, the headline scorer or the only one (never the first of several)
    key = None
    if name is not None and name not in scores and "." in name:  # scorer.key
        scorer, key = name.split(".", 1)
        if scorer in scores:
            name = scorer
        else:
            key = None
    if name is None or name not in scores:
        shown = ", ".join(scores) or "none"
        raise DataError(
            f"no score {name!r} on this sample (scores: {shown})",
            file=str(f),
            line=line,
            field=f"scores.{name}" if name else "scores",
        )
    score = scores[name]
    value, field = score.value, f"scores.{name}.value"
    if isinstance(value, dict):
        if key is None or key not in value:
            keys = ", ".join(map(str, value)) or "none"
            what = f"no key {key!r} in" if key is not None else "a dict is"
            raise DataError(
                f"{what} the score of {name!r} (keys: {keys}): choose one with --metric {name}.KEY",
                file=str(f),
                line=line,
                field=field,
            )
        value, field = value[key], f"{field}.{key}"
    elif key is not None:
        raise DataError(
            f"the score of {name!r} is not a dict: --metric {name} without a key",
            file=str(f),
            line=line,
            field=field,
            value=str(value),
        )
    if isinstance(value, str) and value in _LETTERS:
        outcome = _LETTERS[value]
    else:
        outcome = binary_outcome(value, f, line, field)
    answer = score.answer if outcome != "no_answer" else None
    decided = f"{TOOL}:{name}.{key}" if key is not None else f"{TOOL}:{name}"
    return {"outcome": outcome, "answer_strict": answer, "decided_by": decided if outcome != "no_answer" else None}


def _headline(log) -> str | None:
    """The eval's headline metric as ``scorer`` or ``scorer.key``: the resolved ``results.headline``,
    else the task's declared ``eval.headline_metric``, else the first of ``results.scores``
    (inspect_ai's convention for logs that declare none); None without results."""
    scores = list(getattr(log.results, "scores", None) or [])
    if not scores:
        return None
    head = getattr(log.results, "headline", None) or getattr(log.eval, "headline_metric", None)
    if head is not None:
        matched = [
            x
            for x in scores
            if (head.scorer is None or x.scorer == head.scorer)
            and (head.score is None or x.name == head.score)
            and (head.metric is None or head.metric in (x.metrics or {}))
        ]
        scores = matched or scores  # a declaration that matches nothing: inspect_ai falls back too
    first = scores[0]
    return first.scorer if first.name in (None, first.scorer) else f"{first.scorer}.{first.name}"


def _only_scorer(samples, f: Path) -> str | None:
    """Without results (no headline): the one scorer the samples carry, else refused listing them."""
    names = list(dict.fromkeys(k for s in samples for k in (s.scores or {})))
    if len(names) <= 1:
        return names[0] if names else None
    raise DataError(
        f"{len(names)} scorers ({', '.join(names)}) and no results naming the eval's headline metric: "
        f"qualgate does not guess; choose one with --metric {names[0]} (or another of them)",
        file=str(f),
        field="results.scores",
    )
