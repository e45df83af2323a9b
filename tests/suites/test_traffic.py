"""Traffic suites (issue 30, item 1): the user's own chat requests as a suite.

The big files are built at test time from real prompts in ``../shared/data/open_ended``:
Arena-Hard's Chatbot Arena prompts and MT-Bench's questions, the second turns as real
conversations (the first turn answered by each of 32 models), with GPT-4's answers as the
reference column. Nothing of it is committed.
"""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from qualgate.cli import cli
from qualgate.errors import DataError
from qualgate.records.prompts import prompt_hash
from qualgate.run.runner import WorkItem, request_seed
from qualgate.suites import load_suite

from support import SHARED, require_shared

sys.path.insert(0, str(Path(__file__).resolve().parent))
from traffic_corpus import SUITE as CORPUS_SUITE  # noqa: E402
from traffic_corpus import cases as corpus_cases  # noqa: E402

OPEN = SHARED / "data" / "open_ended"
CORPUS = corpus_cases()


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _suite_file(folder: Path, traffic, *, extra: str = "", gold: bool = True) -> Path:
    lines = ["name: my_traffic", "version: 1", f"source: {{traffic: {json.dumps(traffic)}{extra}}}"]
    if gold:
        lines.append("gold: {field: reference}")
    lines += [
        "extract: {strict: last_number, lenient: last_number}",
        "grader: exact",
        "decides: strict",
        "generation: {max_tokens: 1024}",
    ]
    path = folder / "suite.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def real_requests() -> list[dict]:
    """Distinct real chat requests: ``{"id", "messages", "reference"}``, about 3,000."""
    require_shared()
    out, seen = [], set()

    def add(rid, messages, reference):
        key = json.dumps(messages, sort_keys=True)
        if key not in seen:  # Arena holds the same prompt under several ids
            seen.add(key)
            out.append({"id": rid, "messages": messages, "reference": reference})

    gpt4 = {r["question_id"]: r["choices"][0]["turns"] for r in _jsonl(OPEN / "arena_hard_1k/model_answer/gpt-4.jsonl")}
    for q in _jsonl(OPEN / "arena_hard_1k/question.jsonl"):
        add(f"arena-{q['question_id']}", [{"role": "user", "content": q["turns"][0]}], gpt4[q["question_id"]][0])
    mt = _jsonl(OPEN / "mt_bench/question.jsonl")
    ref = {r["question_id"]: r["choices"][0]["turns"] for r in _jsonl(OPEN / "mt_bench/model_answer/gpt-4.jsonl")}
    for q in mt:
        add(f"mt-{q['question_id']}-1", [{"role": "user", "content": q["turns"][0]}], ref[q["question_id"]][0])
    for answers in sorted((OPEN / "mt_bench/model_answer").glob("*.jsonl")):
        first = {r["question_id"]: r["choices"][0]["turns"][0] for r in _jsonl(answers)}
        for q in mt:
            qid = q["question_id"]
            add(
                f"mt-{qid}-2-{answers.stem}",
                [
                    {"role": "user", "content": q["turns"][0]},
                    {"role": "assistant", "content": first[qid]},
                    {"role": "user", "content": q["turns"][1]},
                ],
                ref[qid][1],
            )
    return out


def _as_parts(messages: list[dict]) -> list[dict]:
    """The same messages with each content as an array of text parts split at newlines (read
    back joined by a newline: the same prompt)."""
    return [{**m, "content": [{"type": "text", "text": t} for t in m["content"].split("\n")]} for m in messages]


def _sampling(i: int) -> dict:
    """Per-request sampling fields as a client would send them (varied by index)."""
    out = {"temperature": (0.0, 0.7, 1.0)[i % 3], "seed": i}
    if i % 4 == 0:
        out["max_completion_tokens"] = 256 + i % 7
    elif i % 4 == 1:
        out["max_tokens"] = 512
    if i % 5 == 0:
        out["stop"] = ["\n\nUser:"]
    if i % 6 == 0:
        out["top_p"] = 0.9
    return out


def _lines(requests: list[dict], form: str) -> list[dict]:
    out = []
    for i, r in enumerate(requests):
        messages = _as_parts(r["messages"]) if i % 3 == 1 else r["messages"]
        if form == "batch":
            body = {"model": "my-model", "messages": messages, **_sampling(i)}
            out.append(
                {
                    "custom_id": r["id"],
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": body,
                    "reference": r["reference"],
                }
            )
        elif form == "request":
            out.append(
                {
                    "model": "my-model",
                    "messages": messages,
                    **_sampling(i),
                    "user": f"u{i % 11}",
                    "stream": False,
                    "reference": r["reference"],
                }
            )
        else:
            out.append({"messages": messages, "reference": r["reference"]})
    return out


def _write(path: Path, lines: list[dict], duplicates_every: int = 0) -> int:
    """Write the lines, repeating every ``duplicates_every``-th one; the number repeated."""
    rows, repeated = [], 0
    for i, line in enumerate(lines):
        rows.append(json.dumps(line, ensure_ascii=False))
        if duplicates_every and i % duplicates_every == 0:
            rows.append(json.dumps(line, ensure_ascii=False))
            repeated += 1
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return repeated


# --------------------------------------------------------------------------- the three forms


@pytest.mark.slow
@pytest.mark.parametrize("form", ["request", "batch", "plain"])
def test_two_thousand_real_requests_in_each_line_form_become_a_suite(form, real_requests, tmp_path):
    assert len(real_requests) >= 2000
    traffic = tmp_path / "traffic.jsonl"
    repeated = _write(traffic, _lines(real_requests, form), duplicates_every=40)
    suite = load_suite(_suite_file(tmp_path, "traffic.jsonl"))

    assert len(suite.questions) == len(real_requests) >= 2000
    assert suite.source["lines"] == len(real_requests) + repeated
    assert suite.source["duplicates"] == repeated and repeated > 0
    assert suite.source["forms"][form] == suite.source["lines"]
    # every form reads to the same prompts (text parts joined by newlines), in file order
    assert [q.prompt_hash for q in suite.questions] == [prompt_hash(r["messages"]) for r in real_requests]
    assert [q.gold for q in suite.questions] == [r["reference"].strip() for r in real_requests]
    if form == "batch":
        assert [q.id for q in suite.questions] == [r["id"] for r in real_requests]
    else:
        assert [q.id for q in suite.questions] == ["sha256:" + q.prompt_hash[:16] for q in suite.questions]
    two_turn = next(q for q in suite.questions if len(q.prompt) == 3)
    assert [m["role"] for m in two_turn.prompt] == ["user", "assistant", "user"]
    assert all(q.sampling == {} for q in suite.questions)  # sampling: config, the default


@pytest.mark.slow
def test_request_sampling_overrides_the_config_and_the_harness_seed_always_wins(real_requests, tmp_path):
    requests = real_requests[:300]
    _write(tmp_path / "t.jsonl", _lines(requests, "batch"))
    suite = load_suite(_suite_file(tmp_path, "t.jsonl", extra=", sampling: request"))
    config = {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "max_tokens": 2048}
    for i, q in enumerate(suite.questions):
        sent = dict(_sampling(i))
        sent.pop("seed")
        if "max_completion_tokens" in sent:
            sent["max_tokens"] = sent.pop("max_completion_tokens")
        assert q.sampling == sent
        request = WorkItem(suite, q, 3, 0).request(config)
        assert request.sampling == {**config, **sent, "seed": request_seed(suite.name, q.id, 3, 0)}
    assert "request_sampling_sha256" in suite.source


def test_config_sampling_wins_by_default(tmp_path):
    (tmp_path / "t.jsonl").write_text(
        json.dumps(
            {
                "messages": [{"role": "user", "content": "hi"}],
                "temperature": 1.5,
                "max_tokens": 3,
                "seed": 9,
                "reference": "x",
            }
        )
        + "\n"
    )
    suite = load_suite(_suite_file(tmp_path, "t.jsonl"))
    (q,) = suite.questions
    config = {"temperature": 0.0, "max_tokens": 100}
    assert WorkItem(suite, q, 0, 0).request(config).sampling == {**config, "seed": request_seed(suite.name, q.id, 0, 0)}


def test_a_changed_request_sampling_value_changes_the_suite_source(tmp_path):
    def source(temperature):
        (tmp_path / "t.jsonl").write_text(
            json.dumps({"messages": [{"role": "user", "content": "hi"}], "temperature": temperature, "reference": "x"})
            + "\n"
        )
        return load_suite(_suite_file(tmp_path, "t.jsonl", extra=", sampling: request")).source

    a, b = source(0.5), source(0.7)
    assert a["request_sampling_sha256"] != b["request_sampling_sha256"]
    assert a["sha256"] != b["sha256"]


# --------------------------------------------------------------------------- ids, duplicates, sample


def _plain(content, **extra):
    return {"messages": [{"role": "user", "content": content}], "reference": "r", **extra}


def test_exact_duplicates_are_removed_and_counted_keeping_the_first(tmp_path):
    lines = [_plain("a"), _plain("b"), _plain("a"), {"custom_id": "x", **_plain("b")}, _plain("c")]
    _write(tmp_path / "t.jsonl", lines)
    suite = load_suite(_suite_file(tmp_path, "t.jsonl"))
    assert [q.prompt[0]["content"] for q in suite.questions] == ["a", "b", "c"]
    assert suite.source["duplicates"] == 2 and suite.source["distinct"] == 3 and suite.source["lines"] == 5
    assert suite.questions[1].meta["traffic_line"].endswith("t.jsonl:2")


def test_a_string_and_its_text_parts_are_one_request(tmp_path):
    parts = {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
        "reference": "r",
    }
    _write(tmp_path / "t.jsonl", [_plain("a\nb"), parts])
    suite = load_suite(_suite_file(tmp_path, "t.jsonl"))
    assert len(suite.questions) == 1 and suite.source["duplicates"] == 1


def test_tool_calls_and_tool_messages_are_kept_as_vllm_passes_them(tmp_path):
    messages = [
        {"role": "developer", "content": "Use tools.", "name": "ops"},
        {"role": "user", "content": "add 2 and 2"},
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a":2}'}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "4"}]},
    ]
    _write(tmp_path / "t.jsonl", [{"messages": messages, "reference": "4"}])
    (q,) = load_suite(_suite_file(tmp_path, "t.jsonl")).questions
    assert q.prompt == (
        {"role": "developer", "content": "Use tools.", "name": "ops"},
        {"role": "user", "content": "add 2 and 2"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a":2}'}}],
        },
        {"role": "tool", "content": "4", "tool_call_id": "c1"},
    )


def test_the_sample_is_seeded_and_does_not_depend_on_line_order(tmp_path):
    lines = [_plain(f"question {i}") for i in range(200)]
    _write(tmp_path / "a.jsonl", lines)
    shuffled = lines[:]
    random.Random(5).shuffle(shuffled)
    _write(tmp_path / "b.jsonl", shuffled)

    def ids(name, seed):
        path = _suite_file(tmp_path, name, extra=f", sample: {{n: 50, seed: {seed}}}")
        return [q.id for q in load_suite(path).questions]

    a = ids("a.jsonl", 7)
    assert len(a) == 50 == len(set(a))
    assert ids("a.jsonl", 7) == a
    assert sorted(ids("b.jsonl", 7)) == sorted(a)
    assert set(ids("a.jsonl", 8)) != set(a)
    order = [q.id for q in load_suite(_suite_file(tmp_path, "a.jsonl")).questions]
    assert a == [i for i in order if i in set(a)]  # kept in file order


def test_a_sample_larger_than_the_traffic_is_refused(tmp_path):
    _write(tmp_path / "t.jsonl", [_plain("a"), _plain("b"), _plain("a")])
    with pytest.raises(DataError, match="a sample of 3 from 2 distinct requests") as exc:
        load_suite(_suite_file(tmp_path, "t.jsonl", extra=", sample: {n: 3}"))
    assert exc.value.field == "source.sample.n"


def test_every_line_is_checked_even_when_a_sample_leaves_it_out(tmp_path):
    lines = [_plain(f"question {i}") for i in range(20)] + [{**_plain("last"), "reference": ""}]
    _write(tmp_path / "t.jsonl", lines)
    with pytest.raises(DataError, match="empty gold answer") as exc:
        load_suite(_suite_file(tmp_path, "t.jsonl", extra=", sample: {n: 1}"))
    assert (exc.value.line, exc.value.field) == (21, "reference")


def test_ignore_fields_drops_named_fields_knowingly(tmp_path):
    line = {**_plain("hi"), "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "auto"}
    _write(tmp_path / "t.jsonl", [line])
    with pytest.raises(DataError, match="tool definitions"):
        load_suite(_suite_file(tmp_path, "t.jsonl"))
    suite = load_suite(_suite_file(tmp_path, "t.jsonl", extra=", ignore_fields: [tools, tool_choice]"))
    assert suite.questions[0].prompt == ({"role": "user", "content": "hi"},)


def test_columns_are_dotted_paths_and_a_request_field_used_as_one_stays_a_request_field(tmp_path):
    line = {
        "custom_id": "a",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"messages": [{"role": "user", "content": "hi"}], "temperature": 0.3, "metadata": {"ref": "R"}},
    }
    _write(tmp_path / "t.jsonl", [line])
    path = _suite_file(tmp_path, "t.jsonl", extra=", sampling: request", gold=False)
    text = path.read_text().replace(
        "grader: exact", "gold: {field: body.metadata.ref}\nmeta: [body.temperature]\ngrader: exact"
    )
    path.write_text(text)
    (q,) = load_suite(path).questions
    assert q.gold == "R" and q.meta["body.temperature"] == 0.3 and q.sampling == {"temperature": 0.3}


def test_data_files_replace_the_suite_files_traffic(tmp_path):
    _write(tmp_path / "other.jsonl", [_plain("from the other file")])
    suite = load_suite(_suite_file(tmp_path, "missing.jsonl"), data_files=tmp_path / "other.jsonl")
    assert suite.questions[0].prompt[0]["content"] == "from the other file"


# --------------------------------------------------------------------------- the suite file


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        (", sampling: both", "source.sampling"),
        (", sample: {n: 0}", "source.sample.n"),
        (", sample: {n: 5, seed: -1}", "source.sample.seed"),
        (", sample: {seed: 1}", "source.sample.n"),
        (", ignore_fields: [messages]", "source.ignore_fields[0]"),
        (", ignore_fields: [temperature]", "source.ignore_fields[0]"),
        (", split: test", "source.split"),
    ],
)
def test_a_bad_traffic_source_is_refused_naming_the_key(extra, field, tmp_path):
    with pytest.raises(DataError) as exc:
        load_suite(_suite_file(tmp_path, "t.jsonl", extra=extra))
    assert exc.value.field == field


def test_a_traffic_suite_without_gold_needs_a_grader_that_grades_without_one(tmp_path):
    with pytest.raises(DataError, match="needs a gold answer") as exc:
        load_suite(_suite_file(tmp_path, "t.jsonl", gold=False))
    assert exc.value.field == "grader"


def test_a_traffic_suite_has_no_prompt_template_or_id_rule(tmp_path):
    path = _suite_file(tmp_path, "t.jsonl")
    path.write_text(path.read_text() + "prompt: {user: '{{question}}'}\n")
    with pytest.raises(DataError) as exc:
        load_suite(path)
    assert exc.value.field == "prompt"


def test_a_dataset_suite_cannot_take_traffic_keys(tmp_path):
    from qualgate.suites import suite_path

    text = suite_path("gsm8k").read_text().replace("split: test", "split: test\n  sampling: request")
    (tmp_path / "g.yaml").write_text(text)
    with pytest.raises(DataError) as exc:
        load_suite(tmp_path / "g.yaml")
    assert exc.value.field == "source.sampling"


# --------------------------------------------------------------------------- the command line


def test_suites_show_renders_a_traffic_suite(tmp_path):
    lines = [
        {
            "custom_id": "req-1",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": "m",
                "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a prime."}],
            },
            "reference": "2",
        },
        _plain("Name an even prime."),
        _plain("Name an even prime."),
    ]
    _write(tmp_path / "t.jsonl", lines)
    r = CliRunner().invoke(cli, ["suites", "show", str(_suite_file(tmp_path, "t.jsonl"))])
    assert r.exit_code == 0, r.output
    assert (
        "traffic " in r.stdout and "(3 lines, 1 duplicates removed, 2 distinct requests; sampling: config)" in r.stdout
    )
    assert "=== req-1" in r.stdout and "[system]\nBe brief.\n[user]\nName a prime." in r.stdout
    assert r.stdout.count("=== ") == 2 and "gold: 2" in r.stdout


def test_every_refused_line_of_a_file_is_named_in_one_run(tmp_path):
    bad_role = {"messages": [{"role": "function", "content": "x"}], "reference": "r"}
    lines = [_plain("a"), bad_role, _plain("b"), {"messages": "hi", "reference": "r"}, _plain("c", top_p=2)]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([json.dumps(x) for x in lines] + ["{not json"]) + "\n")
    r = CliRunner().invoke(cli, ["suites", "show", str(_suite_file(tmp_path, "t.jsonl"))])
    assert r.exit_code == 3, r.output
    for number, field in [(2, "'messages[0].role'"), (4, "'messages'"), (5, "'top_p'"), (6, None)]:
        assert f"{path}:{number}: " + ("" if field is None else f"field {field}") in r.output, (number, r.output)
    assert "(4 lines refused)" in r.output and "more" not in r.output


def test_refused_lines_past_the_bound_are_counted_not_named(tmp_path):
    from qualgate.suites._traffic import MAX_ERRORS_SHOWN

    _write(tmp_path / "t.jsonl", [_plain(f"q{i}", temperature=-1) for i in range(MAX_ERRORS_SHOWN + 7)])
    with pytest.raises(DataError) as e:
        load_suite(_suite_file(tmp_path, "t.jsonl"))
    text = str(e.value)
    assert text.count("field 'temperature' = -1") == MAX_ERRORS_SHOWN
    assert f"t.jsonl:{MAX_ERRORS_SHOWN}: " in text and f"t.jsonl:{MAX_ERRORS_SHOWN + 1}: " not in text
    assert text.endswith(f"\nand 7 more\n({MAX_ERRORS_SHOWN + 7} lines refused)")
    assert (e.value.line, e.value.field) == (1, "temperature")  # the first error's place, for tools


def test_refused_values_are_shown_as_json_not_python_reprs(tmp_path):
    lines = [
        {
            "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}],
            "reference": "r",
        },
        {"messages": [{"role": "user", "content": "a"}], "stop": [True], "reference": "r"},
        {"messages": [{"role": "user", "content": "a"}], "temperature": True, "reference": "r"},
        {"messages": [{"role": "user", "content": "b"}], "stop": {"a": None}, "reference": "r"},
    ]
    _write(tmp_path / "t.jsonl", lines)
    r = CliRunner().invoke(cli, ["suites", "show", str(_suite_file(tmp_path, "t.jsonl"))])
    assert r.exit_code == 3, r.output
    assert "field 'messages[0].content[0].type' = \"image_url\"" in r.output, r.output
    assert "= [true]" in r.output and "'temperature' = true" in r.output and '= {"a": null}' in r.output, r.output
    assert "'image_url'" not in r.output and "True" not in r.output and "None" not in r.output, r.output


def test_a_traffic_path_relative_to_the_suite_file_is_shown_resolved(tmp_path, monkeypatch):
    (tmp_path / "suites").mkdir()
    (tmp_path / "data").mkdir()
    _write(tmp_path / "data" / "t.jsonl", [_plain("a", stop=["\n", "END"])])
    monkeypatch.chdir(tmp_path)
    suite = _suite_file(tmp_path / "suites", "../data/t.jsonl", extra=", sampling: request")
    r = CliRunner().invoke(cli, ["suites", "show", "suites/suite.yaml"])
    assert r.exit_code == 0, r.output
    assert "traffic data/t.jsonl (1 lines" in r.stdout and "suites/../data" not in r.stdout, r.stdout
    assert "traffic_line=data/t.jsonl:1" in r.stdout
    assert 'sampling: stop=["\\n", "END"]' in r.stdout, r.stdout  # JSON, not ['\n', 'END']
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # outside the working directory: the absolute path
    assert load_suite(suite).source["traffic"] == [str((tmp_path / "data" / "t.jsonl").resolve())]


def test_the_corpus_has_forty_malformed_files_that_name_a_field():
    assert sum(c.field is not None for c in CORPUS) >= 40


@pytest.mark.parametrize("case", CORPUS, ids=[c.id for c in CORPUS])
def test_a_malformed_traffic_file_is_refused_with_exit_3_naming_file_line_and_field(case, tmp_path):
    (tmp_path / "suite.yaml").write_text(CORPUS_SUITE)
    (tmp_path / "bad.jsonl").write_bytes(case.content)
    r = CliRunner().invoke(cli, ["suites", "show", str(tmp_path / "suite.yaml")])
    assert r.exit_code == 3, (r.exit_code, r.output)
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    where = str(tmp_path / "bad.jsonl") + ("" if case.line is None else f":{case.line}:")
    assert where in r.output, r.output
    if case.field is not None:
        assert f"field {case.field!r}" in r.output, r.output


# --------------------------------------------------------------------------- docs/traffic.md

DOC = Path(__file__).resolve().parents[2] / "docs" / "traffic.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)


def test_the_docs_suite_file_is_a_valid_traffic_suite(tmp_path):
    text = next(b for b in _blocks("yaml") if b.startswith("# suites/support_traffic.yaml")).replace(
        "grader: ...                      # see section 3",
        "grader: exact\nextract: {strict: last_number, lenient: last_number}\ndecides: strict",
    )
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "support_traffic.yaml").write_text(text)
    (tmp_path / "data").mkdir()
    rows = [
        {"messages": [{"role": "user", "content": f"ticket {i}"}], "reference": "r", "category": "c"}
        for i in range(2100)
    ]
    _write(tmp_path / "data" / "support-week47.jsonl", rows)
    suite = load_suite(tmp_path / "suites" / "support_traffic.yaml")
    assert len(suite.questions) == 2000 and suite.source["sample"] == {"n": 2000, "seed": 0}


def test_every_command_in_the_docs_exists_with_the_options_used():
    lines = [line.split("  #")[0] for block in _blocks("bash") for line in block.replace("\\\n", " ").splitlines()]
    commands = [shlex.split(line) for line in lines if line.startswith("qualgate ")]
    assert len(commands) >= 5
    for words in commands:
        command, ctx, rest = cli, click.Context(cli), words[1:]
        while isinstance(command, click.Group):
            command, rest = command.get_command(ctx, rest[0]), rest[1:]
            assert command is not None, words
        options = {o for p in command.params if isinstance(p, click.Option) for o in p.opts}
        assert {w for w in rest if w.startswith("--")} <= options, words


def walk_through() -> str:
    """The bash blocks of docs/traffic.md marked ``<!-- walk-through -->``, in order, as one script."""
    blocks = re.findall(r"^<!-- walk-through -->\n```bash\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)
    assert len(blocks) >= 3, "docs/traffic.md lost its walk-through blocks"
    return "\n".join(blocks)


@pytest.mark.slow  # decodes 60 requests under two configs on the demo models (about 25 CPU-s)
def test_the_cpu_walk_through_runs_as_written(tmp_path):
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(DOC.parents[1]), env.get("PYTHONPATH")]))
    r = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", walk_through()],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # what the page says the user sees, in the state its blocks leave the folder
    assert "traffic data/traffic.jsonl (60 lines, 0 duplicates removed, 60 distinct requests" in r.stdout
    assert "verdict PASS" in r.stdout or "verdict FAIL" in r.stdout or "INCONCLUSIVE" in r.stdout, r.stdout
    for name in ("target", "fly-w2"):
        records = (tmp_path / "runs" / "my-fly" / "records" / f"{name}.jsonl").read_text().splitlines()
        outcomes = [json.loads(line)["outcome"] for line in records]
        assert len(outcomes) == 60 and "error" not in outcomes, (name, outcomes)
    assert (tmp_path / "runs" / "my-fly" / "report.html").stat().st_size > 0
    assert "of 60 pairs" in r.stdout  # qualgate flips


def test_ignore_fields_also_drops_extra_keys_of_a_batch_line(tmp_path):
    line = {
        "custom_id": "a",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"messages": [{"role": "user", "content": "hi"}]},
        "reference": "r",
        "team": "ops",
    }
    _write(tmp_path / "t.jsonl", [line])
    with pytest.raises(DataError) as exc:
        load_suite(_suite_file(tmp_path, "t.jsonl"))
    assert exc.value.field == "team"
    assert len(load_suite(_suite_file(tmp_path, "t.jsonl", extra=", ignore_fields: [team]")).questions) == 1
