"""The MAP engine's passes over the matrix: the answer does not depend on how the matrix is stored or split.

Dense or sparse blocks, one thread or two, in-process or on a Dask cluster: the same mode. The
engine's mode itself is checked against independent computations in test_calibrate.py (the
gradient of a log posterior written there vanishes) and tests/test_golden.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import simulate_2pl

from irtlib.calibration import cells
from irtlib.calibration.joint_map import fit_map


@pytest.fixture(scope="module")
def sparse_values():
    """120 models x 300 items with 80% of the cells missing (below cells.SPARSE_BELOW observed)."""
    values, *_ = simulate_2pl(120, 300, seed=5, sd_log_a=0.7, missing=0.8)
    return values


def test_dense_and_sparse_storage_find_the_same_mode(sparse_values):
    assert all(isinstance(b, cells.SparseBlock) for b in cells.split_blocks(sparse_values))
    assert all(isinstance(b, cells.DenseBlock) for b in cells.split_blocks(sparse_values, sparse=False))
    stored = [np.sum([b.flip.size for b in cells.split_blocks(sparse_values, sparse=s)]) for s in (True, False)]
    assert stored[0] == (~np.isnan(sparse_values)).sum() and stored[1] == sparse_values.size
    fits = {}
    for sparse in (True, False):
        original = cells.SPARSE_BELOW
        cells.SPARSE_BELOW = 1.1 if sparse else 0.0
        try:
            fits[sparse] = fit_map(sparse_values)
        finally:
            cells.SPARSE_BELOW = original
    (theta_s, a_s, b_s, _), (theta_d, a_d, b_d, _) = fits[True], fits[False]
    for got, want in ((theta_s, theta_d), (np.log(a_s), np.log(a_d)), (b_s, b_d)):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-8)
    assert fits[True][3]["log_posterior"] == pytest.approx(fits[False][3]["log_posterior"], rel=1e-12)


def test_the_number_of_threads_does_not_change_a_digit():
    values, *_ = simulate_2pl(300, 900, seed=2, sd_log_a=0.7, missing=0.05)
    assert len(cells.split_blocks(values)) == 1        # below BLOCK_CELLS: cut smaller to exercise the threads
    original = cells.BLOCK_CELLS
    cells.BLOCK_CELLS = 1 << 14
    try:
        assert len(cells.split_blocks(values)) > 4
        one, two = fit_map(values, n_threads=1), fit_map(values, n_threads=2)
    finally:
        cells.BLOCK_CELLS = original
    for x, y in zip(one[:3], two[:3], strict=True):
        np.testing.assert_array_equal(x, y)
    assert one[3] == two[3]


def test_a_dask_cluster_finds_the_same_mode():
    distributed = pytest.importorskip("distributed")
    values, *_ = simulate_2pl(100, 300, seed=4, sd_log_a=0.7, missing=0.02)
    original = cells.BLOCK_CELLS
    cells.BLOCK_CELLS = 1 << 13              # several blocks, so both workers hold some
    try:
        local = fit_map(values, n_threads=1)
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                      dashboard_address=None) as cluster, distributed.Client(cluster) as client:
            held = []
            remote = fit_map(values, client=client, progress=lambda *_: held.append(client.has_what()))
    finally:
        cells.BLOCK_CELLS = original
    assert sum(1 for keys in held[0].values() if keys) == 2      # the blocks were spread over both workers
    for x, y in zip(local[:3], remote[:3], strict=True):
        np.testing.assert_array_equal(x, y)
    assert local[3] == remote[3]


def test_bad_thread_count_is_refused():
    values, *_ = simulate_2pl(10, 20, seed=1)
    with pytest.raises(ValueError, match="n_threads must be a positive integer, got 0"):
        fit_map(values, n_threads=0)


@pytest.mark.parametrize("sparse", [False, True])
def test_the_combined_cross_weight_gives_the_three_weights_products(sparse_values, sparse):
    """The conjugate-gradient products over ``w`` and ``h = w z - weight g`` equal those over ``w``, ``w z``, ``g``.

    Computed here in float64 from the kept weights: within float32 rounding where an item takes the
    Newton block, and bit for bit where it does not (there ``h`` is ``w z`` itself).
    """
    from irtlib.calibration import joint_map as jm

    priors = ((0.0, 1.0), (0.0, 1.0), (0.0, 1.0))
    runner = cells.make_runner(sparse_values, n_threads=1, sparse=sparse, block_cells=1 << 11)
    assert len(runner.blocks) > 2
    rng = np.random.default_rng(7)
    n, m = sparse_values.shape
    point = jm._Point(runner, rng.normal(size=n), rng.normal(0, 0.3, size=m), rng.normal(size=m), priors, np.float32)
    kept = [[np.asarray(k, dtype=float) for k in state] for state in runner.states]
    minus_g = np.where(rng.random(m) < 0.5, -1.0, 0.0)
    v, y_w, y_h = rng.normal(size=n).astype(np.float32), *rng.normal(size=(2, m)).astype(np.float32)

    def reference(block, w, wz, g):                  # float64 products from the three weights
        h = wz + block.item_cells(minus_g) * g
        u = v[block.rows].astype(float)
        return (block.col_dot(w, u), block.col_dot(h, u)), block.row_dot(w, y_w) + block.row_dot(h, y_h)

    def products(combined):
        col = runner.run(jm._cross_t_pass, v, combined)
        row = runner.run(jm._cross_pass, y_w, y_h, combined)
        return [sum(p[k] for p in col) for k in range(2)], np.concatenate(row)

    plain = products(False)                          # h = w z: the scoring step's products
    g_memory = [state[2] for state in runner.states]
    runner.run(jm._combine_pass, minus_g.astype(np.float32), keep=True)
    assert all(state[2] is g for state, g in zip(runner.states, g_memory, strict=True))   # h takes g's memory
    combined = products(True)
    refs = [reference(block, *k) for block, k in zip(runner.blocks, kept, strict=True)]
    want_col = [sum(r[0][k] for r in refs) for k in range(2)]
    want_row = np.concatenate([r[1] for r in refs])
    scale = np.abs(np.concatenate(kept[0][:3], axis=None)).max() * n
    for got, want in ((combined[0][0], want_col[0]), (combined[0][1], want_col[1]), (combined[1], want_row)):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * scale)
    scoring = minus_g == 0
    np.testing.assert_array_equal(combined[0][1][scoring], plain[0][1][scoring])
    np.testing.assert_array_equal(combined[0][0], plain[0][0])
    # the point's cell pass again gives back its g, bit for bit
    point._derive(runner, True)
    for state, k in zip(runner.states, kept, strict=True):
        np.testing.assert_array_equal(state[2], k[2])
    runner.close()


def test_a_dense_block_stores_one_minus_twice_the_response_and_zero_where_missing():
    values = np.array([[1.0, 0.0, np.nan], [np.nan, 1.0, 0.0]])
    block = cells.DenseBlock(values, slice(3, 5))
    np.testing.assert_array_equal(block.flip, np.array([[-1.0, 1.0, 0.0], [0.0, -1.0, 1.0]], dtype=np.float32))
    assert block.flip.dtype == np.float32
    np.testing.assert_array_equal(block.observed, ~np.isnan(values))
    assert cells.DenseBlock(values[:, :2][:1], slice(0, 1)).observed is None


@pytest.mark.parametrize("order", ["C", "F"])
def test_starting_values_without_missing_cells_are_the_nan_aware_ones_bit_for_bit(order):
    from irtlib.calibration.joint_map import _start

    rng = np.random.default_rng(6)
    x = np.asarray(rng.integers(0, 2, (57, 230)).astype(float), order=order)
    eps = 0.5
    safe_m, safe_i = np.nansum(x, axis=1), np.nansum(x, axis=0)
    theta = np.log((safe_m + eps) / (x.shape[1] - safe_m + eps))
    theta = (theta - theta.mean()) / (theta.std() + 1e-12)
    b = -np.log((safe_i + eps) / (x.shape[0] - safe_i + eps)) / 1.7
    got = _start(x)
    assert np.array_equal(got[0], theta) and np.array_equal(got[1], b)
