"""Anchor Points' nearest-medoid kernel (irtlib.selection.anchor_kernel): one summation order for every shape."""

from __future__ import annotations

import numpy as np
import pytest

from irtlib.selection import anchor_kernel


def _ordered_sums(u, medoids, rows):
    """Every similarity summed coordinate by coordinate in Python floats (the kernel's order), then the argmax."""
    lab, best = [], []
    for r in rows:
        sims = []
        for j in medoids:
            s = float(u[r, 0]) * float(u[j, 0])
            for t in range(1, u.shape[1]):
                s = s + float(u[r, t]) * float(u[j, t])
            sims.append(s)
        lab.append(int(np.argmax(sims)))
        best.append(sims[lab[-1]])
    return np.array(lab), np.array(best)


@pytest.fixture(scope="module")
def points():
    rng = np.random.default_rng(3)
    u = rng.normal(size=(700, 25))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    u[10] = u[20]                                   # a tie between two medoids
    return u


def test_the_twin_sums_in_the_kernels_order(points):
    medoids = np.array([20, 10, 5, 600, 33, 2])
    rows = np.arange(0, 700, 7)
    lab, best = anchor_kernel.numpy_nearest(points, medoids, rows)
    want_lab, want_best = _ordered_sums(points, medoids, rows)
    np.testing.assert_array_equal(lab, want_lab)
    np.testing.assert_array_equal(best, want_best)
    assert anchor_kernel.numpy_nearest(points, medoids, np.array([20]))[0][0] == 0     # ties: the first medoid


@pytest.mark.parametrize("m", [1, 2, 7, 8, 9, 16, 17, 31, 32, 33, 64, 100, 699])
def test_kernel_equals_the_twin_and_any_part_of_a_call_equals_the_whole(points, m):
    if anchor_kernel.load() is None:
        pytest.skip("no compiled anchor kernel here")
    rng = np.random.default_rng(m)
    medoids = rng.choice(700, m, replace=False)
    lab, best = anchor_kernel.nearest(points, medoids)
    twin = anchor_kernel.numpy_nearest(points, medoids)
    np.testing.assert_array_equal(lab, twin[0])
    np.testing.assert_array_equal(best, twin[1])
    rows = np.sort(rng.choice(700, 37, replace=False))
    part_lab, part_best = anchor_kernel.nearest(points, medoids, rows)
    np.testing.assert_array_equal(part_lab, lab[rows])
    np.testing.assert_array_equal(part_best, best[rows])
    one_lab, one_best = anchor_kernel.nearest(points, medoids, rows[:1])
    assert one_lab[0] == lab[rows[0]] and one_best[0] == best[rows[0]]
    # the medoids split in two calls: the larger similarity of the two, ties to the first half
    half = m // 2
    if half:
        l1, b1 = anchor_kernel.nearest(points, medoids[:half])
        l2, b2 = anchor_kernel.nearest(points, medoids[half:])
        np.testing.assert_array_equal(np.where(b2 > b1, l2 + half, l1), lab)
        np.testing.assert_array_equal(np.maximum(b1, b2), best)


def test_without_the_kernel_the_numbers_are_the_same(points, monkeypatch):
    medoids = np.arange(0, 700, 9)
    got = anchor_kernel.nearest(points, medoids)
    monkeypatch.setitem(anchor_kernel._LOADED, "lib", None)
    want = anchor_kernel.nearest(points, medoids)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_loader_refuses_a_kernel_one_ulp_away(monkeypatch):
    lib = anchor_kernel.load()
    if lib is None:
        pytest.skip("no compiled anchor kernel here")
    real = anchor_kernel._kernel_nearest

    def off(lib, u, medoids, rows):
        lab, best = real(lib, u, medoids, rows)
        return lab, np.nextafter(best, np.inf)

    monkeypatch.setattr(anchor_kernel, "_kernel_nearest", off)
    assert not anchor_kernel._matches_numpy(lib)


_PATH_DIGEST = """
import hashlib, json, numpy as np, threadpoolctl
from irtlib.selection.static import anchor_points_path
rng = np.random.default_rng(5)
x = (rng.random((23, 3000)) < rng.random((1, 3000))).astype(float)
res = anchor_points_path(x, [1, 3, 9, 27, 81, 243, 729], seed=2, solver="alternate")
h = hashlib.sha256()
for k in sorted(res):
    h.update(res[k].items.tobytes()); h.update(res[k].weights.tobytes())
arch = [i.get("architecture") for i in threadpoolctl.threadpool_info() if i.get("internal_api") == "openblas"]
print(json.dumps([h.hexdigest(), arch]))
"""


def test_the_path_gives_the_same_subsets_under_another_blas_kernel():
    """OpenBLAS picks its kernel by processor (``OPENBLAS_CORETYPE`` forces one): the path does not depend on it."""
    import json
    import os
    import subprocess
    import sys

    out = {}
    for core in ("Haswell", "SkylakeX"):
        env = {**os.environ, "OPENBLAS_CORETYPE": core, "OPENBLAS_NUM_THREADS": "1"}
        run = subprocess.run([sys.executable, "-c", _PATH_DIGEST], env=env, capture_output=True, text=True, check=True)
        out[core] = json.loads(run.stdout.strip().splitlines()[-1])
    archs = {core: arch for core, (_, arch) in out.items()}
    if not all(archs.values()) or archs["Haswell"] == archs["SkylakeX"]:
        pytest.skip(f"OpenBLAS's kernel cannot be chosen here ({archs})")
    assert out["Haswell"][0] == out["SkylakeX"][0]


def _thresholded(u, medoids, rows, thr):
    """The plain kernel's label and similarity where the similarity reaches ``thr``, else -1 and -inf."""
    lab, best = anchor_kernel.numpy_nearest(u, medoids, rows)
    low = ~(best >= thr)
    lab[low], best[low] = -1, -np.inf
    return lab, best


@pytest.mark.parametrize("m", [3, 17, 64, 100, 129, 300])
@pytest.mark.parametrize("kind", ["random", "binary"])
def test_threshold_form_equals_the_full_argmax_above_the_threshold(m, kind, monkeypatch):
    """``above`` and ``hint``: the single-precision filter drops no medoid that reaches the threshold, ties included."""
    monkeypatch.setattr(anchor_kernel, "FILTER_MIN_PAIRS", 0)      # the filter at every size
    rng = np.random.default_rng(m)
    if kind == "random":
        u = rng.normal(size=(900, 21)) * np.exp(rng.normal(0.0, 2.0, (900, 1)))
    else:       # correlation features of binary responses of 9 models: many equal rows and equal similarities
        from irtlib.selection.static import correlation_features

        u = correlation_features((rng.random((9, 900)) < rng.random((1, 900))).astype(float))
    medoids = rng.choice(900, m, replace=False)
    medoids[m // 2:] = medoids[:m - m // 2][::-1] if kind == "binary" else medoids[m // 2:]   # repeated medoids
    rows = np.sort(rng.choice(900, 400, replace=False))
    exact = anchor_kernel.numpy_nearest(u, medoids, rows)[1]
    # thresholds at the best similarity (ties with the first), an ulp either side, below, above, -inf and NaN
    shift = rng.choice([0.0, 1.0, -1.0, -0.5, 0.5], rows.size) * np.where(rng.random(rows.size) < 0.6,
                                                                           np.spacing(exact), np.abs(exact))
    above = exact + shift
    above[:5], above[5:10] = -np.inf, np.nan
    for r in (rows, None):
        thr = above if r is not None else np.resize(above, 900)
        got = anchor_kernel.nearest(u, medoids, r, above=thr)
        want = _thresholded(u, medoids, r, thr)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    hint = rng.integers(0, m, rows.size)
    got = anchor_kernel.nearest(u, medoids, rows, hint=hint)
    np.testing.assert_array_equal(got[0], anchor_kernel.numpy_nearest(u, medoids, rows)[0])     # always reached
    np.testing.assert_array_equal(got[1], exact)
    np.testing.assert_array_equal(anchor_kernel.pair_similarities(u, rows, medoids[hint]) <= got[1], True)


def test_threshold_form_sums_in_double_where_single_precision_could_overflow(monkeypatch):
    """Rows or medoids of norm 2^60 and more, or not finite: those tiles summed in double, the same numbers."""
    monkeypatch.setattr(anchor_kernel, "FILTER_MIN_PAIRS", 0)
    rng = np.random.default_rng(21)
    u = rng.normal(size=(500, 8))
    u[7] *= 2.0 ** 100
    u[300:310] *= 2.0 ** 70
    u[11] = [np.inf, 0, 0, 0, 0, 0, 0, 1.0]
    u[12] = 1e-300                                   # below float's subnormals
    medoids = np.r_[np.arange(300, 340), 7, 12, np.arange(0, 200, 3)]
    exact = anchor_kernel.numpy_nearest(u, medoids)[1]
    with np.errstate(invalid="ignore"):
        below = exact - np.abs(exact) * 1e-3
    for thr in (exact, below, np.full(500, -np.inf)):
        got = anchor_kernel.nearest(u, medoids, above=thr)
        want = _thresholded(u, medoids, None, thr)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_prepared_points_give_the_same_numbers(points, monkeypatch):
    monkeypatch.setattr(anchor_kernel, "FILTER_MIN_PAIRS", 0)
    medoids = np.arange(0, 700, 4)
    thr = anchor_kernel.numpy_nearest(points, medoids)[1]
    got = anchor_kernel.nearest(points, medoids, above=thr, prepared=anchor_kernel.prepare(points))
    want = anchor_kernel.nearest(points, medoids, above=thr)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[0], anchor_kernel.numpy_nearest(points, medoids)[0])


def test_the_path_without_the_kernel_gives_the_same_subsets(monkeypatch):
    """The warm-started path on the numpy forms (no compiler): every subset the kernel's, bit for bit."""
    from irtlib.selection.static import anchor_points_path

    rng = np.random.default_rng(8)
    x = (rng.random((11, 1500)) < rng.random((1, 1500))).astype(float)
    ks = [2, 9, 40, 150, 400]
    monkeypatch.setattr(anchor_kernel, "FILTER_MIN_PAIRS", 0)
    got = anchor_points_path(x, ks, seed=3, solver="alternate")
    monkeypatch.setitem(anchor_kernel._LOADED, "lib", None)
    want = anchor_points_path(x, ks, seed=3, solver="alternate")
    for k in ks:
        np.testing.assert_array_equal(got[k].items, want[k].items)
        np.testing.assert_array_equal(got[k].weights, want[k].weights)


def test_few_medoids_several_rows_at_a_time_equal_one_row_at_a_time():
    """``nearest_medoid_few`` (four rows side by side) against ``nearest_medoid_8`` (one row), NaN and inf included."""
    import ctypes

    lib = anchor_kernel.load()
    if lib is None:
        pytest.skip("no compiled anchor kernel here")
    rng = np.random.default_rng(17)
    ptr = ctypes.c_void_p
    for m in range(1, anchor_kernel.NARROW_MAX + 1):
        n, d = int(rng.integers(1, 40)), int(rng.integers(1, 30))
        u = rng.normal(size=(n + m, d))
        u[rng.random((n + m, d)) < 0.03] = rng.choice([np.nan, np.inf, -np.inf, -0.0])
        u[rng.integers(0, n + m)] = u[n]                                      # ties
        w = -(-m // anchor_kernel.NARROW_BLOCK) * anchor_kernel.NARROW_BLOCK
        cols = np.zeros((w, d))
        cols[:m] = u[n:]
        vt = np.ascontiguousarray(cols.T)
        rows = np.ascontiguousarray(rng.integers(0, n + m, int(rng.integers(1, 23))), dtype=np.int64)
        for idx, count in ((None, n + m), (rows, rows.size)):
            out = {}
            for name in ("nearest_medoid_8", "nearest_medoid_few"):
                lab, best = np.empty(count, dtype=np.int64), np.empty(count)
                getattr(lib, name)(count, None if idx is None else ptr(idx.ctypes.data), d, ptr(u.ctypes.data), m,
                                   ptr(vt.ctypes.data), w, ptr(lab.ctypes.data), ptr(best.ctypes.data))
                out[name] = lab, best
            np.testing.assert_array_equal(out["nearest_medoid_few"][0], out["nearest_medoid_8"][0])
            np.testing.assert_array_equal(out["nearest_medoid_few"][1].view(np.int64),
                                          out["nearest_medoid_8"][1].view(np.int64))
