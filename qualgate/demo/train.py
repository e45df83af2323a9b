"""Train the demo target and drafter, deterministically, and report where they land.

Usage::

    python -m qualgate.demo.train --out DIR --device cuda

writes ``DIR/target`` and ``DIR/drafter`` (Hugging Face model folders: safetensors, config,
generation config, tokenizer with its chat template) and ``DIR/metrics.json`` (also printed
as the last line of stdout).

Both models learn, from chains of thought drawn by :func:`qualgate.demo.task.generate`
(``split='train'``), to answer a prompt rendered by the demo tokenizer's chat template; the
loss covers the assistant turn only. Every ``--target-eval-every`` (``--drafter-eval-every``)
steps a model answers ``--eval-n`` validation questions (``split='val'``) by sampling at
``--temperature`` and stops at the first evaluation whose accuracy reaches its
``--target-stop`` (``--drafter-stop``): the target lands good but not perfect, as the demo
needs, and the drafter stays weaker. The final evaluation on the demo suite's test questions
(``split='test'``, seed 0) reports greedy and sampled accuracy of both models and the
drafter's greedy agreement with the target.

Determinism: every random choice comes from a seeded generator, deterministic algorithms
are requested (ops without one are listed in the metrics under
``nondeterministic_warnings``), and the metrics carry a sha256 of each model's weights so
that two runs can be compared.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
import warnings
from pathlib import Path

__all__ = ["evaluate", "main", "train_model", "weights_sha256"]


def _setup(device: str, threads: int | None):
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    if threads:
        torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    if device.startswith("cuda"):
        torch.backends.cudnn.benchmark = False
        torch.set_float32_matmul_precision("high")  # TF32 matmuls: deterministic, faster
    return torch


def encode_rows(rows, tokenizer):
    """Token ids (uint8, right-padded), prompt lengths and lengths of training rows.

    Each row renders as a whole conversation through the chat template; its prompt is
    everything up to and including the ``<|assistant|>`` token, as
    ``apply_chat_template(..., add_generation_prompt=True)`` renders it.
    """
    import torch

    from .task import messages

    fulls = tokenizer.apply_chat_template(
        [messages(r["question"]) + [{"role": "assistant", "content": r["reference"]}] for r in rows],
        tokenize=False,
    )
    ids = tokenizer(fulls, add_special_tokens=False)["input_ids"]
    start = tokenizer.convert_tokens_to_ids("<|assistant|>")
    prompt_lens = [x.index(start) + 1 for x in ids]
    lengths = [len(x) for x in ids]
    out = torch.full((len(ids), max(lengths)), tokenizer.pad_token_id, dtype=torch.uint8)
    for i, x in enumerate(ids):
        out[i, : len(x)] = torch.tensor(x, dtype=torch.uint8)
    return out, torch.tensor(prompt_lens), torch.tensor(lengths)


def _epoch(lengths, batch_size: int, generator, *, pool: int = 16):
    """One epoch of batches (index tensors) in random order.

    Rows are shuffled, then sorted by length within pools of ``pool`` batches, so that a
    batch holds rows of similar length (less padding) while every batch stays a random draw.
    """
    import torch

    perm = torch.randperm(len(lengths), generator=generator)
    batches = []
    span = batch_size * pool
    for c in range(0, len(perm), span):
        ids = perm[c : c + span]
        ids = ids[torch.argsort(lengths[ids], stable=True)]
        starts = range(0, len(ids) - batch_size + 1, batch_size)
        batches += [ids[b : b + batch_size] for b in starts]
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


def weights_sha256(model) -> str:
    """sha256 over a model's parameters (names, dtypes and bytes, in name order)."""
    import torch

    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        t = tensor.detach().cpu().contiguous()
        h.update(str(t.dtype).encode())
        h.update(t.view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def generate_texts(
    model, tokenizer, rows, *, temperature: float, seed: int, max_new_tokens: int = 128, batch_size: int = 512
):
    """Answer each row's prompt with HF ``generate``; temperature 0 means greedy.

    Returns the generated texts and the generated token ids (without the prompt).
    """
    import torch

    from .task import messages

    device = next(model.parameters()).device
    texts, token_ids = [], []
    was_training = model.training
    model.eval()
    for start in range(0, len(rows), batch_size):
        chunk = rows[start : start + batch_size]
        enc = tokenizer.apply_chat_template(
            [messages(r["question"]) for r in chunk],
            add_generation_prompt=True,
            padding=True,
            return_tensors="pt",
            return_dict=True,
        ).to(device)
        sampling = (
            {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
            if temperature > 0
            else {"do_sample": False}
        )
        torch.manual_seed(seed + start)
        with torch.no_grad():
            out = model.generate(
                **enc,
                max_new_tokens=max_new_tokens,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
                **sampling,
            )
        new = out[:, enc["input_ids"].shape[1] :].cpu().tolist()
        for seq in new:
            seq = [t for t in seq if t != tokenizer.pad_token_id]
            token_ids.append(seq)
            texts.append(tokenizer.decode(seq, skip_special_tokens=True))
    model.train(was_training)
    return texts, token_ids


def _accuracy(rows, texts) -> dict:
    from .task import extract_answer

    answers = [extract_answer(t) for t in texts]
    n = len(rows)
    return {
        "accuracy": sum(a is not None and str(a) == r["answer"] for a, r in zip(answers, rows)) / n,
        "no_answer": sum(a is None for a in answers) / n,
    }


def evaluate(
    model, tokenizer, rows, *, temperature: float, seed: int, max_new_tokens: int = 128, batch_size: int = 512
) -> dict:
    """Strict-format accuracy and no-answer rate of a model on rows."""
    texts, _ = generate_texts(
        model, tokenizer, rows, temperature=temperature, seed=seed, max_new_tokens=max_new_tokens, batch_size=batch_size
    )
    return _accuracy(rows, texts)


def agreement(target, drafter, tokenizer, rows, completions, *, k: int = 8, batch_size: int = 256) -> dict:
    """The drafter's greedy agreement with the target along the target's own outputs.

    Both models read each prompt followed by the target's completion (teacher forcing);
    ``agreement`` is the fraction of completion positions where their argmax tokens agree,
    ``greedy_acceptance_length`` the mean acceptance length (1 + accepted per drafting
    step) that greedy speculative decoding with ``k`` draft tokens would have along the
    target's greedy outputs (exact when ``completions`` are the target's greedy outputs).
    """
    import torch

    from .task import messages

    device = next(target.parameters()).device
    agree = total = steps = emitted = 0
    for start in range(0, len(rows), batch_size):
        chunk = rows[start : start + batch_size]
        prompts = [
            tokenizer.apply_chat_template(messages(r["question"]), add_generation_prompt=True, return_dict=False)
            for r in chunk
        ]
        seqs = [p + c for p, c in zip(prompts, completions[start : start + batch_size])]
        width = max(map(len, seqs))
        ids = torch.full((len(seqs), width), tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = torch.tensor(s)
            mask[i, : len(s)] = 1
        ids, mask = ids.to(device), mask.to(device)
        with torch.no_grad():
            pt = target(input_ids=ids, attention_mask=mask).logits.argmax(-1).cpu()
            pd = drafter(input_ids=ids, attention_mask=mask).logits.argmax(-1).cpu()
        for i, (p, c) in enumerate(zip(prompts, completions[start : start + batch_size])):
            # logits at position t predict token t + 1: completion tokens sit at len(p)...
            lo, hi = len(p) - 1, len(p) - 1 + len(c)
            match = (pt[i, lo:hi] == pd[i, lo:hi]).tolist()
            agree += sum(match)
            total += len(match)
            j = 0
            while j < len(match):  # one drafting step: accept the run, then one target token
                run = 0
                while run < k and j + run < len(match) and match[j + run]:
                    run += 1
                steps += 1
                emitted += min(run + 1, len(match) - j)
                j += run + 1
    return {
        "agreement": agree / max(total, 1),
        "greedy_acceptance_length": emitted / max(steps, 1),
        "k": k,
    }


def train_model(
    shape,
    *,
    tokenizer,
    data,
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    device: str = "cpu",
    eval_rows=None,
    eval_every: int = 0,
    stop_at: float | None = None,
    temperature: float = 1.0,
    warmup: int = 100,
    log_every: int = 50,
    eval_batch_size: int = 512,
    log=print,
):
    """Train one model; returns ``(model, history)``.

    ``data`` is the output of :func:`encode_rows`. With ``eval_rows`` and ``eval_every``,
    sampled accuracy is measured every ``eval_every`` steps and training stops at the first
    evaluation reaching ``stop_at``.
    """
    import torch

    from .models import build_model

    tokens, prompt_lens, lengths = data
    model = build_model(shape, tokenizer, seed=seed).to(device)
    model.config._attn_implementation = "eager"  # deterministic on every device
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.01)

    def lr_at(step):
        if step < warmup:
            return lr * (step + 1) / warmup
        frac = (step - warmup) / max(1, steps - warmup)
        return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))

    order_gen = torch.Generator().manual_seed(seed)
    batches = []
    history = {"loss": [], "evals": [], "stopped_at": None, "steps": 0}
    t0 = time.perf_counter()
    eval_seconds = 0.0
    running = 0.0
    for step in range(steps):
        if not batches:
            batches = _epoch(lengths, batch_size, order_gen)
            if not batches:
                raise ValueError(f"batch_size {batch_size} exceeds the {len(tokens)} training rows")
        idx = batches.pop()
        width = int(lengths[idx].max())
        x = tokens[idx, :width].long()
        pos = torch.arange(width)
        labels = x.masked_fill((pos < prompt_lens[idx, None]) | (pos >= lengths[idx, None]), -100)
        x, labels = x.to(device), labels.to(device)
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        loss = model(input_ids=x, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        running += loss.item()
        history["steps"] = step + 1
        if (step + 1) % log_every == 0:
            history["loss"].append([step + 1, round(running / log_every, 5)])
            log(f"  step {step + 1:5d}  loss {running / log_every:.4f}  {time.perf_counter() - t0:6.1f}s")
            running = 0.0
        if eval_rows and eval_every and (step + 1) % eval_every == 0:
            t_eval = time.perf_counter()
            res = evaluate(model, tokenizer, eval_rows, temperature=temperature, seed=seed, batch_size=eval_batch_size)
            eval_seconds += time.perf_counter() - t_eval
            history["evals"].append({"step": step + 1, **res})
            log(f"  step {step + 1:5d}  val sampled accuracy {res['accuracy']:.3f}  no-answer {res['no_answer']:.3f}")
            if stop_at is not None and res["accuracy"] >= stop_at:
                history["stopped_at"] = step + 1
                break
    history["train_seconds"] = round(time.perf_counter() - t0, 2)  # evaluations included
    history["eval_seconds"] = round(eval_seconds, 2)
    history["seconds_per_step"] = round((history["train_seconds"] - eval_seconds) / max(history["steps"], 1), 5)
    model.eval()
    return model, history


def _parser():
    p = argparse.ArgumentParser(prog="python -m qualgate.demo.train", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:0, ... (default cpu)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--target-shape", default="target", help="preset or layers=,hidden=,heads=,ff=")
    p.add_argument("--drafter-shape", default="drafter")
    p.add_argument("--target-steps", type=int, default=5000)
    p.add_argument("--drafter-steps", type=int, default=3000)
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--train-size", type=int, default=150_000, help="distinct training rows")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature of the evaluations")
    p.add_argument(
        "--target-eval-every", type=int, default=250, help="steps between the target's validation evaluations"
    )
    p.add_argument("--drafter-eval-every", type=int, default=500)
    p.add_argument("--eval-n", type=int, default=512, help="validation questions per evaluation")
    p.add_argument(
        "--target-stop", type=float, default=0.82, help="stop the target at this sampled validation accuracy"
    )
    p.add_argument(
        "--drafter-stop", type=float, default=0.45, help="stop the drafter at this sampled validation accuracy"
    )
    p.add_argument("--final-n", type=int, default=1000, help="test questions of the final evaluation")
    p.add_argument("--eval-batch-size", type=int, default=512)
    p.add_argument(
        "--only",
        choices=["target", "drafter"],
        default=None,
        help="train one model only (the other, if already in --out, is evaluated too)",
    )
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    torch = _setup(args.device, args.threads)
    import transformers

    from .models import parse_shape
    from .task import generate
    from .tokenizer import build_tokenizer

    transformers.utils.logging.disable_progress_bar()

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t_start = time.perf_counter()
        tokenizer = build_tokenizer()
        rows = generate(n=args.train_size, seed=args.seed, split="train")
        data = encode_rows(rows, tokenizer)
        val = generate(n=args.eval_n, seed=args.seed, split="val")
        test = generate(n=args.final_n, seed=0, split="test")
        log(
            f"data: {args.train_size} training rows, max length {data[0].shape[1]}, "
            f"{time.perf_counter() - t_start:.1f}s"
        )
        metrics = {
            "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
            "device_name": (torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "cpu"),
            "data_seconds": round(time.perf_counter() - t_start, 2),
        }
        models = {}
        previous = args.out / "metrics.json"
        for which in ("target", "drafter"):
            if args.only and args.only != which:
                # keep the other model of an earlier run in DIR for the final evaluation
                if (args.out / which / "config.json").is_file() and previous.is_file():
                    from transformers import AutoModelForCausalLM

                    models[which] = (
                        AutoModelForCausalLM.from_pretrained(args.out / which, dtype=torch.float32)
                        .to(args.device)
                        .eval()
                    )
                    metrics[which] = json.loads(previous.read_text())[which]
                continue
            shape = parse_shape(getattr(args, f"{which}_shape"))
            log(f"{which}: {shape}")
            model, history = train_model(
                shape,
                tokenizer=tokenizer,
                data=data,
                steps=getattr(args, f"{which}_steps"),
                batch_size=args.batch_size,
                lr=args.lr,
                seed=args.seed + (0 if which == "target" else 1),
                device=args.device,
                eval_rows=val,
                eval_every=getattr(args, f"{which}_eval_every"),
                stop_at=getattr(args, f"{which}_stop"),
                temperature=args.temperature,
                eval_batch_size=args.eval_batch_size,
                log=log,
            )
            models[which] = model
            out = args.out / which
            model.save_pretrained(out)
            tokenizer.save_pretrained(out)
            metrics[which] = {
                "shape": shape,
                "parameters": sum(p.numel() for p in model.parameters()),
                "weights_sha256": weights_sha256(model),
                **history,
            }
        log("final evaluation on test questions")
        completions = {}
        for which, model in models.items():
            t0 = time.perf_counter()
            greedy_texts, greedy_ids = generate_texts(
                model, tokenizer, test, temperature=0.0, seed=args.seed, batch_size=args.eval_batch_size
            )
            sampled_texts, _ = generate_texts(
                model, tokenizer, test, temperature=args.temperature, seed=args.seed, batch_size=args.eval_batch_size
            )
            completions[which] = greedy_ids
            metrics[which]["test"] = {
                "n": len(test),
                "greedy": _accuracy(test, greedy_texts),
                "sampled": {"temperature": args.temperature, **_accuracy(test, sampled_texts)},
                "mean_output_tokens": sum(map(len, greedy_ids)) / len(greedy_ids),
                "eval_seconds": round(time.perf_counter() - t0, 2),
            }
            log(f"{which}: {json.dumps(metrics[which]['test'])}")
        if len(models) == 2:
            metrics["drafter_vs_target"] = agreement(
                models["target"], models["drafter"], tokenizer, test, completions["target"]
            )
            log(f"drafter vs target: {json.dumps(metrics['drafter_vs_target'])}")
        metrics["total_seconds"] = round(time.perf_counter() - t_start, 2)
    metrics["nondeterministic_warnings"] = sorted({str(w.message) for w in caught if "deterministic" in str(w.message)})
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
    print(json.dumps(metrics))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
