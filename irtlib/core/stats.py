"""Statistics the method's evaluation needs at every layer: Spearman's rho, written once.

Paper, section "Evaluation": agreement is Spearman's rank correlation between a method's
scores and the full-benchmark safety scores of the test models. The same rho serves the
protocol, the agreement ceiling, the bank's ``spearman_theta_score`` and the book.
"""

from __future__ import annotations

import numpy as np

from irtlib._typing import ArrayLike

__all__ = ["spearman"]


def spearman(x: ArrayLike, y: ArrayLike) -> np.ndarray | float:
    """Spearman's rho (average ranks for ties), row-wise for 2-D ``x``.

    Equals :func:`scipy.stats.spearmanr`; NaN (without a warning) when either side is constant
    or has a NaN.

    Parameters
    ----------
    x : array_like, shape (n,) or (n_rows, n)
    y : array_like, shape (n,)

    Returns
    -------
    float for 1-D ``x``, else ndarray of shape (n_rows,)
    """
    from scipy.stats import rankdata  # scipy.stats takes a second to import: only when used

    x = np.asarray(x, float)
    y = np.asarray(y, float)
    one = x.ndim == 1
    x = np.atleast_2d(x)
    bad = np.isnan(x).any(axis=1) | np.isnan(y).any()
    rx = rankdata(np.where(np.isnan(x), 0.0, x), axis=1)
    ry = rankdata(np.where(np.isnan(y), 0.0, y))
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean()
    den = np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where((den > 0) & ~bad, (rx @ ry) / np.where(den > 0, den, 1.0), np.nan)
    rho = np.clip(rho, -1.0, 1.0)
    return float(rho[0]) if one else rho
