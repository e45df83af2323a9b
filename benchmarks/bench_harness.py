"""Harness overhead: ``qualgate run`` against calling the engine directly on the same prompts.

For each decoding mode, :func:`qualgate.run.runner.run_plan` runs a one-config plan over the
questions of the demo suite with the real reference backend, whose engine's ``generate`` is
timed from the inside. In the same run, so that drifts in machine load cannot bias it:

- *engine*: time inside ``ReferenceEngine.generate``;
- *adapter*: the backend call around it (:mod:`qualgate.backends.reference`);
- *own*: the rest of the harness loop: building requests with their seeds, grading, writing
  and fsyncing records, the manifest, the progress bar.

overhead = loop time / engine time - 1, best of ``--repeats``; the goal is <= 3%. The engine
is also timed alone on the same batches, outside the harness, as a sanity check. Model
loading, suite loading and the gate are outside the loop and reported apart.

    python benchmarks/bench_harness.py                      # demo weights (or tiny models)
    python benchmarks/bench_harness.py --device cuda --questions 2000 --batch-size 1024
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from qualgate.backends import open_backend  # noqa: E402
from qualgate.config.decoding import Plan, SuiteRef, parse_config  # noqa: E402
from qualgate.formatting import text_table  # noqa: E402
from qualgate.run.runner import load_suites, run_plan, work_items  # noqa: E402

DEMO = Path(__file__).resolve().parents[1] / "qualgate" / "demo" / "weights"
MODES = {
    "target": None,
    "standard": {"model": "DRAFTER", "num_speculative_tokens": 8},
    "fly-w2": {"model": "DRAFTER", "num_speculative_tokens": 8, "rejection_sample_method": "fly", "fly_window_size": 2},
}


def tiny_models(root: Path):
    """A random 2-layer target and a 1-layer drafter sharing its layers (demo tokenizer)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from qualgate.demo.tokenizer import build_tokenizer

    tok = build_tokenizer()
    common = dict(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=256,
        initializer_range=0.3,
        tie_word_embeddings=False,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(0)
    target = LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, **common)).eval()
    drafter = LlamaForCausalLM(LlamaConfig(num_hidden_layers=1, **common)).eval()
    drafter.load_state_dict(target.state_dict(), strict=False)
    for name, model in (("target", target), ("drafter", drafter)):
        model.save_pretrained(root / name)
        tok.save_pretrained(root / name)
    return root / "target", root / "drafter"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--target", type=Path, help="target model folder (default: the demo's)")
    p.add_argument("--drafter", type=Path)
    p.add_argument("--tiny", action="store_true", help="use tiny random models")
    p.add_argument("--questions", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-tokens", type=int, default=160)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--modes", default=",".join(MODES))
    args = p.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)

    def sync():
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    tmp = Path(tempfile.mkdtemp(prefix="bench-harness-"))
    if args.target:
        target, drafter = args.target.resolve(), (args.drafter or args.target).resolve()
        source = f"{target} / {drafter}"
    elif not args.tiny and (DEMO / "target").is_dir():
        target, drafter = DEMO / "target", DEMO / "drafter"
        source = "demo weights"
    else:
        target, drafter = tiny_models(tmp)
        source = "tiny random models"

    plan0 = Plan(
        name="bench",
        suites=(SuiteRef("demo_arithmetic", limit=args.questions),),
        seeds=(0,),
        samples=1,
        configs={},
        baseline="",
        candidates=(),
    )
    suites = load_suites(plan0)
    work = work_items(suites, (0,), 1)
    rows = []
    for mode in args.modes.split(","):
        spec = MODES[mode]
        raw = {
            "name": mode,
            "engine": "reference",
            "model": str(target),
            "sampling": {"temperature": args.temperature, "max_tokens": args.max_tokens},
            "engine_options": {"device": args.device, "batch_size": args.batch_size},
        }
        if spec:
            raw["speculative"] = {**spec, "model": str(drafter)}
        cfg = parse_config(raw)
        plan = Plan(
            name="bench", suites=plan0.suites, seeds=(0,), samples=1, configs={mode: cfg}, baseline=mode, candidates=()
        )
        batches = [work[lo : lo + args.batch_size] for lo in range(0, len(work), args.batch_size)]
        inner: list[float] = []

        def instrumented(config):
            """The real backend, with its engine's generate timed from the inside."""
            backend = open_backend(config)
            engine_generate = backend.engine_.generate

            def timed(*a, **kw):
                t0 = time.perf_counter()
                out = engine_generate(*a, **kw)
                sync()
                inner.append(time.perf_counter() - t0)
                return out

            backend.engine_.generate = timed
            return backend

        def direct_pass(backend):
            t0 = time.perf_counter()
            for batch in batches:
                backend.engine_.generate(
                    [list(w.question.prompt) for w in batch],
                    sampling=[{**cfg.sampling, "seed": w.request_seed} for w in batch],
                    speculative=backend._speculative,
                )
                sync()
            return time.perf_counter() - t0

        runs, direct = [], []
        with open_backend(cfg) as alone:  # the engine alone, timed between harness runs
            for rep in range(args.repeats):
                direct.append(direct_pass(alone))
                inner.clear()
                t0 = time.perf_counter()
                result = run_plan(plan, tmp / f"{mode}-{rep}", suites=suites, backend_factory=instrumented)
                total = time.perf_counter() - t0
                entry = result.manifest["configs"][mode]
                t = entry["throughput"]
                runs.append(
                    (
                        sum(inner),
                        t["engine_s"],
                        t["wall_s"],
                        t["output_tokens"],
                        entry["load_s"],
                        total - entry["load_s"] - t["wall_s"],
                    )
                )
        engine_s, backend_s, loop_s, tokens, load_s, setup_s = min(runs, key=lambda r: r[2] / r[0])
        direct_s = min(direct)
        rows.append(
            [
                mode,
                len(work),
                f"{tokens:,}",
                f"{direct_s:.2f}",
                f"{engine_s:.2f}",
                f"{backend_s:.2f}",
                f"{loop_s:.2f}",
                f"{100 * (backend_s / engine_s - 1):.2f}%",
                f"{100 * (loop_s - backend_s) / engine_s:.2f}%",
                f"{100 * (loop_s / engine_s - 1):.2f}%",
                f"{100 * (loop_s / direct_s - 1):+.2f}%",
                f"{load_s:.2f}",
                f"{setup_s:.2f}",
            ]
        )
    print(
        f"harness overhead: {source}, device {args.device}, {args.questions} questions, "
        f"batch {args.batch_size}, max_tokens {args.max_tokens}, temperature {args.temperature}, "
        f"{args.threads} thread(s), best of {args.repeats}"
    )
    print(
        text_table(
            rows,
            [
                "mode",
                "requests",
                "tokens",
                "direct s",
                "engine s",
                "backend s",
                "loop s",
                "adapter",
                "own",
                "overhead",
                "loop vs direct",
                "load s",
                "setup+gate s",
            ],
        )
    )
    print(
        "In one harness run: engine s = inside ReferenceEngine.generate, backend s = inside "
        "the backend call, loop s = the harness loop. adapter = backend/engine - 1; own = "
        "(loop - backend)/engine: requests, grading, records (fsync per batch), manifest, "
        "progress; overhead = loop/engine - 1 (goal <= 3%); best of the repeats. direct s: "
        "the engine alone on the same batches, timed between the harness runs; loop vs "
        "direct = loop/direct - 1 (the same comparison across runs, so machine noise adds in). "
        "Model loading, suite loading and the gate are outside the loop."
    )
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
