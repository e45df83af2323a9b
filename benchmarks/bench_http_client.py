"""Requests per second of the ``engine: vllm-server`` client against a loopback server.

The server runs in its own process (so that it does not share the client's GIL): an
asyncio HTTP/1.1 server with keep-alive, as uvicorn serves ``vllm serve``, answering
``/v1/models``, ``/version``, ``/metrics`` and ``/v1/chat/completions`` at once with a
vLLM-shaped completion. The client is :class:`qualgate.backends.vllm_server.VLLMServerBackend`
of whichever qualgate is imported; ``--compare-with DIR`` also runs this script with
``PYTHONPATH=DIR`` (another checkout, e.g. the code before keep-alive) and prints both.
Throughput here is the client's and the loopback stack's overhead per request; against a
real vLLM server the completion time dominates.

    python benchmarks/bench_http_client.py --compare-with /path/to/old/checkout
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MODEL = "Qwen/Qwen3-8B"


# --------------------------------------------------------------------------- server


def _answer(method: str, path: str, body: bytes) -> tuple[int, bytes]:
    if method == "GET" and path == "/v1/models":
        return 200, json.dumps(
            {"object": "list", "data": [{"id": MODEL, "object": "model", "root": MODEL, "max_model_len": 40960}]}
        ).encode()
    if method == "GET" and path == "/version":
        return 200, b'{"version": "0.33.0"}'
    if method == "GET" and path == "/metrics":
        return 200, b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0.0\n"
    if method == "POST" and path == "/v1/chat/completions":
        req = json.loads(body)
        return 200, json.dumps(
            {
                "id": f"chatcmpl-{req['seed']}",
                "object": "chat.completion",
                "model": req["model"],
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": f"#### {req['seed']}", "reasoning": None},
                    }
                ],
                "usage": {"prompt_tokens": 20, "completion_tokens": 3, "total_tokens": 23},
            }
        ).encode()
    return 404, b'{"detail": "Not Found"}'


async def _connection(reader, writer):
    try:
        while True:
            line = await reader.readline()
            if not line:
                break
            headers = {}
            while True:
                h = await reader.readline()
                if h in (b"\r\n", b"\n", b""):
                    break
                k, _, v = h.decode("latin-1").partition(":")
                headers[k.strip().lower()] = v.strip()
            n = int(headers.get("content-length", 0))
            body = await reader.readexactly(n) if n else b""
            method, path, _ = line.decode("latin-1").split(" ", 2)
            status, payload = _answer(method, path.split("?")[0], body)
            writer.write(
                b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (status, len(payload), payload)
            )
            await writer.drain()
            if headers.get("connection", "").lower() == "close":
                break
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


def _serve(port_queue) -> None:
    async def main():
        server = await asyncio.start_server(_connection, "127.0.0.1", 0, backlog=1024)
        port_queue.put(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(main())


# --------------------------------------------------------------------------- client


def measure(url: str, concurrency: int, n: int, repeats: int) -> dict:
    sys.path.insert(0, os.environ.get("QG_BENCH_ROOT", ROOT))
    import qualgate
    from qualgate.backends import Request, open_backend
    from qualgate.config.decoding import parse_config

    cfg = parse_config(
        {
            "name": "bench",
            "engine": "vllm-server",
            "model": MODEL,
            "sampling": {"temperature": 0.0, "max_tokens": 16},
            "engine_options": {"base_urls": [url], "concurrency": concurrency, "max_retries": 0},
        }
    )
    reqs = [
        Request(({"role": "user", "content": f"What is {i} + 1?"},), {"temperature": 0.0, "max_tokens": 16, "seed": i})
        for i in range(n)
    ]
    best = float("inf")
    with open_backend(cfg) as backend:
        backend.generate(reqs[:concurrency])  # warm up
        for _ in range(repeats):
            t0 = time.perf_counter()
            gens = backend.generate(reqs)
            best = min(best, time.perf_counter() - t0)
            assert all(g.error is None for g in gens), gens[0].error
        opened = backend.info().get("connections_opened")
    return {
        "qualgate": os.path.dirname(os.path.dirname(os.path.abspath(qualgate.__file__))),
        "concurrency": concurrency,
        "requests": n,
        "best_s": best,
        "requests_per_s": n / best,
        "connections_opened": opened,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--compare-with", metavar="DIR", help="another qualgate checkout")
    ap.add_argument("--url", help=argparse.SUPPRESS)  # for the --compare-with child
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()

    proc = None
    url = args.url
    if url is None:
        q = multiprocessing.Queue()
        proc = multiprocessing.Process(target=_serve, args=(q,), daemon=True)
        proc.start()
        url = f"http://127.0.0.1:{q.get(timeout=30)}"
    try:
        rows = []
        if args.compare_with:
            env = {
                **os.environ,
                "QG_BENCH_ROOT": os.path.abspath(args.compare_with),
                "PYTHONPATH": os.path.abspath(args.compare_with),
            }
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--url",
                    url,
                    "--json",
                    "--requests",
                    str(args.requests),
                    "--repeats",
                    str(args.repeats),
                    "--concurrency",
                    *map(str, args.concurrency),
                ],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            rows += [{"client": "compared", **r} for r in json.loads(out)]
        mine = [measure(url, c, args.requests, args.repeats) for c in args.concurrency]
        if args.json:
            print(json.dumps(mine))
            return
        rows += [{"client": "this", **r} for r in mine]
    finally:
        if proc is not None:
            proc.terminate()
    print(
        f"loopback asyncio HTTP/1.1 server in its own process; {args.requests} requests "
        f"per measurement, best of {args.repeats}; {os.cpu_count()} CPUs"
    )
    head = ("client", "qualgate", "concurrency", "requests/s", "best s", "connections opened")
    table = [head] + [
        (
            r["client"],
            r["qualgate"],
            str(r["concurrency"]),
            f"{r['requests_per_s']:,.0f}",
            f"{r['best_s']:.3f}",
            "n/a" if r["connections_opened"] is None else str(r["connections_opened"]),
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


if __name__ == "__main__":
    main()
