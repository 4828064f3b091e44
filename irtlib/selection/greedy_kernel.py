"""Marginal Fisher's lazy greedy in C: the same picks as the numpy path, without a dozen numpy calls per pick.

Paper, section "Static subsets": Marginal Fisher adds, one at a time, the item that most reduces
the training models' summed standard error. :func:`irtlib.selection.static._greedy_picks` does it
lazily (stale gains are upper bounds, a submodular objective), but each pick still costs a dozen
numpy calls on a few rows, and the authors' protocol asks for hundreds of thousands of picks (the
interleaved b-quartile rule reads the order far down). ``_greedy_kernel.c`` (beside this module)
keeps the stale gains in a max-heap ordered by (gain, lowest position) and re-evaluates the top until
it is fresh: that item has the largest fresh gain, ties to the lowest position, which is the numpy
path's pick. A gain is computed with the numpy path's operations in its order, and summed over the
models with numpy's pairwise summation, so the floats are equal and so are the picks. Items whose
information rows are equal bit for bit (copies: items with equal training responses get equal parameters;
AIR-Bench 2024 has 673 distinct of 4,906) have equal gains at every step, so they are one heap entry, their
lowest position not yet chosen (:func:`equal_rows`): one gain evaluated for all of them, the same picks.

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

__all__ = ["SOURCE", "load", "gains", "numpy_gains", "lazy_picks", "binned_lazy_picks", "equal_rows"]

SOURCE = Path(__file__).with_name("_greedy_kernel.c")

_LOADED: dict = {}       # "lib": the library or None once load() has decided


def _bind(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.greedy_gains.argtypes = [i64, i64, ptr, ptr, ptr, ptr, ptr]
    lib.greedy_gains.restype = None
    lib.greedy_heapify.argtypes = [i64, ptr, ptr, ptr]
    lib.greedy_heapify.restype = None
    lib.greedy_next.argtypes = [i64, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, i64, ptr, ptr]
    lib.greedy_next.restype = i64
    lib.greedy_binned_next.argtypes = [i64, ptr, ptr, ptr, ptr, ptr, ptr, ptr, i64, ptr, ptr, ptr, ptr, i64, ptr, ptr]
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


def equal_rows(info_t: np.ndarray, items: np.ndarray, bins: np.ndarray | None = None) -> np.ndarray:
    """Chains of the items whose information rows are equal bit for bit (and in one bin): ``next[j]``, -1 at the end.

    Items with equal rows have equal gains at every step, so the kernel keeps one heap entry per chain (its
    lowest position not yet chosen) and re-evaluates one gain for all of them. The rows are grouped by a hash of
    their bits and chained where they are equal, bit for bit, to the next item of the same hash (in increasing
    position); a hash shared by unequal rows only leaves some equal rows unchained (separate entries: the same
    picks).

    Parameters
    ----------
    info_t : ndarray, shape (n_items, n_models)
    items : ndarray of int
        The items to chain (those not chosen), increasing.
    bins : ndarray of int, shape (n_items,), optional
        Every item's bin: chains stay within a bin.

    Returns
    -------
    ndarray of int64, shape (n_items,)
        The next position of ``j``'s chain, or -1 (the last of its chain, or not among ``items``).
    """
    items = np.asarray(items, dtype=np.intp)
    nxt = np.full(info_t.shape[0], -1, dtype=np.int64)
    if items.size < 2:
        return nxt
    bits = np.ascontiguousarray(info_t, dtype=np.float64).view(np.uint64)[items]
    mult = np.random.default_rng(20261205).integers(1, 2 ** 63, size=bits.shape[1], dtype=np.uint64) | np.uint64(1)
    key = (bits * mult).sum(axis=1, dtype=np.uint64)         # wraps modulo 2^64
    if bins is not None:
        key = key ^ (np.asarray(bins, dtype=np.uint64)[items] * np.uint64(0x9E3779B97F4A7C15))
    order = np.argsort(key, kind="stable")                   # equal keys in increasing position
    same = key[order[1:]] == key[order[:-1]]
    same[same] = (bits[order[1:][same]] == bits[order[:-1][same]]).all(axis=1)
    if bins is not None:
        b = np.asarray(bins)[items]
        same &= b[order[1:]] == b[order[:-1]]
    nxt[items[order[:-1][same]]] = items[order[1:][same]]
    return nxt


def _heads(nxt: np.ndarray, items: np.ndarray) -> np.ndarray:
    """The items no chain leads to: one per chain, its lowest position (increasing)."""
    led = np.zeros(nxt.size, dtype=bool)
    led[nxt[nxt >= 0]] = True
    return items[~led[items]]


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
        heap does not order NaN as numpy's ``max`` does). Items with equal information rows are chained
        (:func:`equal_rows`) into one heap entry.
    chunk : int
        Picks computed per call into the kernel (a caller that stops early wastes at most these).
    """
    info_t = np.ascontiguousarray(info_t, dtype=np.float64)
    n_items, n_models = info_t.shape
    s = np.array(s, dtype=np.float64)
    ub = np.array(bounds, dtype=np.float64)
    items = np.flatnonzero(ub > -np.inf)                    # every item not chosen
    nxt = equal_rows(info_t, items)                         # equal rows: one heap entry (the same picks)
    heap = _heap(lib, _heads(nxt, items), ub)
    stamp = np.zeros(n_items, dtype=np.int64)          # the bounds are this step's fresh gains
    state = np.array([heap.size // 2, 0], dtype=np.int64)
    r1, sm, work = np.empty(n_models), np.empty(n_models), np.empty(n_models)
    out = np.empty(chunk, dtype=np.int64)
    at = [v.ctypes.data for v in (info_t, s, r1, sm, work, ub, stamp, heap, state, out, nxt)]  # fixed: read once
    while state[0] > 0:
        got = lib.greedy_next(n_models, *at[:9], chunk, *at[9:])
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
    bins = np.zeros(n_items, dtype=np.intp)
    for i, m in enumerate(members):
        bins[np.asarray(m, dtype=np.intp)] = i
    nxt = equal_rows(info_t, np.flatnonzero(ub > -np.inf), bins)     # equal rows of one bin: one heap entry
    led = np.zeros(n_items, dtype=bool)
    led[nxt[nxt >= 0]] = True
    heaps = [_heap(lib, items[(ub[items] > -np.inf) & ~led[items]], ub)
             for items in (np.asarray(m, dtype=np.int64) for m in members)]
    heap_at = np.array([heap.ctypes.data for heap in heaps], dtype=np.int64)   # the heaps live as long as this
    states = np.zeros((len(heaps), 2), dtype=np.int64)
    states[:, 0] = [heap.size // 2 for heap in heaps]
    left = np.array(left, dtype=np.int64)
    cursor = np.array([int(first_bin), 0, int(left.sum())], dtype=np.int64)     # bin, step, picks remaining
    stamp = np.zeros(n_items, dtype=np.int64)
    r1, sm, work = np.empty(n_models), np.empty(n_models), np.empty(n_models)
    out = np.empty(chunk, dtype=np.int64)
    at = [v.ctypes.data for v in (info_t, s, r1, sm, work, ub, stamp, heap_at, states, left, cursor, out, nxt)]
    while cursor[2] > 0:
        got = lib.greedy_binned_next(n_models, *at[:7], len(heaps), *at[7:11], chunk, *at[11:])
        yield from out[:got].tolist()
