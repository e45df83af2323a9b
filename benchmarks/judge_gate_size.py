"""Size and power of the pairwise judge gate under a noisy judge, by simulation.

Each pair has a true state: the baseline's answer is better, the candidate's is, or they are
equivalent (true discordance ``PSI``). The judge is asked in both orders, as ``qualgate judge``
asks; in each order it gives a random verdict (A or B, a coin) with probability ``rho``, else
favours the answer shown first with probability ``beta`` (position bias), else tells the truth
(a tie for equivalent answers). Lost = the baseline preferred in both orders, gained = the
candidate in both, else tied (qualgate.judge._pairwise). The judged counts go through the
gate's own exact test (qualgate.stats: the exact unconditional score test; PASS when Z is at
most ``exact_critical_value``) at margin ``MARGIN`` with ``N`` pairs.

Two noise models: ``everywhere`` (the noise strikes every pair) and ``equivalent only`` (the
judge is reliable where one answer is better and noisy only between equivalent answers).
Columns:

- ``A/A rate``: the decisive rate ``qualgate judge`` reports on an A/A pair (every pair
  equivalent), measured;
- ``judged psi``: the discordance the gate sees at the H0 boundary, measured;
- ``atten.``: judged loss / true loss at the boundary, measured (1: no attenuation);
- ``size (truth)``: P(PASS) when the *true* loss is the margin;
- ``size (judge)``: P(PASS) when the loss *as this judge measures it* is the margin (the true
  loss set to margin / attenuation);
- ``power``: P(PASS) at true loss 0;
- ``a_L``: the median lower bound of the judge's sensitivity from ``N_PLANTED`` planted pairs
  (each gate its own: the original answer better by construction, judged in both orders under
  the same noise; :func:`qualgate.judge.sensitivity_lower_bound` at 99.5 %, floored to 0.01);
- ``size (corr.)`` and ``power (corr.)``: the gate ``qualgate gate`` runs on judged records
  (:func:`qualgate.judge.judged_gate`): margin ``a_L * MARGIN`` of judged loss at level
  ``ALPHA - 0.005``, refused (no PASS) when ``a_L <= 0``; size at a true loss of the margin,
  power at no loss.

Run: ``python benchmarks/judge_gate_size.py`` (results: benchmarks/results/judge_gate_size.txt).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from qualgate.judge import sensitivity_lower_bound
from qualgate.stats._noninferiority import exact_critical_value
from qualgate.stats._score import score_z

N, MARGIN, ALPHA, PSI, REPS, SEED = 400, 0.05, 0.05, 0.20, 10_000, 20261201
N_PLANTED, CONFIDENCE = 200, 0.995
RHOS, BETAS = (0.0, 0.1, 0.2, 0.3), (0.0, 0.2, 0.4)


def verdicts(rng, state, order, rho, beta, noisy):
    """Each pair's verdict in one order: +1 baseline preferred, -1 candidate, 0 tie.

    ``state``: +1 baseline better, -1 candidate better, 0 equivalent. ``order`` +1: the
    baseline shown first (as A); -1: the candidate first. ``noisy``: where noise may strike."""
    u = rng.random(state.shape)
    truth = state.astype(np.int8)
    coin = np.where(rng.random(state.shape) < 0.5, 1, -1).astype(np.int8) * order  # A or B at random
    first = np.int8(order)  # "A" as a side: the baseline when it is shown first
    out = np.where(u < rho, coin, np.where(u < rho + (1 - rho) * beta, first, truth))
    return np.where(noisy, out, truth)


def simulate(rng, loss, rho, beta, model, reps=REPS, psi=PSI):
    """(lost, gained) counts of ``reps`` gates of N pairs, and the judged discordance."""
    p_b, p_c = (psi + loss) / 2, (psi - loss) / 2
    u = rng.random((reps, N))
    state = np.where(u < p_b, 1, np.where(u < p_b + p_c, -1, 0)).astype(np.int8)
    noisy = np.ones_like(state, dtype=bool) if model == "everywhere" else state == 0
    v1 = verdicts(rng, state, 1, rho, beta, noisy)
    v2 = verdicts(rng, state, -1, rho, beta, noisy)
    lost = ((v1 == 1) & (v2 == 1)).sum(axis=1)
    gained = ((v1 == -1) & (v2 == -1)).sum(axis=1)
    return lost, gained


def pass_rate(lost, gained, critical):
    return float(np.mean(score_z(lost, gained, N, MARGIN) <= critical))


_CRITICAL: dict[float, float] = {}
_BOUND: dict[tuple[int, int], float] = {}


def planted_bounds(rng, rho, beta, model, reps=REPS):
    """Each gate's floored sensitivity bound from N_PLANTED planted pairs (the original better)."""
    state = np.ones((reps, N_PLANTED), dtype=np.int8)
    noisy = np.ones_like(state, dtype=bool) if model == "everywhere" else state == 0
    v1, v2 = verdicts(rng, state, 1, rho, beta, noisy), verdicts(rng, state, -1, rho, beta, noisy)
    detected, inverted = ((v1 == 1) & (v2 == 1)).sum(axis=1), ((v1 == -1) & (v2 == -1)).sum(axis=1)
    out = np.empty(reps)
    for i, key in enumerate(zip(detected.tolist(), inverted.tolist())):
        if key not in _BOUND:
            _BOUND[key] = np.floor(sensitivity_lower_bound(*key, N_PLANTED, CONFIDENCE) * 100) / 100
        out[i] = _BOUND[key]
    return out


def corrected_pass_rate(lost, gained, bounds):
    """P(PASS) of the gate at margin a_L * MARGIN, level ALPHA - (1 - CONFIDENCE)."""
    alpha = ALPHA - (1 - CONFIDENCE)
    passed = np.zeros(len(lost), dtype=bool)
    for a in np.unique(bounds):
        if a <= 0:
            continue  # refused: the judge cannot be shown to see a degradation
        m = round(float(a) * MARGIN, 10)
        if m not in _CRITICAL:
            _CRITICAL[m] = exact_critical_value(N, m, alpha)
        sel = bounds == a
        passed[sel] = score_z(lost[sel], gained[sel], N, m) <= _CRITICAL[m]
    return float(passed.mean())


def main():
    t0 = time.time()
    rng = np.random.default_rng(SEED)
    critical = exact_critical_value(N, MARGIN, ALPHA)
    se = (ALPHA * (1 - ALPHA) / REPS) ** 0.5
    print(
        f"pairwise judge gate: N = {N} pairs, margin {MARGIN}, alpha {ALPHA}, true discordance {PSI}, "
        f"{REPS:,} gates per cell (Monte Carlo SE at alpha: {se:.4f}), seed {SEED}"
    )
    print(f"exact test: PASS when Z <= {critical:.4f}")
    print(
        f"corrected gate: {N_PLANTED} planted pairs per gate, sensitivity bound at {CONFIDENCE:.1%} floored to 0.01, "
        f"margin a_L * {MARGIN}, level {ALPHA - (1 - CONFIDENCE):g}\n"
    )
    head = (
        "noise model",
        "rho",
        "beta",
        "A/A rate",
        "judged psi",
        "atten.",
        "size (truth)",
        "size (judge)",
        "power",
        "a_L",
        "size (corr.)",
        "power (corr.)",
    )
    rows = []
    for model in ("everywhere", "equivalent only"):
        for rho in RHOS:
            for beta in BETAS:
                if rho == 0 and beta == 0 and model != "everywhere":
                    continue
                l0, g0 = simulate(rng, 0.0, rho, beta, model, reps=200, psi=0.0)
                aa = float(np.mean(l0 + g0) / N)
                lt, gt = simulate(rng, MARGIN, rho, beta, model)
                atten = float(np.mean(lt - gt) / N / MARGIN)
                judged_psi = float(np.mean(lt + gt) / N)
                size_truth = pass_rate(lt, gt, critical)
                true_loss = min(MARGIN / atten, PSI) if atten > 0 else PSI
                lj, gj = simulate(rng, true_loss, rho, beta, model)
                size_judge = pass_rate(lj, gj, critical)
                lp, gp = simulate(rng, 0.0, rho, beta, model)
                bounds = planted_bounds(rng, rho, beta, model)
                size_corr = corrected_pass_rate(lt, gt, bounds)
                power_corr = corrected_pass_rate(lp, gp, planted_bounds(rng, rho, beta, model))
                rows.append(
                    (
                        model,
                        f"{rho:.1f}",
                        f"{beta:.1f}",
                        f"{aa:.3f}",
                        f"{judged_psi:.3f}",
                        f"{atten:.3f}",
                        f"{size_truth:.4f}",
                        f"{size_judge:.4f}",
                        f"{pass_rate(lp, gp, critical):.3f}",
                        f"{np.median(bounds):.2f}",
                        f"{size_corr:.4f}",
                        f"{power_corr:.3f}",
                    )
                )
    widths = [max(len(str(r[i])) for r in (head, *rows)) for i in range(len(head))]
    for r in (head, *rows):
        print("  ".join(str(c).rjust(w) for c, w in zip(r, widths)))
    print(f"\n{time.time() - t0:.0f} s; python {sys.version.split()[0]}, numpy {np.__version__}")


if __name__ == "__main__":
    main()
