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
from irtlib.core.kernels import bernoulli_variance, log_likelihood, logit_z, sigmoid
from irtlib.errors import InputError

from .standard_errors import PAPER_PRIORS, Priors

__all__ = ["fit_fixed"]


def _sums(x, seen, theta, a, b):
    """Per cell ``g = x - P`` and ``w = P (1 - P)`` (0 where unobserved), and ``z``."""
    z = logit_z(theta[:, None], a, b)
    p = sigmoid(z)
    return np.where(seen, np.nan_to_num(x) - p, 0.0), np.where(seen, bernoulli_variance(p), 0.0), z


def _ascend(value, point, step, *, rounds: int = 30):
    """``point + s * step`` with each element's ``s`` halved until its own objective does not decrease.

    ``value(point)`` returns one objective per element (separable blocks: a model's ability, an item's
    parameters), so each element backtracks on its own; elements that find no ascent stay put.
    """
    before = value(point)
    scale = np.ones(before.shape)
    for _ in range(rounds):
        trial = point + scale.reshape(scale.shape + (1,) * (step.ndim - 1)) * step
        worse = value(trial) < before - 1e-12 * np.abs(before)
        if not worse.any():
            return trial, scale
        scale = np.where(worse, scale / 2, scale)
    keep = ~worse
    trial[~keep] = point[~keep]
    return trial, np.where(keep, scale, 0.0)


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
    system per model or item, solved in closed form, vectorised), each step halved, element by element,
    until its own log posterior does not decrease (so a very sharp fixed item cannot make an ability
    oscillate), until nothing moves.
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
    new_x, new_seen = x[:, n_fixed:], seen[:, n_fixed:]

    def model_value(t):                # each model's log posterior (all items)
        ll = np.where(seen, log_likelihood(np.nan_to_num(x), t[:, None], np.r_[a_fixed, np.exp(alpha)],
                                           np.r_[b_fixed, b]), 0.0)
        return ll.sum(axis=1) - 0.5 * ((t - mt) / st) ** 2

    def item_value(v):                 # each free item's log posterior, v = (log a, b) stacked: (n_free, 2)
        ll = np.where(new_seen, log_likelihood(np.nan_to_num(new_x), theta[:, None], np.exp(v[:, 0]), v[:, 1]), 0.0)
        return ll.sum(axis=0) - 0.5 * ((v[:, 0] - ma) / sa) ** 2 - 0.5 * ((v[:, 1] - mb) / sb) ** 2

    converged = False
    for it in range(1, max_iter + 1):  # noqa: B007  (the count is returned after the loop)
        a_all, b_all = np.r_[a_fixed, np.exp(alpha)], np.r_[b_fixed, b]
        g, w, _ = _sums(x, seen, theta, a_all, b_all)
        step_t = np.clip(((g * a_all).sum(1) - (theta - mt) / st**2) / ((w * a_all**2).sum(1) + 1 / st**2),
                         -max_step, max_step)
        theta, scale_t = _ascend(model_value, theta, step_t)
        a = np.exp(alpha)
        g, w, z = _sums(new_x, new_seen, theta, a, b)
        g_al = (g * z).sum(0) - (alpha - ma) / sa**2
        g_b = -a * g.sum(0) - (b - mb) / sb**2
        j_aa, j_ab, j_bb = (w * z * z).sum(0) + 1 / sa**2, -a * (w * z).sum(0), a * a * w.sum(0) + 1 / sb**2
        det = j_aa * j_bb - j_ab**2
        step_i = np.clip(np.stack([(j_bb * g_al - j_ab * g_b) / det, (j_aa * g_b - j_ab * g_al) / det], axis=1),
                         -max_step, max_step)
        moved, scale_i = _ascend(item_value, np.stack([alpha, b], axis=1), step_i)
        alpha, b = moved[:, 0], moved[:, 1]
        if max(np.abs(scale_t * step_t).max(), np.abs(scale_i[:, None] * step_i).max()) < tol:
            converged = True
            break
    return theta, np.exp(alpha), b, {"iterations": it, "converged": converged}
