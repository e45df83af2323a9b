"""inspect_ai logs written by inspect_ai's own log writer, and real logs others wrote
(``fixtures/inspect``, see its README), read back through qualgate's importer."""

from pathlib import Path

import pytest

from qualgate.errors import DataError
from qualgate.records.importers import ImportOptions, detect_format, import_records
from qualgate.records.prompts import prompt_hash

pytest.importorskip("inspect_ai")
pytestmark = pytest.mark.slow  # importing inspect_ai takes a few seconds


def _write_log(path, *, samples=None, log_format=None, status="success", error=None):
    from inspect_ai.log import EvalConfig, EvalDataset, EvalError, EvalLog, EvalSample, EvalSpec, write_eval_log
    from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig, ModelOutput
    from inspect_ai.scorer import Score

    def out(text):
        return ModelOutput.from_content("hf/demo-target", text)

    chat = [ChatMessageSystem(content="End with: The answer is N."), ChatMessageUser(content="What is 1 + 1?")]
    if samples is None:
        samples = [
            EvalSample(
                id="q0",
                epoch=1,
                input="What is 0 + 0?",
                target="0",
                output=out("The answer is 0."),
                scores={"match": Score(value="C", answer="0")},
            ),
            EvalSample(
                id="q0",
                epoch=2,
                input="What is 0 + 0?",
                target="0",
                output=out("The answer is 1."),
                scores={"match": Score(value="I", answer="1")},
            ),
            EvalSample(
                id="q1", epoch=1, input=chat, target="2", output=out("no idea"), scores={"match": Score(value="N")}
            ),
            EvalSample(
                id="q1",
                epoch=2,
                input=chat,
                target="2",
                output=ModelOutput(),
                error=EvalError(message="RuntimeError: engine failed", traceback="", traceback_ansi=""),
            ),
        ]
    spec = EvalSpec(
        created="2026-11-30T00:00:00+00:00",
        task="arith",
        task_version=3,
        dataset=EvalDataset(name="arith", samples=2),
        model="hf/demo-target",
        model_args={"device": "cpu"},
        model_generate_config=GenerateConfig(temperature=0.0, seed=7),
        config=EvalConfig(epochs=2),
    )
    write_eval_log(
        EvalLog(eval=spec, samples=samples, status=status, error=error), str(path), format=log_format or "auto"
    )
    return chat


@pytest.mark.parametrize("suffix", [".eval", ".json"])
def test_inspect_log_maps_epochs_scores_and_errors(tmp_path, suffix):
    path = tmp_path / f"log{suffix}"
    chat = _write_log(path)
    assert detect_format(path) == "inspect"
    records = sorted((x.record for x in import_records("inspect", path)), key=lambda r: r.key)
    assert [(r.question_id, r.sample_index, r.outcome) for r in records] == [
        ("q0", 0, "correct"),
        ("q0", 1, "incorrect"),
        ("q1", 0, "no_answer"),
        ("q1", 1, "error"),
    ]
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


def test_inspect_unscored_log_says_it_was_not_scored_and_how_to_score_it(tmp_path):
    from inspect_ai.log import EvalSample

    path = tmp_path / "log.eval"
    _write_log(path, samples=[EvalSample(id=f"q{i}", epoch=1, input="x", target="0") for i in range(3)])
    with pytest.raises(DataError, match=r"field 'samples.scores': the log was not scored .*`inspect score LOG`"):
        import_records("inspect", path)


def test_inspect_dict_valued_score_is_chosen_by_scorer_dot_key(tmp_path):
    from inspect_ai.log import EvalSample
    from inspect_ai.scorer import Score

    def sample(i, strict, loose):  # inspect_evals' ifeval scores a dict per sample
        value = {"prompt_level_strict": strict, "inst_level_strict": 0.5, "prompt_level_loose": loose}
        return EvalSample(
            id=f"q{i}", epoch=1, input="x", target="", scores={"instruction_following": Score(value=value)}
        )

    path = tmp_path / "log.json"
    _write_log(path, samples=[sample(0, True, True), sample(1, False, True)])
    with pytest.raises(
        DataError,
        match=r"log.json:1: field 'scores.instruction_following.value': a dict is the score "
        r"of 'instruction_following' \(keys: prompt_level_strict, inst_level_strict, "
        r"prompt_level_loose\): choose one with --metric instruction_following.KEY",
    ):
        import_records("inspect", path)
    pick = lambda key: [x.record.outcome for x in import_records("inspect", path, ImportOptions(metric=key))]
    assert pick("instruction_following.prompt_level_strict") == ["correct", "incorrect"]
    assert pick("instruction_following.prompt_level_loose") == ["correct", "correct"]
    with pytest.raises(DataError, match=r"field 'scores.instruction_following.value.inst_level_strict' = '0.5'"):
        pick("instruction_following.inst_level_strict")
    with pytest.raises(DataError, match=r"no key 'strict' in the score"):
        pick("instruction_following.strict")


@pytest.mark.parametrize("status", ["cancelled", "error", "started"])
def test_inspect_log_that_did_not_finish_is_refused_unless_partial_is_asked(tmp_path, status):
    from inspect_ai.log import EvalError, EvalSample
    from inspect_ai.scorer import Score

    path = tmp_path / "log.eval"
    error = EvalError(message="RateLimitError: quota", traceback="", traceback_ansi="") if status == "error" else None
    _write_log(
        path,
        samples=[EvalSample(id="q0", epoch=1, input="x", target="0", scores={"m": Score(value="C")})],
        status=status,
        error=error,
    )
    why = r" \(RateLimitError: quota\)" if status == "error" else ""
    with pytest.raises(
        DataError,
        match=rf"field 'status' = '{status}': log status '{status}'{why}: .*1 samples are a part "
        r"of it \(the dataset has 2 samples\).*inspect eval-retry",
    ):
        import_records("inspect", path)
    assert [x.record.outcome for x in import_records("inspect", path, ImportOptions(partial=True))] == ["correct"]


def test_error_pairs_are_refused_with_each_error_once_and_unescaped(tmp_path):
    from click.testing import CliRunner
    from inspect_ai.log import EvalError, EvalSample
    from inspect_ai.model import ModelOutput
    from inspect_ai.scorer import Score

    from qualgate.cli import cli

    message = (
        """BadRequestError: Error code: 400 - {'error': {'message': "This model's maximum context length is 4096"}}"""
    )
    for name in ("base", "cand"):
        _write_log(
            tmp_path / f"{name}.eval",
            samples=[
                EvalSample(
                    id="q0",
                    epoch=1,
                    input="x",
                    target="0",
                    output=ModelOutput(),
                    error=EvalError(message=message, traceback="Traceback ...", traceback_ansi=""),
                ),
                EvalSample(id="q1", epoch=1, input="y", target="1", scores={"m": Score(value="C")}),
            ],
        )
    r = CliRunner().invoke(
        cli, ["gate", str(tmp_path / "base.eval"), str(tmp_path / "cand.eval"), "--margin", "0.1", "--config-id", "c"]
    )
    assert r.exit_code == 3, r.output
    assert r.output.count("maximum context length") == 1 and "\\" not in r.output
    assert f"baseline and candidate error: {message}" in r.output


REAL = Path(__file__).parent / "fixtures" / "inspect"


def test_inspect_real_log_reads_as_its_own_results():
    from inspect_ai.log import read_eval_log

    path = REAL / "data_arc_qwen.json"
    records = [x.record for x in import_records("inspect", path)]
    (score,) = read_eval_log(str(path)).results.scores
    assert len(records) == 3 and records[0].suite == "inspect_evals/arc_easy"
    assert sum(r.outcome == "correct" for r in records) / len(records) == pytest.approx(score.metrics["accuracy"].value)


def test_inspect_log_holding_fewer_samples_than_its_results_count_is_refused():
    path = REAL / "data_intercode_ctf_local_path.json"
    with pytest.raises(
        DataError, match=r"field 'samples': 1 samples of the 79 its results count \(results.total_samples\)"
    ):
        import_records("inspect", path)
    assert len(import_records("inspect", path, ImportOptions(partial=True))) == 1


def test_inspect_log_without_samples_is_refused(tmp_path):
    path = tmp_path / "log.eval"
    _write_log(path, samples=[])
    with pytest.raises(
        DataError, match=r"field 'samples': the log holds no samples \(was it written with --no-log-samples\?\)"
    ):
        import_records("inspect", path)
