"""irtlib.core.quadrature: the posterior weights' log-sum-exp is scipy's, bit for bit."""

import numpy as np
import pytest
from scipy.special import logsumexp

from irtlib.core.quadrature import logsumexp_rows, posterior_weights, uniform_grid


def _same_bits(x, y):
    nan = np.isnan(x)
    return np.array_equal(nan, np.isnan(y)) and np.array_equal(x[~nan].view(np.int64), y[~nan].view(np.int64))


def _arrays():
    rng = np.random.default_rng(11)
    inf, nan = np.inf, np.nan
    yield rng.normal(0.0, 30.0, (77, 729))                   # an M2PL posterior grid
    yield rng.normal(-300.0, 100.0, (40, 801))
    yield np.round(rng.normal(0.0, 2.0, (200, 60)))          # ties at the maximum
    yield rng.normal(0.0, 1e-300, (10, 10))
    yield np.full((3, 5), -inf)                              # no mass at all
    yield np.array([[inf, 1.0, 2.0], [nan, 1.0, 2.0], [1.0, 1.0, 1.0], [-inf, 0.0, -inf], [1e308, 1e308, 0.0],
                    [709.0, 710.0, -inf], [-0.0, 0.0, -745.0], [inf, inf, 0.0], [-inf, inf, 1.0]])
    yield rng.normal(0.0, 5.0, (1, 1))
    yield np.asfortranarray(rng.normal(0.0, 5.0, (300, 2000)))   # other layouts: they order numpy's sums
    yield rng.normal(0.0, 5.0, (2000, 300)).T
    yield rng.normal(0.0, 5.0, (300, 4000))[:, ::2]
    yield rng.normal(0.0, 5.0, (300, 2000))[::-1, ::-1]


@pytest.mark.parametrize("index", range(11))
def test_logsumexp_rows_is_scipys_bit_for_bit(index):
    a = list(_arrays())[index]
    with np.errstate(all="ignore"):
        assert _same_bits(logsumexp_rows(a), logsumexp(a, axis=1))


def test_other_inputs_go_to_scipy():
    rows = [[0.0, 1.0], [2.0, 3.0]]
    assert _same_bits(logsumexp_rows(rows), logsumexp(rows, axis=1))
    ints = np.arange(6).reshape(2, 3)
    assert _same_bits(logsumexp_rows(ints), logsumexp(ints, axis=1))
    assert logsumexp_rows(np.zeros((0, 3))).shape == (0,)


def test_posterior_weights_are_the_scipy_formula():
    points, log_prior = uniform_grid(n_points=201)
    rng = np.random.default_rng(2)
    log_lik = -0.5 * ((points[None, :] - rng.normal(0, 2, (25, 1))) / rng.uniform(0.05, 1.0, (25, 1))) ** 2
    weights, norm = posterior_weights(log_lik, log_prior)
    joint = log_lik + log_prior
    assert _same_bits(norm, logsumexp(joint, axis=1))
    assert np.array_equal(weights, np.exp(joint - logsumexp(joint, axis=1)[:, None]))
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-12)


def _count_cases():
    """Posterior weights with subnormal, zero and near-one entries, against 0/1 indicators, in several layouts."""
    rng = np.random.default_rng(12)
    tiny = np.nextafter(0.0, 1.0)
    for n_models, n_nodes, n_cells in ((77, 729, 395), (67, 81, 40), (5, 3, 2), (1, 1, 1), (300, 41, 900)):
        log_lik = rng.normal(0.0, 300.0, (n_models, n_nodes))
        weights, _ = posterior_weights(log_lik, np.zeros(n_nodes))
        edges = rng.random(weights.shape)
        weights[edges < 0.05] = tiny * rng.integers(1, 2**52, size=int((edges < 0.05).sum()))   # subnormals
        weights[(edges >= 0.05) & (edges < 0.1)] = 0.0
        weights[(edges >= 0.1) & (edges < 0.12)] = 2.2250738585072014e-308 * rng.random(int(((edges >= 0.1)
                                                                                           & (edges < 0.12)).sum()))
        indicator = (rng.random((n_models, n_cells)) < 0.6).astype(float)
        yield weights, indicator
        yield np.asfortranarray(weights), np.asfortranarray(indicator)
        yield weights, np.ones((n_models, n_cells))


@pytest.mark.parametrize("case", range(15))
def test_posterior_counts_are_the_plain_products_bit_for_bit(case):
    from irtlib.core.quadrature import posterior_counts

    weights, indicator = list(_count_cases())[case]
    want = weights.T @ indicator
    got = posterior_counts(weights, indicator)
    assert got.shape == want.shape and got.flags.c_contiguous == want.flags.c_contiguous
    assert _same_bits(got, want)
    assert np.array_equal(got.view(np.int64), want.view(np.int64))     # zeros of the same sign too


def test_posterior_counts_take_the_plain_product_outside_their_range():
    from irtlib.core.quadrature import LIFT_LIMIT, posterior_counts

    rng = np.random.default_rng(13)
    indicator = (rng.random((4, 6)) < 0.5).astype(float)
    for weights in (np.full((4, 3), np.inf), np.full((4, 3), np.nan), np.full((4, 3), 4.0 * LIFT_LIMIT),
                    np.full((4, 3), 1e308)):
        assert _same_bits(posterior_counts(weights, indicator), weights.T @ indicator)


def test_subnormal_sums_keep_their_bits():
    """Sums that stay below 2^-1022, and one that crosses into the normal range and rounds, as the plain product."""
    from irtlib.core.quadrature import posterior_counts

    tiny = np.nextafter(0.0, 1.0)
    weights = np.array([[3 * tiny, 2.2250738585072014e-308], [5 * tiny, 2.0 ** -1020], [2.0 ** -1074 * (2**52 - 1),
                                                                                             1.0 + 2.0 ** -52]])
    indicator = np.ones((3, 2))
    assert np.array_equal(posterior_counts(weights, indicator).view(np.int64), (weights.T @ indicator).view(np.int64))


@pytest.mark.parametrize("index", range(11))
def test_posterior_weights_are_the_previous_expression_bit_for_bit(index):
    """The weights written into the joint table's buffer: ``np.exp(joint - norm)`` as a new array gave them."""
    a = list(_arrays())[index]
    prior = np.linspace(-3.0, 0.0, a.shape[1])
    with np.errstate(all="ignore"):
        joint = a + prior
        want_norm = logsumexp(joint, axis=1)
        want = np.exp(joint - want_norm[:, None])
        got, norm = posterior_weights(a, prior)
    assert _same_bits(norm, want_norm) and _same_bits(got, want)
    assert got.flags.c_contiguous == want.flags.c_contiguous
