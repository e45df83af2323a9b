"""The shipped demo pair in qualgate/demo/weights."""

import json

import pytest

from qualgate.demo import WEIGHTS_DIR, model_path, task

torch = pytest.importorskip("torch")
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from qualgate.demo.tokenizer import build_tokenizer  # noqa: E402
from qualgate.demo.train import evaluate, weights_sha256  # noqa: E402

MODELS = {w: AutoModelForCausalLM.from_pretrained(model_path(w), dtype=torch.float32) for w in ("target", "drafter")}


def test_weights_take_less_than_10_mb():
    size = sum(p.stat().st_size for p in WEIGHTS_DIR.rglob("*") if p.is_file())
    assert size < 10 * 2**20


def test_weights_are_the_ones_the_training_metrics_describe():
    metrics = json.loads((WEIGHTS_DIR / "metrics.json").read_text())
    for which, model in MODELS.items():
        assert weights_sha256(model) == metrics[which]["weights_sha256"]


def test_both_models_use_the_demo_tokenizer():
    built = build_tokenizer()
    conv = task.messages("What is 12 * 3 - 5?")
    for which in MODELS:
        tok = AutoTokenizer.from_pretrained(model_path(which))
        assert tok.get_vocab() == built.get_vocab()
        assert tok.chat_template == built.chat_template
        assert tok.apply_chat_template(
            conv, add_generation_prompt=True, return_dict=False
        ) == built.apply_chat_template(conv, add_generation_prompt=True, return_dict=False)
        assert MODELS[which].config.vocab_size == len(built)


def test_drafter_is_3_to_10_times_smaller():
    n = {w: sum(p.numel() for p in m.parameters()) for w, m in MODELS.items()}
    assert 3 <= n["target"] / n["drafter"] <= 10


@pytest.mark.slow
def test_target_answers_most_test_questions_greedily():
    torch.set_num_threads(1)
    rows = task.generate(n=32, seed=0)
    res = evaluate(MODELS["target"], build_tokenizer(), rows, temperature=0.0, seed=0)
    assert res["accuracy"] >= 0.5
    assert res["no_answer"] <= 0.1
