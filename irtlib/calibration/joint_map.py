"""Calibrating the 2PL model: py-irt as the paper ran it, and a fast joint-MAP engine.

Paper, section "Model: 2PL" (appendix B): py-irt, stochastic variational inference, 1,000
epochs, Adam learning rate 0.1, priors ``a ~ LogNormal(0, 1)``, ``b ~ Normal(0, 1)`` and
``theta ~ Normal(0, 1)``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from irtlib._typing import ArrayLike
from irtlib.core.c_arrays import addresses
from irtlib.core.kernels import probability, response_terms
from irtlib.core.responses import ResponseMatrix
from irtlib.errors import InputError, InputTypeError, MissingDependencyError

from . import arrow_kernel, cell_kernel
from .blas import single_threaded_blas
from .cells import DenseBlock, ThreadRunner, cell_arrays, make_runner, workspace
from .newton import arrow_cg

__all__ = ["Calibration", "fit_2pl", "fit_map", "fit_items", "fit_map_after_items", "ENGINES", "PYIRT_EXTRA",
           "load_pyirt_engine", "cell_kernel_in_use"]

#: Calibration engines of :func:`fit_2pl`: the paper's text ("pyirt"), the fast posterior mode ("map"),
#: and py-irt as the paper's released code runs it ("pyirt-authors").
ENGINES = ("pyirt", "map", "pyirt-authors")

#: What ``engine="pyirt-authors"`` fixes (the authors' released code):
#: py-irt's hierarchical priors, py-irt's default learning-rate decay, best epoch.
AUTHORS_PYIRT = {"priors": "hierarchical", "lr_decay": 0.9999, "best": True}


@dataclass(frozen=True)
class Calibration:
    """A fitted 2PL model.

    Attributes
    ----------
    a, b : Series, indexed by item
        Discrimination and difficulty.
    theta : Series, indexed by model
        Abilities of the calibration models.
    engine : str
        ``"pyirt"``, ``"map"`` or ``"pyirt-authors"``.
    settings : dict
        Everything that was run (priors, epochs, learning rate, seed, ...).
    seconds : float
        Wall time of the fit.
    diagnostics : dict
        Engine-specific facts (iterations, convergence, final log posterior).
    c : Series, indexed by item, or None
        Lower asymptote of a 3PL fit (:func:`irtlib.calibration.models.fit_irt`); None for the 2PL
        (and the 1PL), so ``P = c + (1 - c) sigmoid(a (theta - b))`` reduces to the paper's model.
    """

    a: pd.Series
    b: pd.Series
    theta: pd.Series
    engine: str
    settings: dict = field(default_factory=dict)
    seconds: float = float("nan")
    diagnostics: dict = field(default_factory=dict)
    c: pd.Series | None = None

    def probabilities(self) -> pd.DataFrame:
        """Model-implied probability of a safe response, models x items (with ``c`` if set)."""
        c = None if self.c is None else self.c.reindex(self.a.index).to_numpy()
        p = probability(self.theta.to_numpy()[:, None], self.a.to_numpy(), self.b.to_numpy(), c)
        return pd.DataFrame(p, index=self.theta.index, columns=self.a.index)


# ---------------------------------------------------------------------------- MAP engine
# The passes over the response matrix (irtlib.calibration.cells): module-level functions, so a Dask
# worker can run them. Each gets a block of rows and what the previous kept pass left for it.
def _cell_pass(block, state, theta, a, b, derive, dtype, keep_cells=True):
    """Log-likelihood of the block and, with ``derive``, its sums and per-cell weights for the next step.

    By the C kernel (:mod:`irtlib.calibration.cell_kernel`: one loop over the cells) where it is
    available, else by numpy (:func:`_numpy_cell_pass`, which says what is returned).
    """
    lib = cell_kernel.load(_numpy_cell_pass)
    if lib is None:
        return _numpy_cell_pass(block, state, theta, a, b, derive, dtype, keep_cells)
    return cell_kernel.block_pass(lib, block, theta, a, b, derive, dtype, keep_cells)


def cell_kernel_in_use() -> bool:
    """Whether the cell passes run in the C kernel (:mod:`irtlib.calibration.cell_kernel`), else in numpy.

    The two differ in the last bits, so a fit kept on disk records which one made it
    (:func:`irtlib.calibration.split_cache.map_code_fingerprint`).
    """
    return cell_kernel.load(_numpy_cell_pass) is not None


def _numpy_cell_pass(block, state, theta, a, b, derive, dtype, keep_cells=True):
    """:func:`_cell_pass` in numpy: a dozen vectorised passes over each tile of the block.

    Returns ``((log_lik, item_sums, model_sums), kept)``: ``item_sums`` (5, n_items) are the column
    sums of ``g``, ``g z``, ``w``, ``w z``, ``w z^2`` (``g = x - P``, ``w = P (1 - P)``); ``model_sums``
    (2, n_rows) the row sums of ``g a`` and ``w a^2``; ``kept`` the per-cell ``w``, ``w z`` and ``g`` in
    float32, from which the information between an ability and an item's ``log a`` is ``a w z`` (Fisher
    scoring) or ``a (w z - g)`` (Newton), and with its ``b`` ``-a^2 w``. The block is worked through
    tile by tile, in the calling thread's work arrays of ``dtype``; every sum is accumulated in float64.
    Without ``keep_cells`` the per-cell weights are not kept (``kept`` is None): the item refits of
    :func:`fit_items` need the sums only. With ``derive`` and ``keep_cells``, ``state`` (the weights the
    runner held, if any) is overwritten with the new ones (:meth:`irtlib.calibration.cells.ThreadRunner.run`).
    """
    log_lik = 0.0
    if derive:
        item_sums = np.zeros((5, block.n_items))
        model_sums = np.empty((2, block.rows.stop - block.rows.start))
        kept = cell_arrays(state, block.shape) if keep_cells else None
        a_cells, a2_cells = a.astype(dtype), (a * a).astype(dtype)
    for local, tile in block.tiles():
        work = workspace(tile.shape, 7, dtype)
        z = tile.z(theta, a, b, out=work[5])
        ll, g, w = response_terms(tile.flip, z, observed=tile.observed, out=work[:5])
        log_lik += ll
        if not derive:
            continue
        wz, tmp = work[0], work[6]                  # work[0] held y, no longer needed
        item_sums[0] += tile.col_sum(g)
        item_sums[1] += tile.col_sum(np.multiply(g, z, out=tmp))
        item_sums[2] += tile.col_sum(w)
        item_sums[3] += tile.col_sum(np.multiply(w, z, out=wz))
        model_sums[0, local] = tile.row_dot(g, a_cells)
        model_sums[1, local] = tile.row_dot(w, a2_cells)
        if keep_cells:
            cells = tile.cells(local)
            kept[0][cells], kept[1][cells], kept[2][cells] = w, wz, g
        item_sums[4] += tile.col_sum(np.multiply(wz, z, out=wz))
    if not derive:
        return (log_lik, None, None), state
    return (log_lik, item_sums, model_sums), kept


def _combine_pass(block, state, minus_g):
    """Overwrite the block's kept ``g`` with ``h = w z + minus_g g`` (float32): the ``log a`` cross weight of a step.

    ``minus_g`` (n_items,) is ``-weight`` for the items that take the observed (Newton) block, 0 for the
    others. The conjugate-gradient products of a step then read two float32 weights a cell (``w`` and
    ``h``) instead of three (``w``, ``w z``, ``g``): they are memory bound, so each costs two thirds. ``h`` is
    one float32 rounding of ``w z - weight g`` per cell (exactly ``w z`` where ``minus_g`` is 0). It takes
    ``g``'s memory (no more bytes a cell): the point no longer owns the runner's weights, so a second try at
    the same point (:data:`NEWTON_WEIGHTS`) makes its cell pass again (:meth:`_Point.ready`).
    """
    w, wz, g = state
    np.multiply(g, block.item_cells(minus_g), out=g)
    np.add(g, wz, out=g)
    return None, (w, wz, g)


def _cross_weights(state, combined):
    """The two per-cell cross weights of a step: ``w`` and ``h`` (:func:`_combine_pass`), or ``w z`` without it."""
    return state[0], state[2] if combined else state[1]


def _cross_t_pass(block, state, v, combined):
    """``sum_m c[m, j] v[m]`` for c = w, h over the block's models (v: (n_models,) or (n_models, q))."""
    u = v[block.rows]
    return tuple(block.col_dot(c, u) for c in _cross_weights(state, combined)), state


def _cross_pass(block, state, y_w, y_h, combined):
    """``sum_j w[m, j] y_w[j] + h[m, j] y_h[j]`` for the block's models."""
    w, h = _cross_weights(state, combined)
    return block.row_dot(w, y_w) + block.row_dot(h, y_h), state


def _block_sum(parts):
    """``sum(parts)`` of the blocks' arrays, in block order, added in place (the same bits, no temporaries)."""
    parts = iter(parts)
    total = np.array(next(parts))
    for part in parts:
        total += part
    return total


class _Point:
    """Parameters, the log posterior there and (with ``derive``) the sums a step needs.

    ``dtype`` is the precision of the per-cell arithmetic (sums are always float64): float32 while
    the steps are large, float64 for the last ones (:data:`FLOAT64_BELOW`).
    """

    def __init__(self, runner, theta, alpha, b, priors, dtype, *, derive=True, keep_cells=True):
        (mt, st), (ma, sa), (mb, sb) = priors
        self.theta, self.alpha, self.b, self.a = theta, alpha, b, np.exp(alpha)
        self.log_posterior = -0.5 * (((theta - mt) / st) ** 2).sum() - 0.5 * (((alpha - ma) / sa) ** 2).sum() \
            - 0.5 * (((b - mb) / sb) ** 2).sum()
        self.dtype, self.keep_cells = dtype, keep_cells
        self._derive(runner, derive, add_log_lik=True)

    def _derive(self, runner, derive, *, add_log_lik=False):
        keep = derive and self.keep_cells
        if _one_local_block(runner):  # the pass on the block itself: runner.run's result, without its bookkeeping
            part, state = _cell_pass(runner.blocks[0], runner.states[0], self.theta, self.a, self.b, derive,
                                     self.dtype, keep)
            if keep:
                runner.states[0] = state
            if add_log_lik:
                self.log_posterior += sum((part[0],))                # as the general path's sum over one block
            if derive:               # one block's sums are the totals (fresh arrays of the pass: no copy needed)
                self.item_sums, self.model_sums = part[1], part[2]
                runner.owner = self if keep else None
            return
        parts = runner.run(_cell_pass, self.theta, self.a, self.b, derive, self.dtype, keep, keep=keep)
        if add_log_lik:
            self.log_posterior += sum(p[0] for p in parts)          # in block order: the same sum on any machine
        if derive:
            self.item_sums = _block_sum(p[1] for p in parts)
            self.model_sums = np.concatenate([p[2] for p in parts], axis=1)
            runner.owner = self if keep else None

    def ready(self, runner) -> None:
        """Make the runner hold this point's per-cell weights (a pass if a later trial point replaced them)."""
        if getattr(runner, "owner", None) is not self:
            self._derive(runner, True)


def _item_blocks(pt, priors, *, newton: float):
    """Each item's gradient in ``(log a, b)`` and the inverse of its 2 x 2 information block.

    Returns ``((g_al, g_b), (d_aa, d_ab, d_bb), newton_item)``, arrays of shape (n_items,): the
    inverse's entries, and which items took the observed (Newton, with weight ``newton``) block.
    Items whose observed block is not positive definite (a flat or saddle-shaped likelihood, e.g.
    items no model discriminates) take their expected (Fisher-scoring) block instead, so one bad item
    does not cost the others Newton. Shared by the joint step (:func:`_direction`) and the item
    refits with abilities held fixed (:func:`fit_items`).
    """
    lib = arrow_kernel.load()            # the same numbers in one loop over the items (numpy_item_blocks')
    if lib is not None:
        return arrow_kernel.kernel_item_blocks(lib, pt.item_sums, pt.a, pt.alpha, pt.b, priors, newton=newton)
    return arrow_kernel.numpy_item_blocks(pt.item_sums, pt.a, pt.alpha, pt.b, priors, newton=newton)


def _direction(runner, pt: _Point, priors, *, newton: float, rtol: float):
    """One joint Fisher-scoring (or Newton) direction for (theta, log a, b), or None.

    The information matrix is block structured: diagonal in theta, 2 x 2 block-diagonal in
    the items, dense between the two. The item blocks are eliminated analytically and the
    remaining ``n_models x n_models`` Schur complement is solved by preconditioned conjugate
    gradients without forming it (:func:`irtlib.calibration.newton.arrow_cg`): each product is two
    passes over the per-cell weights, so a step costs a small multiple of the number of responses.
    With ``newton=True`` the observed information (the negative Hessian) replaces the expected
    one, for quadratic convergence near the mode, item by item where it is positive definite; None
    when the conjugate gradients meet a direction of non-positive curvature.
    """
    (mt, st), _, _ = priors
    a = pt.a
    g_t = pt.model_sums[0] - (pt.theta - mt) / st**2
    j_tt = pt.model_sums[1] + 1.0 / st**2
    (g_al, g_b), (d_aa, d_ab, d_bb), newton_item = _item_blocks(pt, priors, newton=newton)
    minus_g = np.where(newton_item, -newton, 0.0)   # the log a cross term is a (w z - newton g)
    combined = bool(minus_g.any())                   # else h = w z: read it as it is
    one_block = _one_local_block(runner)
    if combined:
        if one_block:                 # runner.run's call on its one block, without its bookkeeping
            runner.states[0] = _combine_pass(runner.blocks[0], runner.states[0], minus_g.astype(np.float32))[1]
        else:
            runner.run(_combine_pass, minus_g.astype(np.float32), keep=True)
        runner.owner = None                          # g is now h: another try at this point redoes its pass

    neg_a2 = -a * a                   # the b cross weight's factor (-a^2 w), formed once a step
    fused = None
    if one_block:                     # the passes below on the block itself: the same products, less Python
        block, (c_wt, c_ht) = runner.blocks[0], _cross_weights(runner.states[0], combined)

        def cross_t(v):
            u = v.astype(np.float32)[block.rows]
            return [a * block.col_dot(c_ht, u), neg_a2 * block.col_dot(c_wt, u)]

        def cross(ys):
            y_w, y_h = (neg_a2 * ys[1]).T.astype(np.float32), (a * ys[0]).T.astype(np.float32)
            return (block.row_dot(c_wt, y_w) + block.row_dot(c_ht, y_h)).astype(float)

        fused = _FusedArrow.make(block, c_wt, c_ht, a, neg_a2, (d_aa, d_ab, d_bb))
    else:
        def cross_t(v):               # C^T v: information between theta and (log a_j, b_j)
            parts = runner.run(_cross_t_pass, v.astype(np.float32), combined)
            c_w, c_h = (_block_sum(p[k] for p in parts) for k in range(2))
            return [a * c_h, neg_a2 * c_w]

        def cross(ys):                # C y
            args = ((neg_a2 * ys[1]).T, (a * ys[0]).T)
            return np.concatenate(runner.run(_cross_pass, *(y.astype(np.float32) for y in args),
                                             combined)).astype(float)

    coarse = _coarse(pt.theta)
    step = arrow_cg(j_tt, g_t, cross_t, cross, [g_al, g_b], [[d_aa, d_ab], [d_ab, d_bb]], coarse=coarse,
                    rtol=rtol, fused=fused)
    if step is None:
        return None
    d_t, (d_al, d_b), iterations = step
    return d_t, d_al, d_b, iterations


class _FusedArrow:
    """The one-block direction's item chains in C (:mod:`.arrow_kernel`): the same numbers as numpy's.

    :func:`irtlib.calibration.newton.arrow_cg`'s ``fused``: :meth:`product` is a conjugate-gradient product
    ``cross(binv(cross_t(v)))`` of a 1-D ``v``, :meth:`cross_binv` the right-hand side's ``cross(binv(g))``,
    :meth:`back` the items' step ``binv(g - cross_t(d))``. Each makes :func:`_direction`'s column and row
    products on the block (``np.matmul`` with ``out=``: the same BLAS calls) and, between them, one kernel
    call in place of numpy's vector operations (equal to them bit for bit, which the kernel's loader checks).
    """

    def __init__(self, lib, block, c_wt, c_ht, a, neg_a2, inverse):
        self.lib, self.rows, self.c_wt, self.c_ht = lib, block.rows, c_wt, c_ht
        self.a, self.neg_a2 = np.ascontiguousarray(a, dtype=np.float64), np.ascontiguousarray(neg_a2, dtype=np.float64)
        self.inverse = tuple(np.ascontiguousarray(d, dtype=np.float64) for d in inverse)
        n_rows, n_items = c_wt.shape
        # every product writes into the same arrays: their addresses are taken once
        self.c_h, self.c_w, self.y_w, self.y_h = (np.empty(n_items, np.float32) for _ in range(4))
        self.rows_w, self.rows_h = np.empty(n_rows, np.float32), np.empty(n_rows, np.float32)
        self._fixed = addresses(self.a, self.neg_a2, *self.inverse)
        self._binv = functools.partial(lib.arrow_binv_f32, n_items, *addresses(self.c_h, self.c_w),
                                       *self._fixed, *addresses(self.y_w, self.y_h))

    @classmethod
    def make(cls, block, c_wt, c_ht, a, neg_a2, inverse):
        """The chains for a dense block whose weights are contiguous float32, or None (then numpy's chains)."""
        if not isinstance(block, DenseBlock):
            return None
        if not (c_wt.dtype == c_ht.dtype == np.float32 and c_wt.flags.c_contiguous and c_ht.flags.c_contiguous):
            return None
        lib = arrow_kernel.load()
        return None if lib is None else cls(lib, block, c_wt, c_ht, a, neg_a2, inverse)

    def _columns(self, v):
        u = v.astype(np.float32)[self.rows]
        np.matmul(u, self.c_ht, out=self.c_h)        # block.col_dot(c_ht, u): u.T @ c_ht
        np.matmul(u, self.c_wt, out=self.c_w)

    def _cross(self, y_w, y_h):
        np.matmul(self.c_wt, y_w, out=self.rows_w)   # block.row_dot(c_wt, y_w): c_wt @ y_w
        np.matmul(self.c_ht, y_h, out=self.rows_h)
        return np.add(self.rows_w, self.rows_h, out=self.rows_w).astype(float)

    def product(self, v):
        """``cross(binv(cross_t(v)))``, shape (n_models,)."""
        self._columns(v)
        self._binv()
        return self._cross(self.y_w, self.y_h)

    def cross_binv(self, g_items):
        """``cross(binv(g_items))``: the item gradient's part of the right-hand side."""
        return self._cross(*arrow_kernel.kernel_rhs(self.lib, g_items, self.a, self.neg_a2, self.inverse,
                                                    fixed=self._fixed))

    def back(self, g_items, d):
        """``binv(g_items - cross_t(d))``: the items' step given the abilities' ``d``."""
        self._columns(d)
        return arrow_kernel.kernel_back(self.lib, g_items, self.c_h, self.c_w, self.a, self.neg_a2, self.inverse,
                                        fixed=self._fixed)


def _one_local_block(runner) -> bool:
    """Whether ``runner`` holds its matrix in one block in this process (most per-split fits: a few models)."""
    return isinstance(runner, ThreadRunner) and len(runner.blocks) == 1


def _coarse(theta: np.ndarray) -> np.ndarray:
    """The directions the conjugate-gradient preconditioner solves exactly: a shift and a stretch of the abilities."""
    return np.stack([np.ones_like(theta), theta], axis=1)


#: The steps tried in turn once full steps are accepted: the information is the observed one (Newton)
#: plus ``1 - weight`` times the difference to the expected one (Fisher scoring, weight 0), which makes it
#: positive definite where the observed one is not (a flat valley of the posterior, as on responses
#: without any structure), with as much of Newton's curvature as that allows.
NEWTON_WEIGHTS = (1.0, 0.5, 0.0)

#: Relative residual at which a step's conjugate-gradient solve stops: loose for scoring steps (far from
#: the mode), tighter for Newton steps (whose accuracy sets how fast the last iterations converge).
CG_RTOL = {"scoring": 1e-2, "newton": 1e-4}


def _quadratic_stop(sizes: list[float], tol: float, *, rtol: float = CG_RTOL["newton"]) -> bool:
    """Whether the next Newton step is predicted below ``tol``, so computing it would only confirm the mode.

    ``sizes`` are the accepted full Newton steps in float64 since the last other step, in order. Near the
    mode each is about ``K`` times the square of the one before (quadratic convergence) plus the
    conjugate-gradient inexactness of the step before (``CG_RTOL["newton"]`` times it: observed about half
    of that on 2PL data and on coin flips). ``K`` is estimated from the last two steps and the next one
    predicted as ``max(K s**2, 10 CG_RTOL["newton"] s)``. The fit then ends at the very point at which it
    stopped before this rule (there, the next direction was computed, found below ``tol`` and not taken),
    without that direction's conjugate gradients (about 30 products with the matrix on coin flips).
    """
    if len(sizes) < 2 or not 0 < sizes[-1] < sizes[-2]:
        return False
    s0, s1 = sizes[-2], sizes[-1]
    return max((s1 / s0**2) * s1**2, 10 * rtol * s1) < tol


def fit_map(values: ArrayLike, *, prior_theta: tuple[float, float] = (0.0, 1.0),
            prior_log_a: tuple[float, float] = (0.0, 1.0), prior_b: tuple[float, float] = (0.0, 1.0),
            max_iter: int = 200, tol: float = 1e-6, max_step: float = 2.0, start: dict | None = None,
            n_threads: int | None = None, client: Any = None, progress: Callable[[int, float], None] | None = None,
            forcing: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """Joint posterior mode of the 2PL with the paper's priors (the fast engine).

    Parameters
    ----------
    values : ndarray, shape (n_models, n_items)
        1 safe, 0 unsafe, NaN missing (missing cells simply drop out of the likelihood; when most
        cells are missing they are not stored at all, so they cost nothing).
    prior_theta, prior_log_a, prior_b : (float, float)
        Mean and SD of the Normal priors on theta, ``log a`` and b. ``log a ~ Normal(0, 1)`` is
        the paper's ``a ~ LogNormal(0, 1)``; the mode is taken in ``log a``, the scale on which
        py-irt's variational guide is Normal, so ``exp`` of it is comparable with py-irt's
        reported ``a`` (the guide's median).
    max_iter, tol : int, float
        Iterations stop when the largest parameter change is below ``tol``, or when the next full Newton
        step is predicted below it from the last two (:func:`_quadratic_stop`: the same point, without
        computing the step that would only confirm it).
    max_step : float
        Each iteration's step is scaled so no parameter moves more than this, then halved until
        the log posterior increases (a monotone ascent).
    start : dict, optional
        ``theta`` (n_models,), ``a`` and ``b`` (n_items,) to start from, e.g. the fit of a larger
        matrix these models and items come from (the bank's interval check): Newton steps from the
        first iteration, the same mode in fewer of them. Default: logits of the observed rates.
    n_threads : int, optional
        Threads that share each pass over the matrix (default: every core this process may use).
        The result does not depend on it.
    client : distributed.Client, optional
        Fit on a Dask cluster instead: the matrix's row blocks are scattered to the workers once
        and every pass runs where its block is (:class:`irtlib.calibration.cells.DaskRunner`); the
        result equals the local fit's.
    progress : callable(iteration, step), optional
        Called after every iteration with its number and the largest parameter change.
    forcing : bool
        False (default): every Newton step's conjugate gradients stop at a relative residual of
        ``CG_RTOL["newton"]`` (1e-4). True: an inexact Newton method, each Newton step's conjugate gradients
        stopped at a relative residual of the last accepted step's size, clipped to ``[1e-4, 1e-2]``
        (loose far from the mode, tight near it, which keeps the convergence superlinear); the fit stops
        by the same rule, at the same mode to within about ``tol``, in fewer products with the matrix
        (1,000 x 20,000 coin flips: 140 conjugate-gradient iterations instead of 231, the parameters within
        5e-8; benchmarks/RESULTS.md, "cal2"). :func:`irtlib.calibrate_bank` fits this way.

    Returns
    -------
    theta : ndarray, shape (n_models,)
    a, b : ndarray, shape (n_items,)
    info : dict
        ``iterations``, ``converged``, ``log_posterior``, ``cg_iterations`` (conjugate-gradient
        iterations over all steps).

    Notes
    -----
    Fisher scoring (expected information, always positive definite) far from the mode; once
    the full step is accepted, Newton steps (observed information) for quadratic convergence, with a
    fallback to scoring whenever the observed information is not positive definite or a Newton
    step fails to increase the log posterior. Each step is the joint step in all parameters
    (:func:`_direction`), solved by conjugate gradients over passes of the matrix's row blocks
    (:mod:`irtlib.calibration.cells`), so a fit costs a small multiple of the number of observed
    responses in time and of the matrix stored in float32 in memory. The passes run on ``n_threads``
    threads; BLAS itself runs single-threaded (its products here are per-block matrix-vector
    products, and on a shared 2-core machine threaded BLAS spinning against other work made a fit
    two to six times slower).
    """
    with single_threaded_blas():
        return _fit_map(values, priors=(prior_theta, prior_log_a, prior_b), max_iter=max_iter, tol=tol,
                        max_step=max_step, start=start, n_threads=n_threads, client=client, progress=progress,
                        forcing=forcing)


def _start(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starting abilities and difficulties: logits of the observed rates, close to the mode."""
    eps = 0.5
    observed = ~np.isnan(x)
    if observed.all():        # nothing missing: nansum's sums without its copy of the matrix (the same numbers)
        safe_m, safe_i = np.sum(x, axis=1), np.sum(x, axis=0)
    else:
        safe_m, safe_i = np.nansum(x, axis=1), np.nansum(x, axis=0)
    theta = np.log((safe_m + eps) / (observed.sum(axis=1) - safe_m + eps))
    theta = (theta - theta.mean()) / (theta.std() + 1e-12)
    b = -np.log((safe_i + eps) / (observed.sum(axis=0) - safe_i + eps)) / 1.7
    return theta, b


#: Per-cell arithmetic runs in float32 (twice as fast) until an accepted step moves no parameter by
#: more than this; the last steps, and the stopping rule, then run in float64, so the mode is found to
#: float64 accuracy. (At that size a step still raises the log posterior by far more than float32's
#: rounding of the sum over cells, so the float32 line search never mistakes noise for a decrease.)
FLOAT64_BELOW = 0.1


def _given_start(start: dict, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(theta, log a, b)`` from a ``start`` dict, checked against the matrix's shape."""
    try:
        theta, a, b = (np.asarray(start[k], dtype=float) for k in ("theta", "a", "b"))
    except (KeyError, TypeError) as exc:
        raise InputError(f"start must be a dict with theta, a and b ({exc})") from None
    if theta.shape != shape[:1] or a.shape != shape[1:] or b.shape != shape[1:]:
        raise InputError(f"start: parameters of shapes {theta.shape}, {a.shape}, {b.shape} do not match "
                         f"values of shape {shape}")
    if not (np.isfinite(theta).all() and np.isfinite(b).all() and (a > 0).all() and np.isfinite(a).all()):
        raise InputError("start: theta and b must be finite and a positive")
    return theta, np.log(a), b


def _fit_map(values, *, priors, max_iter, tol, max_step, start, n_threads, client, progress, runner=None,
             forcing=False):
    """:func:`fit_map`'s loop; on ``runner``'s blocks of ``values`` when given (the caller closes it).

    ``forcing``: an inexact Newton method, each Newton step's conjugate gradients stopped at a relative
    residual of the last accepted step's size, within ``[CG_RTOL["newton"], CG_RTOL["scoring"]]`` (which
    keeps the convergence superlinear); the stop rule's prediction then allows for that residual.
    """
    x = np.asarray(values, dtype=float)
    if start is None:
        (theta, b), alpha, newton, dtype = _start(x), np.zeros(x.shape[1]), False, np.float32
    else:
        (theta, alpha, b), newton, dtype = _given_start(start, x.shape), True, np.float32   # near the mode: Newton
    own = runner is None
    if own:
        runner = make_runner(x, n_threads=n_threads, client=client)
    try:
        state = _Point(runner, theta, alpha, b, priors, dtype)
        converged, cg, newton_sizes, last = False, 0, [], np.inf
        for it in range(1, max_iter + 1):  # noqa: B007  (the count is returned after the loop)
            moved = None
            for weight in (NEWTON_WEIGHTS if newton else (0.0,)):
                state.ready(runner)
                rtol = CG_RTOL["newton" if weight else "scoring"]
                if forcing and weight:
                    rtol = min(CG_RTOL["scoring"], max(rtol, last))
                found = _direction(runner, state, priors, newton=weight, rtol=rtol)
                if found is None:
                    continue
                *step, n_cg = found
                cg += n_cg
                size = max(np.abs(d).max() for d in step)
                if size < tol:            # the mode is within tol: stop without another pass over the matrix
                    break
                moved = _line_search(runner, state, step, size, priors, max_step=max_step)
                if moved is not None:
                    break
            if moved is None and state.dtype == np.float32:     # float32 can go no further: go on in float64
                state, newton = _Point(runner, state.theta, state.alpha, state.b, priors, np.float64), False
                continue
            if moved is None:             # a step below tol, or no ascent direction left: the mode, numerically
                converged = True
                break
            state, scale = moved
            newton = scale == 1.0         # full steps: the quadratic region, where Newton pays off
            last = float(scale * size)
            if progress is not None:
                progress(it, last)
            if state.dtype == np.float32:
                if last < FLOAT64_BELOW:
                    state = _Point(runner, state.theta, state.alpha, state.b, priors, np.float64)
                continue
            newton_sizes = newton_sizes + [last] if newton and weight == 1.0 else []
            # without forcing every Newton solve stopped at CG_RTOL["newton"]: the stop rule allows for that residual
            if last < tol or _quadratic_stop(newton_sizes, tol, rtol=rtol if forcing else CG_RTOL["newton"]):
                converged = True
                break
    finally:
        if own:
            runner.close()
    return state.theta, state.a, state.b, {"iterations": it, "converged": converged,
                                           "log_posterior": float(state.log_posterior), "cg_iterations": cg}


def _line_search(runner, state: _Point, step, size: float, priors, *, max_step: float):
    """The accepted ``(point, scale)`` along ``step``, or None after 40 halvings.

    The step is scaled so no parameter moves more than ``max_step``, then halved until the log
    posterior does not decrease (a monotone ascent). Each trial point is evaluated with the sums of
    the step that would follow it, so an accepted point costs one pass over the matrix.
    """
    scale = min(1.0, max_step / size) if size > 0 else 1.0
    for _ in range(40):
        cand = _Point(runner, state.theta + scale * step[0], state.alpha + scale * step[1],
                      state.b + scale * step[2], priors, state.dtype)
        if cand.log_posterior >= state.log_posterior:
            return cand, scale
        scale *= 0.5
    return None


def fit_items(values: ArrayLike, theta: ArrayLike, *, start: dict | None = None,
              prior_log_a: tuple[float, float] = (0.0, 1.0), prior_b: tuple[float, float] = (0.0, 1.0),
              max_iter: int = 100, tol: float = 1e-6, sd_tol: float = 0.0, max_step: float = 1.0,
              n_threads: int | None = None) -> tuple[np.ndarray, np.ndarray, dict]:
    """Posterior mode of every item's ``(a, b)`` with the models' abilities held fixed.

    Given the abilities the items are independent: each iteration is one pass over the matrix and a
    2 x 2 Newton step per item (its Fisher-scoring step where the observed block is not positive
    definite), no joint linear system. The interval check of :func:`irtlib.calibrate_bank` refits its
    folds' items this way, from the bank's fit and with the training models' abilities from it.

    Parameters
    ----------
    values : ndarray, shape (n_models, n_items)
        1 safe, 0 unsafe, NaN missing.
    theta : ndarray, shape (n_models,)
        The models' abilities, held fixed.
    start : dict, optional
        ``a`` and ``b`` (n_items,) to start from (default: ``a = 1`` and the logits of the observed rates).
    prior_log_a, prior_b : (float, float)
        Mean and SD of the Normal priors on ``log a`` and b (the paper's, as in :func:`fit_map`).
    max_iter, tol : int, float
        Stop when no item's step moves ``log a`` or b by more than ``tol``.
    sd_tol : float
        Or when every item is within ``sd_tol`` posterior SDs of its mode: its Newton decrement
        ``sqrt(g' J^-1 g)`` (g the item's gradient, J its 2 x 2 information) is below ``sd_tol``. An item
        whose likelihood is nearly flat (no model tells its slope apart) can take many iterations to
        move its ``log a`` by ``tol`` while the log posterior gains nothing measurable; this rule stops
        when every remaining step is worth less than ``sd_tol**2 / 2`` nats. 0 (default): ``tol`` only.
    max_step : float
        Each item's step is scaled so neither of its parameters moves more than this; all steps are then
        halved together until the log posterior increases.
    n_threads : int, optional
        Threads that share each pass (the result does not depend on it).

    Returns
    -------
    a, b : ndarray, shape (n_items,)
    info : dict
        ``iterations``, ``converged``, ``log_posterior`` (the items' log posterior, abilities' prior left out).
    """
    x = np.asarray(values, dtype=float)
    theta = np.asarray(theta, dtype=float)
    if theta.shape != x.shape[:1] or not np.isfinite(theta).all():
        raise InputError(f"theta must be {x.shape[0]} finite abilities, one a row of values; got shape {theta.shape}")
    if start is None:
        alpha, b = np.zeros(x.shape[1]), _start(x)[1]
    else:
        _, alpha, b = _given_start({"theta": theta, **start}, x.shape)
    # the abilities are fixed: their prior (SD inf) adds nothing
    priors = ((0.0, np.inf), prior_log_a, prior_b)
    with single_threaded_blas():
        runner = make_runner(x, n_threads=n_threads)
        try:
            return _fit_items(runner, theta, alpha, b, priors, max_iter=max_iter, tol=tol, sd_tol=sd_tol,
                              max_step=max_step)
        finally:
            runner.close()


def fit_map_after_items(values: ArrayLike, theta: ArrayLike, a: ArrayLike, b: ArrayLike, *, item_steps: int,
                        tol: float = 1e-6, forcing: bool = False, n_threads: int | None = None,
                        progress: Callable[[int, float], None] | None = None
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """:func:`fit_items` from ``(a, b)`` with the abilities ``theta`` held, then :func:`fit_map` from there.

    ``item_steps`` item-only Newton steps (``fit_items(values, theta, start={"a": a, "b": b},
    max_iter=item_steps)``), then the joint posterior mode from ``theta`` and the moved items
    (``fit_map(values, start=..., tol=tol)``), both on one set of row blocks of ``values``: the same
    result as the two calls bit for bit, without building the blocks twice. The refit of each fold of
    :func:`irtlib.calibrate_bank`'s interval check (:func:`irtlib.bank.coverage.refit_start`).

    ``forcing=True`` makes the joint fit an inexact Newton method (the check's refits): each Newton step's
    conjugate gradients stop at a relative residual of the last accepted step's size, clipped to
    ``[1e-4, 1e-2]`` (``CG_RTOL``), instead of 1e-4 throughout. The fit still stops at a step below ``tol``,
    so it lands within about ``tol`` of the same mode, in fewer conjugate-gradient products.

    Returns
    -------
    theta, a, b, info
        As :func:`fit_map`'s.
    """
    x = np.asarray(values, dtype=float)
    theta = np.asarray(theta, dtype=float)
    if theta.shape != x.shape[:1] or not np.isfinite(theta).all():
        raise InputError(f"theta must be {x.shape[0]} finite abilities, one a row of values; got shape {theta.shape}")
    _, alpha, b = _given_start({"theta": theta, "a": a, "b": b}, x.shape)
    priors = ((0.0, 1.0), (0.0, 1.0), (0.0, 1.0))                 # fit_map's defaults (the paper's priors)
    item_priors = ((0.0, np.inf),) + priors[1:]                    # the abilities held: no prior on them
    with single_threaded_blas():
        runner = make_runner(x, n_threads=n_threads)
        try:
            a_items, b_items, _ = _fit_items(runner, theta, alpha, b, item_priors, max_iter=item_steps, tol=1e-6,
                                             sd_tol=0.0, max_step=1.0)
            return _fit_map(x, priors=priors, max_iter=200, tol=tol, max_step=2.0,
                            start={"theta": theta, "a": a_items, "b": b_items}, n_threads=n_threads, client=None,
                            progress=progress, runner=runner, forcing=forcing)
        finally:
            runner.close()


def _fit_items(runner, theta, alpha, b, priors, *, max_iter, tol, sd_tol, max_step):
    def point(alpha, b, dtype):
        return _Point(runner, theta, alpha, b, priors, dtype, keep_cells=False)

    state, converged = point(alpha, b, np.float32), False
    for it in range(1, max_iter + 1):  # noqa: B007  (the count is returned after the loop)
        (g_al, g_b), (d_aa, d_ab, d_bb), _ = _item_blocks(state, priors, newton=1.0)
        step = np.stack([d_aa * g_al + d_ab * g_b, d_ab * g_al + d_bb * g_b])
        decrement = float(np.sqrt(np.max(step[0] * g_al + step[1] * g_b)))
        step *= np.minimum(1.0, max_step / np.maximum(np.abs(step).max(axis=0), 1e-300))
        size = float(np.abs(step).max())
        if size < tol or decrement < sd_tol:
            converged = True
            break
        scale, moved = 1.0, None
        for _ in range(40):
            cand = point(state.alpha + scale * step[0], state.b + scale * step[1], state.dtype)
            if cand.log_posterior > state.log_posterior:
                moved = cand
                break
            scale *= 0.5
        # no step gains anything measurable: float32 goes on in float64, float64 is at the mode to rounding
        if moved is None and state.dtype == np.float32:
            state = point(state.alpha, state.b, np.float64)
            continue
        if moved is None:
            converged = True
            break
        state = moved
        if state.dtype == np.float32 and scale * size < FLOAT64_BELOW:
            state = point(state.alpha, state.b, np.float64)
    return state.a, state.b, {"iterations": it, "converged": converged, "log_posterior": float(state.log_posterior),
                              "largest_decrement": decrement}


# ---------------------------------------------------------------------------- front door
#: The pip extra that brings py-irt's engine (torch, pyro, py-irt).
PYIRT_EXTRA = "pip install 'irtlib[pyirt]'"


def load_pyirt_engine() -> Callable[..., Any]:
    """:func:`irtlib.calibration.pyirt.fit_pyirt`, or a :class:`~irtlib.errors.MissingDependencyError` naming the extra.

    Raised (an ImportError) when torch, pyro or py-irt is missing.
    """
    try:
        from .pyirt import fit_pyirt
    except ImportError as exc:
        missing = getattr(exc, "name", None) or str(exc)
        raise MissingDependencyError(f'engine="pyirt" needs torch, pyro-ppl and py-irt, which are not installed '
                          f"({missing} is missing): install them with {PYIRT_EXTRA}, or use the default "
                          'engine="map"') from exc
    return fit_pyirt


def fit_2pl(matrix: ResponseMatrix, *, engine: str = "pyirt", seed: int = 0, epochs: int = 1000,
            lr: float = 0.1, lr_decay: float | None = None, max_iter: int = 200, tol: float = 1e-6,
            verbose: bool = False, start: dict | None = None, n_threads: int | None = None,
            progress: Callable[[int, float], None] | None = None, forcing: bool = False) -> Calibration:
    """Fit the 2PL model to a response matrix.

    Parameters
    ----------
    matrix : ResponseMatrix
        Binary responses, models x items (NaN cells are skipped).
    engine : {"pyirt", "map", "pyirt-authors"}
        ``"pyirt"`` (default) runs py-irt 0.7.1 exactly as the paper did (appendix B): a custom
        2PL class with the paper's priors, SVI with Adam, ``epochs`` epochs at learning rate
        ``lr``. ``"map"`` finds the joint posterior mode of the same model and priors by Fisher
        scoring (:func:`fit_map`): deterministic, and about two orders of magnitude faster,
        which is what the agreement protocol's per-split refits need. ``"pyirt-authors"`` runs
        py-irt as the authors' released code does: py-irt's hierarchical priors
        (:class:`~irtlib.calibration.pyirt.HierarchicalTwoParamLog`), learning-rate decay 0.9999 per
        epoch, and the parameters after the epoch with the lowest loss (py-irt's ``best_params``);
        on SimpleSafetyTests it reproduces the authors' own per-split fits to about 1e-5. For many
        training sets at once, :func:`irtlib.calibration.pyirt_batch.fit_2pl_splits` runs the same fit
        batched.
    seed : int
        Seeds py-irt's random streams (torch, pyro, numpy, random). The MAP engine is
        deterministic and ignores it.
    epochs, lr : int, float
        py-irt settings (the paper: 1,000 and 0.1).
    lr_decay : float, optional
        Per-epoch learning-rate multiplier for py-irt. py-irt's default is 0.9999; ``None`` means
        1.0 for ``"pyirt"``, because the paper reports plain Adam at 0.1 with no schedule, and
        0.9999 per epoch would silently lower the final rate by about 10% over 1,000 epochs; and
        0.9999 for ``"pyirt-authors"``, as the authors' code runs it.
    max_iter, tol : int, float
        MAP-engine stopping rule.
    verbose : bool
        Let py-irt print its progress.
    start, n_threads, progress, forcing
        MAP engine: where to start, the threads of its passes, a callback after each iteration and whether
        its Newton steps are inexact (:func:`fit_map`).

    Returns
    -------
    Calibration

    Raises
    ------
    ImportError
        ``engine="pyirt"`` without torch, pyro-ppl and py-irt (``pip install 'irtlib[pyirt]'``).
    """
    if not isinstance(matrix, ResponseMatrix):
        raise InputTypeError(f"fit_2pl expects a ResponseMatrix, got {type(matrix).__name__}")
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}; choose one of {ENGINES}")
    began = time.perf_counter()
    priors = {"theta": "Normal(0, 1)", "a": "LogNormal(0, 1)", "b": "Normal(0, 1)"}
    if engine == "pyirt":
        fit_pyirt = load_pyirt_engine()
        lr_decay = 1.0 if lr_decay is None else lr_decay
        theta, a, b = fit_pyirt(matrix.values, seed=seed, epochs=epochs, lr=lr, lr_decay=lr_decay,
                                verbose=verbose)
        settings = {"seed": seed, "epochs": epochs, "lr": lr, "lr_decay": lr_decay,
                    "optimizer": "Adam", "inference": "SVI (mean-field)", "priors": priors}
        diagnostics = {}
    elif engine == "pyirt-authors":
        fit_pyirt = load_pyirt_engine()
        lr_decay = AUTHORS_PYIRT["lr_decay"] if lr_decay is None else lr_decay
        theta, a, b = fit_pyirt(matrix.values, seed=seed, epochs=epochs, lr=lr, lr_decay=lr_decay,
                                priors=AUTHORS_PYIRT["priors"], best=AUTHORS_PYIRT["best"], verbose=verbose)
        settings = {"seed": seed, "epochs": epochs, "lr": lr, "lr_decay": lr_decay,
                    "optimizer": "Adam", "inference": "SVI (mean-field)", "parameters": "best epoch",
                    "priors": {"theta": "Normal(mu_theta, 1/u_theta)", "a": "LogNormal(mu_a, 1/u_a)",
                               "b": "Normal(mu_b, 1/u_b)", "mu": "Normal(0, 1e6)", "u": "Gamma(1, 1)"}}
        diagnostics = {}
    else:
        theta, a, b, diagnostics = fit_map(matrix.values, max_iter=max_iter, tol=tol, start=start, n_threads=n_threads,
                                           progress=progress, forcing=forcing)
        settings = {"max_iter": max_iter, "tol": tol, "method": "joint MAP, Fisher scoring", "priors": priors}
        if forcing:
            settings["newton_cg"] = "forcing (inexact Newton: CG residual of the last step's size)"
    seconds = time.perf_counter() - began
    return Calibration(
        a=pd.Series(a, index=matrix.items, name="a"),
        b=pd.Series(b, index=matrix.items, name="b"),
        theta=pd.Series(theta, index=matrix.models, name="theta"),
        engine=engine, settings=settings, seconds=seconds, diagnostics=diagnostics,
    )
