"""Paths and builders importable from any test module (``tests/`` is on ``pythonpath``): the
synthetic records of the gate tests, the tiny random-weight Llama pairs and the plan files of
the run tests. Fixtures over them are in ``tests/conftest.py``."""

from __future__ import annotations

import functools
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: Read-only reference material laid beside the checkout (never copied into the project).
SHARED = REPO.parent / "shared"
#: Why a test that reads :data:`SHARED` is skipped in a checkout without it (a fresh clone).
NO_SHARED = (
    "needs ../shared, the project's reference data (real test sets, model outputs, published tables), "
    f"beside the checkout; not found at {SHARED}"
)
#: The one mark of a test that reads :data:`SHARED` directly: skipped, with :data:`NO_SHARED`, without it.
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=NO_SHARED)


def require_shared() -> Path:
    """:data:`SHARED`, or skip the calling test or fixture with :data:`NO_SHARED` (for fixtures and
    helpers that read it, so that every test using them skips)."""
    if not SHARED.is_dir():
        pytest.skip(NO_SHARED)
    return SHARED


# --- records -------------------------------------------------------------------------------


def make_records(outcomes, *, config="cfg-base", seeds=1, suite="gsm8k", mode=None, prompt="p", run_id="run-1"):
    """Records for ``outcomes`` (strings): question i // seeds, seed i % seeds, sample 0."""
    from qualgate.records import Record

    return [
        Record(1, run_id, config, suite, "1", f"q{i // seeds}", i % seeds, 0, o, f"{prompt}{i // seeds}", mode=mode)
        for i, o in enumerate(outcomes)
    ]


def table_outcomes(both_correct, lost, gained, both_wrong):
    """Baseline and candidate outcome lists for a paired table, question by question."""
    b = ["correct"] * (both_correct + lost) + ["incorrect"] * (gained + both_wrong)
    c = ["correct"] * both_correct + ["incorrect"] * lost + ["correct"] * gained + ["incorrect"] * both_wrong
    return b, c


def write_records(path: Path, items, **options) -> Path:
    """Write ``items`` (records, or outcome strings for :func:`make_records` with ``options``)
    to a new records file at ``path`` with qualgate's own writer."""
    from qualgate.records import Record, RecordWriter

    records = items if items and isinstance(items[0], Record) else make_records(items, **options)
    with RecordWriter(path) as writer:
        writer.write_batch(records)
    return path


# --- tiny models -----------------------------------------------------------------------------


@functools.cache
def tiny_llama_pair(vocab: int, seed: int = 0, *, pad: int | None = None, bos: int | None = 1, eos: int = 2):
    """A 2-layer target and a 1-layer drafter sharing its embeddings, first layer and head
    (random weights from ``seed``; built from a config, no download).

    ``initializer_range=0.3`` makes the distributions peaked and context dependent; the
    shared weights make the drafter agree with the target often, not always.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    common = dict(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        initializer_range=0.3,
        tie_word_embeddings=False,
        pad_token_id=pad,
        bos_token_id=bos,
        eos_token_id=eos,
    )
    torch.manual_seed(seed)
    target = LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, **common)).eval()
    drafter = LlamaForCausalLM(LlamaConfig(num_hidden_layers=1, **common)).eval()
    drafter.load_state_dict(target.state_dict(), strict=False)
    return target, drafter


def save_demo_tokenizer_pair(root: Path) -> Path:
    """``root/target`` and ``root/drafter``: :func:`tiny_llama_pair` over the demo's character
    tokenizer, saved as Hugging Face folders (runs load them by path, as a user's config would)."""
    from qualgate.demo.tokenizer import build_tokenizer

    tok = build_tokenizer()
    pair = tiny_llama_pair(len(tok), 0, pad=tok.pad_token_id, bos=None, eos=tok.eos_token_id)
    for name, model in zip(("target", "drafter"), pair):
        model.save_pretrained(root / name)
        tok.save_pretrained(root / name)
    return root


# --- plans ----------------------------------------------------------------------------------

SUITE = """\
name: tiny_arith
version: 1
source: {{generator: demo_arithmetic, params: {{n: {n}, seed: 0}}}}
id: {{field: id}}
fields: {{question: question}}
gold: {{field: answer}}
prompt:
  system: "Work step by step. End with: The answer is N."
  user: "{{{{question}}}}"
extract:
  strict: {{name: after_marker, params: {{marker: "The answer is"}}}}
  lenient: last_number
grader: numeric
decides: lenient
generation: {{max_tokens: 16}}
"""

SPECULATIVE = {
    "target": "",
    "standard": "speculative: {model: MODELS/drafter, num_speculative_tokens: 3}\n",
    "fly": (
        "speculative: {model: MODELS/drafter, num_speculative_tokens: 3, "
        "rejection_sample_method: fly, fly_window_size: 1, fly_entropy_threshold: 0.0}\n"
    ),
}


def write_plan(
    where: Path,
    models: Path | None = None,
    *,
    questions: int = 3,
    seeds=(0, 1),
    samples: int = 1,
    configs=("target", "standard", "fly"),
    batch_size: int = 4,
    max_tokens: int = 12,
    temperature: float = 1.0,
    engine: str = "toy",
    gate: str = "{margin: 0.05}",
) -> Path:
    """Write suite.yaml, one config per name (baseline: the first) and plan.yaml into ``where``.

    ``engine``: ``toy`` (``tests/toy_engine.py``, no torch) for the tests of the harness;
    ``reference`` with ``models`` (:func:`save_demo_tokenizer_pair`) for the tests of the
    reference engine. The toy reads ``models`` as names only (``toy/target`` when omitted).
    """
    if engine == "toy" and models is not None:
        raise ValueError("models are the reference engine's: pass engine='reference' with them")
    where.mkdir(parents=True, exist_ok=True)
    models = "toy" if models is None else models
    (where / "suite.yaml").write_text(SUITE.format(n=questions))
    for name in configs:
        (where / f"{name}.yaml").write_text(
            f"engine: {engine}\nmodel: {models}/target\n"
            f"sampling: {{temperature: {temperature}, max_tokens: {max_tokens}}}\n"
            f"engine_options: {{device: cpu, batch_size: {batch_size}}}\n"
            + SPECULATIVE[name].replace("MODELS", str(models))
        )
    (where / "plan.yaml").write_text(
        textwrap.dedent(f"""\
        name: tiny
        suites: [{{suite: suite.yaml}}]
        seeds: {list(seeds)}
        samples: {samples}
        configs: {{{", ".join(f"{c}: {c}.yaml" for c in configs)}}}
        baseline: {configs[0]}
        gate: {gate}
        """)
    )
    return where / "plan.yaml"
