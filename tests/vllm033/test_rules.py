"""The conformance table: every row cites vLLM 0.33.0's source, and every module a row names
really applies it (it looks the row up by id). With ``VLLM033_SRC`` set to an unzipped
``vllm-0.33.0`` wheel, each citation is checked against the source text.
"""

import importlib.util
import os
import re
from pathlib import Path

import pytest

from qualgate.vllm033.rules import TABLE, VLLM_VERSION

ROOT = Path(__file__).resolve().parents[2]
CITATION = re.compile(r"^vllm/[\w/]+\.py:(\d+)(?:-(\d+))?$")


def _source_of(module: str) -> str:
    if module.startswith("tests."):
        return (ROOT / (module.replace(".", "/") + ".py")).read_text()
    return Path(importlib.util.find_spec(module).origin).read_text()


@pytest.mark.parametrize("row", TABLE, ids=lambda r: r.id)
def test_every_row_cites_files_and_lines_of_the_wheel(row):
    for part in row.where.split("; "):
        m = CITATION.match(part)
        assert m, f"{row.id}: {part!r} is not vllm/FILE.py:LINE[-LINE]"
        first, last = int(m.group(1)), int(m.group(2) or m.group(1))
        assert 0 < first <= last
    assert row.rule and row.users


@pytest.mark.parametrize("row", TABLE, ids=lambda r: r.id)
def test_every_module_a_row_names_applies_it(row):
    for module in row.users:
        assert row.id in _source_of(module), f"{module} does not refer to rule {row.id!r}"


def test_rule_ids_are_unique():
    assert len({r.id for r in TABLE}) == len(TABLE) and VLLM_VERSION == "0.33.0"


SRC = os.environ.get("VLLM033_SRC")


@pytest.mark.skipif(not SRC, reason="set VLLM033_SRC to an unzipped vllm-0.33.0 wheel")
@pytest.mark.parametrize("row", TABLE, ids=lambda r: r.id)
def test_every_citation_is_inside_the_cited_file(row):
    for part in row.where.split("; "):
        path, lines = part.split(":")
        text = (Path(SRC) / path).read_text().splitlines()
        last = int(lines.split("-")[-1])
        assert last <= len(text), f"{row.id}: {path} has {len(text)} lines"
    for key in ("format", "message"):
        if key in row.data:  # a quoted message is in the cited source (modulo line breaks)
            blob = " ".join((Path(SRC) / p.split(":")[0]).read_text() for p in row.where.split("; "))
            words = re.sub(r'"\s*\n\s*"', "", blob)
            assert row.data[key].split(" (")[0][:40] in words


@pytest.mark.parametrize(
    "kind, value",
    [
        ("int", 8),
        ("int", 8.0),
        ("int", 8.5),
        ("int", "8"),
        ("int", " 8 "),
        ("int", "8.0"),
        ("int", True),
        ("int", "0x8"),
        ("int", None),
        ("int", float("inf")),
        ("int", "1_000"),
        ("float", 1),
        ("float", "0.3"),
        ("float", True),
        ("float", "abc"),
        ("float", " 0.5"),
        ("bool", 0),
        ("bool", 1),
        ("bool", 2),
        ("bool", "true"),
        ("bool", "off"),
        ("bool", "T"),
        ("bool", 1.0),
        ("bool", "2"),
        ("str", 1),
        ("str", "a"),
        ("str", True),
    ],
)
def test_lax_types_agree_with_pydantic_or_refuse(kind, value):
    # rule spec-lax-types: vLLM 0.33 needs pydantic>=2.12 (its wheel's METADATA); where
    # qualgate accepts a value it must read it as pydantic does, and it may refuse more
    pydantic = pytest.importorskip("pydantic")
    from qualgate.vllm033.speculative import _lax

    try:
        expected = pydantic.TypeAdapter({"int": int, "float": float, "bool": bool, "str": str}[kind]).validate_python(
            value
        )
    except pydantic.ValidationError:
        expected = ValueError
    try:
        got = _lax("x", kind, value)
    except ValueError:
        got = ValueError
    assert got is ValueError or (got == expected and type(got) is type(expected))
    assert expected is not ValueError or got is ValueError  # never accept what vLLM refuses
