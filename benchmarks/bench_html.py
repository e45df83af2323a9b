"""Size and load time of the HTML report for a large run: 2,000 questions x 3 seeds x 7 configs.

The run goes through the real harness, records, gate and report code; only the engine is
simulated (this measures the page, not a model): a backend registered here answers each
request with a ~300-character chain of thought that ends in the gold answer with a
probability set per question and config (the candidates lose 0 to 6 points, with
discordance like a sampled model's), deterministically from the request seed. The page is
then opened in Debian's headless Chromium and timed from navigation start to the load event
(the Navigation Timing API), after a first warm-up load.

    python benchmarks/bench_html.py [--questions 2000] [--seeds 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

from qualgate.backends import Backend, Generation, register_backend
from qualgate.demo.plan import demo_plan
from qualgate.report.html import run_html
from qualgate.run.runner import load_suites, run_plan

#: candidate -> (extra chance of a wrong answer, chance of a fresh draw): a lossless-like
#: candidate redraws a few answers, lossy ones also lose some
CANDIDATES = {
    "standard": (0.0, 0.05),
    "fly-w2": (0.005, 0.08),
    "fly-w4": (0.015, 0.1),
    "fly-t01": (0.03, 0.12),
    "fly-t00": (0.06, 0.15),
    "eagle": (0.0, 0.06),
}


class SimulatedBackend(Backend):
    engine = "bench-sim"
    golds: dict[str, str] = {}  #: last user message -> gold answer, filled by main()

    def generate(self, requests):
        lose, redraw = CANDIDATES.get(self.config.name, (0.0, 0.0))
        out = []
        for req in requests:
            gold = self.golds[req.messages[-1]["content"]]
            rng = random.Random(req.sampling["seed"])  # the baseline's draw, shared by every config
            p_right = 0.5 + 0.45 * rng.random()
            right = rng.random() < p_right
            mine = random.Random(f"{self.config.name}/{req.sampling['seed']}")
            if mine.random() < redraw:
                right = mine.random() < p_right
            if right and mine.random() < lose:
                right = False
            answer = gold if right else str(mine.randrange(10_000))
            steps = " Then ".join(f"{mine.randrange(99)}*{mine.randrange(9)}={mine.randrange(999)}." for _ in range(12))
            text = f"First, {steps} The answer is {answer}."
            out.append(Generation(text=text, output_tokens=len(text), latency_s=0.01))
        return out

    def info(self):
        return {"engine": self.engine, "device": "simulated"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=2000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    register_backend("bench-sim", SimulatedBackend)
    plan = demo_plan(questions=args.questions, seeds=args.seeds)
    suite = load_suites(plan)[0]
    SimulatedBackend.golds = {q.prompt[-1]["content"]: q.gold for q in suite.questions}
    base = plan.configs["target"]
    configs = {"target": dataclasses.replace(base, engine="bench-sim")}
    for name in CANDIDATES:
        configs[name] = dataclasses.replace(
            base, name=name, engine="bench-sim", engine_options={**base.engine_options, "bench": name}
        )
    plan = dataclasses.replace(plan, configs=configs, candidates=tuple(CANDIDATES))
    out = args.out or Path(tempfile.mkdtemp(prefix="qualgate-bench-html-")) / "run"
    t0 = time.perf_counter()
    run_plan(plan, out)
    t_run = time.perf_counter() - t0
    t0 = time.perf_counter()
    page = run_html(out)
    t_build = time.perf_counter() - t0
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    load = _load_seconds(path)
    rows = [
        ("questions x seeds x configs", f"{args.questions} x {args.seeds} x {len(configs)}"),
        ("records", f"{args.questions * args.seeds * len(configs):,}"),
        ("run (simulated engine), s", f"{t_run:.1f}"),
        ("page built, s", f"{t_build:.2f}"),
        ("page size, MB", f"{path.stat().st_size / 1e6:.2f}"),
        ("flips in the page", f"{_flips(page):,}"),
        ("load in headless Chromium, s (median of 5)", f"{load:.2f}"),
        ("machine load average (1 min) after it, cores", f"{os.getloadavg()[0]:.1f} / {os.cpu_count()}"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v:>14}")


def _flips(page: str) -> int:
    start = page.index('<script id="flips-data" type="application/json">')
    payload = page[page.index(">", start) + 1 : page.index("</script>", start)]
    return len(json.loads(payload))


def _load_seconds(path: Path) -> float:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,2000"):
        options.add_argument(arg)
    browser = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        times = []
        for _ in range(6):
            browser.get(path.as_uri())
            times.append(
                browser.execute_script(
                    "const t = performance.getEntriesByType('navigation')[0]; return (t.loadEventEnd - t.startTime) / 1000;"
                )
            )
        return sorted(times[1:])[2]
    finally:
        browser.quit()


if __name__ == "__main__":
    main()
