"""The MAP estimate's Newton in C: numpy's estimates, information and re-centring, bit for bit."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from scipy.special import expit

from irtlib.selection import estimators, map_kernel
from irtlib.selection.adaptive import run_adaptive
from irtlib.selection.estimators import MapEstimator
from irtlib.selection.items import TwoPLItems
from irtlib.selection.selectors import RandomSelection


@pytest.fixture(scope="module")
def lib():
    from irtlib.calibration.fused_kernel import compiled

    power = map_kernel.numpy_power_loop()
    built = compiled(map_kernel.SOURCE, map_kernel._bind, switch="IRTLIB_MAP_KERNEL")
    if built is None or power is None:
        pytest.skip("the MAP kernel cannot be built here (or numpy's power loop cannot be read)")
    built._power = power
    return built


def _bank(rng, n_models, n_items, spread, missing):
    a = rng.lognormal(0.0, 0.6 * spread, (n_models, n_items))
    b = rng.normal(0.0, 1.5 * spread, (n_models, n_items))
    theta = rng.normal(0.0, 2.0, n_models)
    x = (rng.random((n_models, n_items)) < expit(a * (theta[:, None] - b))).astype(float)
    x[rng.random(x.shape) < missing] = np.nan
    return a, b, x


ESTIMATORS = {"default": MapEstimator(), "two-newton-steps": MapEstimator(max_newton=2),
              "small-radius": MapEstimator(radius=0.01), "order-4": MapEstimator(order=4),
              "prior-and-bounds": MapEstimator(prior_mean=0.7, prior_sd=0.4, bounds=(-1.5, 2.0)),
              "short-steps": MapEstimator(max_step=0.05, tol=1e-10), "order-12": MapEstimator(order=12, radius=0.5)}


@pytest.mark.parametrize("est", ESTIMATORS.values(), ids=ESTIMATORS.keys())
def test_the_kernels_newton_gives_numpys_estimates_information_and_recentring_at_every_step(lib, est):
    rng = np.random.default_rng([est.order, est.max_newton, int(est.radius * 100), int(est.prior_sd * 10)])
    for n_models, n_items, spread, missing in [(1, 40, 1.0, 0.0), (2, 60, 0.3, 0.1), (37, 80, 1.0, 0.05),
                                               (100, 50, 3.0, 0.2)]:
        a, b, x = _bank(rng, n_models, n_items, spread, missing)
        order = np.argsort(rng.random(x.shape), axis=1)
        items = TwoPLItems(a, b)
        theta0 = rng.normal(0, 1, n_models)
        runs = [est.begin(items, n_models, n_items, theta0) for _ in range(2)]
        runs[0]._kernel, runs[1]._kernel = None, lib
        rows = np.arange(n_models)
        for t in range(n_items):
            j = np.where(rng.random(n_models) < 0.03, -1, order[:, t])       # some models given nothing
            got = [r.push(j, x[rows, np.maximum(j, 0)]) or r.estimate() for r in runs]
            assert np.array_equal(got[0][0], got[1][0], equal_nan=True)
            assert np.array_equal(runs[0].info, runs[1].info, equal_nan=True)
            assert np.array_equal(runs[0].M, runs[1].M) and np.array_equal(runs[0].theta_r, runs[1].theta_r)
            assert runs[0].recentred == runs[1].recentred
        assert np.array_equal(runs[0].standard_error(), runs[1].standard_error())


def test_the_kernels_dot_is_numpys_einsum_for_every_length_and_row_stride(lib):
    rng = np.random.default_rng(3)
    for count in range(0, 21):
        for pad in (0, 1, 3):
            x = rng.normal(size=(13, count + pad)) * 10.0 ** rng.integers(-8, 8, size=(13, count + pad))
            y = rng.normal(size=(13, count))
            x = x[:, pad:]
            assert np.array_equal(map_kernel.einsum_rows(lib, x, y), np.einsum("ij,ij->i", x, y))


def test_the_loaders_check_refuses_a_kernel_whose_powers_are_not_numpys(lib):
    from irtlib.calibration.fused_kernel import compiled

    other = compiled(map_kernel.SOURCE, map_kernel._bind, switch="IRTLIB_MAP_KERNEL")
    head = map_kernel._UFuncHead.from_address(id(np.multiply))      # x * n instead of x ** n
    code = bytes([np.dtype(np.float64).num]) * 3
    i = next(i for i in range(head.ntypes) if head.types[3 * i:3 * i + 3] == code)
    other._power = (head.functions[i], 0)
    assert estimators.map_kernel_matches(lib)
    assert not estimators.map_kernel_matches(other)


def test_numpys_power_loop_is_found_and_other_ufuncs_are_refused(monkeypatch):
    assert map_kernel.numpy_power_loop() is not None
    monkeypatch.setattr(np, "power", np.multiply)
    assert map_kernel.numpy_power_loop() is None


@pytest.mark.parametrize("selector", [None, RandomSelection()], ids=["fluid", "random-irt"])
def test_adaptive_runs_are_the_same_with_and_without_the_kernel(monkeypatch, lib, selector):
    rng = np.random.default_rng(11)
    a, b, x = _bank(rng, 30, 400, 1.0, 0.02)
    out = []
    for use in (False, True):
        original = estimators._MapRun.__init__

        def init(self, *args, _original=original, _use=use, **kwargs):
            _original(self, *args, **kwargs)
            self._kernel = lib if _use else None

        monkeypatch.setattr(estimators._MapRun, "__init__", init)
        out.append(run_adaptive(x, a, b, budget=150, selector=selector, seed=5, record=[1, 7, 50, 150]))
        monkeypatch.setattr(estimators._MapRun, "__init__", original)
    assert np.array_equal(out[0].items, out[1].items)
    assert np.array_equal(out[0].estimate, out[1].estimate, equal_nan=True)


def test_without_the_kernel_the_estimator_keeps_its_numpy_path(lib):
    code = ("import numpy as np\n"
            "from irtlib.selection import map_kernel\n"
            "from irtlib.selection.adaptive import run_adaptive\n"
            "from irtlib.selection.estimators import map_kernel_matches\n"
            "assert map_kernel.load(map_kernel_matches) is None\n"
            "rng = np.random.default_rng(0)\n"
            "a, b = rng.lognormal(0, 0.5, 80), rng.normal(size=80)\n"
            "x = (rng.random((4, 80)) < 0.6).astype(float)\n"
            "print(run_adaptive(x, a, b, budget=30).estimate.tobytes().hex())\n")
    env = dict(os.environ, IRTLIB_MAP_KERNEL="0")
    off = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    if map_kernel.load(estimators.map_kernel_matches) is None:
        pytest.skip("the MAP kernel is not loaded in this process")
    rng = np.random.default_rng(0)
    a, b = rng.lognormal(0, 0.5, 80), rng.normal(size=80)
    x = (rng.random((4, 80)) < 0.6).astype(float)
    assert run_adaptive(x, a, b, budget=30).estimate.tobytes().hex() == off.strip()


def test_the_kernels_power_tables_are_the_numpy_passes_bit_for_bit(lib):
    rng = np.random.default_rng(9)
    v = np.concatenate([rng.normal(0, 3, 997), [np.nan, np.inf, -np.inf, 5e-324, -0.0, 1e200, -1e-200]])
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        for w in (v, v[:1000].reshape(500, 2), v[:1000].reshape(2, 500, 1), v[:1000].reshape(500, 2)[:, :1]):
            for n in (1, 2, 10, 11):
                assert np.array_equal(map_kernel.powers(lib, w, n), estimators._powers(w, n), equal_nan=True)
