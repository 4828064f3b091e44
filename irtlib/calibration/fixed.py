"""Fixed-parameter calibration: new items fitted on the scale of items whose parameters are held fixed.

A bank that gains items keeps its scale when the new items are calibrated with the old ones'
parameters fixed: the abilities of the models that answered both are pinned by the old items, and
the new items' ``a`` and ``b`` are the posterior mode given them (the paper's model and priors,
appendix B, as :func:`irtlib.calibration.joint_map.fit_map`). The old items' parameters, and so
every score already reported on the bank, do not change.
"""

from __future__ import annotations

import numpy as np

from irtlib._typing import ArrayLike
from irtlib.core.kernels import logit_z, sigmoid
from irtlib.errors import InputError

from .standard_errors import PAPER_PRIORS, Priors

__all__ = ["fit_fixed"]


def _sums(x, seen, theta, a, b):
    """Per cell ``g = x - P`` and ``w = P (1 - P)`` (0 where unobserved), and ``z``."""
    z = logit_z(theta[:, None], a, b)
    p = sigmoid(z)
    return np.where(seen, np.nan_to_num(x) - p, 0.0), np.where(seen, p * (1 - p), 0.0), z


def fit_fixed(values: ArrayLike, a_fixed: ArrayLike, b_fixed: ArrayLike, *, priors: Priors = PAPER_PRIORS,
              max_iter: int = 500, tol: float = 1e-6, max_step: float = 1.0) -> tuple[np.ndarray, ...]:
    """Posterior mode of the abilities and the free items' parameters with the fixed items' held.

    Parameters
    ----------
    values : ndarray, shape (n_models, n_fixed + n_free)
        1 safe, 0 unsafe, NaN missing; the first ``n_fixed`` columns are the fixed items.
    a_fixed, b_fixed : ndarray, shape (n_fixed,)
        The fixed items' parameters (the bank's).
    priors : ((float, float), (float, float), (float, float))
        Means and SDs of the Normal priors on theta, log a and b.
    max_iter, tol, max_step : int, float, float
        Iterations stop when no parameter moved by more than ``tol``; no step moves a parameter by
        more than ``max_step``.

    Returns
    -------
    theta : ndarray, shape (n_models,)
    a, b : ndarray, shape (n_free,)
    info : dict
        ``iterations``, ``converged``.

    Notes
    -----
    Block coordinate ascent: a Fisher-scoring step in every ability given the items, then one in
    every free item's ``(log a, b)`` given the abilities (each block is separable: one 1 x 1 or 2 x 2
    system per model or item, solved in closed form, vectorised), until nothing moves.
    """
    x = np.asarray(values, dtype=float)
    a_fixed, b_fixed = np.asarray(a_fixed, float), np.asarray(b_fixed, float)
    n_fixed = a_fixed.size
    if x.ndim != 2 or x.shape[1] <= n_fixed or b_fixed.shape != a_fixed.shape:
        raise InputError(f"fit_fixed: responses of shape {x.shape} do not hold {n_fixed} fixed items and at least "
                         "one free item")
    (mt, st), (ma, sa), (mb, sb) = priors
    seen = ~np.isnan(x)
    safe = np.nansum(x[:, n_fixed:], axis=0) + 0.5
    n_seen = seen[:, n_fixed:].sum(axis=0) + 1.0
    alpha, b = np.zeros(x.shape[1] - n_fixed), -np.log(safe / (n_seen - safe)) / 1.7
    theta = np.zeros(x.shape[0])
    converged = False
    for it in range(1, max_iter + 1):  # noqa: B007  (the count is returned after the loop)
        a_all, b_all = np.r_[a_fixed, np.exp(alpha)], np.r_[b_fixed, b]
        g, w, _ = _sums(x, seen, theta, a_all, b_all)
        step_t = np.clip(((g * a_all).sum(1) - (theta - mt) / st**2) / ((w * a_all**2).sum(1) + 1 / st**2),
                         -max_step, max_step)
        theta = theta + step_t
        a = np.exp(alpha)
        g, w, z = _sums(x[:, n_fixed:], seen[:, n_fixed:], theta, a, b)
        g_al = (g * z).sum(0) - (alpha - ma) / sa**2
        g_b = -a * g.sum(0) - (b - mb) / sb**2
        j_aa, j_ab, j_bb = (w * z * z).sum(0) + 1 / sa**2, -a * (w * z).sum(0), a * a * w.sum(0) + 1 / sb**2
        det = j_aa * j_bb - j_ab**2
        d_al, d_b = (j_bb * g_al - j_ab * g_b) / det, (j_aa * g_b - j_ab * g_al) / det
        scale = min(1.0, max_step / max(np.abs(d_al).max(), np.abs(d_b).max(), 1e-300))
        alpha, b = alpha + scale * d_al, b + scale * d_b
        if max(np.abs(step_t).max(), scale * np.abs(d_al).max(), scale * np.abs(d_b).max()) < tol:
            converged = True
            break
    return theta, np.exp(alpha), b, {"iterations": it, "converged": converged}
