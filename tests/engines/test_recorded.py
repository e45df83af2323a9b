"""The engine reproduces, token for token, outputs recorded from the engine before issue 18/21.

``data/recorded_outputs.json`` was written by ``python tests/engines/test_recorded.py`` with the
engine as it was on main at 21587d3 (DynamicCache, per-step Python loop), on CPU in float32 with
one thread. Every case (target-only, standard and FLy; greedy and sampled; coupled and
independent noise; greedy and probabilistic drafters; EOS, stop ids and per-request max_tokens;
padded batches) must give the same token ids, finish reasons and speculative counters.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data" / "recorded_outputs.json"

GREEDY = {"temperature": 0.0}
SAMPLED = {"temperature": 0.9, "top_p": 0.95}
TOPK = {"temperature": 1.2, "top_k": 5, "top_p": 0.9}
SPECS = {
    "target": None,
    "standard-k3": {"num_speculative_tokens": 3},
    "standard-k5-prob": {"num_speculative_tokens": 5, "draft_sample_method": "probabilistic"},
    "fly-k4": {
        "num_speculative_tokens": 4,
        "rejection_sample_method": "fly",
        "fly_window_size": 1,
        "fly_entropy_threshold": 0.3,
    },
    "fly-k6-w2": {
        "num_speculative_tokens": 6,
        "rejection_sample_method": "fly",
        "fly_window_size": 2,
        "fly_entropy_threshold": 0.1,
    },
}


def _prompts(n, vocab=32):
    import torch

    g = torch.Generator().manual_seed(1000 + n)
    return [torch.randint(3, vocab, (1 + (5 * i) % 13,), generator=g).tolist() for i in range(n)]


def cases():
    """(name, prompts, sampling list, speculative) of every recorded case."""
    out = []
    ps = _prompts(14)
    for sname, settings in (("greedy", GREEDY), ("sampled", SAMPLED), ("topk", TOPK)):
        sampling = [
            dict(
                settings,
                seed=7 * i + 1,
                max_tokens=6 + (7 * i) % 40,
                ignore_eos=(i % 3 == 0),
                stop_token_ids=[5] if i % 5 == 4 else [],
            )
            for i in range(len(ps))
        ]
        for spec_name, spec in SPECS.items():
            couplings = [None] if spec is None else [False, True]
            if sname == "greedy" and spec is not None:
                couplings = [False]  # greedy uses no noise: coupling changes nothing
            for coupled in couplings:
                s = None if spec is None else dict(spec, coupled=coupled)
                name = f"{sname}/{spec_name}" + ("" if coupled is None else f"/coupled={coupled}")
                out.append((name, ps, sampling, s))
    # one long batch past the first compaction and row-dropping thresholds
    long_ps = _prompts(9)
    long_sampling = [dict(SAMPLED, seed=100 + i, max_tokens=90 - 7 * i, ignore_eos=True) for i in range(9)]
    for spec_name in ("target", "standard-k5-prob", "fly-k4"):
        for coupled in [None] if spec_name == "target" else [False, True]:
            s = None if SPECS[spec_name] is None else dict(SPECS[spec_name], coupled=coupled)
            out.append((f"long/{spec_name}/coupled={coupled}", long_ps, long_sampling, s))
    return out


def summary(gen):
    return [
        {
            "token_ids": list(o.token_ids),
            "finish_reason": o.finish_reason,
            "num_drafts": o.metrics.num_drafts,
            "num_accepted_tokens": o.metrics.num_accepted_tokens,
            "num_deferred_tokens": o.metrics.num_deferred_tokens,
            "acceptance_histogram": list(o.metrics.acceptance_histogram),
        }
        for o in gen
    ]


def _engine():
    from qualgate.engines.reference import ReferenceEngine

    from support import tiny_llama_pair  # the engine tests' tiny pair (vocab 32, BOS 1, EOS 2)

    # copies: the recording is CPU's, and moving the shared cached pair would move the models
    # of the session's engines too (QUALGATE_TEST_DEVICE=cuda)
    return ReferenceEngine(
        *(copy.deepcopy(m) for m in tiny_llama_pair(32, 0, bos=1, eos=2)), device="cpu", max_num_seqs=256
    )


@pytest.mark.slow
@pytest.mark.parametrize("shapes", ["eager", "static"])
def test_outputs_equal_those_recorded_from_the_engine_before_the_rewrite(shapes):
    """``static``: attention over every cache slot, the shapes of a CUDA-graph step, run on CPU."""
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    recorded = json.loads(DATA.read_text())
    engine = _engine()
    engine._static_shapes = shapes == "static"
    names = [c[0] for c in cases()]
    assert names == list(recorded)
    for name, ps, sampling, spec in cases():
        if shapes == "static" and not name.startswith(("sampled/", "long/")):
            continue  # (time) the sampled and long cases cover every mode and both noises
        got = summary(engine.generate(ps, sampling=sampling, speculative=spec))
        for i, (g, r) in enumerate(zip(got, recorded[name], strict=True)):
            assert g == r, f"{name}, prompt {i}"


if __name__ == "__main__":  # regenerate (only from the engine the data is meant to pin)
    import torch

    torch.set_num_threads(1)
    engine = _engine()
    data = {name: summary(engine.generate(ps, sampling=s, speculative=sp)) for name, ps, s, sp in cases()}
    DATA.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    print(f"{len(data)} cases written to {os.path.relpath(DATA)}")
