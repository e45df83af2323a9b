"""Generative models of paired LLM evaluations for the calibration benchmarks.

Each model draws, for ``reps`` replicate evaluations of ``questions`` questions with
``seeds`` seeds each, the number of lost and gained pairs per question (arrays of shape
(reps, questions)). The expected loss per pair is ``loss`` in every model.

equicorrelated
    Question k has a discordance propensity ψ_k ~ Beta(mean ``DISCORDANT``, intra-question
    correlation ``ICC``); each seed is discordant with probability ψ_k and all discordant
    seeds of a question go the same way (lost with probability (1 + loss/ψ)/2).
u-shaped
    Difficulty p_k ~ Beta(0.4, 0.1) (most questions nearly always right, some nearly always
    wrong); the baseline is right with probability p_k, the candidate with p_k − Δ_k, each
    seed and side independently; the loss sits on hard questions only,
    Δ_k = s·p_k·1[p_k < 0.9], s chosen so that E[Δ_k] = loss.
shared-noise
    As u-shaped, but baseline and candidate share each seed's noise (one uniform u per seed:
    baseline right iff u < p_k, candidate right iff u < p_k − Δ_k), so the candidate can only
    lose: every discordant pair is lost (the model of issue 14).

With one seed every model is a trinomial of the pair (P(lost), P(gained)) given by
:func:`one_seed_probabilities`, so one-seed sizes are enumerated exactly.
"""

from __future__ import annotations

import numpy as np
from scipy import integrate
from scipy import stats as sps

MODELS = ("equicorrelated", "u-shaped", "shared-noise")
DISCORDANT, ICC = 0.05, 0.3
A, B, HARD = 0.4, 0.1, 0.9
_HARD_MASS = integrate.quad(lambda p: p * sps.beta.pdf(p, A, B), 0, HARD)[0]  # E[p·1(p < 0.9)]


def _scale(loss):
    s = loss / _HARD_MASS
    if s > 1:
        raise ValueError(f"loss {loss} is too large for the hard-question model")
    return s


def one_seed_probabilities(model, loss):
    """(P(lost), P(gained)) of one pair under ``model``."""
    if model == "equicorrelated":
        return (DISCORDANT + loss) / 2, (DISCORDANT - loss) / 2
    s = _scale(loss)
    pdf = lambda p: sps.beta.pdf(p, A, B)  # noqa: E731
    delta = lambda p: s * p * (p < HARD)  # noqa: E731
    if model == "shared-noise":
        return loss, 0.0
    lost = integrate.quad(lambda p: p * (1 - p + delta(p)) * pdf(p), 0, 1, points=[HARD], limit=200)[0]
    gained = integrate.quad(lambda p: (1 - p) * (p - delta(p)) * pdf(p), 0, 1, points=[HARD], limit=200)[0]
    return lost, gained


def draw(model, rng, reps, questions, seeds, loss):
    """Lost and gained pairs per question, each an int array of shape (reps, questions)."""
    shape = (reps, questions)
    if model == "equicorrelated":
        ab = 1 / ICC - 1
        psi = rng.beta(DISCORDANT * ab, (1 - DISCORDANT) * ab, size=shape)
        flips = rng.binomial(seeds, psi)
        lossy = rng.random(shape) < (1 + loss / DISCORDANT) / 2
        return np.where(lossy, flips, 0), np.where(lossy, 0, flips)
    s = _scale(loss)
    p = rng.beta(A, B, size=shape)
    delta = s * p * (p < HARD)
    if model == "shared-noise":
        return rng.binomial(seeds, delta), np.zeros(shape, dtype=np.int64)
    q = p - delta
    p_lost, p_gained = p * (1 - q), (1 - p) * q
    lost = rng.binomial(seeds, p_lost)
    gained = rng.binomial(seeds - lost, np.where(p_lost < 1, p_gained / np.maximum(1 - p_lost, 1e-300), 0.0))
    return lost, gained
