"""Quadrature grids for the latent trait: the one place posterior integrals over theta are set up.

Used by expected a posteriori (EAP) ability (:mod:`irtlib.core.eap`) and by the marginal maximum
likelihood engines of the graded response model (:mod:`irtlib.extended.grm`) and the multidimensional
2PL (:mod:`irtlib.extended.mirt`). Beyond the paper: the paper estimates ability by MAP only (section
"Model: 2PL").

Two kinds of grid:

- :func:`uniform_grid`: equally spaced points over a bracket, weights proportional to a Normal
  prior density. Posterior integrals by the rectangle rule are accurate to high order for smooth
  integrands that vanish at the ends, and, unlike Gauss-Hermite nodes, the points stay dense
  where a sharp posterior (hundreds of items, SE 0.05) has its mass.
- :func:`normal_grid`: a product Gauss-Hermite grid for a d-dimensional Normal(0, R) latent
  (R a correlation matrix), for the EM engines, whose E-step integrates over the whole prior.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from irtlib._typing import ArrayLike
from irtlib.errors import InputError

__all__ = ["uniform_grid", "normal_grid", "posterior_weights", "logsumexp_rows", "posterior_counts"]


def uniform_grid(*, n_points: int = 801, bounds: tuple[float, float] = (-8.0, 8.0), prior_mean: float = 0.0,
                 prior_sd: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Equally spaced theta points and the log prior at each (up to a constant).

    Returns
    -------
    points : ndarray, shape (n_points,)
    log_prior : ndarray, shape (n_points,)
        ``-0.5 ((theta - prior_mean) / prior_sd)^2``.
    """
    if int(n_points) < 3:
        raise InputError(f"n_points must be at least 3, got {n_points!r}")
    if not prior_sd > 0:
        raise InputError(f"prior_sd must be positive, got {prior_sd!r}")
    points = np.linspace(float(bounds[0]), float(bounds[1]), int(n_points))
    return points, -0.5 * ((points - prior_mean) / prior_sd) ** 2


def normal_grid(corr: ArrayLike, *, n_per_dim: int = 21) -> tuple[np.ndarray, np.ndarray]:
    """Product Gauss-Hermite nodes for a Normal(0, corr) latent in d dimensions.

    Parameters
    ----------
    corr : array_like, shape (d, d)
        Positive definite covariance (a correlation matrix for the MIRT engine).
    n_per_dim : int
        Nodes per dimension (``n_per_dim ** d`` in all).

    Returns
    -------
    points : ndarray, shape (n_per_dim ** d, d)
        ``L z`` for the standard nodes ``z`` and ``L`` the Cholesky factor of ``corr``.
    log_weights : ndarray, shape (n_per_dim ** d,)
        Log quadrature weights, normalised to sum to one.
    """
    corr = np.atleast_2d(np.asarray(corr, dtype=float))
    d = corr.shape[0]
    z, w = np.polynomial.hermite_e.hermegauss(int(n_per_dim))     # weight exp(-z^2 / 2)
    w = w / w.sum()
    mesh = np.stack(np.meshgrid(*([z] * d), indexing="ij"), axis=-1).reshape(-1, d)
    logw = np.log(np.stack(np.meshgrid(*([w] * d), indexing="ij"), axis=-1).reshape(-1, d)).sum(axis=1)
    try:
        chol = np.linalg.cholesky(corr)
    except np.linalg.LinAlgError:
        raise InputError(f"the latent covariance is not positive definite: {corr.tolist()}") from None
    return mesh @ chol.T, logw


def posterior_weights(log_lik: ArrayLike, log_prior: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Normalised posterior weights on a grid, and the log marginal likelihood.

    Parameters
    ----------
    log_lik : array_like, shape (n_models, n_points)
        Log-likelihood of each model's responses at each grid point.
    log_prior : array_like, shape (n_points,)
        Log prior (or log quadrature weight) at each point; need not be normalised.

    Returns
    -------
    weights : ndarray, shape (n_models, n_points)
        Rows sum to one.
    log_marginal : ndarray, shape (n_models,)
        ``log sum_q exp(log_lik + log_prior)``.
    """
    joint = np.asarray(log_lik, dtype=float) + np.asarray(log_prior, dtype=float)
    norm = logsumexp_rows(joint)
    if joint.ndim == 2 and joint.flags.c_contiguous:    # a new C-ordered array: np.exp(joint - norm) in its buffer
        np.subtract(joint, norm[:, None], out=joint)
        return np.exp(joint, out=joint), norm
    return np.exp(joint - norm[:, None]), norm


def logsumexp_rows(a: np.ndarray) -> np.ndarray:
    """``scipy.special.logsumexp(a, axis=1)`` of a 2-D float64 array, by scipy's own steps: the same bits, sooner.

    scipy (1.17) takes each row's largest element out of the sum, ``log1p(sum(exp(a - max)) / m) + log(m) +
    max`` with ``m`` the number of elements equal to the maximum, and then replaces a result that is not
    finite by ``log(sum(exp(a)))``, which it computes for every row first. Here the same numpy operations
    run on the same arrays in the same order (so every sum adds the same terms the same way), the
    fallback only for the rows that need it, and without scipy's array-API dispatch: about twice as
    fast on a posterior grid (77 x 729), which the EAP estimates and the GRM's and M2PL's marginal
    likelihoods evaluate at every step. On a C-ordered copy the shift and the exponential are written into
    the copy's buffer (the same values in the same layout, so the same sum). Any other input goes to scipy.

    Parameters
    ----------
    a : ndarray, shape (n_rows, n_points)

    Returns
    -------
    ndarray, shape (n_rows,)
    """
    if not (isinstance(a, np.ndarray) and a.ndim == 2 and a.dtype == np.float64 and a.size):
        return logsumexp(a, axis=1)
    a_max = a.max(axis=1, keepdims=True)
    at_max = a == a_max
    rest = np.array(a, copy=True)                   # order "K", as scipy's copy: the layout orders the sums
    np.copyto(rest, -np.inf, where=at_max)          # the maxima, separated out of the main sum
    m = at_max.sum(axis=1, keepdims=True, dtype=a.dtype)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if rest.flags.c_contiguous:                 # exp(rest - max) in rest's buffer: the same C-ordered table
            np.subtract(rest, a_max, out=rest)
            shifted = np.exp(rest, out=rest)
        else:
            shifted = np.exp(rest - a_max)
        s = shifted.sum(axis=1, keepdims=True, dtype=a.dtype)
        s = np.where(s == 0, s, s / m)
        sign = np.sign(s + 1) * np.sign(m)
        s = np.where(s < -1, -s - 2, s)
        out = np.log1p(s) + np.log(np.abs(m)) + a_max
        out[sign < 0] = np.nan
        direct = ~np.isfinite(out[:, 0])
        if direct.any():                            # scipy's direct sum, where the shifted one is not finite
            out[direct] = np.log(np.exp(a[direct]).sum(axis=1, keepdims=True))
    return out[:, 0]


#: :func:`posterior_counts` lifts the weights by this power of two (and scales the counts back by its inverse).
LIFT_EXPONENT = 64
#: Weights at most this large in magnitude are lifted: the lifted sums of up to 2^64 rows stay far from overflow.
LIFT_LIMIT = 2.0 ** 800


def posterior_counts(weights: np.ndarray, indicator: np.ndarray) -> np.ndarray:
    """``weights.T @ indicator`` for a 0/1 ``indicator``, the same bits, without subnormal operands.

    The expected counts of an EM or marginal-likelihood gradient (Bock and Aitkin 1981): posterior
    weights (models x nodes) summed over the models that gave each response. Far from every model
    the weights underflow into the subnormal range, where each multiply-add of the matrix product
    costs a microcode assist (on HarmBench's M2PL grid, 77 x 729, about 2% of the weights made the
    product five to six times slower). Here the weights are multiplied by ``2^64`` first and the
    product by ``2^-64`` after. Both scalings are exact (a power of two times a double, no overflow,
    and the result is the double the product would have given), and so is every operation of the
    product in between: with a 0/1 indicator each term is a weight or zero, exactly, and each sum
    of such terms either has an exact result (below ``2^-1022`` in the original, a multiple of
    ``2^-1074``, so representable in both) or rounds, in the normal range, at the same relative
    position in both (rounding to nearest commutes with a power-of-two scaling that neither
    overflows nor leaves the normal range), whatever order the BLAS adds the terms in. So the
    product of the lifted weights is ``2^64`` times the original's, bit for bit.

    Parameters
    ----------
    weights : ndarray, shape (n_models, n_nodes), float64
        Posterior weights (:func:`posterior_weights`).
    indicator : ndarray, shape (n_models, n_cells), float64
        Every entry 0.0 or 1.0 (which responses each model gave); the caller guarantees it.

    Returns
    -------
    ndarray, shape (n_nodes, n_cells)
        ``weights.T @ indicator``'s values. Weights that are not finite or exceed :data:`LIFT_LIMIT`
        in magnitude take the plain product.
    """
    w = np.asarray(weights)
    if not (w.dtype == np.float64 and w.ndim == 2 and w.size and np.isfinite(w).all()
            and np.abs(w).max() <= LIFT_LIMIT):
        return w.T @ indicator
    lifted = w * 2.0 ** LIFT_EXPONENT                # the same layout as the weights: the same BLAS call
    out = lifted.T @ indicator
    out *= 2.0 ** -LIFT_EXPONENT
    return out
