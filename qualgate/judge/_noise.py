"""What a judge's noise does to a pairwise gate: it raises the discordance.

On an A/A pair (two runs of one lossless config) a perfect judge ties every pair; a noisy one
calls some pairs lost and others gained, about as many of each (both orders are asked, so a
position bias alone ties the pair). ``qualgate judge`` reports that share as the *decisive
rate* ``r``. Between two configs, a pair that is truly equivalent is then discordant with
probability ``r``, so the discordance the gate sees is

    psi_judged = psi + r * (1 - psi),

with ``psi`` the share of pairs with a real difference. Symmetric noise adds as many lost as
gained pairs: the expected difference is unchanged and its variance grows, so the gate needs
more questions for the same power (``qualgate power --judge-noise r``), and its size under the
judge's verdicts stays at most alpha (the gate is exact for whatever the judge decides).

What it cannot fix: noise that also strikes pairs with a real difference (a random verdict, or
a position bias, on a pair where one answer is better) turns some real losses into ties, so the
loss the judge measures is smaller than the loss a perfect judge would see. A gate whose margin
is meant in the perfect judge's units is then too lenient. :mod:`._sensitivity` measures that
fraction on planted pairs and ``qualgate gate`` scales the margin by its lower bound;
``benchmarks/judge_gate_size.py`` measures both effects and the corrected gate.
"""

from __future__ import annotations

import math

__all__ = ["judged_discordance"]


def judged_discordance(discordant: float, noise_rate: float) -> float:
    """``psi + r (1 - psi)``: the discordance under a judge whose A/A decisive rate is ``r``.

    >>> round(judged_discordance(0.10, 0.20), 6)
    0.28
    """
    for name, v in (("discordant", discordant), ("noise_rate", noise_rate)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= 1:
            raise ValueError(f"{name} must be a number in [0, 1], got {v!r}")
    return discordant + noise_rate * (1 - discordant)
