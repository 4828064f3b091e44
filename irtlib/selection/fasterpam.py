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
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

import numpy as np

__all__ = ["random_fasterpam", "fasterpam_from", "random_medoids", "core"]

_CORE = "kmedoids.kmedoids"
_LOADED: dict = {}
#: ``RandomState(seed).permutation(n)`` by ``(seed, n)``: the authors' fresh FasterPAM draws its initial
#: medoids with the same seed from the same number of items for every budget of a split.
_ORDERS: dict = {}
_MAX_ORDERS = 64


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
    order = _ORDERS.get((seed, n))
    if order is None:
        if len(_ORDERS) >= _MAX_ORDERS:
            _ORDERS.clear()
        order = _ORDERS[seed, n] = np.random.RandomState(seed).permutation(n).astype(np.uintp)
    return order[:k].copy()


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
    loss, labels, medoids = lib._fasterpam_f64(diss, medoids, int(max_iter))[:3]
    return _result(loss, medoids, labels)
