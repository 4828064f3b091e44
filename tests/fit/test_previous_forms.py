"""The model-fit checks' faster kernels give the same bits as their previous forms (``fit_previous_forms``).

S-X2's normal approximation now skips the cells whose two normal CDFs are both exactly 0 or both exactly
1; its exact leave-one-out recursion runs each (item, node) in one direction only; the 1PL / 3PL engine
evaluates each logistic once per iteration. Each is checked against the previous form, bit for bit, on
inputs that reach the edge cases (saturated tails, probabilities of 0 and 1, missing cells, both memory
layouts of the responses and arrays large enough for numpy to reuse temporaries).
"""

import warnings

import fit_previous_forms as previous
import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, ndtr

from irtlib import ResponseMatrix, compare_models
from irtlib.calibration import models
from irtlib.calibration.joint_map import Calibration
from irtlib.calibration.models import fit_irt_values
from irtlib.fit import checks
from irtlib.fit.checks import item_fit, lord_wingersky, sx2_expected


def same_bits(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and np.array_equal(a.view(np.int64), b.view(np.int64))


def test_ndtr_is_exactly_one_and_zero_beyond_the_bounds_the_kernel_skips():
    above = np.linspace(checks.SATURATED_ABOVE - 1.5, 80.0, 200_001)
    below = np.linspace(-80.0, -checks.SATURATED_BELOW + 1.5, 200_001)
    assert np.all(ndtr(above) == 1.0) and np.all(ndtr(below) == 0.0)
    grid = np.linspace(-45.0, 12.0, 1_000_001)
    assert np.all(np.diff(ndtr(grid)) >= 0)          # monotone: nothing beyond the bounds comes back


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_live_normal_pmf_equals_every_cell_evaluated(seed):
    rng = np.random.default_rng(seed)
    c, q = 37, 41
    mean = rng.uniform(0, 3000, size=(c, q))
    var = rng.uniform(0, 40, size=(c, q)) ** 2
    var[0, :5] = [0.0, 1e-14, 1e-9, 1e-3, 1.0]              # variance floored at 1e-12
    scores = np.sort(rng.integers(0, 3000, size=60))
    scores[10] = scores[11]                                  # a repeated score
    scores = np.concatenate([scores, [int(mean[3, 7])]])    # one near a mean
    scores.sort()
    got = checks._normal_pmf_live(scores, mean, var)
    assert same_bits(got, previous.normal_pmf_dense(scores, mean, var))
    assert (got == 0).mean() > 0.5                           # the case the kernel is for: mostly saturated


def test_live_normal_pmf_falls_back_to_every_cell_when_it_cannot_skip():
    rng = np.random.default_rng(3)
    mean, var = rng.uniform(0, 50, size=(4, 5)), rng.uniform(1, 9, size=(4, 5))
    unsorted = np.array([30, 2, 17, 5])
    assert same_bits(checks._normal_pmf_live(unsorted, mean, var), previous.normal_pmf_dense(unsorted, mean, var))
    mean[1, 2] = np.nan
    scores = np.array([2, 5, 17, 30])
    assert same_bits(checks._normal_pmf_live(scores, mean, var), previous.normal_pmf_dense(scores, mean, var))


def _item_curves(n_nodes, n_items, seed):
    rng = np.random.default_rng(seed)
    nodes = np.linspace(-6, 6, n_nodes)
    a, b = np.exp(rng.normal(0, 1, n_items)), rng.normal(0, 1.5, n_items)
    return expit(a * (nodes[:, None] - b)), np.exp(-nodes**2 / 2) / np.exp(-nodes**2 / 2).sum()


def test_sx2_expected_normal_equals_its_previous_form(monkeypatch):
    p, w = _item_curves(41, 900, seed=4)
    scores = np.unique(np.random.default_rng(5).integers(0, 901, size=30))
    got = sx2_expected(p, w, scores, exact=False)
    monkeypatch.setattr(checks, "_normal_pmf_live", previous.normal_pmf_dense)
    assert same_bits(got, sx2_expected(p, w, scores, exact=False))


@pytest.mark.parametrize(("n_items", "n_nodes", "seed"), [(120, 41, 6), (9, 7, 7), (60, 21, 8)])
def test_leave_one_out_equals_its_previous_form(n_items, n_nodes, seed):
    p, _ = _item_curves(n_nodes, n_items, seed)
    p[0, :4] = [0.0, 1.0, 0.5, 1e-300]                     # edge probabilities: a division by 0 in one direction
    f = lord_wingersky(p)
    rng = np.random.default_rng(seed)
    for rest in (np.arange(n_items), np.unique(rng.integers(0, n_items, size=5)), np.array([0, n_items - 1])):
        assert same_bits(checks._leave_one_out_exact(f, p, rest), previous.leave_one_out_exact(f, p, rest))


def test_positive_finite_equals_nan_to_num_then_clip():
    edge = np.array([-0.0, 0.0, -1e-300, 5e-324, -5e-324, np.nan, -np.nan, np.inf, -np.inf, 1.0, -2.0, 1e308,
                     np.finfo(float).max, np.finfo(float).tiny])
    values = np.concatenate([edge, np.random.default_rng(3).standard_normal(10_000) * 1e3])
    for x in (values, values.reshape(2, -1), values.reshape(2, -1).T):
        old = np.clip(np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0), 0.0, None)
        assert same_bits(checks._positive_finite(x.copy()), old)


@pytest.mark.parametrize(("n_items", "n_nodes", "seed", "scores"),
                         [(120, 41, 11, None), (60, 21, 12, [0, 1, 2, 30, 59, 60]), (9, 7, 13, [1, 2, 3, 9]),
                          (80, 31, 14, [0, 1]), (40, 11, 15, [0, 5, 40])])
def test_sx2_expected_exact_equals_its_previous_form(n_items, n_nodes, seed, scores):
    p, w = _item_curves(n_nodes, n_items, seed)
    p[0, :3] = [0.0, 1.0, 1e-300]
    rng = np.random.default_rng(seed)
    scores = np.unique(rng.integers(0, n_items + 1, size=25)) if scores is None else np.asarray(scores)
    assert same_bits(sx2_expected(p, w, scores, exact=True), previous.sx2_expected_exact(p, w, scores))


def _calibration(matrix, seed):
    rng = np.random.default_rng(seed)
    return Calibration(a=pd.Series(np.exp(rng.normal(0, 0.5, matrix.shape[1])), index=matrix.items),
                       b=pd.Series(rng.normal(0, 1, matrix.shape[1]), index=matrix.items),
                       theta=pd.Series(rng.normal(0, 1, matrix.shape[0]), index=matrix.models), engine="map")


@pytest.mark.parametrize("n_items", [150, 700])          # the exact recursion and the normal approximation
def test_item_fit_equals_its_previous_forms(monkeypatch, n_items):
    rng = np.random.default_rng(9)
    values = (rng.random((60, n_items)) < rng.uniform(0.1, 0.9, n_items)).astype(float)
    matrix = ResponseMatrix(values, [f"m{i}" for i in range(60)], [f"i{j}" for j in range(n_items)])
    cal = _calibration(matrix, 10)
    got = item_fit(matrix, cal, n_nodes=61)
    monkeypatch.setattr(checks, "_normal_pmf_live", previous.normal_pmf_dense)
    monkeypatch.setattr(checks, "_leave_one_out_exact", previous.leave_one_out_exact)
    assert got.equals(item_fit(matrix, cal, n_nodes=61))


def _responses(n_models, n_items, seed, *, order, missing=0.0):
    rng = np.random.default_rng(seed)
    theta, b, a = rng.normal(size=n_models), rng.normal(size=n_items), np.exp(rng.normal(0, 0.5, n_items))
    p = 0.2 + 0.8 * expit(a * (theta[:, None] - b))
    x = (rng.random(p.shape) < p).astype(float)
    x[rng.random(p.shape) < missing] = np.nan
    return np.asfortranarray(x) if order == "F" else np.ascontiguousarray(x)


# 30 x 1,200 cells (288 kB) is above numpy's threshold for reusing a temporary's buffer, 30 x 300 below it:
# the engine must keep the previous form's memory layouts as well as its values, since a sum's order follows them
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize(("n_items", "missing"), [(1200, 0.0), (1200, 0.2), (300, 0.0), (300, 0.2)])
@pytest.mark.parametrize("model", ["1pl", "3pl"])
def test_1pl_3pl_fits_equal_their_previous_forms(monkeypatch, order, n_items, missing, model):
    x = _responses(30, n_items, 11, order=order, missing=missing)
    got = fit_irt_values(x, model=model)
    monkeypatch.setattr(models, "_Point", previous.Point)
    monkeypatch.setattr(models, "_step", previous.step)
    want = fit_irt_values(x, model=model)
    for key in ("theta", "a", "b", "c"):
        assert (got[key] is None and want[key] is None) or same_bits(got[key], want[key]), key
    assert got["info"] == want["info"]


def test_compare_models_equals_its_previous_form(monkeypatch):
    x = _responses(25, 1400, 12, order="F")
    matrix = ResponseMatrix(x, [f"m{i}" for i in range(25)], [f"i{j}" for j in range(1400)])
    got = compare_models(matrix, folds=3, seed=0).drop(columns="seconds")
    monkeypatch.setattr(models, "_Point", previous.Point)
    monkeypatch.setattr(models, "_step", previous.step)
    assert got.equals(compare_models(matrix, folds=3, seed=0).drop(columns="seconds"))


def test_parallel_analysis_refit_is_fit_irt_values_2pl_fit():
    """dimensionality refits a simulated 2PL matrix with fit_map directly: fit_irt_values's 2PL is that call."""
    from irtlib.calibration.joint_map import fit_map

    x = _responses(30, 500, 13, order="F", missing=0.1)
    theta, a, b, _ = fit_map(x)
    fit = fit_irt_values(x, model="2pl")
    assert same_bits(theta, fit["theta"]) and same_bits(a, fit["a"]) and same_bits(b, fit["b"])


def _frames_same_bits(got, want):
    assert list(got.columns) == list(want.columns) and got.index.equals(want.index)
    for column in got.columns:
        g, w = got[column].to_numpy(), want[column].to_numpy()
        assert same_bits(g, w) if g.dtype.kind == "f" else np.array_equal(g, w), column


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize(("n_items", "missing"), [(1400, 0.0), (300, 0.1)])
def test_compare_models_heldout_cells_equal_the_whole_tables(order, n_items, missing):
    # each fold's held-out log-likelihood now at its cells only, the shared 2PL fits by fit_map itself:
    # the previous form's frame (every fit by fit_irt_values, the held-out cells cut from the whole table), bit for bit
    x = _responses(25, n_items, 14, order=order, missing=missing)
    matrix = ResponseMatrix(x, [f"m{i}" for i in range(25)], [f"i{j}" for j in range(n_items)])
    got = compare_models(matrix, folds=3, seed=2).drop(columns="seconds")
    _frames_same_bits(got, previous.compare_models(matrix, folds=3, seed=2))
    reversed_ = ResponseMatrix(1.0 - x, matrix.models, matrix.items)      # the chapter's asymptote at the top
    got = compare_models(reversed_, models=("3pl",), folds=3, seed=2).drop(columns="seconds")
    _frames_same_bits(got, previous.compare_models(reversed_, models=("3pl",), folds=3, seed=2))


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize(("n_models", "n_items", "missing"), [(30, 500, 0.1), (12, 40, 0.0), (40, 900, 0.3)])
def test_parallel_analysis_equals_its_previous_form(order, n_models, n_items, missing):
    # the replications on plain arrays (no ResponseMatrix, no Calibration), the probabilities drawn from computed
    # once, items kept by counts instead of nanstd: the previous form's simulated eigenvalues, bit for bit
    from irtlib.calibration.joint_map import fit_map

    x = _responses(n_models, n_items, 15, order=order, missing=missing)
    x[:, :3] = 1.0                                 # items every model passes: dropped by the variance filter
    x[0, 3:6] = np.nan                             # and missing cells of all kinds
    matrix = ResponseMatrix(x, [f"m{i}" for i in range(n_models)], [f"i{j}" for j in range(n_items)])
    theta, a, b, _ = fit_map(matrix.values)
    cal = Calibration(a=pd.Series(a, index=matrix.items), b=pd.Series(b, index=matrix.items),
                      theta=pd.Series(theta, index=matrix.models), engine="map")
    got = checks.dimensionality(matrix, cal, n=6, n_replications=7, seed=3)
    sims = previous.parallel_eigenvalues(matrix, cal, n=6, n_replications=7, seed=3)
    with np.errstate(invalid="ignore"):
        assert same_bits(got["parallel"], np.nanquantile(sims, 0.95, axis=0))
        assert same_bits(got["parallel_mean"], np.nanmean(sims, axis=0))
        assert got.attrs["parallel_ratio_1_2"] == float(np.nanmean(sims[:, 0] / sims[:, 1]))


@pytest.mark.parametrize("model", ["2pl", "3pl"])
def test_parallel_analysis_replications_equal_simulate_fitted_matrices(model):
    # every replication on plain arrays equals simulate_fitted's matrix passed to residual_eigenvalues, without a
    # refit (the calibration's own parameters) and with the 3PL's refit by fit_irt_values, bit for bit
    from irtlib.calibration.joint_map import fit_map

    x = _responses(20, 120, 16, order="C", missing=0.1)
    matrix = ResponseMatrix(x, [f"m{i}" for i in range(20)], [f"i{j}" for j in range(120)])
    theta, a, b, _ = fit_map(matrix.values)
    c = pd.Series(0.1, index=matrix.items) if model == "3pl" else None
    cal = Calibration(a=pd.Series(a, index=matrix.items), b=pd.Series(b, index=matrix.items),
                      theta=pd.Series(theta, index=matrix.models), engine="map", c=c, settings={"model": model})
    for refit in (False, True) if model == "3pl" else (False,):
        got = checks.dimensionality(matrix, cal, n=5, n_replications=3, seed=8, refit=refit)
        rng = np.random.default_rng(np.random.SeedSequence(8))
        sims = np.full((3, 5), np.nan)
        for r in range(3):
            m = checks.simulate_fitted(matrix, cal, rng=rng)
            use = cal
            if refit:
                fit = fit_irt_values(m.values, model=model)
                use = Calibration(a=pd.Series(fit["a"], index=m.items), b=pd.Series(fit["b"], index=m.items),
                                  theta=pd.Series(fit["theta"], index=m.models), engine="map",
                                  c=pd.Series(fit["c"], index=m.items))
            ev = checks.residual_eigenvalues(m, use, n=5)
            sims[r, :ev.size] = ev
        with np.errstate(invalid="ignore"):
            assert same_bits(got["parallel_mean"], np.nanmean(sims, axis=0)), refit


def test_simulate_fitted_keeps_the_items_nanstd_keeps():
    # 0 < safe < observed is nanstd > 0 for 0/1 draws: all-equal, one-observed and unobserved columns
    rng = np.random.default_rng(4)
    observed = rng.random((9, 400)) < 0.7
    observed[:, :5] = False
    observed[:, 5:10] = False
    observed[0, 5:10] = True
    p = np.clip(rng.normal(0.5, 0.6, (9, 400)), 0.0, 1.0)
    sim, keep = checks._draw(observed, p, np.random.default_rng(5))
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)         # nanstd of the unobserved columns
        assert np.array_equal(keep, (np.nanstd(sim, axis=0) > 0) & observed.any(axis=0))
    assert keep.any() and not keep.all()
