"""Fit diagnostics the paper reports: item-level RMSE, spread of discrimination, ceilings.

Paper, sections "Reported results" (fit quality, appendix E; ceiling separation; Figure 3).
The standard psychometric checks the paper does not run (item fit, Yen's Q3, residual
dimensionality) live in :mod:`irtlib.fit.checks`; the agreement ceiling, a protocol run, in
:mod:`irtlib.protocol.ceiling`.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from irtlib._typing import ArrayLike
from irtlib.calibration.joint_map import Calibration
from irtlib.core.kernels import probability
from irtlib.core.responses import ResponseMatrix
from irtlib.errors import InputError

__all__ = ["item_rmse", "item_rates", "coefficient_of_variation", "cv_interval", "ceiling_counts", "CEILING"]

#: The safety score above which the paper calls a benchmark saturated.
CEILING = 0.95


def item_rates(matrix: ResponseMatrix, calibration: Calibration) -> pd.DataFrame:
    """Observed against model-implied safe rate of every item.

    Parameters
    ----------
    matrix : ResponseMatrix
        The responses the calibration was fitted to (or any matrix over the same models and a
        subset of its items).
    calibration : Calibration

    Returns
    -------
    DataFrame, indexed by item
        ``observed``: share of safe responses among the models that saw the item;
        ``expected``: mean of ``P(theta_m, a_j, b_j)`` over the same models;
        ``residual``: observed minus expected.
    """
    theta = calibration.theta.reindex(matrix.models).to_numpy()
    if np.isnan(theta).any():
        missing = list(matrix.models[np.isnan(theta)][:3])
        raise InputError(f"calibration has no theta for model(s) {missing}")
    a = calibration.a.reindex(matrix.items).to_numpy()
    b = calibration.b.reindex(matrix.items).to_numpy()
    if np.isnan(a).any():
        missing = list(matrix.items[np.isnan(a)][:3])
        raise InputError(f"calibration has no parameters for item(s) {missing}")
    p = probability(theta[:, None], a, b)
    if matrix.n_observations == matrix.values.size:      # nothing missing: plain means (the same sums as nanmean's)
        obs, exp = np.mean(matrix.values, axis=0), np.mean(p, axis=0)
    else:
        p[~matrix.observed] = np.nan
        obs, exp = np.nanmean(matrix.values, axis=0), np.nanmean(p, axis=0)
    return pd.DataFrame({"observed": obs, "expected": exp, "residual": obs - exp}, index=matrix.items)


def item_rmse(matrix: ResponseMatrix, calibration: Calibration) -> float:
    """Root mean squared difference between observed and model-implied item safe rates.

    Appendix E of the paper: 0.008 (Anthropic Red Team) to 0.038 (WMDP-Bio).
    """
    return float(np.sqrt(np.mean(item_rates(matrix, calibration)["residual"] ** 2)))


def coefficient_of_variation(a: ArrayLike, *, ddof: int = 1) -> float:
    """Coefficient of variation ``SD(a) / mean(a)`` of item discriminations (Figure 3).

    The paper does not say which SD it used; we use the sample SD (``ddof=1``). On 100 items
    (SimpleSafety, the smallest bank) the two differ by 0.5%.
    """
    a = np.asarray(a, dtype=float)
    return float(np.std(a, ddof=ddof) / np.mean(a))


def cv_interval(a: ArrayLike, se_a: ArrayLike, *, level: float = 0.95, draws: int = 2000, seed: int = 0,
                ddof: int = 1) -> tuple[float, float]:
    """Interval of the CV of ``a`` for the uncertainty of the items' ``a`` (Figure 3 with error bars).

    Each draw replaces every ``log a_j`` by ``Normal(log a_j, se_a_j / a_j)`` (the items' standard
    errors, :func:`irtlib.calibration.standard_errors.item_standard_errors`, on the scale on which the
    posterior is close to Normal) and recomputes the CV. Estimation noise adds spread to the ``a``, so
    the CV of the estimates is biased upward by about what a draw adds again: the interval is the
    basic (reverse-percentile) bootstrap interval ``[2 cv - q_hi, 2 cv - q_lo]`` of the draws'
    quantiles, which carries that correction, floored at 0.

    Parameters
    ----------
    a, se_a : array_like, shape (n_items,)
        Discriminations and their standard errors.
    level : float
        Coverage of the interval.
    draws, seed : int
        Monte Carlo draws (in blocks of 250) and their seed.
    ddof : int
        As :func:`coefficient_of_variation`.

    Returns
    -------
    (low, high) : tuple of float
    """
    a, se = np.asarray(a, dtype=float), np.asarray(se_a, dtype=float)
    rng = np.random.default_rng(seed)
    log_a, sd = np.log(a), se / a
    blocks = [min(250, draws - start) for start in range(0, draws, 250)]
    # the next block's normal draws are made on another thread while this block's CVs are computed (the
    # generator releases the GIL; its stream, and so every draw, is the one a single thread makes)
    with ThreadPoolExecutor(1) as pool:
        upcoming = pool.submit(rng.standard_normal, (blocks[0], a.size)) if blocks else None
        cvs = []
        for k in range(len(blocks)):
            z = upcoming.result()
            upcoming = pool.submit(rng.standard_normal, (blocks[k + 1], a.size)) if k + 1 < len(blocks) else None
            z *= sd                                  # exp(log a + sd z), in place
            z += log_a
            cvs.append(_cv_rows(np.exp(z, out=z), ddof))
    cvs = np.concatenate(cvs)
    cv = coefficient_of_variation(a, ddof=ddof)
    lo, hi = np.quantile(cvs, [(1 - level) / 2, (1 + level) / 2])
    return max(0.0, float(2 * cv - hi)), float(2 * cv - lo)


def _cv_rows(a: np.ndarray, ddof: int) -> np.ndarray:
    """``np.std(a, axis=1, ddof=ddof) / np.mean(a, axis=1)`` with one sum of each row, overwriting ``a``.

    The same operations in the same order as numpy's ``std`` and ``mean`` (each sums the rows once, ``std``
    then sums the squared deviations), so the same numbers, bit for bit.
    """
    n = a.shape[1]
    mean = np.add.reduce(a, axis=1, keepdims=True)
    mean /= n
    a -= mean
    np.multiply(a, a, out=a)
    var = np.add.reduce(a, axis=1)
    var /= max(n - ddof, 0)
    return np.sqrt(var) / mean[:, 0]


def ceiling_counts(scores: ArrayLike, *, ceiling: float = CEILING) -> dict:
    """How many models score above the ceiling.

    Parameters
    ----------
    scores : Series or array_like
        Safety scores, one per model.
    ceiling : float

    Returns
    -------
    dict
        ``n_models``, ``above`` (strictly above ``ceiling``), ``at_or_above`` and ``perfect``
        (score exactly 1).
    """
    s = np.asarray(scores, dtype=float)
    return {"n_models": int(s.size), "above": int((s > ceiling).sum()),
            "at_or_above": int((s >= ceiling).sum()), "perfect": int((s == 1.0).sum())}
