"""A compensatory multidimensional 2PL (M2PL): two or three latent safety traits, and its adaptive test.

Beyond the paper, whose authors name "safety may not be one latent trait" as a limit. Model
``m``'s ability is a vector ``theta_m`` in ``R^D`` with a Normal(0, R) population (R a
correlation matrix), and item ``j`` has loadings ``a_j`` and an intercept ``d_j``::

    P(x_mj = 1 | theta_m) = sigmoid(a_j . theta_m + d_j)

(the formula is :func:`probability`, the one place it lives). With ``D = 1`` this is the 2PL of
:mod:`irtlib.core.kernels` with ``a`` the loading and ``b = -d / a``.

Calibration (:func:`fit_mirt`): marginal maximum likelihood on a product Gauss-Hermite grid
(:func:`irtlib.core.quadrature.normal_grid`), all parameters at once by L-BFGS with the exact gradient
(Fisher's identity: posterior-weighted counts per node; the correlation through the nodes'
positions ``L z`` with ``L`` the Cholesky factor of R, parameterised by unit-length rows).

- *Exploratory* (``structure=None``): every item loads on every dimension, R = I; the solution is
  determined up to an orthogonal rotation (compare loadings after Procrustes rotation).
- *Confirmatory* (``structure`` a boolean items x dimensions mask, e.g. one dimension per
  content category): loadings outside the mask are 0 and R is estimated.

Priors (mild, keeping the mode finite for items every model passes): loadings ~ Normal(0, 2),
intercepts ~ Normal(0, 3).

:class:`MirtItems` is the fitted model as an item model of the adaptive-testing engine, and
:func:`mirt_cat` runs adaptive tests on it with D-optimal selection (the item that most increases
the determinant of the posterior information), scoring each model by its predicted
full-benchmark safety score (the posterior mean of the mean item probability).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import scipy.optimize
from scipy.special import expit

from irtlib._typing import ArrayLike
from irtlib.calibration.blas import thread_limits
from irtlib.core.quadrature import normal_grid, posterior_counts, posterior_weights
from irtlib.errors import InputError

from .logistic_kernel import tables as logistic_tables

__all__ = ["DEFAULT_TOL", "probability", "MirtFit", "fit_mirt", "marginal_log_likelihood", "mirt_scores",
           "structure_from_labels", "MirtItems", "mirt_cat", "MirtCatResult"]


#: :func:`fit_mirt`'s default stopping tolerance.
DEFAULT_TOL = 1e-8


def probability(theta: ArrayLike, loadings: ArrayLike, intercepts: ArrayLike) -> np.ndarray:
    """``sigmoid(theta @ loadings.T + intercepts)``.

    Parameters
    ----------
    theta : array_like, shape (n, D)
    loadings : array_like, shape (n_items, D)
    intercepts : array_like, shape (n_items,)

    Returns
    -------
    ndarray, shape (n, n_items)
    """
    theta = np.atleast_2d(np.asarray(theta, float))
    return expit(theta @ np.asarray(loadings, float).T + np.asarray(intercepts, float))


def structure_from_labels(labels: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """A confirmatory mask with one dimension per distinct label: ``mask[j, c] = labels[j] == c``.

    Returns
    -------
    mask : ndarray of bool, shape (n_items, n_labels)
    names : ndarray
        The labels, in dimension order (sorted).
    """
    names, code = np.unique(np.asarray(labels), return_inverse=True)
    return np.arange(names.size)[None, :] == code[:, None], names


@dataclass(frozen=True)
class MirtFit:
    """A fitted M2PL.

    Attributes
    ----------
    loadings : ndarray, shape (n_items, D)
    intercepts : ndarray, shape (n_items,)
    corr : ndarray, shape (D, D)
        The latent correlation (identity for an exploratory fit).
    theta : ndarray, shape (n_models, D)
        EAP abilities of the calibration models.
    log_likelihood : float
        The marginal log-likelihood at the estimate.
    structure : ndarray of bool or None
    seconds : float
    diagnostics : dict
    """

    loadings: np.ndarray
    intercepts: np.ndarray
    corr: np.ndarray
    theta: np.ndarray
    log_likelihood: float
    structure: np.ndarray | None
    seconds: float
    diagnostics: dict = field(default_factory=dict)

    @property
    def n_dims(self) -> int:
        """D, the number of latent dimensions."""
        return self.loadings.shape[1]

    @property
    def n_parameters(self) -> int:
        """Free parameters (loadings, intercepts, correlations)."""
        free = self.loadings.size if self.structure is None else int(self.structure.sum())
        n_corr = 0 if self.structure is None else self.n_dims * (self.n_dims - 1) // 2
        return free + self.intercepts.size + n_corr


def _check_binary(values):
    try:
        x = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InputError(f"responses must be numbers 0, 1 or NaN: {' '.join(str(exc).split())}") from None
    if x.ndim != 2:
        raise InputError(f"responses must be a (n_models, n_items) array, got shape {x.shape}")
    bad = ~np.isnan(x) & (x != 0) & (x != 1)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise InputError(f"responses must be 0, 1 or NaN; found {float(x[r, c])!r} at row {r}, column {c} "
                         f"({int(bad.sum())} such cells)")
    obs = ~np.isnan(x)
    return np.where(x == 1, 1.0, 0.0), np.where(x == 0, 1.0, 0.0), obs.astype(float)


def _cholesky(u, d):
    """Lower-triangular L with unit-length rows from the free entries u (below the diagonal)."""
    raw = np.eye(d)
    raw[np.tril_indices(d, -1)] = u
    norm = np.linalg.norm(raw, axis=1)
    return raw / norm[:, None], norm


def _marginal(x1, x0, obs, loadings, intercepts, nodes, logw, *, sigmoid=False):
    """Logits ``z`` (Q, J), posterior weights (M, Q), marginal log-likelihoods (M,); and ``expit(z)`` if ``sigmoid``.

    ``log_expit(z)``, ``log_expit(-z)`` and ``expit(z)`` are scipy's, from one pass of
    :func:`irtlib.extended.logistic_kernel.tables`.
    """
    z = nodes @ loadings.T + intercepts                           # (Q, J)
    log_p, log_q, *p = logistic_tables(z, sigmoid=sigmoid)
    ll = x1 @ log_p.T + x0 @ log_q.T                              # (M, Q)
    post, marg = posterior_weights(ll, logw)
    return (z, post, marg, p[0]) if sigmoid else (z, post, marg)


def marginal_log_likelihood(values: ArrayLike, loadings: ArrayLike, intercepts: ArrayLike, corr: ArrayLike, *,
                            n_per_dim: int | None = None) -> float:
    """Marginal log-likelihood of a 0/1 matrix under an M2PL (quadrature as in :func:`fit_mirt`)."""
    x1, x0, obs = _check_binary(values)
    loadings = np.atleast_2d(np.asarray(loadings, float))
    nodes, logw = normal_grid(corr, n_per_dim=n_per_dim or _default_nodes(loadings.shape[1]))
    return float(_marginal(x1, x0, obs, loadings, np.asarray(intercepts, float), nodes, logw)[2].sum())


def _default_nodes(d):
    return {1: 41, 2: 21, 3: 9}.get(d, 7)


#: Most grid points a product quadrature may have (nodes per dimension ** D): beyond, the tables take gigabytes.
MAX_NODES = 200_000


def _count(value, name: str, minimum: int) -> int:
    """``value`` as an int of at least ``minimum`` (a bool, text or a fraction is refused, naming ``name``)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InputError(f"{name} must be an integer of at least {minimum}, got {value!r}")
    return int(value)


def _nodes_per_dim(n_per_dim, d: int, default: int) -> int:
    """The nodes per dimension of a ``d``-dimensional grid, checked against :data:`MAX_NODES`."""
    n = default if n_per_dim is None else _count(n_per_dim, "n_per_dim", 2)
    if n ** d > MAX_NODES:
        raise InputError(f"n_per_dim {n} gives {n}^{d} = {n ** d:,} grid points in {d} dimensions; at most "
                         f"{MAX_NODES:,} fit in memory")
    return n


def fit_mirt(values: ArrayLike, *, n_dims: int = 2, structure: ArrayLike | None = None,
             n_per_dim: int | None = None, prior_loading_sd: float = 2.0, prior_intercept_sd: float = 3.0,
             max_iter: int = 3000, tol: float = DEFAULT_TOL, seed: int = 0) -> MirtFit:
    """Calibrate a compensatory M2PL by marginal maximum likelihood.

    Parameters
    ----------
    values : array_like, shape (n_models, n_items)
        1 safe, 0 unsafe, NaN missing.
    n_dims : int
        D (2 or 3; 1 is the 2PL). Ignored when ``structure`` is given (its columns are D).
    structure : array_like of bool, shape (n_items, D), optional
        Confirmatory: which dimensions each item loads on (:func:`structure_from_labels`); the
        latent correlation is then estimated. None: exploratory, R = I.
    n_per_dim : int, optional
        Gauss-Hermite nodes per dimension (default 21 for D = 2, 9 for D = 3).
    prior_loading_sd, prior_intercept_sd : float
        SDs of the Normal(0, .) priors.
    max_iter, tol
        L-BFGS-B's limits.
    seed : int
        Seeds the small random perturbation of the exploratory start (which breaks the symmetry
        between dimensions).

    Returns
    -------
    MirtFit
    """
    with thread_limits(1, user_api="blas"):     # small products: threads only contend
        return _fit_mirt(values, n_dims=n_dims, structure=structure, n_per_dim=n_per_dim,
                         prior_loading_sd=prior_loading_sd, prior_intercept_sd=prior_intercept_sd, max_iter=max_iter,
                         tol=tol, seed=seed)


def _fit_mirt(values, *, n_dims, structure, n_per_dim, prior_loading_sd, prior_intercept_sd, max_iter, tol, seed):
    start = time.perf_counter()
    x1, x0, obs = _check_binary(values)
    n_models, n_items = x1.shape
    if n_models < 2:
        raise InputError(f"fit_mirt needs at least 2 models, got {n_models}")
    if x1[obs > 0].min() == x1[obs > 0].max():
        raise InputError("fit_mirt: every observed response is the same: there is no variation to fit")
    if structure is not None:
        mask = np.asarray(structure, dtype=bool)
        if mask.shape[0] != n_items or mask.ndim != 2:
            raise InputError(f"structure must have shape ({n_items}, D), got {mask.shape}")
        if not mask.any(axis=1).all():
            raise InputError(f"structure: item {int(np.flatnonzero(~mask.any(axis=1))[0])} loads on no dimension")
        d = mask.shape[1]
    else:
        d = _count(n_dims, "n_dims", 1)
        mask = np.ones((n_items, d), dtype=bool)
    if not 1 <= d <= 4:
        raise InputError(f"n_dims must be 1 to 4 (product quadrature), got {d}")
    confirm = structure is not None and d > 1
    z_std, logw = normal_grid(np.eye(d), n_per_dim=_nodes_per_dim(n_per_dim, d, _default_nodes(d)))
    # start: intercepts from the logits of the safe rates, loadings from the leading singular vectors
    rate = (x1.sum(0) + 0.5) / (obs.sum(0) + 1.0)
    d0 = np.log(rate / (1 - rate))
    centred = np.where(obs > 0, x1 - rate, 0.0)
    _, sv, vt = np.linalg.svd(centred, full_matrices=False)
    a0 = np.clip(vt[:d].T * np.sign(vt[:d].sum(axis=1)) * np.sqrt(n_items), -3, 3)
    a0 = np.abs(a0) if confirm else a0
    rng = np.random.default_rng(seed)
    a0 = np.where(mask, a0 + 0.05 * rng.standard_normal(a0.shape), 0.0)
    if confirm:
        a0 = np.where(mask, np.maximum(np.abs(a0), 0.5), 0.0)
    n_u = d * (d - 1) // 2 if confirm else 0
    p0 = np.concatenate([a0[mask], d0, np.zeros(n_u)])
    n_a = int(mask.sum())
    tril = np.tril_indices(d, -1)

    def unpack(p):
        a = np.zeros((n_items, d))
        a[mask] = p[:n_a]
        return a, p[n_a:n_a + n_items], p[n_a + n_items:]

    def objective(p):
        a, icpt, u = unpack(p)
        chol, norm = _cholesky(u, d) if confirm else (np.eye(d), np.ones(d))
        nodes = z_std @ chol.T
        z, post, marg, p_z = _marginal(x1, x0, obs, a, icpt, nodes, logw, sigmoid=True)
        r1 = posterior_counts(post, x1)                          # post.T @ x1 and post.T @ obs (0/1), the same bits
        n = posterior_counts(post, obs)
        g_z = r1 - n * p_z                                        # (Q, J)
        g_a = (g_z.T @ nodes)[mask] - p[:n_a] / prior_loading_sd ** 2
        g_d = g_z.sum(axis=0) - icpt / prior_intercept_sd ** 2
        value = marg.sum() - 0.5 * (p[:n_a] ** 2).sum() / prior_loading_sd ** 2 \
            - 0.5 * (icpt ** 2).sum() / prior_intercept_sd ** 2
        grads = [g_a, g_d]
        if confirm:
            g_l = (g_z @ a).T @ z_std                             # d value / d L, (D, D)
            g_raw = (g_l - (g_l * chol).sum(axis=1, keepdims=True) * chol) / norm[:, None]
            grads.append(g_raw[tril])
        return -value, -np.concatenate(grads)

    res = scipy.optimize.minimize(objective, p0, jac=True, method="L-BFGS-B",
                                  options={"maxiter": max_iter, "ftol": tol, "gtol": 1e-6})
    a, icpt, u = unpack(res.x)
    chol = _cholesky(u, d)[0] if confirm else np.eye(d)
    corr = chol @ chol.T
    nodes = z_std @ chol.T
    _, post, marg = _marginal(x1, x0, obs, a, icpt, nodes, logw)
    return MirtFit(loadings=a, intercepts=icpt, corr=corr, theta=post @ nodes, log_likelihood=float(marg.sum()),
                   structure=mask if structure is not None else None, seconds=time.perf_counter() - start,
                   diagnostics={"iterations": int(res.nit), "converged": bool(res.success),
                                "message": str(res.message), "nodes": int(nodes.shape[0])})


def mirt_scores(values: ArrayLike, fit: MirtFit, *, n_per_dim: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """EAP abilities and predicted full safety scores of response rows under a fitted M2PL.

    Parameters
    ----------
    values : array_like, shape (n_models, n_items)
        0/1 responses on the fit's items, NaN where not given.

    Returns
    -------
    theta : ndarray, shape (n_models, D)
        Posterior means.
    score : ndarray, shape (n_models,)
        Posterior mean of the model-implied safety score ``mean_j P_j(theta)`` over all items.
    """
    x1, x0, obs = _check_binary(values)
    if x1.shape[1] != fit.loadings.shape[0]:
        raise InputError(f"responses must have shape (n_models, {fit.loadings.shape[0]}), got {x1.shape}")
    nodes, logw = normal_grid(fit.corr, n_per_dim=_nodes_per_dim(n_per_dim, fit.n_dims, _default_nodes(fit.n_dims)))
    _, post, _, p_z = _marginal(x1, x0, obs, fit.loadings, fit.intercepts, nodes, logw, sigmoid=True)
    return post @ nodes, post @ p_z.mean(axis=1)


@dataclass(frozen=True)
class MirtCatResult:
    """Adaptive tests on an M2PL.

    Attributes
    ----------
    items : ndarray of int, shape (n_models, budget)
    score : ndarray, shape (n_models, budget)
        Predicted full-benchmark safety score after each item.
    theta : ndarray, shape (n_models, D)
        Posterior means at the end.
    """

    items: np.ndarray
    score: np.ndarray
    theta: np.ndarray


def _uniform_grid(corr, n_per_dim, half_width=5.0):
    """Equally spaced product grid over [-5, 5]^D, log Normal(0, corr) weights (dense where posteriors are sharp)."""
    d = corr.shape[0]
    g = np.linspace(-half_width, half_width, int(n_per_dim))
    nodes = np.stack(np.meshgrid(*([g] * d), indexing="ij"), axis=-1).reshape(-1, d)
    return nodes, -0.5 * np.einsum("qd,de,qe->q", nodes, np.linalg.inv(corr), nodes)


class MirtItems:
    """A fitted M2PL as an item model of the adaptive-testing engine (:mod:`irtlib.selection.items`).

    The posterior is kept on an equally spaced product grid over [-5, 5]^D with the fit's
    Normal(0, R) prior (:meth:`ability_grid`); the D-optimal selector reads
    :meth:`trace_information`; the predicted full-benchmark score of an ability is the mean item
    probability (:meth:`score_at`).

    Parameters
    ----------
    fit : MirtFit
    n_per_dim : int, optional
        Grid nodes per dimension (default 61 for D = 2, 25 for D = 3).
    """

    def __init__(self, fit: MirtFit, *, n_per_dim: int | None = None):
        self.loadings, self.intercepts, self.corr = fit.loadings, fit.intercepts, fit.corr
        self.dims, self.n_items = fit.n_dims, fit.loadings.shape[0]
        self.n_per_dim = _nodes_per_dim(n_per_dim, fit.n_dims, {1: 401, 2: 61, 3: 25}.get(fit.n_dims, 9))

    def __repr__(self) -> str:
        return f"MirtItems({self.n_items} items, {self.dims} dimensions)"

    def check_responses(self, x: np.ndarray) -> None:
        """Refuse a response other than 0, 1 or NaN (naming the cell)."""
        _check_binary(x)

    def ability_grid(self, prior_mean: float, prior_sd: float, n_points: int) -> tuple[np.ndarray, np.ndarray]:
        """The product grid and the log Normal(0, R) prior (the unidimensional prior settings do not apply)."""
        return _uniform_grid(self.corr, self.n_per_dim)

    def grid_log_likelihood(self, j: np.ndarray, x: np.ndarray, points: np.ndarray,
                            rows: np.ndarray | None = None) -> np.ndarray:
        """Bernoulli log-likelihood of each model's response to its item ``j`` at every node, (n_models, n_nodes)."""
        z = points @ self.loadings[j].T + self.intercepts[j]            # (Q, n_models)
        log_p, log_q = logistic_tables(z)
        return np.where(np.asarray(x)[None, :] == 1, log_p, log_q).T

    def trace_information(self, theta: np.ndarray, cov: np.ndarray) -> np.ndarray:
        """``tr(S I_j) = P_j (1 - P_j) a_j' S a_j`` at each model's posterior mean, (n_models, n_items)."""
        p = probability(theta, self.loadings, self.intercepts)
        return p * (1 - p) * np.einsum("jd,mde,je->mj", self.loadings, cov, self.loadings)

    def score_at(self, points: np.ndarray) -> np.ndarray:
        """The predicted full safety score ``mean_j P_j(theta)`` at every node (in blocks of 256 nodes)."""
        return np.concatenate([probability(points[i:i + 256], self.loadings, self.intercepts).mean(axis=1)
                               for i in range(0, points.shape[0], 256)])


def mirt_cat(responses: ArrayLike, fit: MirtFit, *, budget: int, selection: str = "d-optimal",
             n_per_dim: int | None = None, seed: int = 0) -> MirtCatResult:
    """Adaptive tests of many models on a fitted M2PL, replayed on their 0/1 response rows.

    A thin entry point over the adaptive-testing engine (:func:`irtlib.selection.adaptive.run_adaptive`
    with :class:`MirtItems`, :class:`~irtlib.selection.selectors.DOptimal` or
    :class:`~irtlib.selection.selectors.RandomSelection`, and
    :class:`~irtlib.selection.estimators.EapEstimator` recording the predicted score).

    Parameters
    ----------
    responses : array_like, shape (n_models, n_items)
        NaN cells are unavailable (never selected).
    fit : MirtFit
    budget : int
    selection : {"d-optimal", "random"}
        D-optimal: the item maximising ``det(F + I_j)`` with ``F`` the posterior information,
        i.e. ``P_j (1 - P_j) a_j' S a_j`` at the posterior mean with ``S`` the posterior
        covariance (the matrix determinant lemma). Random: a seeded random order.
    n_per_dim : int, optional
        Nodes per dimension of the equally spaced grid over [-5, 5]^D on which the posterior is
        kept (default 61 for D = 2, 25 for D = 3).

    Returns
    -------
    MirtCatResult
    """
    from irtlib.selection.adaptive import run_adaptive
    from irtlib.selection.estimators import EapEstimator
    from irtlib.selection.selectors import DOptimal, RandomSelection

    x1, _, obs = _check_binary(responses)               # 0, 1 or NaN, or one line naming the cell
    x = np.where(obs > 0, x1, np.nan)
    if x.ndim != 2 or x.shape[1] != fit.loadings.shape[0]:
        raise InputError(f"responses must have shape (n_models, {fit.loadings.shape[0]}), got {x.shape}")
    if selection not in ("d-optimal", "random"):
        raise InputError(f"selection must be 'd-optimal' or 'random', got {selection!r}")
    budget = _count(budget, "budget", 1)
    if not 1 <= budget <= x.shape[1]:
        raise InputError(f"budget must be between 1 and {x.shape[1]}, got {budget}")
    traj = run_adaptive(x, items=MirtItems(fit, n_per_dim=n_per_dim), budget=budget,
                        selector=DOptimal() if selection == "d-optimal" else RandomSelection(),
                        estimator=EapEstimator(value="score"), seed=seed)
    return MirtCatResult(items=traj.items, score=traj.estimate, theta=traj.ability)
