"""Does the model fit? Item fit, local dependence and dimensionality of a calibrated IRT model.

The paper's only fit evidence is item RMSE (appendix E), which joint MAP estimation nearly
guarantees: its estimating equation for ``b_j`` matches each item's predicted safe rate to the
observed one. The checks here are the standard ones of the psychometric literature:

- :func:`item_fit`: Orlando and Thissen's (2000) S-X2 (observed against expected safe rates of
  each item within groups of models with similar summed scores, the expectation computed from the
  model by the Lord-Wingersky recursion), or Wright and Masters' (1982) infit / outfit mean
  squares; flagged after a multiple-testing correction.
- :func:`q3`, :func:`q3_summary`: Yen's (1984) Q3, the correlation over models of two items'
  residuals ``x - P(theta_hat)``; local independence predicts values near ``-1 / (n_items - 1)``,
  items that share a prompt (rewrites) or a testlet correlate more.
- :func:`q3_by_category`: the mean Q3 between every pair of item categories (within on the
  diagonal), e.g. HarmBench's standard, contextual and copyright behaviours;
- :func:`dimensionality`: the eigenvalues of the residual correlation matrix against Horn's (1965)
  parallel analysis on matrices simulated from the fitted model and refitted.

All functions take a :class:`~irtlib.core.responses.ResponseMatrix` and the
:class:`~irtlib.calibration.joint_map.Calibration` fitted to it (a 2PL, or a 1PL / 3PL from
:func:`irtlib.calibration.models.fit_irt`; a calibration's ``c`` is used where present).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.special import ndtr

from irtlib._typing import ArrayLike
from irtlib.calibration.joint_map import Calibration
from irtlib.core.kernels import fisher_information, probability
from irtlib.core.responses import ResponseMatrix
from irtlib.errors import InputError, InputTypeError

__all__ = ["item_fit", "lord_wingersky", "sx2_expected", "adjust_pvalues", "residuals", "q3", "q3_summary",
           "summarise_q3", "q3_by_category", "aligned", "CORRECTIONS",
           "residual_eigenvalues", "dimensionality", "simulate_fitted",
           "ITEM_FIT_METHODS"]

ITEM_FIT_METHODS = ("sx2", "infit", "outfit")
#: The multiple-testing corrections of :func:`adjust_pvalues`.
CORRECTIONS = ("bh", "holm", "bonferroni", "none")
_CORRECTIONS = CORRECTIONS


# ---------------------------------------------------------------------------- helpers
def aligned(matrix: ResponseMatrix, calibration: Calibration
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Responses, observed mask (n_models, n_items), abilities (n_models,) and a, b, c (n_items,) aligned by label."""
    if not isinstance(matrix, ResponseMatrix):
        raise InputTypeError(f"matrix must be a ResponseMatrix, got {type(matrix).__name__}")
    if not isinstance(calibration, Calibration):
        raise InputTypeError(f"calibration must be a Calibration, got {type(calibration).__name__}")
    theta = calibration.theta.reindex(matrix.models).to_numpy(dtype=float)
    if np.isnan(theta).any():
        raise InputError(f"calibration has no theta for model(s) {list(matrix.models[np.isnan(theta)][:3])}")
    a = calibration.a.reindex(matrix.items).to_numpy(dtype=float)
    b = calibration.b.reindex(matrix.items).to_numpy(dtype=float)
    if np.isnan(a).any() or np.isnan(b).any():
        bad = np.isnan(a) | np.isnan(b)
        raise InputError(f"calibration has no parameters for item(s) {list(matrix.items[bad][:3])}")
    c = None if calibration.c is None else calibration.c.reindex(matrix.items).to_numpy(dtype=float)
    return matrix.values, matrix.observed, theta, a, b, c


def _n_item_parameters(calibration: Calibration) -> int:
    model = calibration.settings.get("model", "2pl")
    return {"1pl": 1, "2pl": 2, "3pl": 3}.get(model, 3 if calibration.c is not None else 2)


def adjust_pvalues(p: ArrayLike, *, correction: str = "bh") -> np.ndarray:
    """Multiple-testing adjusted p-values.

    Parameters
    ----------
    p : array_like, shape (n,)
        NaN entries stay NaN and do not count as tests.
    correction : {"bh", "holm", "bonferroni", "none"}
        Benjamini and Hochberg's false discovery rate (1995), Holm's step-down family-wise rate
        (1979), Bonferroni, or none.

    Returns
    -------
    ndarray, shape (n,)
        Adjusted p-values, capped at 1; an item is flagged at level ``alpha`` when its adjusted
        p-value is at most ``alpha``.
    """
    if correction not in _CORRECTIONS:
        raise InputError(f"correction must be one of {_CORRECTIONS}, got {correction!r}")
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    q = p[ok]
    n = q.size
    if n == 0 or correction == "none":
        out[ok] = q
        return out
    order = np.argsort(q, kind="stable")
    ranked = q[order]
    if correction == "bonferroni":
        adj = np.minimum(ranked * n, 1.0)
    elif correction == "holm":
        adj = np.minimum(np.maximum.accumulate(ranked * (n - np.arange(n))), 1.0)
    else:
        adj = np.minimum.accumulate((ranked * n / np.arange(1, n + 1))[::-1])[::-1]
        adj = np.minimum(adj, 1.0)
    res = np.empty(n)
    res[order] = adj
    out[ok] = res
    return out


# ---------------------------------------------------------------------------- S-X2
def lord_wingersky(p: ArrayLike) -> np.ndarray:
    """Distribution of the summed score given ability (Lord and Wingersky 1984).

    Parameters
    ----------
    p : array_like, shape (n_nodes, n_items)
        Probability of a 1 on each item at each ability node.

    Returns
    -------
    ndarray, shape (n_nodes, n_items + 1)
        ``f[q, s] = Pr(summed score = s | theta_q)`` (rows sum to 1).
    """
    p = np.atleast_2d(np.asarray(p, dtype=float))
    n_nodes, n_items = p.shape
    f = np.zeros((n_nodes, n_items + 1))
    f[:, 0] = 1.0
    for j in range(n_items):            # one pass per item, vectorised over nodes and scores
        pj = p[:, j:j + 1]
        f[:, 1:j + 2] = f[:, 1:j + 2] * (1.0 - pj) + f[:, 0:j + 1] * pj
        f[:, 0:1] *= 1.0 - pj
    return f


def _leave_one_out_exact(f, p, rest_scores):
    """``Pr(rest score = r | theta_q)`` without item j, for every item j and each r in ``rest_scores``.

    The full distribution ``f`` is deconvolved item by item: forwards
    ``g_r = (f_r - p_j g_(r-1)) / (1 - p_j)`` where ``p_j <= 0.5`` and backwards
    ``g_(r-1) = (f_r - (1 - p_j) g_r) / p_j`` where ``p_j > 0.5``, so every step multiplies the
    rounding error by at most one. Each (item, node) runs in its one direction only, forwards up to
    the largest rest score asked for and backwards down to the smallest. Returns an array of shape
    (n_items, len(rest_scores), n_nodes).
    """
    n_nodes, n_items = p.shape
    pt = p.T                                          # (J, Q)
    rest = np.asarray(rest_scores, dtype=int)
    out = np.zeros((n_items, rest.size, n_nodes))
    where = {int(r): i for i, r in enumerate(rest)}
    forward = pt <= 0.5
    ft = np.ascontiguousarray(np.asarray(f).T)        # (J + 1, Q): row r holds f_r at every node
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for ahead in (True, False):
            item, node = np.nonzero(forward if ahead else ~forward)
            if item.size == 0 or rest.size == 0:
                continue
            pj = pt[item, node]
            g = np.zeros(item.size)
            if ahead:                                 # forwards over rest scores 0 .. max
                for r in range(int(rest.max()) + 1):
                    g = (ft[r][node] - pj * g) / (1.0 - pj)
                    if r in where:
                        out[item, where[r], node] = g
            else:                                     # backwards over rest scores J-1 .. min
                for r in range(n_items - 1, int(rest.min()) - 1, -1):
                    g = (ft[r + 1][node] - (1.0 - pj) * g) / pj
                    if r in where:
                        out[item, where[r], node] = g
    return _positive_finite(out)


def _positive_finite(out):
    """``np.clip(np.nan_to_num(out, nan=0.0, posinf=0.0, neginf=0.0), 0.0, None)``, bit for bit, in place.

    A value is kept where ``0 < value < inf``; every other cell (NaN, an infinity, a negative number,
    zero of either sign) becomes ``+0.0``, as ``nan_to_num`` followed by ``clip`` at zero makes it
    (``clip`` turns ``-0.0`` into ``+0.0``). Two comparisons and one masked write instead of
    ``nan_to_num``'s four passes and copy and ``clip``'s copy.
    """
    with np.errstate(invalid="ignore"):
        keep = out > 0.0
        keep &= out < np.inf
    np.copyto(out, 0.0, where=~keep)
    return out


def _normal_pmf(s, mean, var):
    """Normal approximation (with continuity correction) of ``Pr(score = s)``."""
    sd = np.sqrt(np.maximum(var, 1e-12))
    return ndtr((s + 0.5 - mean) / sd) - ndtr((s - 0.5 - mean) / sd)


#: ``scipy.special.ndtr`` is exactly 1.0 from about 8.29 on and exactly 0.0 below about -37.68 (it is
#: monotone): a score more than :data:`SATURATED_ABOVE` standard deviations above the mean, or more
#: than :data:`SATURATED_BELOW` below it, has both CDFs of :func:`_normal_pmf` equal, so probability 0.0.
SATURATED_ABOVE, SATURATED_BELOW = 10.0, 40.0


def _normal_pmf_live(scores, mean, var):
    """``_normal_pmf(scores[None, :, None], mean[:, None, :], var[:, None, :])``, bit for bit, evaluated where not 0.

    Parameters
    ----------
    scores : ndarray of int, shape (S,), non-decreasing (else every cell is evaluated)
    mean, var : ndarray, shape (c, Q)
        The normal approximation's mean and variance of each item's rest score at each node.

    Returns
    -------
    ndarray, shape (c, S, Q)

    Notes
    -----
    For each ``(item, node)`` the scores whose two CDFs are both exactly 1.0 (more than
    :data:`SATURATED_ABOVE` SD above the mean, with a margin of one score) or both exactly 0.0
    (more than :data:`SATURATED_BELOW` SD below) form the two ends of the sorted scores; their
    probability is 0.0 exactly, and only the scores between (the live cells, on a long bank
    a small share) are evaluated, each by :func:`_normal_pmf`'s own arithmetic. Without finite
    means and variances, unsorted scores, or another ``ndtr`` that does not saturate there, every
    cell is evaluated.
    """
    c, q = mean.shape
    sd = np.sqrt(np.maximum(var, 1e-12))
    if not (np.all(np.diff(scores) >= 0) and np.isfinite(mean).all() and np.isfinite(sd).all()
            and ndtr(SATURATED_ABOVE - 1.5) == 1.0
            and ndtr(-SATURATED_BELOW + 1.5) == 0.0):
        return _normal_pmf(scores[None, :, None], mean[:, None, :], var[:, None, :])
    # live scores of each (item, node): [first, stop) in the sorted scores
    first = np.searchsorted(scores, (mean - SATURATED_BELOW * sd - 2.0).ravel(), side="right")
    stop = np.maximum(np.searchsorted(scores, (mean + SATURATED_ABOVE * sd + 1.0).ravel(), side="left"), first)
    length = stop - first
    score = np.arange(length.sum()) + np.repeat(first - (np.cumsum(length) - length), length)   # into scores
    s, m, d = scores[score], np.repeat(mean.ravel(), length), np.repeat(sd.ravel(), length)
    pair = np.arange(c * q)                                          # item * q + node
    flat = np.repeat(pair + (scores.size - 1) * q * (pair // q), length) + q * score   # (item, score, node)
    out = np.zeros(c * scores.size * q)
    out[flat] = ndtr((s + 0.5 - m) / d) - ndtr((s - 0.5 - m) / d)
    return out.reshape(c, scores.size, q)


def sx2_expected(p_nodes: ArrayLike, weights: ArrayLike, scores: ArrayLike, *, exact: bool = True,
                 chunk: int = 256) -> np.ndarray:
    """Model-implied safe rate of every item among models with summed score ``s`` (Orlando and Thissen 2000).

    ``E_j(s) = sum_q w_q P_j(theta_q) f^(-j)_(s-1)(theta_q) / sum_q w_q f_s(theta_q)``, with
    ``f`` the summed-score distribution over all items and ``f^(-j)`` over all items but j.

    Parameters
    ----------
    p_nodes : ndarray, shape (n_nodes, n_items)
        Item response functions at the quadrature nodes.
    weights : ndarray, shape (n_nodes,)
        Quadrature weights of the population density (summing to 1).
    scores : array_like of int, shape (n_scores,)
        The summed scores at which to evaluate (0 .. n_items).
    exact : bool
        True: the Lord-Wingersky recursion (cost ``n_items**2 * n_nodes``); False: a normal
        approximation of both score distributions (mean ``sum P``, variance ``sum P (1 - P)``),
        accurate when there are hundreds of items and linear in their number.
    chunk : int
        Items per block of the normal approximation (bounds memory).

    Returns
    -------
    ndarray, shape (n_items, n_scores)
    """
    p = np.asarray(p_nodes, dtype=float)
    w = np.asarray(weights, dtype=float)
    scores = np.asarray(scores, dtype=int)
    n_nodes, n_items = p.shape
    if scores.min() < 0 or scores.max() > n_items:
        raise InputError(f"scores must lie in 0..{n_items}")
    if exact:
        f = lord_wingersky(p)
        den = f[:, scores].T @ w                                      # (S,)
        rest = np.clip(scores - 1, 0, None)
        distinct = np.unique(rest)
        g = _leave_one_out_exact(f, p, distinct)
        if distinct.size != rest.size:                                # a repeated rest score (scores 0 and 1)
            g = g[:, np.searchsorted(distinct, rest)]                 # (J, S, Q)
        num = np.einsum("jsq,qj,q->js", g, p, w)
        num[:, scores == 0] = 0.0
    else:
        mean, var = p.sum(axis=1), (p * (1.0 - p)).sum(axis=1)        # (Q,)
        den = _normal_pmf(scores[:, None], mean[None, :], var[None, :]) @ w
        num = np.empty((n_items, scores.size))
        for lo in range(0, n_items, chunk):
            pj = p[:, lo:lo + chunk].T                                # (c, Q)
            g = _normal_pmf_live(scores - 1, mean - pj, var - pj * (1.0 - pj))   # (c, S, Q)
            num[lo:lo + chunk] = np.einsum("csq,cq,q->cs", g, pj, w)
        num[:, scores == 0] = 0.0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.clip(num / den[None, :], 0.0, 1.0)


def _score_groups(scores, n_groups):
    """Groups of adjacent summed scores with about equal numbers of models; ties never split."""
    order_rank = pd.Series(scores).rank(method="min").to_numpy() - 1.0   # models below this score
    return np.minimum((order_rank * n_groups / scores.size).astype(int), n_groups - 1)


def _sx2(x, observed, theta, a, b, c, *, n_groups, n_nodes, exact_max_items, n_params):
    n_models, n_items = x.shape
    xs = np.where(observed, x, 0.0)
    # summed scores; a model with missing cells gets its share of safe responses times n_items
    share = xs.sum(axis=1) / observed.sum(axis=1)
    scores = np.rint(share * n_items).astype(int)
    groups = _score_groups(scores, n_groups)
    used = np.unique(groups)
    # the fitted population: a normal with the mean of the abilities and their variance plus the
    # mean squared standard error (MAP estimates are shrunk: var(theta_hat) understates var(theta))
    info = np.where(observed, fisher_information(theta[:, None], a, b, c), 0.0).sum(axis=1)
    mu = float(theta.mean())
    sd = float(np.sqrt(theta.var() + np.mean(1.0 / (info + 1.0))))
    nodes = mu + sd * np.linspace(-6.0, 6.0, n_nodes)
    from scipy.stats import norm  # imported where used: `import irtlib` stays light

    w = norm.pdf(np.linspace(-6.0, 6.0, n_nodes))
    w /= w.sum()
    p_nodes = probability(nodes[:, None], a, b, c)
    uniq, inv = np.unique(scores, return_inverse=True)
    e_js = sx2_expected(p_nodes, w, uniq, exact=n_items <= exact_max_items)       # (J, S)
    e_mj = e_js[:, inv].T                                                          # (M, J)
    onehot = (groups[:, None] == used[None, :]).astype(float)                      # (M, G)
    obs_f = observed.astype(float)
    n_g = onehot.T @ obs_f                                                         # (G, J)
    with np.errstate(invalid="ignore", divide="ignore"):
        o_g = (onehot.T @ xs) / n_g
        e_g = (onehot.T @ (e_mj * obs_f)) / n_g
        terms = n_g * (o_g - e_g) ** 2 / (e_g * (1.0 - e_g))
    terms = np.where(n_g > 0, np.nan_to_num(terms, nan=0.0, posinf=0.0), 0.0)
    stat = terms.sum(axis=0)
    df = (n_g > 0).sum(axis=0) - n_params
    from scipy.stats import chi2

    p = np.where(df > 0, chi2.sf(stat, np.maximum(df, 1)), np.nan)
    return stat, df.astype(float), p, len(used)


def _mean_squares(x, observed, p_cells, kind):
    """Wright and Masters' (1982) infit / outfit mean squares and their Wilson-Hilferty z."""
    w = p_cells * (1.0 - p_cells)
    r2 = np.where(observed, (np.where(observed, x, 0.0) - p_cells) ** 2, 0.0)
    w = np.where(observed, np.maximum(w, 1e-12), 0.0)
    n = observed.sum(axis=0)
    if kind == "outfit":
        ms = np.where(observed, r2 / np.where(observed, w, 1.0), 0.0).sum(axis=0) / n
        q2 = np.where(observed, 1.0 / np.where(observed, w, 1.0) - 4.0, 0.0).sum(axis=0) / n**2
    else:
        ms = r2.sum(axis=0) / w.sum(axis=0)
        q2 = (w - 4.0 * w**2).sum(axis=0) / w.sum(axis=0) ** 2
    q = np.sqrt(np.maximum(q2, 1e-12))
    z = (np.cbrt(ms) - 1.0) * (3.0 / q) + q / 3.0
    return ms, n.astype(float), z


def item_fit(matrix: ResponseMatrix, calibration: Calibration, *, method: str = "sx2", alpha: float = 0.05,
             correction: str = "bh", n_groups: int | None = None, min_group: int = 5, n_nodes: int = 201,
             exact_max_items: int = 500) -> pd.DataFrame:
    """Item fit statistics with a multiple-testing correction.

    Parameters
    ----------
    matrix : ResponseMatrix, shape (n_models, n_items)
        The responses the calibration was fitted to.
    calibration : Calibration
        Parameters for every model and item of ``matrix`` (``c`` used if present).
    method : {"sx2", "infit", "outfit"}
        ``"sx2"``: Orlando and Thissen's (2000) S-X2. Models are grouped by summed score into
        ``n_groups`` groups of adjacent scores (with tens of models every score is its own level,
        so levels are collapsed as Orlando and Thissen do, here into groups of about equal size);
        in each group the observed safe rate of item j is compared with the model-implied rate
        given the score, ``sum_g N_g (O_g - E_g)^2 / (E_g (1 - E_g))``, on
        ``n_groups - n_item_parameters`` degrees of freedom. The ability density is a normal
        with the mean of the fitted abilities and their variance plus the mean squared standard
        error (the fitted population, undoing the shrinkage of MAP estimates), on ``n_nodes``
        equally spaced nodes over +-6 SD. ``"infit"`` / ``"outfit"``: Wright and Masters' (1982)
        information-weighted and unweighted mean squares of standardised residuals (expected 1),
        tested through the Wilson-Hilferty cube-root z (two-sided).
    alpha : float
        Level at which an item is flagged, after the correction.
    correction : {"bh", "holm", "bonferroni", "none"}
        See :func:`adjust_pvalues` (default: Benjamini-Hochberg false discovery rate).
    n_groups : int, optional
        Score groups for S-X2; default ``min(10, n_models // min_group)``.
    min_group : int
        Models per score group that the default aims for.
    n_nodes : int
        Quadrature nodes.
    exact_max_items : int
        Up to this many items the score distributions are exact (Lord-Wingersky); above it the
        normal approximation of :func:`sx2_expected` (long banks, where it is accurate and the
        exact recursion's cost grows with the square of the number of items).

    Returns
    -------
    DataFrame, indexed by item
        ``statistic`` (S-X2, or the mean square), ``df`` (S-X2's degrees of freedom; the number
        of responses for mean squares), ``p_value``, ``p_adjusted``, ``flagged``, and ``zstd``
        for mean squares. ``attrs`` records the method, level, correction and (S-X2) the groups.

    Notes
    -----
    S-X2 assumes complete data; a model with missing cells is placed by its share of safe
    responses times the number of items, and each item's observed and expected rates use the
    models that saw it. With joint MAP estimates (not marginal ML) the reference distributions
    are approximate; ``tests/fit/test_fit_checks.py`` measures them on data drawn from the 2PL. In
    the book's regime (80 models x 2,000 items, ``log a ~ N(0, 1)``) S-X2 is well calibrated
    (4.6% of p-values below 0.05, 0.2% flagged) but outfit is not (10% below 0.05, 9% flagged
    after the correction; infit 0.2% and none): compare a benchmark's flag rates with those of a
    matrix drawn from its own fit (:func:`simulate_fitted`) before reading them as misfit.
    """
    if method not in ITEM_FIT_METHODS:
        raise InputError(f"method must be one of {ITEM_FIT_METHODS}, got {method!r}")
    if not 0 < alpha < 1:
        raise InputError(f"alpha must lie in (0, 1), got {alpha}")
    if correction not in _CORRECTIONS:
        raise InputError(f"correction must be one of {_CORRECTIONS}, got {correction!r}")
    x, observed, theta, a, b, c = aligned(matrix, calibration)
    attrs = {"method": method, "alpha": alpha, "correction": correction}
    if method == "sx2":
        n_params = _n_item_parameters(calibration)
        if n_groups is None:
            n_groups = min(10, x.shape[0] // int(min_group))
        if n_groups <= n_params:
            raise InputError(f"n_groups: S-X2 needs more score groups than the {n_params} item parameters; "
                             f"got {n_groups} ({x.shape[0]} models, min_group={min_group})")
        stat, df, p, used = _sx2(x, observed, theta, a, b, c, n_groups=int(n_groups), n_nodes=int(n_nodes),
                                 exact_max_items=int(exact_max_items), n_params=n_params)
        out = pd.DataFrame({"statistic": stat, "df": df, "p_value": p}, index=matrix.items)
        attrs.update({"n_groups": used, "n_item_parameters": n_params,
                      "score_distribution": "exact" if x.shape[1] <= exact_max_items else "normal"})
    else:
        p_cells = probability(theta[:, None], a, b, c)
        ms, n, z = _mean_squares(x, observed, p_cells, method)
        from scipy.stats import norm

        p = 2.0 * norm.sf(np.abs(z))
        out = pd.DataFrame({"statistic": ms, "df": n, "p_value": p, "zstd": z}, index=matrix.items)
    out["p_adjusted"] = adjust_pvalues(out["p_value"].to_numpy(), correction=correction)
    out["flagged"] = out["p_adjusted"] <= alpha
    out.attrs.update(attrs)
    return out


# ---------------------------------------------------------------------------- Q3
def residuals(matrix: ResponseMatrix, calibration: Calibration) -> pd.DataFrame:
    """Raw residuals ``x - P(theta_hat)``, models x items, NaN where unobserved."""
    x, observed, theta, a, b, c = aligned(matrix, calibration)
    r = np.where(observed, x - probability(theta[:, None], a, b, c), np.nan)
    return pd.DataFrame(r, index=matrix.models, columns=matrix.items)


def _standardised_columns(matrix, calibration):
    """Residual columns centred and scaled to unit length (unobserved cells: the item's mean residual)."""
    return _standardised(residuals(matrix, calibration).to_numpy())


def _standardised(r: np.ndarray) -> np.ndarray:
    """:func:`_standardised_columns` of the raw residuals ``r`` (models x items, NaN where unobserved)."""
    r = r - np.nanmean(r, axis=0)
    r = np.where(np.isnan(r), 0.0, r)
    norm_ = np.sqrt((r * r).sum(axis=0))
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(norm_ > 0, r / norm_, np.nan)
    return z


def q3(matrix: ResponseMatrix, calibration: Calibration, *, items: Sequence[str] | None = None) -> pd.DataFrame:
    """Yen's (1984) Q3: correlations over models between items' residuals ``x - P(theta_hat)``.

    Parameters
    ----------
    matrix : ResponseMatrix, shape (n_models, n_items)
    calibration : Calibration
    items : sequence, optional
        Restrict to these items (a full bank of thousands of items gives a matrix of tens of
        millions of cells; :func:`q3_summary` summarises without building it).

    Returns
    -------
    DataFrame, shape (n, n), indexed and labelled by item
        Diagonal 1; NaN for an item whose residuals are constant. Unobserved cells take the
        item's mean residual (they add nothing to the covariance).
    """
    if items is not None:
        matrix = matrix.subset(items=items)
    z = _standardised_columns(matrix, calibration)
    out = z.T @ z
    np.fill_diagonal(out, np.where(np.isnan(np.diag(out)), np.nan, 1.0))
    return pd.DataFrame(out, index=matrix.items, columns=matrix.items)


def _group_codes(items: pd.Index, groups):
    """Integer group codes per item (-1: no group) and the group labels they index."""
    if isinstance(groups, Mapping):            # a dict of item -> label, as the hints allow
        groups = pd.Series(groups, dtype=object)
    if isinstance(groups, pd.Series):
        missing = items.difference(groups.index)
        if len(missing):
            raise InputError(f"groups: no group for item(s) {list(missing[:3])}")
        g = groups.reindex(items)
    else:
        if len(groups) != len(items):
            raise InputError(f"groups has {len(groups)} entries for {len(items)} items")
        g = pd.Series(np.asarray(groups, dtype=object), index=items)
    codes, labels = pd.factorize(g, use_na_sentinel=True)
    return codes, labels


def _within_pairs(codes):
    """All pairs (i < j) of positions with the same non-negative code."""
    df = pd.DataFrame({"g": codes, "i": np.arange(codes.size)})
    df = df[df["g"] >= 0]
    pairs = df.merge(df, on="g")
    pairs = pairs[pairs["i_x"] < pairs["i_y"]]
    return pairs["i_x"].to_numpy(), pairs["i_y"].to_numpy(), pairs["g"].to_numpy()


def _sample_within_pairs(codes, sizes, n_pairs, n, seed):
    """``n`` within-group pairs drawn uniformly (with replacement) without listing them all."""
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    members = np.argsort(np.where(codes >= 0, codes, np.iinfo(np.int64).max), kind="stable")
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    g = rng.choice(sizes.size, size=n, p=n_pairs / n_pairs.sum())
    size = sizes[g].astype(np.int64)
    first = rng.integers(0, size)
    second = rng.integers(0, size - 1)
    second = second + (second >= first)                     # a different member of the same group
    return members[offsets[g] + first], members[offsets[g] + second]


def _summary(sum_all, n_items, within_values, sum_within, n_within, threshold):
    n_all_pairs = n_items * (n_items - 1) / 2
    n_between = n_all_pairs - n_within
    mean_all = sum_all / n_all_pairs
    some = n_within > 0 and within_values.size > 0
    return pd.Series({
        "mean_within": sum_within / n_within if n_within else np.nan,
        "mean_between": (sum_all - sum_within) / n_between if n_between else np.nan,
        "mean_all": mean_all,
        "expected_independent": -1.0 / (n_items - 1),
        "median_within": float(np.median(within_values)) if some else np.nan,
        "share_within_above": float(np.mean(within_values - mean_all > threshold)) if some else np.nan,
        "n_within_pairs": float(n_within), "n_between_pairs": float(n_between),
    })


def summarise_q3(q3_frame: pd.DataFrame, groups: Mapping[str, object] | pd.Series, *,
                 threshold: float = 0.2) -> pd.Series:
    """Q3 within and between item groups, from a full Q3 matrix (see :func:`q3_summary`).

    Parameters
    ----------
    q3_frame : DataFrame, shape (n_items, n_items)
        From :func:`q3`.
    groups : Series indexed by item, or array_like of length n_items
        Group labels (prompt cluster, category); NaN: in no group.
    threshold : float
        A within pair counts as locally dependent when its Q3 exceeds the mean Q3 by more than
        this (Christensen, Makransky and Horton 2017 use 0.2).
    """
    items = q3_frame.index
    codes, _ = _group_codes(items, groups)
    q = q3_frame.to_numpy()
    iu = np.triu_indices(len(items), 1)
    i, j, _ = _within_pairs(codes)
    vals = q[i, j]
    return _summary(np.nansum(q[iu]), len(items), vals, np.nansum(vals), vals.size, threshold)


def q3_summary(matrix: ResponseMatrix, calibration: Calibration, groups: Mapping[str, object] | pd.Series, *,
               threshold: float = 0.2, by_group: bool = False, max_pairs: int = 500_000, seed: int = 0,
               chunk: int = 200_000) -> pd.Series | tuple[pd.Series, pd.Series]:
    """Yen's Q3 summarised within and between item groups, without the full Q3 matrix.

    Parameters
    ----------
    matrix : ResponseMatrix, shape (n_models, n_items)
    calibration : Calibration
    groups : Series indexed by item, or array_like of length n_items
        Group labels: the real AIR-Bench data's base prompt (three rewrites each), the simulated
        release's ``cluster`` or ``subcategory``. NaN: in no group.
    threshold : float
        See :func:`summarise_q3`.
    by_group : bool
        Also return the mean Q3 within each group (a Series indexed by group label).
    max_pairs : int
        The median and the share above the threshold are taken over all within pairs, or over
        ``max_pairs`` pairs drawn at random (uniformly, with replacement, seeded) when there are
        more (large sub-categories of a long bank have millions); the means are always exact.
    seed : int
        Seeds that sample.
    chunk : int
        Within pairs processed per block (bounds memory).

    Returns
    -------
    Series
        ``mean_within``, ``mean_between``, ``mean_all`` (over all pairs of distinct items),
        ``expected_independent`` (``-1 / (n_items - 1)``), ``median_within``,
        ``share_within_above`` (share of within pairs with ``Q3 - mean_all > threshold``),
        ``n_within_pairs``, ``n_between_pairs``. With ``by_group=True``, ``(summary, per_group)``.

    Notes
    -----
    With columns ``z_j`` of unit length, ``Q3 = Z^T Z``, so the sum over all pairs is
    ``(||Z 1||^2 - n) / 2`` and within a group ``(||Z_g 1||^2 - n_g) / 2``: the means cost one
    pass over the residuals. Items with constant residuals are left out.
    """
    z = _standardised_columns(matrix, calibration)
    codes, labels = _group_codes(matrix.items, groups)
    ok = ~np.isnan(z).any(axis=0)
    z, codes = z[:, ok], codes[ok]
    n = z.shape[1]
    total = z.sum(axis=1)
    sum_all = (total @ total - n) / 2.0
    grouped = codes >= 0
    n_groups = int(codes.max()) + 1 if grouped.any() else 0
    group_sums = np.zeros((z.shape[0], n_groups))
    np.add.at(group_sums.T, codes[grouped], z[:, grouped].T)
    sizes = np.bincount(codes[grouped], minlength=n_groups).astype(float)
    within_sums = ((group_sums**2).sum(axis=0) - sizes) / 2.0           # per group
    n_pairs = sizes * (sizes - 1.0) / 2.0
    if n_pairs.sum() > max_pairs:
        i, j = _sample_within_pairs(codes, sizes, n_pairs, max_pairs, seed)
    else:
        i, j, _ = _within_pairs(codes)
    vals = np.empty(i.size)
    for lo in range(0, i.size, chunk):
        sl = slice(lo, lo + chunk)
        vals[sl] = np.einsum("mk,mk->k", z[:, i[sl]], z[:, j[sl]])
    out = _summary(sum_all, n, vals, within_sums.sum(), n_pairs.sum(), threshold)
    if not by_group:
        return out
    keep = n_pairs > 0
    per = pd.Series(within_sums[keep] / n_pairs[keep], index=pd.Index(np.asarray(labels)[keep], name="group"),
                    name="mean_q3")
    return out, per


def q3_by_category(matrix: ResponseMatrix, calibration: Calibration,
                   groups: Mapping[str, object] | pd.Series) -> pd.DataFrame:
    """Residual correlation by category: mean Yen's Q3 between the items of every pair of categories.

    A second dimension shared by one category of items (HarmBench's copyright behaviours, a risk
    area) shows as a diagonal cell above the rest of the table: the category's items still
    correlate once the 2PL's one ability is taken out (paper, section "Limits": safety may not
    be one latent trait).

    Parameters
    ----------
    matrix : ResponseMatrix, shape (n_models, n_items)
    calibration : Calibration
        Fitted to ``matrix`` (its ``c`` used where present).
    groups : Series indexed by item, or array_like of length n_items
        The category of each item; NaN: in no category (left out).

    Returns
    -------
    DataFrame, shape (n_categories, n_categories)
        Indexed and labelled by category (in order of first appearance). Cell ``(g, h)``, g != h:
        the mean Q3 over all pairs of an item of g and an item of h; diagonal: the mean over pairs
        of distinct items of g (NaN for a category of one item). Symmetric. ``attrs``:
        ``n_items`` (dict, items per category), ``mean_all`` (mean Q3 over all pairs of distinct
        items kept), ``expected_independent`` (``-1 / (n_items - 1)``). Items with constant
        residuals are left out, as in :func:`q3_summary`.

    Notes
    -----
    With unit-length residual columns ``z_j`` and ``S_g = sum_{j in g} z_j``, the sum of Q3 over
    pairs across g and h is ``S_g . S_h``, and within g it is ``(||S_g||^2 - n_g) / 2``: one
    pass over the residuals, no item x item matrix.
    """
    z = _standardised_columns(matrix, calibration)
    codes, labels = _group_codes(matrix.items, groups)
    keep = ~np.isnan(z).any(axis=0)
    z, codes = z[:, keep], codes[keep]
    n = z.shape[1]
    labels = np.asarray(labels, dtype=object)
    n_groups = labels.size
    inside = codes >= 0
    onehot = np.zeros((n, n_groups))
    onehot[np.flatnonzero(inside), codes[inside]] = 1.0
    sums = z @ onehot                                   # (n_models, n_groups): S_g
    cross = sums.T @ sums                               # S_g . S_h
    sizes = onehot.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = cross / np.outer(sizes, sizes)
        within = np.where(sizes > 1, (np.diag(cross) - sizes) / (sizes * (sizes - 1.0)), np.nan)
    np.fill_diagonal(mean, within)
    present = sizes > 0
    out = pd.DataFrame(mean[np.ix_(present, present)], index=pd.Index(labels[present], name="category"),
                       columns=pd.Index(labels[present], name="category"))
    total = z.sum(axis=1)
    out.attrs.update({"n_items": {str(g): int(s) for g, s in zip(labels[present], sizes[present], strict=True)},
                      "mean_all": float((total @ total - n) / (n * (n - 1.0))) if n > 1 else np.nan,
                      "expected_independent": -1.0 / (n - 1) if n > 1 else np.nan})
    return out


# ---------------------------------------------------------------------------- null references
def simulate_fitted(matrix: ResponseMatrix, calibration: Calibration, *, seed: int = 0,
                    rng: np.random.Generator | None = None) -> ResponseMatrix:
    """A response matrix drawn from the fitted model, with the data's shape and missing cells.

    Items left without variance (all 0 or all 1) are dropped, as the variance filter would;
    useful as the null reference of a check (what it reports when the model is true).

    Parameters
    ----------
    matrix : ResponseMatrix, shape (n_models, n_items)
    calibration : Calibration
        Its ``c`` is used where present.
    seed : int
        Seeds the draw (ignored when ``rng`` is given).
    rng : numpy Generator, optional

    Returns
    -------
    ResponseMatrix, shape (n_models, n_kept)
    """
    _, observed, theta, a, b, c = aligned(matrix, calibration)
    rng = np.random.default_rng(np.random.SeedSequence(seed)) if rng is None else rng
    sim, keep = _draw(observed, probability(theta[:, None], a, b, c), rng)
    return ResponseMatrix(sim[:, keep], matrix.models, matrix.items[keep], source=f"simulated from {matrix.source}")


def _draw(observed: np.ndarray, p: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """:func:`simulate_fitted`'s draw from the probabilities ``p``: the cells (NaN where unobserved) and the items kept.

    An item is kept when its observed draws are not all equal: for 0/1 draws that is where their
    standard deviation (``nanstd``, as before) is positive, counted here as ``0 < safe < observed``.
    """
    sim = np.where(observed, (rng.random(p.shape) < p).astype(float), np.nan)
    safe = (sim == 1.0).sum(axis=0)
    return sim, (safe > 0) & (safe < observed.sum(axis=0))


# ---------------------------------------------------------------------------- dimensionality
def residual_eigenvalues(matrix: ResponseMatrix, calibration: Calibration, *, n: int = 10) -> np.ndarray:
    """Largest eigenvalues of the items' residual correlation matrix (the Q3 matrix with unit diagonal).

    The non-zero eigenvalues of ``Z' Z`` (``Z`` the standardised residuals, models x items) are
    those of the smaller Gram matrix ``Z Z'`` (models x models) when there are fewer models than
    items, so a bank of thousands of items costs no item x item matrix. They are taken from
    that Gram matrix by a symmetric eigensolver rather than from the singular values of ``Z``:
    the same eigenvalues (the squared singular values) to rounding, about 1e-12 of the largest,
    at a small part of the cost of an SVD of a wide matrix. They sum to the number of items; with
    fewer models than items at most ``n_models`` are non-zero.

    Returns
    -------
    ndarray, shape (min(n, rank),), decreasing
    """
    return _residual_eigenvalues(*aligned(matrix, calibration), n=n)


def _residual_eigenvalues(x, observed, theta, a, b, c, *, n: int) -> np.ndarray:
    """:func:`residual_eigenvalues` of aligned arrays, in :func:`aligned`'s order.

    Responses and observed mask (n_models, n_items), abilities (n_models,), a, b and c or None (n_items,).
    """
    z = _standardised(np.where(observed, x - probability(theta[:, None], a, b, c), np.nan))
    return _gram_eigenvalues(z[:, ~np.isnan(z).any(axis=0)])[:n]


def _gram_eigenvalues(z: np.ndarray) -> np.ndarray:
    """Eigenvalues of ``z' z`` (the squared singular values of ``z``), decreasing, ``min(z.shape)`` of them.

    From the Gram matrix of the shorter side of ``z`` (``z z'`` or ``z' z``) and LAPACK's symmetric
    eigensolver; rounding's negative values of eigenvalues that are zero are set to 0.
    """
    gram = z @ z.T if z.shape[0] <= z.shape[1] else z.T @ z
    return np.clip(np.linalg.eigvalsh(gram)[::-1], 0.0, None)


def dimensionality(matrix: ResponseMatrix, calibration: Calibration, *, n: int = 10, n_replications: int = 20,
                   quantile: float = 0.95, seed: int = 0, refit: bool = True) -> pd.DataFrame:
    """Residual eigenvalues against parallel analysis (Horn 1965) on data simulated from the fitted model.

    Parameters
    ----------
    matrix : ResponseMatrix, shape (n_models, n_items)
    calibration : Calibration
        The fitted model (``c`` used if present); the simulated matrices are drawn from it with
        the same missing cells.
    n : int
        Eigenvalues reported.
    n_replications : int
        Simulated matrices.
    quantile : float
        The parallel-analysis reference: this quantile of the simulated eigenvalues of each rank.
    seed : int
        Seeds the simulation (same call, same numbers).
    refit : bool
        Refit each simulated matrix with the same model (MAP engine) before taking its residuals,
        so the reference carries the same fitting artefacts as the data (True, the default); False
        takes residuals against the generating parameters (faster, slightly larger eigenvalues).

    Returns
    -------
    DataFrame indexed by rank (1..n)
        ``eigenvalue``, ``parallel`` (the ``quantile`` of the simulated ones), ``parallel_mean``,
        ``exceeds``. ``attrs``: ``ratio_1_2`` (first over second eigenvalue of the data),
        ``parallel_ratio_1_2`` (the same, mean over replications), ``n_above`` (leading
        eigenvalues above the reference, counted until the first that is not), settings.
    """
    from irtlib.calibration.joint_map import fit_map
    from irtlib.calibration.models import fit_irt_values

    if int(n_replications) < 1:
        raise InputError(f"n_replications must be at least 1, got {n_replications}")
    if not 0 < quantile < 1:
        raise InputError(f"quantile must lie in (0, 1), got {quantile}")
    x, observed, theta, a, b, c = aligned(matrix, calibration)
    data = residual_eigenvalues(matrix, calibration, n=n)
    model = calibration.settings.get("model", "3pl" if c is not None else "2pl")
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    sims = np.full((int(n_replications), data.size), np.nan)
    p = probability(theta[:, None], a, b, c)       # every replication draws from the same fitted model
    for r in range(int(n_replications)):
        sim, keep = _draw(observed, p, rng)
        values = sim[:, keep]
        if not values.size or not (values == values).any(axis=1).all():
            # simulate_fitted's matrix refuses these (no item left, a model without a response): its error
            ResponseMatrix(values, matrix.models, matrix.items[keep], source=f"simulated from {matrix.source}")
        # simulate_fitted's matrix, the refit and residual_eigenvalues on plain arrays: the same values in the
        # same layouts, without a ResponseMatrix and a Calibration per replication
        if not refit:
            fit = (theta, a[keep], b[keep], None if c is None else c[keep])
        elif model == "2pl":       # fit_irt_values's 2PL fit (the same call), without the log-likelihood it adds
            fit = (*fit_map(values)[:3], None)
        else:
            fitted = fit_irt_values(values, model=model)
            fit = (fitted["theta"], fitted["a"], fitted["b"], fitted["c"])
        ev = _residual_eigenvalues(values, ~np.isnan(values), *fit, n=n)
        sims[r, :ev.size] = ev
    ref = np.nanquantile(sims, quantile, axis=0)
    exceeds = data > ref
    n_above = int(np.argmin(exceeds)) if not exceeds.all() else int(exceeds.size)
    out = pd.DataFrame({"eigenvalue": data, "parallel": ref, "parallel_mean": np.nanmean(sims, axis=0),
                        "exceeds": exceeds}, index=pd.RangeIndex(1, data.size + 1, name="rank"))
    out.attrs.update({"ratio_1_2": float(data[0] / data[1]) if data.size > 1 else np.nan,
                      "parallel_ratio_1_2": float(np.nanmean(sims[:, 0] / sims[:, 1])) if data.size > 1 else np.nan,
                      "n_above": n_above, "n_replications": int(n_replications), "quantile": quantile,
                      "seed": seed, "refit": refit, "model": model, "n_items": int(x.shape[1])})
    return out
