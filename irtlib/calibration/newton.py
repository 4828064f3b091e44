"""The joint Newton / Fisher-scoring step of the MAP calibration, written once.

Every MAP engine of this package (the 2PL's :func:`irtlib.calibration.joint_map.fit_map`, the 1PL and
3PL of :mod:`irtlib.calibration.models`) maximises a posterior over the abilities (plus, for the
1PL, one shared slope) and a few parameters per item. Its information matrix has an arrow
shape: a dense block over the abilities, one small ``k x k`` block per item (2PL: log a, b;
1PL: b; 3PL: log a, b, logit c) and dense coupling between them; there is no coupling between
two items. :func:`arrow_step` eliminates the item blocks and solves the remaining Schur
complement by Cholesky, so a step costs a few passes over the response matrix and one solve
of the size of the dense block. The engines differ only in the derivatives they pass in
(per-cell ones from :func:`irtlib.core.kernels.z_derivatives`).

Forming that Schur complement costs ``n^2`` times the items, which is what made a 5,000 x 5,000
fit take minutes; :func:`arrow_cg` solves the same system without forming it, by preconditioned
conjugate gradients whose every product with the Schur complement is two passes over the
response matrix, so a step costs a small multiple of the number of responses (the 2PL engine,
:func:`irtlib.calibration.joint_map.fit_map`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
import scipy.linalg

try:        # numpy's own QR gufuncs (numpy.linalg.qr's), called without its wrapper (_qr_basis)
    from numpy.linalg import _umath_linalg as _UMATH_LINALG
except ImportError:                       # pragma: no cover - another numpy layout: numpy.linalg.qr
    _UMATH_LINALG = None

__all__ = ["arrow_step", "arrow_cg", "row_sum"]


def _norm(x: np.ndarray) -> float:
    """``numpy.linalg.norm`` of a 1-D float64 vector, as it computes it (``sqrt(x @ x)``), without its dispatch."""
    return math.sqrt(x.dot(x))


def row_sum(coefficients: list, us: list) -> np.ndarray:
    """``sum(c * u for c, u in zip(coefficients, us))`` (Python's ``sum``: ``0 + t0 + t1 + ...``), in place.

    The same numbers as the generator (``0 + t0`` turns a -0.0 into 0.0, as ``sum`` does), in one
    array instead of one per term.
    """
    total = np.multiply(coefficients[0], us[0])
    np.add(0, total, out=total)
    for c, u in zip(coefficients[1:], us[1:], strict=True):
        total += c * u
    return total


def _cross_sum(cross: list, coefficients: list) -> np.ndarray:
    """``sum(cross[v] * coefficients[v] for v in ...)`` (Python's ``sum``), the same array, in one buffer.

    The terms are the generator's, operand for operand (``cross[v] * coefficients[v]``), added in its order
    to the first one (``0 + t0``, which turns a -0.0 into 0.0, as ``sum`` does). The layout of the result
    orders the products it enters, so the in-place sum is taken only when every ``cross[v]`` has the same
    contiguous layout (then the generator's sums have it too); otherwise the generator itself runs.
    """
    if not (all(c.flags.c_contiguous for c in cross) or all(c.flags.f_contiguous for c in cross)):
        return sum(c * w for c, w in zip(cross, coefficients, strict=True))
    total = cross[0] * coefficients[0]
    np.add(0, total, out=total)
    for c, w in zip(cross[1:], coefficients[1:], strict=True):
        total += c * w
    return total


def _qr_basis(coarse: np.ndarray) -> np.ndarray:
    """``numpy.linalg.qr(coarse)[0]`` (reduced Q of a tall matrix) by the same LAPACK gufuncs, without its wrapper.

    numpy's own two calls (``qr_r_raw``, then ``qr_reduced``) on a float64 copy, under the same error state
    (an invalid value raises :class:`numpy.linalg.LinAlgError`); ``R`` is not formed. Where numpy's private
    gufuncs are not there, :func:`numpy.linalg.qr` itself.
    """
    if (_UMATH_LINALG is None or coarse.dtype != np.float64 or coarse.ndim != 2
            or coarse.shape[0] < coarse.shape[1]):
        return np.linalg.qr(coarse)[0]
    a = coarse.astype(np.float64, copy=True)
    with np.errstate(call=_qr_error, invalid="call", over="ignore", divide="ignore", under="ignore"):
        tau = _UMATH_LINALG.qr_r_raw(a, signature="d->d")
        return _UMATH_LINALG.qr_reduced(a, tau, signature="dd->d")


def _qr_error(err, flag):
    raise np.linalg.LinAlgError("Incorrect argument found while performing QR factorization")


@functools.lru_cache(maxsize=1)
def _lapack() -> tuple:
    """The float64 ``potrf`` and ``potrs`` of scipy (what :func:`scipy.linalg.cho_factor` and ``cho_solve`` call)."""
    return tuple(scipy.linalg.get_lapack_funcs(("potrf", "potrs"), (np.empty((1, 1)),)))


def _cho_factor(a: np.ndarray) -> np.ndarray:
    """``scipy.linalg.cho_factor(a)[0]`` (upper) by its own LAPACK call, without its wrapper's checks.

    The same ``potrf(a, lower=False, overwrite_a=False, clean=False)``; a non-finite ``a`` goes through
    :func:`scipy.linalg.cho_factor` itself (which raises as it does); a leading minor that is not positive
    raises :class:`numpy.linalg.LinAlgError`, as there.
    """
    if not np.isfinite(a).all():
        return scipy.linalg.cho_factor(a)[0]
    chol, info = _lapack()[0](a, lower=False, overwrite_a=False, clean=False)
    if info > 0:
        raise np.linalg.LinAlgError(f"{info}-th leading minor of the array is not positive definite")
    if info < 0:                      # pragma: no cover - the arguments are built here
        raise ValueError(f"LAPACK reported an illegal value in {-info}-th argument on entry to \"POTRF\".")
    return chol


def arrow_step(dense: np.ndarray, g_dense: np.ndarray, cross: list, g_items: list,
               item_inverse: list) -> tuple[np.ndarray, list] | None:
    """Solve ``J d = g`` for an arrow-shaped information matrix ``J``.

    Parameters
    ----------
    dense : ndarray, shape (n, n)
        The dense block (abilities, plus any shared parameter).
    g_dense : ndarray, shape (n,)
        The gradient of the log posterior in those parameters.
    cross : list of k ndarrays, shape (n, n_items)
        ``cross[u][i, j]``: information between dense parameter ``i`` and item ``j``'s ``u``-th parameter.
    g_items : list of k ndarrays, shape (n_items,)
        The gradient in each item parameter.
    item_inverse : k x k nested sequence of ndarrays, shape (n_items,)
        ``item_inverse[u][v][j]``: entry ``(u, v)`` of the inverse of item ``j``'s block (the 2PL
        passes its closed-form 2 x 2 inverse, the others ``numpy.linalg.inv``'s).

    Returns
    -------
    (d_dense, d_items) or None
        The step in the dense parameters, shape (n,), and a list of k arrays of shape
        (n_items,); None when the Schur complement is not positive definite (Cholesky fails),
        which the engines take as "no ascent step of this kind".
    """
    k = len(g_items)
    binv = item_inverse
    e = [sum(binv[u][v] * g_items[v] for v in range(k)) for u in range(k)]          # B^-1 g_item
    schur = dense.copy()
    rhs = g_dense.copy()
    for u in range(k):
        cu = _cross_sum(cross, [binv[v][u] for v in range(k)])                   # (C B^-1)_u
        schur -= cu @ cross[u].T
    for u in range(k):
        rhs -= cross[u] @ e[u]
    try:  # Cholesky doubles as the check that the (observed) information is positive definite
        chol = np.linalg.cholesky(schur)
    except np.linalg.LinAlgError:
        return None
    d_dense = scipy.linalg.cho_solve((chol, True), rhs)
    h = [g_items[v] - cross[v].T @ d_dense for v in range(k)]
    return d_dense, [sum(binv[u][v] * h[v] for v in range(k)) for u in range(k)]


def arrow_cg(diag: np.ndarray, g_dense: np.ndarray, cross_t: Callable[[np.ndarray], list],
             cross: Callable[[list], np.ndarray], g_items: list, item_inverse: list, *,
             coarse: np.ndarray, rtol: float, max_iter: int = 200,
             fused: object | None = None) -> tuple[np.ndarray, list, int] | None:
    """Solve ``J d = g`` for the same arrow-shaped ``J`` as :func:`arrow_step`, matrix-free.

    The dense block is diagonal here (the abilities), so ``J`` is known through products only: the
    Schur complement ``S = D - C B^-1 C^T`` of the item blocks is applied as ``D v - C (B^-1 (C^T v))``
    and ``S d = g_dense - C B^-1 g_items`` is solved by conjugate gradients, preconditioned by ``D``
    plus an exact solve on the ``coarse`` directions (for the 2PL, a shift and a stretch of all
    abilities: the directions the likelihood cannot tell apart, which only the priors pin down and
    which plain CG would resolve last).

    Parameters
    ----------
    diag : ndarray, shape (n,)
        The diagonal dense block.
    g_dense : ndarray, shape (n,)
    cross_t : callable
        ``cross_t(v)`` for ``v`` of shape (n,) or (n, q): the list of k products ``C_u^T v``, each of
        shape (n_items,) or (q, n_items).
    cross : callable
        ``cross(ys)`` for a list of k arrays of shape (n_items,) or (q, n_items): ``sum_u C_u y_u``, of
        shape (n,) or (n, q).
    g_items, item_inverse
        As in :func:`arrow_step`.
    coarse : ndarray, shape (n, q)
        Directions solved exactly inside the preconditioner.
    rtol : float
        Stop when the residual is below ``rtol`` times the right-hand side (an inexact Newton step).
    max_iter : int
        At most this many iterations (the iterate reached is returned: from a zero start every
        conjugate-gradient iterate is an ascent direction).
    fused : object, optional
        The compositions with the item inverse in one call each, equal to them bit for bit (the 2PL engine's
        kernel, :class:`irtlib.calibration.joint_map._FusedArrow`): ``fused.product(v)`` for ``v`` of shape
        (n,) is ``cross(B^-1 cross_t(v))`` (the conjugate-gradient products), ``fused.cross_binv(g_items)``
        is ``cross(B^-1 g_items)`` and ``fused.back(g_items, d)`` is ``B^-1 (g_items - cross_t(d))``.
        None: the compositions.

    Returns
    -------
    (d_dense, d_items, iterations) or None
        When ``S`` shows a direction of non-positive curvature (the observed information is not positive
        definite there), the iterate reached before it (truncated Newton: every conjugate-gradient iterate
        from zero is an ascent direction), or None if that happens at the first iteration, which the engines
        take as "no Newton step". (On a flat posterior, e.g. responses without structure, the observed
        information is indefinite for most of the way to the mode: returning None there left only blended
        and scoring steps, 38 iterations instead of 25 on a 1,000 x 20,000 matrix of coin flips.)
    """
    k = len(g_items)

    def binv(us):
        return [row_sum(item_inverse[u], us) for u in range(k)]

    def schur(v):
        if v.ndim == 1:
            return diag * v - (cross(binv(cross_t(v))) if fused is None else fused.product(v))
        return diag[:, None] * v - cross(binv(cross_t(v)))

    rhs = g_dense - (cross(binv(g_items)) if fused is None else fused.cross_binv(g_items))
    basis = _qr_basis(coarse)
    small = basis.T @ schur(basis)
    try:
        small_chol = _cho_factor((small + small.T) / 2)
    except np.linalg.LinAlgError:
        return None
    potrs = _lapack()[1]
    basis_t = basis.T

    def precondition(r):
        # scipy.linalg.cho_solve's own LAPACK call, without its checks (the same numbers)
        return r / diag + basis @ potrs(small_chol, basis_t @ r, lower=False)[0]

    d = np.zeros_like(rhs)
    res = rhs.copy()
    z = precondition(res)
    p = z.copy()
    rz = res @ z
    target = rtol * _norm(rhs)
    it = 0
    while _norm(res) > target and it < max_iter:
        sp = schur(p)
        curvature = p @ sp
        if curvature <= 0:          # truncated Newton: the iterate so far, if any, is still an ascent direction
            if it == 0:
                return None
            break
        step = rz / curvature
        d += step * p
        res -= step * sp
        z = precondition(res)
        rz, rz_old = res @ z, rz
        p = z + (rz / rz_old) * p
        it += 1
    if fused is not None:
        return d, fused.back(g_items, d), it
    h = [g_items[v] - c for v, c in enumerate(cross_t(d))]
    return d, binv(h), it
