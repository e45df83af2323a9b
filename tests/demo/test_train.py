"""Deterministic training of the demo models, at tiny scale on CPU."""

import json

import pytest

torch = pytest.importorskip("torch")

from qualgate.demo import task, train  # noqa: E402
from qualgate.demo.tokenizer import build_tokenizer  # noqa: E402

TINY = "layers=1,hidden=32,heads=2,ff=64"
TOK = build_tokenizer()
ROWS = task.generate(n=300, seed=0, split="train")
DATA = train.encode_rows(ROWS, TOK)


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _train(seed=0, steps=20):
    model, history = train.train_model(
        TINY,
        tokenizer=TOK,
        data=DATA,
        steps=steps,
        batch_size=16,
        lr=3e-3,
        seed=seed,
        warmup=5,
        log_every=10,
        log=lambda _: None,
    )
    return model, history


def test_encoded_rows_mark_the_assistant_turn():
    tokens, prompt_lens, lengths = DATA
    for i in (0, 7, 299):
        ids = tokens[i, : lengths[i]].tolist()
        assert ids[prompt_lens[i] - 1] == TOK.convert_tokens_to_ids("<|assistant|>")
        assert ids[-1] == TOK.eos_token_id
        assert TOK.decode(ids[prompt_lens[i] : -1]) == ROWS[i]["reference"]


@pytest.mark.slow
def test_two_runs_give_identical_weights():
    a, ha = _train()
    b, hb = _train()
    assert train.weights_sha256(a) == train.weights_sha256(b)
    assert ha["loss"] == hb["loss"]


@pytest.mark.slow
def test_another_seed_gives_other_weights():
    assert train.weights_sha256(_train(seed=0)[0]) != train.weights_sha256(_train(seed=1)[0])


@pytest.mark.slow
def test_training_lowers_the_loss():
    _, history = _train(steps=40)
    assert history["loss"][-1][1] < history["loss"][0][1]


def test_a_model_agrees_with_itself_everywhere():
    model, _ = _train(steps=1)
    rows = task.generate(n=4, seed=0)
    _, completions = train.generate_texts(model, TOK, rows, temperature=1.0, seed=0, max_new_tokens=12)
    res = train.agreement(model, model, TOK, rows, completions, k=4)
    assert res["agreement"] == 1.0
    # each drafting step accepts k tokens and emits k + 1, until the completion runs out
    steps = sum(-(-len(c) // 5) for c in completions)
    assert res["greedy_acceptance_length"] == sum(map(len, completions)) / steps


@pytest.mark.slow
def test_command_writes_loadable_models_and_metrics(tmp_path, capsys):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    rc = train.main(
        [
            "--out",
            str(tmp_path),
            "--threads",
            "1",
            "--target-shape",
            TINY,
            "--drafter-shape",
            "layers=1,hidden=16,heads=1,ff=32",
            "--target-steps",
            "4",
            "--drafter-steps",
            "4",
            "--batch-size",
            "8",
            "--train-size",
            "64",
            "--target-eval-every",
            "2",
            "--drafter-eval-every",
            "2",
            "--eval-n",
            "4",
            "--final-n",
            "4",
            "--target-stop",
            "0.5",
        ]
    )
    assert rc == 0
    metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert metrics == json.loads((tmp_path / "metrics.json").read_text())
    for which in ("target", "drafter"):
        model = AutoModelForCausalLM.from_pretrained(tmp_path / which)
        assert train.weights_sha256(model) == metrics[which]["weights_sha256"]
        assert (tmp_path / which / "model.safetensors").is_file()
        tok = AutoTokenizer.from_pretrained(tmp_path / which)
        assert tok.apply_chat_template(
            task.messages("What is 1 + 2?"), tokenize=False, add_generation_prompt=True
        ).endswith("<|assistant|>")
        assert set(metrics[which]["test"]) >= {"greedy", "sampled"}
        assert len(metrics[which]["evals"]) == 2
    assert set(metrics["drafter_vs_target"]) == {"agreement", "greedy_acceptance_length", "k"}


@pytest.mark.slow
def test_only_drafter_retrains_the_drafter_and_keeps_the_target(tmp_path, capsys):
    common = [
        "--out",
        str(tmp_path),
        "--threads",
        "1",
        "--target-shape",
        TINY,
        "--drafter-shape",
        "layers=1,hidden=16,heads=1,ff=32",
        "--target-steps",
        "2",
        "--batch-size",
        "8",
        "--train-size",
        "64",
        "--eval-n",
        "2",
        "--final-n",
        "2",
    ]
    assert train.main(common + ["--drafter-steps", "2"]) == 0
    first = json.loads((tmp_path / "metrics.json").read_text())
    assert train.main(common + ["--drafter-steps", "3", "--only", "drafter"]) == 0
    second = json.loads((tmp_path / "metrics.json").read_text())
    assert second["target"]["weights_sha256"] == first["target"]["weights_sha256"]
    assert second["drafter"]["steps"] == 3
    assert "drafter_vs_target" in second
