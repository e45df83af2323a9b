"""A corpus of bad inputs for every file and number the CLI reads (issue 16, items 2 and 7).

Each :class:`Case` is one command line over files it writes into a fresh directory: record
files for ``gate``, plans and decoding configs for ``run``, and option values for ``power``,
``gate`` and ``run``. Every case must end in a clean refusal: the expected exit code (3 for a
bad file, 2 for a bad option), no traceback, within a time and memory limit, and a message
that names what it must (the file, ``file:line``, the field or the option).

The corpus is data: :func:`cases` builds it from tables (one row per bad value), so that a
new rule is one row. ``run_corpus.py`` runs it in a worker process; ``test_corpus.py`` and
``benchmarks/bad_inputs.py`` read the results.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field

#: special file contents
FIFO, DEV_ZERO, DIRECTORY = "<fifo>", "<dev-zero>", "<directory>"


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]  #: ``{d}`` is replaced by the case's directory
    files: dict = field(default_factory=dict)  #: name -> bytes, str or a special marker
    code: int = 3
    names: tuple[str, ...] = ()  #: substrings the error output must contain
    limits: dict = field(default_factory=dict)  #: qualgate.records.strict.LIMITS overrides
    group: str = ""


# --------------------------------------------------------------------------- records

VALID = {
    "schema_version": 1,
    "run_id": "r",
    "config_id": "cfg-b",
    "suite": "s",
    "suite_version": "1",
    "question_id": "q1",
    "seed": 0,
    "sample_index": 0,
    "outcome": "correct",
    "prompt_hash": "h",
}


def _line(cid: str, qid: str, **changes) -> str:
    rec = {**VALID, "config_id": cid, "question_id": qid, **changes}
    return json.dumps({k: v for k, v in rec.items() if v is not _DROP}, separators=(",", ":"))


_DROP = object()
BASE = "".join(_line("cfg-b", f"q{i}") + "\n" for i in range(1, 5)).encode()


def _cand(line2: str, *, rest: bool = True) -> bytes:
    """A candidate file whose line 2 is ``line2`` (raw text)."""
    lines = [_line("cfg-c", "q1"), line2] + ([_line("cfg-c", f"q{i}") for i in (3, 4)] if rest else [])
    return ("\n".join(lines) + "\n").encode()


def _raw_field(name: str, raw: str) -> str:
    """Line 2 with field ``name`` set to the raw JSON text ``raw``."""
    obj = json.loads(_line("cfg-c", "q2"))
    obj[name] = "\x00PLACEHOLDER\x00"
    return json.dumps(obj, separators=(",", ":")).replace('"\\u0000PLACEHOLDER\\u0000"', raw)


def _gate(name="cand.jsonl"):
    return ("gate", "{d}/base.jsonl", f"{{d}}/{name}", "--margin", "0.05")


_STR_FIELDS = (
    "run_id",
    "config_id",
    "suite",
    "suite_version",
    "question_id",
    "prompt_hash",
    "mode",
    "answer_strict",
    "answer_lenient",
    "gold",
    "output",
    "error",
)
_INT_FIELDS = (
    "schema_version",
    "seed",
    "sample_index",
    "output_tokens",
    "spec_steps",
    "draft_tokens",
    "accepted_tokens",
    "deferred_tokens",
)
_REQUIRED = (
    "schema_version",
    "run_id",
    "config_id",
    "suite",
    "suite_version",
    "question_id",
    "seed",
    "sample_index",
    "outcome",
    "prompt_hash",
)
BIG = "9" * 400

_BAD_STR = {"int": "5", "list": '["a"]', "object": '{"a":1}', "bool": "true", "float": "1.5"}
_BAD_INT = {
    "string": '"3"',
    "float": "1.5",
    "bool": "true",
    "list": "[1]",
    "huge": BIG,
    "2**64": str(2**64),
    "NaN": "NaN",
}
_BAD_FLOAT = {
    "string": '"1"',
    "negative": "-1",
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
    "1e999": "1e999",
    "huge int": BIG,
    "list": "[1]",
    "bool": "true",
    "object": "{}",
}
_BAD_OUTCOME = {
    "word": '"pass"',
    "upper": '"CORRECT"',
    "list": '["correct"]',
    "object": "{}",
    "int": "1",
    "deep list": "[" * 500 + "]" * 500,
}


def record_cases() -> list[Case]:
    out = []

    def add(cid, content, names, *, argv=None, files=None, limits=None, group="records: field"):
        fs = {"base.jsonl": BASE, "cand.jsonl": content}
        fs.update(files or {})
        out.append(Case(f"records/{cid}", argv or _gate(), fs, 3, names, limits or {}, group))

    for name in _STR_FIELDS:
        for label, raw in _BAD_STR.items():
            add(f"{name}={label}", _cand(_raw_field(name, raw)), ("cand.jsonl:2", name))
    for name in _INT_FIELDS:
        for label, raw in _BAD_INT.items():
            add(f"{name}={label}", _cand(_raw_field(name, raw)), ("cand.jsonl:2", name))
    for label, raw in _BAD_FLOAT.items():
        add(f"latency_s={label}", _cand(_raw_field("latency_s", raw)), ("cand.jsonl:2", "latency_s"))
    for label, raw in _BAD_OUTCOME.items():
        add(f"outcome={label}", _cand(_raw_field("outcome", raw)), ("cand.jsonl:2", "outcome"))
    for name in _REQUIRED:
        add(f"{name}=missing", _cand(_line("cfg-c", "q2", **{name: _DROP})), ("cand.jsonl:2", name))
        if name in _STR_FIELDS:
            add(f"{name}=empty", _cand(_line("cfg-c", "q2", **{name: ""})), ("cand.jsonl:2", name))
    add("unknown field", _cand(_line("cfg-c", "q2", extra=1)), ("cand.jsonl:2", "extra"))
    add("schema_version=2", _cand(_line("cfg-c", "q2", schema_version=2)), ("cand.jsonl:2", "schema_version"))

    g = "records: file"
    ok2 = _line("cfg-c", "q2")
    dup = ok2[:-1] + ',"outcome":"incorrect"}'
    add("duplicate key outcome", _cand(dup), ("cand.jsonl:2", "outcome", "duplicate"), group=g)
    add("duplicate key same value", _cand(ok2[:-1] + ',"seed":0}'), ("cand.jsonl:2", "seed", "duplicate"), group=g)
    add(
        "duplicate key on every line",
        b"".join(
            (_line("cfg-c", f"q{i}", outcome="incorrect")[:-1] + ',"outcome":"correct"}\n').encode()
            for i in range(1, 5)
        ),
        ("cand.jsonl:1", "outcome", "duplicate"),
        group=g,
    )
    add("deep nesting line", _cand("[" * 100_000 + "]" * 100_000), ("cand.jsonl:2", "nest"), group=g)
    add("deep nesting value", _cand(_raw_field("gold", "[" * 5000 + "]" * 5000)), ("cand.jsonl:2",), group=g)
    add(
        "json array",
        ("[" + ",".join(_line("cfg-c", f"q{i}") for i in range(1, 5)) + "]\n").encode(),
        ("cand.jsonl", "JSON array"),
        group=g,
    )
    add(
        "json array pretty",
        json.dumps([json.loads(_line("cfg-c", "q1"))], indent=2).encode(),
        ("cand.jsonl", "JSON array"),
        group=g,
    )
    add("utf-8 bom", b"\xef\xbb\xbf" + _cand(ok2), ("cand.jsonl", "byte-order mark"), group=g)
    add("cr-only line ends", _cand(ok2).replace(b"\n", b"\r"), ("cand.jsonl", "CR"), group=g)
    add("gzip", gzip.compress(_cand(ok2), mtime=0), ("cand.jsonl", "gzip"), group=g)
    add("utf-16 with bom", _cand(ok2).decode().encode("utf-16"), ("cand.jsonl", "UTF-16"), group=g)
    add("utf-16-le no bom", _cand(ok2).decode().encode("utf-16-le"), ("cand.jsonl", "UTF-16"), group=g)
    add("utf-32", _cand(ok2).decode().encode("utf-32"), ("cand.jsonl", "UTF-32"), group=g)
    add("invalid utf-8", _cand(ok2).replace(b'"q4"', b'"q\xff4"'), ("cand.jsonl:4", "UTF-8"), group=g)
    add("nul byte", _cand(ok2).replace(b'"q3"', b'"q\x003"'), ("cand.jsonl:3", "NUL"), group=g)
    add("lone surrogate", _cand(_line("cfg-c", "q2", gold="\ud800")), ("cand.jsonl:2", "surrogate"), group=g)
    add("a string line", _cand('"just a string"'), ("cand.jsonl:2",), group=g)
    add("a number line", _cand("42"), ("cand.jsonl:2",), group=g)
    add("two objects on a line", _cand(ok2 + ok2), ("cand.jsonl:2",), group=g)
    add("trailing garbage", _cand(ok2 + " xyz"), ("cand.jsonl:2",), group=g)
    add("truncated last line", _cand(ok2) + b'{"schema_version":1,"run_id', ("cand.jsonl:5", "incomplete"), group=g)
    add("single quotes", _cand(ok2.replace('"', "'")), ("cand.jsonl:2",), group=g)
    add("python literals", _cand(ok2.replace('"correct"', "None")), ("cand.jsonl:2",), group=g)
    add("binary junk", bytes(range(256)) * 4, ("cand.jsonl",), group=g)
    add(
        "over the size limit",
        _cand(_line("cfg-c", "q2", output="x" * 2000)),
        ("cand.jsonl", "limit"),
        limits={"records": 1000},
        group=g,
    )
    add("fifo", FIFO, ("cand.jsonl", "FIFO"), group=g)
    add("/dev/zero", DEV_ZERO, ("cand.jsonl", "device"), group=g)
    add(
        "directory named .jsonl",
        b"",
        ("x.jsonl", "directory"),
        argv=("gate", "{d}/base.jsonl", "{d}/dir", "--margin", "0.05"),
        files={"dir/x.jsonl": DIRECTORY, "dir/ok.jsonl": _cand(ok2)},
        group=g,
    )
    add(
        "fifo inside a records directory",
        b"",
        ("y.jsonl", "FIFO"),
        argv=("gate", "{d}/base.jsonl", "{d}/dir", "--margin", "0.05"),
        files={"dir/y.jsonl": FIFO, "dir/ok.jsonl": _cand(ok2)},
        group=g,
    )
    add("fifo as the baseline", b"", ("base.jsonl", "FIFO"), files={"base.jsonl": FIFO}, group=g)

    # CSV and Parquet exports
    header = ",".join(VALID) + "\n"
    row = ",".join(str(v) for v in {**VALID, "config_id": "cfg-c"}.values()) + "\n"
    csv_argv = _gate("cand.csv")
    for cid, content, names in (
        (
            "csv duplicate column",
            (header.rstrip() + ",outcome\n" + row.rstrip() + ",incorrect\n").encode(),
            ("cand.csv", "outcome"),
        ),
        ("csv extra values", (header + row.rstrip() + ",x\n").encode(), ("cand.csv:2",)),
        ("csv bad int", (header + row.replace(",0,0,", ",zero,0,", 1)).encode(), ("cand.csv:2", "seed")),
        ("csv huge int", (header + row.replace(",0,0,", f",{'9' * 5000},0,", 1)).encode(), ("cand.csv:2", "seed")),
        ("csv gzip", gzip.compress((header + row).encode(), mtime=0), ("cand.csv", "gzip")),
        ("csv fifo", FIFO, ("cand.csv", "FIFO")),
        ("csv nul", (header + row).encode().replace(b"gsm", b"g\x00s"), ("cand.csv",)),
        (
            "csv invalid utf-8",
            (header + row.replace("cfg-c", "cfg-\udcff", 1)).encode("utf-8", "surrogateescape"),
            ("cand.csv:2", "UTF-8"),
        ),
    ):
        out.append(
            Case(
                f"records/{cid}",
                csv_argv,
                {"base.jsonl": BASE, "cand.csv": content},
                3,
                names,
                group="records: csv/parquet",
            )
        )
    for cid, content in (("parquet text", _cand(ok2)), ("parquet empty", b""), ("parquet truncated", b"PAR1\x00\x00")):
        out.append(
            Case(
                f"records/{cid}",
                _gate("cand.parquet"),
                {"base.jsonl": BASE, "cand.parquet": content},
                3,
                ("cand.parquet",),
                group="records: csv/parquet",
            )
        )
    out.append(
        Case(
            "records/parquet fifo",
            _gate("cand.parquet"),
            {"base.jsonl": BASE, "cand.parquet": FIFO},
            3,
            ("cand.parquet", "FIFO"),
            group="records: csv/parquet",
        )
    )
    return out


# --------------------------------------------------------------------------- plans and configs

CONFIG = "name: {name}\nengine: reference\nmodel: ./no-model\nsampling: {{temperature: 1.0, max_tokens: 8}}\n"
PLAN = {
    "name": "p",
    "suites": "[{suite: demo_arithmetic, limit: 2}]",
    "seeds": "[0]",
    "configs": "{base: base.yaml, cand: cand.yaml}",
    "baseline": "base",
    "candidates": "[cand]",
    "gate": "{policy: noninferiority, margin: 0.05, alpha: 0.05}",
}
RUN = ("run", "{d}/plan.yaml", "--out", "{d}/out", "--quiet")


def _plan(**changes) -> bytes:
    keys = {**PLAN, **changes}
    return "".join(f"{k}: {v}\n" for k, v in keys.items() if v is not None).encode()


def _configs(cand: bytes | str | None = None) -> dict:
    # (another model: a plan gating two configs that serve one configuration is refused)
    return {
        "base.yaml": CONFIG.format(name="base").replace("./no-model", "./no-base-model").encode(),
        "cand.yaml": CONFIG.format(name="cand").encode() if cand is None else cand,
    }


ALIAS_BOMB = (
    "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
    "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nh: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
    "i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]\n"
)


def _yaml_file_cases(target: str, good: bytes, prefix: str) -> list[tuple[str, object, tuple]]:
    """Whole-file defects of a YAML file, as (id, content, names)."""
    text = good.decode()
    first_key = text.split(":", 1)[0]
    return [
        (f"{prefix} alias bomb", (text + ALIAS_BOMB).encode(), (target, "alias")),
        (f"{prefix} anchor and alias", (text + "x: &x 1\ny: *x\n").encode(), (target, "anchor")),
        (f"{prefix} duplicate key", (text + text.splitlines()[0] + "\n").encode(), (target, "duplicate", first_key)),
        (f"{prefix} deep nesting flow", (text + "x: " + "[" * 5000 + "]" * 5000 + "\n").encode(), (target, "nest")),
        (
            f"{prefix} deep nesting block",
            (text + "".join("  " * i + f"k{i}:\n" for i in range(200)) + "  " * 200 + "v\n").encode(),
            (target, "nest"),
        ),
        (f"{prefix} not a mapping", b"- a\n- b\n", (target, "mapping")),
        (f"{prefix} empty", b"", (target,)),
        (f"{prefix} syntax error", (text + "x: [unclosed\n").encode(), (target,)),
        (f"{prefix} tab indentation", (text + "x:\n\t- 1\n").encode(), (target,)),
        (f"{prefix} python tag", (text + "x: !!python/object/apply:os.system [true]\n").encode(), (target, "tag")),
        (f"{prefix} binary tag", (text + "x: !!binary aGVsbG8=\n").encode(), (target, "tag")),
        (f"{prefix} set tag", (text + "x: !!set {a, b}\n").encode(), (target, "tag")),
        (f"{prefix} 50-digit int", (text + "x: " + "9" * 50 + "\n").encode(), (target, "digits")),
        (f"{prefix} utf-16", good.decode().encode("utf-16"), (target, "UTF-16")),
        (f"{prefix} gzip", gzip.compress(good, mtime=0), (target, "gzip")),
        (f"{prefix} invalid utf-8", good + b"x: \xff\xfe\n", (target, "UTF-8")),
        (f"{prefix} nul byte", good + b"x: a\x00b\n", (target, "NUL")),
        (f"{prefix} fifo", FIFO, (target, "FIFO")),
        (f"{prefix} /dev/zero", DEV_ZERO, (target, "device")),
        (f"{prefix} directory", DIRECTORY, (target, "directory")),
    ]


_PLAN_VALUES = [
    ("suites", "5"),
    ("suites", "[]"),
    ("suites", "[5]"),
    ("suites", "[{suite: 5}]"),
    ("suites", "[{suite: demo_arithmetic, limit: -1}]"),
    ("suites", "[{suite: demo_arithmetic, limit: '5'}]"),
    ("suites", "[{suite: demo_arithmetic, limit: 1.5}]"),
    ("suites", "[{suite: demo_arithmetic, data_file: 5}]"),
    ("suites", "[{suite: demo_arithmetic, revision: [1]}]"),
    ("suites", "[{suite: demo_arithmetic, bogus: 1}]"),
    ("suites", "[demo_arithmetic, demo_arithmetic]"),
    ("suites", "[{suite: demo_arithmetic, limit: .nan}]"),
    ("seeds", "100000000"),
    ("seeds", "-1"),
    ("seeds", "0"),
    ("seeds", "[1, 1]"),
    ("seeds", "[a]"),
    ("seeds", "[0.5]"),
    ("seeds", "[" + str(2**70) + "]"),
    ("seeds", "[]"),
    ("seeds", "true"),
    ("seeds", "{a: 1}"),
    ("seeds", "1.0e+400"),
    ("seeds", "[-3]"),
    ("seeds", "[" + ", ".join(map(str, range(10_001))) + "]"),
    ("samples", "0"),
    ("samples", "1000000000"),
    ("samples", "x"),
    ("samples", "true"),
    ("samples", "[1]"),
    ("samples", ".inf"),
    ("configs", "5"),
    ("configs", "{}"),
    ("configs", "[base.yaml]"),
    ("configs", "{base: base.yaml, ../../escaped: cand.yaml}"),
    ("configs", "{base: base.yaml, a/b: cand.yaml}"),
    ("configs", "{base: base.yaml, '..': cand.yaml}"),
    ("configs", "{base: base.yaml, .hidden: cand.yaml}"),
    ("configs", "{base: base.yaml, '': cand.yaml}"),
    ("configs", "{base: base.yaml, cand: 5}"),
    ("configs", "{base: base.yaml, cand: missing.yaml}"),
    ("configs", "{base: base.yaml, 'c d': cand.yaml}"),
    ("configs", "{base: base.yaml, 5: cand.yaml}"),
    ("configs", "{base: base.yaml, " + "x" * 300 + ": cand.yaml}"),
    ("baseline", "[base]"),
    ("baseline", "missing"),
    ("baseline", "5"),
    ("baseline", "{a: 1}"),
    ("candidates", "cand"),
    ("candidates", "[base]"),
    ("candidates", "[missing]"),
    ("candidates", "5"),
    ("candidates", "[cand, cand]"),
    ("candidates", "[[cand]]"),
    ("candidates", "{cand: 1}"),
    ("gate", "{policy: x}"),
    ("gate", "{margin: 0}"),
    ("gate", "{margin: 1.0e+400}"),
    ("gate", "{margin: .nan}"),
    ("gate", "{margin: '0.02'}"),
    ("gate", "{alpha: 0.9}"),
    ("gate", "{alpha: -.inf}"),
    ("gate", "{inconclusive: x}"),
    ("gate", "{weighting: x}"),
    ("gate", "{bogus: 1}"),
    ("gate", "5"),
    ("gate", "[1]"),
    ("name", "[1]"),
    ("name", "{a: 1}"),
    ("bogus_key", "1"),
]

_CONFIG_VALUES = [
    ("engine", "x"),
    ("engine", "5"),
    ("engine", "[reference]"),
    ("engine", None),
    ("model", None),
    ("model", "5"),
    ("model", "''"),
    ("model", "[a]"),
    ("speculative", "5"),
    ("speculative", "{method: x}"),
    ("speculative", "{method: draft_model, model: d, num_speculative_tokens: -1}"),
    ("speculative", "{method: draft_model, model: d, num_speculative_tokens: .nan}"),
    ("speculative", "[1]"),
    ("sampling", None),
    ("sampling", "5"),
    ("sampling", "{temperature: 1.0}"),
    ("sampling", "{max_tokens: 0}"),
    ("sampling", "{max_tokens: '8'}"),
    ("sampling", "{max_tokens: 1.5}"),
    ("sampling", "{max_tokens: true}"),
    ("sampling", "{max_tokens: 8, temperature: .nan}"),
    ("sampling", "{max_tokens: 8, temperature: .inf}"),
    ("sampling", "{max_tokens: 8, temperature: -1}"),
    ("sampling", "{max_tokens: 8, temperature: hot}"),
    ("sampling", "{max_tokens: 8, min_p: .nan}"),
    ("sampling", "{max_tokens: 8, min_p: -.inf}"),
    ("sampling", "{max_tokens: 8, top_p: 0}"),
    ("sampling", "{max_tokens: 8, top_p: 2}"),
    ("sampling", "{max_tokens: 8, top_p: .nan}"),
    ("sampling", "{max_tokens: 8, top_k: -2}"),
    ("sampling", "{max_tokens: 8, top_k: 1.5}"),
    ("sampling", "{max_tokens: 8, bogus: 1}"),
    ("sampling", "{max_tokens: 8, stop: 5}"),
    ("sampling", "{max_tokens: 8, stop_token_ids: [a]}"),
    ("sampling", "{max_tokens: 8, top_p: 1.0e+400}"),
    ("engine_options", "5"),
    ("engine_options", "{bogus: 1}"),
    ("engine_options", "[1]"),
    ("name", "[1]"),
    ("bogus_key", "1"),
]


def _config_text(**changes) -> bytes:
    base = {
        "name": "cand",
        "engine": "reference",
        "model": "./no-model",
        "sampling": "{temperature: 1.0, max_tokens: 8}",
    }
    keys = {**base, **changes}
    return "".join(f"{k}: {v}\n" for k, v in keys.items() if v is not None).encode()


def plan_cases() -> list[Case]:
    out = []
    seen: dict[str, int] = {}
    for key, value in _PLAN_VALUES:
        cid = f"plan/{key}={value[:70]}"
        seen[cid] = seen.get(cid, 0) + 1
        cid += f" #{seen[cid]}" if seen[cid] > 1 else ""
        names = ("plan.yaml", key.split("_")[0] if key == "bogus_key" else key)
        out.append(Case(cid, RUN, {"plan.yaml": _plan(**{key: value}), **_configs()}, 3, names, group="plan: field"))
    for cid, content, names in _yaml_file_cases("plan.yaml", _plan(), "plan:"):
        code = 2 if content == DIRECTORY else 3  # click refuses a directory as PLAN: a usage error
        out.append(Case(f"plan/{cid}", RUN, {"plan.yaml": content, **_configs()}, code, names, group="plan: file"))
    out.append(
        Case(
            "plan/data_file is a fifo",
            RUN,
            {
                "plan.yaml": _plan(suites="[{suite: demo_arithmetic, data_file: q.jsonl}]"),
                "q.jsonl": FIFO,
                **_configs(),
            },
            3,
            ("plan.yaml", "data_file"),
            group="plan: file",
        )
    )
    out.append(
        Case(
            "plan/suite file is a fifo",
            RUN,
            {
                "plan.yaml": _plan(suites="[{suite: s.yaml}]"),
                "s.yaml": FIFO,
                **_configs(),
            },
            3,
            ("s.yaml",),
            group="plan: file",
        )
    )
    out.append(
        Case(
            "plan/suite file alias bomb",
            RUN,
            {
                "plan.yaml": _plan(suites="[{suite: s.yaml}]"),
                "s.yaml": ALIAS_BOMB.encode(),
                **_configs(),
            },
            3,
            ("s.yaml", "alias"),
            group="plan: file",
        )
    )
    out.append(
        Case(
            "plan/candidate serving the baseline's configuration",
            RUN,
            {
                "plan.yaml": _plan(),
                "base.yaml": CONFIG.format(name="base").encode(),
                "cand.yaml": CONFIG.format(name="cand").encode(),
            },
            3,
            ("plan.yaml", "candidates", "serve one configuration"),
            group="plan: field",
        )
    )
    out.append(
        Case(
            "plan/over the size limit",
            RUN,
            {"plan.yaml": _plan(), **_configs()},
            3,
            ("plan.yaml", "limit"),
            {"yaml": 100},
            "plan: file",
        )
    )

    seen = {}
    for key, value in _CONFIG_VALUES:
        cid = f"config/{key}={str(value)[:70]}"
        out.append(
            Case(
                cid,
                RUN,
                {"plan.yaml": _plan(), **_configs(_config_text(**{key: value}))},
                3,
                ("cand.yaml", key.split("_")[0] if key == "bogus_key" else key),
                group="config: field",
            )
        )
    for cid, content, names in _yaml_file_cases("cand.yaml", _config_text(), "config:"):
        out.append(
            Case(f"config/{cid}", RUN, {"plan.yaml": _plan(), **_configs(content)}, 3, names, group="config: file")
        )
    return out


# --------------------------------------------------------------------------- CI files

SERVING = (
    b"model: Qwen/Qwen3-8B\nspeculative-config:\n  method: draft_model\n  model: Qwen/Qwen3-0.6B\n"
    b"  num_speculative_tokens: 8\n  rejection_sample_method: fly\n  fly_window_size: 2\n"
)
EVIDENCE = json.dumps({"kind": "qualgate.gate_report", "version": 1, "verdict": "PASS", "candidates": []}).encode()
_FILE_DEFECTS = [
    ("fifo", FIFO, ("FIFO",)),
    ("/dev/zero", DEV_ZERO, ("device",)),
    ("directory", DIRECTORY, ("directory",)),
    ("gzip", None, ("gzip",)),
    ("utf-16", None, ("UTF-16",)),
    ("invalid utf-8", None, ("UTF-8",)),
]


def _defect(content: bytes, label: str, special):
    if special is not None:
        return special
    if label == "gzip":
        return gzip.compress(content, mtime=0)
    if label == "utf-16":
        return content.decode().encode("utf-16")
    return content + b"\n\xff\xfe\n"


def ci_cases() -> list[Case]:
    out = []
    lint = ("lint", "{d}/serve.yaml")
    check = ("check", "--vllm-version", "0.33.0", "{d}/serve.yaml", "--evidence", "{d}/report.json")
    for label, special, names in _FILE_DEFECTS:
        usage = 2 if special == DIRECTORY else 3  # click refuses a directory argument: a usage error
        out.append(
            Case(
                f"ci/lint serving config {label}",
                lint,
                {"serve.yaml": _defect(SERVING, label, special)},
                3,  # lint reads a directory itself (a Helm chart or kustomize folder is refused by name)
                ("serve.yaml", *names),
                group="ci files",
            )
        )
        out.append(
            Case(
                f"ci/check evidence {label}",
                check,
                {"serve.yaml": SERVING, "report.json": _defect(EVIDENCE, label, special)},
                usage,
                ("report.json", *names),
                group="ci files",
            )
        )
        out.append(
            Case(
                f"ci/audit-log {label}",
                ("audit-log", "{d}/vllm.log"),
                {"vllm.log": special or b"x"},
                usage,
                ("vllm.log", *names),
                group="ci files",
            )
            if special
            else None
        )
        out.append(
            Case(
                f"ci/admission metrics {label}",
                ("admission", "--metrics", "{d}/m.prom", "--max-num-seqs", "8"),
                {"m.prom": _defect(b"vllm:num_requests_running 1\n", label, special)},
                3,
                ("m.prom", *names),
                group="ci files",
            )
        )
        out.append(
            Case(
                f"ci/reanalyze table {label}",
                ("reanalyze", "{d}/t.csv"),
                {"t.csv": _defect(b"model,platform\na,b\n", label, special)},
                3,
                ("t.csv", *names),
                group="ci files",
            )
        )
    for label, content, names in (
        ("alias bomb", SERVING + ALIAS_BOMB.encode(), ("alias",)),
        ("duplicate key", SERVING + b"model: other\n", ("duplicate", "model")),
        ("nan", SERVING.replace(b"fly_window_size: 2", b"fly_window_size: .nan"), ("finite",)),
        ("deep nesting", SERVING + b"x: " + b"[" * 5000 + b"]" * 5000 + b"\n", ("nest",)),
    ):
        out.append(
            Case(
                f"ci/lint serving config {label}",
                lint,
                {"serve.yaml": content},
                3,
                ("serve.yaml", *names),
                group="ci files",
            )
        )
    serve = ("lint", "{d}/serve.sh")
    for label, content, names in (
        ("fifo", FIFO, ("cfg.yaml", "FIFO")),
        ("/dev/zero", DEV_ZERO, ("cfg.yaml", "device")),
        ("alias bomb", SERVING + ALIAS_BOMB.encode(), ("cfg.yaml", "alias")),
        ("duplicate key", SERVING + b"model: other\n", ("cfg.yaml", "duplicate")),
    ):
        out.append(
            Case(
                f"ci/lint vllm serve --config {label}",
                serve,
                {"serve.sh": b"vllm serve Qwen/Qwen3-8B --config cfg.yaml\n", "cfg.yaml": content},
                3,
                ("serve.sh", "--config", *names),
                group="ci files",
            )
        )
    for label, content, names in (
        ("duplicate verdict", EVIDENCE[:-1] + b', "verdict": "FAIL"}', ("duplicate", "verdict")),
        ("nan", EVIDENCE[:-1] + b', "margin": NaN}', ("NaN",)),
        ("deep nesting", b"[" * 100_000 + b"]" * 100_000, ("nest",)),
        ("bom", b"\xef\xbb\xbf" + EVIDENCE, ("byte-order mark",)),
        ("truncated", EVIDENCE[:20], ("JSON",)),
        ("not an object", b"[1, 2]", ("object",)),
    ):
        out.append(
            Case(
                f"ci/check evidence {label}",
                check,
                {"serve.yaml": SERVING, "report.json": content},
                3,
                ("report.json", *names),
                group="ci files",
            )
        )
    return [c for c in out if c is not None]


# --------------------------------------------------------------------------- CLI numbers

_POWER = ("power", "--discordant", "0.06")
_NUMBER_CASES = [
    (("power", "--loss", "1e-300", "--discordant", "0.06"), "--loss"),
    (("power", "--loss", "nan", "--discordant", "0.06"), "--loss"),
    (("power", "--loss", "inf", "--discordant", "0.06"), "--loss"),
    (("power", "--loss", "-0.1", "--discordant", "0.06"), "--loss"),
    (("power", "--loss", "2", "--discordant", "0.06"), "--loss"),
    (("power", "--loss", "x", "--discordant", "0.06"), "--loss"),
    (("power", "--loss", "0.02,,0.03", "--discordant", "0.06"), "--loss"),
    (("power", "--loss", "1e999", "--discordant", "0.06"), "--loss"),
    (("power", "--loss", "0.02", "--discordant", "1e-300"), "--discordant"),
    (("power", "--loss", "0.02", "--discordant", "nan"), "--discordant"),
    (("power", "--loss", "0.02", "--discordant", "0"), "--discordant"),
    (("power", "--loss", "0.02", "--discordant", "-inf"), "--discordant"),
    (_POWER + ("--n", "0"), "--n"),
    (_POWER + ("--n", "-1"), "--n"),
    (_POWER + ("--n", "1e30"), "--n"),
    (_POWER + ("--n", "1" + "0" * 30), "--n"),
    (_POWER + ("--n", "9" * 5000), "--n"),
    (_POWER + ("--n", "2.5"), "--n"),
    (_POWER + ("--n", "x"), "--n"),
    (_POWER + ("--n", "1000000000000", "--method", "exact"), "--n"),
    (_POWER + ("--n", "1000000000000", "--method", "exact", "--loss", "0.02"), "--n"),
    (_POWER + ("--n", "100000000", "--method", "exact"), "--n"),
    (_POWER + ("--loss", "0.02", "--alpha", "0"), "--alpha"),
    (_POWER + ("--loss", "0.02", "--alpha", "1"), "--alpha"),
    (_POWER + ("--loss", "0.02", "--alpha", "nan"), "--alpha"),
    (_POWER + ("--loss", "0.02", "--power", "0.4"), "--power"),
    (_POWER + ("--loss", "0.02", "--power", "1"), "--power"),
    (_POWER + ("--loss", "0.02", "--power", "nan"), "--power"),
    (_POWER + ("--noninferiority", "0"), "--noninferiority"),
    (_POWER + ("--noninferiority", "nan"), "--noninferiority"),
    (_POWER + ("--noninferiority", "1"), "--noninferiority"),
    (_POWER + ("--noninferiority", "0.02", "--loss", "1e-300"), "--loss"),
    (_POWER + ("--margin", "nan"), "--margin"),
    (_POWER + ("--margin", "0"), "--margin"),
    (_POWER + ("--margin", "inf"), "--margin"),
    (_POWER + ("--margin", "0.02", "--loss", "1e-300"), "--loss"),
    (_POWER + ("--margin", "0.02", "--n", "1" + "0" * 30), "--n"),
    (_POWER + ("--margin", "0.02", "--n", "1e12"), "--n"),
    (_POWER + ("--margin", "0.02", "--power", "nan"), "--power"),
]
_GATE_OPTIONS = [
    ("--margin", "0"),
    ("--margin", "1"),
    ("--margin", "nan"),
    ("--margin", "inf"),
    ("--margin", "-0.1"),
    ("--margin", "x"),
    ("--alpha", "0.5"),
    ("--alpha", "nan"),
    ("--max-errors", "-1"),
    ("--max-errors", "x"),
    ("--order-seed", "-1"),
    ("--max-questions", "0"),
    ("--power", "1"),
    ("--power", "nan"),
]
_RUN_OPTIONS = [
    ("--batch-questions", "0"),
    ("--max-questions", "0"),
    ("--power", "1.0"),
    ("--power", "nan"),
    ("--order-seed", "-1"),
    ("--max-errors", "-1"),
    ("--max-errors", "1e3"),
]


def number_cases() -> list[Case]:
    out = []
    for argv, option in _NUMBER_CASES:
        if "--noninferiority" not in argv and "--margin" not in argv:  # McNemar's design, named
            argv = argv[:1] + ("--design", "mcnemar") + argv[1:]
        out.append(Case(f"cli/{' '.join(argv[1:])}"[:90], argv, {}, 2, (option,), group="cli numbers"))
    for option, value in _GATE_OPTIONS:
        argv = ("gate", "{d}/base.jsonl", "{d}/cand.jsonl", "--margin", "0.05", option, value)
        if option == "--margin":
            argv = ("gate", "{d}/base.jsonl", "{d}/cand.jsonl", option, value)
        out.append(
            Case(
                f"cli/gate {option} {value}",
                argv,
                {"base.jsonl": BASE, "cand.jsonl": BASE},
                2,
                (option,),
                group="cli numbers",
            )
        )
    for option, value in _RUN_OPTIONS:
        out.append(
            Case(
                f"cli/run {option} {value}",
                RUN + (option, value),
                {"plan.yaml": _plan(), **_configs()},
                2,
                (option,),
                group="cli numbers",
            )
        )
    return out


def cases() -> list[Case]:
    all_cases = record_cases() + plan_cases() + ci_cases() + number_cases()
    ids = [c.id for c in all_cases]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    return all_cases


def verdict(case: Case, outcome: dict | None) -> str:
    """``ok``, or what went wrong: ``hang``, ``killed``, ``traceback``, ``exit N`` (the wrong
    exit code) or ``unnamed`` (the message misses one of ``case.names``)."""
    if outcome is None:
        return "killed"
    if outcome.get("hang"):
        return "hang"
    if outcome.get("traceback"):
        return "traceback"
    if outcome.get("exit_code") != case.code:
        return f"exit {outcome.get('exit_code')}"
    text = outcome.get("output", "").lower()
    if not all(n.lower() in text for n in case.names):
        return "unnamed"
    return "ok"
