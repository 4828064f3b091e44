import numpy as np
import pytest

from irtlib import expected_score, fisher_information, log_likelihood, probability, sigmoid


def test_sigmoid_is_stable_at_extremes():
    with np.errstate(all="raise"):
        out = sigmoid(np.array([-1000.0, 0.0, 1000.0]))
    assert out.tolist() == [0.0, 0.5, 1.0]


def test_probability_matches_formula_and_broadcasts():
    theta = np.array([-1.0, 0.0, 2.0])
    a = np.array([0.5, 2.0])
    b = np.array([0.0, 1.0])
    p = probability(theta[:, None], a, b)
    assert p.shape == (3, 2)
    expected = 1.0 / (1.0 + np.exp(-a * (theta[:, None] - b)))
    np.testing.assert_allclose(p, expected, rtol=1e-14)


def test_fisher_information_is_a2_p_q_and_peaks_at_b():
    a, b = 1.7, 0.3
    grid = np.linspace(-3, 3, 601)
    info = fisher_information(grid, a, b)
    p = probability(grid, a, b)
    np.testing.assert_allclose(info, a * a * p * (1 - p))
    assert grid[np.argmax(info)] == pytest.approx(b, abs=0.01)
    assert info.max() == pytest.approx(a * a / 4)


def test_log_likelihood_agrees_with_direct_formula_and_stays_finite():
    x = np.array([1.0, 0.0, np.nan, 1.0])
    theta, a, b = 0.4, np.array([1.0, 2.0, 1.0, 50.0]), np.array([0.0, -1.0, 0.0, 30.0])
    ll = log_likelihood(x, theta, a, b)
    p = 1 / (1 + np.exp(-a[:2] * (theta - b[:2])))
    np.testing.assert_allclose(ll[:2], [np.log(p[0]), np.log(1 - p[1])])
    assert np.isnan(ll[2])
    # a * (theta - b) = -1480: the direct formula gives log(0) = -inf, the stable one -1480
    assert ll[3] == pytest.approx(-1480.0)


def test_expected_score_is_mean_probability():
    a = np.array([1.0, 2.0, 0.5])
    b = np.array([-1.0, 0.0, 1.0])
    theta = np.array([0.0, 1.0])
    np.testing.assert_allclose(expected_score(theta, a, b),
                               probability(theta[:, None], a, b).mean(axis=1))
