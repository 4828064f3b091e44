"""Samejima's graded response model (GRM) for ordered judgments: formulas, calibration, adaptive items.

Beyond the paper, which binarizes every judgment (section "Binarization") and names the loss of
severity as a limit. For an item ``j`` with ordered categories ``0 < 1 < ... < K-1`` (higher is
safer) and increasing thresholds ``b_j1 < ... < b_j,K-1``::

    P(X_mj >= k | theta_m) = sigmoid(a_j (theta_m - b_jk)),   k = 1 .. K-1
    P(X_mj  = k | theta_m) = P(X >= k) - P(X >= k + 1)

so every binarization "X >= k" of a GRM item is a 2PL item with the same ``a`` and difficulty
``b_jk`` (:mod:`irtlib.core.kernels`); with ``K = 2`` the GRM is the 2PL. The formulas live here once:
:func:`category_log_probabilities`, :func:`information`.

Calibration (:func:`fit_grm`) has two engines, both maximising a posterior with the paper's
priors carried over (``log a ~ Normal(0, 1)``, thresholds ``~ Normal(0, prior_b_sd)``) by
L-BFGS with analytic gradients:

- ``"mml"`` (default): marginal maximum likelihood, theta integrated out over a Normal(0, 1)
  latent on Gauss-Hermite nodes (the gradient by Fisher's identity: posterior-weighted expected
  counts, so each evaluation is two matrix products); abilities afterwards by EAP.
- ``"jmap"``: the joint posterior mode over abilities and items, like the 2PL's MAP engine,
  rescaled afterwards so the abilities have mean 0 and SD 1 (the mode's own scale is set by the
  priors, not the data: with many more models than items it shrinks theta several-fold).

Which and why: ``"mml"`` is the default. Joint estimation needs that rescaling and keeps the
incidental-parameter bias of estimating every ability as a free parameter (with 22 models on
AIR-Bench every item parameter rests on 22 responses); marginal ML integrates the abilities out
and is the estimator the independent implementations (girth, mirt) use.
``benchmarks/bench_new_engines.py`` measures both; the tests check both recover known parameters.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import scipy.optimize

from irtlib._typing import ArrayLike
from irtlib.calibration.blas import thread_limits
from irtlib.core.bits import same_bits as _same_bits
from irtlib.core.eap import EAP_POINTS, eap_from_log_likelihood
from irtlib.core.quadrature import normal_grid, posterior_counts, posterior_weights, uniform_grid
from irtlib.errors import InputError

from .logistic_kernel import tables as logistic_tables

__all__ = [
    "category_log_probabilities", "category_probabilities", "information", "log_likelihood", "to_categories",
    "GrmFit", "fit_grm", "grm_ability", "marginal_log_likelihood", "GradedItems", "GRM_ENGINES",
]

GRM_ENGINES = ("mml", "jmap")


# ---------------------------------------------------------------------------- formulas
def _z(theta, a, thresholds):
    """``a (theta - b_k)`` with theta broadcast against items: shape (..., n_items, K-1)."""
    return a[..., None] * (np.asarray(theta, dtype=float)[..., None] - thresholds)


def _log_cat(z, tables=None):
    """Log category probabilities from the cumulative logits ``z`` (..., K-1) -> (..., K).

    ``P_k = sigmoid(z_k) - sigmoid(z_k+1) = sigmoid(z_k) sigmoid(-z_k+1) (1 - exp(z_k+1 - z_k))``,
    accurate in both tails (``z_0 = +inf``, ``z_K = -inf``). ``tables``: ``(log_expit(z), log_expit(-z))``
    when the caller has them (:func:`_cat_tables`).
    """
    # Evaluated column by column where z_0 or z_K is infinite: there log_expit(+inf) is -0.0 and the
    # gap log(1) is 0.0, so the edge categories are (-0.0 + log_expit(-z_1)) + 0.0 and
    # (log_expit(z_(K-1)) + -0.0) + 0.0, the same additions as on the padded table (the same bits),
    # without the transcendental functions of its infinite entries.
    # upper: log sigmoid(z_k), k = 1..K-1; lower: log sigmoid(-z_k) (scipy's log_expit, in one pass)
    upper, lower = logistic_tables(z) if tables is None else tables
    out = np.empty(z.shape[:-1] + (z.shape[-1] + 1,))
    # (-0.0 + v) + 0.0 and (v + -0.0) + 0.0 are v + 0.0 for every double v (adding -0.0 changes nothing,
    # a NaN included): one addition each
    np.add(lower[..., 0], 0.0, out=out[..., 0])
    np.add(upper[..., -1], 0.0, out=out[..., -1])
    if z.shape[-1] > 1:
        with np.errstate(divide="ignore", invalid="ignore"):
            gap = np.log(-np.expm1(np.minimum(z[..., 1:] - z[..., :-1], -1e-300)))
        out[..., 1:-1] = upper[..., :-1] + lower[..., 1:] + gap
    return out


def _cat_tables(z):
    """:func:`_log_cat` of ``z`` and ``expit(z) * expit(-z)`` (each threshold's ``s (1 - s)``), from one pass.

    scipy's ``log_expit`` and ``expit`` of ``z`` and ``-z``, bit for bit, by
    :func:`irtlib.extended.logistic_kernel.tables`.
    """
    upper, lower, s, s_neg = logistic_tables(z, sigmoid=True, sigmoid_neg=True)
    return _log_cat(z, (upper, lower)), s * s_neg


def category_log_probabilities(theta: ArrayLike, a: ArrayLike, thresholds: ArrayLike) -> np.ndarray:
    """``log P(X = k | theta)`` for every item and category.

    Parameters
    ----------
    theta : array_like
        Broadcast against the items: shape ``(n_models, 1)`` for a models x items table.
    a : array_like, shape (n_items,)
    thresholds : array_like, shape (n_items, K-1)
        Increasing along the last axis.

    Returns
    -------
    ndarray, shape broadcast(theta, a) + (K,)
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(thresholds, dtype=float)
    return _log_cat(_z(theta, a, b))


def category_probabilities(theta: ArrayLike, a: ArrayLike, thresholds: ArrayLike) -> np.ndarray:
    """``P(X = k | theta)``, shape broadcast(theta, a) + (K,); rows sum to one."""
    return np.exp(category_log_probabilities(theta, a, thresholds))


def information(theta: ArrayLike, a: ArrayLike, thresholds: ArrayLike) -> np.ndarray:
    """Fisher information of GRM items: ``sum_k (dP_k / dtheta)^2 / P_k``.

    With ``dP_k / dtheta = a (s_k (1 - s_k) - s_k+1 (1 - s_k+1))``, ``s_k = P(X >= k)``. Reduces
    to the 2PL's ``a^2 P (1 - P)`` (:func:`irtlib.core.kernels.fisher_information`) when ``K = 2``.

    Returns
    -------
    ndarray, shape broadcast(theta, a)
    """
    a = np.asarray(a, dtype=float)
    z = _z(theta, a, np.asarray(thresholds, dtype=float))
    log_p, d = _cat_tables(z)                                   # d: s (1 - s) at each threshold
    zero = np.zeros(z.shape[:-1] + (1,))
    dp = np.concatenate([zero, d], axis=-1) - np.concatenate([d, zero], axis=-1)   # (dP_k/dtheta) / a
    p = np.exp(log_p)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, dp * dp / p, 0.0)
    return a * a * terms.sum(axis=-1)


def log_likelihood(responses: ArrayLike, theta: ArrayLike, a: ArrayLike, thresholds: ArrayLike) -> np.ndarray:
    """Log-likelihood of each observed category (NaN where unobserved), shape (n_models, n_items).

    Parameters
    ----------
    responses : array_like, shape (n_models, n_items)
        Categories 0..K-1, NaN unobserved.
    theta : array_like, shape (n_models,)
    """
    x = np.asarray(responses, dtype=float)
    lp = category_log_probabilities(np.asarray(theta, dtype=float)[:, None], a, thresholds)
    k = np.where(np.isnan(x), 0, x).astype(int)
    out = np.take_along_axis(lp, k[..., None], axis=-1)[..., 0]
    return np.where(np.isnan(x), np.nan, out)


def to_categories(values: ArrayLike, *, levels: ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Ordered scores (e.g. 0 / 0.5 / 1) as categories 0..K-1 (NaN kept).

    Parameters
    ----------
    values : array_like
    levels : array_like, optional
        The score levels in increasing order; default: the distinct observed values.

    Returns
    -------
    categories : ndarray of float
        ``k`` where ``values == levels[k]``.
    levels : ndarray
    """
    x = _float_array(values, "values")
    if np.isinf(x).any():
        raise InputError(f"values must be finite scores (NaN for missing), found {float(x[np.isinf(x)][0])!r}")
    levels = np.unique(x[~np.isnan(x)]) if levels is None else _float_array(levels, "levels")
    if levels.size < 2:
        raise InputError(f"graded responses need at least two score levels, found {levels.tolist()}")
    obs = ~np.isnan(x)
    pos = np.searchsorted(levels, np.where(obs, x, levels[0]))
    pos = np.minimum(pos, levels.size - 1)
    bad = obs & (levels[pos] != np.where(obs, x, levels[0]))
    if bad.any():
        raise InputError(f"score {x[bad][0]!r} is not one of the levels {levels.tolist()}")
    return np.where(obs, pos, np.nan).astype(float), levels


# ---------------------------------------------------------------------------- calibration
@dataclass(frozen=True)
class GrmFit:
    """A fitted graded response model.

    Attributes
    ----------
    a : ndarray, shape (n_items,)
    thresholds : ndarray, shape (n_items, K-1)
    theta, theta_se : ndarray, shape (n_models,)
        EAP abilities and posterior SDs (``"mml"``) or joint modes and their SEs (``"jmap"``).
    log_likelihood : float
        Marginal log-likelihood of the data (``"mml"``) or the joint one at the mode (``"jmap"``).
    method : str
    seconds : float
    diagnostics : dict
    """

    a: np.ndarray
    thresholds: np.ndarray
    theta: np.ndarray
    theta_se: np.ndarray
    log_likelihood: float
    method: str
    seconds: float
    diagnostics: dict = field(default_factory=dict)

    @property
    def n_categories(self) -> int:
        """K, the number of ordered categories."""
        return self.thresholds.shape[1] + 1


def _float_array(values, name: str) -> np.ndarray:
    """``values`` as a float array, or an :class:`InputError` naming ``name`` (text, objects, ragged lists)."""
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be numbers: {' '.join(str(exc).split())}") from None


def _bad_categories(x: np.ndarray, n_cat: int | None) -> np.ndarray:
    """Cells of ``x`` that are neither NaN nor a category 0..n_cat-1 (any integer >= 0 when ``n_cat`` is None)."""
    obs = ~np.isnan(x)
    bad = obs & ((x < 0) | ~np.isfinite(x) | (x != np.round(x)))
    if n_cat is not None:
        bad |= obs & (x > n_cat - 1)
    return bad


def _check_graded(values):
    x = _float_array(values, "responses")
    if x.ndim != 2:
        raise InputError(f"responses must be a (n_models, n_items) array, got shape {x.shape}")
    obs = ~np.isnan(x)
    bad = _bad_categories(x, None)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise InputError(f"graded responses must be categories 0, 1, ..., found {float(x[r, c])!r} at row {r}, "
                         f"column {c} ({int(bad.sum())} such cells; see to_categories)")
    n_cat = int(np.nanmax(x)) + 1 if obs.any() else 0
    if n_cat < 2:
        raise InputError("graded responses need at least two categories (every observed response is the same: "
                         "there is no variation to fit)")
    shown = np.bincount(x[obs].astype(np.intp), minlength=n_cat) > 0
    if not shown.all():
        # a stray value (a 40 among 0/1/2) would make K = 41 categories, 38 of which nobody gave
        missing = np.flatnonzero(~shown)
        raise InputError(f"graded responses: category {int(missing[0])} of 0..{n_cat - 1} never occurs "
                         f"({missing.size} such categories; the highest value is {n_cat - 1}): categories must be "
                         "0..K-1 with each one observed (see to_categories)")
    if np.any(obs.sum(axis=0) == 0):
        raise InputError(f"item (column) {int(np.flatnonzero(obs.sum(axis=0) == 0)[0])} has no response")
    return x, obs, n_cat


def _check_items(a, thresholds) -> tuple[np.ndarray, np.ndarray]:
    """GRM item parameters: ``a`` finite and positive, thresholds finite and increasing along each row.

    A negative ``a`` or decreasing thresholds give negative category probabilities, and the
    information then reaches absurd values (1e295) that drive item selection.
    """
    a, b = _float_array(a, "a"), _float_array(thresholds, "thresholds")
    if a.ndim != 1:
        raise InputError(f"a must be a 1-D array (one per item), got shape {a.shape}")
    if b.ndim != 2 or b.shape[0] != a.size or b.shape[1] < 1:
        raise InputError(f"thresholds must have shape (n_items, K-1) = ({a.size}, K-1) matching a, got {b.shape}")
    bad = ~(np.isfinite(a) & (a > 0))
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise InputError(f"a must be positive and finite; item {j} has a = {float(a[j])!r} "
                         f"({int(bad.sum())} such items)")
    if not np.isfinite(b).all():
        j = int(np.argwhere(~np.isfinite(b))[0][0])
        raise InputError(f"thresholds must be finite; item {j} has {b[j].tolist()}")
    steps = np.diff(b, axis=1) <= 0
    if steps.any():
        j = int(np.argwhere(steps)[0][0])
        raise InputError(f"thresholds must increase along each row (b_1 < b_2 < ...); item {j} has {b[j].tolist()} "
                         f"({int(steps.any(axis=1).sum())} such items)")
    return a, b



def _one_hot(x, obs, n_cat):
    k = np.where(obs, x, 0).astype(int)
    out = np.zeros(x.shape + (n_cat,))
    np.put_along_axis(out, k[..., None], obs[..., None].astype(float), axis=-1)
    return out


def _unpack(params, n_items, n_cat):
    """(log a, threshold parameters) -> a, thresholds; ``b_1 = c_1``, ``b_k = b_(k-1) + exp(c_k)``."""
    alpha = params[:n_items]
    c = params[n_items:n_items * n_cat].reshape(n_items, n_cat - 1)
    steps = np.concatenate([c[:, :1], np.exp(c[:, 1:])], axis=1)
    return alpha, c, np.cumsum(steps, axis=1)


def _pack(a, thresholds):
    b = np.asarray(thresholds, dtype=float)
    c = np.concatenate([b[:, :1], np.log(np.maximum(np.diff(b, axis=1), 1e-6))], axis=1)
    return np.concatenate([np.log(a), c.ravel()])


def _expected_loglik(alpha, c, b, nodes, counts, *, want_theta=False, z=None, lp=None, ds=None, hot=None):
    """``sum r_jqk log P_jk(theta_q)`` and its gradient in (log a, c) (and in the nodes).

    ``counts`` has shape (n_items, n_nodes, K); ``nodes`` shape (n_nodes,); ``z``, ``lp`` and ``ds``,
    when the caller has them, are the cumulative logits, the log category probabilities at the nodes
    and ``expit(z) * expit(-z)`` (:func:`_cat_tables`). ``hot``: ``counts > 0`` when every count is 0.0
    or 1.0 (the joint mode's one-hot responses, the same at every evaluation); then ``r_k / P_k`` is
    ``exp(-log P_k)`` where ``hot`` (``1.0 * v`` is ``v``, bit for bit) and 0 elsewhere, as without it.
    """
    a = np.exp(alpha)
    offset = _offset(nodes, b)                                          # theta_q - b_jk, (J, Q, K-1)
    if z is None:
        z = a[:, None, None] * offset                                   # (J, Q, K-1)
        lp, ds = _cat_tables(z)                                         # (J, Q, K), (J, Q, K-1)
    elif ds is None:
        ds = _cat_tables(z)[1]
    ll = float((counts * lp).sum())
    with np.errstate(over="ignore"):
        if hot is None:
            ratio = np.where(counts > 0, counts * np.exp(-lp), 0.0)     # r_k / P_k (0 where r = 0)
        else:                                                           # r_k = 1 where hot: P_k's inverse
            ratio = np.negative(lp)
            np.exp(ratio, out=ratio)
            np.copyto(ratio, 0.0, where=~hot)
    g_z = _gap_product(ds, ratio)                                       # d ll / d z_k, (J, Q, K-1)
    g_alpha = a * (g_z * offset).sum(axis=(1, 2))
    g_b = -a[:, None] * _sum_middle(g_z)                                # (J, K-1)
    tail = np.cumsum(g_b[:, ::-1], axis=1)[:, ::-1]                     # sum over k >= i
    g_c = np.concatenate([tail[:, :1], tail[:, 1:] * np.exp(c[:, 1:])], axis=1)
    g_theta = (a[:, None] * _sum_last(g_z)).sum(axis=0) if want_theta else None
    return ll, g_alpha, g_c, g_b, g_theta, lp


#: Tables of at least this many (item, node) pairs are made threshold by threshold (`_offset`, `_gap_product`).
BY_THRESHOLD = 8192


def _offset(nodes, b):
    """``nodes[None, :, None] - b[:, None, :]``, C-ordered (J, Q, K-1), the same bits (each cell one subtraction).

    numpy's broadcast runs its inner loop along the last axis, K-1 (two thresholds on AIR-Bench) cells at a time;
    on a long table (the joint mode's items x models) one subtraction per threshold, along items and nodes, is
    several times faster. The cells' values do not depend on the order they are computed in.
    """
    if b.shape[0] * nodes.size < BY_THRESHOLD:
        return nodes[None, :, None] - b[:, None, :]
    out = np.empty((b.shape[0], nodes.size, b.shape[1]))
    for k in range(b.shape[1]):
        np.subtract(nodes[None, :], b[:, k, None], out=out[:, :, k])
    return out


def _gap_product(ds, ratio):
    """``ds * (ratio[..., 1:] - ratio[..., :-1])``, C-ordered like ``ds``, the same bits (each cell as written).

    Threshold by threshold on a long table, as :func:`_offset`: the difference of the two category columns, then the
    product with ``ds`` (``ds`` the first operand, as written).
    """
    if ds.shape[0] * ds.shape[1] < BY_THRESHOLD or not ds.flags.c_contiguous:
        return ds * (ratio[..., 1:] - ratio[..., :-1])
    out = np.empty(ds.shape)
    for k in range(ds.shape[-1]):
        np.subtract(ratio[..., k + 1], ratio[..., k], out=out[..., k])
    return np.multiply(ds, out, out=out)


def _sum_middle(g):
    """``g.sum(axis=1)`` of a C-ordered (J, Q, K-1) table, the same bits, sooner.

    With ``K-1 >= 2`` numpy reduces the middle axis row after row (``out = g[:, 0]``, then
    ``out += g[:, q]`` for each q in turn), its inner loop running over the ``K-1`` thresholds
    only; the reduction of the outer axis of the (Q, J, K-1) copy makes the same additions in the
    same order over long contiguous rows. Otherwise (one threshold: numpy then sums each row
    pairwise; eight or more, where numpy's vector loop can order a NaN's operands otherwise, so
    that only the sign of a NaN differs) or for another layout, numpy's own sum.
    """
    if g.ndim != 3 or not 2 <= g.shape[2] < 8 or not g.flags.c_contiguous:
        return g.sum(axis=1)
    return np.add.reduce(np.ascontiguousarray(g.transpose(1, 0, 2)), axis=0)


def _sum_last(g):
    """``g.sum(axis=-1)``, the same bits; with two thresholds (three categories) from two additions.

    numpy's sum of two values along the last axis is ``g_0 + (0.0 + g_1)`` (its pairwise sum starts
    from +0.0, which only turns a -0.0 into +0.0); written out, without the reduction's per-row setup.
    """
    if g.shape[-1] != 2:
        return g.sum(axis=-1)
    return g[..., 0] + (0.0 + g[..., 1])


def _item_prior(alpha, b, c, prior_log_a, prior_b):
    (ma, sa), (mb, sb) = prior_log_a, prior_b
    lp = -0.5 * (((alpha - ma) / sa) ** 2).sum() - 0.5 * (((b - mb) / sb) ** 2).sum()
    g_alpha = -(alpha - ma) / sa ** 2
    g_b = -(b - mb) / sb ** 2
    tail = np.cumsum(g_b[:, ::-1], axis=1)[:, ::-1]
    g_c = np.concatenate([tail[:, :1], tail[:, 1:] * np.exp(c[:, 1:])], axis=1)
    return lp, g_alpha, g_c


def _start(x, obs, n_cat):
    """Thresholds from the logits of each item's cumulative category shares; a = 1."""
    n_items = x.shape[1]
    onehot = _one_hot(x, obs, n_cat)
    share = (onehot.sum(axis=0) + 0.5) / (obs.sum(axis=0)[:, None] + 0.5 * n_cat)       # (J, K)
    at_least = np.cumsum(share[:, ::-1], axis=1)[:, ::-1][:, 1:]                       # P(X >= k), k=1..K-1
    b = -np.log(at_least / (1 - at_least + 1e-9)) / 1.0
    b = np.maximum.accumulate(b + 1e-3 * np.arange(n_cat - 1), axis=1)
    return np.ones(n_items), np.clip(b, -6, 6), onehot


def fit_grm(values: ArrayLike, *, method: str = "auto", prior_log_a: tuple[float, float] = (0.0, 1.0),
            prior_b: tuple[float, float] = (0.0, 2.0), n_nodes: int = 41, max_iter: int = 2000,
            tol: float = 1e-7) -> GrmFit:
    """Calibrate the GRM on a models x items matrix of categories.

    Parameters
    ----------
    values : array_like, shape (n_models, n_items)
        Categories 0..K-1 (higher is safer; :func:`to_categories` converts scores), NaN missing.
        Every item shares the K of the matrix; a category an item never shows keeps its
        threshold where the prior puts it.
    method : {"auto", "mml", "jmap"}
        Marginal ML with Gauss-Hermite quadrature (``n_nodes`` nodes) or the joint mode.
        ``"auto"``: marginal ML when there are at least as many models as items, else the joint
        mode. With thousands of items per model (AIR-Bench: 22 x 5,694) each posterior of theta
        is far narrower than the spacing of any fixed quadrature grid, so marginal ML degrades to
        rounding every model to a node, while the joint mode estimates theta from thousands of
        responses (no incidental-parameter problem for theta) -- and is several times faster.
    prior_log_a, prior_b : (float, float)
        Mean and SD of the Normal priors on ``log a`` and on every threshold.
    max_iter, tol
        L-BFGS-B's iteration limit and relative tolerance on the objective.

    Returns
    -------
    GrmFit
    """
    if method not in GRM_ENGINES + ("auto",):
        raise InputError(f"unknown GRM method {method!r}; choose one of {GRM_ENGINES + ('auto',)}")
    if isinstance(n_nodes, bool) or not isinstance(n_nodes, (int, np.integer)) or n_nodes < 2:
        raise InputError(f"n_nodes must be an integer of at least 2, got {n_nodes!r}")
    for name, prior in (("prior_log_a", prior_log_a), ("prior_b", prior_b)):
        if len(prior) != 2 or not np.all(np.isfinite(prior)) or not prior[1] > 0:
            raise InputError(f"{name} must be (mean, sd) with a positive sd, got {prior!r}")
    x, obs, n_cat = _check_graded(values)
    if x.shape[0] < 2:
        raise InputError(f"fit_grm needs at least 2 models to calibrate items, got {x.shape[0]} (with one model "
                         "every threshold runs off to infinity)")
    if method == "auto":
        method = "mml" if x.shape[0] >= x.shape[1] else "jmap"
    # BLAS single-threaded: its products here are small, and threaded BLAS on a shared machine
    # spins against other work (as in irtlib.calibration.joint_map.fit_map)
    with thread_limits(1, user_api="blas"):
        return _fit_grm(x, obs, n_cat, method=method, prior_log_a=prior_log_a, prior_b=prior_b, n_nodes=n_nodes,
                        max_iter=max_iter, tol=tol)


def _fit_grm(x, obs, n_cat, *, method, prior_log_a, prior_b, n_nodes, max_iter, tol):
    start = time.perf_counter()
    n_models, n_items = x.shape
    a0, b0, onehot = _start(x, obs, n_cat)
    p0 = _pack(a0, b0)
    n_item_par = p0.size
    if method == "mml":
        nodes, logw = normal_grid(np.eye(1), n_per_dim=n_nodes)
        nodes = nodes[:, 0]
        flat = onehot.reshape(n_models, -1)                             # (M, J*K)

        def objective(p):
            alpha, c, b = _unpack(p, n_items, n_cat)
            a = np.exp(alpha)
            z = a[:, None, None] * (nodes[None, :, None] - b[:, None, :])
            lp, ds = _cat_tables(z)                                                          # (J, Q, K)
            ll_mq = flat @ lp.transpose(0, 2, 1).reshape(-1, nodes.size)                    # (M, Q)
            post, marg = posterior_weights(ll_mq, logw)
            counts = posterior_counts(post, flat).reshape(nodes.size, n_items, n_cat).transpose(1, 0, 2)
            _, g_alpha, g_c, _, _, _ = _expected_loglik(alpha, c, b, nodes, counts, z=z, lp=lp, ds=ds)
            lp_prior, pa, pc = _item_prior(alpha, b, c, prior_log_a, prior_b)
            value = marg.sum() + lp_prior
            return -value, -np.concatenate([g_alpha + pa, (g_c + pc).ravel()])

        res = scipy.optimize.minimize(objective, p0, jac=True, method="L-BFGS-B",
                                      options={"maxiter": max_iter, "ftol": tol, "gtol": 1e-6})
        alpha, c, b = _unpack(res.x, n_items, n_cat)
        a = np.exp(alpha)
        theta, se = grm_ability(x, a, b)
        lp = _log_cat(a[:, None, None] * (nodes[None, :, None] - b[:, None, :]))
        ll = float(posterior_weights(flat @ lp.transpose(0, 2, 1).reshape(-1, nodes.size), logw)[1].sum())
    else:
        # (J, M, K), C-ordered: the tables of the objective are, so its products read both in step
        # (the same C-ordered results as from the transposed view, so the same sums)
        counts = np.ascontiguousarray(onehot.transpose(1, 0, 2))
        hot = counts > 0                                                # 0/1 counts: r_k / P_k from exp(-log P_k)
        rate = np.nanmean(x / (n_cat - 1), axis=1)
        t0 = np.log((rate + 0.02) / (1.02 - rate))
        t0 = (t0 - t0.mean()) / (t0.std() + 1e-12)

        def objective(p):
            alpha, c, b = _unpack(p[:n_item_par], n_items, n_cat)
            th = p[n_item_par:]
            ll, g_alpha, g_c, _, g_t, _ = _expected_loglik(alpha, c, b, th, counts, want_theta=True, hot=hot)
            lp_prior, pa, pc = _item_prior(alpha, b, c, prior_log_a, prior_b)
            value = ll + lp_prior - 0.5 * (th ** 2).sum()
            return -value, -np.concatenate([g_alpha + pa, (g_c + pc).ravel(), g_t - th])

        # Diagonal preconditioning: each parameter in units of its rough posterior SD (an ability
        # rests on its model's responses, an item parameter on its item's), which makes the
        # curvature of the objective about equal in every direction; L-BFGS then needs far fewer
        # iterations when models and items are very unequal in number.
        item_scale = 1.0 / np.sqrt(0.2 * obs.sum(axis=0) + 1.0)
        scale = np.concatenate([item_scale, np.repeat(item_scale, n_cat - 1),
                                1.0 / np.sqrt(0.2 * obs.sum(axis=1) + 1.0)])

        def scaled(u):
            value, grad = objective(u * scale)
            return value, grad * scale

        res = scipy.optimize.minimize(scaled, np.concatenate([p0, t0]) / scale, jac=True, method="L-BFGS-B",
                                      options={"maxiter": max_iter, "ftol": tol, "gtol": 1e-6})
        res.x = res.x * scale
        alpha, c, b = _unpack(res.x[:n_item_par], n_items, n_cat)
        theta = res.x[n_item_par:]
        # The joint mode's scale is set by the priors' tug of war, not by the data: shrinking theta
        # by c and growing a by c leaves the likelihood unchanged, and with many models the theta
        # prior wins (on 600 models x 40 items, a threefold shrink). Put theta back on the scale
        # of its prior (mean 0, SD 1); the likelihood is unchanged.
        mu, sd = theta.mean(), theta.std()
        theta = (theta - mu) / sd
        a, b = np.exp(alpha) * sd, (b - mu) / sd
        se = 1.0 / np.sqrt(np.nansum(np.where(obs, information(theta[:, None], a, b), np.nan), axis=1) + 1.0)
        ll = float(np.nansum(log_likelihood(x, theta, a, b)))
    if not (np.isfinite(a).all() and np.isfinite(b).all() and np.isfinite(theta).all()):
        raise InputError(f"fit_grm ({method}): the fit did not give finite parameters on these {n_models} models x "
                         f"{n_items} items (too few responses, or items without variation?)")
    return GrmFit(a=a, thresholds=b, theta=np.asarray(theta), theta_se=np.asarray(se), log_likelihood=ll,
                  method=method, seconds=time.perf_counter() - start,
                  diagnostics={"iterations": int(res.nit), "converged": bool(res.success),
                               "message": str(res.message), "evaluations": int(res.nfev)})


def marginal_log_likelihood(values: ArrayLike, a: ArrayLike, thresholds: ArrayLike, *, n_nodes: int = 41) -> float:
    """Marginal log-likelihood of a category matrix under GRM items, theta ~ Normal(0, 1).

    Gauss-Hermite quadrature with ``n_nodes`` nodes (the integral :func:`fit_grm`'s ``"mml"``
    engine maximises, without its priors), so item parameters from any implementation can be
    compared on the same data.
    """
    x, obs, n_cat = _check_graded(values)
    a, b = _check_items(a, thresholds)
    if b.shape != (x.shape[1], n_cat - 1) or a.shape != (x.shape[1],):
        raise InputError(f"a and thresholds must have shapes ({x.shape[1]},) and ({x.shape[1]}, {n_cat - 1})")
    nodes, logw = normal_grid(np.eye(1), n_per_dim=n_nodes)
    return float(posterior_weights(_grid_log_likelihood(x, a, b, nodes[:, 0]), logw)[1].sum())


def _grid_log_likelihood(x, a, thresholds, points):
    """Log-likelihood of each row of categories ``x`` at each grid point, (n_models, n_points)."""
    obs = ~np.isnan(x)
    n_cat = thresholds.shape[1] + 1
    onehot = _one_hot(x, obs, n_cat).reshape(x.shape[0], -1)
    out = np.zeros((x.shape[0], points.size))
    for lo in range(0, points.size, 128):         # blocks of grid points keep the (J, Q, K) table small
        q = points[lo:lo + 128]
        lp = category_log_probabilities(q[None, :], a[:, None], thresholds[:, None, :])      # (J, q, K)
        out[:, lo:lo + q.size] = onehot @ lp.transpose(0, 2, 1).reshape(-1, q.size)
    return out


def grm_ability(responses: ArrayLike, a: ArrayLike, thresholds: ArrayLike, *, prior_mean: float = 0.0,
                prior_sd: float = 1.0, n_points: int = EAP_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """EAP abilities and posterior SDs of GRM response rows, shape (n_models,) each.

    Parameters
    ----------
    responses : array_like, shape (n_models, n_items)
        Categories, NaN not administered.
    a : array_like, shape (n_items,)
    thresholds : array_like, shape (n_items, K-1)
        Increasing along each row; ``a`` positive.

    Raises
    ------
    InputError
        A response that is not a category 0..K-1 (or NaN), a shape that does not match the items,
        or item parameters :class:`GradedItems` refuses.
    """
    x = np.atleast_2d(_float_array(responses, "responses"))
    a, b = _check_items(a, thresholds)
    if x.ndim != 2 or x.shape[1] != a.size:
        raise InputError(f"responses must have shape (n_models, {a.size}), got {x.shape}")
    bad = _bad_categories(x, b.shape[1] + 1)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise InputError(f"responses must be categories 0..{b.shape[1]} or NaN; found {float(x[r, c])!r} at row {r}, "
                         f"column {c} ({int(bad.sum())} such cells; see to_categories)")
    points, log_prior = uniform_grid(n_points=n_points, prior_mean=prior_mean, prior_sd=prior_sd)
    est = eap_from_log_likelihood(_grid_log_likelihood(x, a, b, points), points, log_prior)
    return est.theta, est.se


# ---------------------------------------------------------------------------- adaptive items
class GradedItems:
    """GRM items as an item model of the adaptive-testing engine (:mod:`irtlib.selection.items`).

    Selection by GRM information, graded responses; the engine's estimators use its grid
    log-likelihood (EAP, and MAP as the mode on a fine grid) and the SPRT its log-likelihood.

    Parameters
    ----------
    a : array_like, shape (n_items,)
    thresholds : array_like, shape (n_items, K-1)
        Increasing along each row.

    Raises
    ------
    InputError
        ``a`` not positive and finite, thresholds not finite or not increasing, shapes that do not match.
    """

    dims = 1

    def __init__(self, a: ArrayLike, thresholds: ArrayLike):
        self.a, self.thresholds = _check_items(a, thresholds)
        self.n_items = self.a.size
        self._last_information = None       # (theta, information) of the last call: see information()

    def __repr__(self) -> str:
        return f"GradedItems({self.n_items} items, {self.thresholds.shape[1] + 1} categories)"

    def check_responses(self, responses: np.ndarray) -> None:
        """Refuse a response that is not a category 0..K-1 or NaN (what the engine replays).

        Raises
        ------
        InputError
            Naming the first bad cell (row, column and value).
        """
        x = np.asarray(responses, dtype=float)
        bad = _bad_categories(x, self.thresholds.shape[1] + 1)
        if bad.any():
            r, c = np.argwhere(bad)[0]
            raise InputError(f"responses must be categories 0..{self.thresholds.shape[1]} or NaN; found "
                             f"{float(x[r, c])!r} at row {r}, column {c} ({int(bad.sum())} such cells)")

    def information(self, theta: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """GRM Fisher information (:func:`information`) at each model's theta, (n_models, n_items).

        An adaptive step asks twice at the same abilities: the MAP estimator for its standard
        error, then the selector for the next item (:mod:`irtlib.selection.engine`). The last
        call's table is kept and returned (a copy) when ``theta`` has the same bits: the same
        function of the same operands, so the same numbers, computed once a step instead of twice.
        """
        theta = np.array(theta, dtype=float)            # a copy: the key must not change under the caller
        last = self._last_information
        if last is not None and _same_bits(last[0], theta):
            return last[1].copy()
        info = information(theta[:, None], self.a, self.thresholds)
        self._last_information = (theta, info)
        return info.copy()

    def trace_information(self, theta: np.ndarray, cov: np.ndarray) -> np.ndarray:
        """One dimension: the information scaled by the posterior variance (D-optimal's criterion)."""
        return self.information(theta) * np.asarray(cov, dtype=float).reshape(-1, 1)

    def grid_log_likelihood(self, j: np.ndarray, x: np.ndarray, points: np.ndarray,
                            rows: np.ndarray | None = None) -> np.ndarray:
        """``log P(X = x)`` of each model's item ``j`` at every grid point, (n_models, n_points)."""
        lp = category_log_probabilities(points[None, :], self.a[j][:, None], self.thresholds[j][:, None, :])
        k = np.asarray(x).astype(int)
        return np.take_along_axis(lp, k[:, None, None], axis=-1)[..., 0]

    def log_likelihood(self, j: np.ndarray, x: np.ndarray, theta: ArrayLike) -> np.ndarray:
        """``log P(X = x | theta)`` of each model's response to its item ``j`` (0 where ``j`` is -1 or ``x`` NaN)."""
        ok = (np.asarray(j) >= 0) & ~np.isnan(x)
        jj = np.where(ok, j, 0)
        lp = category_log_probabilities(np.broadcast_to(np.asarray(theta, float), jj.shape), self.a[jj],
                                        self.thresholds[jj])
        k = np.where(ok, x, 0).astype(int)
        return np.where(ok, np.take_along_axis(lp, k[:, None], axis=-1)[:, 0], 0.0)

    def ability_grid(self, prior_mean: float, prior_sd: float, n_points: int) -> tuple[np.ndarray, np.ndarray]:
        """The equally spaced grid over [-8, 8] of :func:`irtlib.core.quadrature.uniform_grid`."""
        return uniform_grid(n_points=n_points, prior_mean=prior_mean, prior_sd=prior_sd)
