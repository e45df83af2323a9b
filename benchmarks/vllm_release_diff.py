"""What changed between two vLLM releases in everything qualgate relies on.

Supporting a new vLLM release is a reviewed diff and a table edit: this script downloads both
wheels (``pip download --no-deps vllm==X.Y.Z``, the pip of the running Python), unpacks their
Python sources and prints, old release first:

1. ``SpeculativeConfig``: fields added, removed or retyped, the ``Literal`` types of its
   methods and verifiers, its methods (validators) added, removed or changed, and the
   messages of its ``raise`` statements and deprecation warnings;
2. ``SamplingParams``: fields, and the messages of ``sampling_params.py``'s refusals;
3. the ``vllm serve`` arguments (every destination ``EngineArgs``, ``BaseFrontendArgs``,
   ``FrontendArgs`` and ``make_arg_parser`` register), added and removed;
4. the environment variables vLLM reads (``envs.environment_variables``) and every line
   that names ``VLLM_USE_V2_MODEL_RUNNER``, the runner-selecting variable;
5. the runner and sampler files the noise modes cite (docs/engine.md): present or gone, and
   their top-level functions, classes and constants added and removed;
6. every citation of :data:`qualgate.vllm033.rules.TABLE` for the old release: where its
   text is in the new release (``same`` at the new lines, ``changed``, or ``gone``), and, for
   a row that already cites the new release, whether the cited text is the same in both.

Usage (the output committed in benchmarks/results/vllm_release_diff-0.33-0.34.txt)::

    python benchmarks/vllm_release_diff.py 0.33.0 0.34.0 --out benchmarks/results/vllm_release_diff-0.33-0.34.txt

A release may also be a directory holding an unpacked or installed ``vllm/`` package
(``--old-src DIR`` / ``--new-src DIR``, e.g. the CPU build 0.32 in site-packages).
``--cache DIR`` keeps the wheels and their sources (default: a temporary directory).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import io
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qualgate.vllm033.rules import TABLE, minor_of  # noqa: E402

#: the runner and sampler files the noise modes and their docs cite (docs/engine.md)
NOISE_FILES = (
    "v1/worker/gpu_worker.py",
    "v1/worker/gpu_model_runner.py",
    "v1/worker/gpu_input_batch.py",
    "v1/sample/sampler.py",
    "v1/sample/rejection_sampler.py",
    "v1/sample/ops/topk_topp_sampler.py",
    "v1/spec_decode/fly.py",
    "v1/spec_decode/llm_base_proposer.py",
    "v1/worker/gpu/model_runner.py",
    "v1/worker/gpu/sample/sampler.py",
    "v1/worker/gpu/sample/gumbel.py",
    "v1/worker/gpu/spec_decode/rejection_sampler_utils.py",
)
RUNNER_VARIABLE = "VLLM_USE_V2_MODEL_RUNNER"
FRONTEND_FILES = ("entrypoints/common/cli_args.py", "entrypoints/launchers/cli_args.py")


# --------------------------------------------------------------------------- getting sources


def unpack(version: str, cache: Path) -> Path:
    """The unpacked ``vllm/`` Python sources of the ``vllm==version`` wheel (downloaded once)."""
    root = cache / f"vllm-{version}"
    if (root / "vllm" / "__init__.py").exists():
        return root / "vllm"
    wheels = cache / "wheels"
    found = sorted(wheels.glob(f"vllm-{version}-*.whl"))
    if not found:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", f"vllm=={version}", "-d", str(wheels), "-q"],
            check=True,
        )
        found = sorted(wheels.glob(f"vllm-{version}-*.whl"))
    with zipfile.ZipFile(found[0]) as z:
        for name in z.namelist():
            if name.startswith("vllm/") and name.endswith(".py"):
                z.extract(name, root)
    return root / "vllm"


def version_of(src: Path) -> str:
    m = re.search(r"__version__ = version = '([^']+)'", (src / "_version.py").read_text())
    return m.group(1) if m else "?"


def read(src: Path, rel: str) -> str | None:
    p = src / rel
    return p.read_text() if p.exists() else None


# --------------------------------------------------------------------------- extraction


def _class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)


def fields(text: str, cls: str) -> dict[str, str]:
    """``{field: "annotation = default"}`` of a class body's annotated assignments."""
    node = _class(ast.parse(text), cls)
    out = {}
    for st in node.body if node else ():
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
            default = f" = {ast.unparse(st.value)}" if st.value is not None else ""
            out[st.target.id] = f"{ast.unparse(st.annotation)}{default}"
    return out


def literals(text: str) -> dict[str, list[str]]:
    """Module-level ``Name = Literal[...]`` (and unions of them), as their members or source."""
    out = {}
    for st in ast.parse(text).body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            src = ast.unparse(st.value)
            if src.startswith("Literal["):
                out[st.targets[0].id] = [
                    e.value for e in ast.walk(st.value) if isinstance(e, ast.Constant) and isinstance(e.value, str)
                ]
            elif st.targets[0].id.endswith(("Method", "Types")) and "|" in src:
                out[st.targets[0].id] = [p.strip() for p in src.split("|")]
    return out


def methods(text: str, cls: str) -> dict[str, str]:
    """``{name: source}`` of a class's functions (decorators included)."""
    node = _class(ast.parse(text), cls)
    out = {}
    for st in node.body if node else ():
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[st.name] = ast.unparse(st)
    return out


def _message(node: ast.AST) -> str | None:
    parts = []
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            parts.append(n.value)
        elif isinstance(n, ast.FormattedValue):
            parts.append("{...}")
    text = re.sub(r"\s+", " ", "".join(parts)).strip()
    return text or None


def raises(text: str) -> set[str]:
    """The messages of every ``raise X(...)`` (f-string fields shown as ``{...}``)."""
    out = set()
    for n in ast.walk(ast.parse(text)):
        if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call) and n.exc.args:
            m = _message(n.exc.args[0])
            if m:
                out.add(m)
    return out


def deprecations(text: str) -> set[str]:
    """Messages of warning calls that say 'deprecat'."""
    out = set()
    for n in ast.walk(ast.parse(text)):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and "warn" in n.func.attr and n.args:
            m = _message(n.args[0])
            if m and "deprecat" in m.lower():
                out.add(m)
    return out


def _add_argument_calls(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            options = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            dest = next((k.value.value for k in node.keywords if k.arg == "dest"), None)
            if options:
                longs = [o for o in options if o.startswith("--")] or options
                yield dest or longs[0].lstrip("-").replace("-", "_"), options


def serve_arguments(src: Path) -> dict[str, set[str]]:
    """Every destination ``vllm serve`` registers, with its option strings (the extraction of
    tests/vllm033/test_arguments.py)."""
    out: dict[str, set[str]] = {}
    for dest, options in _add_argument_calls(ast.parse(read(src, "engine/arg_utils.py"))):
        out.setdefault(dest, set()).update(options)
    # the server's options: entrypoints/common/cli_args.py (0.33, 0.34), launchers/cli_args.py (0.32)
    frontend = next(f for f in FRONTEND_FILES if (src / f).exists())
    tree = ast.parse(read(src, frontend))
    for cls in ("BaseFrontendArgs", "FrontendArgs"):
        for name in fields(ast.unparse(tree), cls):
            out.setdefault(name, set()).add("--" + name.replace("_", "-"))
    make = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "make_arg_parser")
    for dest, options in _add_argument_calls(make):
        out.setdefault(dest, set()).update(options)
    return out


def environment_variables(src: Path) -> set[str]:
    tree = ast.parse(read(src, "envs.py"))
    for st in tree.body:
        target = getattr(st, "target", None) or (st.targets[0] if isinstance(st, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == "environment_variables" and isinstance(st.value, ast.Dict):
            return {k.value for k in st.value.keys if isinstance(k, ast.Constant)}
    return set()


def mentions(src: Path, word: str) -> list[str]:
    out = []
    for p in sorted(src.rglob("*.py")):
        for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            if word in line:
                out.append(f"vllm/{p.relative_to(src)}:{i}: {line.strip()}")
    return out


def top_level_names(text: str) -> set[str]:
    out = set()
    for st in ast.parse(text).body:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(st.name)
        elif isinstance(st, ast.Assign):
            out.update(t.id for t in st.targets if isinstance(t, ast.Name))
        elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
            out.add(st.target.id)
    return out


# --------------------------------------------------------------------------- citations


def map_lines(old: list[str], new: list[str], first: int, last: int) -> tuple[str, int, int] | None:
    """Where lines ``first..last`` (1-based) of ``old`` are in ``new``: ``("same", a, b)`` when
    they are an unchanged, contiguous block there, ``("changed", a, b)`` when they are partly
    kept (the span of what is kept), ``None`` when none is."""
    sm = difflib.SequenceMatcher(None, old, new, autojunk=False)
    hit = {}
    for a, b, size in sm.get_matching_blocks():
        for i in range(size):
            if first - 1 <= a + i <= last - 1:
                hit[a + i] = b + i
    if not hit:
        return None
    lo, hi = min(hit.values()) + 1, max(hit.values()) + 1
    whole = len(hit) == last - first + 1 and hi - lo == last - first
    return ("same" if whole else "changed", lo, hi)


def cited_text(src: Path, part: str) -> list[str] | None:
    path, lines = part.split(":")
    text = read(src, path.removeprefix("vllm/"))
    if text is None:
        return None
    first, _, last = lines.partition("-")
    return text.splitlines()[int(first) - 1 : int(last or first)]


# --------------------------------------------------------------------------- printing


class Out:
    def __init__(self):
        self.buf = io.StringIO()

    def __call__(self, line: str = "") -> None:
        self.buf.write(line + "\n")

    def section(self, title: str) -> None:
        self("")
        self(f"## {title}")
        self("")

    def sets(self, what: str, old: set, new: set) -> None:
        gone, added = sorted(old - new), sorted(new - old)
        self(f"{what}: {len(old)} -> {len(new)}; removed {len(gone)}, added {len(added)}")
        for x in gone:
            self(f"  - {x}")
        for x in added:
            self(f"  + {x}")


def diff(old: Path, new: Path, out: Out) -> None:
    vo, vn = version_of(old), version_of(new)
    out(f"# vLLM {vo} -> {vn}: what qualgate relies on")
    spec_o, spec_n = read(old, "config/speculative.py"), read(new, "config/speculative.py")

    out.section("1. SpeculativeConfig (vllm/config/speculative.py)")
    fo, fn = fields(spec_o, "SpeculativeConfig"), fields(spec_n, "SpeculativeConfig")
    out.sets("fields", set(fo), set(fn))
    for k in sorted(set(fo) & set(fn)):
        if fo[k] != fn[k]:
            out(f"  ~ {k}: {fo[k]}  ->  {fn[k]}")
    lo, ln = literals(spec_o), literals(spec_n)
    for name in sorted(set(lo) | set(ln)):
        if lo.get(name) != ln.get(name):
            out.sets(f"Literal {name}", set(lo.get(name, ())), set(ln.get(name, ())))
    mo, mn = methods(spec_o, "SpeculativeConfig"), methods(spec_n, "SpeculativeConfig")
    out.sets("methods (validators included)", set(mo), set(mn))
    changed = sorted(k for k in set(mo) & set(mn) if mo[k] != mn[k])
    out(f"methods changed: {len(changed)}")
    for k in changed:
        d = list(difflib.unified_diff(mo[k].splitlines(), mn[k].splitlines(), lineterm="", n=0))
        plus = sum(1 for x in d if x.startswith("+") and not x.startswith("+++"))
        minus = sum(1 for x in d if x.startswith("-") and not x.startswith("---"))
        out(f"  ~ {k}: -{minus} +{plus} lines")
    out.sets("refusals (raise messages)", raises(spec_o), raises(spec_n))
    out.sets("deprecation warnings", deprecations(spec_o), deprecations(spec_n))

    out.section("2. SamplingParams (vllm/sampling_params.py)")
    so, sn = read(old, "sampling_params.py"), read(new, "sampling_params.py")
    po, pn = fields(so, "SamplingParams"), fields(sn, "SamplingParams")
    out.sets("fields", set(po), set(pn))
    for k in sorted(set(po) & set(pn)):
        if po[k] != pn[k]:
            out(f"  ~ {k}: {po[k]}  ->  {pn[k]}")
    out.sets("refusals (raise messages)", raises(so), raises(sn))

    out.section("3. `vllm serve` arguments (engine/arg_utils.py, entrypoints/common/cli_args.py)")
    ao, an = serve_arguments(old), serve_arguments(new)
    out.sets("destinations", set(ao), set(an))
    for k in sorted(set(ao) & set(an)):
        if ao[k] != an[k]:
            out(f"  ~ {k}: {sorted(ao[k])} -> {sorted(an[k])}")

    out.section("4. Environment variables (vllm/envs.py) and the runner-selecting variable")
    out.sets("environment_variables", environment_variables(old), environment_variables(new))
    for label, src in ((vo, old), (vn, new)):
        lines = mentions(src, RUNNER_VARIABLE)
        out(f"{RUNNER_VARIABLE} in {label}: {len(lines)} lines")
        for line in lines:
            out(f"  {line}")

    out.section("5. Runner and sampler files the noise modes cite (docs/engine.md)")
    for rel in NOISE_FILES:
        to, tn = read(old, rel), read(new, rel)
        state = lambda t: f"{len(t.splitlines())} lines" if t is not None else "absent"  # noqa: B023
        out(f"vllm/{rel}: {vo} {state(to)}, {vn} {state(tn)}")
        if to is not None and tn is not None:
            no, nn = top_level_names(to), top_level_names(tn)
            for x in sorted(no - nn):
                out(f"  - {x}")
            for x in sorted(nn - no):
                out(f"  + {x}")
    for word in ("gumbel_noised_argmax", "_DRAFT_NOISE_SALT", "tl_rand32", "fly_window_size"):
        for label, src in ((vo, old), (vn, new)):
            hits = [h for h in mentions(src / "v1", word)]
            out(
                f"{word!r} in {label} vllm/v1: {len(hits)} lines"
                + (f", first {hits[0].split(': ')[0]}" if hits else "")
            )

    out.section(f"6. qualgate's rule citations ({vo} -> {vn})")
    mo_, mn_ = minor_of(vo), minor_of(vn)
    counts = {"same": 0, "changed": 0, "gone": 0}
    for row in TABLE:
        if mo_ not in row.cites:
            continue
        for part in row.cites[mo_].split("; "):
            path, lines = part.split(":")
            first, _, last = lines.partition("-")
            to, tn = read(old, path.removeprefix("vllm/")), read(new, path.removeprefix("vllm/"))
            if to is None:
                out(f"{row.id}: {part}: not in {vo} (check the table)")
                continue
            m = None if tn is None else map_lines(to.splitlines(), tn.splitlines(), int(first), int(last or first))
            state = "gone" if m is None else m[0]
            counts[state] += 1
            where = "" if m is None else f" -> {path}:{m[1]}" + (f"-{m[2]}" if m[2] != m[1] else "")
            out(f"{row.id}: {part}: {state}{where}")
        if mn_ in row.cites:
            same = [cited_text(old, p) for p in row.cites[mo_].split("; ")] == [
                cited_text(new, p) for p in row.cites[mn_].split("; ")
            ]
            out(f"  the table cites {vn} {row.cites[mn_]}: {'same text' if same else 'text differs (reviewed row)'}")
        else:
            out(f"  the table does not apply this row to {vn}")
    out(f"citations: {counts['same']} same, {counts['changed']} changed, {counts['gone']} gone")
    only_new = [r.id for r in TABLE if mn_ in r.cites and mo_ not in r.cites]
    out(f"rows declared apart for {vn} (its behaviour or data differ from {vo}'s row): {', '.join(only_new) or 'none'}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", nargs="?", help="old release (e.g. 0.33.0), downloaded with pip")
    ap.add_argument("new", nargs="?", help="new release (e.g. 0.34.0)")
    ap.add_argument("--old-src", type=Path, help="a directory holding the old release's vllm/ package")
    ap.add_argument("--new-src", type=Path, help="a directory holding the new release's vllm/ package")
    ap.add_argument("--cache", type=Path, help="where wheels and sources are kept (default: a temporary directory)")
    ap.add_argument("--out", type=Path, help="also write the report here")
    args = ap.parse_args(argv)
    if not (args.old or args.old_src) or not (args.new or args.new_src):
        ap.error("name two releases (OLD NEW) or --old-src/--new-src directories")
    with tempfile.TemporaryDirectory() as tmp:
        cache = args.cache or Path(tmp)
        cache.mkdir(parents=True, exist_ok=True)
        old = args.old_src / "vllm" if args.old_src else unpack(args.old, cache)
        new = args.new_src / "vllm" if args.new_src else unpack(args.new, cache)
        out = Out()
        diff(old, new, out)
    text = out.buf.getvalue()
    sys.stdout.write(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
