"""ReferenceEngine: greedy exactness, batching, coupling, stops, metrics, validation."""

from __future__ import annotations

import copy
import json
import logging
import time

import pytest

torch = pytest.importorskip("torch")

from qualgate.engines import reference  # noqa: E402
from qualgate.engines.reference import ReferenceEngine  # noqa: E402
from qualgate.vllm033.speculative import FLY_LOSSY_WARNING  # noqa: E402

GREEDY = {"temperature": 0.0, "max_tokens": 24, "ignore_eos": True}
SAMPLED = {"temperature": 0.9, "top_p": 0.95, "max_tokens": 24, "ignore_eos": True}


def prompts(n, vocab=32):
    """n prompts of lengths 1..12, deterministic."""
    g = torch.Generator().manual_seed(n)
    return [torch.randint(3, vocab, (1 + i % 12,), generator=g).tolist() for i in range(n)]


def seeded(settings, n, first=0):
    return [dict(settings, seed=first + i) for i in range(n)]


def tokens(gen):
    return [o.token_ids for o in gen]


# ----------------------------------------------------------------------- greedy exactness


@pytest.mark.parametrize("k", [1, 2, 3, 5])
@pytest.mark.parametrize("batch", [1, 5, 17])
@pytest.mark.slow
def test_greedy_standard_equals_greedy_target_only_token_for_token(engine32, k, batch):
    ps = prompts(batch)
    base = engine32.generate(ps, sampling=GREEDY)
    spec = engine32.generate(ps, sampling=GREEDY, speculative={"num_speculative_tokens": k})
    assert tokens(spec) == tokens(base)
    assert spec.metrics.num_accepted_tokens > 0


@pytest.mark.slow
def test_greedy_standard_with_a_probabilistic_drafter_is_still_greedy(engine32):
    ps = prompts(6)
    base = engine32.generate(ps, sampling=GREEDY)
    spec = engine32.generate(
        ps, sampling=GREEDY, speculative={"num_speculative_tokens": 3, "draft_sample_method": "probabilistic"}
    )
    assert tokens(spec) == tokens(base)


@pytest.mark.parametrize("settings", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
@pytest.mark.slow
def test_fly_equals_standard_when_tau_exceeds_the_largest_top_k_entropy(engine32, settings):
    # the top-3 entropy is at most ln 3 = 1.0986 nats (three probabilities of 1/3)
    ps = prompts(16)
    sampling = seeded(settings, 16)
    std = engine32.generate(ps, sampling=sampling, speculative={"num_speculative_tokens": 4})
    fly = engine32.generate(
        ps,
        sampling=sampling,
        speculative={
            "num_speculative_tokens": 4,
            "rejection_sample_method": "fly",
            "fly_window_size": 1,
            "fly_entropy_threshold": 1.0987,
        },
    )
    assert tokens(fly) == tokens(std)
    assert fly.metrics.num_deferred_tokens == 0
    assert fly.metrics.acceptance_histogram == std.metrics.acceptance_histogram


@pytest.mark.slow
def test_fly_defers_and_changes_greedy_outputs_at_a_low_threshold(engine32):
    ps = prompts(16)
    base = engine32.generate(ps, sampling=GREEDY)
    fly = engine32.generate(
        ps,
        sampling=GREEDY,
        speculative={
            "num_speculative_tokens": 4,
            "rejection_sample_method": "fly",
            "fly_window_size": 1,
            "fly_entropy_threshold": 0.0,
        },
    )
    assert fly.metrics.num_deferred_tokens > 0
    assert tokens(fly) != tokens(base)
    changed = [o.metrics.num_deferred_tokens > 0 for o, b in zip(fly, base) if o.token_ids != b.token_ids]
    assert all(changed)  # only a deferral can change a greedy output


# ----------------------------------------------------------------------- batching and seeds

MODES = {
    "target": None,
    "standard": {"num_speculative_tokens": 3},
    "fly": {"num_speculative_tokens": 3, "rejection_sample_method": "fly", "fly_window_size": 1},
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.slow
def test_a_greedy_request_alone_and_in_a_batch_of_32_gives_the_same_tokens(engine32, mode):
    ps = prompts(32)
    batch = engine32.generate(ps, sampling=GREEDY, speculative=MODES[mode])
    for i in (0, 7, 31):
        alone = engine32.generate([ps[i]], sampling=GREEDY, speculative=MODES[mode])
        assert alone[0].token_ids == batch[i].token_ids


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.slow
def test_a_seeded_request_alone_and_in_a_batch_gives_the_same_tokens(engine32, mode):
    ps = prompts(32)
    sampling = seeded(SAMPLED, 32, first=50)
    batch = engine32.generate(ps, sampling=sampling, speculative=MODES[mode])
    for i in (0, 13, 31):
        alone = engine32.generate([ps[i]], sampling=sampling[i], speculative=MODES[mode])
        assert alone[0].token_ids == batch[i].token_ids


@pytest.mark.slow
def test_greedy_rows_are_unaffected_by_sampled_rows_in_the_same_batch(engine32):
    ps = prompts(8)
    mixed = [GREEDY if i % 2 else dict(SAMPLED, seed=i) for i in range(8)]
    spec = {"num_speculative_tokens": 3, "draft_sample_method": "probabilistic"}
    out = engine32.generate(ps, sampling=mixed, speculative=spec)
    base = engine32.generate(ps[1::2], sampling=GREEDY)
    assert tokens(out)[1::2] == tokens(base)


@pytest.mark.slow
def test_decoding_in_batches_of_max_num_seqs_gives_the_same_outputs(make_pair, device):
    ps = prompts(10)
    sampling = seeded(SAMPLED, 10)
    spec = {"num_speculative_tokens": 2}
    one = ReferenceEngine(*make_pair(32), device=device).generate(ps, sampling=sampling, speculative=spec)
    small = ReferenceEngine(*make_pair(32), device=device, max_num_seqs=3)
    out = small.generate(ps, sampling=sampling, speculative=spec)
    assert tokens(out) == tokens(one)
    assert [o.index for o in out] == list(range(10))


def test_same_seed_same_output_and_different_seeds_differ(engine32):
    ps = prompts(1) * 3
    out = engine32.generate(ps, sampling=[dict(SAMPLED, seed=s) for s in (4, 4, 5)])
    assert out[0].token_ids == out[1].token_ids != out[2].token_ids


def test_unseeded_requests_record_the_seed_they_drew(engine32):
    torch.manual_seed(0)
    out = engine32.generate(prompts(2), sampling=SAMPLED)
    assert out[0].seed != out[1].seed
    again = engine32.generate(prompts(2)[:1], sampling=dict(SAMPLED, seed=out[0].seed))
    assert again[0].token_ids == out[0].token_ids


# ----------------------------------------------------------------------- coupling


@pytest.mark.slow
def test_coupled_standard_reproduces_target_only_samples_exactly(engine32):
    n = 300
    ps = prompts(n)
    sampling = seeded(SAMPLED, n, first=7)
    base = engine32.generate(ps, sampling=sampling)
    for drafter in ("greedy", "probabilistic"):
        spec = {"num_speculative_tokens": 3, "coupled": True, "draft_sample_method": drafter}
        out = engine32.generate(ps, sampling=sampling, speculative=spec)
        assert tokens(out) == tokens(base)
        assert out.metrics.num_accepted_tokens > 0


@pytest.mark.slow
def test_independent_standard_does_not_share_the_target_only_sample_path(engine32):
    n = 100
    ps = prompts(n)
    sampling = seeded(SAMPLED, n, first=7)
    base = engine32.generate(ps, sampling=sampling)
    out = engine32.generate(ps, sampling=sampling, speculative={"num_speculative_tokens": 3})
    assert [o.token_ids[0] for o in out] == [o.token_ids[0] for o in base]  # first token: shared
    assert sum(a != b for a, b in zip(tokens(out), tokens(base))) > n / 2


@pytest.mark.slow
def test_coupled_fly_equals_target_only_wherever_it_did_not_defer(engine32):
    n = 200
    ps = prompts(n)
    sampling = seeded(SAMPLED, n, first=7)
    base = engine32.generate(ps, sampling=sampling)
    spec = {
        "num_speculative_tokens": 3,
        "rejection_sample_method": "fly",
        "fly_window_size": 1,
        "coupled": True,
    }
    out = engine32.generate(ps, sampling=sampling, speculative=spec)
    undeferred = [(o.token_ids, b.token_ids) for o, b in zip(out, base) if o.metrics.num_deferred_tokens == 0]
    assert 0 < len(undeferred) < n
    assert all(a == b for a, b in undeferred)


# ----------------------------------------------------------------------- stopping


@pytest.fixture(scope="module")
def reference_run(engine32):
    """A greedy output and a token whose first occurrence is at index 5."""
    for p in prompts(20):
        out = engine32.generate([p], sampling=GREEDY)[0].token_ids
        if out[5] not in out[:5]:
            return p, out
    pytest.fail("no suitable prompt")


@pytest.mark.parametrize("mode", ["target", "standard"])
def test_a_stop_token_ends_the_output_and_is_included(engine32, reference_run, mode):
    p, ref = reference_run
    out = engine32.generate([p], sampling=dict(GREEDY, stop_token_ids=[ref[5]]), speculative=MODES[mode])[0]
    assert out.token_ids == ref[:6]
    assert out.finish_reason == "stop"


def test_reaching_max_tokens_on_a_stop_token_reports_length_as_vllm_does(engine32, reference_run):
    p, ref = reference_run
    out = engine32.generate([p], sampling=dict(GREEDY, max_tokens=6, stop_token_ids=[ref[5]]))[0]
    assert out.token_ids == ref[:6] and out.finish_reason == "length"


@pytest.mark.parametrize("mode", ["target", "standard"])
def test_eos_stops_unless_ignore_eos(engine32, reference_run, mode):
    p, ref = reference_run
    eng = ReferenceEngine(engine32.target, engine32.drafter, device=engine32.device)
    eng.eos_token_ids = (ref[5],)
    out = eng.generate([p], sampling=dict(GREEDY, ignore_eos=False), speculative=MODES[mode])[0]
    assert out.token_ids == ref[:6] and out.finish_reason == "stop"
    out = eng.generate([p], sampling=GREEDY, speculative=MODES[mode])[0]
    assert out.token_ids == ref and out.finish_reason == "length"


@pytest.mark.parametrize("mode", MODES)
def test_max_tokens_per_prompt_is_honoured(engine32, mode):
    ps = prompts(3)
    sampling = [dict(GREEDY, max_tokens=m) for m in (1, 2, 9)]
    out = engine32.generate(ps, sampling=sampling, speculative=MODES[mode])
    assert [len(o.token_ids) for o in out] == [1, 2, 9]
    assert [o.finish_reason for o in out] == ["length"] * 3


# ----------------------------------------------------------------------- metrics


@pytest.mark.slow
def test_metrics_are_consistent_with_the_acceptance_histogram(engine32):
    out = engine32.generate(prompts(12), sampling=seeded(SAMPLED, 12), speculative={"num_speculative_tokens": 4})
    for o in out:
        m = o.metrics
        assert len(m.acceptance_histogram) == 5
        assert sum(m.acceptance_histogram) == m.num_drafts
        assert m.num_draft_tokens == 4 * m.num_drafts
        assert sum(a * c for a, c in enumerate(m.acceptance_histogram)) == m.num_accepted_tokens
        assert m.mean_acceptance_length == 1 + m.num_accepted_tokens / m.num_drafts
        assert m.accepted_per_position[0] == m.num_drafts - m.acceptance_histogram[0]
        assert m.num_output_tokens == len(o.token_ids) == 24
        assert 0 < m.wall_time_s <= out.wall_time_s
    agg = out.metrics
    assert agg.num_drafts == sum(o.metrics.num_drafts for o in out)
    assert out.tokens_per_second == pytest.approx(24 * 12 / out.wall_time_s)


def test_target_only_metrics_have_no_drafts(engine32):
    m = engine32.generate(prompts(1), sampling=GREEDY)[0].metrics
    assert (m.num_drafts, m.acceptance_histogram, m.mean_acceptance_length) == (0, (), None)


def test_fly_counts_deferred_tokens_as_accepted(engine32):
    spec = {
        "num_speculative_tokens": 4,
        "rejection_sample_method": "fly",
        "fly_window_size": 1,
        "fly_entropy_threshold": 0.0,
    }
    out = engine32.generate(prompts(8), sampling=GREEDY, speculative=spec)
    m = out.metrics
    assert 0 < m.num_deferred_tokens <= m.num_accepted_tokens


def test_generation_serialises_to_json(engine32):
    out = engine32.generate(prompts(2), sampling=GREEDY, speculative={"num_speculative_tokens": 2, "coupled": True})
    d = json.loads(json.dumps(out.to_dict()))
    assert d["mode"] == "standard" and d["speculative"]["coupled"] is True
    assert d["speculative"]["rejection_sample_method"] == "standard"
    assert d["outputs"][1]["token_ids"] == list(out[1].token_ids)


# ----------------------------------------------------------------------- the FLy warning


@pytest.mark.slow
def test_fly_logs_the_lossy_warning_once_per_process(engine32, caplog, monkeypatch):
    monkeypatch.setattr(reference, "_fly_warned", False)
    spec = {"num_speculative_tokens": 2, "rejection_sample_method": "fly"}
    with caplog.at_level(logging.WARNING, logger="qualgate.engines.reference"):
        engine32.generate(prompts(1), sampling=GREEDY, speculative={"num_speculative_tokens": 2})
        assert not caplog.records
        engine32.generate(prompts(1), sampling=GREEDY, speculative=spec)
        engine32.generate(prompts(1), sampling=GREEDY, speculative=spec)
        other = ReferenceEngine(engine32.target, engine32.drafter, device=engine32.device)
        other.generate(prompts(1), sampling=GREEDY, speculative=spec)
    assert [r.getMessage() for r in caplog.records] == [FLY_LOSSY_WARNING]


# ----------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "speculative, match",
    [
        ({"num_speculative_tokens": 1, "rejection_sample_method": "fly"}, "num_speculative_tokens >= 2"),
        ({"num_speculative_tokens": 3, "rejection_sample_method": "fly", "fly_window_size": 3}, "fly_window_size"),
        ({"num_speculative_tokens": 3, "rejection_sample_method": "block"}, r"'standard', 'fly'"),
        ({"num_speculative_tokens": 3, "method": "ngram"}, "draft_model"),
        ({"num_speculative_tokens": 3, "coupled": "yes"}, "coupled"),
        ({"num_speculative_tokens": 3, "typo": 1}, "typo"),
        ({"rejection_sample_method": "fly"}, "num_speculative_tokens"),
    ],
)
def test_invalid_speculative_configs_raise_naming_the_key(engine32, speculative, match):
    with pytest.raises(ValueError, match=match):
        engine32.generate(prompts(1), sampling=GREEDY, speculative=speculative)


def test_a_speculative_model_other_than_the_engines_drafter_is_an_error(make_pair, device):
    target, drafter = make_pair(32)
    drafter = copy.deepcopy(drafter)
    drafter.config._name_or_path = "my/drafter"
    eng = ReferenceEngine(target, drafter, device=device)
    ok = eng.generate(prompts(1), sampling=GREEDY, speculative={"num_speculative_tokens": 2, "model": "my/drafter/"})
    assert ok.speculative["model"] == "my/drafter/"
    with pytest.raises(ValueError, match="not this engine's drafter"):
        eng.generate(prompts(1), sampling=GREEDY, speculative={"num_speculative_tokens": 2, "model": "someone/else"})


def test_fly_defaults_are_resolved_as_vllm_does(engine32):
    out = engine32.generate(
        prompts(1), sampling=GREEDY, speculative={"num_speculative_tokens": 4, "rejection_sample_method": "fly"}
    )
    s = out.speculative
    assert (s["fly_window_size"], s["fly_entropy_threshold"], s["fly_entropy_top_k"]) == (3, 0.3, 3)
    assert s["coupled"] is False and s["draft_sample_method"] == "greedy"


def test_speculative_decoding_without_a_drafter_is_an_error(make_pair, device):
    eng = ReferenceEngine(make_pair(32)[0], device=device)
    with pytest.raises(ValueError, match="needs a drafter"):
        eng.generate(prompts(1), sampling=GREEDY, speculative={"num_speculative_tokens": 2})


@pytest.mark.parametrize(
    "bad, match",
    [
        ([[]], r"prompts\[0\]"),
        ([[1, 2, 99]], "outside"),
        (["hello"], "no tokenizer"),
        ([[{"role": "user", "content": "hi"}]], "no tokenizer"),
        ("hello", "list of prompts"),
    ],
)
def test_invalid_prompts_are_rejected(engine32, bad, match):
    with pytest.raises(ValueError, match=match):
        engine32.generate(bad, sampling=GREEDY)


def test_sampling_list_must_match_the_prompts(engine32):
    with pytest.raises(ValueError, match="3 entries for 2 prompts"):
        engine32.generate(prompts(2), sampling=[GREEDY] * 3)


def test_max_tokens_is_required(engine32):
    with pytest.raises(ValueError, match="max_tokens"):
        engine32.generate(prompts(1), sampling={"temperature": 0})


def test_prompt_plus_max_tokens_beyond_the_model_positions_is_rejected(engine32):
    with pytest.raises(ValueError, match="max_position_embeddings"):
        engine32.generate(prompts(1), sampling=dict(GREEDY, max_tokens=300))


# ----------------------------------------------------------------------- text, chat, stop strings


@pytest.fixture(scope="module")
def char_tokenizer():
    import tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = "abcdefghijklmnopqrstuvwxyz :."
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, **{c: i + 3 for i, c in enumerate(chars)}}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<pad>"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Split(tokenizers.Regex("."), behavior="isolated")
    tok.decoder = tokenizers.decoders.Fuse()
    t = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    t.chat_template = (
        "{% for m in messages %}{{ m['role'][0] }}:{{ m['content'] }}.{% endfor %}"
        "{% if add_generation_prompt %}a:{% endif %}"
    )
    return t


@pytest.fixture(scope="module")
def text_engine(make_pair, char_tokenizer, device):
    return ReferenceEngine(*make_pair(32), device=device, tokenizer=char_tokenizer)


def test_chat_prompts_are_rendered_with_the_chat_template(text_engine, char_tokenizer):
    chat = [{"role": "user", "content": "two plus two"}]
    out = text_engine.generate([chat], sampling=GREEDY)[0]
    assert out.prompt_token_ids == tuple(char_tokenizer("u:two plus two.a:", add_special_tokens=False).input_ids)
    assert out.text == char_tokenizer.decode(list(out.token_ids), skip_special_tokens=True)


def test_a_prompt_sent_again_is_rendered_once_and_gets_the_same_tokens(make_pair, char_tokenizer, device, monkeypatch):
    rendered = []
    render = char_tokenizer.apply_chat_template
    monkeypatch.setattr(char_tokenizer, "apply_chat_template", lambda *a, **k: rendered.append(1) or render(*a, **k))
    chat, other = ([{"role": "user", "content": c}] for c in ("two plus two", "two plus three"))
    engine = ReferenceEngine(*make_pair(32), device=device, tokenizer=char_tokenizer)
    first = engine.generate([chat, other, chat], sampling=[dict(SAMPLED, seed=s) for s in (1, 2, 3)])
    again = engine.generate([chat], sampling=dict(SAMPLED, seed=1))
    assert len(rendered) == 2  # each chat once, for both calls
    assert first[0].prompt_token_ids == first[2].prompt_token_ids == again[0].prompt_token_ids
    assert again[0].token_ids == first[0].token_ids  # (same seed)
    monkeypatch.setattr(reference, "ENCODED_KEPT", 1)  # the oldest prompt is forgotten first
    engine = ReferenceEngine(*make_pair(32), device=device, tokenizer=char_tokenizer)
    rendered.clear()
    engine.generate([chat, other, chat], sampling=GREEDY)
    assert len(rendered) == 3
    assert reference._prompt_key([{"role": "user", "content": ["parts"]}]) is None  # (not hashable: not kept)


def test_timing_counts_each_batchs_rows_and_steps_and_adds_up_to_the_calls(make_pair, device):
    engine = ReferenceEngine(*make_pair(32), device=device, max_num_seqs=2)
    walls = []
    for _ in range(2):  # 3 prompts: batches of 2 and 1 rows; 8 tokens each: a prefill and 7 steps
        t = time.perf_counter()
        engine.generate(prompts(3), sampling=dict(GREEDY, max_tokens=8))
        walls.append(time.perf_counter() - t)
    timing = engine.timing()
    assert (timing["calls"], timing["rows"], timing["steps"]) == (2, 6, 2 * 2 * 7)
    parts = [timing[k] for k in ("prepare_s", "prefill_s", "steps_s", "finish_s")]
    assert min(parts) >= 0 and sum(parts) <= sum(walls)


def test_the_tokenizer_eos_stops_generation(text_engine):
    assert 2 in text_engine.eos_token_ids


@pytest.mark.parametrize("mode", ["target", "standard"])
def test_a_stop_string_truncates_the_text_at_its_first_occurrence(text_engine, char_tokenizer, mode):
    p = "hello there"
    ref = text_engine.generate([p], sampling=dict(GREEDY, max_tokens=40))[0]
    text = ref.text
    stop = next(text[i : i + 2] for i in range(3, len(text) - 2) if text[i : i + 2] not in text[: i + 1])
    cut = text.find(stop)
    n = next(
        m for m in range(1, 41) if stop in char_tokenizer.decode(list(ref.token_ids[:m]), skip_special_tokens=True)
    )
    out = text_engine.generate([p], sampling=dict(GREEDY, max_tokens=40, stop=[stop]), speculative=MODES[mode])[0]
    assert out.text == text[:cut]
    assert out.token_ids == ref.token_ids[:n]
    assert out.finish_reason == "stop"


@pytest.mark.slow
def test_eager_attention_with_additive_masks_gives_the_same_tokens_as_sdpa(make_pair, device):
    target, drafter = (copy.deepcopy(m) for m in make_pair(32))
    for m in (target, drafter):
        m.config._attn_implementation = "eager"
    eager = ReferenceEngine(target, drafter, device=device)
    sdpa = ReferenceEngine(*make_pair(32), device=device)
    ps = prompts(9)  # lengths 1..9: padded batches
    spec = {"num_speculative_tokens": 3}
    assert tokens(eager.generate(ps, sampling=GREEDY, speculative=spec)) == tokens(
        sdpa.generate(ps, sampling=GREEDY, speculative=spec)
    )


@pytest.mark.slow
def test_compiled_decoding_gives_the_same_greedy_tokens_as_eager_decoding(make_pair, device):
    """``compile=True`` runs each decoding step (both models, the verification, the emission)
    through torch.compile (inductor's C++ kernels on CPU); greedy outputs must not change."""
    from qualgate.engines.reference import ReferenceEngine

    target, drafter = make_pair(32)
    prompts = [[1, 5, 7, 9], [3, 4]]
    sampling = {"temperature": 0.0, "max_tokens": 8, "ignore_eos": True}
    spec = {
        "num_speculative_tokens": 3,
        "rejection_sample_method": "fly",
        "fly_window_size": 1,
        "fly_entropy_threshold": 0.1,
    }
    eager = ReferenceEngine(target, drafter, device=device)
    compiled = ReferenceEngine(target, drafter, device=device, compile=True)
    want = eager.generate(prompts, sampling=sampling, speculative=spec)
    got = compiled.generate(prompts, sampling=sampling, speculative=spec)
    assert [o.token_ids for o in got] == [o.token_ids for o in want]
    assert [o.metrics.num_deferred_tokens for o in got] == [o.metrics.num_deferred_tokens for o in want]


# ----------------------------------------------------------------------- top-2 margins

MARGIN_MODES = {
    "target": None,
    "standard": {"num_speculative_tokens": 3},
    "fly": {"num_speculative_tokens": 3, "rejection_sample_method": "fly", "fly_window_size": 1},
}


@pytest.mark.slow
@pytest.mark.parametrize("mode", MARGIN_MODES)
@pytest.mark.parametrize("settings", ["greedy", "sampled"])
def test_top2_margins_are_the_targets_top1_minus_top2_at_each_emitted_token(engine32, mode, settings):
    from qualgate.engines._sampling import process_logits

    sampling = GREEDY if settings == "greedy" else SAMPLED
    out = engine32.generate(prompts(6), sampling=seeded(sampling, 6), speculative=MARGIN_MODES[mode])
    for o in out:
        # independently: one forward pass over prompt + output, without the engine's cache
        ids = torch.tensor([list(o.prompt_token_ids) + list(o.token_ids)], device=engine32.device)
        with torch.inference_mode():
            logits = engine32.target(input_ids=ids).logits[0, len(o.prompt_token_ids) - 1 : -1].float()
        one = torch.ones(logits.shape[0], device=ids.device)
        greedy = settings == "greedy"  # greedy rows: temperature 1, no filters
        p = process_logits(logits, one if greedy else 0.9 * one, 0 * one.long(), one if greedy else 0.95 * one)
        top = p.topk(2, dim=-1).values
        assert len(o.top2_margins) == len(o.token_ids)
        assert torch.allclose(torch.tensor(o.top2_margins), (top[:, 0] - top[:, 1]).cpu(), atol=1e-5)
