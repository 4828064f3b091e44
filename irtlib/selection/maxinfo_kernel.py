"""Maximum information's cached candidates, ranked four at a time: the same choice, fewer library calls.

:class:`irtlib.selection.selectors.MaxInformation` evaluates every model's cached candidates (its
most informative unused items) at every step of an adaptive test (paper, section "Adaptive
selection (Algorithm 1)": the item of largest ``a^2 P (1 - P)``).
:func:`irtlib.selection.score_kernel.best_candidates` first ranks them with one call of the C
library's ``exp`` each, then evaluates exactly the few near the largest. :func:`best_candidates`
here ranks them with an exponential of its own, four candidates per AVX2 instruction (a
polynomial accurate to a relative 1e-12, far inside the 1e-9 margin it leaves), then evaluates
exactly, with the C library's ``exp`` and :func:`irtlib.core.kernels.fisher_information`'s
operations, every candidate within that margin of the largest: the argmax and its value are
numpy's, bit for bit (``_maxinfo_kernel.c`` beside this module says why).

:class:`FullPass` does the rest of the selector's work in the same library: the full pass over the bank
(``maxinfo_full``: the first-pass values of every unused item, the exact argmax among those within 1e-9 of
the largest, the ``cache`` largest as the new candidates, and upper bounds on every other item's information
within each radius, computed in logs with a margin far above their rounding, which only decide when the next
full pass comes) and each step (``maxinfo_step``: the best candidate, its bound, the marks of the pick), so a
step of the adaptive test is one or two calls instead of some thirty numpy operations. :meth:`FullPass.step` finds
the best candidate by ``maxinfo_step_sorted``: the candidates ranked once per full pass, and at each step only the
few whose bound at the new ability reaches the best value so far evaluated exactly (the same pick and value).

Compiled like :mod:`irtlib.selection.score_kernel` (the same compiler driver and flags). The first
:func:`load` of a process compares the kernel with :func:`numpy_best` on random candidates (twins,
used ones, NaN and infinite parameters, abilities far from every item, row lengths 1 to 13 and
long ones), and :class:`FullPass`'s picks with numpy's argmax on random banks, and returns it only if
every pick and value is equal; otherwise, or without a
compiler, or on a processor without AVX2 (the vectors four lanes wide, without which this pass is
slower than the scalar one), or with ``IRTLIB_MAXINFO_KERNEL=0``, the selector keeps
:func:`~irtlib.selection.score_kernel.best_candidates` (no warning: the choices are the same).

Layer rule: part of ``selection``; imports ``calibration`` (the compiler driver) and ``core``.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np

from irtlib.core.c_arrays import address as _address
from irtlib.core.kernels import fisher_information

__all__ = ["SOURCE", "AVX512_FLAGS", "MAX_RADII", "load", "best_candidates", "numpy_best", "random_case", "FullPass",
           "ranked_steps_match"]

SOURCE = Path(__file__).with_name("_maxinfo_kernel.c")
#: Added where the processor has AVX-512F and DQ (``IRTLIB_MAXINFO_KERNEL_AVX512=0``: not): the first passes
#: eight candidates a vector instead of four (their rounding differs from the AVX2 build's only within the
#: margins the exact evaluation leaves, so the picks are the same; the load check confirms them).
AVX512_FLAGS = ("-mavx512f", "-mavx512dq")

_LOADED: dict = {}

#: The most radii :class:`FullPass` takes (the kernel's stack array).
MAX_RADII = 64


def _bind(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.best_candidates4.argtypes = [i64, i64, ptr, ptr, ptr, ptr, ptr, ptr, ptr]
    lib.best_candidates4.restype = None
    lib.maxinfo_full.argtypes = [i64, i64, i64, i64, *[ptr] * 5, i64, ptr, i64, *[ptr] * 18]
    lib.maxinfo_step.argtypes = [i64, i64, i64, i64, *[ptr] * 16]
    lib.maxinfo_step.restype = i64
    lib.maxinfo_step_sorted.argtypes = [i64, i64, i64, i64, *[ptr] * 22]
    lib.maxinfo_step_sorted.restype = i64
    lib.maxinfo_rank_meta.argtypes = []
    lib.maxinfo_rank_meta.restype = i64
    lib.maxinfo_full.restype = None
    lib.maxinfo_full_mapped.argtypes = [i64, i64, i64, i64, *[ptr] * 5, i64, ptr, i64, *[ptr] * 19]
    lib.maxinfo_full_mapped.restype = None
    lib.maxinfo_vector_width.argtypes = []
    lib.maxinfo_vector_width.restype = i64
    return lib


def best_candidates(lib: ctypes.CDLL, theta: np.ndarray, ca: np.ndarray, cb: np.ndarray,
                    used: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's most informative unused candidate and its exact information (:func:`numpy_best`).

    Parameters
    ----------
    lib : the loaded kernel (:func:`load`)
    theta : ndarray, shape (n,)
    ca, cb : ndarray, shape (n, c), C-contiguous float64
    used : ndarray of bool, shape (n, c), C-contiguous

    Returns
    -------
    k : ndarray of int, shape (n,)
        numpy's argmax of the exact information with used candidates at ``-inf`` (0 when all are used).
    best : ndarray, shape (n,)
        Its value (``-inf`` where every candidate is used).
    """
    n, c = ca.shape
    if cb.shape != (n, c) or used.shape != (n, c):
        raise ValueError(f"ca, cb and used must have one shape, got {ca.shape}, {cb.shape} and {used.shape}")
    if not (ca.flags.c_contiguous and cb.flags.c_contiguous and used.flags.c_contiguous):
        raise ValueError("ca, cb and used must be C-contiguous")
    if ca.dtype != np.float64 or cb.dtype != np.float64 or used.dtype != np.bool_:
        raise ValueError("ca and cb must be float64 and used bool")
    theta = np.ascontiguousarray(theta, dtype=np.float64)
    if theta.shape != (n,):
        raise ValueError(f"theta must have shape ({n},), got {theta.shape}")
    k, best = np.empty(n, dtype=np.int64), np.empty(n)
    work = np.empty(max(c, 1))
    lib.best_candidates4(n, c, theta.ctypes.data, ca.ctypes.data, cb.ctypes.data, used.ctypes.data, k.ctypes.data,
                         best.ctypes.data, work.ctypes.data)
    return k, best


def _log_a2(a: np.ndarray) -> np.ndarray:
    """``2 log |a|`` of every item; per-model banks: once per run of equal rows (a split's test models share one).

    Element by element numpy's ``2.0 * np.log(np.abs(a))``, the rows equal to the previous one bit for bit
    copied instead of computed again.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        if a.ndim != 2 or a.shape[0] < 2:
            return 2.0 * np.log(np.abs(a))
        bits = a.view(np.int64)
        new = np.ones(a.shape[0], dtype=bool)
        new[1:] = (bits[1:] != bits[:-1]).any(axis=1)
        if new.all():
            return 2.0 * np.log(np.abs(a))
        return (2.0 * np.log(np.abs(a[new])))[np.cumsum(new) - 1]


class FullPass:
    """Maximum information's full pass over the bank in one C call per step (``maxinfo_full``).

    For each of some models: numpy's argmax of :func:`~irtlib.core.kernels.fisher_information` over
    its unused items (the pick, bit for bit), and, with ``cache > 0``, its new candidates (the
    ``cache`` items of largest information, ties lowest column first), their parameters and twin
    labels, and upper bounds, for each radius ``r``, on the information any other unused item can give
    within ``r`` of the ability (twins left out and their candidates guarded as
    :class:`~irtlib.selection.selectors.MaxInformation` describes), written in place into the
    selector's state arrays. ``_maxinfo_kernel.c`` gives the argument for each.

    Parameters
    ----------
    lib : the loaded kernel (:func:`load`)
    a, b : ndarray, shape (n_items,) or (n_models, n_items)
        The bank, shared or per model.
    unused : ndarray of bool, shape (n_models, n_items)
        The selector's state, read at every call (C-contiguous, kept by reference).
    radii : ndarray, shape (n_radii,)
    cache : int
    twin : ndarray of int32 or None
        Twin labels (``a``'s shape), in ``[0, n_items)``.
    twinned : ndarray of bool, shape (n_models,), or None
        The models whose bounds leave twins out.
    state : dict
        ``left`` (int64, the items each model has left) and, when ``cache > 0``, ``items, ca, cb, used,
        ctwin, guard, theta_c, bound``: the selector's arrays (C-contiguous, a row per model, ``bound``
        with ``n_radii + 1`` columns, ``ctwin`` only with ``twin``), updated in place.
    """

    def __init__(self, lib, a, b, unused, radii, *, state, cache=0, twin=None, twinned=None):
        self.lib = lib
        self.a = np.ascontiguousarray(a, dtype=np.float64)
        self.b = np.ascontiguousarray(b, dtype=np.float64)
        self.loga2 = _log_a2(self.a)                            # the bounds' logarithms
        self.unused = unused
        n_items = unused.shape[1]
        self.ld = n_items if self.a.ndim == 2 else 0
        self.radii = np.ascontiguousarray(radii, dtype=np.float64)
        if self.radii.size > MAX_RADII:
            raise ValueError(f"at most {MAX_RADII} radii, got {self.radii.size}")
        if not (unused.flags.c_contiguous and unused.dtype == np.bool_):
            raise ValueError("unused must be a C-contiguous bool array")
        self.cache = int(cache)
        self.twin = None if twin is None else np.ascontiguousarray(twin, dtype=np.int32)
        self.ldt = n_items if self.twin is not None and self.twin.ndim == 2 else 0
        self.twinned = None if twinned is None else np.ascontiguousarray(twinned, dtype=np.bool_)
        self.state = state
        shapes = {"left": np.int64}
        if self.cache:
            shapes |= {"items": np.int64, "ca": np.float64, "cb": np.float64, "used": np.bool_, "guard": np.bool_,
                       "theta_c": np.float64, "bound": np.float64}
            if self.twin is not None:
                shapes["ctwin"] = np.int32
        for key, dtype in shapes.items():
            arr = state[key]
            if arr.dtype != dtype or not arr.flags.c_contiguous or arr.shape[0] != unused.shape[0]:
                raise ValueError(f"state[{key!r}] must be C-contiguous {np.dtype(dtype)}, a row per model")
        self.work = np.empty(max(2 * n_items, 3 * self.cache, 1))
        self.work2 = np.empty(max(n_items, 1))
        self.lastc = np.full(2 * max(n_items, 1), -1, dtype=np.int64)    # labels' last candidates, then columns
        self.has = np.zeros(max(n_items, 1), dtype=np.bool_)
        # the step's ranking of each model's candidates (maxinfo_step_sorted, see step): values and slopes at the
        # centre by rank, the slots by rank, each slope group's bounds, the largest |a|, and whether ranked (0: not
        # yet; every full pass zeroes its rows, as must any other code that rebuilds a row's candidates)
        self.ranked = hasattr(lib, "maxinfo_step_sorted") and os.environ.get("IRTLIB_MAXINFO_RANKED", "1") != "0"
        n_models, width = unused.shape[0], max(self.cache, 1)
        self.cw, self.cs = np.zeros((n_models, width)), np.zeros((n_models, width))
        self.cm = np.zeros((n_models, lib.maxinfo_rank_meta() if self.ranked else 1))
        self.corder = np.zeros((n_models, width), dtype=np.int64)
        self.camax, self.cready = np.zeros(n_models), np.zeros(n_models, dtype=np.uint8)
        # every array the kernel reads or writes is kept and fixed: their addresses once (None: NULL)
        self._ptr = {k: None if v is None else v.ctypes.data for k, v in {
            "a": self.a, "b": self.b, "loga2": self.loga2, "twin": self.twin, "twinned": self.twinned,
            "unused": unused, "radii": self.radii, "work": self.work, "work2": self.work2, "lastc": self.lastc,
            "has": self.has, "cw": self.cw, "cs": self.cs, "cm": self.cm, "corder": self.corder, "camax": self.camax,
            "cready": self.cready}.items()}
        for key in ("items", "ca", "cb", "used", "ctwin", "guard", "theta_c", "bound", "left"):
            self._ptr[key] = state[key].ctypes.data if key in state else None
        # per-model banks whose consecutive rows are equal (a split's test models share its calibration): the full
        # pass reads one copy of each (maxinfo_full_mapped; the per-model arrays above stay for other readers)
        self.bankrow = None
        if self.a.ndim == 2 and self.a.shape[0] > 1 and hasattr(lib, "maxinfo_full_mapped"):
            new = np.zeros(self.a.shape[0], dtype=bool)
            new[0] = True
            for arr in (self.a, self.b, *((self.twin,) if self.twin is not None and self.twin.ndim == 2 else ())):
                bits = arr.view(np.int64) if arr.dtype == np.float64 else arr
                new[1:] |= (bits[1:] != bits[:-1]).any(axis=1)
            if not new.all():
                keep = np.flatnonzero(new)
                self.bankrow = np.cumsum(new, dtype=np.int64) - 1
                self._bank = {"a": self.a[keep], "b": self.b[keep], "loga2": self.loga2[keep],
                              "twin": self.twin[keep] if self.ldt else self.twin}
                self._bank_ptr = {k: None if v is None else v.ctypes.data for k, v in self._bank.items()}
                self._bank_ptr["bankrow"] = self.bankrow.ctypes.data     # (bankrow is never replaced)

    def __call__(self, rows: np.ndarray, theta: np.ndarray, *, mark: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The picks of models ``rows`` at abilities ``theta`` (one per row), and which rows the kernel left.

        Returns ``(pick, wild)``: ``wild[i]`` marks a row with a value that is not a number, an ``|a|``
        above 1e100, a ``|z|`` beyond 700 or a largest information outside (1e-280, inf); nothing was
        written for it and its ``pick`` is meaningless (the caller decides it in numpy). With ``mark``
        every other row's pick is marked as given: not ``unused``, ``state["left"]`` one less, its
        candidate slot ``used`` (and the row's bounds voided where that was a guarded label's last).
        """
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        n = rows.size
        pick, wild = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.bool_)
        p = self._ptr
        q = p if self.bankrow is None else self._bank_ptr
        args = (n, self.unused.shape[1], self.cache, self.radii.size, _address(rows), _address(theta), q["a"], q["b"],
                q["loga2"], self.ld, q["twin"], self.ldt, p["twinned"], p["unused"], p["radii"], _address(pick),
                _address(wild), p["items"], p["ca"], p["cb"], p["used"], p["ctwin"], p["guard"], p["theta_c"],
                p["bound"], p["work"], p["work2"], p["lastc"], p["has"], p["left"] if mark else None)
        if self.bankrow is None:
            self.lib.maxinfo_full(*args)
        else:
            self.lib.maxinfo_full_mapped(*args, q["bankrow"])
        self.cready[rows] = 0                   # new candidates: ranked again at their first step
        return pick, wild

    def step(self, theta: np.ndarray, live: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One step's cached picks (``cache > 0``): ``(out, pending)``.

        For each ``live`` model, its best unused candidate (as :func:`best_candidates`) where its exact
        information is above the bound of the radius reaching ``theta`` from the candidates' centre
        (``numpy.searchsorted(radii, |theta - theta_c|)``): that item in ``out``, marked as given as
        :meth:`__call__` marks; the other live models in ``pending`` (they need a full pass); -1 elsewhere.

        The best candidate is found by ``maxinfo_step_sorted``: the candidates ranked once after each full pass
        (their first-pass values at the centre, in groups by the slope of their log-information there), and at
        each step only those whose upper bound at ``theta`` (the tangent of the concave log-information) reaches
        the best exact value so far are evaluated exactly; the same pick and value as ``maxinfo_step``'s
        evaluation of every candidate (``_maxinfo_kernel.c`` gives the argument; :func:`ranked_steps_match`, part
        of the loader's check, compares the two). ``IRTLIB_MAXINFO_RANKED=0``: ``maxinfo_step``.
        """
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        live = np.ascontiguousarray(live, dtype=np.bool_)
        n = live.size
        if theta.shape != (n,) or n != self.unused.shape[0]:
            raise ValueError(f"theta and live must have one value per model ({self.unused.shape[0]})")
        out, pending = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        p = self._ptr
        args = (n, self.unused.shape[1], self.cache, self.radii.size, _address(theta), _address(live), p["radii"],
                p["items"], p["ca"], p["cb"], p["used"], p["ctwin"], p["guard"], p["theta_c"], p["bound"], p["unused"],
                p["left"], _address(out), _address(pending), p["work"])
        if self.ranked:
            n_pending = self.lib.maxinfo_step_sorted(*args, p["cw"], p["cs"], p["cm"], p["corder"], p["camax"],
                                                     p["cready"])
        else:
            n_pending = self.lib.maxinfo_step(*args)
        return out, pending[:n_pending]


def numpy_best(theta: np.ndarray, ca: np.ndarray, cb: np.ndarray, used: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What :func:`best_candidates` returns, in numpy: the argmax of the exact information, used at ``-inf``."""
    with np.errstate(invalid="ignore", over="ignore"):
        info = np.where(used, -np.inf, fisher_information(np.asarray(theta, dtype=float)[:, None], ca, cb))
    k = np.argmax(info, axis=1)
    return k, info[np.arange(k.size), k]


def random_case(rng: np.random.Generator, n: int, c: int, *, spread: float = 1.0,
                wild: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Random candidates ``theta, ca, cb, used`` like a selector's (the loader's and the tests' input).

    Discriminations log-normal, difficulties Normal with sd ``1.5 spread``, abilities in [-4, 4];
    every 17th candidate a twin of its left neighbour (equal ``a`` and ``b``), 30% used, the first
    row all used. ``wild``: a few NaN and infinite parameters, a row with an infinite ability and
    one with candidates far beyond ``exp``'s range.
    """
    ca = np.exp(rng.normal(0.0, 0.6, (n, c)))
    cb = rng.normal(0.0, 1.5 * spread, (n, c))
    twin = np.arange(1, c, 17)
    ca[:, twin], cb[:, twin] = ca[:, twin - 1], cb[:, twin - 1]
    used = rng.random((n, c)) < 0.3
    used[0] = True
    theta = rng.uniform(-4.0, 4.0, n)
    if wild and n >= 4:
        ca[rng.random((n, c)) < 0.003] = np.nan
        cb[rng.random((n, c)) < 0.003] = np.inf
        theta[1] = np.inf
        cb[2, ::2] = 900.0
    return theta, ca, cb, used


def _matches_numpy(lib: ctypes.CDLL) -> bool:
    """Whether :func:`best_candidates` equals :func:`numpy_best` on :func:`random_case` inputs."""
    rng = np.random.default_rng(20261203)
    cases = [(64, 256, 1.0, True), (16, 37, 0.01, False), (32, 300, 30.0, True), (40, 256, 0.0, False)]
    cases += [(8, c, 1.0, False) for c in range(1, 14)]
    for n, c, spread, wild in cases:
        theta, ca, cb, used = random_case(rng, n, c, spread=spread, wild=wild)
        k, best = best_candidates(lib, theta, ca, cb, used)
        k0, best0 = numpy_best(theta, ca, cb, used)
        if not (np.array_equal(k, k0) and np.array_equal(best, best0, equal_nan=True)):
            return False
    return True


def load() -> ctypes.CDLL | None:
    """The compiled kernel, or None (no compiler, ``IRTLIB_MAXINFO_KERNEL=0``, or choices unlike numpy's).

    Decided once per process. Where the processor has AVX-512F and DQ, a build with :data:`AVX512_FLAGS` is
    tried first and kept if it passes the same check; otherwise the AVX2 build.
    """
    from irtlib.calibration.fused_kernel import cpu_flags, verified

    if ("lib" not in _LOADED and {"avx512f", "avx512dq"} <= cpu_flags()
            and os.environ.get("IRTLIB_MAXINFO_KERNEL_AVX512", "1") != "0"):
        wide = verified(SOURCE, _bind, switch="IRTLIB_MAXINFO_KERNEL", matches=_matches_vector, cache={},
                        extra_flags=AVX512_FLAGS)
        if wide is not None:
            _LOADED["lib"] = wide
    return verified(SOURCE, _bind, switch="IRTLIB_MAXINFO_KERNEL", matches=_matches_vector, cache=_LOADED)


def _full_matches_numpy(lib: ctypes.CDLL) -> bool:
    """Whether :class:`FullPass`'s picks are numpy's argmax of the exact information on :func:`random_case` banks.

    Shared and per-model banks, every 17th item a twin, 30% used, row lengths 1 to 9 and 300, with and
    without candidates; rows the kernel leaves to numpy (``wild``) are not compared.
    """
    rng = np.random.default_rng(20261204)
    for n_items in (*range(1, 10), 300):
        theta, a, b, used = random_case(rng, 16, n_items, wild=False)
        unused = ~used
        unused[0, 0] = True
        for shared in (True, False):
            aa, bb = (a[1], b[1]) if shared else (a, b)
            cache = 4 if n_items > 4 else 0
            state = {"left": np.zeros(16, dtype=np.int64)}
            if cache:
                state |= {"items": np.zeros((16, cache), dtype=np.intp), "ca": np.zeros((16, cache)),
                         "cb": np.zeros((16, cache)), "used": np.zeros((16, cache), dtype=bool),
                         "guard": np.zeros((16, cache), dtype=bool), "theta_c": np.zeros(16),
                         "bound": np.full((16, 3), np.inf)}
            full = FullPass(lib, aa, bb, unused, np.array([0.01, 0.1]), cache=cache, state=state)
            rows = np.flatnonzero(unused.any(axis=1))
            pick, wild = full(rows, theta[rows])
            with np.errstate(over="ignore", invalid="ignore"):
                info = fisher_information(theta[rows, None], aa if shared else aa[rows], bb if shared else bb[rows])
            want = np.argmax(np.where(unused[rows], info, -np.inf), axis=1)
            if not np.array_equal(pick[~wild], want[~wild]):
                return False
    return True


def ranked_steps_match(lib: ctypes.CDLL, *, seed: int = 20261205, n_steps: int = 120) -> bool:
    """Whether :meth:`FullPass.step`'s ranked scan (``maxinfo_step_sorted``) gives ``maxinfo_step``'s picks and state.

    Two copies of one selector state on :func:`random_case` banks (shared and per model, every 17th item a twin,
    a group of exact copies, near ties one ulp apart, caches of 5, 64 and 256), stepped side by side along
    abilities that move by steps of every size (most small, some beyond every radius), the rows each leaves
    pending given a full pass (``maxinfo_full``, marking the pick) in both: after every step the picks, the
    pending rows and every state array must be equal. The loader's check; the tests call it with more seeds.
    """
    rng = np.random.default_rng(seed)
    radii = np.array([0.001, 0.003, 0.01, 0.03, 0.1, 0.3])
    for n_models, n_items, cache, shared in [(12, 600, 64, False), (8, 300, 5, True), (6, 1200, 256, False)]:
        _, a, b, _ = random_case(rng, n_models, n_items, wild=False)
        a[:, 40:80], b[:, 40:80] = a[:, 40:41], b[:, 40:41]                 # a group of copies
        b[:, 100:160:2] = np.nextafter(b[:, 101:161:2], np.inf)              # near ties
        if shared:
            a, b = a[0], b[0]
        pair = []
        for _ in range(2):
            unused = rng.random((n_models, n_items)) > 0.1 if not pair else pair[0][0].unused.copy()
            state = {"left": unused.sum(axis=1).astype(np.int64), "items": np.zeros((n_models, cache), dtype=np.int64),
                     "ca": np.zeros((n_models, cache)), "cb": np.zeros((n_models, cache)),
                     "used": np.ones((n_models, cache), dtype=bool), "guard": np.zeros((n_models, cache), dtype=bool),
                     "theta_c": np.full(n_models, np.inf), "bound": np.full((n_models, radii.size + 1), np.inf)}
            pair.append((FullPass(lib, a, b, unused, radii, cache=cache, state=state), state))
        scale = np.exp(rng.normal(-6.0, 2.0, (n_steps, n_models)))
        thetas = np.clip(np.cumsum(rng.normal(size=(n_steps, n_models)) * scale, axis=0)
                         + rng.normal(0.0, 1.5, n_models), -8.0, 8.0)
        for theta in thetas:
            results = []
            for which, (full, state) in enumerate(pair):
                live = state["left"] > 0
                if which == 0:
                    out, pend = np.empty(n_models, dtype=np.int64), np.empty(n_models, dtype=np.int64)
                    p = full._ptr
                    k = lib.maxinfo_step(n_models, n_items, cache, radii.size, theta.ctypes.data,
                                         live.astype(np.bool_).ctypes.data, p["radii"], p["items"], p["ca"], p["cb"],
                                         p["used"], p["ctwin"], p["guard"], p["theta_c"], p["bound"], p["unused"],
                                         p["left"], out.ctypes.data, pend.ctypes.data, p["work"])
                    pend = pend[:k]
                else:
                    out, pend = full.step(theta, live)
                if pend.size:
                    pick, wild = full(pend, theta[pend], mark=True)
                    if wild.any():
                        return False                                         # (no wild rows in these banks)
                    out[pend] = pick
                results.append((out, pend))
            (out0, pend0), (out1, pend1) = results
            if not (np.array_equal(out0, out1) and np.array_equal(pend0, pend1)
                    and np.array_equal(pair[0][0].unused, pair[1][0].unused)
                    and all(np.array_equal(pair[0][1][key], pair[1][1][key]) for key in pair[0][1])):
                return False
    return True


def _matches_vector(lib: ctypes.CDLL) -> bool:
    """Compiled four or eight lanes wide (AVX2, AVX-512: narrower is slower than the scalar kernel), equal to numpy."""
    return (lib.maxinfo_vector_width() in (4, 8) and _matches_numpy(lib) and _full_matches_numpy(lib)
            and ranked_steps_match(lib))
