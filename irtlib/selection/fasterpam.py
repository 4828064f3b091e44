"""FasterPAM (Schubert and Rousseeuw) from the ``kmedoids`` package's compiled core, without scikit-learn.

Anchor Points (paper, appendix D; the authors' released code) run the ``kmedoids`` package's FasterPAM.
Importing that package imports scikit-learn's ``base`` (for its scikit-learn-style estimator class),
and with it ``scipy.stats``: about 1.4 CPU s per fresh process, paid by every protocol worker. The
clustering itself is the package's compiled extension ``kmedoids.kmedoids``; this module loads that
extension alone and calls it with the arguments the package's ``fasterpam`` passes it (the same
function, the same inputs: the same medoids, labels and loss, bit for bit; a test compares them):

- :func:`random_fasterpam` is ``kmedoids.fasterpam(diss, k, max_iter=max_iter, init="random",
  random_state=seed, n_cpu=1)``: the initial medoids ``RandomState(seed).choice(n, k, replace=False)``,
  and ``seed`` also seeds the extension's processing order;
- :func:`fasterpam_from` is ``kmedoids.fasterpam(diss, medoids, max_iter=max_iter, n_cpu=1)``.

Where the extension cannot be loaded alone (another layout of the package), the package's own
``fasterpam`` runs instead.

The extension reads the matrix through its strides, element by element; FasterPAM's passes read the
distances of every item to one candidate, a column, so a column-major (Fortran-ordered) matrix is read
contiguously and runs in about 0.75 of the time, with the same elements and so the same result
(:func:`irtlib.selection.static.anchor_points_fresh` passes one).

Both run in a C kernel where it loads, ``_fasterpam_kernel.c`` beside this module: FasterPAM step for
step as the package's Rust core runs it (the same comparisons, every sum in the same order), the random
order computed by :func:`irtlib.selection.rust_order.shuffled_order`. Its swap search takes four to sixteen
candidates at once, one in each lane of a vector, each against the same state as in the package (after a swap
the batch's later candidates are looked at again), and for eight or more medoids it keeps every point's
distances to the medoids row by row, for the second-nearest search after a swap; where the processor has
AVX-512 it is built with it (:data:`AVX512_FLAGS`, the same four-lane vectors). The first :func:`kernel`
of a process compares it with the package's extension on random and structured cases
(:func:`_matches_package`: ties, duplicate and constant items, ``k`` from 1 to ``n``, either memory order,
an asymmetric matrix) and uses it only if every medoid, label, loss, iteration and swap count is equal;
otherwise, without a compiler or the extension, or with ``IRTLIB_FASTERPAM_KERNEL=0``, the extension runs
(the same numbers, slower).
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import numpy as np

from . import rust_order

__all__ = ["random_fasterpam", "fasterpam_from", "random_medoids", "core", "kernel", "KERNEL_SOURCE",
           "AVX512_FEATURES", "AVX512_FLAGS"]

KERNEL_SOURCE = Path(__file__).with_name("_fasterpam_kernel.c")
_KERNEL: dict = {}

#: The processor features (``/proc/cpuinfo``) for which the kernel is also built with :data:`AVX512_FLAGS`: the
#: same four-lane vectors with AVX-512's mask registers and 32 vector registers, and ``-O3`` (about 0.85 of the
#: AVX2 build's time on the chapters' calls; the same numbers: each lane's operations are the same).
AVX512_FEATURES = frozenset({"avx512f", "avx512vl", "avx512dq", "avx512bw"})
AVX512_FLAGS = ("-O3", "-mavx512f", "-mavx512vl", "-mavx512dq", "-mavx512bw")

_CORE = "kmedoids.kmedoids"
_LOADED: dict = {}


def _load_core() -> ModuleType:
    """The ``kmedoids.kmedoids`` extension module, loaded without running the package's ``__init__``."""
    if _CORE in sys.modules:
        return sys.modules[_CORE]
    if "kmedoids" in sys.modules:             # the package is loaded already: its extension costs nothing more
        return importlib.import_module(_CORE)
    package = importlib.util.find_spec("kmedoids")
    if package is None or not package.submodule_search_locations:
        raise ImportError("the kmedoids package is not installed")
    found = importlib.machinery.PathFinder.find_spec("kmedoids", list(package.submodule_search_locations))
    if found is None or not isinstance(found.loader, importlib.machinery.ExtensionFileLoader):
        raise ImportError("no compiled kmedoids extension in the kmedoids package")
    spec = importlib.util.spec_from_file_location(_CORE, found.origin)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # registered under its own name, so that a later ``import kmedoids`` reuses it (an extension
    # module is initialised once per process)
    sys.modules[_CORE] = module
    return module


def core() -> ModuleType | None:
    """The compiled extension, or None where it cannot be loaded alone (then the package's functions run)."""
    if "core" not in _LOADED:
        try:
            mod = _load_core()
            _LOADED["core"] = mod if hasattr(mod, "_rand_fasterpam_f64") and hasattr(mod, "_fasterpam_f64") else None
        except ImportError:
            _LOADED["core"] = None
    return _LOADED["core"]


def random_medoids(n: int, k: int, seed: int) -> np.ndarray:
    """``RandomState(seed).choice(n, k, replace=False)`` as ``uintp``: the package's random initial medoids.

    numpy's legacy ``choice`` without replacement and without weights returns the first ``k`` of
    ``RandomState(seed).permutation(n)``; that permutation is kept by ``(seed, n)``, so the budgets
    of one split (the same items, the same seed) draw it once. The same medoids, in the same order
    (a test compares them with ``choice`` for every ``k``).
    """
    n, k, seed = int(n), int(k), int(seed)
    if not 0 <= k <= n:                       # choice's own error
        return np.random.RandomState(seed).choice(n, k, False).astype(np.uintp)
    return _permutation(seed, n)[:k].copy()


@functools.lru_cache(maxsize=64)
def _permutation(seed: int, n: int) -> np.ndarray:
    """``RandomState(seed).permutation(n)`` as read-only ``uintp``, kept by ``(seed, n)``.

    The authors' fresh FasterPAM draws its initial medoids with the same seed from the same number of items
    for every budget of a split.
    """
    order = np.random.RandomState(seed).permutation(n).astype(np.uintp)
    order.setflags(write=False)
    return order


def _bind(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.fasterpam.argtypes = [i64, ptr, i64, i64, i64, ptr, ptr, i64, ptr, ptr, ptr]
    lib.fasterpam.restype = ctypes.c_int
    return lib


def _kernel_takes(diss: np.ndarray, medoids: np.ndarray, max_iter: int) -> bool:
    """Whether the kernel runs this call: a square, aligned float64 matrix with whole-element strides, valid medoids.

    Elsewhere (no medoids, too many, out of range) the extension runs and raises its own error.
    """
    n = diss.shape[0] if diss.ndim == 2 else -1
    return (diss.ndim == 2 and diss.shape[1] == n and n >= 1 and 1 <= medoids.size <= n
            and diss.dtype == np.float64 and diss.flags.aligned and all(s % 8 == 0 for s in diss.strides)
            and int(medoids.max()) < n and 0 <= int(max_iter) < 2 ** 63)


def _run_kernel(lib: ctypes.CDLL, diss: np.ndarray, medoids: np.ndarray, max_iter: int,
                seed: int | None) -> tuple[float, np.ndarray, np.ndarray, int, int]:
    """The kernel's ``(loss, medoids, labels, iterations, swaps)``.

    ``seed`` None: the package's ``fasterpam``; else its ``rand_fasterpam`` with that seed's order.
    """
    n = diss.shape[0]
    med = np.array(medoids, dtype=np.int64)
    order = None if seed is None else rust_order.shuffled_order(seed, n)
    labels = np.empty(n, dtype=np.int64)
    res, stats = np.empty(1), np.empty(2, dtype=np.int64)
    ptr = ctypes.c_void_p
    if lib.fasterpam(n, ptr(diss.ctypes.data), diss.strides[0] // 8, diss.strides[1] // 8, med.size,
                     ptr(med.ctypes.data), None if order is None else ptr(order.ctypes.data), max_iter,
                     ptr(labels.ctypes.data), ptr(res.ctypes.data), ptr(stats.ctypes.data)) != 0:
        raise MemoryError("FasterPAM kernel: no memory for its work arrays")
    return float(res[0]), med.astype(np.intp), labels.astype(np.intp), int(stats[0]), int(stats[1])


def _check_cases(rng: np.random.Generator):
    """Random and structured ``(matrix, medoids, seed or None)`` cases for the load check."""
    for case in range(160):
        n = int(rng.integers(1, 14)) if case < 40 else int(rng.integers(14, 120))
        x = rng.normal(size=(n, int(rng.integers(1, 4))))
        diss = np.sqrt(((x[:, None] - x[None]) ** 2).sum(axis=-1))
        kind = case % 8
        if kind == 1:
            diss = np.round(diss, 1)                       # many ties
        elif kind == 2:
            diss[:, rng.random(n) < 0.3] = 1.0              # constant columns and rows (the authors' constant items)
            diss[rng.random(n) < 0.3] = 1.0
        elif kind == 3 and n > 2:
            dup = rng.integers(0, n, n // 3)                # duplicate items: zero distances off the diagonal
            diss[dup] = diss[0]
            diss[:, dup] = diss[:, [0]]
        elif kind == 4:
            diss = diss * (1.0 + 1e-3 * rng.random(diss.shape))     # not symmetric
        elif kind == 5:
            diss = np.round(rng.random((n, n)) * 3.0) - 0.5 * (rng.random((n, n)) < 0.1)   # negatives, a diagonal
        if kind != 5:
            np.fill_diagonal(diss, 0.0)
        if case % 2:
            diss = np.asfortranarray(diss)
        k = min(n, int(rng.choice([1, 2, n, max(1, n - 1), int(rng.integers(1, n + 1))])))
        seed = int(rng.integers(0, 2 ** 63)) if case % 7 == 0 else int(rng.choice([42, 0, 7, 1, 12345]))
        init = random_medoids(n, k, seed % 2 ** 32)
        if case % 5 == 0 and n > 2:
            init = rng.integers(0, n, k).astype(np.uintp)  # repeated medoids, as a caller may give
        yield diss, init, seed, int(rng.choice([100, 100, 1, 0, 3]))


def _matches_package(lib: ctypes.CDLL) -> bool:
    """The kernel's loss, medoids, labels, iterations and swaps equal the package extension's on every check case."""
    ext = core()
    if ext is None:
        return False
    for diss, init, seed, max_iter in _check_cases(np.random.default_rng(20261205)):
        for s in (seed, None):
            want = (ext._rand_fasterpam_f64(diss, init, max_iter, s) if s is not None
                    else ext._fasterpam_f64(diss, init, max_iter))
            got = _run_kernel(lib, diss, init, max_iter, s)
            if not (np.array_equal(np.float64(got[0]), np.float64(want[0]))
                    and np.signbit(got[0]) == np.signbit(want[0])
                    and np.array_equal(got[1], np.asarray(want[2], dtype=np.intp))
                    and np.array_equal(got[2], np.asarray(want[1], dtype=np.intp))
                    and (got[3], got[4]) == (int(want[3]), int(want[4]))):
                return False
    return True


def kernel() -> ctypes.CDLL | None:
    """The C FasterPAM (``_fasterpam_kernel.c``), or None.

    None: no compiler, no extension to check it against, ``IRTLIB_FASTERPAM_KERNEL=0``, or unlike the
    extension on :func:`_matches_package`'s cases; decided once a process (the answer kept on disk).
    Where the processor has AVX-512 (:data:`AVX512_FEATURES`), a build with :data:`AVX512_FLAGS` is tried
    first and kept if it passes the same check (``IRTLIB_FASTERPAM_KERNEL_AVX512=0``: not tried).
    """
    from irtlib.calibration.fused_kernel import cpu_flags, verified

    if ("lib" not in _KERNEL and AVX512_FEATURES <= cpu_flags()
            and os.environ.get("IRTLIB_FASTERPAM_KERNEL_AVX512", "1") != "0"):
        wide = verified(KERNEL_SOURCE, _bind, switch="IRTLIB_FASTERPAM_KERNEL", cache={}, matches=_matches_package,
                        extra_flags=AVX512_FLAGS)
        if wide is not None:
            _KERNEL["lib"] = wide
    return verified(KERNEL_SOURCE, _bind, switch="IRTLIB_FASTERPAM_KERNEL", cache=_KERNEL, matches=_matches_package)


def _result(loss, medoids, labels) -> tuple[float, np.ndarray, np.ndarray]:
    return float(loss), np.asarray(medoids, dtype=np.intp), np.asarray(labels, dtype=np.intp)


def random_fasterpam(diss: np.ndarray, k: int, *, seed: int,
                     max_iter: int = 100) -> tuple[float, np.ndarray, np.ndarray]:
    """``kmedoids.fasterpam(diss, k, max_iter=max_iter, init="random", random_state=seed, n_cpu=1)``.

    Parameters
    ----------
    diss : ndarray, shape (n, n), float64
        Dissimilarities.
    k : int
    seed : int
        The package's ``random_state``: the random initial medoids and the processing order.
    max_iter : int

    Returns
    -------
    loss : float
    medoids, labels : ndarray of intp
    """
    lib = core()
    diss = np.asarray(diss)
    if lib is None or diss.dtype != np.float64:
        import kmedoids

        res = kmedoids.fasterpam(diss, int(k), max_iter=max_iter, init="random", random_state=int(seed), n_cpu=1)
        return _result(res.loss, res.medoids, res.labels)
    init = random_medoids(diss.shape[0], int(k), int(seed))
    lib_c = kernel()
    if lib_c is not None and _kernel_takes(diss, init, max_iter):
        return _result(*_run_kernel(lib_c, diss, init, int(max_iter), int(seed))[:3])
    loss, labels, medoids = lib._rand_fasterpam_f64(diss, init, int(max_iter), int(seed))[:3]
    return _result(loss, medoids, labels)


def fasterpam_from(diss: np.ndarray, medoids: np.ndarray, *,
                   max_iter: int = 100) -> tuple[float, np.ndarray, np.ndarray]:
    """``kmedoids.fasterpam(diss, medoids, max_iter=max_iter, n_cpu=1)``: FasterPAM from given medoids.

    Returns
    -------
    loss : float
    medoids, labels : ndarray of intp
    """
    lib = core()
    diss = np.asarray(diss)
    medoids = np.asarray(medoids).astype(np.uintp)
    if lib is None or diss.dtype != np.float64:
        import kmedoids

        res = kmedoids.fasterpam(diss, medoids, max_iter=max_iter, n_cpu=1)
        return _result(res.loss, res.medoids, res.labels)
    lib_c = kernel()
    if lib_c is not None and _kernel_takes(diss, medoids, max_iter):
        return _result(*_run_kernel(lib_c, diss, medoids, int(max_iter), None)[:3])
    loss, labels, medoids = lib._fasterpam_f64(diss, medoids, int(max_iter))[:3]
    return _result(loss, medoids, labels)
