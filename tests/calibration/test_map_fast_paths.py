"""The MAP engine's shortcuts give the numbers of the paths they stand for, bit for bit.

- a one-block fit's conjugate-gradient products made on the block itself equal the runner's passes;
- the preconditioner's and the item inverse's arithmetic (:mod:`irtlib.calibration.newton`) equals the
  numpy and scipy calls it replaces;
- BLAS is held to one thread inside a fit and restored after;
- :func:`irtlib.calibration.split_cache.fit_map_splits_cached` equals the protocol's per-split
  ``fit_2pl(..., engine="map")``, with and without its cache, and the cache is keyed by content.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from threadpoolctl import threadpool_info

from irtlib.calibration import joint_map, newton, split_cache
from irtlib.calibration.blas import blas_libraries, single_threaded_blas
from irtlib.calibration.joint_map import fit_items, fit_map, fit_map_after_items
from irtlib.calibration.split_cache import fit_map_splits_cached, map_split_keys
from irtlib.protocol import agreement


def _matrix(seed: int, shape: tuple[int, int], *, missing: float) -> np.ndarray:
    """2PL responses with ``missing`` of the cells NaN and one item nobody answered."""
    rng = np.random.default_rng(seed)
    theta, a, b = rng.normal(size=shape[0]), np.exp(rng.normal(0, 0.5, shape[1])), rng.normal(size=shape[1])
    x = (rng.random(shape) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    x[rng.random(shape) < missing] = np.nan
    x[:, 3] = np.nan
    return x


CASES = [(0, (15, 300), 0.0), (1, (40, 60), 0.2), (2, (25, 900), 0.5), (3, (60, 200), 0.85)]


def _same(r0, r1) -> bool:
    return all(np.array_equal(u, v, equal_nan=True) for u, v in zip(r0, r1, strict=True))


@pytest.mark.parametrize(("seed", "shape", "missing"), CASES)
def test_one_block_products_equal_the_runner_passes(monkeypatch, seed, shape, missing):
    x = _matrix(seed, shape, missing=missing)
    x = x[:, ~np.isnan(x).all(axis=0)]
    fast = fit_map(x)
    start = {"theta": fast[0] + 0.1, "a": fast[1] * 1.1, "b": fast[2] - 0.1}
    fast_after = fit_map_after_items(x, start["theta"], start["a"], start["b"], item_steps=2, forcing=True)
    fast_items = fit_items(x, fast[0])
    monkeypatch.setattr(joint_map, "_one_local_block", lambda runner: False)
    assert _same(fast[:3], fit_map(x)[:3]) and fast[3] == fit_map(x)[3]
    slow_after = fit_map_after_items(x, start["theta"], start["a"], start["b"], item_steps=2, forcing=True)
    assert _same(fast_after[:3], slow_after[:3]) and fast_after[3] == slow_after[3]
    assert _same(fast_items[:2], fit_items(x, fast[0])[:2])


def test_row_sum_is_pythons_sum_signed_zeros_included():
    rng = np.random.default_rng(0)
    coefficients = [rng.normal(size=50), rng.normal(size=50)]
    us = [rng.normal(size=(2, 50)), rng.normal(size=(2, 50))]
    coefficients[0][:5], us[1][:, :3] = -0.0, 0.0
    us[0][:, 5:8] = -0.0
    for cs, vs in ((coefficients, us), (coefficients, [u[0] for u in us])):
        got = newton.row_sum(cs, vs)
        want = sum(c * u for c, u in zip(cs, vs, strict=True))
        assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want))


def test_norm_and_potrs_equal_numpy_and_cho_solve():
    rng = np.random.default_rng(1)
    for n in (1, 7, 300):
        v = rng.normal(size=n)
        assert newton._norm(v) == np.linalg.norm(v)
    m = rng.normal(size=(2, 2))
    small = m @ m.T + np.eye(2)
    chol = scipy.linalg.cho_factor(small)
    potrs, = scipy.linalg.get_lapack_funcs(("potrs",), (chol[0],))
    for rhs in (rng.normal(size=2), rng.normal(size=(2, 3))):
        assert np.array_equal(potrs(chol[0], rhs, lower=chol[1])[0], scipy.linalg.cho_solve(chol, rhs))


def test_blas_is_single_threaded_inside_and_restored_after():
    before = {lib["filepath"]: lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}
    with single_threaded_blas():
        inside = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
    after = {lib["filepath"]: lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}
    assert inside and set(inside) == {1} and after == before
    assert blas_libraries() and all(len(lib) == 3 for lib in blas_libraries())


def _blocks():
    x = _matrix(4, (50, 120), missing=0.3)
    rows = [np.arange(0, 30), np.arange(10, 45), np.arange(0, 30), np.arange(5, 50, 2)]
    return x, rows


def test_map_splits_equal_the_protocols_fit_2pl_per_split():
    x, rows = _blocks()
    blocks = [x[r] for r in rows]
    old = agreement._calibrate_each(blocks, [0] * len(blocks), "map")       # fit_2pl on a ResponseMatrix
    assert _same([a for a, _ in old], [a for a, _ in fit_map_splits_cached(blocks, cache_dir=None)])
    assert _same([b for _, b in old], [b for _, b in fit_map_splits_cached(blocks, cache_dir=None)])
    assert np.isnan(old[0][0][3]) and np.isnan(fit_map_splits_cached(blocks, cache_dir=None)[0][1][3])
    cached = agreement.calibrate_splits(x, rows, engine="map", seed=[0, 1, 2, 3])
    assert all(_same(o, c) for o, c in zip(old, cached, strict=True))


def test_map_splits_read_what_an_earlier_call_fitted(tmp_path, monkeypatch):
    x, rows = _blocks()
    blocks = [x[r] for r in rows]
    plain = fit_map_splits_cached(blocks, cache_dir=None)
    fitted = []
    real = split_cache._map_block
    monkeypatch.setattr(split_cache, "_map_block", lambda block: fitted.append(block.shape) or real(block))
    first = fit_map_splits_cached(blocks, cache_dir=tmp_path)
    assert len(fitted) == 3                                    # blocks 0 and 2 are the same: fitted once
    assert len(list(tmp_path.glob("map-*.npz"))) == 3
    again = agreement.calibrate_splits(x, rows, engine="map", cache_dir=tmp_path)
    assert len(fitted) == 3
    assert all(_same(p, f) and _same(p, g) for p, f, g in zip(plain, first, again, strict=True))
    again[0][0][:] = 0.0                                       # callers get copies
    assert _same(fit_map_splits_cached(blocks[:1], cache_dir=tmp_path)[0], plain[0]) and len(fitted) == 3


def test_a_damaged_map_entry_is_refitted_with_a_warning(tmp_path):
    x, rows = _blocks()
    blocks = [x[rows[1]]]
    good = fit_map_splits_cached(blocks, cache_dir=tmp_path)
    (entry,) = tmp_path.glob("map-*.npz")
    entry.write_bytes(b"not an npz")
    with pytest.warns(UserWarning, match="unreadable"):
        again = fit_map_splits_cached(blocks, cache_dir=tmp_path)
    assert _same(good[0], again[0])
    assert _same(good[0], fit_map_splits_cached(blocks, cache_dir=tmp_path)[0])


def test_map_keys_follow_the_block_and_not_the_nan_payload():
    x, rows = _blocks()
    block = x[rows[1]]
    other_nan = block.copy()
    other_nan[np.isnan(other_nan)] = -np.nan                  # another NaN bit pattern: the same block
    moved = block.copy()
    moved[0, 0] = 1.0 - np.nan_to_num(moved[0, 0], nan=0.0)
    keys = map_split_keys([block, other_nan, moved, block[:-1]])
    assert keys[0] == keys[1] and len(set(keys)) == 3
    graded = block.copy()
    graded[1, 1] = 0.5                                        # not a binary block: keyed by its float64 bytes
    graded_nan = graded.copy()
    graded_nan[np.isnan(graded_nan)] = -np.nan
    more = map_split_keys([graded, graded_nan, block])
    assert more[0] == more[1] and len(set(more)) == 2 and more[2] == keys[0]
