"""The previous forms of the model-fit chapter's kernels, kept to show that the current ones give the same bits.

- :func:`normal_pmf_dense`: S-X2's normal approximation evaluated at every (item, score, node) cell, as
  ``irtlib.fit.checks.sx2_expected`` did before it skipped the cells whose two normal CDFs are both
  exactly 0 or both exactly 1 (``_normal_pmf_live``);
- :func:`leave_one_out_exact`: the leave-one-item-out score distributions, both directions over every
  (item, node) and every rest score, as before each ran in its one direction and range;
- :func:`sx2_expected_exact`: S-X2's exact expected rates with the leave-one-out table always gathered by
  score (a copy even when every rest score is distinct) and cleaned by ``nan_to_num`` and ``clip``;
- :class:`Point` and :func:`step`: the 1PL / 3PL engine's point and Fisher-scoring step of
  :mod:`irtlib.calibration.models` as they were, computing ``sigmoid(z)`` through
  :func:`irtlib.core.kernels.probability` and :func:`irtlib.core.kernels.z_derivatives` (three more
  logistic evaluations per iteration than now). Same signatures as the module's ``_Point`` and ``_step``,
  so a test or benchmark swaps them in with ``monkeypatch``.

The tests of ``tests/fit/test_previous_forms.py`` and ``benchmarks/bench_model_fit_checks.py`` use them.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.special import expit, log_expit, ndtr

from irtlib.calibration.models import P_FLOOR
from irtlib.calibration.newton import arrow_step
from irtlib.core.kernels import probability, z_derivatives


def normal_pmf_dense(scores, mean, var):
    """The normal approximation of ``Pr(score)`` at every cell: shape (c, S, Q) from scores (S,), mean, var (c, Q)."""
    s, mean, var = scores[None, :, None], mean[:, None, :], var[:, None, :]
    sd = np.sqrt(np.maximum(var, 1e-12))
    return ndtr((s + 0.5 - mean) / sd) - ndtr((s - 0.5 - mean) / sd)


def leave_one_out_exact(f, p, rest_scores):
    """Leave-one-out score distributions, (n_items, len(rest_scores), n_nodes), both directions everywhere."""
    n_nodes, n_items = p.shape
    pt = p.T
    fwd = np.zeros((n_items, len(rest_scores), n_nodes))
    bwd = np.zeros_like(fwd)
    where = {int(r): i for i, r in enumerate(rest_scores)}
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        g = np.zeros((n_items, n_nodes))
        for r in range(n_items):
            g = (f[None, :, r] - pt * g) / (1.0 - pt)
            if r in where:
                fwd[:, where[r]] = g
        g = np.zeros((n_items, n_nodes))
        for r in range(n_items - 1, -1, -1):
            g = (f[None, :, r + 1] - (1.0 - pt) * g) / pt
            if r in where:
                bwd[:, where[r]] = g
    out = np.where((pt <= 0.5)[:, None, :], fwd, bwd)
    return np.clip(np.nan_to_num(out, nan=0.0, posinf=0.0, neginf=0.0), 0.0, None)


def sx2_expected_exact(p_nodes, weights, scores):
    """``irtlib.fit.checks.sx2_expected(..., exact=True)`` as it was: gather always, clean by nan_to_num and clip."""
    from irtlib.fit.checks import lord_wingersky

    p, w, scores = np.asarray(p_nodes, float), np.asarray(weights, float), np.asarray(scores, int)
    f = lord_wingersky(p)
    den = f[:, scores].T @ w
    rest = np.clip(scores - 1, 0, None)
    g = leave_one_out_exact(f, p, np.unique(rest))
    g = g[:, np.searchsorted(np.unique(rest), rest)]
    num = np.einsum("jsq,qj,q->js", g, p, w)
    num[:, scores == 0] = 0.0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.clip(num / den[None, :], 0.0, 1.0)


class Point:
    """The 1PL / 3PL engine's point as it was (``sigmoid(z)`` evaluated again inside ``probability``).

    ``safe_cells`` (the engine's flat indices of the cells with ``x == 1``) is accepted and not used: this
    form selects those cells by a boolean mask at every point, as the engine did.
    """

    def __init__(self, x, mask, theta, alpha, b, gamma, priors, *, safe_cells=None):
        self.theta, self.alpha, self.b, self.gamma = theta, alpha, b, gamma
        self.a = np.exp(alpha)
        self.z = self.a * (theta[:, None] - b)
        (mt, st), (ma, sa), (mb, sb), (pc, qc) = priors
        weight = x.shape[1] if alpha.size == 1 else 1.0
        lp = -0.5 * (((theta - mt) / st) ** 2).sum() - 0.5 * weight * (((alpha - ma) / sa) ** 2).sum() \
            - 0.5 * (((b - mb) / sb) ** 2).sum()
        if gamma is None:
            self.s = expit(self.z)
            self.c = None
            ll = log_expit(self.z) - (1.0 - x) * self.z
            self.p = self.s
        else:
            self.c = expit(gamma)
            self.s = expit(self.z)
            self.p = np.clip(probability(theta[:, None], self.a, b, self.c), P_FLOOR, 1.0 - P_FLOOR)
            ll = x * np.log(self.p) + (1.0 - x) * np.log1p(-self.p)
            lp += ((pc - 1.0) * log_expit(gamma) + (qc - 1.0) * log_expit(-gamma)).sum()
        if mask is not None:
            ll = ll * mask
        self.log_likelihood = float(ll.sum())
        self.log_posterior = self.log_likelihood + float(lp)


def step(x, mask, pt: Point, priors, *, tables=None):
    """The 1PL / 3PL engine's Fisher-scoring direction as it was (``z_derivatives``, ``sigmoid(-z)`` twice).

    ``tables`` (the current ``_step``'s kept 3PL step tables) is accepted, so the signatures match, and unused.
    """
    (mt, st), (ma, sa), (mb, sb), (pc, qc) = priors
    a, z, s, p = pt.a, pt.z, pt.s, pt.p
    g_z, w_zz = z_derivatives(x, z, pt.c)
    if pt.c is not None:
        c = pt.c
        g_g = (x - p) * c / p
        q = expit(-z)
        dc = c * (1.0 - c)
        w_zg = dc * s * q / p
        w_gg = c * dc * q / p
        if mask is not None:
            g_g, w_zg, w_gg = g_g * mask, w_zg * mask, w_gg * mask
    if mask is not None:
        g_z, w_zz = g_z * mask, w_zz * mask
    shared = pt.c is None
    n_models = x.shape[0]
    g_theta = g_z @ a if not shared else a[0] * g_z.sum(axis=1)
    g_theta = g_theta - (pt.theta - mt) / st**2
    a_row = a if not shared else np.full(x.shape[1], a[0])
    wa = w_zz * a_row
    g_b = -a_row * g_z.sum(axis=0) - (pt.b - mb) / sb**2
    j_tt = wa @ a_row + 1.0 / st**2
    if shared:
        n_items = x.shape[1]
        g_al = np.array([(g_z * z).sum() - n_items * (pt.alpha[0] - ma) / sa**2])
        grads = [g_b]
        blocks = np.array([[a_row**2 * w_zz.sum(axis=0) + 1.0 / sb**2]])
        cross = [-(wa * a_row)]
        wz = w_zz * z
        dense = np.diag(np.append(j_tt, (wz * z).sum() + n_items / sa**2))
        t_al = (wz * a_row).sum(axis=1)
        dense[:n_models, n_models] = t_al
        dense[n_models, :n_models] = t_al
        cross = [np.vstack([cross[0], -(wz * a_row).sum(axis=0)[None, :]])]
        g_dense = np.append(g_theta, g_al)
    else:
        g_al = (g_z * z).sum(axis=0) - (pt.alpha - ma) / sa**2
        g_ga = g_g.sum(axis=0) + (pc - 1.0) * (1.0 - c) - (qc - 1.0) * c
        grads = [g_al, g_b, g_ga]
        wz = w_zz * z
        j_aa = (wz * z).sum(axis=0) + 1.0 / sa**2
        j_bb = a * a * w_zz.sum(axis=0) + 1.0 / sb**2
        j_ab = -a * wz.sum(axis=0)
        j_gg = w_gg.sum(axis=0) + (pc + qc - 2.0) * dc
        j_ag = (w_zg * z).sum(axis=0)
        j_bg = -a * w_zg.sum(axis=0)
        blocks = np.array([[j_aa, j_ab, j_ag], [j_ab, j_bb, j_bg], [j_ag, j_bg, j_gg]])
        cross = [wz * a, -wa * a, w_zg * a]
        dense = np.diag(j_tt)
        g_dense = g_theta
    try:
        binv = np.moveaxis(np.linalg.inv(np.moveaxis(blocks, -1, 0)), 0, -1)
    except np.linalg.LinAlgError:
        return None
    result = arrow_step(dense, g_dense, cross, grads, binv)
    if result is None:
        return None
    d_dense, d_items = result
    if shared:
        return d_dense[:n_models], d_dense[n_models:], d_items[0], None
    return d_dense, d_items[0], d_items[1], d_items[2]


def compare_models(matrix, *, models=("1pl", "2pl", "3pl"), folds=5, seed=0):
    """:func:`irtlib.calibration.models.compare_models` as it was before issue 26 ``c04b`` (``seconds`` left out).

    Every fit by :func:`irtlib.calibration.models.fit_irt_values` (the 2PL's shared as the 1PL / 3PL start,
    with the whole table's log-likelihood it adds), and each fold's held-out cells taken from the log-likelihood
    of the whole table.
    """
    import pandas as pd

    from irtlib.calibration.models import fit_irt_values, heldout_folds, n_parameters
    from irtlib.core.kernels import log_likelihood

    def fit(x, which, model, two):
        if which not in two:
            two[which] = fit_irt_values(x, model="2pl")
        return two[which] if model == "2pl" else fit_irt_values(x, model=model, start=two[which])

    x, observed = matrix.values, matrix.observed
    fold_of = heldout_folds(observed, folds=folds, seed=seed)
    n_obs = int(observed.sum())
    rows, two = [], {}
    for model in models:
        full = fit(x, "full", model, two)
        heldout = np.zeros(x.shape)
        for f in range(int(folds)):
            test = fold_of == f
            fitted = fit(np.where(test, np.nan, x), f, model, two)
            cells = log_likelihood(np.where(observed, x, 0.0), fitted["theta"][:, None], fitted["a"], fitted["b"],
                                   fitted["c"])
            heldout[test] = cells[test]
        ll = float(log_likelihood(np.where(observed, x, 0.0), full["theta"][:, None], full["a"], full["b"],
                                  full["c"])[observed].sum())
        k = n_parameters(model, *x.shape)
        cells = heldout[observed]
        rows.append({"model": model, "heldout_loglik": float(cells.mean()),
                     "heldout_se": float(cells.std(ddof=1) / np.sqrt(cells.size)), "n_parameters": k,
                     "loglik": ll, "aic": -2.0 * ll + 2.0 * k, "bic": -2.0 * ll + k * np.log(n_obs)})
    return pd.DataFrame(rows)


def parallel_eigenvalues(matrix, calibration, *, n, n_replications, seed):
    """The simulated eigenvalues of :func:`irtlib.fit.checks.dimensionality` (2PL refit) as they were computed
    before issue 26 ``c04b``: shape (n_replications, n), each replication a :func:`simulate_fitted` matrix (its
    items kept by ``nanstd > 0``), refitted by ``fit_map`` and passed to ``residual_eigenvalues`` with a
    :class:`~irtlib.calibration.joint_map.Calibration` of pandas Series.
    """
    import pandas as pd

    from irtlib.calibration.joint_map import Calibration, fit_map
    from irtlib.core.responses import ResponseMatrix
    from irtlib.fit.checks import aligned, residual_eigenvalues

    _, observed, theta, a, b, c = aligned(matrix, calibration)
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    sims = np.full((int(n_replications), n), np.nan)
    for r in range(int(n_replications)):
        p = probability(theta[:, None], a, b, c)
        sim = np.where(observed, (rng.random(p.shape) < p).astype(float), np.nan)
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)     # nanstd of an unobserved column, as before
            keep = (np.nanstd(sim, axis=0) > 0) & observed.any(axis=0)
        m = ResponseMatrix(sim[:, keep], matrix.models, matrix.items[keep])
        theta_r, a_r, b_r, _ = fit_map(m.values)
        cal = Calibration(a=pd.Series(a_r, index=m.items), b=pd.Series(b_r, index=m.items),
                          theta=pd.Series(theta_r, index=m.models), engine="map")
        ev = residual_eigenvalues(m, cal, n=n)
        sims[r, :ev.size] = ev
    return sims
