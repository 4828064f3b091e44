"""FasterPAM through the kmedoids extension alone (irtlib.selection.fasterpam) against the package's own call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from irtlib.selection import fasterpam, static
from irtlib.selection.static import anchor_points_fresh, anchor_points_path, correlation_distances

kmedoids = pytest.importorskip("kmedoids")
ROOT = Path(__file__).resolve().parents[2]


def _responses(n_models, n_items, seed):
    rng = np.random.default_rng(seed)
    ability = rng.normal(size=(n_models, 1))
    difficulty = rng.normal(size=(1, n_items))
    return (rng.random((n_models, n_items)) < 1.0 / (1.0 + np.exp(difficulty - ability))).astype(float)


def _hand_made():
    """Six points on a line in two tight groups: distances |i - j| scaled, a zero diagonal."""
    pos = np.array([0.0, 0.1, 0.2, 5.0, 5.1, 5.3])
    return np.abs(pos[:, None] - pos[None, :])


@pytest.mark.parametrize("shape, seed", [((12, 40), 0), ((30, 200), 1), ((8, 301), 2)])
@pytest.mark.parametrize("k", [1, 2, 7, 25])
def test_random_fasterpam_gives_the_packages_medoids_labels_and_loss(shape, seed, k):
    diss = correlation_distances(_responses(*shape, seed))
    for random_state in (42, 7):
        loss, med, lab = fasterpam.random_fasterpam(diss, k, seed=random_state, max_iter=100)
        ref = kmedoids.fasterpam(diss, k, max_iter=100, init="random", random_state=random_state, n_cpu=1)
        assert loss == ref.loss
        np.testing.assert_array_equal(med, np.asarray(ref.medoids, dtype=np.intp))
        np.testing.assert_array_equal(lab, np.asarray(ref.labels, dtype=np.intp))


def test_fasterpam_on_two_groups_finds_one_medoid_in_each():
    loss, med, lab = fasterpam.random_fasterpam(_hand_made(), 2, seed=42)
    assert sorted(med.tolist()) == [1, 4]
    np.testing.assert_array_equal(lab[:3], [lab[0]] * 3)
    np.testing.assert_array_equal(lab[3:], [lab[3]] * 3)
    assert lab[0] != lab[3]
    assert loss == pytest.approx(0.1 + 0.1 + 0.1 + 0.2)


@pytest.mark.parametrize("k", [3, 10])
def test_fasterpam_from_given_medoids_matches_the_package(k):
    diss = correlation_distances(_responses(20, 150, 3))
    start = np.random.default_rng(k).choice(150, size=k, replace=False)
    loss, med, lab = fasterpam.fasterpam_from(diss, start, max_iter=100)
    ref = kmedoids.fasterpam(diss, start.astype(np.uintp), max_iter=100, n_cpu=1)
    assert loss == ref.loss
    np.testing.assert_array_equal(med, np.asarray(ref.medoids, dtype=np.intp))
    np.testing.assert_array_equal(lab, np.asarray(ref.labels, dtype=np.intp))


def test_the_package_path_runs_where_the_extension_cannot_be_loaded_alone(monkeypatch):
    diss = correlation_distances(_responses(15, 60, 4))
    direct = fasterpam.random_fasterpam(diss, 6, seed=42)
    monkeypatch.setitem(fasterpam._LOADED, "core", None)
    fallback = fasterpam.random_fasterpam(diss, 6, seed=42)
    assert direct[0] == fallback[0]
    np.testing.assert_array_equal(direct[1], fallback[1])
    np.testing.assert_array_equal(direct[2], fallback[2])


def test_anchor_points_run_without_scikit_learn_and_the_package_still_imports_afterwards():
    """In a fresh process: the authors' and the path's anchor points load neither ``kmedoids``' Python
    package nor scikit-learn; importing the package afterwards reuses the loaded extension and its
    FasterPAM gives the same medoids."""
    code = (
        "import sys, json, numpy as np\n"
        "from irtlib.selection.static import anchor_points_fresh, anchor_points_path, correlation_distances\n"
        "x = (np.random.default_rng(5).random((25, 120)) < 0.6).astype(float)\n"
        "fresh = anchor_points_fresh(x, [4, 12])\n"
        "path = anchor_points_path(x, [4, 12], seed=0, solver='fasterpam')\n"
        "loaded = {m: m in sys.modules for m in ('kmedoids', 'sklearn', 'kmedoids.kmedoids')}\n"
        "import kmedoids\n"
        "ref = kmedoids.fasterpam(correlation_distances(x), 12, max_iter=100, init='random', random_state=42,"
        " n_cpu=1)\n"
        "same = sorted(int(m) for m in ref.medoids) == fresh[12].items.tolist()\n"
        "print(json.dumps({'loaded': loaded, 'same': same, 'path': path[12].items.tolist()}))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=120, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["loaded"] == {"kmedoids": False, "sklearn": False, "kmedoids.kmedoids": True}
    assert got["same"]
    x = (np.random.default_rng(5).random((25, 120)) < 0.6).astype(float)
    assert got["path"] == anchor_points_path(x, [4, 12], seed=0, solver="fasterpam")[12].items.tolist()
    assert anchor_points_fresh(x, [12])[12].items.size == 12


@pytest.mark.parametrize("k", [1, 2, 9, 40, 119])
def test_a_column_major_matrix_gives_the_same_medoids_as_a_row_major_one(k):
    """The extension reads elements by index whatever the layout: an asymmetric matrix (as numpy's
    corrcoef can be in its last bit) gives the same loss, medoids and labels in either order."""
    rng = np.random.default_rng(k)
    diss = correlation_distances(_responses(10, 120, k))          # few models: many tied distances
    diss = diss * (1.0 + 1e-3 * rng.random(diss.shape))          # not symmetric
    np.fill_diagonal(diss, 0.0)
    assert not np.array_equal(diss, diss.T)
    column_major = np.asfortranarray(diss)
    for got, ref in [(fasterpam.random_fasterpam(column_major, k, seed=42),
                      fasterpam.random_fasterpam(np.ascontiguousarray(diss), k, seed=42)),
                     (fasterpam.fasterpam_from(column_major, np.arange(0, 120, 120 // k)[:k]),
                      fasterpam.fasterpam_from(np.ascontiguousarray(diss), np.arange(0, 120, 120 // k)[:k]))]:
        assert got[0] == ref[0]
        np.testing.assert_array_equal(got[1], ref[1])
        np.testing.assert_array_equal(got[2], ref[2])


def test_the_authors_anchor_points_equal_the_packages_fasterpam_on_the_row_major_distances():
    x = _responses(23, 300, 11)
    got = anchor_points_fresh(x, [1, 3, 17, 120, 300])
    diss = correlation_distances(x)
    assert diss.flags.c_contiguous
    for k, subset in got.items():
        ref = kmedoids.fasterpam(diss, k, max_iter=100, init="random", random_state=42, n_cpu=1)
        order = np.argsort(np.asarray(ref.medoids, dtype=np.intp))
        np.testing.assert_array_equal(subset.items, np.asarray(ref.medoids, dtype=np.intp)[order])
        sizes = np.bincount(np.asarray(ref.labels, dtype=np.intp), minlength=k).astype(float)
        np.testing.assert_array_equal(subset.weights, sizes[order])


def _distances_as_before(x):
    """The authors' distances as ``correlation_distances`` computed them before (out of place, then a copy)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = np.corrcoef(np.asarray(x, float).T)
    diss = np.clip(1.0 - np.nan_to_num(np.atleast_2d(corr), nan=0.0), 0.0, 2.0)
    np.fill_diagonal(diss, 0.0)
    return diss


@pytest.mark.parametrize("shape, seed", [((23, 300), 0), ((6, 1), 1), ((5, 400), 2), ((40, 7), 3), ((2, 50), 4),
                                         ((1, 20), 5), ((70, 1090), 6), ((3, 2), 7)])
@pytest.mark.parametrize("kind", ["binary", "continuous", "duplicates"])
def test_distances_in_place_and_column_major_equal_the_old_steps(shape, seed, kind):
    """numpy.corrcoef's steps in place (column-major: on the covariance's transpose) give its elements, bit for bit."""
    x = _responses(*shape, seed)
    if kind == "continuous":
        x = x + np.random.default_rng(seed).normal(scale=0.3, size=x.shape)
    elif kind == "duplicates" and shape[1] > 3:
        x[:, 1::3] = x[:, [0]]                        # identical items: r = 1 up to rounding, above 1 clipped
    x[:, ::5] = 1.0                                   # constant items: undefined r, taken as 0
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # numpy.cov's own warning for a single model
        want = _distances_as_before(x)
        for order in ("C", "F"):
            got = correlation_distances(x, order=order)
            assert got.flags.c_contiguous if order == "C" else got.flags.f_contiguous
            assert got.tobytes(order="A") == np.asarray(want, order=order).tobytes(order="A")


def test_column_major_distances_of_an_asymmetric_covariance_are_the_row_major_ones(monkeypatch):
    """Where numpy's covariance were not symmetric, the column-major steps run on a copy: the same elements."""
    x = _responses(12, 80, 8) + np.random.default_rng(8).normal(scale=0.1, size=(12, 80))
    cov = np.cov

    def skewed(m):
        c = cov(m)
        c[0, 1] *= 1.0 + 1e-9                         # c[0, 1] != c[1, 0]
        return c

    monkeypatch.setattr(static.np, "cov", skewed)
    rows, cols = correlation_distances(x, order="C"), correlation_distances(x, order="F")
    assert cols.flags.f_contiguous and rows[0, 1] != rows[1, 0]
    assert rows.tobytes() == np.ascontiguousarray(cols).tobytes()


@pytest.mark.parametrize("seed", [42, 0, 7])
def test_random_medoids_are_numpys_choice_for_every_budget_and_survive_the_call(seed):
    fasterpam._permutation.cache_clear()
    for n in (1, 2, 9, 79, 395, 1090):
        for k in sorted({0, 1, n // 3, n - 1, n}):
            got = fasterpam.random_medoids(n, k, seed)
            assert got.dtype == np.uintp
            np.testing.assert_array_equal(got, np.random.RandomState(seed).choice(n, k, replace=False))
            got[:] = 0                       # a caller changing its copy does not change the next draw
    with pytest.raises(ValueError):
        fasterpam.random_medoids(5, 6, seed)
    diss = correlation_distances(_responses(12, 90, 5))
    for k in (3, 30, 3):                     # the kept permutation, then again: the package's result
        loss, med, lab = fasterpam.random_fasterpam(diss, k, seed=seed)
        ref = kmedoids.fasterpam(diss, k, max_iter=100, init="random", random_state=seed, n_cpu=1)
        assert loss == ref.loss
        np.testing.assert_array_equal(med, np.asarray(ref.medoids, dtype=np.intp))
