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
