"""The MLE kernel's kept partial sums: every estimate equal to the one summed whole, bit for bit."""

import numpy as np
import pytest

SETTINGS = {"tol": 1e-6, "bounds": (-8.0, 8.0), "max_newton": 100, "max_halvings": 15, "max_bisection": 80}


@pytest.fixture(scope="module")
def lib():
    from irtlib.selection import score_kernel

    lib = score_kernel.load()
    if lib is None:
        pytest.skip("the MLE score kernel cannot be built here")
    return lib


def _run(lib, *, n, steps, seed, memo):
    from irtlib.selection import score_kernel

    rng = np.random.default_rng(seed)
    a, b = np.exp(rng.normal(0.0, 0.6, (n, steps))), rng.normal(0.0, 1.5, (n, steps))
    x = (rng.random((n, steps)) < 1.0 / (1.0 + np.exp(-a * (rng.normal(0.0, 1.0, (n, 1)) - b)))).astype(float)
    x[0], x[1], x[2] = 1.0, 0.0, rng.random(steps)          # all safe, all unsafe, fractional
    gone = rng.random((n, steps)) < 0.05
    a[gone] = b[gone] = x[gone] = 0.0                       # missing responses, as _MleRun.push writes them
    terms = score_kernel.RowTerms(lib)
    theta, out = np.zeros(n), np.empty((steps, n))
    for t in range(1, steps + 1):
        if not memo:
            terms._fit(a.shape)
            terms.memo, terms._inputs = None, None          # no record: every sum read whole
        terms.estimate(theta, x, a, b, t, **SETTINGS)
        out[t - 1] = theta
    return out, terms


@pytest.mark.parametrize("steps, seed", [(150, 1), (700, 2), (1100, 3)])
def test_estimates_with_kept_partial_sums_equal_those_summed_whole_at_every_step(lib, steps, seed):
    kept, terms = _run(lib, n=9, steps=steps, seed=seed, memo=True)
    whole, _ = _run(lib, n=9, steps=steps, seed=seed, memo=False)
    np.testing.assert_array_equal(kept, whole)
    levels = terms.memo[:, 1]
    assert np.all(levels >= 1)                                # a tree beyond one leaf was recorded for every row


def test_fluid_runs_with_kept_partial_sums_equal_the_numpy_iteration(lib, monkeypatch):
    from irtlib.selection import score_kernel
    from irtlib.selection.adaptive import run_adaptive
    from irtlib.selection.estimators import MleEstimator

    rng = np.random.default_rng(4)
    n, n_items, budget = 5, 420, 300                  # past two levels of numpy's pairwise tree
    a, b = np.exp(rng.normal(0.0, 0.5, n_items)), rng.normal(0.0, 1.5, n_items)
    x = (rng.random((n, n_items)) < 1.0 / (1.0 + np.exp(-a * (rng.normal(0.0, 1.0, (n, 1)) - b)))).astype(float)
    x[0] = 1.0
    in_c = run_adaptive(x, a, b, budget=budget, estimator=MleEstimator(), theta0=0.3)
    monkeypatch.setitem(score_kernel._LOADED, "lib", None)
    in_numpy = run_adaptive(x, a, b, budget=budget, estimator=MleEstimator(), theta0=0.3)
    np.testing.assert_array_equal(in_c.items, in_numpy.items)
    np.testing.assert_array_equal(in_c.estimate, in_numpy.estimate)
