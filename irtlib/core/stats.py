"""Statistics the method's evaluation needs at every layer: Spearman's rho, written once.

Paper, section "Evaluation": agreement is Spearman's rank correlation between a method's
scores and the full-benchmark safety scores of the test models. The same rho serves the
protocol, the agreement ceiling, the bank's ``spearman_theta_score`` and the book.
"""

from __future__ import annotations

import numpy as np

from irtlib._typing import ArrayLike

__all__ = ["spearman", "average_ranks"]


#: Rows up to this long (and without NaN) are ranked by counting pairs (:func:`average_ranks`).
_COUNTED = 64


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n along each row, ties given the mean of their ranks (:func:`scipy.stats.rankdata`'s ``average``).

    Written here because importing ``scipy.stats`` takes one to several seconds, more than a command
    spends on its ranks. Exact: a tie group at sorted positions ``start..end`` gets ``(start + end) / 2 + 1``.

    Parameters
    ----------
    values : ndarray, shape (n_rows, n)

    Returns
    -------
    ndarray of float, shape (n_rows, n)
    """
    values = np.asarray(values, dtype=float)
    n = values.shape[1]
    if n <= _COUNTED and not np.isnan(values).any():
        # short rows (a split's test models): a value's tie group starts after the values below it and ends
        # at the values below or equal to it, so (start + end) / 2 + 1 = (below + at_most + 1) / 2, counted
        # over all pairs in a few numpy calls instead of the sort's dozen (the same integers, the same floats)
        col, row = values[:, :, None], values[:, None, :]
        return ((row < col).sum(axis=2) + (row <= col).sum(axis=2) + 1) / 2
    order = np.argsort(values, axis=1, kind="stable")
    ordered = np.take_along_axis(values, order, axis=1)
    tied = ordered[:, 1:] == ordered[:, :-1]              # position i + 1 continues the tie group of i
    position = np.broadcast_to(np.arange(n), values.shape)
    start = np.maximum.accumulate(np.where(np.pad(~tied, ((0, 0), (1, 0)), constant_values=True), position, 0),
                                  axis=1)
    ends_here = np.pad(~tied, ((0, 0), (0, 1)), constant_values=True)
    end = np.minimum.accumulate(np.where(ends_here, position, n - 1)[:, ::-1], axis=1)[:, ::-1]
    ranks = np.empty(values.shape)
    np.put_along_axis(ranks, order, (start + end) / 2 + 1, axis=1)
    return ranks


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
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    one = x.ndim == 1
    x = np.atleast_2d(x)
    bad = np.isnan(x).any(axis=1) | np.isnan(y).any()
    rx = average_ranks(np.where(np.isnan(x), 0.0, x))
    ry = average_ranks(np.where(np.isnan(y), 0.0, y)[None, :])[0]
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean()
    den = np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where((den > 0) & ~bad, (rx @ ry) / np.where(den > 0, den, 1.0), np.nan)
    rho = np.clip(rho, -1.0, 1.0)
    return float(rho[0]) if one else rho
