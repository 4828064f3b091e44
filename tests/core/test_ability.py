import numpy as np
import pytest

from irtlib import log_likelihood, map_ability


def grid_mode(x, a, b, lo=-8.0, hi=8.0):
    """Posterior mode of one response pattern by brute force: a coarse then a fine grid."""
    def log_post(grid):
        ll = np.nansum(log_likelihood(x[None, :], grid[:, None], a, b), axis=1)
        return ll - 0.5 * grid**2

    coarse = np.linspace(lo, hi, 16001)                  # step 1e-3
    best = coarse[np.argmax(log_post(coarse))]
    fine = np.linspace(max(lo, best - 2e-3), min(hi, best + 2e-3), 40001)   # step 1e-7
    return fine[np.argmax(log_post(fine))]


@pytest.fixture(scope="module")
def items():
    rng = np.random.default_rng(1)
    n = 40
    return np.exp(rng.normal(0, 0.6, n)), rng.normal(0, 1.2, n)


def patterns(n, rng):
    mixed = (rng.random((6, n)) < 0.6).astype(float)
    holes = mixed.copy()
    holes[:, ::3] = np.nan                                     # unadministered items
    few = np.full((1, n), np.nan)
    few[0, :3] = [1, 0, 1]
    return np.vstack([np.ones((1, n)), np.zeros((1, n)), mixed, holes, few])


def test_map_matches_grid_mode_on_many_patterns(items):
    a, b = items
    x = patterns(a.size, np.random.default_rng(2))
    theta, se = map_ability(x, a, b)
    expected = np.array([grid_mode(row, a, b) for row in x])
    np.testing.assert_allclose(theta, expected, atol=1e-4)
    assert theta[0] > 1 and theta[1] < -1        # all-safe and all-unsafe patterns
    assert np.all(se > 0) and np.all(se < 1)


def test_no_observed_response_gives_the_prior(items):
    a, b = items
    theta, se = map_ability(np.full(a.size, np.nan), a, b)
    assert theta == 0.0 and se == pytest.approx(1.0)


def test_standard_error_is_posterior_curvature(items):
    a, b = items
    x = patterns(a.size, np.random.default_rng(3))[2]
    theta, se = map_ability(x, a, b)
    p = 1 / (1 + np.exp(-a * (theta - b)))
    assert se == pytest.approx(1 / np.sqrt(np.sum(a * a * p * (1 - p)) + 1))


def test_per_model_item_parameters_broadcast(items):
    a, b = items
    x = patterns(a.size, np.random.default_rng(4))[:4]
    full = map_ability(x, a, b)
    per_model = map_ability(x, np.tile(a, (4, 1)), np.tile(b, (4, 1)))
    np.testing.assert_allclose(full.theta, per_model.theta, atol=1e-12)


def test_all_safe_on_a_long_test_ends_on_the_bound_and_says_so():
    # 5,000 weakly discriminating items all answered safely: at theta = 8 the score is still
    # 5000 * 0.3 * sigmoid(-2.4) - 8 = 117 > 0, so the unbounded mode lies beyond the bracket
    a = np.full(5000, 0.3)
    b = np.full(5000, 0.0)
    x = np.vstack([np.ones(5000), (np.arange(5000) % 2).astype(float)])
    est = map_ability(x, a, b)
    assert est.theta[0] == 8.0 and est.at_bound[0]
    assert not est.at_bound[1] and abs(est.theta[1]) < 0.01
    assert est.used_bisection.dtype == bool


def test_newton_failure_falls_back_to_bisection(items):
    a, b = items
    x = patterns(a.size, np.random.default_rng(5))
    est = map_ability(x, a, b, max_newton=1)       # one capped step cannot converge
    assert est.used_bisection.any()
    expected = np.array([grid_mode(row, a, b) for row in x])
    np.testing.assert_allclose(est.theta, expected, atol=1e-4)


def test_bad_shapes_and_values_are_rejected(items):
    a, b = items
    with pytest.raises(ValueError, match=r"a has shape \(40,\) but responses have shape \(1, 39\)"):
        map_ability(np.ones(39), a, b)
    with pytest.raises(ValueError, match="0, 1 or NaN; found 0.5"):
        map_ability(np.full(40, 0.5), a, b)


def test_information_survives_the_tails():
    """ability.py computes P (1 - P) as sigmoid(z) sigmoid(-z), like irtlib.core.kernels.fisher_information:
    at z = 40, 1 - sigmoid(z) rounds to 0 but the information does not vanish."""
    from irtlib.core.ability import _score_and_information
    from irtlib.core.kernels import fisher_information

    a, b = np.array([4.0, 1.0]), np.array([-10.0, 0.0])
    theta = np.array([0.0])
    x, observed = np.ones((1, 2)), np.ones((1, 2), dtype=bool)
    grad, info = _score_and_information(theta, x, observed, a, b, 0.0, 1.0)
    assert info[0] == fisher_information(0.0, a, b).sum()
    _, info_tail = _score_and_information(theta, x[:, :1], observed[:, :1], a[:1], b[:1], 0.0, 1.0)
    assert 0.0 < info_tail[0] == pytest.approx(16 * np.exp(-40.0), rel=1e-12)


def _bisection_to_the_end(x, a, b, lo=-8.0, hi=8.0, iterations=200):
    """The bisection fallback run for all its iterations (prior N(0, 1)), from the kernels' score alone."""
    from irtlib.core.kernels import score_and_information

    observed = ~np.isnan(x)
    x = np.where(observed, x, 0.0)

    def grad(theta):
        score, _ = score_and_information(x, theta[:, None], a, b, None)
        return np.where(observed, score, 0.0).sum(axis=1) - theta

    left, right = np.full(x.shape[0], lo), np.full(x.shape[0], hi)
    for _ in range(iterations):
        mid = 0.5 * (left + right)
        g = grad(mid)
        left, right = np.where(g > 0, mid, left), np.where(g > 0, right, mid)
    theta = 0.5 * (left + right)
    return np.where(grad(np.full(x.shape[0], hi)) > 0, hi, np.where(grad(np.full(x.shape[0], lo)) < 0, lo, theta))


def test_bisection_that_stops_once_settled_gives_the_full_run_bit_for_bit():
    # steep items (a from 3 to 15, as in PandaGuard's fit); a few Newton steps leave some models to bisection
    rng = np.random.default_rng(4)
    a, b = rng.uniform(3, 15, 89), rng.normal(-1.5, 1, 89)
    theta = rng.normal(0, 1.5, 300)
    x = (rng.random((300, 89)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    x[rng.random(x.shape) < 0.05] = np.nan
    est = map_ability(x, a, b, max_newton=5)
    assert 10 <= est.used_bisection.sum() < x.shape[0] - 10
    which = est.used_bisection
    np.testing.assert_array_equal(est.theta[which], _bisection_to_the_end(x[which], a, b))
    every = map_ability(x, a, b, max_newton=0)          # every model by bisection
    np.testing.assert_array_equal(every.theta, _bisection_to_the_end(x, a, b))


@pytest.mark.parametrize("kernel", [False, True])
def test_without_standard_errors_the_estimates_are_the_same(items, kernel):
    from irtlib.selection.ability_kernel import map_row_sums

    a, b = items
    x = patterns(a.size, np.random.default_rng(6))
    sums = map_row_sums() if kernel else None
    for kw in ({}, {"max_newton": 1}, {"theta0": 3.0}):
        full = map_ability(x, a, b, row_sums=sums, **kw)
        bare = map_ability(x, a, b, row_sums=sums, standard_errors=False, **kw)
        assert np.array_equal(bare.theta, full.theta) and np.array_equal(bare.used_bisection, full.used_bisection)
        assert bare.se is None and bare.at_bound is None
        one = map_ability(x[2], a, b, row_sums=sums, standard_errors=False, **kw)
        assert one.theta == full.theta[2] and one.se is None
