"""The MAP engine's per-pass shortcuts equal the calls they replace, bit for bit.

- :mod:`irtlib.calibration.arrow_kernel`'s three item chains in C (a CG product's, the right-hand side's, the
  items' step) and its item blocks (gradient and inverse information) equal numpy's;
- :func:`irtlib.calibration.cell_kernel.block_pass` (buffers made once per block) equals
  :func:`~irtlib.calibration.cell_kernel.cell_pass`, pass after pass on the same block;
- ``newton._qr_basis`` and ``newton._cho_factor`` equal :func:`numpy.linalg.qr` and
  :func:`scipy.linalg.cho_factor`, failures included;
- whole fits equal with each shortcut turned off (the arrow kernel by its switch, the buffered pass by the
  plain one).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from irtlib.calibration import arrow_kernel, cell_kernel, joint_map, newton
from irtlib.calibration.cells import DenseBlock, SparseBlock
from irtlib.calibration.joint_map import _numpy_cell_pass, fit_items, fit_map

ARROW = arrow_kernel.load()
CELLS = cell_kernel.load(_numpy_cell_pass)


def _matrix(seed: int, shape: tuple[int, int], *, missing: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    theta, a, b = rng.normal(size=shape[0]), np.exp(rng.normal(0, 0.5, shape[1])), rng.normal(size=shape[1])
    x = (rng.random(shape) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    x[rng.random(shape) < missing] = np.nan
    return x[:, ~np.isnan(x).all(axis=0)]


def _bits_equal(u: np.ndarray, v: np.ndarray) -> bool:
    return u.dtype == v.dtype and u.shape == v.shape and u.tobytes() == v.tobytes()


@pytest.mark.skipif(ARROW is None, reason="no C compiler: the engine runs numpy's chain")
def test_arrow_kernel_equals_numpys_chain_bit_for_bit():
    rng = np.random.default_rng(7)
    cases = arrow_kernel._check_vectors()
    for n in (3, 64, 1001):
        c_h, c_w = (rng.normal(size=n).astype(np.float32) for _ in range(2))
        a = np.exp(rng.normal(0.0, 0.7, n))
        inverse = tuple(rng.normal(size=n) for _ in range(3))
        inverse[1][:4] = -0.0                  # 0 + (-0.0) is 0.0 in numpy's sum: the kernel's too
        c_h[:2] = 0.0
        cases.append((c_h, c_w, a, -a * a, inverse))
    for c_h, c_w, a, neg_a2, inverse in cases:
        g_items = [rng.normal(size=a.size), -np.abs(rng.normal(size=a.size))]
        g_items[0][:1] = -0.0
        with np.errstate(over="ignore", invalid="ignore"):
            pairs = [(arrow_kernel.numpy_binv(c_h, c_w, a, neg_a2, inverse),
                      arrow_kernel.kernel_binv(ARROW, c_h, c_w, a, neg_a2, inverse)),
                     (arrow_kernel.numpy_rhs(g_items, a, neg_a2, inverse),
                      arrow_kernel.kernel_rhs(ARROW, g_items, a, neg_a2, inverse)),
                     (arrow_kernel.numpy_back(g_items, c_h, c_w, a, neg_a2, inverse),
                      arrow_kernel.kernel_back(ARROW, g_items, c_h, c_w, a, neg_a2, inverse))]
        for want, got in pairs:
            assert all(_bits_equal(w, g) for w, g in zip(want, got, strict=True))


@pytest.mark.skipif(ARROW is None, reason="no C compiler: the engine runs numpy's item blocks")
def test_item_blocks_kernel_equals_numpy_bit_for_bit():
    rng = np.random.default_rng(11)
    cases = arrow_kernel._item_cases()
    x = _matrix(4, (30, 150), missing=0.2)
    for newton_weight in (0.0, 0.5, 1.0):
        theta, a, b = rng.normal(size=30), np.exp(rng.normal(0, 0.5, 150)), rng.normal(size=150)
        (_, sums, _), _ = _numpy_cell_pass(DenseBlock(x, slice(0, 30)), None, theta, a, b, True, np.float64)
        cases.append((sums, a, np.log(a), b, ((0.0, 1.0), (0.0, 1.0), (0.0, 1.0)), newton_weight))
    for sums, a, alpha, b, priors, newton_weight in cases:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            want = arrow_kernel.numpy_item_blocks(sums, a, alpha, b, priors, newton=newton_weight)
            got = arrow_kernel.kernel_item_blocks(ARROW, sums, a, alpha, b, priors, newton=newton_weight)
        assert all(_bits_equal(u, v) for u, v in zip((*want[0], *want[1], want[2]), (*got[0], *got[1], got[2]),
                                                     strict=True))


@pytest.mark.skipif(CELLS is None, reason="no C compiler: the engine runs the numpy pass")
@pytest.mark.parametrize("kind", ["dense", "holes", "sparse"])
def test_block_pass_equals_cell_pass_pass_after_pass(kind):
    rng = np.random.default_rng(3)
    x = (rng.random((23, 77)) < 0.5).astype(float)
    if kind != "dense":
        x[rng.random(x.shape) < (0.3 if kind == "holes" else 0.8)] = np.nan
    block = (SparseBlock if kind == "sparse" else DenseBlock)(x, slice(0, 23))
    state = None
    for step in range(6):
        theta, a, b = rng.normal(size=23), np.exp(rng.normal(0, 0.5, 77)), rng.normal(size=77)
        dtype = np.float32 if step % 3 else np.float64
        derive, keep = step != 4, step != 5
        want, kept = cell_kernel.cell_pass(CELLS, block, theta, a, b, derive, dtype, keep,
                                           reuse=state if derive and keep else None)
        got, kept_fast = cell_kernel.block_pass(CELLS, block, theta, a, b, derive, dtype, keep)
        assert want[0] == got[0]
        for u, v in zip(want[1:], got[1:], strict=True):
            assert (u is None and v is None) or _bits_equal(u, v)
        assert (kept is None) == (kept_fast is None)
        if kept is not None:
            assert all(_bits_equal(u, v) for u, v in zip(kept, kept_fast, strict=True))
            state = kept


def test_qr_basis_and_cho_factor_equal_numpy_and_scipy():
    rng = np.random.default_rng(5)
    for n in (2, 9, 400):
        theta = rng.normal(size=n)
        coarse = np.stack([np.ones_like(theta), theta], axis=1)
        assert _bits_equal(newton._qr_basis(coarse), np.linalg.qr(coarse)[0])
        m = rng.normal(size=(2, 2))
        small = m @ m.T + np.eye(2)
        assert _bits_equal(newton._cho_factor(small), scipy.linalg.cho_factor(small)[0])
    with pytest.raises(np.linalg.LinAlgError):
        newton._cho_factor(np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="infs or NaNs"):
        newton._cho_factor(np.array([[1.0, np.nan], [np.nan, 1.0]]))
    holed = np.array([[1.0, np.nan], [1.0, 0.0], [1.0, 2.0]])
    assert np.array_equal(newton._qr_basis(holed), np.linalg.qr(holed)[0], equal_nan=True)


def _plain_cell_pass(block, state, theta, a, b, derive, dtype, keep_cells=True):
    """``joint_map._cell_pass`` as it was: the kernel through :func:`cell_kernel.cell_pass`."""
    lib = cell_kernel.load(_numpy_cell_pass)
    if lib is None:
        return _numpy_cell_pass(block, state, theta, a, b, derive, dtype, keep_cells)
    return cell_kernel.cell_pass(lib, block, theta, a, b, derive, dtype, keep_cells,
                                 reuse=state if derive and keep_cells else None)


@pytest.mark.parametrize(("seed", "shape", "missing"), [(0, (30, 200), 0.0), (1, (45, 80), 0.3),
                                                        (2, (20, 600), 0.85)])
def test_fits_equal_with_each_shortcut_off(monkeypatch, seed, shape, missing):
    x = _matrix(seed, shape, missing=missing)
    fast, items = fit_map(x), fit_items(x, np.linspace(-1, 1, shape[0]))
    monkeypatch.setenv(arrow_kernel.SWITCH, "0")
    monkeypatch.setattr(joint_map, "_cell_pass", _plain_cell_pass)
    slow, slow_items = fit_map(x), fit_items(x, np.linspace(-1, 1, shape[0]))
    assert all(_bits_equal(u, v) for u, v in zip(fast[:3], slow[:3], strict=True)) and fast[3] == slow[3]
    assert all(_bits_equal(u, v) for u, v in zip(items[:2], slow_items[:2], strict=True)) and items[2] == slow_items[2]
