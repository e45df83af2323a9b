"""The hostile-server behaviours of ``tests/backends/test_hostile_servers.py``, each in its own
process under a memory limit (``RLIMIT_AS``) and a wall-clock limit, against the
``engine: vllm-server`` client of one or two qualgate checkouts (before/after a change).

Every case starts ``FakeVLLMServer`` (tests/backends/conftest.py) with one hostile route,
opens the backend with options both versions know (``timeout_s 1``, ``max_retries 1``,
``retry_backoff_s 0.01``) and asks for 3 completions, the second of which meets the
behaviour. Outcomes: ``ok`` (that request is an ``error`` naming the server URL and the
others are answered, or the backend refuses to open with an error naming the URL, or a
side endpoint is noted and the run goes on), ``accepted`` (the hostile answer was taken as
a completion), ``no URL`` (an error that does not name the server), ``traceback`` (an
exception other than ``DataError`` out of the backend: the batch is lost and the run
stops), ``run stopped`` (a ``DataError`` out of ``generate``: exit 3, but the batch is lost
and the run stops), ``memory`` (``MemoryError`` at the memory limit), ``hang`` (past the
time limit).

    python benchmarks/hostile_servers.py --root /path/to/old/checkout --root .
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "..", "tests")


def cases():
    sys.path.insert(0, TESTS)
    from backends import test_hostile_servers as t

    out = {f"completion: {k}": ("completion", v[0]) for k, v in t.COMPLETION.items()}
    for k, v in t.MODELS.items():
        route = "/server_info" if k.startswith("/server_info") else "/v1/models"
        out[f"open: {k}"] = (route, v[0])
    out.update({f"side: {k}": (v[0], v[1]) for k, v in t.NOTES.items()})
    return out, t


def child(name: str) -> dict:
    """Run one case in this process (the qualgate on sys.path is the one measured)."""
    table, t = cases()
    route, behaviour = table[name]
    from backends.conftest import FakeVLLMServer

    from qualgate.backends import open_backend
    from qualgate.config.decoding import parse_config
    from qualgate.errors import DataError

    if route == "completion":

        def hostile(h, server, body):
            if body["seed"] != t.BAD:
                return False
            behaviour(h, server, server.completion(body))
            return True
    else:

        def hostile(h, server, body):
            return behaviour(h, server, body) or True

    with FakeVLLMServer(speculative=t.FLY, server_info=True, hostile={route: hostile}) as srv:
        cfg = parse_config(
            {
                "name": "c",
                "engine": "vllm-server",
                "model": "Qwen/Qwen3-8B",
                "speculative": t.FLY,
                "sampling": {"temperature": 0.6, "max_tokens": 32},
                "engine_options": {
                    "base_urls": [srv.url],
                    "timeout_s": 1.0,
                    "max_retries": 1,
                    "retry_backoff_s": 0.01,
                    "concurrency": 3,
                },
            }
        )
        try:
            backend = open_backend(cfg)
        except DataError as exc:
            return {"outcome": "ok" if srv.url in str(exc) else "no URL", "detail": str(exc)}
        except MemoryError:
            return {"outcome": "memory", "detail": "MemoryError"}
        except BaseException as exc:  # noqa: BLE001 - what is measured
            return {"outcome": "traceback", "detail": f"{type(exc).__name__}: {exc}"}
        try:
            with backend:
                gens = backend.generate(t.requests())
        except DataError as exc:  # a clean exit 3, but the batch is lost and the run stops
            return {"outcome": "run stopped", "detail": str(exc)}
        except MemoryError:
            return {"outcome": "memory", "detail": "MemoryError"}
        except BaseException as exc:  # noqa: BLE001
            return {"outcome": "traceback", "detail": f"{type(exc).__name__}: {exc}"}
    if route != "completion" and route in ("/v1/models", "/server_info"):
        return {"outcome": "accepted", "detail": "opened"}
    errors = [g.error for g in gens]
    if route != "completion":
        ok = all(e is None for e in errors)
        return {"outcome": "ok" if ok else "no URL", "detail": str(errors)}
    if errors[1] is None:
        return {"outcome": "accepted", "detail": repr(gens[1].text)[:80]}
    if errors[0] is not None or errors[2] is not None:
        return {"outcome": "collateral", "detail": str(errors)}
    return {"outcome": "ok" if errors[1].startswith(srv.url) else "no URL", "detail": errors[1][:200]}


def run_case(root: str, name: str, memory: int, limit: float) -> tuple[str, float, str]:
    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    env = {**os.environ, "PYTHONPATH": os.path.abspath(root)}
    t0 = time.perf_counter()
    try:
        p = subprocess.run(
            [sys.executable, __file__, "--child", name],
            env=env,
            capture_output=True,
            text=True,
            timeout=limit,
            preexec_fn=limits,
        )
    except subprocess.TimeoutExpired:
        return "hang", time.perf_counter() - t0, f"over {limit:g} s"
    elapsed = time.perf_counter() - t0
    if p.returncode != 0:
        what = "memory" if "MemoryError" in p.stderr else "traceback"
        return what, elapsed, p.stderr.strip().splitlines()[-1][:200] if p.stderr else ""
    r = json.loads(p.stdout.strip().splitlines()[-1])
    return r["outcome"], elapsed, r["detail"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", action="append", help="a qualgate checkout (repeatable)")
    ap.add_argument("--memory-mib", type=int, default=2048)
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("-k", help="only cases whose name contains this")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    roots = args.root or [os.path.join(HERE, "..")]
    names = [n for n in cases()[0] if not args.k or args.k in n]
    results = {root: {} for root in roots}
    for name in names:
        for root in roots:
            results[root][name] = run_case(root, name, args.memory_mib << 20, args.time_limit)
            print(
                f"{name} [{root}]: {results[root][name][0]} "
                f"({results[root][name][1]:.1f} s) {results[root][name][2][:120]}",
                file=sys.stderr,
                flush=True,
            )
    print(
        f"{len(names)} hostile-server cases, each in its own process: memory limit "
        f"{args.memory_mib} MiB, time limit {args.time_limit:g} s"
    )
    head = ["case"] + [f"{os.path.abspath(r)}" for r in roots]
    rows = [head] + [[n] + [f"{results[r][n][0]} ({results[r][n][1]:.1f} s)" for r in roots] for n in names]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    print()
    for r in roots:
        counts: dict[str, int] = {}
        for n in names:
            counts[results[r][n][0]] = counts.get(results[r][n][0], 0) + 1
        print(f"{os.path.abspath(r)}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
