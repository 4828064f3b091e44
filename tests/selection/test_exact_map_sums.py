"""The exact-pass MAP estimator (``MapEstimator(order=0)``: Random IRT) with the C row sums: numpy's estimates."""

from __future__ import annotations

import os

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
    for path in ("newton", "sums", "numpy"):     # the C Newton, the Python loop on the C sums, numpy's pass
        if path == "sums":
            monkeypatch.setattr(ability_kernel, "newton_library", lambda check: None)
        if path == "numpy":
            monkeypatch.setattr(estimators, "map_row_sums", lambda: None)
        runs.append([run_adaptive(x, a, b, selector=RandomSelection(), record=record, **kw),
                     run_adaptive(x, a, b, selector=MaxInformation(), **dict(kw, budget=60))])
    for got_run in runs[:2]:
        for got, want in zip(got_run, runs[2], strict=True):
            np.testing.assert_array_equal(got.items, want.items)
            assert np.array_equal(got.estimate.view(np.int64), want.estimate.view(np.int64))


def test_exact_pass_newton_reads_only_the_moving_models(monkeypatch):
    # the Python loop (no newton_rows: IRTLIB_EXACT_NEWTON_KERNEL=0) asks the C sums for the models still moving
    # only, and the numpy pass's estimates come out
    if ability_kernel.map_row_sums() is None:
        pytest.skip("the ability kernel cannot be built here")
    monkeypatch.setattr(ability_kernel, "newton_library", lambda check: None)
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


def _loop_and_kernel_runs(x, a, b, est, order, blocks, theta0):
    """Two order-0 runs pushed the same blocks: estimates by the C Newton and by the Python loop on the C sums."""
    lib = ability_kernel.load()
    prepare = ability_kernel.row_sums(lib)
    n, cap = x.shape
    runs = [estimators._MapRun(est, estimators.TwoPLItems(a, b), n, cap, theta0) for _ in range(2)]
    runs[0]._exact, runs[1]._exact = lib, None
    done = 0
    out = []
    for m in blocks:
        j = order[:, done:done + m]
        for r in runs:
            r.push_block(j, np.take_along_axis(x, j, axis=1))
        done += m
        got, want = runs[0].estimate(), runs[1]._estimate_exact(runs[1]._exact_sums(prepare))
        out.append(((got[0], runs[0].info), (want[0], runs[1].info)))
    return out


def _same_bits(u, v):
    return u.shape == v.shape and np.array_equal(u.view(np.int64), v.view(np.int64))


@pytest.mark.parametrize("max_newton", [50, 4, 1, 0])
@pytest.mark.parametrize("per_model", [False, True])
def test_exact_newton_in_c_equals_the_python_loop_on_random_runs(max_newton, per_model):
    # every estimate and information of newton_rows equals the Python loop's, bit for bit, after every block
    # (few Newton steps: models handed to map_ability; steep items; missing responses; far starts)
    if ability_kernel.load() is None:
        pytest.skip("the ability kernel cannot be built here")
    rng = np.random.default_rng(max_newton + 100 * per_model)
    x, a, b = _case(max_newton + 7, 37, 80, per_model=per_model)
    order = np.argsort(rng.random(x.shape), axis=1)
    est = MapEstimator(order=0, max_newton=max_newton, prior_mean=0.3, prior_sd=0.8, max_step=2.0)
    for got, want in _loop_and_kernel_runs(x, a, b, est, order, [1, 1, 2, 5, 11, 20, 40],
                                           rng.normal(0.0, 6.0, 37)):
        assert all(_same_bits(g, w) for g, w in zip(got, want, strict=True))


def test_exact_newton_in_c_equals_the_python_loop_on_hand_made_rows():
    # all-safe and all-unsafe rows (estimates at the bounds), a row with no response, an item of a = 0,
    # a start at the bound and one at -0.0, one model
    if ability_kernel.load() is None:
        pytest.skip("the ability kernel cannot be built here")
    a = np.array([1.0, 2.5, 0.0, 0.7, 30.0])
    b = np.array([-1.0, 0.0, 0.5, 2.0, 0.1])
    x = np.array([[1.0, 1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0, 0.0], [np.nan] * 5, [1.0, 0.0, np.nan, 1.0, 0.0]])
    order = np.tile(np.arange(5), (4, 1))
    for theta0 in (np.array([8.0, -8.0, -0.0, 0.0]), np.zeros(4)):
        for est in (MapEstimator(order=0), MapEstimator(order=0, prior_sd=0.1, tol=1e-14, max_newton=3)):
            for got, want in _loop_and_kernel_runs(x, a, b, est, order, [1, 2, 2], theta0):
                assert all(_same_bits(g, w) for g, w in zip(got, want, strict=True))
    one = _loop_and_kernel_runs(x[3:], a, b, MapEstimator(order=0), order[3:], [5], np.zeros(1))
    assert all(_same_bits(g, w) for g, w in zip(*one[0], strict=True))


def test_newton_rows_is_the_path_of_the_order_zero_estimator(monkeypatch):
    # MapEstimator(order=0) estimates through newton_rows where the kernel loads; without it (the switch) not
    if ability_kernel.load() is None:
        pytest.skip("the ability kernel cannot be built here")
    calls = []
    real = ability_kernel.newton_rows
    monkeypatch.setattr(ability_kernel, "newton_rows", lambda *a, **k: (calls.append(1), real(*a, **k))[1])
    x, a, b = _case(9, 12, 40, per_model=False)
    kw = dict(budget=40, selector=RandomSelection(), estimator=MapEstimator(order=0), seed=2, record=[5, 40])
    got = run_adaptive(x, a, b, **kw)
    assert len(calls) == 2
    monkeypatch.setattr(ability_kernel, "newton_library", lambda check: None)
    want = run_adaptive(x, a, b, **kw)
    assert len(calls) == 2 and _same_bits(got.estimate, want.estimate)


def test_the_loaders_check_refuses_a_newton_unlike_the_loop(monkeypatch):
    # exact_newton_matches (newton_library's check) notices a kernel that stops one step early or at another tol
    lib = ability_kernel.load()
    if lib is None:
        pytest.skip("the ability kernel cannot be built here")
    assert estimators.exact_newton_matches(lib)
    real = ability_kernel.newton_rows
    for change in ({"tol": 1.5}, {"max_newton": -1}):
        def altered(*args, change=change, **kw):
            kw.update({k: kw[k] * v if k == "tol" else max(0, kw[k] + v) for k, v in change.items()})
            return real(*args, **kw)
        monkeypatch.setattr(ability_kernel, "newton_rows", altered)
        assert not estimators.exact_newton_matches(lib)


def test_the_switch_keeps_the_python_loop(tmp_path):
    # IRTLIB_EXACT_NEWTON_KERNEL=0: newton_library gives None in a fresh process
    import subprocess
    import sys

    code = ("from irtlib.selection import ability_kernel, estimators; "
            "print(ability_kernel.newton_library(estimators.exact_newton_matches) is None)")
    env = dict(os.environ, IRTLIB_EXACT_NEWTON_KERNEL="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
