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
