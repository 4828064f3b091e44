"""irtlib.calibration.cell_kernel: the MAP engine's cell pass in one C loop.

Against the 2PL's terms written independently here (scipy's expit and log_expit, float64), exactly on
hand-made cells, against the numpy pass on random dense, with-missing and sparse blocks (rows not a
multiple of the vector width, both precisions), between its AVX2 and its plain build (the same bits),
and over whole fits (the numpy path's mode to 1e-9, the same iterations). Without a compiler, or when
the load-time check fails, the engine keeps its numpy pass.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import simulate_2pl
from scipy.special import expit, log_expit

from irtlib.calibration import cell_kernel
from irtlib.calibration.cells import DenseBlock, SparseBlock
from irtlib.calibration.fused_kernel import compile_kernel
from irtlib.calibration.joint_map import _numpy_cell_pass, fit_map

LIB = cell_kernel.load(_numpy_cell_pass)
pytestmark = pytest.mark.skipif(LIB is None, reason="no C compiler builds the cell kernel here")
DTYPES = (np.float32, np.float64)


def independent_terms(values, theta, a, b):
    """Log-likelihood, the five column sums and the two row sums of the 2PL, in float64 with scipy."""
    observed = ~np.isnan(values)
    x = np.nan_to_num(values)
    z = a * (theta[:, None] - b)
    g = np.where(observed, np.where(x == 1, expit(-z), -expit(z)), 0.0)          # x - P without cancellation
    w = np.where(observed, expit(z) * expit(-z), 0.0)
    log_lik = np.where(observed, x * log_expit(z) + (1 - x) * log_expit(-z), 0.0).sum()
    items = np.stack([g.sum(0), (g * z).sum(0), w.sum(0), (w * z).sum(0), (w * z * z).sum(0)])
    models = np.stack([g @ a, w @ (a * a)])
    scale = (np.abs(np.stack([g, g * z, w, w * z, w * z * z])).sum(1), np.stack([np.abs(g) @ a, w @ (a * a)]))
    return log_lik, items, models, scale


def random_case(seed, n, m, missing):
    rng = np.random.default_rng(seed)
    values = (rng.random((n, m)) < 0.55).astype(float)
    values[rng.random((n, m)) < missing] = np.nan
    return values, rng.normal(0, 1.5, n), np.exp(rng.normal(0, 0.8, m)), rng.normal(0, 1.5, m)


def test_hand_made_cells_give_the_exact_terms():
    # z = 0 everywhere: P = 1/2, w = 1/4, g = x - 1/2; 11 items (a vector and a remainder); one missing cell
    values = np.array([[1.0] * 6 + [0.0] * 5, [0.0, np.nan] + [1.0] * 9])
    theta, a, b = np.zeros(2), np.ones(11), np.zeros(11)
    for block in (DenseBlock(values, slice(0, 2)), SparseBlock(values, slice(0, 2))):
        for dtype in DTYPES:
            (log_lik, items, models), (w, wz, g) = cell_kernel.cell_pass(LIB, block, theta, a, b, True, dtype)
            assert log_lik == pytest.approx(-21 * np.log(2.0), rel=1e-15)
            np.testing.assert_array_equal(items[0], [0.0, 0.5] + [1.0] * 4 + [0.0] * 5)
            np.testing.assert_array_equal(items[2], [0.5, 0.25] + [0.5] * 9)
            np.testing.assert_array_equal(items[[1, 3, 4]], 0.0)
            np.testing.assert_array_equal(models, [[0.5, 4.0], [2.75, 2.5]])
            assert w.max() == 0.25 and np.abs(wz).max() == 0.0 and set(np.abs(g).ravel()) <= {0.5, 0.0}


@pytest.mark.parametrize("dtype, rtol", [(np.float32, 2e-6), (np.float64, 1e-13)])
def test_saturated_cells_keep_their_relative_precision(dtype, rtol):
    # a safe response far above the item (x - P = sigmoid(-60) ~ 1e-26), an unsafe one far below
    values = np.array([[1.0, 0.0]])
    theta, a, b = np.array([30.0]), np.array([2.0, 2.0]), np.array([0.0, 60.0])
    (log_lik, items, _), _ = cell_kernel.cell_pass(LIB, DenseBlock(values, slice(0, 1)), theta, a, b, True, dtype)
    np.testing.assert_allclose(items[0], [expit(-60.0), -expit(-60.0)], rtol=rtol)
    np.testing.assert_allclose(items[2], expit(60.0) * expit(-60.0), rtol=rtol)
    assert abs(log_lik - 2 * log_expit(60.0)) < 1e-25             # log(1 + e) of e ~ 1e-26: within an ulp of 1


@pytest.mark.parametrize("seed, n, m, missing", [(1, 23, 61, 0.0), (2, 40, 203, 0.3), (3, 17, 333, 0.85)])
@pytest.mark.parametrize("dtype, tol", [(np.float32, 3e-6), (np.float64, 1e-13)])   # numpy's own: 1.1e-6, 1e-15
def test_random_blocks_agree_with_the_independent_terms(seed, n, m, missing, dtype, tol):
    values, theta, a, b = random_case(seed, n, m, missing)
    log_lik, items, models, (col_scale, row_scale) = independent_terms(values, theta, a, b)
    for block in (DenseBlock(values, slice(0, n)), SparseBlock(values, slice(0, n))):
        (ll, it, mo), _ = cell_kernel.cell_pass(LIB, block, theta, a, b, True, dtype)
        assert abs(ll - log_lik) <= tol * values.size
        assert (np.abs(it - items) <= tol * (col_scale + 1e-300) + 1e-300).all()
        assert (np.abs(mo - models) <= tol * (row_scale + 1e-300) + 1e-300).all()


@pytest.mark.parametrize("seed, n, m, missing", [(4, 30, 97, 0.0), (5, 30, 97, 0.4), (6, 50, 130, 0.85)])
def test_random_blocks_agree_with_the_numpy_pass(seed, n, m, missing):
    values, theta, a, b = random_case(seed, n, m, missing)
    # the block sits at rows 5.. of a longer theta, as in a runner's later blocks
    theta = np.concatenate([np.full(5, 9.0), theta])
    for block in (DenseBlock(values, slice(5, 5 + n)), SparseBlock(values, slice(5, 5 + n))):
        for dtype in DTYPES:
            found = cell_kernel.differences(LIB, _numpy_cell_pass, block, theta, a, b, dtype)
            assert max(found.values()) <= cell_kernel.AGREE[np.dtype(dtype)], found


def test_the_avx2_build_and_the_plain_build_give_the_same_bits(tmp_path):
    values, theta, a, b = random_case(7, 19, 203, 0.3)
    builds = [cell_kernel._bind(compile_kernel(source=cell_kernel.SOURCE, avx2=flag, directory=tmp_path))
              for flag in (True, False)]
    assert len(list(tmp_path.glob("*.so"))) == 2
    for block in (DenseBlock(values, slice(0, 19)), SparseBlock(values, slice(0, 19))):
        for dtype in DTYPES:
            (ll1, it1, mo1), kept1 = cell_kernel.cell_pass(builds[0], block, theta, a, b, True, dtype)
            (ll2, it2, mo2), kept2 = cell_kernel.cell_pass(builds[1], block, theta, a, b, True, dtype)
            assert ll1 == ll2 and np.array_equal(it1, it2) and np.array_equal(mo1, mo2)
            assert all(np.array_equal(k1, k2) for k1, k2 in zip(kept1, kept2, strict=True))


@pytest.mark.parametrize("missing", [0.0, 0.3, 0.8])         # 0.8: sparse blocks
def test_a_fit_with_the_kernel_is_the_fit_with_numpy(monkeypatch, missing):
    values, *_ = simulate_2pl(70, 260, seed=8, sd_log_a=0.7, missing=missing)
    kernel = fit_map(values)
    monkeypatch.setenv(cell_kernel.SWITCH, "0")
    with_numpy = fit_map(values)
    for x, y in zip(kernel[:3], with_numpy[:3], strict=True):
        np.testing.assert_allclose(np.log(x) if x is kernel[1] else x, np.log(y) if y is with_numpy[1] else y,
                                   rtol=0, atol=1e-9)
    assert kernel[3]["iterations"] == with_numpy[3]["iterations"]
    assert kernel[3]["log_posterior"] == pytest.approx(with_numpy[3]["log_posterior"], rel=1e-13)


def test_no_compiler_a_failed_check_or_the_switch_leave_numpy(monkeypatch, tmp_path):
    values, *_ = simulate_2pl(20, 40, seed=9)
    with monkeypatch.context() as m:
        m.setattr(cell_kernel, "_LOADED", {})
        m.setenv("CC", str(tmp_path / "no-such-compiler"))
        m.setenv("IRTLIB_KERNEL_DIR", str(tmp_path))
        assert cell_kernel.load(_numpy_cell_pass) is None
        assert fit_map(values)[3]["converged"]                  # the numpy pass

    def off_by_a_little(*args):                                 # a kernel that disagrees with its reference
        (ll, items, models), kept = _numpy_cell_pass(*args)
        return (ll + 1e-3 * np.abs(ll), items, models), kept

    monkeypatch.setattr(cell_kernel, "_LOADED", {})
    assert cell_kernel.load(off_by_a_little) is None
    monkeypatch.setattr(cell_kernel, "_LOADED", {})
    assert cell_kernel.load(_numpy_cell_pass) is not None
    monkeypatch.setenv(cell_kernel.SWITCH, "0")
    assert cell_kernel.load(_numpy_cell_pass) is None
