"""inspect_ai logs written by inspect_ai's own log writer, read back through qualgate's importer."""

import pytest

from qualgate.errors import DataError
from qualgate.records.importers import ImportOptions, detect_format, import_records
from qualgate.records.prompts import prompt_hash

pytest.importorskip("inspect_ai")
pytestmark = pytest.mark.slow  # importing inspect_ai takes a few seconds


def _write_log(path, *, samples=None, log_format=None):
    from inspect_ai.log import EvalConfig, EvalDataset, EvalError, EvalLog, EvalSample, EvalSpec, write_eval_log
    from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig, ModelOutput
    from inspect_ai.scorer import Score

    def out(text):
        return ModelOutput.from_content("hf/demo-target", text)

    chat = [ChatMessageSystem(content="End with: The answer is N."), ChatMessageUser(content="What is 1 + 1?")]
    if samples is None:
        samples = [
            EvalSample(id="q0", epoch=1, input="What is 0 + 0?", target="0", output=out("The answer is 0."),
                       scores={"match": Score(value="C", answer="0")}),
            EvalSample(id="q0", epoch=2, input="What is 0 + 0?", target="0", output=out("The answer is 1."),
                       scores={"match": Score(value="I", answer="1")}),
            EvalSample(id="q1", epoch=1, input=chat, target="2", output=out("no idea"),
                       scores={"match": Score(value="N")}),
            EvalSample(id="q1", epoch=2, input=chat, target="2", output=ModelOutput(),
                       error=EvalError(message="RuntimeError: engine failed", traceback="", traceback_ansi="")),
        ]  # fmt: skip
    spec = EvalSpec(created="2026-11-30T00:00:00+00:00", task="arith", task_version=3,
                    dataset=EvalDataset(name="arith"), model="hf/demo-target", model_args={"device": "cpu"},
                    model_generate_config=GenerateConfig(temperature=0.0, seed=7), config=EvalConfig(epochs=2))  # fmt: skip
    write_eval_log(EvalLog(eval=spec, samples=samples, status="success"), str(path), format=log_format or "auto")
    return chat


@pytest.mark.parametrize("suffix", [".eval", ".json"])
def test_inspect_log_maps_epochs_scores_and_errors(tmp_path, suffix):
    path = tmp_path / f"log{suffix}"
    chat = _write_log(path)
    assert detect_format(path) == "inspect"
    records = sorted((x.record for x in import_records("inspect", path)), key=lambda r: r.key)
    assert [(r.question_id, r.sample_index, r.outcome) for r in records] == [
        ("q0", 0, "correct"), ("q0", 1, "incorrect"), ("q1", 0, "no_answer"), ("q1", 1, "error"),
    ]  # fmt: skip
    q0, _, q1, failed = records
    assert (q0.suite, q0.suite_version, q0.seed, q0.answer_strict, q0.gold) == ("arith", "3", 7, "0", "0")
    assert q0.output == "The answer is 0." and failed.error == "RuntimeError: engine failed"
    assert q0.prompt_hash == prompt_hash("What is 0 + 0?")
    assert q1.prompt_hash == prompt_hash([{"role": m.role, "content": m.text} for m in chat])
    assert q0.config_id.startswith("inspect-") and len({r.config_id for r in records}) == 1


def test_inspect_partial_credit_is_refused_naming_the_sample(tmp_path):
    from inspect_ai.log import EvalSample
    from inspect_ai.scorer import Score

    path = tmp_path / "log.json"
    _write_log(path, samples=[EvalSample(id="q0", epoch=1, input="x", target="0", scores={"match": Score(value="P")})])
    with pytest.raises(DataError, match=r"log.json:1: field 'scores.match.value' = \"'P'\""):
        import_records("inspect", path)


def test_inspect_scorer_option_names_a_missing_scorer(tmp_path):
    path = tmp_path / "log.eval"
    _write_log(path)
    with pytest.raises(DataError, match=r"no score 'judge' on this sample \(scores: match\)"):
        import_records("inspect", path, ImportOptions(metric="judge"))
