"""The MAP ability's Newton sums in C: the static subsets' MAP scores without numpy's twenty passes per iteration.

The protocol scores every MAP-scored static subset (Total Fisher, Marginal Fisher and its b-quartile
form) of every split and budget by :func:`irtlib.core.ability.map_ability` (paper, section "Evaluation":
"ability by MAP ... damped Newton-Raphson"). Each Newton iteration computes every cell's score and
information (:func:`irtlib.core.kernels.score_and_information`: two expits and about twenty numpy
passes over the rows' cells, with the gathers of the rows still moving) and sums them per model.
``_ability_kernel.c`` (beside this module) computes those sums in one pass per row, with the same
operations in the same order (the C library's ``exp``, which scipy's ``expit`` calls; no contraction
into fused multiply-adds) and numpy's pairwise summation of each row, so the sums, and so every
estimate, are numpy's bit for bit. :func:`row_sums` gives ``map_ability`` its ``row_sums`` argument.

The first :func:`load` of a process compares the kernel's sums with the numpy path's on random rows
(every length up to 140 and longer ones, missing cells, large ``|z|``, shared and per-model item
parameters, a chosen subset of rows) and returns it only if every number is equal; otherwise, or
without a compiler, or with ``IRTLIB_ABILITY_KERNEL=0``, callers keep numpy (no warning: the
numbers are the same, only slower).

Layer rule: part of ``selection``; imports ``core`` and ``calibration`` (the compiler driver).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path

import numpy as np

from irtlib.core.c_arrays import address as _address
from irtlib.core.kernels import score_and_information

__all__ = ["SOURCE", "load", "newton_library", "row_sums", "map_row_sums", "map_blocks", "newton_rows"]

SOURCE = Path(__file__).with_name("_ability_kernel.c")

_LOADED: dict = {}
_NEWTON_LOADED: dict = {}

#: What :func:`row_sums` returns for one ``map_ability`` call: ``sums(rows, theta)`` -> (score sums, information
#: sums) of ``rows`` (an index array, or None for every row) at abilities ``theta`` (one per row asked).
RowSums = Callable[[np.ndarray | None, np.ndarray], tuple[np.ndarray, np.ndarray]]


def _bind(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.ability_row_sums.argtypes = [i64, ptr, i64, ptr, ptr, ptr, ptr, i64, ptr, i64, ptr, ptr, ptr, ptr]
    lib.ability_row_sums.restype = None
    dbl = ctypes.c_double
    lib.ability_map_rows.argtypes = [i64, i64, ptr, ptr, ptr, ptr, i64, ptr, i64, ptr, ptr, dbl, dbl, i64, dbl, dbl,
                                     i64, dbl, dbl, ptr]
    lib.ability_map_rows.restype = None
    lib.ability_map_blocks.argtypes = [i64, ptr, ptr, ptr, dbl, dbl, i64, dbl, dbl, i64, dbl, dbl, dbl, ptr, ptr]
    lib.ability_map_blocks.restype = i64
    lib.ability_newton_rows.argtypes = [i64, i64, i64, *[ptr] * 9, dbl, dbl, dbl, i64, dbl, dbl, dbl, dbl]
    lib.ability_newton_rows.restype = None
    return lib


def _layout(arr: np.ndarray) -> tuple[np.ndarray, int]:
    """``arr`` (shape ``(n_items,)``, ``(1, n_items)`` or ``(n_rows, n_items)``) as C doubles, and its row stride."""
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    return arr, 0 if arr.ndim == 1 or arr.shape[0] == 1 else arr.shape[1]


def row_sums(lib: ctypes.CDLL) -> Callable[..., RowSums]:
    """``map_ability``'s ``row_sums``: given ``(x, observed, a, b)`` of one call, the kernel's sums of its rows.

    ``x`` holds 0 where ``observed`` is False (as ``map_ability`` prepares it); ``a`` and ``b`` are one row
    for every model or one per model. The sums equal ``_score_and_information``'s (before the prior's term)
    bit for bit.
    """

    def prepare(x: np.ndarray, observed: np.ndarray, a: np.ndarray, b: np.ndarray) -> RowSums:
        x = np.ascontiguousarray(x, dtype=np.float64)
        obs = np.ascontiguousarray(observed, dtype=np.bool_)
        n_rows, n_items = x.shape
        a, lda = _layout(a)
        b, ldb = _layout(b)
        g, h = np.empty(n_items), np.empty(n_items)
        ptr = ctypes.c_void_p
        # the call's fixed arrays (kept alive by this closure): their addresses read once
        px, pobs, pa, pb, pg, ph = (v.ctypes.data for v in (x, obs, a, b, g, h))

        def sums(rows: np.ndarray | None, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            theta = np.ascontiguousarray(theta, dtype=np.float64)
            idx = None if rows is None else np.ascontiguousarray(rows, dtype=np.int64)
            n = n_rows if idx is None else idx.size
            out_s, out_i = np.empty(n), np.empty(n)
            lib.ability_row_sums(n, None if idx is None else _address(idx), n_items, _address(theta), px, pobs, pa, lda,
                                 pb, ldb, pg, ph, _address(out_s), _address(out_i))
            return out_s, out_i

        def solve(theta: np.ndarray, *, prior_mean: float, prior_var: float, max_newton: int, max_step: float,
                  tol: float, max_bisection: int, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
            """``map_ability``'s Newton steps and bisection fallback for every row from ``theta`` (clipped starts).

            Returns the estimates and whether each row's Newton converged; each row's steps in C, the numpy
            loop's operations on the same sums (``_ability_kernel.c: ability_map_rows``).
            """
            est = np.array(theta, dtype=np.float64)
            converged = np.zeros(n_rows, dtype=np.bool_)
            lib.ability_map_rows(n_rows, n_items, ptr(est.ctypes.data), ptr(x.ctypes.data), ptr(obs.ctypes.data),
                                 ptr(a.ctypes.data), lda, ptr(b.ctypes.data), ldb, ptr(g.ctypes.data),
                                 ptr(h.ctypes.data), prior_mean, prior_var, max_newton, max_step, tol,
                                 max_bisection, lo, hi, ptr(converged.ctypes.data))
            return est, converged

        sums.solve = solve
        return sums

    return prepare


def map_blocks(lib: ctypes.CDLL, desc: np.ndarray, items: np.ndarray, theta: np.ndarray, *, prior_mean: float,
               prior_var: float, max_newton: int, max_step: float, tol: float, max_bisection: int, lo: float,
               hi: float, limit: float) -> int:
    """``map_ability``'s estimates of blocks of rows read through item lists, from the kernel's row steps.

    The static subsets' MAP scores (paper, section "Evaluation") read each split's test responses on each
    subset's items. Block ``i`` is row ``i`` of ``desc`` (int64, shape ``(n_blocks, 9)``): the address of its
    responses (C-ordered float64, NaN not observed), their rows and columns, the offset of its items in ``items``
    (int64) and their number, the addresses of the parameters of every column (float64, one array each for ``a``
    and ``b``: the block reads ``a[items]``, ``b[items]``), the offset of its rows' clipped starts in ``theta``
    (float64, overwritten by the estimates) and the length of ``a`` and ``b``. Each row's cells are gathered in C
    and solved as ``solve`` solves a row of ``map_ability(x[:, items], a[items], b[items], ...)``
    (``_ability_kernel.c: ability_map_blocks``): the same estimates bit for bit, without stacking the rows, the
    parameters per row and ``map_ability``'s passes over them. The caller keeps every array addressed alive.

    Returns
    -------
    int
        -1, or the index of the first block whose items, parameters or responses ``map_ability`` would refuse (an
        item outside the columns, a parameter not finite or beyond ``limit``, a response not 0, 1 or NaN); nothing
        is solved then (the caller lets ``map_ability`` state the error).
    """
    desc = np.ascontiguousarray(desc, dtype=np.int64)
    width = max(1, int(desc[:, 4].max(initial=0)))
    work, obuf = np.empty(5 * width), np.empty(width, dtype=np.uint8)
    ptr = ctypes.c_void_p
    return int(lib.ability_map_blocks(desc.shape[0], ptr(desc.ctypes.data), ptr(items.ctypes.data),
                                      ptr(theta.ctypes.data), prior_mean, prior_var, max_newton, max_step, tol,
                                      max_bisection, lo, hi, limit, ptr(work.ctypes.data), ptr(obuf.ctypes.data)))


def newton_rows(lib: ctypes.CDLL, X: np.ndarray, A: np.ndarray, B: np.ndarray, n_items: int, theta: np.ndarray,
                info: np.ndarray, *, prior_mean: float, prior_var: float, inv_var: float, max_newton: int,
                max_step: float, tol: float, lo: float, hi: float) -> np.ndarray:
    """The exact-pass Newton of :class:`irtlib.selection.estimators.MapEstimator` (``order=0``), every row in C.

    The estimator's Python loop (paper, section "Adaptive selection (Algorithm 1)": MAP on all responses so far)
    steps every model not yet converged from the kernel's row sums (:func:`row_sums`, every one of the first
    ``n_items`` cells counted); each row's steps read only its own row and estimate, so ``_ability_kernel.c:
    ability_newton_rows`` runs each row's steps to the end with the same operations: the same estimates,
    information and convergence flags, bit for bit, in one call instead of a dozen numpy and ctypes calls per
    iteration.

    Parameters
    ----------
    X, A, B : ndarray, shape (n_rows, capacity)
        The run's responses (0 where none), discriminations (0 where none) and difficulties, C-contiguous float64;
        the first ``n_items`` columns are read.
    n_items : int
        The items given so far (at least 1).
    theta : ndarray, shape (n_rows,)
        C-contiguous float64: the starts, overwritten by the last iterates.
    info : ndarray, shape (n_rows,)
        C-contiguous float64: overwritten by the information at the last estimate a step started from (left as it
        is where ``max_newton`` is 0).
    prior_mean, prior_var, inv_var, max_newton, max_step, tol, lo, hi
        The estimator's prior (its variance ``prior_sd ** 2`` and ``1 / prior_sd ** 2`` as the loop computes them)
        and Newton settings.

    Returns
    -------
    ndarray of bool, shape (n_rows,)
        Whether each row converged (the others go to ``map_ability``, as in the loop).
    """
    n_rows, ld = X.shape
    done = np.empty(n_rows, dtype=np.uint8)
    ones = np.ones(n_items, dtype=np.uint8)
    g, h = np.empty(n_items), np.empty(n_items)
    lib.ability_newton_rows(n_rows, n_items, ld, *(v.ctypes.data for v in (theta, info, done, X, A, B, ones, g, h)),
                            prior_mean, prior_var, inv_var, max_newton, max_step, tol, lo, hi)
    return done.view(np.bool_)


def _numpy_sums(x, observed, a, b, rows, theta):
    """The numpy path's sums: ``map_ability``'s (``_score_and_information``'s before the prior's term)."""
    xs, obs = (x, observed) if rows is None else (x[rows], observed[rows])
    aa = a if a.ndim == 1 or a.shape[0] == 1 or rows is None else a[rows]
    bb = b if b.ndim == 1 or b.shape[0] == 1 or rows is None else b[rows]
    score, info = score_and_information(xs, theta[:, None], aa, bb)
    return np.where(obs, score, 0.0).sum(axis=1), np.where(obs, info, 0.0).sum(axis=1)


def _matches_numpy(lib: ctypes.CDLL) -> bool:
    """The kernel's sums equal the numpy path's on random cases (every number, bit for bit)."""
    rng = np.random.default_rng(20261204)
    prepare = row_sums(lib)
    lengths = [*range(0, 141), 255, 256, 257, 1000, 3419, 9000]
    for n_items in lengths:
        n_rows = int(rng.integers(1, 6))
        x = (rng.random((n_rows, n_items)) < 0.6).astype(float)
        observed = rng.random((n_rows, n_items)) < (0.8 if n_items % 3 else 1.0)
        x[~observed] = 0.0
        per_model = n_items % 2 == 0
        shape = (n_rows, n_items) if per_model else (n_items,)
        a = rng.lognormal(0.0, 1.0, shape) * np.where(rng.random(shape) < 0.05, 50.0, 1.0)
        b = rng.normal(0.0, 2.0, shape)
        theta = rng.normal(0.0, 3.0, n_rows)
        theta[rng.random(n_rows) < 0.2] = 8.0
        sums = prepare(x, observed, a, b)
        for rows in (None, np.sort(rng.choice(n_rows, size=max(1, n_rows // 2), replace=False))):
            th = theta if rows is None else theta[rows]
            got, want = sums(rows, th), _numpy_sums(x, observed, a, b, rows, th)
            if not all(np.array_equal(g, w) and np.array_equal(np.signbit(g), np.signbit(w))
                       for g, w in zip(got, want, strict=True)):
                return False
    return _solves_like_numpy(prepare, rng) and _blocks_like_rows(lib, prepare, rng)


def _solves_like_numpy(prepare, rng) -> bool:
    """``map_ability`` with the kernel's row steps (``solve``) equals the numpy loop on the kernel's sums.

    Random rows with missing cells, shared and per-model items, starts beyond the bracket, and large
    discriminations with few Newton steps (rows that bisect); every estimate and flag compared bit for bit.
    """
    from irtlib.core.ability import map_ability

    def stepwise(x, observed, a, b):       # the same sums without ``solve``: map_ability's numpy loop
        sums = prepare(x, observed, a, b)
        return lambda rows, theta: sums(rows, theta)

    for case in range(40):
        n_rows, n_items = int(rng.integers(1, 9)), int(rng.integers(0, 300))
        x = np.where(rng.random((n_rows, n_items)) < 0.85, (rng.random((n_rows, n_items)) < 0.6) * 1.0, np.nan)
        shape = (n_rows, n_items) if case % 2 else (n_items,)
        a = rng.lognormal(0.0, 1.0, shape) * (30.0 if case % 5 == 0 else 1.0)
        b = rng.normal(0.0, 2.0, shape)
        kw = dict(theta0=rng.normal(0.0, 5.0, n_rows), prior_mean=float(rng.normal(0.0, 0.5)),
                  prior_sd=float(rng.uniform(0.5, 2.0)), max_newton=[100, 3, 0][case % 3],
                  max_step=[1.0, 5.0][case % 2])
        got, want = map_ability(x, a, b, row_sums=prepare, **kw), map_ability(x, a, b, row_sums=stepwise, **kw)
        for g, w in zip((got.theta, got.se, got.at_bound, got.used_bisection),
                        (want.theta, want.se, want.at_bound, want.used_bisection), strict=True):
            if not (np.array_equal(g, w) and np.array_equal(np.signbit(g), np.signbit(w))):
                return False
    return True


def _blocks_like_rows(lib: ctypes.CDLL, prepare, rng) -> bool:
    """:func:`map_blocks` equals ``map_ability`` with the kernel's row steps on the gathered blocks, bit for bit.

    Random blocks of several widths (unsorted items, missing cells, steep items, far starts).
    """
    from irtlib.core.ability import PARAMETER_LIMIT, THETA_BOUNDS, map_ability

    blocks, want = [], []
    for case in range(12):
        n_rows, n_cols = int(rng.integers(1, 7)), int(rng.integers(1, 200))
        x = np.where(rng.random((n_rows, n_cols)) < 0.9, (rng.random((n_rows, n_cols)) < 0.6) * 1.0, np.nan)
        a = rng.lognormal(0.0, 1.0, n_cols) * (30.0 if case % 4 == 0 else 1.0)
        b = rng.normal(0.0, 2.0, n_cols)
        items = rng.choice(n_cols, size=int(rng.integers(1, n_cols + 1)), replace=False).astype(np.int64)
        start = np.clip(rng.normal(0.0, 5.0, n_rows), *THETA_BOUNDS)
        blocks.append((x, items, a, b, start))
        want.append(map_ability(x[:, items], a[items], b[items], theta0=start, row_sums=prepare,
                                standard_errors=False).theta)
    desc = [(x.ctypes.data, x.shape[0], x.shape[1], 0, items.size, a.ctypes.data, b.ctypes.data, 0, a.size)
            for x, items, a, b, _ in blocks]
    offsets = np.cumsum([[0, 0]] + [[items.size, x.shape[0]] for x, items, *_ in blocks], axis=0)[:-1]
    desc = np.array(desc, dtype=np.int64)
    desc[:, 3], desc[:, 7] = offsets[:, 0], offsets[:, 1]
    items = np.concatenate([blk[1] for blk in blocks])
    theta = np.concatenate([blk[4] for blk in blocks])
    defaults = map_ability.__kwdefaults__
    bad = map_blocks(lib, desc, items, theta, prior_mean=0.0, prior_var=1.0, max_newton=defaults["max_newton"],
                     max_step=defaults["max_step"], tol=defaults["tol"], max_bisection=defaults["max_bisection"],
                     lo=THETA_BOUNDS[0], hi=THETA_BOUNDS[1], limit=PARAMETER_LIMIT)
    got = np.concatenate(want)
    return bad < 0 and np.array_equal(theta, got) and np.array_equal(np.signbit(theta), np.signbit(got))


def load() -> ctypes.CDLL | None:
    """The compiled kernel, or None (no compiler, ``IRTLIB_ABILITY_KERNEL=0``, or unlike numpy); once a process."""
    from irtlib.calibration.fused_kernel import verified

    return verified(SOURCE, _bind, switch="IRTLIB_ABILITY_KERNEL", cache=_LOADED, matches=_matches_numpy)


def newton_library(loop_matches: Callable[[ctypes.CDLL], bool]) -> ctypes.CDLL | None:
    """The kernel for :func:`newton_rows`, or None (no kernel, a switch ``=0``, or unlike the loop); once a process.

    The switches: ``IRTLIB_ABILITY_KERNEL`` (the whole kernel) and ``IRTLIB_EXACT_NEWTON_KERNEL`` (this use of it).

    ``loop_matches(lib)`` is the estimator's own check (:func:`irtlib.selection.estimators.exact_newton_matches`:
    :func:`newton_rows` and its Python loop side by side on random runs); the sums are checked against numpy first.
    """
    from irtlib.calibration.fused_kernel import verified

    if load() is None:
        return None
    return verified(SOURCE, _bind, switch="IRTLIB_EXACT_NEWTON_KERNEL", cache=_NEWTON_LOADED,
                    matches=lambda lib: _matches_numpy(lib) and loop_matches(lib))


def map_row_sums() -> Callable[..., RowSums] | None:
    """``map_ability``'s ``row_sums`` from the kernel where it loads, else None (numpy: the same numbers)."""
    lib = load()
    return None if lib is None else row_sums(lib)
