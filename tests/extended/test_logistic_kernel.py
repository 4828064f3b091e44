"""The logistic tables in C (irtlib.extended.logistic_kernel): scipy's bits, and the M2PL and GRM fits unchanged."""

import numpy as np
import pytest
from scipy.special import expit, log_expit

from irtlib.extended import grm, logistic_kernel, mirt


def _same_bits(x, y):
    nan = np.isnan(x)
    return np.array_equal(nan, np.isnan(y)) and np.array_equal(x[~nan].view(np.int64), y[~nan].view(np.int64))


@pytest.fixture
def kernel():
    if logistic_kernel.load() is None:
        pytest.skip("the logistic kernel cannot be built here")


@pytest.fixture
def scipy_only(monkeypatch):
    """Make the library compute its tables with scipy, as before the kernel."""
    def use_scipy():
        monkeypatch.setenv(logistic_kernel.SWITCH, "0")
    return use_scipy


def test_tables_are_scipys_bit_for_bit(kernel):
    rng = np.random.default_rng(3)
    tiny = np.nextafter(0.0, 1.0)
    z = np.concatenate([logistic_kernel._check_values(), rng.normal(0, 5, 200_000), rng.uniform(-750, 750, 50_000),
                        tiny * np.arange(-3000.0, 3000.0), np.nextafter(np.float64([36.0, -36.0, 709.78, -745.13]), 0)])
    got = logistic_kernel.tables(z, sigmoid=True, sigmoid_neg=True)
    with np.errstate(over="ignore"):
        want = (log_expit(z), log_expit(-z), expit(z), expit(-z))
    for g, w in zip(got, want, strict=True):
        assert _same_bits(g, w)
    assert np.signbit(got[0][z == np.inf]).all() and np.signbit(got[1][z == -np.inf]).all()   # -0.0, as scipy's


def test_tables_keep_shape_layout_and_the_asked_tables(kernel):
    z = np.random.default_rng(4).normal(0, 2, (7, 5, 3))
    out = logistic_kernel.tables(z)
    assert len(out) == 2 and all(t.shape == z.shape and t.flags.c_contiguous for t in out)
    assert len(logistic_kernel.tables(z, sigmoid=True)) == 3
    assert _same_bits(logistic_kernel.tables(z, sigmoid_neg=True)[2], expit(-z))
    fortran = np.asfortranarray(z)           # scipy's layout is kept: the tables then come from scipy
    for g, w in zip(logistic_kernel.tables(fortran, sigmoid=True), (log_expit(fortran), log_expit(-fortran),
                                                                    expit(fortran)), strict=True):
        assert g.flags.f_contiguous == w.flags.f_contiguous and _same_bits(g, w)


def test_switch_turns_the_kernel_off(monkeypatch):
    monkeypatch.setenv(logistic_kernel.SWITCH, "0")
    assert logistic_kernel.load() is None
    z = np.linspace(-40, 40, 101)
    assert all(_same_bits(g, w) for g, w in zip(logistic_kernel.tables(z), (log_expit(z), log_expit(-z)), strict=True))


def _mirt_data(seed=0):
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=(150, 2))
    loadings = np.abs(rng.normal(1.0, 0.4, (24, 2))) * (rng.random((24, 2)) < 0.7)
    loadings[loadings.sum(axis=1) == 0, 0] = 1.0
    x = (rng.random((150, 24)) < mirt.probability(theta, loadings, rng.normal(0, 1, 24))).astype(float)
    x[rng.random(x.shape) < 0.05] = np.nan
    return x, loadings > 0


def _fit_fields(fit):
    return [fit.loadings, fit.intercepts, fit.corr, fit.theta, np.float64(fit.log_likelihood)]


@pytest.mark.parametrize("confirmatory", [True, False])
def test_mirt_fit_scores_and_test_are_the_scipy_paths(kernel, scipy_only, confirmatory):
    x, mask = _mirt_data()
    structure = mask if confirmatory else None
    new = mirt.fit_mirt(x, structure=structure, n_dims=2, tol=1e-8)
    new_scores = mirt.mirt_scores(x[:20], new)
    new_cat = mirt.mirt_cat(x[:6], new, budget=5)
    scipy_only()
    old = mirt.fit_mirt(x, structure=structure, n_dims=2, tol=1e-8)
    assert new.diagnostics["iterations"] == old.diagnostics["iterations"] > 5
    for n, o in zip(_fit_fields(new), _fit_fields(old), strict=True):
        assert np.array_equal(n, o)
    for n, o in zip(new_scores, mirt.mirt_scores(x[:20], old), strict=True):
        assert np.array_equal(n, o)
    old_cat = mirt.mirt_cat(x[:6], old, budget=5)
    assert np.array_equal(new_cat.items, old_cat.items) and np.array_equal(new_cat.score, old_cat.score)


def _graded(n_models, n_items, n_cat, seed=0):
    rng = np.random.default_rng(seed)
    a = np.exp(rng.normal(0.2, 0.4, n_items))
    b = np.sort(rng.normal(0, 1.2, (n_items, n_cat - 1)), axis=1)
    p = grm.category_probabilities(rng.normal(size=(n_models, 1)), a, b)
    u = rng.random((n_models, n_items, 1))
    x = (u > np.cumsum(p, axis=-1)).sum(axis=-1).astype(float)
    x[rng.random(x.shape) < 0.05] = np.nan
    return x


@pytest.mark.parametrize(("shape", "n_cat"), [((200, 15), 3), ((12, 60), 3), ((150, 10), 6)])
def test_grm_fits_are_the_scipy_paths(kernel, scipy_only, shape, n_cat):
    x = _graded(*shape, n_cat)                   # more models than items: marginal ML; fewer: the joint mode
    new = grm.fit_grm(x, tol=1e-8)
    theta = np.linspace(-4, 4, 9)[:, None]
    new_info = grm.information(theta, new.a, new.thresholds)
    scipy_only()
    old = grm.fit_grm(x, tol=1e-8)
    assert new.method == old.method and new.diagnostics["evaluations"] == old.diagnostics["evaluations"]
    for field in ("a", "thresholds", "theta", "theta_se"):
        assert np.array_equal(getattr(new, field), getattr(old, field))
    assert new.log_likelihood == old.log_likelihood
    assert np.array_equal(new_info, grm.information(theta, old.a, old.thresholds))


def test_grm_expected_loglik_without_the_callers_slopes_is_the_same(kernel):
    rng = np.random.default_rng(5)
    alpha, b = rng.normal(0, 0.3, 8), np.sort(rng.normal(0, 1, (8, 2)), axis=1)
    c = np.concatenate([b[:, :1], np.log(np.diff(b, axis=1))], axis=1)
    nodes, counts = np.linspace(-3, 3, 11), rng.random((8, 11, 3))
    z = np.exp(alpha)[:, None, None] * (nodes[None, :, None] - b[:, None, :])
    lp, ds = grm._cat_tables(z)
    given = grm._expected_loglik(alpha, c, b, nodes, counts, z=z, lp=lp, ds=ds)
    for out in (grm._expected_loglik(alpha, c, b, nodes, counts, z=z, lp=lp),
                grm._expected_loglik(alpha, c, b, nodes, counts)):
        assert out[0] == given[0] and all(np.array_equal(g, o) for g, o in zip(given[1:4], out[1:4], strict=True))
