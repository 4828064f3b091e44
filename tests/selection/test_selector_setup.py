"""The selectors' set-up: twin labels, the rows with large twin groups, random orders computed in part.

Each is compared with the straightforward computation it replaces (``numpy.unique``'s inverse, the sorted
runs of labels, the whole stable argsort), on random banks and tie-heavy ones (duplicate items, repeated
rows, quantised keys), and the adaptive runs built on them with the plain full scan.
"""

from __future__ import annotations

import numpy as np
import pytest

from irtlib.core.kernels import fisher_information
from irtlib.selection import selectors
from irtlib.selection.adaptive import MaxInformation, RandomSelection, run_adaptive
from irtlib.selection.estimators import MapEstimator, MleEstimator
from irtlib.selection.selectors import _RandomRun


def _unique_labels(a, b):
    """Twin labels as ``numpy.unique(..., axis=0, return_inverse=True)`` gives them, row by row."""
    if a.ndim == 1:
        return np.unique(np.stack([a, b], axis=1), axis=0, return_inverse=True)[1].reshape(-1).astype(np.int32)
    return np.stack([_unique_labels(a[i], b[i]) for i in range(a.shape[0])])


def _sorted_runs(twin, unused, threshold):
    """Rows with more than ``threshold`` unused items of one label: the longest run of equal sorted labels."""
    lab = np.sort(np.where(unused, np.broadcast_to(twin, unused.shape), -1), axis=1)
    pos = np.arange(lab.shape[1])
    new = np.ones(lab.shape, dtype=bool)
    new[:, 1:] = lab[:, 1:] != lab[:, :-1]
    run = pos - np.maximum.accumulate(np.where(new, pos, 0), axis=1) + 1
    return (np.where(lab >= 0, run, 0) > threshold).any(axis=1)


def _bank(rng, n_models, n_items, *, ties):
    """A per-model bank: splits of repeated rows; with ``ties``, parameters from a few values (many twins)."""
    if ties:
        a = rng.choice([0.5, 1.0, 1.5], (n_models, n_items))
        b = rng.choice([-1.0, 0.0, 0.5, -0.0], (n_models, n_items))
    else:
        a, b = rng.lognormal(0.0, 0.5, (n_models, n_items)), rng.normal(0.0, 1.0, (n_models, n_items))
    split = np.repeat(np.arange(n_models // 3 + 1), 3)[:n_models]
    return a[split], b[split]


@pytest.mark.parametrize("ties", [False, True])
def test_twin_labels_are_numpy_unique_inverse(ties):
    rng = np.random.default_rng(11)
    for n_items in (1, 2, 7, 300):
        a, b = _bank(rng, 8, n_items, ties=ties)
        assert np.array_equal(selectors._twin_labels(a, b), _unique_labels(a, b))
        assert np.array_equal(selectors._twin_labels(a[0], b[0]), _unique_labels(a[0], b[0]))
        labels, biggest = selectors._twin_groups(a, b)
        assert np.array_equal(biggest, [np.bincount(row).max() for row in labels])


@pytest.mark.parametrize("ties", [False, True])
def test_twinned_rows_are_the_sorted_runs(ties):
    rng = np.random.default_rng(12)
    for n_items, cache in [(40, 16), (300, 64), (300, 256), (5, 0)]:
        a, b = _bank(rng, 9, n_items, ties=ties)
        available = rng.random(a.shape) < rng.uniform(0.1, 1.0, (9, 1))
        run = MaxInformation(cache_size=cache).begin(selectors.TwoPLItems(a, b), available)
        assert np.array_equal(run.twinned, _sorted_runs(run.twin, available, cache // selectors._TWIN_SHARE))


def _stable_order(keys):
    return np.argsort(keys, axis=1, kind="stable")


@pytest.mark.parametrize("quantised", [False, True])
def test_random_order_prefix_is_the_stable_argsort(quantised):
    rng = np.random.default_rng(13)
    for trial in range(60):
        n, n_items = int(rng.integers(1, 9)), int(rng.integers(1, 900))
        available = rng.random((n, n_items)) < rng.uniform(0.05, 1.0)
        run = _RandomRun(available, np.random.default_rng(trial))
        if quantised:                         # ties at every cut
            run.keys = np.where(available, np.round(run.keys * 10) / 10, np.inf)
        want = _stable_order(run.keys)
        m = int(rng.integers(0, n_items + 1))
        if trial % 2:
            got = run.select_block(m)
        else:
            got = np.stack([run.select() for _ in range(min(m, 40))], axis=1) if m else np.zeros((n, 0), int)
            m = got.shape[1]
        assert np.array_equal(got, np.where(np.arange(m) < available.sum(axis=1)[:, None], want[:, :m], -1))
        assert np.array_equal(run.order, want)


def test_random_runs_draw_the_same_items_as_a_whole_sort():
    rng = np.random.default_rng(14)
    x = (rng.random((7, 500)) < 0.6).astype(float)
    x[rng.random(x.shape) < 0.3] = np.nan
    a, b = rng.lognormal(0.0, 0.4, 500), rng.normal(size=500)
    traj = run_adaptive(x, a, b, budget=120, selector=RandomSelection(), seed=5, record=[10, 60, 120])
    run = _RandomRun(~np.isnan(x), selectors.Streams(5).generator)
    order = _stable_order(run.keys)
    want = np.where(np.arange(120) < (~np.isnan(x)).sum(axis=1)[:, None], order[:, :120], -1)
    assert np.array_equal(traj.items, want)


@pytest.mark.parametrize("estimator", [MapEstimator, MleEstimator])
def test_fluid_on_tie_heavy_banks_is_the_full_scan(estimator):
    """The cached run's picks and estimates equal the plain argmax of every item at every step (no cache)."""
    rng = np.random.default_rng(15)
    a, b = _bank(rng, 12, 400, ties=True)
    a = a + rng.choice([0.0, 1e-3], a.shape)               # twins and near-twins
    theta = rng.normal(size=12)
    x = (rng.random(a.shape) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    x[rng.random(x.shape) < 0.1] = np.nan
    fast = run_adaptive(x, a, b, budget=150, estimator=estimator())
    plain = run_adaptive(x, a, b, budget=150, estimator=estimator(), selector=MaxInformation(cache_size=0))
    assert np.array_equal(fast.items, plain.items)
    assert np.array_equal(fast.estimate, plain.estimate, equal_nan=True)
    # and the plain run is the argmax of fisher_information at the estimate before each step
    rows = np.arange(12)
    used = np.isnan(x)
    at = np.zeros(12)
    for t in range(150):
        info = np.where(used, -np.inf, fisher_information(at[:, None], a, b))
        j = np.argmax(info, axis=1)
        j = np.where(np.isfinite(info[rows, j]), j, -1)
        assert np.array_equal(plain.items[:, t], j)
        used[rows[j >= 0], j[j >= 0]] = True
        at = plain.estimate[:, t]
