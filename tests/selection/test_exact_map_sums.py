"""The exact-pass MAP estimator (``MapEstimator(order=0)``: Random IRT) with the C row sums: numpy's estimates."""

from __future__ import annotations

import numpy as np
import pytest

from irtlib.selection import ability_kernel, estimators
from irtlib.selection.adaptive import MapEstimator, MaxInformation, RandomSelection, run_adaptive


def _case(seed, n, m, *, per_model):
    rng = np.random.default_rng(seed)
    shape = (n, m) if per_model else (m,)
    a = rng.lognormal(0.0, 0.7, shape) * np.where(rng.random(shape) < 0.03, 25.0, 1.0)
    b = rng.normal(0.0, 2.0, shape)
    theta = rng.normal(0.0, 1.5, n)
    x = (rng.random((n, m)) < 1.0 / (1.0 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    x[0], x[1] = 1.0, 0.0                                # all safe, all unsafe: at the bounds
    x[rng.random((n, m)) < 0.1] = np.nan                 # unavailable cells: fewer items for some models
    return x, a, b


@pytest.mark.parametrize("per_model", [False, True])
@pytest.mark.parametrize("prior", [(0.0, 1.0), (0.7, 0.4)])
def test_exact_pass_with_the_c_sums_gives_numpys_estimates_bit_for_bit(monkeypatch, per_model, prior):
    if ability_kernel.map_row_sums() is None:
        pytest.skip("the ability kernel cannot be built here")
    x, a, b = _case(3, 29, 300, per_model=per_model)
    record = [1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 300]
    kw = dict(budget=300, estimator=MapEstimator(order=0, prior_mean=prior[0], prior_sd=prior[1]), seed=5)
    runs = []
    for kernel in (True, False):
        if not kernel:
            monkeypatch.setattr(estimators, "map_row_sums", lambda: None)
        runs.append([run_adaptive(x, a, b, selector=RandomSelection(), record=record, **kw),
                     run_adaptive(x, a, b, selector=MaxInformation(), **dict(kw, budget=60))])
    for got, want in zip(runs[0], runs[1], strict=True):
        np.testing.assert_array_equal(got.items, want.items)
        assert np.array_equal(got.estimate.view(np.int64), want.estimate.view(np.int64))


def test_exact_pass_newton_reads_only_the_moving_models(monkeypatch):
    # the C sums are asked for the models still moving only, and the numpy pass's estimates come out
    if ability_kernel.map_row_sums() is None:
        pytest.skip("the ability kernel cannot be built here")
    x, a, b = _case(4, 40, 120, per_model=False)
    asked = []
    real = ability_kernel.map_row_sums

    def spy():
        prepare = real()

        def wrapped(*args):
            sums = prepare(*args)
            return lambda rows, theta: (asked.append(None if rows is None else rows.size), sums(rows, theta))[1]
        return wrapped

    monkeypatch.setattr(estimators, "map_row_sums", spy)
    got = run_adaptive(x, a, b, budget=120, selector=RandomSelection(), estimator=MapEstimator(order=0), seed=1,
                       record=[10, 50, 120])
    monkeypatch.setattr(estimators, "map_row_sums", lambda: None)
    want = run_adaptive(x, a, b, budget=120, selector=RandomSelection(), estimator=MapEstimator(order=0), seed=1,
                        record=[10, 50, 120])
    assert np.array_equal(got.estimate.view(np.int64), want.estimate.view(np.int64))
    assert None in asked and any(n is not None and n < 40 for n in asked)
