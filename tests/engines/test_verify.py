"""Standard and FLy verification on hand-built tensors (vLLM 0.33's rules, ../shared/CONTEXT.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from qualgate.engines._verify import FlyRule, accept_drafts, fly_entropy, verify  # noqa: E402

V = 6
HIGH = [2.0, 1.9, 1.8, -4.0, -4.0, -4.0]  # argmax 0, top-3 entropy ~1.06 nats
LOW = [12.0, 0.0, 0.0, 0.0, 0.0, 0.0]  # argmax 0, entropy ~1e-4 nats


def _greedy_case(rows, drafts):
    """rows: K + 1 logit rows; drafts: K draft ids. Greedy request, greedy drafter."""
    logits = torch.tensor([rows], dtype=torch.float32)
    probs = logits.softmax(-1)
    return dict(
        draft_token_ids=torch.tensor([drafts]),
        target_logits=logits,
        target_probs=probs,
        is_greedy=torch.tensor([True]),
    )


def _sampled_case(rows, drafts, accept):
    """Sampled request, greedy drafter (q = 1): NAT_i iff p_i(d_i) >= u_i.

    ``accept[i]`` picks u_i = 1e-6 (native accept when p > 0) or 0.999999 (native reject).
    """
    case = _greedy_case(rows, drafts)
    case["is_greedy"] = torch.tensor([False])
    case["uniform"] = torch.tensor([[1e-6 if a else 0.999999 for a in accept]])
    return case


def _entropy(row, k=3):
    return float(fly_entropy(torch.tensor([row]).softmax(-1), k)[0])


# ----------------------------------------------------------------------- entropy


def test_fly_entropy_uses_unrenormalised_top_k_probabilities_in_nats():
    probs = torch.tensor([[0.3] + [0.1] * 7])
    expected = -(0.3 * math.log(0.3) + 2 * 0.1 * math.log(0.1))  # 0.8217 nats, hand computed
    assert float(fly_entropy(probs, 3)[0]) == pytest.approx(expected, abs=1e-6)
    renormalised = -sum(p / 0.5 * math.log(p / 0.5) for p in (0.3, 0.1, 0.1))  # 0.9503
    assert abs(float(fly_entropy(probs, 3)[0]) - renormalised) > 0.1


def test_fly_entropy_treats_zero_probabilities_as_zero_terms():
    assert float(fly_entropy(torch.tensor([[1.0, 0.0, 0.0]]), 3)[0]) == 0.0


def test_fly_entropy_caps_top_k_at_the_vocabulary_size():
    probs = torch.tensor([[0.5, 0.5]])
    assert float(fly_entropy(probs, 10)[0]) == pytest.approx(math.log(2), abs=1e-6)


def test_fly_entropy_is_float32():
    assert fly_entropy(torch.tensor([[0.5, 0.5]], dtype=torch.float64), 3).dtype == torch.float32


# ----------------------------------------------------------------------- standard


def test_greedy_standard_accepts_up_to_the_first_mismatch_and_emits_the_argmax():
    rows = [LOW, LOW, [0.0, 5.0, 0, 0, 0, 0], LOW]
    out = verify(**_greedy_case(rows, [0, 0, 0]))
    assert out.num_accepted.tolist() == [2]
    assert out.token_ids.tolist() == [[0, 0, 1, -1]]


def test_greedy_standard_appends_the_bonus_argmax_when_all_drafts_pass():
    rows = [LOW, LOW, [0.0, 0, 0, 7.0, 0, 0]]
    out = verify(**_greedy_case(rows, [0, 0]))
    assert out.token_ids.tolist() == [[0, 0, 3]]


def test_sampled_standard_accepts_when_ratio_equals_the_uniform():
    probs = torch.tensor([[[0.25, 0.75], [0.5, 0.5]]])
    case = dict(
        draft_token_ids=torch.tensor([[0]]),
        target_logits=probs.log(),
        target_probs=probs,
        is_greedy=torch.tensor([False]),
    )
    assert accept_drafts(**case, uniform=torch.tensor([[0.25]])).num_accepted.tolist() == [1]
    assert accept_drafts(**case, uniform=torch.tensor([[0.2500001]])).num_accepted.tolist() == [0]


def test_sampled_standard_uses_the_ratio_to_the_draft_probability():
    probs = torch.tensor([[[0.3, 0.7], [0.5, 0.5]]])
    q = torch.tensor([[[0.6, 0.4]]])
    case = dict(
        draft_token_ids=torch.tensor([[0]]),
        target_logits=probs.log(),
        target_probs=probs,
        is_greedy=torch.tensor([False]),
        draft_probs=q,
    )
    # p/q = 0.5
    assert accept_drafts(**case, uniform=torch.tensor([[0.49]])).num_accepted.tolist() == [1]
    assert accept_drafts(**case, uniform=torch.tensor([[0.51]])).num_accepted.tolist() == [0]


def test_sampled_standard_rejects_draft_tokens_with_zero_draft_probability_or_invalid_ids():
    probs = torch.tensor([[[0.5, 0.5], [0.5, 0.5]]] * 2)
    q = torch.tensor([[[0.0, 1.0]], [[0.5, 0.5]]])
    out = accept_drafts(
        torch.tensor([[0], [7]]),
        probs.log(),
        probs,
        torch.tensor([False, False]),
        draft_probs=q,
        uniform=torch.tensor([[1e-6], [1e-6]]),
    )
    assert out.num_accepted.tolist() == [0, 0]


def test_residual_of_a_greedy_drafter_excludes_the_rejected_token():
    probs = torch.tensor([[[0.6, 0.3, 0.1], [1 / 3, 1 / 3, 1 / 3]]])
    noise = torch.ones(1, 2, 3)  # argmax(p / 1) would be token 0, the rejected draft
    out = verify(
        torch.tensor([[0]]),
        probs.log(),
        probs,
        torch.tensor([False]),
        uniform=torch.tensor([[0.9]]),
        noise=noise,
    )
    assert out.token_ids.tolist() == [[1, -1]]


def test_residual_of_a_probabilistic_drafter_is_max_p_minus_q():
    probs = torch.tensor([[[0.5, 0.3, 0.2], [1 / 3, 1 / 3, 1 / 3]]])
    q = torch.tensor([[[0.1, 0.8, 0.1]]])  # residual (0.4, 0, 0.1): token 1 is impossible
    noise = torch.tensor([[[100.0, 1.0, 1.0], [1.0, 1.0, 1.0]]])  # favours token 1, then 2
    out = verify(
        torch.tensor([[1]]),
        probs.log(),
        probs,
        torch.tensor([False]),
        draft_probs=q,
        uniform=torch.tensor([[0.9]]),  # p/q = 0.375 < 0.9: rejected
        noise=noise,
    )
    assert out.token_ids.tolist() == [[2, -1]]


def test_coupled_test_accepts_exactly_when_the_draft_equals_the_target_sample():
    probs = torch.full((1, 3, 4), 0.25)
    case = dict(target_logits=probs.log(), target_probs=probs, is_greedy=torch.tensor([False]))
    x = torch.tensor([[2, 1, 3]])
    assert verify(torch.tensor([[2, 1]]), **case, coupled_sample=x).token_ids.tolist() == [[2, 1, 3]]
    assert verify(torch.tensor([[2, 0]]), **case, coupled_sample=x).token_ids.tolist() == [[2, 1, -1]]


# ----------------------------------------------------------------------- FLy, one condition each

PATHS = ["greedy", "sampled"]


def _case(path, rows, drafts, accept):
    if path == "greedy":
        return _greedy_case(rows, drafts)
    return _sampled_case(rows, drafts, accept)


@pytest.mark.parametrize("path", PATHS)
def test_fly_defers_a_rejection_when_entropy_equals_the_threshold(path):
    # K = 3, W = 1: reject at 0 (high entropy), accept at 1 and 2
    rows = [HIGH, LOW, LOW, LOW]
    tau = _entropy(HIGH)
    out = verify(**_case(path, rows, [1, 0, 0], [False, True, True]), fly=FlyRule(1, tau, 3))
    assert out.num_accepted.tolist() == [3]
    assert out.num_deferred.tolist() == [1]
    assert out.token_ids[0, :3].tolist() == [1, 0, 0]


@pytest.mark.parametrize("path", PATHS)
def test_fly_does_not_defer_when_entropy_is_just_below_the_threshold(path):
    rows = [HIGH, LOW, LOW, LOW]
    h = np.float32(_entropy(HIGH))
    tau = float(np.nextafter(h, np.float32(np.inf)))  # the next float32 above H
    out = verify(**_case(path, rows, [1, 0, 0], [False, True, True]), fly=FlyRule(1, tau, 3))
    assert out.num_accepted.tolist() == [0]
    assert out.num_deferred.tolist() == [0]


@pytest.mark.parametrize("path", PATHS)
def test_fly_does_not_defer_a_low_entropy_rejection(path):
    rows = [LOW, LOW, LOW, LOW]
    out = verify(**_case(path, rows, [1, 0, 0], [False, True, True]), fly=FlyRule(1, 0.3, 3))
    assert out.num_accepted.tolist() == [0]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("failing", [1, 2])
def test_fly_needs_all_w_following_drafts_natively_accepted(path, failing):
    # K = 4, W = 2: rejection at 0; window is positions 1, 2; one of them fails
    rows = [HIGH, LOW, LOW, LOW, LOW]
    drafts = [1, 0, 0, 0]
    accept = [False, True, True, True]
    drafts[failing] = 3
    accept[failing] = False
    out = verify(**_case(path, rows, drafts, accept), fly=FlyRule(2, 0.3, 3))
    assert out.num_accepted.tolist() == [0]


@pytest.mark.parametrize("path", PATHS)
def test_fly_defers_when_the_whole_window_is_natively_accepted(path):
    rows = [HIGH, LOW, LOW, LOW, LOW]
    out = verify(**_case(path, rows, [1, 0, 0, 3], [False, True, True, False]), fly=FlyRule(2, 0.3, 3))
    # deferred at 0, accepted at 1 and 2, rejected (low entropy) at 3 -> correction 0
    assert out.num_accepted.tolist() == [3]
    assert out.token_ids.tolist() == [[1, 0, 0, 0, -1]]


@pytest.mark.parametrize("path", PATHS)
def test_fly_never_defers_when_the_window_would_run_past_the_draft(path):
    # K = 3, W = 2: a rejection at i = 1 has i + W = 3 >= K, even with every later draft accepted
    rows = [LOW, HIGH, LOW, LOW]
    out = verify(**_case(path, rows, [0, 1, 0], [True, False, True]), fly=FlyRule(2, 0.0, 3))
    assert out.num_accepted.tolist() == [1]
    # ... while i = 0 with i + W = 2 < 3 is deferred
    rows = [HIGH, LOW, LOW, LOW]
    out = verify(**_case(path, rows, [1, 0, 0], [False, True, True]), fly=FlyRule(2, 0.0, 3))
    assert out.num_accepted.tolist() == [3]


def test_fly_does_not_defer_a_greedy_draft_whose_target_logit_is_minus_infinity():
    masked = list(HIGH)
    masked[1] = -math.inf
    out = verify(**_greedy_case([masked, LOW, LOW, LOW], [1, 0, 0]), fly=FlyRule(1, 0.0, 3))
    assert out.num_accepted.tolist() == [0]
    assert out.token_ids.tolist() == [[0, -1, -1, -1]]


def test_fly_does_not_defer_a_sampled_draft_with_zero_target_probability():
    # token 1 removed by top-p: p = 0 (the uniform then rejects it natively)
    probs = torch.tensor([[[0.5, 0.0, 0.5, 0, 0, 0]] + [[1.0, 0, 0, 0, 0, 0]] * 3])
    case = dict(
        draft_token_ids=torch.tensor([[1, 0, 0]]),
        target_logits=probs.log(),
        target_probs=probs,
        is_greedy=torch.tensor([False]),
        uniform=torch.tensor([[1e-6, 1e-6, 1e-6]]),
    )
    assert accept_drafts(**case, fly=FlyRule(1, 0.0, 3)).num_accepted.tolist() == [0]
    case["draft_token_ids"] = torch.tensor([[2, 0, 0]])
    case["uniform"] = torch.tensor([[0.9, 1e-6, 1e-6]])  # p = 0.5 < 0.9: native reject, deferrable
    assert accept_drafts(**case, fly=FlyRule(1, 0.0, 3)).num_accepted.tolist() == [3]


def test_fly_does_not_defer_a_sampled_draft_with_zero_draft_probability():
    probs = torch.tensor([[[0.5, 0.5, 0, 0, 0, 0]] * 4])
    q = torch.tensor([[[0.0, 1.0, 0, 0, 0, 0]] + [[1.0, 0, 0, 0, 0, 0]] * 2])
    out = accept_drafts(
        torch.tensor([[0, 0, 0]]),
        probs.log(),
        probs,
        torch.tensor([False]),
        draft_probs=q,
        uniform=torch.tensor([[1e-6, 1e-6, 1e-6]]),
        fly=FlyRule(1, 0.0, 3),
    )
    assert out.num_accepted.tolist() == [0]


def test_fly_does_not_defer_an_invalid_draft_id():
    out = verify(**_greedy_case([HIGH, LOW, LOW, LOW], [V + 3, 0, 0]), fly=FlyRule(1, 0.0, 3))
    assert out.num_accepted.tolist() == [0]


@pytest.mark.parametrize("path", PATHS)
def test_fly_defers_again_after_a_confirmed_deferral(path):
    # K = 5, W = 1: rejections at 0 and 2, native accepts at 1, 3, 4
    rows = [HIGH, LOW, HIGH, LOW, LOW, [0, 0, 0, 0, 9.0, 0]]
    out = verify(
        **_case(path, rows, [1, 0, 2, 0, 0], [False, True, False, True, True]),
        fly=FlyRule(1, 0.3, 3),
    )
    assert out.num_accepted.tolist() == [5]
    assert out.num_deferred.tolist() == [2]
    if path == "greedy":
        assert out.token_ids.tolist() == [[1, 0, 2, 0, 0, 4]]


@pytest.mark.parametrize("path", PATHS)
def test_fly_judges_the_window_on_native_decisions_not_on_deferrals(path):
    # K = 4, W = 1: rejections at 0 and 1 (both high entropy). Position 1 is deferrable (NAT_2);
    # position 0 is not, because NAT_1 is false even though 1 would be deferred.
    rows = [HIGH, HIGH, LOW, LOW, LOW]
    out = verify(**_case(path, rows, [1, 1, 0, 0], [False, False, True, True]), fly=FlyRule(1, 0.3, 3))
    assert out.num_accepted.tolist() == [0]


@pytest.mark.parametrize("path", PATHS)
def test_fly_counts_only_emitted_deferrals(path):
    # K = 4, W = 1: position 0 rejected at low entropy (stop); position 1 would be deferrable
    rows = [LOW, HIGH, LOW, LOW, LOW]
    out = verify(**_case(path, rows, [1, 1, 0, 0], [False, False, True, True]), fly=FlyRule(1, 0.3, 3))
    assert out.num_accepted.tolist() == [0]
    assert out.num_deferred.tolist() == [0]


def _transcribed_rule(d, logits, probs, greedy, q, u, w, tau, k):
    """CONTEXT.md's FLy rule, transcribed position by position (one request)."""
    K = len(d)
    Vv = probs.shape[-1]
    nat = []
    for i in range(K):
        valid = 0 <= d[i] < Vv
        if greedy:
            nat.append(valid and d[i] == int(np.argmax(logits[i])))
        else:
            qi = (q[i][d[i]] if q is not None else 1.0) if valid else 0.0
            nat.append(valid and qi > 0 and probs[i][d[i]] / qi >= u[i])
    out = []
    for i in range(K):
        keep = nat[i]
        if not keep and i + w < K:
            top = np.sort(probs[i].astype(np.float32))[::-1][: min(k, Vv)]
            h = np.float32(-sum(float(p) * math.log(p) for p in top if p > 0))
            valid = 0 <= d[i] < Vv
            if greedy:
                unmasked = valid and logits[i][d[i]] > -math.inf
            else:
                qi = (q[i][d[i]] if q is not None else 1.0) if valid else 0.0
                unmasked = valid and probs[i][d[i]] > 0 and qi > 0
            keep = h >= np.float32(tau) and unmasked and all(nat[i + 1 : i + w + 1])
        if not keep:
            break
        out.append(d[i])
    return len(out)


@pytest.mark.parametrize("greedy", [True, False])
@pytest.mark.parametrize("probabilistic", [False, True])
def test_fly_matches_a_direct_transcription_of_the_rule_on_random_inputs(greedy, probabilistic):
    gen = torch.Generator().manual_seed(1)
    B, K, Vv = 400, 5, 4
    logits = torch.randn(B, K + 1, Vv, generator=gen) * 2
    logits[torch.rand(B, K + 1, Vv, generator=gen) < 0.1] = -math.inf
    logits[..., 0] = logits[..., 0].clamp(min=-10)  # keep every row normalisable
    probs = logits.softmax(-1)
    q = torch.rand(B, K, Vv, generator=gen)
    q[torch.rand(B, K, Vv, generator=gen) < 0.2] = 0
    q = (q + 1e-9) / (q + 1e-9).sum(-1, keepdim=True) if probabilistic else None
    d = torch.randint(0, Vv + 1, (B, K), generator=gen)  # Vv is an invalid id
    # make native acceptance common so that windows pass
    d = torch.where(torch.rand(B, K, generator=gen) < 0.6, logits[:, :K].argmax(-1), d)
    u = torch.rand(B, K, generator=gen) * 0.7
    for w, tau in [(1, 0.3), (2, 0.0), (3, 0.6)]:
        acc = accept_drafts(
            d, logits, probs, torch.full((B,), greedy), draft_probs=q, uniform=u, fly=FlyRule(w, tau, 3)
        )
        expected = [
            _transcribed_rule(
                d[b].tolist(),
                logits[b].numpy(),
                probs[b].numpy(),
                greedy,
                None if q is None else q[b].numpy(),
                u[b].numpy(),
                w,
                tau,
                3,
            )
            for b in range(B)
        ]
        assert acc.num_accepted.tolist() == expected
        assert int(acc.deferred.sum()) > 0  # the rule fired in this sample


def test_fly_rule_from_config_is_none_for_standard():
    assert FlyRule.from_config({"rejection_sample_method": "standard"}) is None
    rule = FlyRule.from_config(
        {
            "rejection_sample_method": "fly",
            "fly_window_size": 2,
            "fly_entropy_threshold": 0.3,
            "fly_entropy_top_k": 3,
        }
    )
    assert rule == FlyRule(2, 0.3, 3)
