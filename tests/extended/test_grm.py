"""The graded response model (irtlib.extended.grm): formulas, recovery, an independent implementation."""

import numpy as np
import pytest

from irtlib.core.kernels import fisher_information, probability
from irtlib.errors import InputError
from irtlib.extended import grm
from irtlib.selection.cat import StoppingRule, run_cat


def _simulate(n_models, n_items, n_cat, *, seed, spread=1.0):
    rng = np.random.default_rng(seed)
    a = np.exp(rng.normal(0.2, 0.3, n_items))
    b = np.sort(rng.normal(0, spread, (n_items, n_cat - 1)), axis=1)
    theta = rng.normal(0, 1, n_models)
    p = grm.category_probabilities(theta[:, None], a, b)
    x = (p.cumsum(-1) < rng.random((n_models, n_items, 1))).sum(-1).astype(float)
    return x, theta, a, b


def test_probabilities_sum_to_one_and_cumulate_to_2pl_curves():
    rng = np.random.default_rng(0)
    a = np.exp(rng.normal(0, 0.5, 7))
    b = np.sort(rng.normal(0, 2, (7, 3)), axis=1)
    theta = np.linspace(-40, 40, 81)[:, None]
    p = grm.category_probabilities(theta, a, b)
    np.testing.assert_allclose(p.sum(-1), 1, atol=1e-12)
    assert (p >= 0).all()
    # P(X >= k) is the 2PL curve with difficulty b_k (irtlib.core.kernels)
    for k in range(1, 4):
        np.testing.assert_allclose(p[..., k:].sum(-1), probability(theta, a, b[:, k - 1]), atol=1e-12)


def test_information_is_the_expected_squared_score_and_the_2pl_for_two_categories():
    rng = np.random.default_rng(1)
    a = np.exp(rng.normal(0, 0.5, 5))
    b = np.sort(rng.normal(0, 1, (5, 4)), axis=1)
    theta = np.linspace(-3, 3, 13)[:, None]
    h = 1e-5
    dlp = (grm.category_log_probabilities(theta + h, a, b) - grm.category_log_probabilities(theta - h, a, b)) / (2 * h)
    expected = (grm.category_probabilities(theta, a, b) * dlp ** 2).sum(-1)       # E[(d log P / d theta)^2]
    np.testing.assert_allclose(grm.information(theta, a, b), expected, rtol=1e-6)
    np.testing.assert_allclose(grm.information(theta, a, b[:, :1]), fisher_information(theta, a, b[:, 0]),
                               rtol=1e-12)


def test_to_categories_maps_score_levels_and_rejects_others():
    cats, levels = grm.to_categories([[0, 0.5, 1], [np.nan, 1, 0]])
    np.testing.assert_array_equal(levels, [0, 0.5, 1])
    np.testing.assert_array_equal(cats, [[0, 1, 2], [np.nan, 2, 0]])
    with pytest.raises(InputError, match="0.7"):
        grm.to_categories([0, 0.7], levels=[0, 0.5, 1])


@pytest.mark.parametrize("method", grm.GRM_ENGINES)
def test_recovers_parameters_and_abilities(method):
    x, theta, a, b = _simulate(600, 40, 4, seed=2)
    x[np.random.default_rng(3).random(x.shape) < 0.05] = np.nan          # some missing cells
    fit = grm.fit_grm(x, method=method)
    assert fit.diagnostics["converged"]
    assert np.corrcoef(fit.a, a)[0, 1] > 0.85
    assert np.abs(np.log(fit.a / a)).mean() < 0.2
    assert np.corrcoef(fit.thresholds.ravel(), b.ravel())[0, 1] > 0.97
    assert np.abs(fit.thresholds - b).mean() < 0.2
    assert np.corrcoef(fit.theta, theta)[0, 1] > 0.95
    assert (np.diff(fit.thresholds, axis=1) > 0).all()


def test_marginal_ml_maximises_the_marginal_likelihood():
    x, _, a, b = _simulate(300, 20, 3, seed=4)
    fit = grm.fit_grm(x, prior_log_a=(0, 100), prior_b=(0, 100))
    ll = grm.marginal_log_likelihood(x, fit.a, fit.thresholds)
    assert ll == pytest.approx(fit.log_likelihood, rel=1e-10)
    assert ll >= grm.marginal_log_likelihood(x, a, b)            # the truth is not better on its own data
    rng = np.random.default_rng(0)
    for _ in range(3):                                           # nor is any nearby point
        da = fit.a * np.exp(rng.normal(0, 0.05, fit.a.size))
        assert grm.marginal_log_likelihood(x, da, fit.thresholds) < ll


def test_agrees_with_girth_on_the_same_data():
    girth = pytest.importorskip("girth")
    x, _, _, _ = _simulate(1000, 25, 4, seed=5, spread=0.8)
    ours = grm.fit_grm(x, prior_log_a=(0, 100), prior_b=(0, 100))      # flat priors: plain MML, like girth
    theirs = girth.grm_mml(x.T.astype(int) + 1)
    ga, gb = theirs["Discrimination"], theirs["Difficulty"]
    ok = np.isfinite(gb).all(axis=1)
    assert ok.sum() >= 20
    assert np.corrcoef(ours.a[ok], ga[ok])[0, 1] > 0.99
    assert np.corrcoef(ours.thresholds[ok].ravel(), gb[ok].ravel())[0, 1] > 0.995
    # both maximise the same marginal likelihood: ours is at least as high, and within a hair
    ll_ours = grm.marginal_log_likelihood(x[:, ok], ours.a[ok], ours.thresholds[ok])
    ll_girth = grm.marginal_log_likelihood(x[:, ok], ga[ok], gb[ok])
    assert ll_ours >= ll_girth - 0.5
    assert abs(ll_ours - ll_girth) < 1e-3 * abs(ll_ours)


def test_graded_adaptive_test_selects_by_grm_information_and_scores_by_eap():
    x, theta, a, b = _simulate(15, 200, 3, seed=6)
    items = grm.GradedItems(a, b)
    res = run_cat(x, items, stopping=StoppingRule(max_items=20), estimator="eap")
    for m in range(3):
        g = res.items[m]
        t, s = grm.grm_ability(x[m, g][None, :], a[g], b[g])
        assert res.final_theta[m] == pytest.approx(t[0], abs=1e-9) and res.final_se[m] == pytest.approx(s[0], abs=1e-9)
        info = grm.information(res.theta[m, 9], a, b)
        info[g[:10]] = -np.inf
        assert g[10] == np.argmax(info)
    assert np.corrcoef(res.final_theta, theta)[0, 1] > 0.8
    mapped = run_cat(x, items, stopping=StoppingRule(max_items=20), estimator="map")
    # the grid mode is the posterior mode: a brute-force search on a finer grid agrees
    g = mapped.items[0]
    fine = np.linspace(-6, 6, 120001)
    lp = grm.log_likelihood(np.broadcast_to(x[0, g], (fine.size, g.size)), fine, a[g], b[g]).sum(1) - fine ** 2 / 2
    assert mapped.final_theta[0] == pytest.approx(fine[np.argmax(lp)], abs=2e-3)


def test_bad_graded_input_is_named():
    with pytest.raises(InputError, match="categories 0, 1"):
        grm.fit_grm(np.array([[0, 0.5], [1, 1.0]]))
    with pytest.raises(InputError, match=r"item \(column\) 1 has no response"):
        grm.fit_grm(np.array([[0, np.nan], [1, np.nan]]))
    with pytest.raises(InputError, match="method"):
        grm.fit_grm(np.array([[0, 1], [1, 0.0]]), method="em")


def _log_cat_padded(z):
    """The category log-probabilities on the table padded with z_0 = +inf and z_K = -inf (the formula as written)."""
    from scipy.special import log_expit

    pad = np.full(z.shape[:-1] + (1,), np.inf)
    hi, lo = np.concatenate([pad, z], axis=-1), np.concatenate([z, -pad], axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = np.log(-np.expm1(np.minimum(lo - hi, -1e-300)))
    return log_expit(hi) + log_expit(-lo) + gap


@pytest.mark.parametrize("n_cat", [2, 3, 10])
def test_category_log_probabilities_are_the_padded_formula_bit_for_bit(n_cat):
    rng = np.random.default_rng(n_cat)
    z = np.sort(rng.normal(0, 4, (30, 20, n_cat - 1)), axis=-1)
    z[0, 0], z[1, 1] = 900.0, -900.0                    # saturated cells
    z[2, 2] = z[2, 2, 0]                                 # equal thresholds: an empty category (-inf)
    got, want = grm._log_cat(z), _log_cat_padded(z)
    assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want))


def test_edge_categories_are_the_previous_additions_bit_for_bit():
    """The edge categories as ``v + 0.0``: the previous ``(-0.0 + v) + 0.0`` and ``(v + -0.0) + 0.0`` on every edge."""
    from irtlib.extended.logistic_kernel import tables

    tiny = np.nextafter(0.0, 1.0)
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, tiny, -tiny, 1e-300, -1e-300, 36.0, -37.0, 709.8, -745.1,
                      1e308, -1e308])
    z = np.stack(np.meshgrid(edges, edges, indexing="ij"), axis=-1).reshape(-1, 1, 2)
    with np.errstate(all="ignore"):
        upper, lower = tables(z)
        got = grm._log_cat(z)
        for v, col in ((lower[..., 0], 0), (upper[..., -1], -1)):
            want = (-0.0 + v) + 0.0 if col == 0 else (v + -0.0) + 0.0
            assert np.array_equal(np.isnan(got[..., col]), np.isnan(want))
            ok = ~np.isnan(want)
            assert np.array_equal(got[..., col][ok].view(np.int64), want[ok].view(np.int64))
