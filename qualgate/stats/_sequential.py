"""Sequential non-inferiority: stop as soon as the verdict is decided, valid under continuous monitoring.

(Over 450 lines: the open-ended and the budgeted designs share the e-processes, the
vectorised path simulation the benchmarks use and the confidence sequence.)

Data
    Questions arrive one at a time (in a stated or seeded random order). Question ``i`` gives
    ``d_i`` = the mean over its seeds of (candidate correct − baseline correct), in [−1, 1];
    with one seed ``d_i`` is −1 (lost), 0 or +1 (gained). The loss is ``L = −E[d]`` (see
    :mod:`qualgate` for the conventions). The question is the unit, so several seeds per
    question are handled by averaging within the question (clustering) and need no further
    correction.

Method: two betting e-processes (test supermartingales)
    ``E⁺_t = Π_{i≤t} (1 + λ⁺_i (d_i + m))`` tests H0: L ≥ m (the candidate loses at least the
    margin m). For every ``λ⁺_i ≥ 0`` chosen from ``d_1 … d_{i−1}`` alone, ``E⁺`` is a
    non-negative supermartingale under *every* distribution in H0, whatever the discordance
    and however the seeds of a question are correlated, so by Ville's inequality
    ``P(sup_t E⁺_t ≥ 1/α) ≤ α``: **PASS** when ``E⁺_t ≥ 1/α`` is valid however often the gate
    looks and whenever it stops. ``E⁻_t = Π (1 − λ⁻_i d_i)`` tests H0: L ≤ 0 the same way:
    **FAIL** (a significant loss) when ``E⁻_t ≥ 1/α``.

    Bets. ``λ⁺ = m / v̂`` is the growth-optimal bet (to second order) against the design
    alternative L = 0, with ``v̂`` a predictable estimate of ``E[d²]`` (prior ``discordant``
    with the weight of ``prior_weight`` questions); ``λ⁻ = L̂ / v̂`` bets on the loss observed so
    far (the predictable plug-in of Waudby-Smith & Ramdas 2024). Both are capped at
    ``0.8/(1 ± m)`` so that no single question can cost more than 80 % of the capital.

    Futility. Stopping early *without* passing can only lower the probability of a PASS, so
    any futility rule keeps the type-I error. Once 10 questions were discordant, the gate
    stops as **INCONCLUSIVE (futility)** when ``log E⁺`` falls below the level from which a
    random walk would reach ``log(1/α)`` first with probability less than the target power
    (Wald's SPRT boundary ``β/(1 − α)`` generalised to a walk whose drift-to-variance ratio θ
    is not 1, with Siegmund's 0.583-step-deviation correction for overshoot). The walk's
    drift and variance are those of the bets actually placed, with each question's
    difference given a fair-coin sign, i.e. what the steps would be under the design
    alternative (loss 0). Without a futility rule, E⁺ needs as many questions on average as
    the fixed-n gate; the 10-question burn-in keeps a single early loss from ending the gate
    (without it the power fell to 0.60 at 4 % discordance in the calibration).

    With a budget (``max_questions``). The design above needs on average about as many
    questions as the fixed-n gate before a PASS, so with a budget of the fixed n it would
    give up power (0.67 against 0.85 in issue 14). The budgeted design therefore ends with
    the fixed-n test itself: PASS early when ``E⁺ ≥ 1/(α/50)``; FAIL as above; stop for
    futility once the *conditional power* of the final test under no loss falls below 2 %
    (the remaining questions adding N(0, v̂) each to the total difference, v̂ the predictable
    estimate of E[d²]); and at the budget (or when the data run out) apply the fixed-n test
    at level ``0.98·α`` (the exact test with one pair per question, the robust clustered
    test with several). P(PASS) ≤ α/50 + 0.98·α = α under H0 whatever the stopping, because
    each part is a valid test on its own; futility costs at most 2 % power on the paths it
    stops. The 2 % split of alpha is small on purpose: the exact final test is discrete, and
    at 300 questions a 10 % split cost 3 points of power (``benchmarks/sequential_calibration.py``).
    A budget larger than the questions there are is cut to their number once the data are
    complete (issue 36: with 800 questions and a budget of 1,000 the gate ended ``exhausted``
    without the final test, 14 % PASS against the fixed gate's 86 %). With several seeds the
    final test is the fixed gate's (``clustered_noninferiority``) on the same lost and gained
    pairs, given as ``counts``.

    Reporting. The always-valid (1 − α) bounds of the loss at the stop are the ends of the
    confidence sequence built from the same families of bets (``λ(ℓ) = ℓ / v̂`` for the upper
    bound, ``λ(ℓ) = (L̂ − ℓ)⁺ / v̂`` for the lower), so PASS ⟺ upper bound < m and FAIL ⟺ lower
    bound > 0, up to the grid step.

Why this and not a group-sequential design
    An alpha-spending design (O'Brien–Fleming, Pocock) or Wald's SPRT on the normal score
    statistic needs a normal approximation with the discordance as a nuisance parameter, and
    at 4 % discordance the early looks rest on a handful of discordant pairs. A seeded
    simulation of the normal-theory SPRT with estimated variance, monitored after every
    question (4,000 runs per cell, margin 0.02), gave a type-I error of 0.121 at 4 %
    discordance, 0.086 at 6 % and 0.053 at 10 % against a nominal 0.05; the e-processes above
    stay below 0.05 in every cell of ``benchmarks/sequential_calibration.py`` by
    construction. The price is efficiency: a bounded-outcome e-process cannot use the
    likelihood ratio of a known discordance, so against a good candidate it saves less than
    the ~38 % that Wald's SPRT would at α = 0.05 and power 0.8; against a clearly lossy one
    it stops several times sooner than the fixed-n gate. The measured numbers are in the
    benchmark's table.

References
----------
.. [1] Waudby-Smith I, Ramdas A. Estimating means of bounded random variables by betting.
   J R Stat Soc B 2024;86:1-27.
.. [2] Ramdas A, Grünwald P, Vovk V, Shafer G. Game-theoretic statistics and safe
   anytime-valid inference. Stat Sci 2023;38:576-601.
.. [3] Ville J. Étude critique de la notion de collectif. Gauthier-Villars, 1939.
.. [4] Wald A. Sequential tests of statistical hypotheses. Ann Math Stat 1945;16:117-186.
.. [5] Jennison C, Turnbull BW. Group Sequential Methods with Applications to Clinical
   Trials. Chapman & Hall/CRC, 2000.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from scipy import special

from ._score import score_z
from .checks import positive_count, real

__all__ = ["SequentialResult", "sequential_noninferiority"]

_CAP = 0.8
_BURN_IN = 10  # discordant questions before a futility stop is considered
_PASS, _FAIL, _FUTILE, _BUDGET, _EXHAUSTED, _FINAL = 1, 2, 3, 4, 5, 6
_REASONS = {
    _PASS: "pass",
    _FAIL: "fail",
    _FUTILE: "futility",
    _BUDGET: "budget",
    _EXHAUSTED: "exhausted",
    _FINAL: "final",
}
# With a budget: the share of alpha spent by the always-valid PASS boundary (the rest goes to
# the fixed-n test at the budget) and the conditional power below which the gate stops for
# futility (it costs at most that much power on the paths it stops).
_SEQUENTIAL_SHARE = 0.02
_FUTILITY_CP = 0.02


@dataclasses.dataclass(frozen=True)
class SequentialResult:
    """Outcome of :func:`sequential_noninferiority`.

    Attributes
    ----------
    verdict : {'PASS', 'FAIL', 'INCONCLUSIVE'}
    reason : {'pass', 'fail', 'futility', 'budget', 'exhausted'}
        Why the gate stopped: a boundary, futility, the question budget, or the data ran out.
    n_questions : int
        Questions used up to and including the stop.
    n_available : int
        Questions that were available.
    loss : float
        Estimated loss at the stop, ``−mean(d)``.
    lower_bound, upper_bound : float
        Always-valid (1 − alpha) bounds of the loss at the stop (grid step 1e-4).
    e_pass, e_fail : float
        The e-values ``E⁺`` (against loss ≥ margin) and ``E⁻`` (against no loss) at the stop.
    max_questions, budget : int or None
        The budget asked for, and the one applied: ``min(max_questions, n_available)`` when
        the data were complete (the final test runs at the questions there are).
    """

    verdict: str
    reason: str
    n_questions: int
    n_available: int
    loss: float
    lower_bound: float
    upper_bound: float
    e_pass: float
    e_fail: float
    margin: float
    alpha: float
    power: float
    max_questions: int | None
    budget: int | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _variance(sq, t, prior, weight):
    return np.clip((weight * prior + sq) / (weight + t), 1e-3, 1.0)


def _pass_bet(margin, v):
    return np.minimum(margin / v, _CAP / (1.0 - margin))


def _futility_level(drift, spread, alpha, beta):
    """log E⁺ below which a PASS before futility has probability < 1 − beta (see module doc).

    ``drift`` and ``spread`` are the mean and variance of one step of ``log E⁺`` under the
    design alternative (loss 0): a random walk with drift-to-variance ratio θ = 2·drift/spread
    first reaches ``log(1/α)`` before ``−b`` with probability
    ``(1 − e^{θb}) / (e^{−θ log(1/α)} − e^{θb})``; ``b`` solves that = 1 − beta.
    """
    theta = np.maximum(2.0 * drift / np.maximum(spread, 1e-12), 1e-6)
    # discrete steps overshoot a boundary by about 0.583 step standard deviations
    # (Siegmund 1985): the walk must climb that much further, and may fall that much further
    shift = 0.583 * np.sqrt(np.maximum(spread, 0.0))
    ea = np.exp(-theta * (np.log(1.0 / alpha) + shift))
    return shift - np.log(ea + (1.0 - ea) / beta) / theta


def _design_step(lam, margin, x):
    """Mean and second moment of a step of log E⁺ if x's sign were a fair coin (loss 0)."""
    a = np.abs(x)
    up = np.log1p(lam * (margin + a))
    down = np.log1p(lam * (margin - a))
    return 0.5 * (up + down), 0.5 * (up * up + down * down)


def _paths(d, *, margin, alpha, beta, prior, weight, max_questions, pairs=None, counts=None, final_test=True):
    """Run the gate on every row of ``d`` (replicates × questions); vectorised over rows.

    Without ``max_questions``: the open-ended design (module doc). With it: the budgeted
    design, PASS boundary at ``alpha·_SEQUENTIAL_SHARE``, conditional-power futility and the
    fixed-n test at the horizon (:func:`_final_pass`); ``pairs`` (broadcast to ``d``) are the
    pairs per question it needs (default one), ``counts`` the (lost, gained) pairs per question
    (default: the net of each question, see :func:`_final_pass`). A budget above the questions
    in ``d`` is the caller's to cap (:func:`sequential_noninferiority` does, when the data are
    complete).

    Returns the 1-based stop index, the reason code and the final log e-values per row.
    """
    d = np.asarray(d, dtype=float)
    reps, n = d.shape
    budgeted = max_questions is not None
    horizon = n if not budgeted else min(n, max_questions)  # the questions there are data for now
    # the budgeted design's final test is at the budget, not where the data end: a harness
    # that feeds the gate round by round must neither test "finally" at every round nor
    # judge futility against a horizon that is only the current round's
    final_at = float(max_questions) if budgeted else None  # a float: a budget of 10**30 stays a number
    at_budget = budgeted and max_questions <= n and final_test  # the fixed-n test only on final records
    log_pass = np.zeros(reps)
    log_fail = np.zeros(reps)
    sq = np.zeros(reps)
    total = np.zeros(reps)
    informative = np.zeros(reps)
    # running moments of a design-alternative step, with a prior of `weight` steps at the
    # prior discordance (x = +-1 with probability `prior`, else 0)
    lam0 = _pass_bet(margin, np.float64(prior))
    m0, s0 = _design_step(lam0, margin, np.array([1.0, 0.0]))
    step_mean = np.full(reps, weight * (prior * m0[0] + (1 - prior) * m0[1]))
    step_sq = np.full(reps, weight * (prior * s0[0] + (1 - prior) * s0[1]))
    stop = np.full(reps, horizon)
    reason = np.full(reps, _BUDGET if budgeted and max_questions <= n else _EXHAUSTED)
    active = np.ones(reps, dtype=bool)
    threshold = np.log(1.0 / (alpha * _SEQUENTIAL_SHARE if budgeted else alpha))
    fail_threshold = np.log(1.0 / alpha)
    if budgeted:
        z_final = float(special.ndtri(1 - alpha * (1 - _SEQUENTIAL_SHARE)))
        z_cp = float(special.ndtri(1 - _FUTILITY_CP))
    for t in range(horizon):
        v = _variance(sq, t, prior, weight)
        lam_pass = _pass_bet(margin, v)
        lam_fail = np.clip(-total / (t + weight) / v, 0.0, _CAP)
        if not budgeted:
            drift = step_mean / (t + weight)
            futile = _futility_level(drift, step_sq / (t + weight) - drift**2, alpha, beta)
            mean_x, sq_x = _design_step(lam_pass, margin, d[:, t])
            step_mean += mean_x
            step_sq += sq_x
        x = d[:, t]
        log_pass = np.where(active, log_pass + np.log1p(lam_pass * (x + margin)), log_pass)
        log_fail = np.where(active, log_fail + np.log1p(-lam_fail * x), log_fail)
        sq += x * x
        total += x
        informative += x != 0
        passed = active & (log_pass >= threshold)
        failed = active & ~passed & (log_fail >= fail_threshold)
        if budgeted:
            # conditional power of the final test under no loss: the remaining questions
            # add N(0, σ²) each to the total difference (σ² = E[d²], predictable plug-in)
            sd = np.sqrt(_variance(sq, t + 1, prior, weight))
            need = final_at * margin - z_final * sd * np.sqrt(final_at) + total  # total loss must stay below
            rest = final_at - t - 1
            cp_low = need < -z_cp * sd * np.sqrt(rest) if rest else np.zeros(reps, dtype=bool)
            dropped = active & ~passed & ~failed & cp_low & (informative >= _BURN_IN)
        else:
            dropped = active & ~passed & ~failed & (log_pass <= futile) & (informative >= _BURN_IN)
        for mask, code in ((passed, _PASS), (failed, _FAIL), (dropped, _FUTILE)):
            reason[mask] = code
            stop[mask] = t + 1
        active &= ~(passed | failed | dropped)
        if not active.any():
            break
    if at_budget and active.any():
        sizes = None if pairs is None else np.broadcast_to(np.asarray(pairs, dtype=float), d.shape)[:, :horizon]
        part = None if counts is None else tuple(np.broadcast_to(c, d.shape)[:, :horizon] for c in counts)
        final = _final_pass(d[:, :horizon], sizes, margin, alpha * (1 - _SEQUENTIAL_SHARE), part)
        reason[active & final] = _FINAL
    return stop, reason, log_pass, log_fail


def _budget(max_questions, available, complete):
    """The budget applied: ``min(max_questions, available)`` once every question is there."""
    return max_questions if max_questions is None or not complete else min(max_questions, available)


def _per_question(d, pairs, counts):
    """(pairs, lost, gained) per question of ``d`` (rows × questions), as float arrays.

    ``counts`` = (lost, gained) per question when known; without them a question counts its
    net only (``d`` is the mean difference over its ``pairs``), which is exact with one pair.
    """
    m = np.broadcast_to(np.ones(1) if pairs is None else np.asarray(pairs, dtype=float), d.shape)
    if counts is not None:
        lost, gained = (np.broadcast_to(np.asarray(c, dtype=float), d.shape) for c in counts)
        if np.any(np.abs((gained - lost) - d * m) > 1e-9 * np.maximum(m, 1)):
            raise ValueError("counts do not match the differences: gained - lost must be d * pairs")
        return m, lost, gained
    net = np.rint(-d * m)  # lost − gained per question
    return m, np.maximum(net, 0), np.maximum(-net, 0)


@functools.lru_cache(maxsize=64)
def _exact_critical(n, margin, alpha):
    from ._noninferiority import exact_critical_value

    return exact_critical_value(n, margin, alpha)


def _final_pass(d, pairs, margin, alpha, counts=None):
    """Does the fixed-n test reject loss >= margin on each row's questions ``d``?

    One pair per question: the exact unconditional test (its critical value, computed once
    for the common n); several: the fixed gate's robust clustered score test
    (``clustered_noninferiority``), on the (lost, gained) ``counts`` per question when given.
    """
    from ._cluster_variance import question_arrays, robust_z

    m, lost_k, gained_k = _per_question(d, pairs, counts)
    lost, gained = lost_k.sum(axis=1), gained_k.sum(axis=1)
    questions = d.shape[1]
    crit = float(special.ndtri(1 - alpha))
    if np.all(m <= 1):
        z = score_z(lost, gained, float(questions), margin)
        return z <= _exact_critical(questions, float(margin), float(alpha)) + 1e-9
    return robust_z(question_arrays(m, lost_k, gained_k), margin, crit) < -crit


def _final_bound(d, pairs, margin, alpha, counts=None):
    """Upper (1 − alpha) bound of the loss from the fixed-n test that ends the budgeted design:
    ``clustered_noninferiority`` on the same pairs (the exact test with one pair a question)."""
    from ._clustered import ClusteredTable, clustered_noninferiority
    from ._noninferiority import noninferiority

    m, lost_k, gained_k = (x[0].astype(int) for x in _per_question(d[None, :], pairs, counts))
    if np.all(m <= 1):
        lost, gained = int(lost_k.sum()), int(gained_k.sum())
        return noninferiority(
            len(d) - lost - gained, lost, gained, 0, margin=margin, alpha=alpha, method="exact"
        ).upper_bound
    cluster = np.repeat(np.arange(len(d)), m)
    first = np.concatenate([[0], np.cumsum(m)[:-1]])
    base = np.ones(int(m.sum()), dtype=bool)
    cand = np.ones_like(base)
    for start, lost, gained in zip(first, lost_k, gained_k):
        cand[start : start + lost] = False  # a lost pair: baseline right, candidate wrong
        base[start + lost : start + lost + gained] = False  # a gained pair
    table = ClusteredTable.from_outcomes(cluster, base, cand)
    return clustered_noninferiority(table, margin=margin, alpha=alpha).upper_bound


def _bounds(d, alpha, prior, weight, step=1e-4):
    """Always-valid (1 − alpha) lower and upper bounds of the loss after all of ``d``."""
    n = len(d)
    threshold = np.log(1.0 / alpha)
    t = np.arange(n)
    sq_before = np.concatenate([[0.0], np.cumsum(d * d)[:-1]])
    sum_before = np.concatenate([[0.0], np.cumsum(d)[:-1]])
    v = _variance(sq_before, t, prior, weight)
    loss_before = -sum_before / (t + weight)

    def rejected_above(ell):
        # H0: loss >= ell, bet against it with the design alternative loss 0
        lam = np.minimum(np.maximum(ell, 0.0) / v, _CAP / (1.0 - min(ell, 0.999)))
        return np.max(np.cumsum(np.log1p(lam * (d + ell)))) >= threshold

    def rejected_below(ell):
        # H0: loss <= ell, bet on the loss observed so far
        lam = np.clip((loss_before - ell) / v, 0.0, _CAP / (1.0 + max(ell, -0.999)))
        return np.max(np.cumsum(np.log1p(-lam * (d + ell)))) >= threshold

    grid = np.arange(-1.0, 1.0 + step / 2, step)
    upper = _search(grid, rejected_above, rejected_when="high")
    lower = _search(grid, rejected_below, rejected_when="low")
    return lower, upper


def _search(grid, rejected, *, rejected_when):
    """Bisection on the grid for the end of the confidence sequence: the last value not rejected."""
    lo, hi = 0, len(grid) - 1
    if rejected_when == "high":
        # every ell' >= grid[hi] is rejected: the largest value kept is grid[hi - 1]; 1.0 when none is
        if not rejected(grid[hi - 1]):
            return 1.0
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if rejected(grid[mid]):
                hi = mid
            else:
                lo = mid
        return round(float(grid[hi - 1]), 4)
    if not rejected(grid[1]):
        return -1.0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if rejected(grid[mid]):
            lo = mid
        else:
            hi = mid
    return round(float(grid[lo + 1]), 4)


def sequential_noninferiority(
    differences,
    *,
    margin: float,
    alpha: float = 0.05,
    power: float = 0.8,
    max_questions: int | None = None,
    discordant: float = 0.1,
    prior_weight: float = 20.0,
    pairs=None,
    counts=None,
    complete: bool = True,
    final: bool = True,
) -> SequentialResult:
    """Sequential paired non-inferiority gate on questions in arrival order.

    H0: loss ≥ ``margin`` against H1: loss < ``margin``. PASS rejects H0 with an
    always-valid test; FAIL rejects "no loss" with an always-valid test; otherwise the gate
    stops for futility, at the budget, or when the data run out (INCONCLUSIVE). See the
    module docstring for the method.

    Parameters
    ----------
    differences : array_like of float
        Per question, in arrival order: mean over its seeds of (candidate correct − baseline
        correct), each in [−1, 1].
    margin : float
        Non-inferiority margin on the loss, in (0, 1).
    alpha : float
        Type-I error of PASS (and of FAIL against a candidate with no loss), in (0, 0.5).
    power : float
        Target power against a candidate with no loss; sets the futility boundary.
    max_questions : int, optional
        Budget. Without it the open-ended design (the futility rule targets ``power``);
        with it the budgeted design: always-valid PASS at ``alpha/50``, futility when the
        conditional power of the final test drops below 2 %, and at the budget (or when the
        data run out) the fixed-n test at ``0.98·alpha`` (reason ``'final'`` when it passes,
        ``'budget'``/``'exhausted'`` when not). A budget above the questions there are is
        ``min(max_questions, len(differences))`` when ``complete`` (the result's ``budget``).
    discordant, prior_weight : float
        Prior guess of ``E[d²]`` (the discordant fraction with one seed) and its weight in
        questions, used only to size the early bets.
    pairs : array_like of int, optional
        Pairs (seeds) per question, aligned with ``differences`` (default one each); used by
        the final test of the budgeted design.
    counts : (array_like of int, array_like of int), optional
        Lost and gained pairs per question (``gained − lost = differences·pairs``): the final
        test is then ``clustered_noninferiority`` on exactly these pairs, as the fixed gate
        would run it; without them each question counts its net difference only.
    complete : bool
        ``differences`` hold every question there will be (``qualgate gate --sequential``);
        ``False`` while a run is still adding rounds (``qualgate run --sequential``), so that a
        budget above the questions so far does not end the gate early.
    final : bool
        The records are declared final (``qualgate gate --sequential --final``): only then may
        the budgeted design's fixed-n test decide. ``False`` (a look at records that may still
        grow, issue 47): only the always-valid e-process at ``alpha/50`` decides, so that any
        number of looks followed by one final look keeps P(PASS) <= alpha.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> d = rng.choice([-1.0, 0.0, 1.0], p=[0.03, 0.94, 0.03], size=3000)
    >>> r = sequential_noninferiority(d, margin=0.02)
    >>> r.verdict, r.reason, r.n_questions < 3000
    ('PASS', 'pass', True)
    """
    d = np.asarray(differences, dtype=float)
    if d.ndim != 1:
        raise ValueError(f"differences must be one-dimensional, got shape {d.shape}")
    if d.size and (not np.all(np.isfinite(d)) or d.min() < -1 or d.max() > 1):
        raise ValueError("differences must be finite and in [-1, 1]")
    margin = real("margin", margin, low=0.0, high=1.0)
    alpha = real("alpha", alpha, low=0.0, high=0.5)
    power = real("power", power, low=alpha, high=1.0)
    if max_questions is not None:
        max_questions = positive_count("max_questions", max_questions)
    discordant = real("discordant", discordant, low=0.0, high=1.0, high_open=False)
    prior_weight = real("prior_weight", prior_weight, low=0.0)

    if d.size == 0:
        return SequentialResult(
            "INCONCLUSIVE",
            _REASONS[_EXHAUSTED],
            0,
            0,
            float("nan"),
            -1.0,
            1.0,
            1.0,
            1.0,
            float(margin),
            float(alpha),
            float(power),
            max_questions,
            max_questions,
        )
    budget = _budget(max_questions, int(d.size), complete)
    if counts is not None and (len(counts) != 2 or any(np.shape(c) != d.shape for c in counts)):
        raise ValueError("counts must be (lost, gained), each with one count per question")
    if pairs is not None:
        pairs = np.broadcast_to(np.asarray(pairs, dtype=float), d.shape)
        if np.any(pairs < 1) or np.any(pairs != np.rint(pairs)):
            raise ValueError("pairs must be positive integers, one per question")
    stop, reason, log_pass, log_fail = _paths(
        d[None, :],
        margin=margin,
        alpha=alpha,
        beta=1.0 - power,
        prior=discordant,
        weight=prior_weight,
        max_questions=budget,
        pairs=None if pairs is None else pairs[None, :],
        counts=None if counts is None else tuple(np.asarray(c, dtype=float)[None, :] for c in counts),
        final_test=final,
    )
    n_used = int(stop[0])
    code = int(reason[0])
    if code == _BUDGET and budget < max_questions:
        code = _EXHAUSTED  # the questions ran out before the budget; the final test ran on all of them
    used = d[:n_used]
    lower, upper = _bounds(used, alpha, discordant, prior_weight)
    if max_questions is not None and final and code in (_FINAL, _BUDGET, _EXHAUSTED):
        part = None if counts is None else tuple(np.asarray(c)[:n_used] for c in counts)
        sizes = None if pairs is None else pairs[:n_used]
        upper = _final_bound(used, sizes, margin, alpha * (1 - _SEQUENTIAL_SHARE), part)
    verdict = {_PASS: "PASS", _FINAL: "PASS", _FAIL: "FAIL"}.get(code, "INCONCLUSIVE")
    return SequentialResult(
        verdict=verdict,
        reason=_REASONS[code],
        n_questions=n_used,
        n_available=int(d.size),
        loss=float(-used.mean()),
        lower_bound=lower,
        upper_bound=upper,
        e_pass=float(np.exp(log_pass[0])),
        e_fail=float(np.exp(log_fail[0])),
        margin=float(margin),
        alpha=float(alpha),
        power=float(power),
        max_questions=max_questions,
        budget=budget,
    )
