"""The multidimensional 2PL (irtlib.extended.mirt): recovery on simulated 2-D data, its adaptive test."""

import numpy as np
import pytest
from scipy.linalg import orthogonal_procrustes

from irtlib.core.kernels import probability as probability_2pl
from irtlib.errors import InputError
from irtlib.extended import mirt


def _simulate(*, n_models=800, n_items=60, rho=0.4, cross=True, seed=0):
    rng = np.random.default_rng(seed)
    corr = np.array([[1, rho], [rho, 1]])
    theta = rng.multivariate_normal([0, 0], corr, n_models)
    half = n_items // 2
    loadings = np.zeros((n_items, 2))
    loadings[:half, 0] = np.exp(rng.normal(0.2, 0.3, half))
    loadings[half:, 1] = np.exp(rng.normal(0.2, 0.3, n_items - half))
    if cross:
        loadings[::5] = np.abs(rng.normal(0.8, 0.3, (len(loadings[::5]), 2)))
    intercepts = rng.normal(0, 1, n_items)
    x = (rng.random((n_models, n_items)) < mirt.probability(theta, loadings, intercepts)).astype(float)
    return x, theta, loadings, intercepts, corr


def test_one_dimension_is_the_2pl():
    a, d = np.array([0.5, 1.5]), np.array([0.3, -1.0])
    theta = np.linspace(-3, 3, 7)[:, None]
    np.testing.assert_allclose(mirt.probability(theta, a[:, None], d), probability_2pl(theta, a, -d / a), rtol=1e-12)


def test_exploratory_fit_recovers_the_loadings_up_to_rotation():
    x, _, loadings, intercepts, corr = _simulate()
    fit = mirt.fit_mirt(x, n_dims=2)
    assert fit.diagnostics["converged"]
    target = loadings @ np.linalg.cholesky(corr)        # the same model with an identity latent
    rot, _ = orthogonal_procrustes(fit.loadings, target)
    aligned = fit.loadings @ rot
    assert np.corrcoef(aligned.ravel(), target.ravel())[0, 1] > 0.95
    assert np.abs(aligned - target).mean() < 0.15
    assert np.corrcoef(fit.intercepts, intercepts)[0, 1] > 0.98
    np.testing.assert_allclose(fit.corr, np.eye(2))


def test_confirmatory_fit_recovers_loadings_and_the_correlation():
    x, theta, loadings, intercepts, corr = _simulate(cross=False, rho=0.4, seed=1)
    mask, names = mirt.structure_from_labels(np.where(loadings[:, 0] > 0, "standard", "contextual"))
    assert list(names) == ["contextual", "standard"]
    fit = mirt.fit_mirt(x, structure=mask)
    assert fit.diagnostics["converged"]
    assert (fit.loadings[~mask] == 0).all()
    est = fit.loadings[mask]
    true = loadings[mask[:, ::-1]]                      # dimension 0 is "contextual" = true dimension 1
    assert np.corrcoef(est, true)[0, 1] > 0.9 and np.abs(est - true).mean() < 0.15
    assert fit.corr[0, 1] == pytest.approx(0.4, abs=0.1)     # SE of rho with 800 models ~ 0.04
    assert np.corrcoef(fit.theta[:, 1], theta[:, 0])[0, 1] > 0.85
    # the data favour the truth's structure: the marginal likelihood beats a unidimensional fit
    uni = mirt.fit_mirt(x, structure=np.ones((x.shape[1], 1), bool))
    assert fit.log_likelihood > uni.log_likelihood + 50
    assert fit.n_parameters == uni.n_parameters + 1


def test_d_optimal_adaptive_test_picks_the_determinant_maximiser():
    x, _, loadings, intercepts, corr = _simulate(n_models=30, cross=True, seed=2)
    mask = loadings > 0
    fit = mirt.MirtFit(loadings=loadings, intercepts=intercepts, corr=corr, theta=np.zeros((0, 2)),
                       log_likelihood=np.nan, structure=mask, seconds=0.0)
    res = mirt.mirt_cat(x, fit, budget=6)
    nodes, logw = mirt._uniform_grid(corr, 61)
    for m in range(3):
        given = res.items[m, :3]
        lp = logw.copy()
        for j in given:                                  # the posterior on the grid, item by item
            pj = mirt.probability(nodes, loadings[j:j + 1], intercepts[j:j + 1])[:, 0]
            lp += np.log(pj if x[m, j] == 1 else 1 - pj)
        w = np.exp(lp - lp.max())
        w /= w.sum()
        mean = w @ nodes
        cov = (nodes - mean).T @ ((nodes - mean) * w[:, None])
        p = mirt.probability(mean, loadings, intercepts)[0]
        dets = [np.linalg.det(np.linalg.inv(cov) + p[j] * (1 - p[j]) * np.outer(loadings[j], loadings[j]))
                if j not in given else -np.inf for j in range(len(p))]
        assert res.items[m, 3] == int(np.argmax(dets))
    # the score is the posterior mean of the model-implied safety score on the items given
    _, score = mirt.mirt_scores(np.where(np.isin(np.arange(x.shape[1]), res.items[0]), x[0], np.nan)[None, :], fit)
    assert res.score[0, -1] == pytest.approx(score[0], abs=5e-3)
    rand = mirt.mirt_cat(x, fit, budget=6, selection="random", seed=1)
    assert len(set(rand.items[0])) == 6 and not np.array_equal(rand.items, res.items)


def test_bad_input_is_named():
    with pytest.raises(InputError, match="0, 1 or NaN"):
        mirt.fit_mirt(np.array([[0, 2.0], [1, 0]]))
    with pytest.raises(InputError, match="item 1 loads on no dimension"):
        mirt.fit_mirt(np.array([[0, 1.0], [1, 0]]), structure=np.array([[True], [False]]))
