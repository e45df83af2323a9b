"""Half-width of the unpaired interval for two independent accuracies."""

import numpy as np
import pytest

from qualgate.stats import unpaired_ci_halfwidth

# R 4.2: the upper limit of the Wald interval for p1 - p2 with equal accuracies is the half-width
#   prop.test(c(178, 178), c(198, 198), correct = FALSE)$conf.int[2]  -> 0.0593595093395782
#   prop.test(c(450, 450), c(500, 500), correct = FALSE, conf.level = 0.9)$conf.int[2]
#                                                                      -> 0.0312089032725334
#   prop.test(c(27, 27), c(30, 30), correct = FALSE)$conf.int[2]       -> 0.151818157425799
# Tolerance: relative 1e-12.
R_HALFWIDTHS = [
    (178 / 198, 198, 0.95, 0.0593595093395782),
    (450 / 500, 500, 0.90, 0.0312089032725334),
    (27 / 30, 30, 0.95, 0.151818157425799),
]


@pytest.mark.parametrize(("p", "n", "level", "expected"), R_HALFWIDTHS)
def test_matches_r_prop_test(p, n, level, expected):
    assert unpaired_ci_halfwidth(p, n, confidence_level=level) == pytest.approx(expected, rel=1e-12)


def test_accepts_arrays_and_broadcasts():
    out = unpaired_ci_halfwidth(np.array([0.5, 0.9]), np.array([[100], [400]]))
    assert out.shape == (2, 2)
    assert out[1, 0] == pytest.approx(out[0, 0] / 2)  # 4x the questions halves the width


def test_perfect_accuracy_has_zero_width():
    assert unpaired_ci_halfwidth(1.0, 50) == 0.0


@pytest.mark.parametrize(
    ("args", "named"),
    [((1.2, 100), "p"), ((0.9, 0), "n"), ((0.9, 10.5), "n"), ((0.9, 100, 1.0), "confidence_level")],
)
def test_invalid_arguments_raise_value_error_naming_them(args, named):
    p, n, *level = args
    kwargs = {"confidence_level": level[0]} if level else {}
    with pytest.raises(ValueError, match=rf"^{named} "):
        unpaired_ci_halfwidth(p, n, **kwargs)
