"""The package's shape: stages as packages, a layered import graph (no cycles), and no private
name of one package imported by another. The graph is read from the source with :mod:`ast`
(every ``import`` and ``from ... import``, at any depth, except those under
``if TYPE_CHECKING:``, which never run)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from support import REPO

PACKAGE = REPO / "qualgate"
STAGES = ("config", "run", "records", "verdict", "evidence", "report", "vllm033")


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST):
    """Every import node that can run."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _private(dotted: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in dotted.split("."))


@functools.cache
def _graph():
    """``{module: {imported module, ...}}`` and the ``(importer, module, name)`` of every import
    of a private module or name of another top-level package."""
    modules = _modules()

    def owner(dotted):  # the longest prefix that is a module of ours
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            if ".".join(parts[:i]) in modules:
                return ".".join(parts[:i])
        return None

    edges, private = {}, []
    for name, (path, is_package) in modules.items():
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                pairs = [(owner(a.name), a.name.rsplit(".", 1)[-1]) for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    pkg = name.split(".") if is_package else name.split(".")[:-1]
                    pkg = pkg[: len(pkg) - node.level + 1]
                    base = ".".join(pkg + ([base] if base else []))
                pairs = [
                    (f"{base}.{a.name}" if f"{base}.{a.name}" in modules else owner(base), a.name) for a in node.names
                ]
            for target, imported in pairs:
                if target is None or not target.startswith("qualgate"):
                    continue
                if not name.startswith(target + "."):  # a module's own packages are imported before it anyway
                    edges.setdefault(name, set()).add(target)
                if target.split(".")[:2] != name.split(".")[:2] and (
                    _private(target.removeprefix("qualgate.")) or _private(imported)
                ):
                    private.append((name, target, imported))
    return modules, edges, private


def _cycles(modules, edges) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in modules:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


@pytest.mark.slow  # parses every module once (about a second), shared with the next test
def test_the_import_graph_has_no_cycles():
    modules, edges, _ = _graph()
    edges = {k: set(v) for k, v in edges.items()}
    # the package top is a facade whose functions import their stage when called: every
    # module imports the package top (``__version__``), so its own lazy imports are left out
    edges.pop("qualgate", None)
    assert _cycles(modules, edges) == []


@pytest.mark.slow
def test_no_package_imports_another_package_s_private_names():
    _, _, private = _graph()
    assert sorted(set(private)) == []


def test_the_cycle_finder_finds_a_cycle_and_the_private_check_a_private_import():
    modules = {"a": None, "b": None, "c": None}
    assert _cycles(modules, {"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c"]]
    assert _cycles(modules, {"a": {"b"}, "b": {"c"}}) == []
    assert _private("stats._checks") and _private("_gc_paused") and not _private("verdict.fixed")


def test_the_package_top_holds_the_stages_as_packages_and_at_most_five_modules():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 5, top
    for stage in STAGES:
        assert (PACKAGE / stage / "__init__.py").is_file(), stage


def test_earlier_manifests_request_seed_stays_importable():
    from qualgate.harness import request_seed
    from qualgate.run.runner import request_seed as current

    assert request_seed is current
