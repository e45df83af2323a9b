"""What a gate report records about each side, and how two sides compare
(:mod:`qualgate.evidence.binding`)."""

from qualgate.evidence.binding import compare_sides, describe_side

TARGET = "Qwen/Qwen3-8B"
FLY = {
    "method": "draft_model",
    "model": "Qwen/Qwen3-0.6B",
    "num_speculative_tokens": 8,
    "rejection_sample_method": "fly",
    "fly_window_size": 2,
}
SAMPLING = {"temperature": 1.0, "max_tokens": 64}


def test_a_report_that_does_not_record_the_candidates_sampling_cannot_bind_it():
    base = describe_side(TARGET, None, {"dtype": "bfloat16"}, sampling={"temperature": 1.0})
    cand = describe_side(TARGET, FLY, {"dtype": "bfloat16"})  # a vllm serve command: no sampling
    b = compare_sides(base, cand)
    assert not b.differences and not b.bound
    assert b.unknown[0].startswith("sampling: not recorded for the candidate")


def test_weights_named_by_two_spellings_of_one_path_are_the_same_target(tmp_path):
    (tmp_path / "w").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "w")
    s = {"temperature": 0.0}
    a = describe_side(f"{tmp_path}/w/", None, sampling=s)
    b = describe_side(f"{tmp_path}/link", FLY | {"model": f"{tmp_path}/d"}, sampling=s)
    assert compare_sides(a, b).bound
    c = describe_side(f"{tmp_path}/other", None, sampling=s)
    assert compare_sides(c, b).differences[0].startswith("target model:")


def test_the_target_only_config_of_the_same_target_is_the_candidates_own_reference():
    base = describe_side(TARGET, None, {"dtype": "bfloat16"}, sampling=SAMPLING, engine="vllm")
    cand = describe_side(TARGET, FLY, {"dtype": "bfloat16"}, sampling=SAMPLING, engine="vllm")
    assert compare_sides(base, cand).bound


def test_each_numerics_option_that_differs_is_named():
    base = describe_side(TARGET, None, {"dtype": "float16", "max_model_len": 4096}, sampling=SAMPLING)
    cand = describe_side(TARGET, FLY, {"dtype": "bfloat16"}, sampling=SAMPLING)
    assert compare_sides(base, cand).differences == (
        'dtype: baseline "float16", candidate "bfloat16"',
        "max_model_len: baseline 4096, candidate null",
    )


def test_an_engine_version_recorded_on_one_side_only_cannot_be_compared():
    base = describe_side(TARGET, None, sampling=SAMPLING, engine="vllm", engine_version="0.33.0")
    cand = describe_side(TARGET, FLY, sampling=SAMPLING, engine="vllm")
    assert compare_sides(base, cand).unknown == ("engine_version: recorded for the baseline only",)
    cand = describe_side(TARGET, FLY, sampling=SAMPLING, engine="vllm", engine_version="0.34.0")
    assert compare_sides(base, cand).differences == ('engine_version: baseline "0.33.0", candidate "0.34.0"',)


def test_a_lossy_baseline_against_a_lossless_candidate_is_swapped():
    fly = describe_side(TARGET, FLY, sampling=SAMPLING)
    target = describe_side(TARGET, None, sampling=SAMPLING)
    assert compare_sides(fly, target).swapped.startswith("swapped sides: the baseline is lossy ('fly' by its config)")
    assert compare_sides(target, fly).swapped is None
    assert compare_sides(None, None, baseline_mode="fly", candidate_mode="standard").swapped


def test_the_chat_template_arguments_must_match_and_other_engine_options_only_warn():
    base = describe_side(TARGET, None, sampling=SAMPLING, engine_options={"chat_template_kwargs": {"think": True}})
    cand = describe_side(TARGET, FLY, sampling=SAMPLING, engine_options={"max_num_seqs": 8})
    b = compare_sides(base, cand)
    assert b.differences == ('engine option chat_template_kwargs: baseline {"think": true}, candidate null',)
    assert b.other == ("engine option max_num_seqs: baseline null, candidate 8",)
