"""Sympson-Hetter's choice in C, walking each model's ranks lazily: the same items, a few exact evaluations each.

:class:`irtlib.selection.selectors.SympsonHetterCandidates` chooses, at every step of a Sympson-Hetter calibration
(:func:`irtlib.selection.cat.sympson_hetter`: the primer runs 20 rounds of 1,000 simulees of 20 items on a 4,906-item
bank), each model's item from its ability cell's 128 candidates: their information evaluated, sorted, and walked
with the step's uniform draws, a Python loop jumping numpy's generator to each model's row of draws. The choice itself
(paper's operational CAT, :func:`irtlib.selection.selectors.choose_items`: the ranks by information, the item at rank
``r`` let through when ``u[model, r] < K[item]``) depends only on the ranks walked until an item is let through,
a few with exposure parameters of 0.3.

``_sympson_hetter_kernel.c`` (beside this module) walks those ranks one model at a time. The items of the model's
cell come sorted by the cell's upper bound of their information (the same bound, slack included, as
``SympsonHetterCandidates``), and an item's information is evaluated exactly (:func:`fisher_information`'s
operations, the C library's ``exp``, no fused multiply-adds) only when its bound reaches the best value not yet
ranked, so each rank is the largest exact value left (ties: the lowest item) once that value exceeds every bound
left. The draws are numpy's PCG64's (a float64 draw is one step: the state at the step's start jumped to
``model * n_items + rank``). So the item and the items set aside are :func:`choose_items`' bit for bit; a model
whose finite ranks run out before enough items are let through is left to the numpy path, as are models outside
the cells and any generator but PCG64.

The first :func:`load` of a process compares the kernel's draws with numpy's generator and its choices with
:func:`choose_items`' on random banks (NaN, huge and tiny discriminations, abilities outside the cells, exposure
parameters of 0 and 1, randomesque), and returns it only if every choice and item set aside is equal; otherwise, or
without a compiler, or with ``IRTLIB_SYMPSON_HETTER_KERNEL=0``, the selector keeps its numpy path (no warning: the
choices are the same).

Layer rule: part of ``selection``; imports ``core`` and ``calibration`` (the compiler driver).
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

__all__ = ["SOURCE", "load", "lazy_tables", "choose_rows", "pcg64_draws"]

SOURCE = Path(__file__).with_name("_sympson_hetter_kernel.c")

_LOADED: dict = {}

#: A cell's bound below this, or with ``|a| width`` above :data:`MAX_SPREAD`, is not trusted (an underflow may
#: hide in it): the kernel then evaluates the item first, always.
MIN_BOUND = 1e-250
MAX_SPREAD = 50.0

_MASK64 = (1 << 64) - 1


def _bind(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    i64, u64, ptr = ctypes.c_int64, ctypes.c_uint64, ctypes.c_void_p
    lib.sh_choose.argtypes = [i64, ptr, ptr, ptr, i64, ptr, ptr, ptr, ptr, ptr, ptr, i64, ptr, u64, u64, u64, u64,
                              ptr, ptr, ptr, ptr, ptr, ptr, i64]
    lib.sh_choose.restype = i64
    lib.sh_draws.argtypes = [u64, u64, u64, u64, u64, u64, i64, ptr]
    lib.sh_draws.restype = None
    return lib


def lazy_tables(bound: np.ndarray, a: np.ndarray, width: float) -> tuple[np.ndarray, np.ndarray]:
    """Each cell's items by decreasing bound, and those bounds (infinite where not trusted).

    Parameters
    ----------
    bound : ndarray, shape (n_cells, n_items)
        Upper bounds of each item's information over each cell, slack included.
    a : ndarray, shape (n_items,)
    width : float
        The cells' width.

    Returns
    -------
    order : ndarray of int32, shape (n_cells, n_items)
    sorted_bound : ndarray, shape (n_cells, n_items)
    """
    a = np.asarray(a, dtype=float)
    with np.errstate(invalid="ignore"):
        trusted = (bound >= MIN_BOUND) & (np.abs(a) * float(width) <= MAX_SPREAD)[None, :]
    ub = np.where(trusted, bound, np.inf)
    order = np.argsort(-ub, axis=1, kind="stable").astype(np.int32)
    return order, np.ascontiguousarray(np.take_along_axis(ub, order.astype(np.intp), axis=1))


def _state_words(state: dict) -> tuple[int, int, int, int]:
    """The PCG64 state and increment of ``bit_generator.state``, as high and low 64-bit words."""
    s, inc = int(state["state"]["state"]), int(state["state"]["inc"])
    return s >> 64, s & _MASK64, inc >> 64, inc & _MASK64


def choose_rows(lib: ctypes.CDLL, tables: tuple[np.ndarray, np.ndarray], *, rows: np.ndarray, theta: np.ndarray,
                cell: np.ndarray, a: np.ndarray, b: np.ndarray, avail: np.ndarray, k_exposure: np.ndarray, k: int,
                v: np.ndarray | None, start: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The kernel's choice for models ``rows`` (increasing) of ``avail`` (n_models, n_items).

    ``theta``, ``cell`` and ``v`` (or None for ``k == 1``) have one value per row; ``start`` is the PCG64
    ``bit_generator.state`` at which the step's ``(n_models, n_items)`` draws begin.

    Returns
    -------
    item : ndarray of int, shape (n_rows,)
    enough : ndarray of bool, shape (n_rows,)
        False: the row is left to the numpy path (its ``item`` is -1 and it sets nothing aside here).
    set_rows, set_items : ndarray of int
        The items set aside, as (model, item) pairs.
    """
    order, ub = tables
    n_rows = int(rows.size)
    n_items = int(avail.shape[1])
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    theta = np.ascontiguousarray(theta, dtype=np.float64)
    cell = np.ascontiguousarray(cell, dtype=np.int64)
    a = np.ascontiguousarray(a, dtype=np.float64)
    b = np.ascontiguousarray(b, dtype=np.float64)
    avail = np.ascontiguousarray(avail, dtype=np.bool_)
    kexp = np.ascontiguousarray(k_exposure, dtype=np.float64)
    vv = None if v is None else np.ascontiguousarray(v, dtype=np.float64)
    if int(k) > 1 and vv is None:
        raise ValueError("randomesque needs its draws v")
    heap_val, heap_idx = np.empty(max(n_items, 1)), np.empty(max(n_items, 1), dtype=np.int64)
    item = np.empty(n_rows, dtype=np.int64)
    enough = np.empty(n_rows, dtype=np.bool_)
    capacity = 64 * n_rows + 64
    set_rows, set_items = np.empty(capacity, dtype=np.int64), np.empty(capacity, dtype=np.int64)
    ptr = ctypes.c_void_p
    n_set = lib.sh_choose(n_rows, ptr(rows.ctypes.data), ptr(theta.ctypes.data), ptr(cell.ctypes.data), n_items,
                          ptr(order.ctypes.data), ptr(ub.ctypes.data), ptr(a.ctypes.data), ptr(b.ctypes.data),
                          ptr(avail.ctypes.data), ptr(kexp.ctypes.data), int(k),
                          None if vv is None else ptr(vv.ctypes.data), *_state_words(start),
                          ptr(heap_val.ctypes.data), ptr(heap_idx.ctypes.data), ptr(item.ctypes.data),
                          ptr(enough.ctypes.data), ptr(set_rows.ctypes.data), ptr(set_items.ctypes.data), capacity)
    return item, enough, set_rows[:n_set].copy(), set_items[:n_set].copy()


def pcg64_draws(lib: ctypes.CDLL, start: dict, delta: int, n: int) -> np.ndarray:
    """The kernel's ``n`` draws of ``random()`` after jumping ``delta`` steps from the PCG64 ``start`` state."""
    out = np.empty(int(n))
    lib.sh_draws(*_state_words(start), (int(delta) >> 64) & _MASK64, int(delta) & _MASK64, int(n),
                 ctypes.c_void_p(out.ctypes.data))
    return out


def _draws_match(lib: ctypes.CDLL, rng: np.random.Generator) -> bool:
    """The kernel's PCG64 draws equal numpy's, after jumps of every size."""
    for seed in range(6):
        bg = np.random.PCG64(int(rng.integers(0, 2**63)) + seed)
        start = bg.state
        for delta in (0, 1, 2, 7, 4906, 4906 * 999 + 3, 2**40 + 5, 2**64 + 11):
            bg.state = start
            bg.advance(delta)
            want = np.random.Generator(bg).random(5)
            if not np.array_equal(pcg64_draws(lib, start, delta, 5), want):
                return False
    return True


def _random_bank(rng: np.random.Generator, case: int):
    """A random bank, abilities, availability, exposure parameters and randomesque width for the load check."""
    n_models = int(rng.integers(1, 40))
    n_items = [1, 2, 3, 7, 40, 150, 700][case % 7]
    a = rng.lognormal(0.0, 0.6, n_items)
    if case % 3 == 0:
        a[rng.random(n_items) < 0.1] = np.nan
    if case % 4 == 1:
        a[rng.random(n_items) < 0.1] *= 3000.0
    if case % 5 == 2:
        a[rng.random(n_items) < 0.2] = 1e-3
    b = rng.normal(0.0, 1.5, n_items)
    if case % 6 == 4:
        b[: n_items // 2] = b[0]                 # twins: ties broken by the lowest item
        a[: n_items // 2] = a[0]
    theta = rng.normal(0.0, 2.0, n_models)
    theta[rng.random(n_models) < 0.1] = 7.5      # outside the cells: the numpy path
    avail = rng.random((n_models, n_items)) < [0.9, 0.3, 1.0][case % 3]
    kexp = rng.uniform(0.0, 1.0, n_items)
    kexp[rng.random(n_items) < 0.2] = 1.0
    kexp[rng.random(n_items) < 0.2] = [0.0, 0.02][case % 2]
    k = [1, 1, 3][case % 3]
    return a, b, theta, avail, kexp, k


def _ranked_choice(info, avail, u, v, k_exposure, k):
    """:func:`irtlib.selection.selectors.choose_items`' Sympson-Hetter choice, every item of every row ranked."""
    n_models, n_items = info.shape
    order = np.argsort(-np.where(avail, info, -np.inf), axis=1, kind="stable")
    ok = np.take_along_axis(avail, order, axis=1)
    accept = (u < k_exposure[order]) & ok
    rank = np.cumsum(accept, axis=1)
    if k > 1:
        pick = np.floor(v * np.maximum(np.minimum(rank[:, -1], k), 1)).astype(int) + 1
        first = np.argmax(accept & (rank == pick[:, None]), axis=1)
    else:
        first = np.argmax(accept, axis=1)
    rows = np.arange(n_models)
    found = accept[rows, first]
    tried = (np.arange(n_items)[None, :] < np.where(found, first, n_items)[:, None]) & ok & ~accept
    rejected = np.zeros((n_models, n_items), dtype=bool)
    rejected[rows[:, None], order] = tried
    return np.where(found, order[rows, first], -1), rejected


def _choices_match(lib: ctypes.CDLL, rng: np.random.Generator) -> bool:
    """:func:`choose_rows` equals every item ranked (:func:`_ranked_choice`) on the rows it decides, random banks."""
    from irtlib.core.kernels import fisher_information

    width, span, slack = 0.02, 6.0, 1e-9                  # SympsonHetterCandidates' cells and slack
    mid = -span + (np.arange(int(round(2 * span / width))) + 0.5) * width
    decided = 0
    for case in range(42):
        a, b, theta, avail, kexp, k = _random_bank(rng, case)
        n_models, n_items = avail.shape
        with np.errstate(invalid="ignore", over="ignore"):
            bound = np.minimum(fisher_information(mid[:, None], a, b) * np.exp(np.abs(a) * width / 2), a * a / 4)
            cell = np.floor((theta + span) / width)
        tables = lazy_tables(bound * (1.0 + slack), a, width)
        rows = np.flatnonzero(np.isfinite(cell) & (cell >= 0) & (cell < mid.size))
        gen = np.random.Generator(np.random.PCG64(int(rng.integers(0, 2**63))))
        start = gen.bit_generator.state
        u = gen.random((n_models, n_items))
        v = gen.random(n_models) if k > 1 else None
        with np.errstate(invalid="ignore"):
            want_item, want_rejected = _ranked_choice(fisher_information(theta[:, None], a, b), avail, u, v, kexp, k)
        item, enough, set_rows, set_items = choose_rows(
            lib, tables, rows=rows, theta=theta[rows], cell=cell[rows].astype(np.intp), a=a, b=b, avail=avail,
            k_exposure=kexp, k=k, v=None if v is None else v[rows], start=start)
        got = np.zeros_like(want_rejected)
        got[set_rows, set_items] = True
        done = rows[enough]
        left = np.setdiff1d(np.arange(n_models), done)        # rows the kernel leaves to the caller: nothing set
        if not (np.array_equal(item[enough], want_item[done]) and np.array_equal(got[done], want_rejected[done])
                and set_rows.size == want_rejected[done].sum() and not got[left].any()):
            return False
        decided += done.size
    return decided > 0


def _matches_numpy(lib: ctypes.CDLL) -> bool:
    """The kernel's draws and choices equal numpy's."""
    rng = np.random.default_rng(20261205)
    return _draws_match(lib, rng) and _choices_match(lib, rng)


def load() -> ctypes.CDLL | None:
    """The compiled kernel or None (no compiler, ``IRTLIB_SYMPSON_HETTER_KERNEL=0``, unlike numpy); once a process."""
    from irtlib.calibration.fused_kernel import verified

    return verified(SOURCE, _bind, switch="IRTLIB_SYMPSON_HETTER_KERNEL", cache=_LOADED, matches=_matches_numpy)
