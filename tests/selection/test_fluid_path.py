"""The authors' Fluid path in one C call (irtlib.selection.fluid_path) against the class-based loop."""

from __future__ import annotations

import numpy as np
import pytest

from irtlib.selection import fluid_path
from irtlib.selection.adaptive import MaxInformation, MleEstimator, run_adaptive
from irtlib.selection.engine import AdaptiveTest
from irtlib.selection.items import TwoPLItems

pytestmark = pytest.mark.skipif(fluid_path.load() is None, reason="the fused path's library did not load")


def _bank(rng, n_models, n_items, *, per_model, missing=0.05, splits=3):
    """Responses of ``n_models`` simulated models; per-model banks shared by blocks of rows (splits)."""
    if per_model:
        reps = -(-n_models // splits)
        a = np.repeat(rng.lognormal(0.0, 0.5, (splits, n_items)), reps, axis=0)[:n_models]
        b = np.repeat(rng.normal(0.0, 1.5, (splits, n_items)), reps, axis=0)[:n_models]
    else:
        a, b = rng.lognormal(0.0, 0.5, n_items), rng.normal(0.0, 1.5, n_items)
    twins = a[..., 1::7].shape[-1]                 # every 7th item a twin of its left neighbour
    a[..., 1::7], b[..., 1::7] = a[..., 0::7][..., :twins], b[..., 0::7][..., :twins]
    theta = rng.normal(0.5, 1.5, n_models)
    x = (rng.random((n_models, n_items)) < 1.0 / (1.0 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    x[rng.random(x.shape) < missing] = np.nan
    return x, a, b


def _same(traj, want):
    items, est, theta = want
    assert np.array_equal(traj.items, items)
    assert np.array_equal(traj.estimate, est, equal_nan=True)
    assert np.array_equal(traj.ability, theta, equal_nan=True)


@pytest.mark.parametrize("n_models, n_items, budget, per_model", [
    (5, 30, 30, False), (12, 400, 80, True), (7, 900, 150, True), (4, 257, 257, False), (1, 60, 20, True)])
def test_equals_the_class_based_loop(n_models, n_items, budget, per_model):
    rng = np.random.default_rng(n_items + budget)
    x, a, b = _bank(rng, n_models, n_items, per_model=per_model)
    theta0 = rng.normal(0.0, 0.5, n_models)
    traj = run_adaptive(x, a, b, budget=budget, estimator=MleEstimator(), theta0=theta0)
    _same(traj, fluid_path.loop_path(TwoPLItems(a, b), x, budget, theta0))


def test_exhausted_models_and_settings():
    """Models that run out of items (-1, the last estimate carried), a small cache, other radii and MLE settings."""
    rng = np.random.default_rng(3)
    x, a, b = _bank(rng, 6, 300, per_model=True, missing=0.0)
    x[:3, 40:] = np.nan                            # three models with 40 items only
    x[4] = 1.0                                     # all safe: the MLE on its bound
    selector = MaxInformation(cache_size=16, radii=(0.01, 0.2))
    estimator = MleEstimator(tol=0.0, max_newton=20, bounds=(-6.0, 7.0))
    traj = run_adaptive(x, a, b, budget=60, selector=selector, estimator=estimator, theta0=0.3)
    assert (traj.items[:3, 40:] == -1).all()
    _same(traj, fluid_path.loop_path(TwoPLItems(a, b), x, 60, np.full(6, 0.3), selector=selector, estimator=estimator))


def test_wild_models_run_in_the_loop():
    """A model whose full pass the selector's kernel leaves to numpy (``|a (theta - b)| > 700``) takes the loop."""
    rng = np.random.default_rng(4)
    x, a, b = _bank(rng, 6, 300, per_model=True)
    b[2, ::3] = 900.0                              # row 2: wild at its first full pass
    est = MleEstimator()
    test = AdaptiveTest(TwoPLItems(a, b), selector=MaxInformation(), estimator=est, n_models=6,
                        available=~np.isnan(x), theta0=0.0, capacity=50)
    wild = fluid_path.run_mle_path(fluid_path.load(), test.selector, test.estimator, x, 50, np.zeros(6))[3]
    assert wild.tolist() == [False, False, True, False, False, False]
    traj = run_adaptive(x, a, b, budget=50, estimator=est)
    _same(traj, fluid_path.loop_path(TwoPLItems(a, b), x, 50, np.zeros(6)))


def test_map_estimator_keeps_its_path():
    """Only the MLE takes the fused path: the MAP run is the engine's, unchanged."""
    rng = np.random.default_rng(5)
    x, a, b = _bank(rng, 4, 300, per_model=False)
    traj = run_adaptive(x, a, b, budget=30)
    test = AdaptiveTest(TwoPLItems(a, b), n_models=4, available=~np.isnan(x), capacity=30)
    rows = np.arange(4)
    for t in range(30):
        j = test.propose()
        assert np.array_equal(traj.items[:, t], j)
        test.record(j, x[rows, np.maximum(j, 0)])
        assert np.array_equal(traj.estimate[:, t], test.value)
