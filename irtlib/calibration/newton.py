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
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

__all__ = ["arrow_step"]


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
        cu = sum(cross[v] * binv[v][u] for v in range(k))                           # (C B^-1)_u
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
