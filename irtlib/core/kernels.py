"""The formulas of the 1PL, 2PL and 3PL item response models: the one place each is written.

Everything here is elementwise and broadcasts like numpy: pass ``theta`` with shape
``(n_models, 1)`` and ``a``, ``b`` (and ``c``) with shape ``(n_items,)`` to get an
``(n_models, n_items)`` array.

Paper, section "Model: 2PL": ``P(x_mj = 1 | theta_m, a_j, b_j) = sigmoid(a_j (theta_m - b_j))``
with ``x_mj = 1`` a safe response. The 1PL is the 2PL with one shared ``a``; the 3PL (the
model-check chapter) adds a lower asymptote ``c_j``:
``P = c_j + (1 - c_j) sigmoid(a_j (theta_m - b_j))``. Every function takes ``c=None`` for the
2PL (and the 1PL), where it returns exactly what the 2PL formula gives.

Tail safety. With ``z = a (theta - b)``, ``1 - sigmoid(z)`` rounds to 0 once ``z > 37``, so
nothing here forms ``1 - P`` from a rounded ``P``: ``1 - sigmoid(z)`` is ``sigmoid(-z)``, and the
3PL's ratio ``sigmoid(z) / P`` is ``1 / (1 + c e^-z) = sigmoid(z - log c)``. So the information,
the score and the log-likelihood keep their relative accuracy out to ``|z|`` of several hundred
(tests/test_kernels.py checks ``|z| = 40`` and ``800``).

The other item response models of :mod:`irtlib.extended` (graded response, multidimensional
2PL) are different models and keep their formulas in their own modules; the single-precision
information screen of :class:`irtlib.selection.adaptive.MaxInformation` is the one deliberate
second form (it is tested against :func:`fisher_information`).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_expit

from irtlib._typing import ArrayLike

__all__ = [
    "sigmoid",
    "logit_z",
    "probability",
    "log_likelihood",
    "fisher_information",
    "score",
    "score_and_information",
    "z_derivatives",
    "response_terms",
    "expected_score",
    "probability_slope",
    "bernoulli_variance",
]


def sigmoid(z: ArrayLike, *, out: np.ndarray | None = None) -> np.ndarray:
    """Numerically stable logistic function ``1 / (1 + exp(-z))``.

    Never overflows: ``sigmoid(-1000) == 0.0`` and ``sigmoid(1000) == 1.0`` without warnings.
    ``out``: a float array of ``z``'s shape to write into (the same values without a temporary).
    """
    if out is None:
        return expit(np.asarray(z, dtype=float))
    return expit(np.asarray(z, dtype=float), out=out)


def logit_z(theta: ArrayLike, a: ArrayLike, b: ArrayLike, *, out: np.ndarray | None = None) -> np.ndarray:
    """The linear predictor ``z = a (theta - b)`` of every model (1PL/2PL/3PL), broadcast.

    ``out``: an array of the broadcast shape to write into (the calibration engine's work arrays).
    """
    if out is None:
        return np.asarray(a, dtype=float) * (np.asarray(theta, dtype=float) - np.asarray(b, dtype=float))
    np.subtract(theta, b, out=out)
    return np.multiply(out, a, out=out)


def _guessing_ratio(z: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``sigmoid(z) / P`` of the 3PL, ``1 / (1 + c e^-z) = sigmoid(z - log c)``: 1 where ``c = 0``."""
    with np.errstate(divide="ignore"):
        return expit(z - np.log(c))


def probability(theta: ArrayLike, a: ArrayLike, b: ArrayLike, c: ArrayLike | None = None) -> np.ndarray:
    """Probability of a safe response: ``c + (1 - c) sigmoid(a (theta - b))``.

    Parameters
    ----------
    theta : array_like
        Abilities; broadcast against ``a`` and ``b``.
    a, b : array_like
        Item discriminations and difficulties.
    c : array_like, optional
        Lower asymptotes (3PL); None is the 2PL (paper, section "Model: 2PL").

    Returns
    -------
    ndarray
        The broadcast shape of the inputs.
    """
    s = sigmoid(logit_z(theta, a, b))
    if c is None:
        return s
    c = np.asarray(c, dtype=float)
    return c + (1.0 - c) * s


def log_likelihood(responses: ArrayLike, theta: ArrayLike, a: ArrayLike, b: ArrayLike,
                   c: ArrayLike | None = None) -> np.ndarray:
    """Bernoulli log-likelihood of each observed response (NaN where unobserved).

    The 2PL uses ``x log sigmoid(z) + (1 - x) log sigmoid(-z)`` with ``z = a (theta - b)``,
    finite for any ``z``. The 3PL uses ``log P = log sigmoid(z) - log sigmoid(z - log c)`` and
    ``log(1 - P) = log(1 - c) + log sigmoid(-z)``, equally finite.

    Parameters
    ----------
    responses : array_like
        0/1 responses with NaN for unobserved cells.
    theta, a, b, c : array_like
        Broadcast against ``responses`` (``c=None``: the 2PL).

    Returns
    -------
    ndarray
        Same shape as the broadcast inputs; NaN where ``responses`` is NaN.
    """
    x = np.asarray(responses, dtype=float)
    z = logit_z(theta, a, b)
    if c is None:
        return x * log_expit(z) + (1.0 - x) * log_expit(-z)
    c = np.asarray(c, dtype=float)
    with np.errstate(divide="ignore"):
        log_p = log_expit(z) - log_expit(z - np.log(c))
    log_q = np.log1p(-c) + log_expit(-z)
    return x * log_p + (1.0 - x) * log_q


def fisher_information(theta: ArrayLike, a: ArrayLike, b: ArrayLike, c: ArrayLike | None = None) -> np.ndarray:
    """Fisher information of items about ``theta``: ``a^2 P (1 - P)``, Birnbaum's for the 3PL.

    Paper, section "Adaptive selection (Algorithm 1)": Fluid Benchmarking picks the unused item
    with the largest ``I_j(theta_hat)``. For the 3PL, Birnbaum's
    ``a^2 (1 - c) s^2 (1 - s) / P`` with ``s = sigmoid(z)`` is evaluated as
    ``a^2 (1 - c) sigmoid(z) sigmoid(-z) sigmoid(z - log c)``, the same value with no factor
    that rounds to 0 in either tail; at ``c = 0`` it is the 2PL's value.

    Returns
    -------
    ndarray
        Broadcast shape of ``theta``, ``a``, ``b`` (and ``c``).
    """
    a = np.asarray(a, dtype=float)
    z = logit_z(theta, a, b)
    # P (1 - P) as sigmoid(z) sigmoid(-z): both factors stay accurate in the tails, where
    # 1 - sigmoid(z) rounds to 0 for z > 37 and the information would vanish.
    info = a * a * sigmoid(z) * sigmoid(-z)
    if c is None:
        return info
    c = np.asarray(c, dtype=float)
    return info * (1.0 - c) * _guessing_ratio(z, c)


def probability_slope(theta: ArrayLike, a: ArrayLike, b: ArrayLike, c: ArrayLike | None = None) -> np.ndarray:
    """``dP / dtheta``: ``a (1 - c) sigmoid(z) sigmoid(-z)`` (``a P (1 - P)`` for the 2PL).

    The slope of an item characteristic curve; summed over items it is the slope of the test
    characteristic curve, which turns a spread on the score scale into one on the theta scale
    (:class:`irtlib.selection.certify.Cut`). Tail-safe as :func:`fisher_information`.

    Returns
    -------
    ndarray
        Broadcast shape of ``theta``, ``a``, ``b`` (and ``c``).
    """
    a = np.asarray(a, dtype=float)
    z = logit_z(theta, a, b)
    slope = a * sigmoid(z) * sigmoid(-z)
    if c is None:
        return slope
    return slope * (1.0 - np.asarray(c, dtype=float))


def z_derivatives(responses: ArrayLike, z: ArrayLike, c: ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Score and expected information of each cell with respect to ``z = a (theta - b)``.

    ``d log L / dz`` and ``E[-d^2 log L / dz^2] = (dP/dz)^2 / (P (1 - P))``: the 2PL's
    ``x - s`` and ``s (1 - s)``; the 3PL's ``(x - P) s / P`` and ``(1 - c) s^2 (1 - s) / P``
    (tail-safe forms as in :func:`fisher_information`). The chain rule turns them into what
    each estimator needs: times ``a`` (and ``a^2``) for theta, times ``z`` for ``log a``,
    times ``-a`` for ``b`` (:func:`irtlib.core.ability.map_ability`, the calibration engines).

    Parameters
    ----------
    responses : array_like
        0 or 1 (unobserved cells must be masked by the caller).
    z : array_like
        Linear predictors, broadcast against ``responses``.
    c : array_like, optional
        Lower asymptotes (3PL); None is the 2PL.

    Returns
    -------
    g_z, w_zz : ndarray
        The broadcast shape.
    """
    x = np.asarray(responses, dtype=float)
    z = np.asarray(z, dtype=float)
    s, q = sigmoid(z), sigmoid(-z)
    if c is None:       # x - P as x (1 - P) - (1 - x) P: no cancellation against a rounded P near 1
        return x * q - (1.0 - x) * s, s * q
    c = np.asarray(c, dtype=float)
    ratio = _guessing_ratio(z, c)                   # s / P
    # x - P = x - 1 + (1 - c) sigmoid(-z): no cancellation against a rounded P near 1
    return (x - 1.0 + (1.0 - c) * q) * ratio, (1.0 - c) * s * q * ratio


def response_terms(flip: np.ndarray, z: np.ndarray, *, observed: np.ndarray | None = None,
                   out: tuple[np.ndarray, ...] | None = None) -> tuple[float, np.ndarray, np.ndarray]:
    """Total log-likelihood, and score and information in ``z`` of each 2PL cell, from one ``exp``.

    The calibration engine's per-cell kernel (:mod:`irtlib.calibration.joint_map`): the sum of
    :func:`log_likelihood` and the values of :func:`z_derivatives` of the 2PL, computed with one
    transcendental call per cell instead of five. With ``y = (1 - 2x) z`` (``-z`` for a safe
    response, ``z`` for an unsafe one) and ``e = exp(-|y|)``: ``log L = -log(1 + e) - max(y, 0)``,
    ``x - P = -(1 - 2x) sigmoid(y)`` and ``P (1 - P) = e / (1 + e)^2``, the last two exact in both
    tails. The logarithms are taken of products of 512 factors ``1 + e`` (each in [1, 2], so a
    product cannot overflow): one ``log`` per 512 cells, the sum accurate to about 1e-13 per group.

    Parameters
    ----------
    flip : ndarray of float
        ``1 - 2x`` per cell: -1 for a safe response, +1 for an unsafe one, 0 for an unobserved cell
        (any float dtype; float32 keeps a large matrix compact).
    z : ndarray of float
        Linear predictors ``a (theta - b)``, the shape of ``flip``.
    observed : ndarray of bool, optional
        Observed cells; None when every cell is. Unobserved cells add nothing.
    out : tuple of 5 ndarrays, optional
        Work arrays of the shape of ``z`` (a caller looping over blocks reuses them, which saves
        allocating about ten temporaries per block); the returned ``g_z`` and ``w_zz`` are two of them.
        Their dtype is the precision of the arithmetic: float32 halves its cost (the calibration
        engine's first steps), float64 by default; the log-likelihood is summed in float64 either way.

    Returns
    -------
    log_lik : float
        ``sum of x log P + (1 - x) log(1 - P)`` over the observed cells.
    g_z, w_zz : ndarray
        ``x - P`` and ``P (1 - P)`` per cell (0 where unobserved), the shape of ``z``.
    """
    y, e, t, g, w = out if out is not None else tuple(np.empty(np.shape(z)) for _ in range(5))
    np.multiply(flip, z, out=y)
    np.abs(y, out=e)
    np.negative(e, out=e)
    with np.errstate(under="ignore"):                # exp(-|y|) below 1e-308 is 0: nothing of it is lost
        np.exp(e, out=e)                             # e = exp(-|y|), in (0, 1]
    np.add(e, 1.0, out=t)
    log_lik = -(_sum_of_logs(t) + np.maximum(y, 0.0, out=g).sum(dtype=np.float64))
    if observed is not None:                         # an unobserved cell has y = 0: it added log 2
        log_lik += float(observed.size - np.count_nonzero(observed)) * np.log(2.0)
    np.reciprocal(t, out=t)                          # sigmoid(|y|)
    np.multiply(e, t, out=e)                         # sigmoid(-|y|)
    np.multiply(e, t, out=w)                         # P (1 - P)
    # sigmoid(y): sigmoid(-|y|) where y < 0, sigmoid(-|y|) + (sigmoid(|y|) - sigmoid(-|y|)) = sigmoid(|y|)
    # elsewhere; a blend, because np.where and np.copyto cost ten times a multiplication here
    np.subtract(t, e, out=t)
    np.multiply(t, np.greater_equal(y, 0.0, out=y), out=t)
    np.add(t, e, out=t)
    np.multiply(t, flip, out=g)
    np.negative(g, out=g)                            # x - P
    if observed is not None:
        np.multiply(w, observed, out=w)
    return float(log_lik), g, w


def _sum_of_logs(values: np.ndarray, group: int = 512) -> float:
    """``sum(log(values))`` for values in [1, 2], as logs of products of ``group`` values."""
    flat = values.reshape(-1)
    whole = flat.size // group * group
    total = np.log(np.multiply.reduce(flat[:whole].reshape(-1, group), axis=1, dtype=np.float64)).sum()
    return float(total + np.log(flat[whole:].astype(np.float64)).sum())


def score(responses: ArrayLike, theta: ArrayLike, a: ArrayLike, b: ArrayLike,
          c: ArrayLike | None = None) -> np.ndarray:
    """Gradient of each cell's log-likelihood with respect to theta: ``a (x - P)`` for the 2PL.

    For the 3PL, ``a (x - P) s / P`` (``s = sigmoid(a (theta - b))``). Broadcast shape; sum over
    items for a model's score, add the prior's ``-(theta - mean) / sd^2`` for the posterior's.
    """
    a = np.asarray(a, dtype=float)
    g_z, _ = z_derivatives(responses, logit_z(theta, a, b), c)
    return a * g_z


def score_and_information(responses: ArrayLike, theta: ArrayLike, a: ArrayLike, b: ArrayLike,
                          c: ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`score` and :func:`fisher_information` of every cell at once (one pass of exponentials).

    What a Newton or Fisher-scoring step on theta needs (:func:`irtlib.core.ability.map_ability`):
    the same values, bit for bit, as the two functions called separately.

    Returns
    -------
    score, information : ndarray
        The broadcast shape of the inputs.
    """
    x = np.asarray(responses, dtype=float)
    a = np.asarray(a, dtype=float)
    z = logit_z(theta, a, b)
    s, q = sigmoid(z), sigmoid(-z)
    info = a * a * s * q
    if c is None:
        return a * (x * q - (1.0 - x) * s), info
    c = np.asarray(c, dtype=float)
    ratio = _guessing_ratio(z, c)
    return a * ((x - 1.0 + (1.0 - c) * q) * ratio), info * (1.0 - c) * ratio


def expected_score(theta: ArrayLike, a: ArrayLike, b: ArrayLike, c: ArrayLike | None = None) -> np.ndarray:
    """Expected safety score (share of safe responses) of models with ability ``theta``.

    Parameters
    ----------
    theta : array_like, shape (n_models,) or scalar
    a, b : array_like, shape (n_items,)
    c : array_like, shape (n_items,), optional
        Lower asymptotes (3PL).

    Returns
    -------
    ndarray, shape (n_models,) or scalar
        The mean over items of ``probability(theta, a, b, c)``.
    """
    theta = np.asarray(theta, dtype=float)
    p = probability(theta[..., None], np.asarray(a, float), np.asarray(b, float), c)
    return p.mean(axis=-1)


def bernoulli_variance(p: ArrayLike, *, out: np.ndarray | None = None) -> np.ndarray:
    """``P (1 - P)``: the variance of a response with success probability ``P`` (any shape).

    The 2PL's information per unit ``a**2`` and the weight of its Newton steps (paper, Section
    "Model: 2PL"); the one place outside :func:`fisher_information` that forms it. ``out``: an array
    of ``P``'s shape (not ``P`` itself) to write into, the same values without a temporary.
    """
    p = np.asarray(p, dtype=float)
    if out is None:
        return p * (1.0 - p)
    return np.multiply(p, np.subtract(1.0, p, out=out), out=out)
