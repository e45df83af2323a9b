"""Tiny real models (random Llama weights, the demo's character tokenizer) and plan files.

The models are saved as Hugging Face folders once per session, so that runs load them by
path exactly as a user's config would; plans, configs and the suite are written per test.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def models(tmp_path_factory) -> Path:
    """``DIR/target`` (2 layers) and ``DIR/drafter`` (1 layer sharing the target's embeddings,
    first layer and head, so that it agrees with the target often, not always)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from qualgate.demo.tokenizer import build_tokenizer

    tok = build_tokenizer()
    common = dict(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.3,
        tie_word_embeddings=False, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
        bos_token_id=None,
    )  # fmt: skip
    torch.manual_seed(0)
    target = LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, **common)).eval()
    drafter = LlamaForCausalLM(LlamaConfig(num_hidden_layers=1, **common)).eval()
    drafter.load_state_dict(target.state_dict(), strict=False)
    root = tmp_path_factory.mktemp("models")
    for name, model in (("target", target), ("drafter", drafter)):
        model.save_pretrained(root / name)
        tok.save_pretrained(root / name)
    return root


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
    models: Path,
    *,
    questions: int = 3,
    seeds=(0, 1),
    samples: int = 1,
    configs=("target", "standard", "fly"),
    batch_size: int = 4,
    max_tokens: int = 12,
    temperature: float = 1.0,
    engine: str = "reference",
    gate: str = "{margin: 0.05}",
) -> Path:
    """Write suite.yaml, one config per name (baseline: the first) and plan.yaml into ``where``."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "suite.yaml").write_text(SUITE.format(n=questions))
    for name in configs:
        (where / f"{name}.yaml").write_text(
            f"engine: {engine}\nmodel: {models}/target\n"
            f"sampling: {{temperature: {temperature}, max_tokens: {max_tokens}}}\n"
            f"engine_options: {{device: cpu, batch_size: {batch_size}}}\n"
            + SPECULATIVE[name].replace("MODELS", str(models))
        )
    (where / "plan.yaml").write_text(textwrap.dedent(f"""\
        name: tiny
        suites: [{{suite: suite.yaml}}]
        seeds: {list(seeds)}
        samples: {samples}
        configs: {{{", ".join(f"{c}: {c}.yaml" for c in configs)}}}
        baseline: {configs[0]}
        gate: {gate}
        """))
    return where / "plan.yaml"


@pytest.fixture(scope="session")
def plan_writer():
    """:func:`write_plan` itself (for module-scoped fixtures)."""
    return write_plan


@pytest.fixture
def plan_factory(tmp_path, models):
    """``plan_factory(**options) -> plan path`` (see :func:`write_plan`), in ``tmp_path/plan``."""
    return lambda **kw: write_plan(tmp_path / "plan", models, **kw)
