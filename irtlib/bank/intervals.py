"""Score intervals of an adaptive test: the predicted full-benchmark safety score and its 95% interval.

:func:`score_interval` maps an ability estimate and its standard error to the predicted score on
the whole benchmark (bank items answered, bank items predicted by the 2PL, and the items the
variance filter removed) with an interval; :func:`irtlib.bank.coverage.interval_check` measures
by how much that interval must be widened on real data (the bank's ``inflation`` factors).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from irtlib._typing import ArrayLike
from irtlib.core.kernels import bernoulli_variance, logit_z
from irtlib.errors import InputError

from . import interval_kernel

__all__ = ["Z95", "score_interval"]

#: Two-sided 95% normal quantile.
Z95 = 1.959963984540054


def score_interval(a: ArrayLike, b: ArrayLike, theta: ArrayLike, se: ArrayLike, *,
                   known_mask: ArrayLike | None = None, known_items: ArrayLike | None = None,
                   known_sum: ArrayLike = 0.0, filtered_sum: float = 0.0, n_full: int | None = None,
                   inflation: ArrayLike = 1.0, z: float = Z95,
                   item_se: tuple[ArrayLike, ArrayLike] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Predicted full-benchmark safety score and its interval, vectorised over models.

    Parameters
    ----------
    a, b : ndarray, shape (n_items,)
        The bank's item parameters.
    theta, se : float or ndarray, shape (n_models,)
        Ability estimates and their standard errors.
    known_mask : ndarray of bool, shape (n_items,) or (n_models, n_items), optional
        Bank items whose response is already observed; they count as answered.
    known_items : ndarray of int, shape (n_models, k), optional
        Instead of ``known_mask`` for many models: the known items of each model by index (-1: none),
        e.g. the items an adaptive test gave (:func:`irtlib.bank.coverage.interval_check`). The same
        result as the mask they mark, bit for bit, without a models x items mask.
    known_sum : float or ndarray, shape (n_models,)
        Number of safe responses among the known items.
    filtered_sum : float
        Sum of the calibration safe rates of the items the variance filter removed.
    n_full : int, optional
        Items of the full benchmark (default: the bank's size).
    inflation : float or ndarray
        Factor applied to both half-widths (see :func:`calibrate_bank`).
    z : float
        Normal quantile of the interval (1.96 for 95%).
    item_se : (ndarray, ndarray), each shape (n_items,), optional
        Standard errors of ``a`` and ``b`` (the bank's ``se_a``, ``se_b``): include the uncertainty of the
        item parameters. The predicted score's variance from them, by the delta method with the items'
        errors independent, ``sum_unknown w_j^2 ((theta - b_j)^2 se_a_j^2 + a_j^2 se_b_j^2)`` with
        ``w = P (1 - P)``, is added in quadrature to each half-width (before the inflation).

    Returns
    -------
    (score, lower, upper) : tuple of float or ndarray

    Notes
    -----
    ``S(theta) = (sum_known x_j + sum_unknown P_j(theta) + filtered_sum) / n_full`` increases
    with ``theta``, so ``theta -/+ z se`` maps to a score interval through its endpoints. The
    unknown items' Bernoulli spread ``z sqrt(sum_unknown P_j (1 - P_j)) / n_full`` is added in
    quadrature to each half-width; both are then multiplied by ``inflation``. The interval is
    clipped to [0, 1]. For many models on one bank (``theta`` of shape (n_models,), known items by
    ``known_items`` or none), the probabilities come from the C kernel of
    :mod:`irtlib.bank.interval_kernel` where it can be built: the same values, bit for bit.
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    theta, se = np.asarray(theta, float), np.asarray(se, float)
    n_full = len(a) if n_full is None else n_full
    known = None if known_mask is None else np.asarray(known_mask, bool)
    cells = None
    if known_items is not None:
        if known is not None:
            raise InputError("give known_mask or known_items, not both")
        given = np.asarray(known_items, dtype=np.intp)
        if given.ndim != 2 or given.shape[0] != theta.size or theta.ndim != 1:
            raise InputError(f"known_items must have shape (n_models, k) for {theta.size} models, got {given.shape}")
        cells = np.nonzero(given >= 0)
        cells = (cells[0], given[cells])          # (model, item) of every known cell
        if item_se is not None:                   # the item-uncertainty term reads a mask
            known = np.zeros(theta.shape + a.shape, dtype=bool)
            known[cells] = True

    # many models on one bank, known items by index or none: the C kernel's probabilities (the same values)
    lib = interval_kernel.load() if theta.ndim == 1 and a.ndim == 1 and known_mask is None else None

    def total(t, out):
        # P (models x items) into ``out``, 0 on the known items, and its row sums: in place, the same
        # values and sums as np.where(unknown, probability(...), 0).sum(-1) without its temporaries
        if lib is not None:
            return interval_kernel.probabilities(lib, t, a, b, known_items, out).sum(axis=-1)
        p = expit(logit_z(t[..., None], a, b, out=out), out=out)
        if cells is not None:
            p[cells] = 0.0                        # the known cells only: the same P as the mask's
        elif known is not None:
            np.copyto(p, 0.0, where=known)        # np.where(unknown, P, 0), in place
        return p.sum(axis=-1)

    p, work = np.empty(theta.shape + a.shape), np.empty(theta.shape + a.shape)
    mid = total(theta, p)
    lo = total(theta - z * se, work)
    hi = total(theta + z * se, work)
    var = bernoulli_variance(p, out=work)        # 0 on the known items (P = 0 there)
    if item_se is not None:
        se_a, se_b = (np.asarray(v, float) for v in item_se)
        term = var**2 * ((theta[..., None] - b) ** 2 * se_a**2 + a**2 * se_b**2)
        var = var + (term if known is None else np.where(known, 0.0, term))
    spread = z * np.sqrt(var.sum(axis=-1))
    base = np.asarray(known_sum, float) + filtered_sum
    score = (mid + base) / n_full
    half_lo = inflation * np.hypot(mid - lo, spread) / n_full
    half_hi = inflation * np.hypot(hi - mid, spread) / n_full
    return score, np.clip(score - half_lo, 0.0, 1.0), np.clip(score + half_hi, 0.0, 1.0)
