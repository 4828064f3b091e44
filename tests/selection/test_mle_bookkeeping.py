"""The MLE run's bookkeeping: its pushed parameters and the kernel's kept addresses give the same estimates."""

from __future__ import annotations

import numpy as np
import pytest

from irtlib.selection.estimators import MleEstimator
from irtlib.selection.items import TwoPLItems


def _bank(rng, n_models, n_items, per_model):
    shape = (n_models, n_items) if per_model else (n_items,)
    return TwoPLItems(np.exp(rng.normal(0, 1, shape)), rng.normal(0, 2, shape))


@pytest.mark.parametrize("per_model", [True, False])
def test_pushed_parameters_are_the_item_models_lookup(per_model):
    rng = np.random.default_rng(11)
    n_models, n_items = 9, 40
    items = _bank(rng, n_models, n_items, per_model)
    run = MleEstimator().begin(items, n_models, 3, 0.0)
    for t in range(12):                                     # capacity 3 grows
        j = rng.integers(-1, n_items, n_models)
        x = np.where(rng.random(n_models) < 0.2, np.nan, (rng.random(n_models) < 0.5).astype(float))
        x[j < 0] = np.nan
        run.push(j, x)
        a, b, _ = items.at(j)
        obs = (j >= 0) & ~np.isnan(x)
        np.testing.assert_array_equal(run.A[:, t], np.where(obs, a, 0.0))
        np.testing.assert_array_equal(run.B[:, t], np.where(obs, b, 0.0))
        np.testing.assert_array_equal(run.X[:, t], np.where(obs, x, 0.0))


def test_kept_addresses_follow_new_arrays():
    from irtlib.selection import score_kernel

    lib = score_kernel.load()
    if lib is None:
        pytest.skip("the MLE score kernel cannot be built here")
    rng = np.random.default_rng(12)
    n, cap = 7, 50
    settings = {"tol": 1e-6, "bounds": (-8.0, 8.0), "max_newton": 100, "max_halvings": 15, "max_bisection": 80}
    kept = score_kernel.RowTerms(lib)
    for t in (5, 20, 20, 50):
        x = (rng.random((n, cap)) < 0.5).astype(float)      # new arrays at every call, of one shape
        a, b = np.exp(rng.normal(0, 1, (n, cap))), rng.normal(0, 2, (n, cap))
        theta, again = np.zeros(n), np.zeros(n)
        kept.estimate(theta, x, a, b, t, **settings)
        score_kernel.RowTerms(lib).estimate(again, x, a, b, t, **settings)
        np.testing.assert_array_equal(theta, again)
        kept.estimate(theta, x, a, b, t, **settings)        # the same arrays again: the kept addresses
        fresh = again.copy()
        score_kernel.RowTerms(lib).estimate(fresh, x, a, b, t, **settings)
        np.testing.assert_array_equal(theta, fresh)
