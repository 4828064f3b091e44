"""Anchor Points' nearest medoid in one fixed summation order: the same bits for any shape, on every machine.

The warm-started K-medoids path (:func:`irtlib.selection.static.anchor_points_path`, paper appendix D's
Anchor Points on the correlation distance ``1 - u_i . u_j``) assigns every point to the medoid of largest
dot product, again and again: the new medoids of each budget against every point, the points of a moved
medoid against every medoid, the others against the moved medoids. As BLAS products these similarities
depend on the product's shape (a one-column product goes to ``gemv``, remainder columns to other
kernels) and on the processor's BLAS kernel, so the work could not be restricted exactly to what moved,
and the results differed between machines. Here each similarity is ``u_r0 v_j0 + u_r1 v_j1 + ...``,
coordinates in increasing order, every product rounded before its sum: a function of the two vectors
alone. ``_anchor_kernel.c`` (beside this module) computes it fused with the argmax (no similarity matrix),
compiled without contraction into fused multiply-adds (``-ffp-contract=off``); :func:`numpy_nearest` is its
twin (one rounded product and one rounded sum per coordinate, the same bits).

The medoids are cut into tiles of :data:`TILE` read by a chunk of rows in turn (from the first-level cache), each
row meeting the medoids in the same order as in one pass. Where only a medoid that beats a threshold matters (the
path's warm start: a new medoid must beat the point's current one; the points kept after an update against the moved
medoids; the points of a moved medoid, which reach at least the medoid that replaced theirs), :func:`nearest`'s
``above`` / ``hint`` form first sums every pair in single precision (sixteen lanes, fused multiply-adds), whose
distance from the exact dot product has a proven bound; only the medoids within that bound of the threshold (a few in
a thousand on the chapters' warm starts) are summed in double as above, so every label and similarity is the plain
kernel's, bit for bit.

The first :func:`load` of a process compares the kernel with the twin on random cases (every number of
medoids around the kernel's block and tile, row subsets, ties, one to forty coordinates; the threshold form with
thresholds at, an ulp around and far from the best similarity, and with hints) and returns it only if every label and
similarity is equal; otherwise, without a compiler, or with ``IRTLIB_ANCHOR_KERNEL=0``, the twin
runs (the same numbers, slower).

Layer rule: part of ``selection``; imports ``calibration`` (the compiler driver).
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np

from irtlib.core.c_arrays import address as _addr

__all__ = ["SOURCE", "BLOCK", "TILE", "FILTER_MIN_PAIRS", "AVX512_FLAGS", "load", "nearest", "numpy_nearest",
           "pair_similarities", "prepare", "norms_above", "row_order"]

SOURCE = Path(__file__).with_name("_anchor_kernel.c")

#: Medoids summed side by side in the kernel's two forms (the medoids' matrix is padded to a multiple), the
#: most medoids the narrow form takes, and the medoids of one tile of the wide form (read from the first-level
#: cache by a chunk of rows in turn): the numbers do not depend on them, only the time.
BLOCK, NARROW_BLOCK, NARROW_MAX, TILE = 32, 8, 16, 128

#: Fewer (row, medoid) pairs than this: the threshold form sums every pair in double, the filter's preparation
#: costing more than it saves (the same numbers either way).
FILTER_MIN_PAIRS = 1 << 16

#: Added where the processor has AVX-512: eight lanes a vector (the same numbers: the lanes are independent).
AVX512_FLAGS = ("-mavx512f",)

_LOADED: dict = {}


def _bind(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    for name in ("nearest_medoid", "nearest_medoid_8", "nearest_medoid_few"):
        getattr(lib, name).argtypes = [i64, ptr, i64, ptr, i64, ptr, i64, ptr, ptr]
        getattr(lib, name).restype = None
    lib.nearest_medoid_above.argtypes = [i64, ptr, i64, ptr, ptr, ptr, i64, ptr, ptr, i64, ptr, ptr, ptr, ptr, ptr]
    lib.nearest_medoid_above.restype = None
    lib.cluster_sums.argtypes = [i64, i64, i64, ptr, ptr, ptr, ptr, ptr, ptr]
    lib.cluster_top.argtypes = [i64, i64, ptr, ptr, ptr, ptr, ptr]
    lib.cluster_sums.restype = lib.cluster_top.restype = None
    lib.row_order.argtypes = [i64, i64, ptr, ptr, ptr]
    lib.row_order.restype = None
    return lib


def row_order(u: np.ndarray) -> np.ndarray:
    """``np.lexsort(u.T[::-1])`` (the rows' stable lexicographic order, column 0 first), from the kernel where it loads.

    A stable sort comparing whole rows (numbers as numpy sorts them: NaN last, -0.0 equal to 0.0) has one answer,
    lexsort's; the kernel's merge sort stops comparing two rows at their first unequal column, where lexsort sorts
    every column of every row. For :func:`irtlib.selection.static._unique_rows`.
    """
    lib = load()
    if lib is None or u.ndim != 2 or u.shape[1] == 0:
        return np.lexsort(u.T[::-1])
    u = np.ascontiguousarray(u, dtype=np.float64)
    n, d = u.shape
    order, tmp = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    lib.row_order(n, d, _addr(u), _addr(order), _addr(tmp))
    return order.astype(np.intp, copy=False)


def numpy_cluster_sums(wu: np.ndarray, lab: np.ndarray, k: int) -> np.ndarray:
    """Every cluster's sum of the rows of ``wu``: ``add.reduceat`` over the rows sorted stably by label.

    The labels are in ``[0, k)`` and every cluster has a member. The alternation's update step
    (:func:`irtlib.selection.static._alternate`) reads these sums; :func:`cluster_sums` gives the same bits.
    """
    order = np.argsort(lab, kind="stable")
    return np.add.reduceat(wu[order], np.searchsorted(lab[order], np.arange(k)), axis=0)


def numpy_cluster_top(lab: np.ndarray, score: np.ndarray, med: np.ndarray) -> np.ndarray:
    """The update step's new medoids: in every cluster the member of largest score.

    The current medoid if it has that score, else the lowest position; a cluster whose largest score is NaN keeps
    its medoid.
    """
    k = med.size
    order = np.argsort(lab, kind="stable")
    sorted_lab = lab[order]
    top = np.maximum.reduceat(score[order], np.searchsorted(sorted_lab, np.arange(k)))
    at_top = order[score[order] >= top[sorted_lab]]
    new = med.copy()
    new[lab[at_top[::-1]]] = at_top[::-1]           # the lowest position is written last
    keep_current = score[med] >= top
    new[keep_current] = med[keep_current]
    return new


def cluster_sums(wu: np.ndarray, lab: np.ndarray, k: int, *, want: np.ndarray | None = None,
                 sums: np.ndarray | None = None) -> np.ndarray:
    """:func:`numpy_cluster_sums`' numbers from the kernel (a counting sort and numpy's pairwise order), bit for bit.

    With ``want`` (a flag per cluster) and ``sums`` (shape ``(k, d)``, float64, C order), only the wanted clusters
    are summed, into ``sums`` in place (which is returned); its other rows are kept (a cluster whose members did
    not change has the same sum: the same rows in the same order).
    """
    lib = load()
    if want is not None and sums is not None:
        if lib is None:
            sums[want] = numpy_cluster_sums(wu, lab, k)[want]
            return sums
    else:
        want, sums = None, None
    if lib is None:
        return numpy_cluster_sums(wu, lab, k)
    wu = np.ascontiguousarray(wu, dtype=np.float64)
    lab = np.ascontiguousarray(lab, dtype=np.int64)
    n, d = wu.shape
    if sums is None:
        sums = np.empty((k, d))
    elif not (sums.flags.c_contiguous and sums.dtype == np.float64 and sums.shape == (k, d)):
        raise ValueError("sums must be a C-ordered float64 array of shape (k, d)")
    flags = None if want is None else np.ascontiguousarray(want, dtype=np.uint8)
    order, start = np.empty(n, dtype=np.int64), np.empty(k + 1, dtype=np.int64)
    lib.cluster_sums(n, d, k, _addr(lab), _addr(wu), _addr(sums),
                     _addr(order), _addr(start), None if flags is None else _addr(flags))
    return sums


def cluster_top(lab: np.ndarray, score: np.ndarray, med: np.ndarray) -> np.ndarray:
    """:func:`numpy_cluster_top`'s new medoids from the kernel (one pass for the maxima, one for the first)."""
    lib = load()
    if lib is None:
        return numpy_cluster_top(lab, score, med)
    lab = np.ascontiguousarray(lab, dtype=np.int64)
    score = np.ascontiguousarray(score, dtype=np.float64)
    med = np.ascontiguousarray(med, dtype=np.int64)
    new, top = np.empty(med.size, dtype=np.int64), np.empty(med.size)
    lib.cluster_top(lab.size, med.size, _addr(lab), _addr(score), _addr(med),
                    _addr(new), _addr(top))
    return new.astype(np.intp, copy=False)


def pair_similarities(u: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``u[rows[i]] . u[cols[i]]`` for every ``i``, summed in the kernel's order (the same bits as its similarities)."""
    x, v = u[np.asarray(rows, dtype=np.intp)], u[np.asarray(cols, dtype=np.intp)]
    acc = x[:, 0] * v[:, 0]
    for t in range(1, u.shape[1]):
        acc += x[:, t] * v[:, t]                      # a rounded product, then a rounded sum
    return acc


def _threshold(u, medoids, rows, above, hint):
    """Every asked row's threshold: ``above``, or its similarity with the medoid ``hint`` points at."""
    if hint is None:
        return np.asarray(above, dtype=float)
    asked = np.arange(u.shape[0]) if rows is None else np.asarray(rows, dtype=np.intp)
    return pair_similarities(u, asked, np.asarray(medoids, dtype=np.intp)[np.asarray(hint, dtype=np.intp)])


def _above(lab, best, thr):
    """``lab``, ``best`` where ``best >= thr``; -1 and -inf elsewhere."""
    low = ~(best >= thr)
    lab[low], best[low] = -1, -np.inf
    return lab, best


def numpy_nearest(u: np.ndarray, medoids: np.ndarray, rows: np.ndarray | None = None,
                  *, chunk_cells: int = 1 << 20) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's numbers in numpy: for every row of ``u`` asked, the nearest medoid and that similarity.

    Parameters
    ----------
    u : ndarray, shape (n, d)
        Points (unit rows).
    medoids : ndarray of int, shape (m,)
        Positions of the medoids among the rows of ``u`` (m >= 1).
    rows : ndarray of int, optional
        The points asked (default: every row).

    Returns
    -------
    lab : ndarray of intp
        Index into ``medoids`` of the largest similarity (the first of equals).
    best : ndarray of float
        That similarity, ``sum_t u[r, t] * u[medoids[j], t]`` summed in increasing ``t``.
    """
    v = u[np.asarray(medoids, dtype=np.intp)]
    x = u if rows is None else u[np.asarray(rows, dtype=np.intp)]
    n, m = x.shape[0], v.shape[0]
    lab = np.empty(n, dtype=np.intp)
    best = np.empty(n)
    step = max(1, chunk_cells // max(m, 1))
    for lo in range(0, n, step):
        xs = x[lo:lo + step]
        acc = xs[:, 0:1] * v[:, 0]
        for t in range(1, u.shape[1]):
            acc += xs[:, t:t + 1] * v[:, t]           # a rounded product, then a rounded sum
        j = acc.argmax(axis=1)
        lab[lo:lo + step] = j
        best[lo:lo + step] = np.take_along_axis(acc, j[:, None], axis=1)[:, 0]
    return lab, best


def _kernel_nearest(lib: ctypes.CDLL, u: np.ndarray, medoids: np.ndarray,
                    rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    u = np.ascontiguousarray(u, dtype=np.float64)
    medoids = np.asarray(medoids, dtype=np.intp)
    m, d = medoids.size, u.shape[1]
    if m <= NARROW_MAX:        # one tile of at most 16 medoids: several rows side by side (the same numbers)
        fn, w = lib.nearest_medoid_few, -(-m // NARROW_BLOCK) * NARROW_BLOCK
    else:
        fn, w = lib.nearest_medoid, TILE
    n_tiles = -(-m // w)
    cols = np.zeros((n_tiles * w, d))
    cols[:m] = u[medoids]
    # tile T: medoids T w .. T w + w - 1 (padding past m), d rows of w
    vt = np.ascontiguousarray(cols.reshape(n_tiles, w, d).transpose(0, 2, 1))
    idx = None if rows is None else np.ascontiguousarray(rows, dtype=np.int64)
    n = u.shape[0] if idx is None else idx.size
    lab = np.empty(n, dtype=np.int64)
    best = np.empty(n)
    fn(n, None if idx is None else _addr(idx), d, _addr(u), m,
       _addr(vt), w, _addr(lab), _addr(best))
    return lab.astype(np.intp, copy=False), best


def norms_above(v: np.ndarray) -> np.ndarray:
    """Every row's Euclidean norm, made a little larger (``1 + 2^-40``: a bound on it), ``inf`` where not finite."""
    with np.errstate(over="ignore", invalid="ignore"):
        norm = np.sqrt(np.einsum("ij,ij->i", v, v)) * (1.0 + 2.0 ** -40)
    return np.where(np.isfinite(v).all(axis=1) & np.isfinite(norm), norm, np.inf)


def prepare(u: np.ndarray) -> dict:
    """What the threshold form of the kernel reads of ``u``, computed once for several calls with the same ``u``.

    Returns
    -------
    dict
        ``u`` (float64, C order), ``u32`` (its rows in float32) and ``norm`` (:func:`norms_above` of its rows).
    """
    u = np.ascontiguousarray(u, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        u32 = u.astype(np.float32)
    return {"u": u, "u32": u32, "norm": norms_above(u)}


def _kernel_nearest_above(lib: ctypes.CDLL, u: np.ndarray, medoids: np.ndarray, rows: np.ndarray | None,
                          above: np.ndarray | None, hint: np.ndarray | None, prepared: dict | None,
                          min_pairs: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    medoids = np.ascontiguousarray(medoids, dtype=np.int64)
    m = medoids.size
    n = u.shape[0] if rows is None else len(rows)
    if m <= NARROW_MAX or n * m < (FILTER_MIN_PAIRS if min_pairs is None else min_pairs):  # all, then the threshold
        lab, best = _kernel_nearest(lib, u, medoids, rows)
        # a hint's medoid reaches its own threshold: every row has its label
        return (lab, best) if hint is not None else _above(lab, best, np.asarray(above, dtype=float))
    if prepared is None or prepared["u"] is not u:
        prepared = prepare(u)
    u, d, w = prepared["u"], u.shape[1], TILE
    n_tiles = -(-m // w)
    cols = np.zeros((n_tiles * w, d), dtype=np.float32)
    cols[:m] = prepared["u32"][medoids]
    vt = np.ascontiguousarray(cols.reshape(n_tiles, w, d).transpose(0, 2, 1))
    norms = np.zeros(n_tiles * w)
    norms[:m] = prepared["norm"][medoids]
    norms = norms.reshape(n_tiles, w).max(axis=1)
    idx = None if rows is None else np.ascontiguousarray(rows, dtype=np.int64)
    thr = None if above is None else np.ascontiguousarray(above, dtype=np.float64)
    hin = None if hint is None else np.ascontiguousarray(hint, dtype=np.int64)
    lab = np.empty(n, dtype=np.int64)
    best = np.empty(n)

    def addr(a):
        return None if a is None else _addr(a)

    lib.nearest_medoid_above(n, addr(idx), d, _addr(u), _addr(prepared["u32"]),
                             _addr(prepared["norm"]), m, _addr(medoids), _addr(vt), w,
                             _addr(norms), addr(thr), addr(hin), _addr(lab), _addr(best))
    return lab.astype(np.intp, copy=False), best


def _matches_numpy(lib: ctypes.CDLL) -> bool:
    """The kernel's labels and similarities equal the twin's on random cases (every bit); its row order lexsort's."""
    rng = np.random.default_rng(20261205)
    for n, d in ((1, 1), (17, 3), (300, 5), (2000, 12)):
        u = rng.integers(-1, 2, (n, d)).astype(float)
        u[rng.random((n, d)) < 0.05] = rng.choice([np.nan, -0.0, np.inf])
        order, tmp = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        lib.row_order(n, d, _addr(u), _addr(order),
                      _addr(tmp))
        if not np.array_equal(order, np.lexsort(u.T[::-1])):
            return False
    for m in [*range(1, 70), 95, 96, 97, 127, 128, 129, 255, 257, 300, 1000]:
        d = int(rng.integers(1, 41))
        n = int(rng.integers(max(m, 2), m + 300))
        u = rng.normal(size=(n, d)) * np.exp(rng.normal(0.0, 2.0, (n, 1)))
        u[rng.random(n) < 0.1] = 0.0
        u[rng.random((n, d)) < 0.05] *= -0.0
        medoids = rng.choice(n, m, replace=bool(m % 5 == 0))      # repeated medoids: ties go to the first
        u[rng.integers(0, n, 5)] = u[medoids[0]]
        for rows in (None, np.sort(rng.choice(n, max(1, n // 3), replace=False)), np.array([n - 1])):
            got, want = _kernel_nearest(lib, u, medoids, rows), numpy_nearest(u, medoids, rows)
            if not _same(got, want):
                return False
            # thresholds at the best similarity (ties), an ulp either side, far below and above, and hints
            with np.errstate(invalid="ignore"):           # -inf times 0: NaN thresholds, which nothing reaches
                above = want[1] + rng.choice([0.0, 1.0, -1.0, 0.3, -np.inf, 2.0], want[1].size) * np.where(
                    rng.random(want[1].size) < 0.5, np.spacing(want[1]), np.abs(want[1]))
            hint = rng.integers(0, m, want[1].size)
            for thr, hin in ((above, None), (None, hint)):
                got = _kernel_nearest_above(lib, u, medoids, rows, thr, hin, None, 0)
                if not _same(got, _above(want[0].copy(), want[1].copy(), _threshold(u, medoids, rows, thr, hin))):
                    return False
    return True


def _same(got, want) -> bool:
    return (np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
            and np.array_equal(np.signbit(got[1]), np.signbit(want[1])))


def load() -> ctypes.CDLL | None:
    """The compiled kernel, or None (no compiler, ``IRTLIB_ANCHOR_KERNEL=0``, or unlike the twin); once a process.

    Where the processor has AVX-512, a build with :data:`AVX512_FLAGS` (eight lanes a vector instead of four) is
    tried first and kept if it passes the same check (``IRTLIB_ANCHOR_KERNEL_AVX512=0``: not tried).
    """
    if "lib" in _LOADED:                # decided already (what verified returns then), without the import
        return _LOADED["lib"]
    from irtlib.calibration.fused_kernel import cpu_flags, verified

    if "lib" not in _LOADED and "avx512f" in cpu_flags() and os.environ.get("IRTLIB_ANCHOR_KERNEL_AVX512", "1") != "0":
        wide = verified(SOURCE, _bind, switch="IRTLIB_ANCHOR_KERNEL", cache={}, matches=_matches_numpy,
                        extra_flags=AVX512_FLAGS)
        if wide is not None:
            _LOADED["lib"] = wide
    return verified(SOURCE, _bind, switch="IRTLIB_ANCHOR_KERNEL", cache=_LOADED, matches=_matches_numpy)


def nearest(u: np.ndarray, medoids: np.ndarray, rows: np.ndarray | None = None, *, above: np.ndarray | None = None,
            hint: np.ndarray | None = None, prepared: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`numpy_nearest`'s numbers, from the kernel where it loads (the same bits).

    With ``above`` (a threshold for every row asked) or ``hint`` (for every row asked, an index into ``medoids``: the
    threshold is the row's similarity with that medoid), only the rows whose largest similarity reaches their
    threshold get their label and similarity; the others get -1 and ``-inf``. The kernel then finds them with a
    single-precision filter: only the medoids within a rounding bound of the threshold are summed (see
    ``_anchor_kernel.c``), the same numbers. ``prepared``: :func:`prepare` of this ``u`` (the same ``u`` object),
    kept by a caller that asks about the same points again and again.
    """
    lib = load()
    if above is None and hint is None:
        return numpy_nearest(u, medoids, rows) if lib is None else _kernel_nearest(lib, u, medoids, rows)
    if lib is None:
        return _above(*numpy_nearest(u, medoids, rows), _threshold(u, medoids, rows, above, hint))
    return _kernel_nearest_above(lib, u, medoids, rows, above, hint, prepared)
