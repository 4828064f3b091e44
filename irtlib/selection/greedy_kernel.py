"""Marginal Fisher's lazy greedy in C: the same picks as the numpy path, without a dozen numpy calls per pick.

Paper, section "Static subsets": Marginal Fisher adds, one at a time, the item that most reduces
the training models' summed standard error. :func:`irtlib.selection.static._greedy_picks` does it
lazily (stale gains are upper bounds, a submodular objective), but each pick still costs a dozen
numpy calls on a few rows, and the authors' protocol asks for hundreds of thousands of picks (the
interleaved b-quartile rule reads the order far down). ``_greedy_kernel.c`` (beside this module)
keeps the stale gains in a max-heap ordered by (gain, lowest position) and re-evaluates the top until
it is fresh: that item has the largest fresh gain, ties to the lowest position, which is the numpy
path's pick. A gain is computed with the numpy path's operations in its order, and summed over the
models with numpy's pairwise summation, so the floats are equal and so are the picks.

Compiled like :mod:`irtlib.calibration.fused_kernel` (the same compiler, flags and per-user
directory). The first :func:`load` of a process compares the kernel's gains with
the numpy path's (:func:`numpy_gains`) on random columns of every length up to 300 models and
several longer ones, and returns the kernel only if every gain is equal; otherwise, or without a
compiler, or with ``IRTLIB_GREEDY_KERNEL=0``, the numpy path runs (the same picks, slower).

Layer rule: part of ``selection``; imports ``calibration`` (the compiler driver) and below.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from pathlib import Path

import numpy as np

__all__ = ["SOURCE", "load", "gains", "numpy_gains", "lazy_picks"]

SOURCE = Path(__file__).with_name("_greedy_kernel.c")

_LOADED: dict = {}       # "lib": the library or None once load() has decided


def _bind(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.greedy_gains.argtypes = [i64, i64, ptr, ptr, ptr, ptr, ptr]
    lib.greedy_gains.restype = None
    lib.greedy_heapify.argtypes = [i64, ptr, ptr, ptr]
    lib.greedy_heapify.restype = None
    lib.greedy_next.argtypes = [i64, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, i64, ptr]
    lib.greedy_next.restype = i64
    lib.greedy_binned_next.argtypes = [i64, ptr, ptr, ptr, ptr, ptr, ptr, ptr, i64, ptr, ptr, ptr, ptr, i64, ptr]
    lib.greedy_binned_next.restype = i64
    return lib


def numpy_gains(s: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Decrease of ``sum_m s_m^-1/2`` from adding columns ``cols`` (shape (n_cand, n_models)), in numpy.

    The gains of :func:`irtlib.selection.static._greedy_picks`' numpy path, which the kernel's equal.
    Written without cancellation: ``s^-1/2 - (s + I)^-1/2 = I / (r1 r2 (r1 + r2))`` with
    ``r1 = sqrt(s)``, ``r2 = sqrt(s + I)``.
    """
    s = np.maximum(s, 1e-300)          # a model with no information yet: huge, finite gains
    r1 = np.sqrt(s)
    r2 = np.sqrt(s + cols)
    return (cols / (r1 * r2 * (r1 + r2))).sum(axis=1)


def gains(lib: ctypes.CDLL, s: np.ndarray, info_t: np.ndarray) -> np.ndarray:
    """The kernel's gains of every row of ``info_t`` (shape (n_items, n_models)) given information ``s``."""
    info_t = np.ascontiguousarray(info_t, dtype=np.float64)
    sm = np.ascontiguousarray(np.maximum(s, 1e-300), dtype=np.float64)
    r1 = np.sqrt(sm)
    work = np.empty(info_t.shape[1])
    out = np.empty(info_t.shape[0])
    lib.greedy_gains(info_t.shape[0], info_t.shape[1], info_t.ctypes.data, sm.ctypes.data, r1.ctypes.data,
                     work.ctypes.data, out.ctypes.data)
    return out


def _matches_numpy(lib: ctypes.CDLL) -> bool:
    """Whether the kernel's gains equal :func:`numpy_gains`'s, bit for bit.

    Random information (spread over many orders of magnitude, with zeros) for every number of
    models up to 300 and a few larger ones (numpy's pairwise summation changes shape at 8 and 128).
    """
    rng = np.random.default_rng(20261203)
    with np.errstate(invalid="ignore", divide="ignore"):      # 0 / 0 where s = 0: NaN on both paths
        return all(np.array_equal(gains(lib, s, info_t), numpy_gains(s, info_t), equal_nan=True)
                   for s, info_t in _check_cases(rng))


def _check_cases(rng):
    for n_models in [*range(1, 301), 511, 1000, 1777]:
        info_t = np.exp(rng.normal(-2.0, 3.0, (7, n_models)))
        info_t[:, ::5] = 0.0
        s = np.exp(rng.normal(0.0, 4.0, n_models))
        s[::7] = 0.0
        yield s, info_t


def load() -> ctypes.CDLL | None:
    """The compiled kernel, or None (no compiler, ``IRTLIB_GREEDY_KERNEL=0``, or gains unlike numpy's).

    Decided once per process.
    """
    from irtlib.calibration.fused_kernel import verified

    return verified(SOURCE, _bind, switch="IRTLIB_GREEDY_KERNEL", matches=_matches_numpy, cache=_LOADED)


def _heap(lib: ctypes.CDLL, positions: np.ndarray, ub: np.ndarray) -> np.ndarray:
    """The kernel's max-heap of the items ``positions`` by their bounds ``ub``.

    (bound, position) entries of 16 bytes, two int64 slots each (the bound's bits, the position).
    """
    positions = np.ascontiguousarray(positions, dtype=np.int64)
    heap = np.empty(2 * positions.size, dtype=np.int64)
    lib.greedy_heapify(positions.size, positions.ctypes.data, ub.ctypes.data, heap.ctypes.data)
    return heap


def lazy_picks(lib: ctypes.CDLL, info_t: np.ndarray, s: np.ndarray, bounds: np.ndarray, *,
               chunk: int = 64) -> Iterator[int]:
    """The greedy picks after the first, in order, until every item is chosen.

    Parameters
    ----------
    lib : the loaded kernel (:func:`load`)
    info_t : ndarray, shape (n_items, n_models)
        Every item's information at every training ability.
    s : ndarray, shape (n_models,)
        The information of the items chosen so far (the prior's plus the first pick's).
    bounds : ndarray, shape (n_items,)
        Every item's gain given ``s`` (numpy's), ``-inf`` for the chosen item; the others finite (the
        heap does not order NaN as numpy's ``max`` does).
    chunk : int
        Picks computed per call into the kernel (a caller that stops early wastes at most these).
    """
    info_t = np.ascontiguousarray(info_t, dtype=np.float64)
    n_items, n_models = info_t.shape
    s = np.array(s, dtype=np.float64)
    ub = np.array(bounds, dtype=np.float64)
    heap = _heap(lib, np.flatnonzero(ub > -np.inf), ub)    # every item not chosen
    stamp = np.zeros(n_items, dtype=np.int64)          # the bounds are this step's fresh gains
    state = np.array([heap.size // 2, 0], dtype=np.int64)
    r1, sm, work = np.empty(n_models), np.empty(n_models), np.empty(n_models)
    out = np.empty(chunk, dtype=np.int64)
    while state[0] > 0:
        got = lib.greedy_next(n_models, info_t.ctypes.data, s.ctypes.data, r1.ctypes.data, sm.ctypes.data,
                              work.ctypes.data, ub.ctypes.data, stamp.ctypes.data, heap.ctypes.data,
                              state.ctypes.data, chunk, out.ctypes.data)
        yield from out[:got].tolist()


def binned_lazy_picks(lib: ctypes.CDLL, info_t: np.ndarray, s: np.ndarray, bounds: np.ndarray,
                      members: list[np.ndarray], *, first_bin: int, left: list[int],
                      chunk: int = 64) -> Iterator[int]:
    """:func:`lazy_picks` round-robin over item bins (the constrained b-quartile rule), after the first pick.

    One heap per bin, over the shared bounds and stamps: every pick, in whichever bin, starts a new
    step, so a bound is fresh only if computed since the last pick. Each pick is the item of the
    current bin with the largest fresh gain (ties: lowest position), as
    :func:`irtlib.selection.static._greedy_picks`' numpy path picks it.

    Parameters
    ----------
    lib, info_t, s, bounds
        As :func:`lazy_picks` (``bounds`` ``-inf`` for the first pick, finite elsewhere).
    members : list of ndarray of int
        The items of every bin.
    first_bin : int
        The bin of the first pick (the cycle continues from the next bin).
    left : list of int
        Items not yet chosen per bin (the first pick already counted).
    chunk : int
        Picks computed per call into the kernel (the round-robin runs in C; a caller that stops early
        wastes at most these).
    """
    info_t = np.ascontiguousarray(info_t, dtype=np.float64)
    n_items, n_models = info_t.shape
    s = np.array(s, dtype=np.float64)
    ub = np.array(bounds, dtype=np.float64)
    heaps = [_heap(lib, items[ub[items] > -np.inf], ub) for items in (np.asarray(m, dtype=np.int64) for m in members)]
    heap_at = np.array([heap.ctypes.data for heap in heaps], dtype=np.int64)   # the heaps live as long as this
    states = np.zeros((len(heaps), 2), dtype=np.int64)
    states[:, 0] = [heap.size // 2 for heap in heaps]
    left = np.array(left, dtype=np.int64)
    cursor = np.array([int(first_bin), 0, int(left.sum())], dtype=np.int64)     # bin, step, picks remaining
    stamp = np.zeros(n_items, dtype=np.int64)
    r1, sm, work = np.empty(n_models), np.empty(n_models), np.empty(n_models)
    out = np.empty(chunk, dtype=np.int64)
    while cursor[2] > 0:
        got = lib.greedy_binned_next(n_models, info_t.ctypes.data, s.ctypes.data, r1.ctypes.data, sm.ctypes.data,
                                     work.ctypes.data, ub.ctypes.data, stamp.ctypes.data, len(heaps),
                                     heap_at.ctypes.data, states.ctypes.data, left.ctypes.data, cursor.ctypes.data,
                                     chunk, out.ctypes.data)
        yield from out[:got].tolist()
