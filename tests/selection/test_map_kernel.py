"""The MAP estimate's Newton in C: the numpy path's estimates, information and re-centring, bit for bit."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from fractions import Fraction

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

    built = compiled(map_kernel.SOURCE, map_kernel._bind, switch="IRTLIB_MAP_KERNEL")
    if built is None:
        pytest.skip("the MAP kernel cannot be built here")
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


def test_the_loaders_check_refuses_a_kernel_whose_newton_differs(lib, monkeypatch):
    assert estimators.map_kernel_matches(lib)
    original = estimators._taylor_terms

    def other(d, invfact):               # the numpy path's terms a little off: not the kernel's numbers
        return original(d, invfact) * (1.0 + 2.0 ** -30)

    monkeypatch.setattr(estimators, "_taylor_terms", other)
    assert not estimators.map_kernel_matches(lib)
    monkeypatch.setattr(estimators, "_taylor_terms", original)
    assert estimators.map_kernel_matches(lib)


def _ulps(got: float, exact: Fraction) -> float:
    """``|got - exact|`` in units in the last place of ``exact`` (float64)."""
    near = float(exact)
    ulp = np.spacing(abs(near)) if near else 5e-324
    return float(abs(Fraction(got) - exact) / Fraction(ulp))


def test_the_taylor_terms_are_repeated_products_within_their_ulp_bound_of_the_exact_values():
    # d^n by n - 1 products, each correctly rounded: relative error at most (1 + u)^(n-1) - 1, about
    # (n - 1) ulp; times 1 / n! (rounded) and that product (rounded): at most n + 1 ulp of d^n / n!
    rng = np.random.default_rng(17)
    d = np.concatenate([rng.normal(0, 0.5, 300), rng.uniform(-3, 3, 100), [0.0, -0.0, 1.0, -1.0, 2.5e-3]])
    order = 12
    invfact = 1.0 / np.cumprod(np.r_[1.0, np.arange(1, order + 1)])
    terms = estimators._taylor_terms(d, invfact)
    assert terms.shape == (d.size, order + 1)
    worst = np.zeros(order + 1)
    for i, v in enumerate(d):
        for n in range(order + 1):
            exact = Fraction(v) ** n / math.factorial(n)
            assert np.sign(terms[i, n]) == np.sign(float(exact))
            worst[n] = max(worst[n], _ulps(terms[i, n], exact))
    assert np.all(worst <= np.arange(order + 1) + 1), worst
    assert worst[0] == 0 and worst[1] == 0                   # 1 and d exact; d / 1! exact
    # the powers are the plain products, bit for bit: 1, d, d * d, (d * d) * d, ...
    p = np.ones_like(d)
    for n in range(order + 1):
        np.testing.assert_array_equal(terms[:, n], p * invfact[n])
        p = p * d


def test_the_taylor_terms_keep_ieee_special_values():
    invfact = 1.0 / np.cumprod(np.r_[1.0, np.arange(1, 6)])
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        terms = estimators._taylor_terms(np.array([np.nan, np.inf, -np.inf, 1e200, 5e-324]), invfact)
    assert np.all(terms[:, 0] == 1.0)
    assert np.isnan(terms[0, 1:]).all()
    np.testing.assert_array_equal(terms[1, 1:], np.inf)
    np.testing.assert_array_equal(np.sign(terms[2, 1:]), [-1, 1, -1, 1, -1])
    assert np.isinf(terms[3, 2:]).all() and np.all(terms[4, 2:] == 0.0)


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


@pytest.mark.parametrize("why", ["switched-off", "no-compiler"])
def test_without_the_kernel_the_estimator_keeps_its_numpy_path(lib, tmp_path, why):
    code = ("import numpy as np\n"
            "from irtlib.selection import map_kernel\n"
            "from irtlib.selection.adaptive import run_adaptive\n"
            "from irtlib.selection.estimators import map_kernel_matches\n"
            "assert map_kernel.load(map_kernel_matches) is None\n"
            "rng = np.random.default_rng(0)\n"
            "a, b = rng.lognormal(0, 0.5, 80), rng.normal(size=80)\n"
            "x = (rng.random((4, 80)) < 0.6).astype(float)\n"
            "print(run_adaptive(x, a, b, budget=30).estimate.tobytes().hex())\n")
    if why == "switched-off":
        env = dict(os.environ, IRTLIB_MAP_KERNEL="0")
    else:                                # no compiler and no library built before: the numpy path
        env = dict(os.environ, CC=str(tmp_path / "no-such-compiler"), IRTLIB_KERNEL_DIR=str(tmp_path / "kernels"))
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


def test_the_kernels_push_writes_the_numpy_paths_columns_sums_and_moments_bit_for_bit(lib):
    """map_kernel.push (two C passes around numpy's expit and matmul) against the numpy push: every array the push
    writes equal bit for bit (signed zeros included: models without a response push a = 0), at every step."""
    rng = np.random.default_rng(41)
    for n_models, n_items, spread in [(1, 30, 1.0), (23, 60, 0.3), (64, 40, 3.0)]:
        a, b, x = _bank(rng, n_models, n_items, spread, 0.2)
        items = TwoPLItems(a, b)
        runs = [MapEstimator().begin(items, n_models, n_items, 0.0) for _ in range(2)]
        runs[0]._kernel, runs[1]._kernel = None, lib
        rows = np.arange(n_models)
        order = np.argsort(rng.random(x.shape), axis=1)
        for t in range(n_items):
            j = np.where(rng.random(n_models) < 0.05, -1, order[:, t])
            for r in runs:
                r.push(j, x[rows, np.maximum(j, 0)])
                r.estimate()
            for name in ("A", "B", "X", "AB", "sax", "M", "amax", "theta_r"):
                one, two = getattr(runs[0], name), getattr(runs[1], name)
                assert np.array_equal(one.view(np.int64), two.view(np.int64)), name


def test_the_kernels_recentring_writes_the_numpy_paths_moments_bit_for_bit(lib):
    """map_kernel.recentre (two C passes around numpy's matmul) against the numpy re-centring: M and theta_r equal bit
    for bit (signed zeros included) for rows in any order, one row, every row, no item yet, and after resizes."""
    rng = np.random.default_rng(43)
    for n_models, n_items, spread in [(1, 25, 1.0), (19, 70, 0.3), (48, 40, 3.0)]:
        a, b, x = _bank(rng, n_models, n_items, spread, 0.2)
        items = TwoPLItems(a, b)
        for est in (MapEstimator(), MapEstimator(order=3), MapEstimator(order=12, radius=0.5)):
            runs = [est.begin(items, n_models, max(1, n_items // 3), 0.0) for _ in range(2)]    # grows past this
            runs[0]._kernel, runs[1]._kernel = None, lib
            order = np.argsort(rng.random(x.shape), axis=1)
            rows_all = np.arange(n_models)
            for t in range(-1, n_items):
                if t >= 0:
                    j = np.where(rng.random(n_models) < 0.05, -1, order[:, t])
                    for r in runs:
                        r.push(j, x[rows_all, np.maximum(j, 0)])
                for rows in (rows_all, rng.permutation(n_models)[: max(1, n_models // 3)], rows_all[-1:]):
                    theta = rng.normal(0.0, 3.0, rows.size)
                    theta[rng.random(rows.size) < 0.1] = -0.0
                    for r in runs:
                        r._recentre(rows, theta)
                    for name in ("M", "theta_r"):
                        one, two = getattr(runs[0], name), getattr(runs[1], name)
                        assert np.array_equal(one.view(np.int64), two.view(np.int64)), name
                    assert runs[0].recentred == runs[1].recentred
