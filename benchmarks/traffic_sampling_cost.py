"""CPU cost of per-request sampling (a traffic suite's ``sampling: request``) against the config's
sampling (``sampling: config``) on the reference engine, with the demo models on CPU.

    python benchmarks/traffic_sampling_cost.py [--requests 64] [--repeats 2]

Each variant is one ``qualgate run`` (target and FLy W=2, one seed) in a child process over the same
requests (the demo suite's first N questions as chat-completion bodies); the table gives the
child's CPU seconds (user + system, start-up included), per request, and relative to
``config``. Variants:

- ``config``: the suite's ``sampling: config``; every request decoded with the config's block.
- ``request, same values``: ``sampling: request``, each request setting exactly the config's
  values (temperature 1.0, max_tokens 96): the cost of the per-request path alone.
- ``request, mixed values``: temperature 0.7 or 1.0 and max_tokens 64 or 96, by request.
- ``request, 1 in 16 unsupported``: as mixed, and one request in 16 also sets
  ``presence_penalty`` (which the reference engine does not implement: that request is an
  ``error`` record, and its batch is decoded again request by request).

Start-up (imports, loading the models) is the same in each variant; the ``start-up only``
row (a run of one request) estimates it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _questions(n: int) -> list[dict]:
    from qualgate.suites import load_suite

    return [{"prompt": list(q.prompt), "gold": q.gold} for q in load_suite("demo_arithmetic", limit=n).questions]


def _write_variant(folder: Path, questions: list[dict], variant: str) -> Path:
    folder.mkdir(parents=True)
    with open(folder / "traffic.jsonl", "w") as out:
        for i, q in enumerate(questions):
            body = {"messages": q["prompt"], "metadata": {"reference": q["gold"]}}
            if variant == "same":
                body |= {"temperature": 1.0, "max_tokens": 96}
            elif variant in ("mixed", "unsupported"):
                body |= {"temperature": (0.7, 1.0)[i % 2], "max_tokens": (64, 96)[(i // 2) % 2]}
                if variant == "unsupported" and i % 16 == 15:
                    body["presence_penalty"] = 0.5
            out.write(json.dumps(body) + "\n")
    mode = "config" if variant in ("config", "startup") else "request"
    (folder / "suite.yaml").write_text(
        "name: bench_traffic\nversion: 1\n"
        f"source: {{traffic: traffic.jsonl, sampling: {mode}}}\n"
        "gold: {field: metadata.reference}\n"
        'extract: {strict: {name: after_marker, params: {marker: "The answer is"}}, lenient: last_number}\n'
        "grader: numeric\ndecides: strict\ngeneration: {max_tokens: 96}\n"
    )
    weights = REPO / "qualgate" / "demo" / "weights"
    (folder / "target.yaml").write_text(
        f"name: target\nengine: reference\nmodel: {weights / 'target'}\n"
        "sampling: {temperature: 1.0, max_tokens: 96}\nengine_options: {batch_size: 64, coupled: true}\n"
    )
    (folder / "other.yaml").write_text(
        f"name: fly-w2\nengine: reference\nmodel: {weights / 'target'}\n"
        f"speculative: {{method: draft_model, model: {weights / 'drafter'}, num_speculative_tokens: 8,"
        " rejection_sample_method: fly, fly_window_size: 2, fly_entropy_threshold: 0.3, fly_entropy_top_k: 3}\n"
        "sampling: {temperature: 1.0, max_tokens: 96}\nengine_options: {batch_size: 64, coupled: true}\n"
    )
    plan = folder / "plan.yaml"
    plan.write_text(
        "name: bench\nsuites: [{suite: suite.yaml}]\nseeds: [0]\n"
        "configs: {target: target.yaml, fly-w2: other.yaml}\nbaseline: target\n"
        "gate: {policy: noninferiority, margin: 0.1, alpha: 0.05}\n"
    )
    return plan


def _run(plan: Path, out: Path, limit: int | None) -> tuple[float, float, dict]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "qualgate", "run", str(plan), "--out", str(out), "--quiet"]
    if limit:
        cmd += ["--limit", str(limit)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in (0, 1, 3, 4) or not (out / "records").is_dir():
        raise SystemExit(f"qualgate run exited {proc.returncode}: {proc.stderr[-2000:]}")
    manifest = json.loads((out / "manifest.json").read_text())
    calls = [c["info"]["engine_timing"]["calls"] for c in manifest["configs"].values()]
    outcomes: dict[str, int] = {"engine calls": sum(calls)}
    records = out / "records" / "target.jsonl"
    for line in records.read_text().splitlines() if records.exists() else []:
        o = json.loads(line)["outcome"]
        outcomes[o] = outcomes.get(o, 0) + 1
    return cpu, wall, outcomes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2, help="runs per variant (the table shows the smallest CPU)")
    args = ap.parse_args()
    questions = _questions(args.requests)
    variants = [
        ("start-up only", "startup", 1),
        ("config", "config", None),
        ("request, same values", "same", None),
        ("request, mixed values", "mixed", None),
        ("request, 1 in 16 unsupported", "unsupported", None),
    ]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, variant, limit in variants:
            plan = _write_variant(Path(tmp) / variant, questions, variant)
            runs = [_run(plan, Path(tmp) / variant / f"out{r}", limit) for r in range(args.repeats)]
            cpu, wall, outcomes = min(runs, key=lambda r: r[0])
            rows.append((label, limit or args.requests, cpu, wall, outcomes))
    base = next(r for r in rows if r[0] == "config")
    start = rows[0][2]
    print(f"{args.requests} requests x 2 configs (target, fly-w2), one seed, reference engine on CPU (demo models);")
    print(f"CPU = the qualgate run child's user+system seconds, smallest of {args.repeats}")
    print()
    print(f"{'variant':30} {'requests':>8} {'CPU-s':>7} {'wall s':>7} {'decode CPU-s':>12} {'x config':>8}  outcomes")
    for label, n, cpu, wall, outcomes in rows:
        decode = cpu - start
        ratio = "" if label == "start-up only" else f"{decode / (base[2] - start):8.2f}"
        print(f"{label:30} {n:8d} {cpu:7.2f} {wall:7.2f} {decode:12.2f} {ratio:>8}  {json.dumps(outcomes)}")
    print()
    print("decode CPU-s = CPU-s less the start-up-only run's; x config = decode CPU-s over config's")


if __name__ == "__main__":
    main()
