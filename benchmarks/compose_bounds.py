"""CPU time and peak memory of `qualgate lint` on compose projects at and past the bounds of
the compose merge (qualgate/vllm033/compose.py): many services chained by ``extends``, a chain
past MAX_DEPTH, and ``extends`` files that together hold more than MAX_NODES YAML nodes.
Each case runs in its own process; the target is an answer (or exit 3 naming the limit)
within 5 s and 1 GiB.

    python benchmarks/compose_bounds.py
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
from pathlib import Path

HEAD = "services:\n  vllm:\n    image: vllm/vllm-openai:v0.33.0\n    command: [--model, Qwen/Qwen3-8B]\n"


def many_chains(d: Path) -> Path:
    """20,000 services, each extending the next, in chains of 60."""
    lines = [HEAD]
    for i in range(20_000):
        nxt = i + 1 if (i + 1) % 60 and i + 1 < 20_000 else None
        lines.append(f"  s{i}:\n    " + (f"extends: s{nxt}\n" if nxt else "ipc: host\n"))
    (d / "compose.yaml").write_text("".join(lines))
    return d / "compose.yaml"


def long_chain(d: Path) -> Path:
    """One chain of 80 services (MAX_DEPTH is 64)."""
    body = "".join(f"  s{i}:\n    extends: s{i + 1}\n" for i in range(80)) + "  s80:\n    ipc: host\n"
    (d / "compose.yaml").write_text(HEAD + body)
    return d / "compose.yaml"


def big_files(d: Path) -> Path:
    """Two extends files of 30,000 labels (about 60,000 nodes) each: over MAX_NODES together."""
    for name in ("a", "b"):
        labels = "".join(f"      l{i}: v\n" for i in range(30_000))
        (d / f"{name}.yaml").write_text(f"services:\n  {name}:\n    labels:\n{labels}")
    text = HEAD + "  x:\n    extends: {file: a.yaml, service: a}\n  y:\n    extends: {file: b.yaml, service: b}\n"
    (d / "compose.yaml").write_text(text)
    return d / "compose.yaml"


CASES = {"20,000 services, chains of 60": many_chains, "a chain of 80": long_chain, "2 files of 60k nodes": big_files}


def main() -> None:
    print(f"{'case':32} {'exit':>4} {'cpu s':>6} {'peak MiB':>8}  message")
    for name, make in CASES.items():
        with tempfile.TemporaryDirectory() as work:
            path = make(Path(work))
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            r = subprocess.run(
                [sys.executable, "-c", "from qualgate.cli import main; main()", "lint", str(path)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        msg = (r.stderr.strip().splitlines() or [""])[-1]
        msg = msg.split("; to check")[0][-70:]
        print(f"{name:32} {r.returncode:>4} {cpu:>6.2f} {after.ru_maxrss / 1024:>8.0f}  {msg}")


if __name__ == "__main__":
    main()
