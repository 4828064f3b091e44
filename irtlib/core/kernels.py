"""The two-parameter logistic (2PL) item response model.

Everything here is elementwise and broadcasts like numpy: pass ``theta`` with shape
``(n_models, 1)`` and ``a``, ``b`` with shape ``(n_items,)`` to get an
``(n_models, n_items)`` array.

Paper, section "Model: 2PL": ``P(x_mj = 1 | theta_m, a_j, b_j) = sigmoid(a_j (theta_m - b_j))``
with ``x_mj = 1`` a safe response.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_expit

from irtlib._typing import ArrayLike

__all__ = [
    "sigmoid",
    "probability",
    "log_likelihood",
    "fisher_information",
    "expected_score",
]


def sigmoid(z: ArrayLike) -> np.ndarray:
    """Numerically stable logistic function ``1 / (1 + exp(-z))``.

    Never overflows: ``sigmoid(-1000) == 0.0`` and ``sigmoid(1000) == 1.0`` without warnings.
    """
    return expit(np.asarray(z, dtype=float))


def probability(theta: ArrayLike, a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """Probability of a safe response under the 2PL model.

    Parameters
    ----------
    theta : array_like
        Abilities; broadcast against ``a`` and ``b``.
    a, b : array_like
        Item discriminations and difficulties.

    Returns
    -------
    ndarray
        ``sigmoid(a * (theta - b))`` with the broadcast shape of the inputs.
    """
    theta, a, b = (np.asarray(v, dtype=float) for v in (theta, a, b))
    return sigmoid(a * (theta - b))


def log_likelihood(responses: ArrayLike, theta: ArrayLike, a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """Bernoulli log-likelihood of each observed response (NaN where unobserved).

    Uses ``x * z - softplus(z)`` with ``z = a (theta - b)``, which stays finite for any ``z``.

    Parameters
    ----------
    responses : array_like
        0/1 responses with NaN for unobserved cells.
    theta, a, b : array_like
        Broadcast against ``responses``.

    Returns
    -------
    ndarray
        Same shape as the broadcast inputs; NaN where ``responses`` is NaN.
    """
    x = np.asarray(responses, dtype=float)
    z = np.asarray(a, dtype=float) * (np.asarray(theta, dtype=float) - np.asarray(b, dtype=float))
    return x * log_expit(z) + (1.0 - x) * log_expit(-z)


def fisher_information(theta: ArrayLike, a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """Fisher information of 2PL items at ``theta``: ``a^2 P (1 - P)``.

    Paper, section "Adaptive selection (Algorithm 1)": Fluid Benchmarking picks the unused item
    with the largest ``I_j(theta_hat)``.

    Returns
    -------
    ndarray
        Broadcast shape of ``theta``, ``a`` and ``b``.
    """
    theta, a, b = (np.asarray(v, dtype=float) for v in (theta, a, b))
    z = a * (theta - b)
    # P (1 - P) as sigmoid(z) sigmoid(-z): both factors stay accurate in the tails, where
    # 1 - sigmoid(z) rounds to 0 for z > 37 and the information would vanish.
    return a * a * sigmoid(z) * sigmoid(-z)


def expected_score(theta: ArrayLike, a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """Expected safety score (share of safe responses) of models with ability ``theta``.

    Parameters
    ----------
    theta : array_like, shape (n_models,) or scalar
    a, b : array_like, shape (n_items,)

    Returns
    -------
    ndarray, shape (n_models,) or scalar
        The mean over items of ``probability(theta, a, b)``.
    """
    theta = np.asarray(theta, dtype=float)
    p = probability(theta[..., None], np.asarray(a, float), np.asarray(b, float))
    return p.mean(axis=-1)
