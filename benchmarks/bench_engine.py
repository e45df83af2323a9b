"""Speed of the reference engine against Hugging Face ``generate``, and what coupling buys.

Prints one table: output tokens/s of target-only decoding vs HF ``generate`` at equal batch
sizes, of standard and FLy speculative decoding (batch 1 and batched) vs HF assisted
generation (``generate(assistant_model=...)``, batch 1 only), with the mean acceptance length
of each mode; then the discordance between lossless modes (fraction of sequences whose
tokens differ from target-only with the same seeds) with independent and with coupled noise.

    python benchmarks/bench_engine.py --device cpu --quick            # smoke check
    python benchmarks/bench_engine.py --device cuda                    # built-in tiny pair
    python benchmarks/bench_engine.py --device cuda --target T --drafter D [--prompts FILE]
    python benchmarks/bench_engine.py --device cuda --demo --ks 2,3,4,8  # the demo pair
    python benchmarks/bench_engine.py --device cuda --model-size 130m    # target-only, bf16

``--prompts FILE``: one prompt per line, plain text or a JSON list of chat messages.
``--demo``: the shipped demo pair (qualgate/demo/weights) on demo questions as chat prompts.
``--model-size``: a random-weight bf16 Llama target alone (130m: width 768, 12 layers,
134M parameters; 370m: width 1024, 24 layers, 374M; vocabulary 32000), target-only rows only.
``--ks``: also compare standard speculative decoding at batch 1 with HF assisted generation
at each K, with the drafting-cost bound on the speed-up over target-only.

Beside each tokens/s the table prints the memory-bandwidth bound: the tokens/s at which one
decoding step takes as long as reading the weights it uses once (target, plus K drafter
passes per speculative step, times the mean acceptance length) and the KV cache at the run's
mean length, at the device-to-device copy bandwidth measured at the start.

Every run ignores EOS (both engines generate exactly ``--max-tokens`` tokens per prompt).
The built-in pair is a random-weight Llama target (6 layers, width 256, vocabulary 64:
about 5M parameters) whose layers after the first have their residual branches damped
(x0.1), and a one-layer drafter sharing its embeddings, first layer and head (about 0.8M),
so that the drafter agrees with the target about as often as a trained drafter would (mean
acceptance length near 2.8 at K=4, greedy); prompts are random token ids unless
``--prompts`` gives one text per line.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

MODEL_SIZES = {  # hidden, layers, heads, intermediate (vocabulary 32000, untied head)
    "130m": (768, 12, 12, 2048),
    "370m": (1024, 24, 16, 2816),
}


def sized_model(size, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    hidden, layers, heads, inter = MODEL_SIZES[size]
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=32000,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        intermediate_size=inter,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        eos_token_id=None,
        bos_token_id=None,
        pad_token_id=0,
    )
    return LlamaForCausalLM(cfg).to(torch.bfloat16).eval()


def copy_bandwidth(device):
    """Bytes/s of a large device-to-device copy (read + write counted)."""
    n = (1 << 28) if device.type == "cuda" else (1 << 25)
    a = torch.empty(n, dtype=torch.uint8, device=device)
    b = torch.empty_like(a)
    b.copy_(a)
    sync(device)
    t = time.perf_counter()
    for _ in range(10):
        b.copy_(a)
    sync(device)
    return 2 * n * 10 / (time.perf_counter() - t)


class Bound:
    """Tokens/s at which one step takes as long as reading its weights and KV once."""

    def __init__(self, engine, bandwidth, prompt_len, max_tokens):
        self.bw = bandwidth
        self.t_bytes = sum(p.numel() * p.element_size() for p in engine.target.parameters())
        self.d_bytes = sum(p.numel() * p.element_size() for p in engine.drafter.parameters()) if engine.drafter else 0
        self.kv = [self._kv_per_token(m) for m in (engine.target, engine.drafter) if m is not None]
        self.mean_len = prompt_len + max_tokens / 2

    @staticmethod
    def _kv_per_token(model):
        c = model.config
        head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        size = next(model.parameters()).element_size()
        return 2 * c.num_hidden_layers * c.num_key_value_heads * head_dim * size

    def __call__(self, batch, k=0, mal=None):
        kv = batch * self.mean_len * (self.kv[0] + (k * self.kv[1] if k else 0))
        step = self.t_bytes + k * self.d_bytes + kv
        return batch * (mal or 1.0) * self.bw / step


def demo_prompts(n):
    from qualgate.demo.task import generate, messages

    return [messages(row["question"]) for row in generate(n=n, seed=0)]


def builtin_pair(vocab=64, init=0.3, damp=0.1, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    common = dict(
        vocab_size=vocab,
        hidden_size=256,
        intermediate_size=688,
        num_attention_heads=8,
        num_key_value_heads=8,
        max_position_embeddings=2048,
        initializer_range=init,
        tie_word_embeddings=False,
        eos_token_id=None,
        bos_token_id=None,
        pad_token_id=0,
    )
    target = LlamaForCausalLM(LlamaConfig(num_hidden_layers=6, **common)).eval()
    with torch.no_grad():  # damp layers 2..6 so that the one-layer drafter often agrees
        for layer in target.model.layers[1:]:
            layer.self_attn.o_proj.weight.mul_(damp)
            layer.mlp.down_proj.weight.mul_(damp)
    drafter = LlamaForCausalLM(LlamaConfig(num_hidden_layers=1, **common)).eval()
    drafter.load_state_dict(target.state_dict(), strict=False)
    return target, drafter


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def make_prompts(args, engine, n):
    if args.demo:
        chats = demo_prompts(min(n, 512))
        ids = [engine._encode(i, c) for i, c in enumerate(chats)]
        return [ids[i % len(ids)] for i in range(n)]
    if args.prompts:
        with open(args.prompts, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for line in f if line.strip()]
        # a line holding a JSON list is a chat (rendered with the tokenizer's chat template)
        ids = [engine._encode(i, json.loads(t) if t.startswith("[") else t) for i, t in enumerate(lines)]
        return [ids[i % len(ids)] for i in range(n)]
    g = torch.Generator().manual_seed(n)
    return torch.randint(1, engine._target.vocab, (n, args.prompt_len), generator=g).tolist()


def best(fn, repeats):
    """Run ``fn() -> (tokens/s, ...)`` ``repeats`` times; keep the fastest run."""
    return max((fn() for _ in range(repeats)), key=lambda r: r[0])


def ours(engine, prompts, sampling, speculative, device):
    sync(device)
    t = time.perf_counter()
    out = engine.generate(prompts, sampling=sampling, speculative=speculative)
    sync(device)
    wall = time.perf_counter() - t
    return out.num_output_tokens / wall, out.metrics.mean_acceptance_length, out


def hf(engine, prompts, args, device, assistant=False):
    """HF generate on the prompts (one call), or assisted generation one prompt at a time."""
    model = engine.target
    kwargs = dict(max_new_tokens=args.max_tokens, pad_token_id=0)
    if args.temperature > 0:
        kwargs.update(do_sample=True, temperature=args.temperature, top_p=args.top_p, top_k=0)
    else:
        kwargs.update(do_sample=False)
    calls = [prompts] if not assistant else [[p] for p in prompts]
    if assistant:
        kwargs.update(
            assistant_model=engine.drafter,
            num_assistant_tokens=args.k,
            num_assistant_tokens_schedule="constant",
        )
    tokens = 0
    sync(device)
    t = time.perf_counter()
    with torch.inference_mode():
        for batch in calls:
            # prompts of different lengths are left-padded, as HF generate expects
            width = max(len(p) for p in batch)
            ids = torch.tensor([[0] * (width - len(p)) + list(p) for p in batch], device=device)
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch], device=device)
            out = model.generate(ids, attention_mask=mask, **kwargs)
            tokens += (out.shape[1] - ids.shape[1]) * ids.shape[0]
    sync(device)
    return (tokens / (time.perf_counter() - t),)


def discordance(engine, args, n, speculative_base):
    """Fraction of sequences differing from target-only (same seeds), independent vs coupled."""
    prompts = make_prompts(args, engine, n)
    temperature = args.temperature if args.temperature > 0 else 0.8
    sampling = [
        {
            "temperature": temperature,
            "top_p": args.top_p,
            "max_tokens": args.max_tokens,
            "seed": 10_000 + i,
            "ignore_eos": True,
        }
        for i in range(n)
    ]
    base = [o.token_ids for o in engine.generate(prompts, sampling=sampling)]
    rows = []
    for name, spec in speculative_base.items():
        for coupled in (False, True):
            out = engine.generate(prompts, sampling=sampling, speculative=dict(spec, coupled=coupled))
            diff = sum(o.token_ids != b for o, b in zip(out, base)) / n
            rows.append((name, "coupled" if coupled else "independent", diff, out.metrics.mean_acceptance_length))
    return temperature, rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", help="target model path (default: built-in tiny pair)")
    ap.add_argument("--drafter", help="drafter model path (with --target)")
    ap.add_argument("--demo", action="store_true", help="the demo pair on demo questions")
    ap.add_argument("--model-size", choices=sorted(MODEL_SIZES), help="random-weight bf16 Llama, target-only")
    ap.add_argument("--prompts", help="file with one prompt per line: text or a JSON chat list")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default=None, choices=[None, "float32", "bfloat16", "float16"])
    ap.add_argument("--quick", action="store_true", help="small sizes for a smoke check")
    ap.add_argument("--max-tokens", type=int, default=None, help="tokens per prompt (128; quick: 16)")
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--k", type=int, default=4, help="num_speculative_tokens")
    ap.add_argument("--ks", default=None, help="comma-separated K: batch-1 standard vs HF assisted at each K")
    ap.add_argument("--temperature", type=float, default=0.0, help="0: greedy (default)")
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--fly-window", type=int, default=2)
    ap.add_argument("--fly-threshold", type=float, default=0.3)
    ap.add_argument("--batches", default=None, help="comma-separated batch sizes (1,64,256; quick: 1,8)")
    ap.add_argument("--assisted-prompts", type=int, default=None, help="prompts for HF assisted (4; quick: 2)")
    ap.add_argument(
        "--coupling-seeds", type=int, default=None, help="sequences for discordance (256; quick: 32; 0: skip)"
    )
    ap.add_argument("--repeats", type=int, default=2, help="timed runs per cell; the fastest is kept")
    ap.add_argument(
        "--engine-module",
        default="qualgate.engines.reference",
        help="module whose ReferenceEngine is timed (to compare with an older copy)",
    )
    ap.add_argument("--no-cuda-graphs", action="store_true", help="run every decoding step eagerly")
    ap.add_argument("--compile", action="store_true", help="ReferenceEngine(compile=True): torch.compile")
    ap.add_argument("--no-hf", action="store_true", help="skip the HF generate rows")
    args = ap.parse_args(argv)
    args.max_tokens = args.max_tokens or (16 if args.quick else 128)
    batches = [int(b) for b in (args.batches or ("1,8" if args.quick else "1,64,256")).split(",")]
    n_assisted = args.assisted_prompts or (2 if args.quick else 4)
    n_coupling = args.coupling_seeds if args.coupling_seeds is not None else (32 if args.quick else 256)
    ks = [int(k) for k in args.ks.split(",")] if args.ks else []
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(1)
    dtype = getattr(torch, args.dtype) if args.dtype else None
    engine_cls = importlib.import_module(args.engine_module).ReferenceEngine
    kwargs = {"device": device, "dtype": dtype, "max_num_seqs": max(batches)}
    if args.no_cuda_graphs:
        kwargs["cuda_graphs"] = False
    if args.compile:
        kwargs["compile"] = True

    speculative = args.model_size is None
    if args.model_size:
        engine = engine_cls(sized_model(args.model_size), None, **kwargs)
        pair = f"random-weight Llama {args.model_size} (bf16), target-only"
    elif args.demo:
        from qualgate.demo import model_path

        engine = engine_cls(str(model_path("target")), str(model_path("drafter")), **kwargs)
        pair = "demo pair (qualgate/demo/weights) on demo questions"
    elif args.target:
        if not args.drafter:
            ap.error("--drafter is required with --target")
        engine = engine_cls(args.target, args.drafter, **kwargs)
        pair = f"{args.target} + {args.drafter}"
    else:
        engine = engine_cls(*builtin_pair(), **kwargs)
        pair = "built-in random tiny pair"
    for m in (engine.target, engine.drafter):
        if m is not None:
            m.generation_config.eos_token_id = None  # HF: no early stop (ours: ignore_eos)
    n_t = sum(p.numel() for p in engine.target.parameters())
    n_d = sum(p.numel() for p in engine.drafter.parameters()) if engine.drafter else 0

    sampling = {
        "temperature": args.temperature,
        "top_p": args.top_p,
        "max_tokens": args.max_tokens,
        "ignore_eos": True,
        "seed": 0,
    }
    standard = {"num_speculative_tokens": args.k}
    fly = dict(
        standard,
        rejection_sample_method="fly",
        fly_window_size=args.fly_window,
        fly_entropy_threshold=args.fly_threshold,
    )
    modes = (("standard", standard), ("fly", fly)) if speculative else ()

    # noise: the integer hash must give the same bits on the device as on the CPU; the
    # exponential noise made from it then differs at most by the last bits of float32 log()
    from qualgate.engines._sampling import exponential, noise_keys

    keys = torch.arange(64, dtype=torch.long)
    cpu_keys = noise_keys(keys, keys, 1, keys)
    dev_keys = noise_keys(keys.to(device), keys.to(device), 1, keys.to(device))
    same_noise = torch.equal(cpu_keys, dev_keys.cpu())
    noise_gap = (exponential(cpu_keys, 97) - exponential(dev_keys, 97).cpu()).abs().max().item()
    bandwidth = copy_bandwidth(device)

    warm = make_prompts(args, engine, 2)
    for _, spec in (("target", None), *modes):
        engine.generate(warm, sampling=dict(sampling, max_tokens=4), speculative=spec)
    short = argparse.Namespace(**{**vars(args), "max_tokens": 4})
    if not args.no_hf:
        hf(engine, warm, short, device)
        if speculative:
            hf(engine, warm[:1], short, device, assistant=True)
    mean_prompt = sum(len(p) for p in make_prompts(args, engine, max(batches))) / max(batches)
    bound = Bound(engine, bandwidth, mean_prompt, args.max_tokens)

    rows = []  # mode, batch, engine, tokens/s, mean acc. len, K, note
    greedy_match = [0, 0]
    for b in batches:
        prompts = make_prompts(args, engine, b)
        t_ours, _, base = best(lambda: ours(engine, prompts, sampling, None, device), args.repeats)
        note = ""
        if not args.no_hf:
            (t_hf,) = best(lambda: hf(engine, prompts, args, device), args.repeats)
            note = f"{t_ours / t_hf:.2f}x HF generate"
        rows.append(("target-only", b, "reference", t_ours, None, 0, note))
        if not args.no_hf:
            rows.append(("target-only", b, "HF generate", t_hf, None, 0, ""))
        for name, spec in modes:
            t_s, mal, out = best(lambda: ours(engine, prompts, sampling, spec, device), args.repeats)
            rows.append((name, b, "reference", t_s, mal, args.k, f"{t_s / t_ours:.2f}x target-only"))
            if name == "standard":
                greedy_match[0] += sum(o.token_ids == r.token_ids for o, r in zip(out, base))
                greedy_match[1] += b
    if speculative and not args.no_hf:
        assisted_prompts = make_prompts(args, engine, n_assisted)
        (assisted,) = best(lambda: hf(engine, assisted_prompts, args, device, assistant=True), args.repeats)
        rows.append(("standard", 1, "HF assisted", assisted, None, args.k, ""))

    dev_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (1 thread)"
    graphs = getattr(engine, "cuda_graphs", False)
    print(
        f"# bench_engine: {pair}; target {n_t / 1e6:.2f}M params, drafter {n_d / 1e6:.2f}M; "
        f"engine {args.engine_module}, CUDA graphs {'on' if graphs else 'off'}, "
        f"torch.compile {'on' if getattr(engine, 'compile', False) else 'off'}"
    )
    print(
        f"# device {dev_name}; torch {torch.__version__}; dtype {dtype or 'model default'}; "
        f"prompts {'demo questions' if args.demo else args.prompts or f'of {args.prompt_len} random tokens'}"
        f" (mean {mean_prompt:.0f} tokens), {args.max_tokens} new tokens, temperature {args.temperature}, "
        f"K={args.k}, FLy W={args.fly_window} tau={args.fly_threshold}; HF assisted: K={args.k} constant, "
        f"{n_assisted} prompts one at a time"
    )
    print(
        f"# noise hash bit-identical on {device.type} and cpu: {same_noise}; "
        f"largest difference of the Exp(1) noise made from it: {noise_gap:.2e}"
    )
    print(
        f"# copy bandwidth {bandwidth / 1e9:.0f} GB/s; bound = tokens/s if each step only read the weights "
        f"it uses once and the KV cache at mean length"
    )
    if args.temperature == 0 and speculative:
        print(f"# greedy standard == target-only on {greedy_match[0]}/{greedy_match[1]} sequences")
    print()
    head = f"| {'mode':<11} | {'batch':>5} | {'engine':<11} | {'tokens/s':>10} | {'bound':>10} | {'of bound':>8} | {'mean acc. len':>13} | {'ratio':<22} |"
    print(head)
    print("|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|")
    for m, b, e, t, mal, k, note in rows:
        lim = bound(b, k, mal) if m == "target-only" or mal else None
        mal_s = f"{mal:.2f}" if mal is not None else "-"
        lim_s, frac = (f"{lim:10.0f}", f"{t / lim:8.1%}") if lim else (f"{'-':>10}", f"{'-':>8}")
        print(f"| {m:<11} | {b:>5} | {e:<11} | {t:>10.1f} | {lim_s} | {frac} | {mal_s:>13} | {note:<22} |")

    if ks:
        spec_k_table(engine, args, ks, device, bound)
    if speculative and n_coupling:
        temperature, disc = discordance(engine, args, n_coupling, {"standard": standard, "fly": fly})
        print()
        print(
            f"# discordance vs target-only, same seeds: {n_coupling} sequences, temperature {temperature}, "
            f"top_p {args.top_p}, {args.max_tokens} tokens"
        )
        print(f"| {'mode':<8} | {'noise':<11} | {'differ from target-only':>23} | {'mean acc. len':>13} |")
        print(f"|{'-' * 10}|{'-' * 13}|{'-' * 25}|{'-' * 15}|")
        for name, noise, diff, mal in disc:
            print(f"| {name:<8} | {noise:<11} | {diff:>23.3f} | {mal:>13.2f} |")


def spec_k_table(engine, args, ks, device, bound):
    """Batch 1: standard speculative vs HF assisted at each K, and vs target-only."""
    c_t, c_d = engine.target.config, engine.drafter.config
    cost = c_d.num_hidden_layers / c_t.num_hidden_layers  # a drafter pass, in target passes
    prompts = make_prompts(args, engine, args.assisted_prompts or 4)
    sampling = {
        "temperature": args.temperature,
        "top_p": args.top_p,
        "max_tokens": args.max_tokens,
        "ignore_eos": True,
        "seed": 0,
    }

    def one_at_a_time(spec):
        def run():
            sync(device)
            t = time.perf_counter()
            outs = [engine.generate([p], sampling=sampling, speculative=spec) for p in prompts]
            sync(device)
            wall = time.perf_counter() - t
            n = sum(o.num_output_tokens for o in outs)
            mal = None
            if spec:  # over all prompts: 1 + accepted / drafting steps
                steps = sum(o.metrics.num_drafts for o in outs)
                mal = 1 + sum(o.metrics.num_accepted_tokens for o in outs) / steps
            return n / wall, mal

        return run

    target, _ = best(one_at_a_time(None), args.repeats)
    print()
    print(
        f"# batch 1, {len(prompts)} prompts one at a time: standard speculative vs HF assisted at the same K; "
        f"target-only {target:.1f} tokens/s. A drafter pass costs about {cost:.2f} target passes "
        f"({c_d.num_hidden_layers} vs {c_t.num_hidden_layers} layers), so a step of K drafts costs "
        f"1 + {cost:.2f}K target steps and the speed-up over target-only is at most "
        f"mean acc. len / (1 + {cost:.2f}K)"
    )
    print(
        f"| {'K':>2} | {'reference':>10} | {'HF assisted':>11} | {'vs HF':>6} | {'vs target-only':>14} "
        f"| {'mean acc. len':>13} | {'drafting bound':>14} |"
    )
    print(f"|{'-' * 4}|{'-' * 12}|{'-' * 13}|{'-' * 8}|{'-' * 16}|{'-' * 15}|{'-' * 16}|")
    for k in ks:
        spec = {"num_speculative_tokens": k}
        t_s, mal = best(one_at_a_time(spec), args.repeats)
        a = argparse.Namespace(**{**vars(args), "k": k})
        t_hf = math.nan if args.no_hf else best(lambda: hf(engine, prompts, a, device, assistant=True), args.repeats)[0]
        print(
            f"| {k:>2} | {t_s:>10.1f} | {t_hf:>11.1f} | {t_s / t_hf:>5.2f}x | {t_s / target:>13.2f}x "
            f"| {mal:>13.2f} | {mal / (1 + cost * k):>13.2f}x |"
        )


if __name__ == "__main__":
    main()
