"""Real deployment files from public repositories, read by ``qualgate check`` as published and
with FLy added where a user would add it (issue 46): a FLy variant that is allowed is a
fail-open (must be 0).

The files are not in this repository (code from elsewhere is not copied): the manifest
``benchmarks/deployment_corpus.tsv`` names each one (repository, commit, path) and the FLy edit
as a small declarative transformation. Obtain the files from stored snapshots of the
repositories (git directories, one per repository, named ``OWNER+NAME/repo`` as the snapshot
store lays them out), then run:

    python benchmarks/deployment_corpus.py materialise --mirror /work/.mirror --files /tmp/corpus
    python benchmarks/deployment_corpus.py run --files /tmp/corpus

``materialise`` runs ``git --git-dir MIRROR/OWNER+NAME/repo show COMMIT:PATH`` for each row and
writes ``FILES/ID/BASENAME``. ``run`` reads those files, writes two variants of each into a
temporary folder and runs ``qualgate check --vllm-version 0.33.0 FILE`` (no evidence) and
``qualgate lint FILE`` on both, in-process through the real CLI:

- **as is**: the file as published, except that a release pinned in it (an image tag
  ``vllm/vllm-openai:vX.Y.Z``, a requirement ``vllm==X.Y.Z``) is moved to 0.33.0, the release
  that has FLy (``--vllm-version 0.33.0`` and an older pin would otherwise disagree, exit 3);
- **with FLy**: the same, with the manifest's edit applied, which adds
  ``--speculative-config '{FLY}'`` (or turns an existing speculative config into FLy).

Decisions: ``allowed`` (exit 0), ``refused`` (exit 1, with the first reason), ``unresolvable``
(exit 3, qualgate refuses to read the file whole, with the message), ``CRASH`` (a traceback).
A FLy variant that is allowed is a fail-open. Edits (the manifest's ``fly_edit`` column, JSON;
``{FLY}`` is the FLy JSON below, ``{FLY_DQ}`` and ``{FLY_DOTTED}`` its other spellings,
``{indent}`` the indentation of the line named):

- ``{"op": "append", "line": N}``: `` --speculative-config '{FLY}'`` at the end of line N (before
  a trailing ``\\``, or before ``"before"``'s last occurrence in the line when given);
  ``"form": "dq"`` writes the JSON's quotes as ``\\"`` (inside a double-quoted YAML scalar),
  ``"form": "dotted"`` writes ``--speculative-config.KEY VALUE`` options (no quotes at all);
- ``{"op": "item-after", "line": N}``: two YAML list items after line N, written with line N's
  dash and indentation (``- --speculative-config`` and ``- '{FLY}'``);
- ``{"op": "insert-after", "line": N, "text": T}``: the line T after line N;
- ``{"op": "replace", "old": A, "new": B}``: the one occurrence of A becomes B.

Every edit may give ``"expect"``: a text line N must contain (the manifest is checked against the
file, so an edit never lands somewhere else).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "deployment_corpus.tsv"
RELEASE = "0.33.0"
FLY = json.dumps(
    {
        "method": "draft_model",
        "model": "Qwen/Qwen3-0.6B",
        "num_speculative_tokens": 8,
        "rejection_sample_method": "fly",
        "fly_window_size": 2,
        "fly_entropy_threshold": 0.3,
        "fly_entropy_top_k": 3,
    }
)
#: the same FLy config spelt for other quoting contexts: inside a double-quoted YAML scalar (its
#: ``\"`` become ``"``), and as dotted options, which need no quoting (a ``bash -c "..."`` string)
FLY_DQ = FLY.replace('"', '\\"')
FLY_DOTTED = " ".join(f"--speculative-config.{k} {v}" for k, v in json.loads(FLY).items())
APPEND = {
    "json": f"--speculative-config '{FLY}'",
    "dq": f"--speculative-config '{FLY_DQ}'",
    "dotted": FLY_DOTTED,
}
FIELDS = ("id", "repo", "commit", "path", "format", "fly_edit", "note")
_PINS = (
    (re.compile(r"(vllm/vllm-openai(?:-cpu)?):v?\d+\.\d+[\w.+-]*"), rf"\1:v{RELEASE}"),
    (re.compile(r"\bvllm==\d+\.\d+[\w.+-]*"), f"vllm=={RELEASE}"),
)


def rows(manifest: Path = MANIFEST) -> list[dict]:
    with manifest.open(newline="") as f:
        out = list(csv.DictReader((ln for ln in f if not ln.startswith("#")), delimiter="\t", quoting=csv.QUOTE_NONE))
    for r in out:
        missing = [k for k in FIELDS if r.get(k) is None]
        if missing:
            raise SystemExit(f"{manifest}: row {r.get('id')}: missing {missing}")
    ids = Counter(r["id"] for r in out)
    if any(n > 1 for n in ids.values()):
        raise SystemExit(f"{manifest}: duplicate ids {[i for i, n in ids.items() if n > 1]}")
    return out


def materialise(mirror: Path, files: Path, manifest: Path) -> None:
    for r in rows(manifest):
        git = mirror / r["repo"].replace("/", "+") / "repo"
        got = subprocess.run(
            ["git", "--git-dir", str(git), "show", f"{r['commit']}:{r['path']}"], capture_output=True, check=False
        )
        if got.returncode:
            raise SystemExit(f"{r['id']}: {r['repo']}@{r['commit']}:{r['path']}: {got.stderr.decode().strip()}")
        out = files / r["id"] / Path(r["path"]).name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(got.stdout)
    print(f"{len(rows(manifest))} files written under {files}")


def pin_release(text: str) -> tuple[str, int]:
    n = 0
    for rx, sub in _PINS:
        text, k = rx.subn(sub, text)
        n += k
    return text, n


def fill(template: str) -> str:
    return template.replace("{FLY_DQ}", FLY_DQ).replace("{FLY_DOTTED}", FLY_DOTTED).replace("{FLY}", FLY)


def apply_edit(text: str, edit: dict, where: str) -> str:
    """``text`` with the FLy edit applied (see the module docstring)."""
    lines = text.split("\n")
    op = edit["op"]
    fly_sq = f"'{FLY}'"
    if op == "replace":
        old, new = edit["old"], fill(edit["new"])
        if text.count(old) != 1:
            raise SystemExit(f"{where}: {old!r} occurs {text.count(old)} times, not once")
        return text.replace(old, new)
    i = int(edit["line"]) - 1
    if not 0 <= i < len(lines):
        raise SystemExit(f"{where}: no line {i + 1}")
    line = lines[i]
    if edit.get("expect") and edit["expect"] not in line:
        raise SystemExit(f"{where}: line {i + 1} does not contain {edit['expect']!r}: {line!r}")
    indent = line[: len(line) - len(line.lstrip())]
    if op == "append":
        add = " " + APPEND[edit.get("form", "json")]
        if edit.get("before"):
            at = line.rindex(edit["before"])
            lines[i] = line[:at].rstrip() + add + " " + line[at:]
        elif line.rstrip().endswith("\\"):
            lines[i] = line.rstrip()[:-1].rstrip() + add + " \\"
        else:
            lines[i] = line.rstrip() + add
    elif op == "item-after":
        m = re.match(r"^(\s*-\s+)", line)
        if not m:
            raise SystemExit(f"{where}: line {i + 1} is not a YAML list item: {line!r}")
        lines[i + 1 : i + 1] = [f"{m.group(1)}--speculative-config", f"{m.group(1)}{fly_sq}"]
    elif op == "insert-after":
        lines[i + 1 : i + 1] = fill(edit["text"]).replace("{indent}", indent).split("\n")
    else:
        raise SystemExit(f"{where}: unknown op {op!r}")
    return "\n".join(lines)


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


def qualgate(args: list[str], limit: int = 20) -> tuple[int | None, str, str]:
    """``(exit code, stdout, stderr)`` of the qualgate CLI run in-process; exit ``None``: a
    traceback (its last line in stderr) or a run past ``limit`` seconds."""
    from click.testing import CliRunner

    from qualgate.cli import cli

    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(limit)
    try:
        r = CliRunner().invoke(cli, args)
    except _Timeout:
        return None, "", f"HANG: past {limit} s"
    finally:
        signal.alarm(0)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        if isinstance(r.exception, _Timeout):
            return None, "", f"HANG: past {limit} s"
        tb = "".join(traceback.format_exception(r.exception)).strip().splitlines()
        return None, r.stdout, "CRASH: " + (tb[-1] if tb else repr(r.exception))
    return r.exit_code, r.stdout, r.stderr


def _short(text: str, n: int = 150) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def decide(path: Path) -> dict:
    code, out, err = qualgate(["check", "--vllm-version", RELEASE, str(path)])
    where = str(path.parent) + "/"
    if code == 0:
        head = out.splitlines()[0] if out else ""
        what = re.search(r"allowed \(([^;)]*)", head)
        return {"decision": "allowed", "why": what.group(1) if what else "", "exit": 0}
    if code == 1:
        reason = next((ln for ln in out.splitlines() if ln.strip().startswith("refused")), out.strip())
        return {"decision": "refused", "why": _short(reason.replace(where, "")), "exit": 1}
    if code == 3:
        msg = err.strip().splitlines()[-1] if err.strip() else out.strip()
        return {"decision": "unresolvable", "why": _short(msg.removeprefix("Error: ").replace(where, "")), "exit": 3}
    return {
        "decision": "CRASH" if code is None else f"exit {code}",
        "why": _short(err.replace(where, "")),
        "exit": code,
    }


def lint_says(path: Path) -> str:
    code, out, err = qualgate(["lint", "--vllm-version", RELEASE, "--fail-on", "error", str(path)])
    if code is None:
        return "CRASH " + _short(err, 80)
    if code == 3:
        return "exit 3"
    return "lossy-verification" if "lossy-verification" in out + err else f"exit {code}, no lossy finding"


def run(files: Path, manifest: Path, only: set | None) -> int:
    results = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="deployment-corpus-") as tmp:
        for r in rows(manifest):
            if only and r["id"] not in only:
                continue
            src = files / r["id"] / Path(r["path"]).name
            text = src.read_text(encoding="utf-8", errors="surrogateescape")
            text, pinned = pin_release(text)
            edit = json.loads(r["fly_edit"])
            fly = apply_edit(text, edit, f"{r['id']} ({r['repo']}:{r['path']})")
            if fly == text:
                raise SystemExit(f"{r['id']}: the FLy edit changed nothing")
            got = {"row": r, "pinned": pinned}
            for name, body in (("as_is", text), ("fly", fly)):
                p = Path(tmp) / r["id"] / name / src.name
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(body, encoding="utf-8", errors="surrogateescape")
                got[name] = decide(p)
            got["lint_fly"] = lint_says(Path(tmp) / r["id"] / "fly" / src.name)
            results.append(got)
    seconds = time.monotonic() - t0
    return report(results, seconds)


def report(results: list[dict], seconds: float) -> int:
    def counts(key):
        c = Counter(g[key]["decision"] for g in results)
        return ", ".join(f"{k} {c[k]}" for k in ("allowed", "refused", "unresolvable") if k in c or True) + "".join(
            f", {k} {v}" for k, v in c.items() if k not in ("allowed", "refused", "unresolvable")
        )

    fail_open = [g for g in results if g["fly"]["decision"] == "allowed"]
    crashes = [
        g for g in results for k in ("as_is", "fly") if g[k]["decision"] not in ("allowed", "refused", "unresolvable")
    ]
    lint_crash = [g for g in results if g["lint_fly"].startswith("CRASH")]
    read_fly = Counter(
        "read as FLy (lossy, needs evidence)"
        if "fly, lossy" in g["fly"]["why"] or "rejection_sample_method='fly'" in g["fly"]["why"]
        else g["fly"]["decision"]
        for g in results
    )
    repos = sorted({g["row"]["repo"] for g in results})
    formats = Counter(g["row"]["format"] for g in results)
    print(
        f"files: {len(results)} from {len(repos)} repositories; formats: "
        + ", ".join(f"{k} {v}" for k, v in sorted(formats.items()))
    )
    print(f"as is:     {counts('as_is')}")
    print(f"with FLy:  {counts('fly')}")
    print("with FLy, refused how: " + ", ".join(f"{k} {v}" for k, v in sorted(read_fly.items())))
    print(f"FAIL-OPEN (a FLy variant allowed): {len(fail_open)}")
    print(f"crashes or hangs (check): {len(crashes)}; lint crashes on the FLy variants: {len(lint_crash)}")
    print(f"release pins moved to {RELEASE}: {sum(1 for g in results if g['pinned'])} files; {seconds:.0f} s")
    print()
    print("| id | format | source | as is | with FLy | lint (FLy) | FAIL-OPEN |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for g in results:
        r = g["row"]
        cell = lambda d: d["decision"] + (f": {d['why']}" if d["why"] else "")  # noqa: E731
        print(
            f"| {r['id']} | {r['format']} | {r['repo']}@{r['commit'][:12]}:{r['path']} | {cell(g['as_is'])} "
            f"| {cell(g['fly'])} | {g['lint_fly']} | {'FAIL-OPEN' if g in fail_open else ''} |"
        )
    return 1 if fail_open or crashes or lint_crash else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("materialise", help="write FILES/ID/BASENAME from the repositories' snapshots")
    m.add_argument("--mirror", type=Path, required=True, help="folder of OWNER+NAME/repo git directories")
    m.add_argument("--files", type=Path, required=True)
    m.add_argument("--manifest", type=Path, default=MANIFEST)
    r = sub.add_parser("run", help="check each file as is and with FLy; print the table")
    r.add_argument("--files", type=Path, required=True)
    r.add_argument("--manifest", type=Path, default=MANIFEST)
    r.add_argument("--only", nargs="*", help="ids to run")
    a = ap.parse_args()
    if a.cmd == "materialise":
        materialise(a.mirror, a.files, a.manifest)
    else:
        sys.exit(run(a.files, a.manifest, set(a.only) if a.only else None))


if __name__ == "__main__":
    main()
