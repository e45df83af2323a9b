"""Is the interleaved speed-up robust to load? The demo pair, quiet and under an artificial load.

With the shipped demo models (reference engine) it measures the speed-up of a speculative
config (default ``fly-w2``) over target-only decoding (``target``):

(a) quiet: :func:`qualgate.run.speed.interleaved_speed` over ``--rounds`` rounds;
(b) loaded: the same, with an artificial load switched on for a contiguous stretch of about
    ``--load-fraction`` of the timed calls (it starts and ends in the middle of a round, so
    that some rounds have one config loaded and the other quiet);
naive: each config timed on its own over the same batches, one after the other, as the old
    speed table did (tokens/s of one config's whole run over the other's), with the load on
    only while the candidate runs.

The load is ``cpu`` (one busy-looping process per CPU core) and/or ``gpu`` (a process that
multiplies 8192 x 8192 bfloat16 matrices on the same GPU); the workers are started before the
measurement and switched on and off by an event, so switching costs nothing measurable. It
prints (a)'s speed-up and confidence interval, (b)'s interleaved speed-up (it should stay
inside (a)'s interval) and the naive one, and exits 1 when (b) falls outside (a)'s interval.

    python benchmarks/speed_under_load.py --device cuda --out $OUT/speed_under_load.txt
    python benchmarks/speed_under_load.py --device cpu --rounds 7 --questions 8 --max-tokens 40
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing as mp
import os
import platform
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a plain checkout

from qualgate.backends import open_backend  # noqa: E402
from qualgate.demo.plan import demo_plan  # noqa: E402
from qualgate.run.runner import load_suites, work_items  # noqa: E402
from qualgate.run.speed import batch_generator, interleaved_speed  # noqa: E402


def _burn_cpu(on, stop):
    x = 0
    while not stop.is_set():
        if not on.wait(0.05):
            continue
        while on.is_set():
            for _ in range(20_000):
                x = (x * 1_103_515_245 + 12_345) & 0x7FFFFFFF


def _burn_gpu(on, stop, ready):
    import torch

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    ready.set()
    while not stop.is_set():
        if not on.wait(0.05):
            continue
        while on.is_set():
            for _ in range(4):
                a = (a @ a).clamp_(-1, 1)
            torch.cuda.synchronize()


class Load:
    """Load workers, started once and switched by an event."""

    def __init__(self, kinds):
        ctx = mp.get_context("spawn")
        self.on, self.stop = ctx.Event(), ctx.Event()
        self.procs = []
        if "cpu" in kinds:
            self.procs += [
                ctx.Process(target=_burn_cpu, args=(self.on, self.stop), daemon=True)
                for _ in range(os.cpu_count() or 1)
            ]
        ready = []
        if "gpu" in kinds:
            ready.append(ctx.Event())
            self.procs.append(ctx.Process(target=_burn_gpu, args=(self.on, self.stop, ready[-1]), daemon=True))
        for p in self.procs:
            p.start()
        for r in ready:
            if not r.wait(120):
                raise RuntimeError("the GPU load process did not start")
        self.seconds_on, self._since = 0.0, None

    def set(self, on: bool):
        if on and not self.on.is_set():
            self.on.set()
            self._since = time.perf_counter()
        elif not on and self.on.is_set():
            self.on.clear()
            self.seconds_on += time.perf_counter() - self._since

    def close(self):
        self.set(False)
        self.stop.set()
        for p in self.procs:
            p.join(5)
            if p.is_alive():
                p.terminate()


def switched(generate, load, window, calls):
    """Wrap every config's generate so that the load is on for the calls numbered in ``window``
    (one counter over all configs: interleaved_speed calls them round by round)."""

    def wrap(fn):
        def run(items):
            load.set(calls[0] in window)
            calls[0] += 1
            return fn(items)

        return run

    return {name: wrap(fn) for name, fn in generate.items()}


def naive(generate, rounds, baseline, candidate, load):
    """Each config on its own over all the batches, load on only for the candidate."""
    tps = {}
    for name in (baseline, candidate):
        load.set(name == candidate)
        tokens, seconds = 0, 0.0
        for items in rounds:
            t0 = time.perf_counter()
            tokens += sum(g.output_tokens or 0 for g in generate[name](items))
            seconds += time.perf_counter() - t0
        tps[name] = tokens / seconds
    load.set(False)
    return tps[candidate] / tps[baseline], tps


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--candidate", default="fly-w2")
    p.add_argument("--rounds", type=int, default=21)
    p.add_argument("--questions", type=int, default=256, help="questions per round")
    p.add_argument("--max-tokens", type=int, default=None, help="override the demo's max_tokens")
    p.add_argument("--load", default=None, help="cpu, gpu or cpu,gpu (default: cpu on cpu, cpu,gpu on cuda)")
    p.add_argument("--load-fraction", type=float, default=0.3)
    p.add_argument("--out", default=None, help="also write the table here")
    a = p.parse_args(argv)
    kinds = set((a.load or ("cpu,gpu" if a.device == "cuda" else "cpu")).split(","))
    if not kinds <= {"cpu", "gpu"} or ("gpu" in kinds and a.device != "cuda"):
        p.error(f"--load must be cpu, gpu or cpu,gpu (gpu with --device cuda), got {a.load!r}")
    if a.rounds < 6 or not 0 < a.load_fraction < 0.5:
        p.error("--rounds must be >= 6 (a 95% median interval) and --load-fraction in (0, 0.5)")
    lines = ["$ python " + " ".join(shlex.quote(x) for x in [sys.argv[0], *(argv or sys.argv[1:])])]

    def say(msg=""):
        print(msg, flush=True)
        lines.append(msg)

    plan = demo_plan(questions=a.rounds * a.questions)
    work = work_items(load_suites(plan), plan.seeds, plan.samples)  # the demo suite has 2,000 questions
    rounds = [[work[(r * a.questions + i) % len(work)] for i in range(a.questions)] for r in range(a.rounds)]
    names = [plan.baseline, a.candidate]
    configs = {}
    for n in names:
        cfg = plan.configs[n]
        sampling = cfg.sampling if a.max_tokens is None else {**cfg.sampling, "max_tokens": a.max_tokens}
        configs[n] = dataclasses.replace(
            cfg, sampling=sampling, engine_options={**cfg.engine_options, "device": a.device}
        )
    import torch

    if a.device == "cpu":
        torch.set_num_threads(1)  # one decoding thread: the load, not thread contention, is the disturbance
    device = torch.cuda.get_device_name(0) if a.device == "cuda" else platform.processor() or platform.machine()
    say(
        f"interleaved speed-up under load: demo {a.candidate} over {plan.baseline}, reference engine on {a.device} "
        f"({device}), torch {torch.__version__}; {a.rounds} rounds of {a.questions} questions, load {sorted(kinds)} "
        f"({os.cpu_count()} CPU cores) on for {a.load_fraction:.0%} of the loaded run's calls"
    )
    t_start = time.perf_counter()
    load = Load(kinds)
    backends = {}
    try:
        for n in names:
            backends[n] = open_backend(configs[n])
        generate = {n: batch_generator(configs[n], backends[n]) for n in names}
        for n in names:  # warm-up: lazy initialisation is not speed
            generate[n](rounds[0][: min(len(rounds[0]), 64)])
        quiet = interleaved_speed(generate, rounds, baseline=plan.baseline)[a.candidate]
        calls = len(names) * a.rounds
        span = max(1, round(a.load_fraction * calls))
        first = (calls - span) // 2 | 1  # odd: the load starts after a round's first config
        window = range(first, first + span)
        loaded = interleaved_speed(switched(generate, load, window, [0]), rounds, baseline=plan.baseline)[a.candidate]
        load.set(False)
        load_on_interleaved = load.seconds_on
        naive_speedup, naive_tps = naive(generate, rounds, plan.baseline, a.candidate, load)
    finally:
        load.close()
        for b in backends.values():
            b.close()
    low, high = quiet.confidence_interval
    inside = low <= loaded.speedup <= high
    say()
    say(f"{'measurement':<36} {'speed-up':>9} {'CI':>17} {'level':>6} {'target tok/s':>13} {'cand. tok/s':>12}")

    def row(label, r):
        ci = f"[{r.confidence_interval[0]:.3f}, {r.confidence_interval[1]:.3f}]"
        med = lambda xs: sorted(xs)[len(xs) // 2]
        say(
            f"{label:<36} {r.speedup:>9.3f} {ci:>17} {r.confidence_level:>6.1%} "
            f"{med(r.baseline_tokens_per_s):>13,.0f} {med(r.tokens_per_s):>12,.0f}"
        )

    row("(a) quiet, interleaved", quiet)
    row(f"(b) load {window.start}-{window.stop - 1} of {calls} calls, interl.", loaded)
    say(
        f"{'naive, load while candidate runs':<36} {naive_speedup:>9.3f} {'—':>17} {'—':>6} "
        f"{naive_tps[plan.baseline]:>13,.0f} {naive_tps[a.candidate]:>12,.0f}"
    )
    say()
    say("per-round ratios (a): " + " ".join(f"{x:.3f}" for x in quiet.ratios))
    say("per-round ratios (b): " + " ".join(f"{x:.3f}" for x in loaded.ratios))
    say(
        f"load on for {load_on_interleaved:.1f} s of the loaded interleaved run; (b) is "
        f"{'inside' if inside else 'OUTSIDE'} (a)'s {quiet.confidence_level:.1%} interval; naive is "
        f"{naive_speedup / quiet.speedup:.2f}x the quiet speed-up; {time.perf_counter() - t_start:.0f} s in all"
    )
    for label, r in (("(a)", quiet), ("(b)", loaded)):
        if r.warning:
            say(f"warning {label}: {r.warning}")
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0 if inside else 1


if __name__ == "__main__":
    sys.exit(main())
