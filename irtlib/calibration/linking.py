"""Linking two 2PL calibrations through their common items: mean/sigma, mean/mean and Stocking-Lord.

Two banks calibrated apart measure on scales that differ by a linear map. With ``A`` and ``B`` the
linking constants, a parameter of the new calibration (``x``) is on the base calibration's scale
(``y``) as ``theta_y = A theta_x + B``, ``b_y = A b_x + B``, ``a_y = a_x / A`` (probabilities
unchanged). The constants are estimated from the common items' two sets of parameters:

- mean/sigma (Marco, 1977): ``A = SD(b_y) / SD(b_x)``, ``B = mean(b_y) - A mean(b_x)``;
- mean/mean (Loyd and Hoover, 1980): ``A = mean(a_x) / mean(a_y)``, the same ``B``;
- Stocking-Lord (1983): the ``(A, B)`` minimising the squared difference of the common items'
  test characteristic curves, ``sum_q w_q [sum_j P(theta_q; a_yj, b_yj) - sum_j P(theta_q; a_xj / A, A b_xj + B)]^2``,
  over a grid of abilities on the base scale weighted by a Normal density (scipy's ``least_squares``,
  started at mean/sigma).

Their error: the SD of each constant over a bootstrap of the common items (drawn with replacement);
the resamples' Stocking-Lord minima are found all at once by a damped Gauss-Newton iteration on the
same criterion (:func:`_stocking_lord`), started at the point estimate.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from irtlib._typing import ArrayLike
from irtlib.core.kernels import bernoulli_variance, probability
from irtlib.errors import InputError

__all__ = ["LINK_METHODS", "MIN_COMMON", "linking_constants", "link_constants_with_errors"]

#: The linking methods, in the order reported.
LINK_METHODS = ("mean/sigma", "mean/mean", "stocking-lord")
#: Fewest common items a link is made through (below it the constants are too uncertain to use).
MIN_COMMON = 5
#: Bootstrap resamples solved at once (memory: a few ``_BLOCK x 41 x n_common`` arrays).
_BLOCK = 25
#: Ability grid of the Stocking-Lord criterion, in SDs of the base scale's abilities, and its Normal weights.
_GRID = np.linspace(-4.0, 4.0, 41)
_WEIGHTS = np.exp(-0.5 * _GRID**2) / np.exp(-0.5 * _GRID**2).sum()


def _mean_sigma(a_x, b_x, a_y, b_y):
    slope = b_y.std(axis=-1, ddof=1) / b_x.std(axis=-1, ddof=1)
    return slope, b_y.mean(axis=-1) - slope * b_x.mean(axis=-1)


def _mean_mean(a_x, b_x, a_y, b_y):
    slope = a_x.mean(axis=-1) / a_y.mean(axis=-1)
    return slope, b_y.mean(axis=-1) - slope * b_x.mean(axis=-1)


def _tcc(params: np.ndarray, counts: np.ndarray, a_x, b_x, grid):
    """Test characteristic curves of the (resampled) common items on the base scale, and their Jacobian.

    ``params`` (R, 2) holds ``(A, B)`` per resample, ``counts`` (R, n_common) how often each item was
    drawn (all ones: the items themselves). Returns ``tcc`` (R, Q) and ``d tcc / d (A, B)`` (R, Q, 2):
    with ``z = (a / A)(theta - A b - B)``, ``dz/dA = -a (theta - B) / A^2`` and ``dz/dB = -a / A``.
    """
    slope, shift = params[:, 0, None, None], params[:, 1, None, None]
    theta = grid[None, :, None]
    p = probability(theta, a_x / slope, slope * b_x + shift)          # (R, Q, n)
    w = bernoulli_variance(p) * counts[:, None, :]
    tcc = np.einsum("rqn,rn->rq", p, counts)
    jac = np.stack([(w * (-a_x * (theta - shift) / slope**2)).sum(axis=2), (w * (-a_x / slope)).sum(axis=2)], axis=2)
    return tcc, jac


def _stocking_lord(counts, a_x, b_x, a_y, b_y, *, start, grid, weights, iterations: int = 50):
    """``(A, B)`` (R, 2) minimising each resample's Stocking-Lord criterion: damped Gauss-Newton, vectorised.

    Each resample's step solves its 2 x 2 normal equations; a step that does not lower that resample's
    criterion is halved (up to 30 times).
    """
    target = counts @ probability(grid[:, None], a_y, b_y).T                # (R, Q)
    params = np.broadcast_to(np.asarray(start, float), (counts.shape[0], 2)).copy()

    def loss(v):
        tcc, jac = _tcc(v, counts, a_x, b_x, grid)
        r = target - tcc
        return (weights * r**2).sum(axis=1), r, jac

    current, r, jac = loss(params)
    for _ in range(iterations):
        jw = jac * weights[None, :, None]
        normal = np.einsum("rqi,rqj->rij", jw, jac)
        step = np.linalg.solve(normal + 1e-12 * np.eye(2), np.einsum("rqi,rq->ri", jw, r)[..., None])[..., 0]
        if np.abs(step).max() < 1e-9:                 # every resample at its minimum
            break
        scale = np.ones(len(params))
        for _ in range(30):
            trial = params + scale[:, None] * step
            trial[:, 0] = np.maximum(trial[:, 0], 1e-3)                     # A stays positive
            value, r_new, jac_new = loss(trial)
            worse = value > current * (1 + 1e-12)
            if not worse.any():
                break
            scale = np.where(worse, scale / 2, scale)
        moved = ~worse
        params[moved], current[moved] = trial[moved], value[moved]
        r[moved], jac[moved] = r_new[moved], jac_new[moved]
    return params


def _stocking_lord_scipy(a_x, b_x, a_y, b_y, *, start, grid, weights):
    """The criterion minimised by scipy (least squares on the weighted residuals), for one set of items."""
    from scipy.optimize import least_squares  # here: `irtlib --help` imports this module's names only

    ones, root = np.ones((1, a_x.size)), np.sqrt(weights)
    target = probability(grid[:, None], a_y, b_y).sum(axis=1)

    def residuals(v):
        return root * (target - _tcc(v[None, :], ones, a_x, b_x, grid)[0][0])

    def jacobian(v):
        return -root[:, None] * _tcc(v[None, :], ones, a_x, b_x, grid)[1][0]

    found = least_squares(residuals, np.asarray(start, float), jac=jacobian, xtol=1e-12, ftol=1e-12, gtol=1e-12)
    return float(found.x[0]), float(found.x[1])


def linking_constants(a_x: ArrayLike, b_x: ArrayLike, a_y: ArrayLike, b_y: ArrayLike, *,
                      theta_mean: float = 0.0, theta_sd: float = 1.0) -> dict[str, tuple[float, float]]:
    """``(A, B)`` of each method (:data:`LINK_METHODS`) from the common items' parameters.

    Parameters
    ----------
    a_x, b_x : array_like, shape (n_common,)
        The common items on the new scale.
    a_y, b_y : array_like, shape (n_common,)
        The same items on the base scale.
    theta_mean, theta_sd : float
        Mean and SD of the base scale's abilities: where the Stocking-Lord grid lies and its weights.

    Returns
    -------
    dict
        ``method -> (A, B)``.
    """
    a_x, b_x, a_y, b_y = (np.asarray(v, dtype=float) for v in (a_x, b_x, a_y, b_y))
    out = {"mean/sigma": tuple(map(float, _mean_sigma(a_x, b_x, a_y, b_y))),
           "mean/mean": tuple(map(float, _mean_mean(a_x, b_x, a_y, b_y)))}
    out["stocking-lord"] = _stocking_lord_scipy(a_x, b_x, a_y, b_y, start=out["mean/sigma"],
                                                grid=theta_mean + theta_sd * _GRID, weights=_WEIGHTS)
    return out


def link_constants_with_errors(a_x: ArrayLike, b_x: ArrayLike, a_y: ArrayLike, b_y: ArrayLike, *,
                               theta_mean: float = 0.0, theta_sd: float = 1.0, n_boot: int = 100, seed: int = 0,
                               min_common: int = MIN_COMMON, source: str = "link") -> pd.DataFrame:
    """Linking constants of every method with their bootstrap standard errors.

    Parameters
    ----------
    a_x, b_x, a_y, b_y, theta_mean, theta_sd
        As :func:`linking_constants`.
    n_boot, seed : int
        Bootstrap resamples of the common items, and their seed (below 2: no bootstrap, errors NaN).
    min_common : int
        Refuse a link through fewer common items.
    source : str
        Named in the error.

    Returns
    -------
    DataFrame indexed by method
        ``A``, ``B``, ``se_A``, ``se_B`` (SDs over the resamples), ``n_common``.

    Raises
    ------
    InputError
        Fewer than ``min_common`` common items (the message says how many there are).
    """
    a_x, b_x, a_y, b_y = (np.asarray(v, dtype=float) for v in (a_x, b_x, a_y, b_y))
    n = a_x.size
    if n < min_common:
        raise InputError(f"{source}: only {n} common item{'s' * (n != 1)}: a link needs at least {min_common}")
    point = linking_constants(a_x, b_x, a_y, b_y, theta_mean=theta_mean, theta_sd=theta_sd)
    if n_boot < 2:
        return pd.DataFrame([{"method": m, "A": point[m][0], "B": point[m][1], "se_A": np.nan, "se_B": np.nan,
                              "n_common": n} for m in LINK_METHODS]).set_index("method")
    picks = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    boot = {"mean/sigma": _mean_sigma(a_x[picks], b_x[picks], a_y[picks], b_y[picks]),
            "mean/mean": _mean_mean(a_x[picks], b_x[picks], a_y[picks], b_y[picks])}
    grid, weights = theta_mean + theta_sd * _GRID, _WEIGHTS
    counts = np.stack([np.bincount(p, minlength=n) for p in picks]).astype(float)
    sl = np.concatenate([_stocking_lord(counts[r:r + _BLOCK], a_x, b_x, a_y, b_y, start=point["stocking-lord"],
                                        grid=grid, weights=weights) for r in range(0, n_boot, _BLOCK)])
    boot["stocking-lord"] = (sl[:, 0], sl[:, 1])
    rows = []
    for method in LINK_METHODS:
        slope, shift = (np.asarray(v, float) for v in boot[method])
        ok = np.isfinite(slope) & np.isfinite(shift)          # a resample of items of one difficulty has SD 0
        rows.append({"method": method, "A": point[method][0], "B": point[method][1],
                     "se_A": float(slope[ok].std(ddof=1)), "se_B": float(shift[ok].std(ddof=1)), "n_common": n})
    return pd.DataFrame(rows).set_index("method")
