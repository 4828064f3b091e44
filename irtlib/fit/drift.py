"""Item drift: whether the same items behave the same in two calibrations, or for two groups of models.

Two ways of asking, both standard in the literature on differential item functioning (DIF):

- :func:`compare_calibrations`: two 2PL calibrations of the same items (two groups of models, two
  time windows, two judges) are put on one scale by the mean/sigma method on the items' difficulties
  (Marco 1977; Kolen and Brennan 2014, ch. 6), optionally purified (Candell and Drasgow 1988: the
  link is recomputed without the items flagged, so drifting items do not bend the scale), and each
  item's pair of parameters is compared with Lord's (1980) chi-square, ``d' (S_1 + S_2)^-1 d`` on 2
  degrees of freedom, ``d`` the difference of ``(a, b)`` and ``S_g`` their covariance in calibration
  ``g``. The p-values are corrected for multiple testing (Benjamini-Hochberg or Holm,
  :func:`irtlib.fit.checks.adjust_pvalues`).
- :func:`mantel_haenszel`: the Mantel-Haenszel DIF statistic (Holland and Thayer 1988) of each item
  between a reference and a focal group of models matched on their summed score (here the share of
  safe responses, cut into strata of about equal size): the common odds ratio, the ETS delta
  ``-2.35 ln(alpha_MH)`` and the continuity-corrected chi-square on 1 degree of freedom. It needs no
  calibration, only the responses and the groups.
- :func:`drift_by_group`: one response matrix split by a grouping of its models, each half
  calibrated on its own (MAP engine), then :func:`compare_calibrations`.

Drift that is large in several items bends the drifting group's abilities (and the link, before it is
purified), so a few clean items are flagged beside the planted ones: on simulated data with 4 of 30
items 1.5 harder for one group, 4 of 78 clean item tests were flagged over three data sets
(``tests/fit/test_drift.py``); without drift the per-item rate is at the asked level.

Standard errors. Until the calibration engines report item standard errors, those used here come
from :func:`_item_covariance`, the observed information of each item's 2PL likelihood at the fitted
parameters (the item priors left out), from which each model's ability information (its Normal(0, 1)
prior included) is taken out by a Schur complement, other items held fixed: with the abilities simply
held fixed the intervals are too narrow and 7.4% of items were flagged at 5% without drift; with the
correction 4.4% (20 simulated data sets of 300 models x 40 items, two groups).
Swapping in another source of covariances is one argument (``covariances``).

Layer rule: imports :mod:`irtlib.calibration` and below.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from scipy.stats import chi2

from irtlib.calibration.joint_map import Calibration, fit_2pl
from irtlib.core.kernels import bernoulli_variance, probability
from irtlib.core.responses import ResponseMatrix
from irtlib.errors import InputError

from .checks import CORRECTIONS, adjust_pvalues, aligned

__all__ = ["item_covariance", "mean_sigma", "compare_calibrations", "mantel_haenszel", "drift_by_group",
           "group_labels"]


# ---------------------------------------------------------------------------- standard errors
def _item_covariance(matrix: ResponseMatrix, calibration: Calibration, *, free_theta: bool = True) -> pd.DataFrame:
    """Covariance of each item's ``(a, b)`` from the observed information, abilities held fixed.

    For item ``j`` with ``d_i = theta_i - b_j``, ``w_i = p_i (1 - p_i)`` over the models that answered
    it, the observed information of the likelihood is
    ``I_aa = sum w d^2``, ``I_bb = a^2 sum w``, ``I_ab = -a sum w d + sum (x - p)`` (the last term is the
    curvature of ``a (theta - b)`` itself). Its inverse is the covariance.

    Returns
    -------
    DataFrame, indexed by item: ``se_a``, ``se_b``, ``cov_ab`` (NaN where the information is singular).
    """
    x, observed, theta, a, b, _ = aligned(matrix, calibration)
    p = probability(theta[:, None], a, b)
    w = np.where(observed, bernoulli_variance(p), 0.0)
    d = np.where(observed, theta[:, None] - b, 0.0)
    resid = np.where(observed, x - p, 0.0)
    i_aa = (w * d * d).sum(axis=0)
    i_bb = a * a * w.sum(axis=0)
    i_ab = -a * (w * d).sum(axis=0) + resid.sum(axis=0)
    if free_theta:
        # each ability is estimated too: take out what theta_i's own uncertainty costs item j (the Schur
        # complement of model i's ability information, Normal(0, 1) prior included, other items held fixed)
        t_a = w * a * d - resid                                   # (n_models, n_items): info of (theta_i, a_j)
        t_b = -w * a * a                                          # info of (theta_i, b_j)
        info_theta = (w * a * a).sum(axis=1, keepdims=True) + 1.0
        i_aa = i_aa - (t_a * t_a / info_theta).sum(axis=0)
        i_bb = i_bb - (t_b * t_b / info_theta).sum(axis=0)
        i_ab = i_ab - (t_a * t_b / info_theta).sum(axis=0)
    det = i_aa * i_bb - i_ab * i_ab
    with np.errstate(divide="ignore", invalid="ignore"):
        ok = det > 1e-12 * np.maximum(i_aa * i_bb, 1e-300)
        var_a = np.where(ok, i_bb / det, np.nan)
        var_b = np.where(ok, i_aa / det, np.nan)
        cov = np.where(ok, -i_ab / det, np.nan)
    return pd.DataFrame({"se_a": np.sqrt(var_a), "se_b": np.sqrt(var_b), "cov_ab": cov}, index=matrix.items)


#: The public name of the standard-error source used by default (see the module docstring).
item_covariance = _item_covariance


# ---------------------------------------------------------------------------- one scale
def mean_sigma(b_reference: np.ndarray, b_other: np.ndarray) -> tuple[float, float]:
    """Mean/sigma linking constants ``(A, B)`` taking ``b_other`` onto the scale of ``b_reference``.

    ``b* = A b + B`` and ``a* = a / A`` with ``A = sd(b_reference) / sd(b_other)`` and
    ``B = mean(b_reference) - A mean(b_other)`` (Marco 1977), over the items given.
    """
    b_reference = np.asarray(b_reference, dtype=float)
    b_other = np.asarray(b_other, dtype=float)
    if b_reference.size < 2:
        raise InputError(f"mean/sigma linking needs at least 2 common items, got {b_reference.size}")
    sd_other = b_other.std(ddof=1)
    if not sd_other > 0:
        raise InputError("mean/sigma linking: the difficulties of the common items do not vary")
    A = float(b_reference.std(ddof=1) / sd_other)
    return A, float(b_reference.mean() - A * b_other.mean())


def _lord_chi2(d_a, d_b, var_a, var_b, cov):
    det = var_a * var_b - cov * cov
    with np.errstate(divide="ignore", invalid="ignore"):
        return (var_b * d_a * d_a - 2.0 * cov * d_a * d_b + var_a * d_b * d_b) / det


def compare_calibrations(matrix_1: ResponseMatrix, calibration_1: Calibration, matrix_2: ResponseMatrix,
                         calibration_2: Calibration, *, alpha: float = 0.05, correction: str = "bh",
                         purify: int = 1, covariances: tuple[pd.DataFrame, pd.DataFrame] | None = None
                         ) -> pd.DataFrame:
    """Item-by-item drift between two calibrations of the same items, on one scale.

    Parameters
    ----------
    matrix_1, matrix_2 : ResponseMatrix, shapes (n_models_g, n_items_g)
        The responses each calibration was fitted to (for the standard errors).
    calibration_1, calibration_2 : Calibration
        2PL fits; calibration 2 is linked onto calibration 1's scale. Only the items both hold are
        compared.
    alpha : float
        Level at which an item is flagged, after the correction.
    correction : {"bh", "holm", "bonferroni", "none"}
        Multiple-testing correction (:func:`irtlib.fit.checks.adjust_pvalues`).
    purify : int
        Rounds of purification: relink on the items not flagged, retest (0: link on all items once).
    covariances : pair of DataFrames, optional
        Each with ``se_a``, ``se_b``, ``cov_ab`` by item (e.g. from the engines' standard errors);
        default :func:`_item_covariance` of each calibration.

    Returns
    -------
    DataFrame, indexed by the common items
        ``a_1, b_1, a_2, b_2`` (2 linked onto 1's scale), ``se_a_1, se_b_1, se_a_2, se_b_2``,
        ``z_a``, ``z_b`` (difference over its standard error), ``chi2`` (Lord's, 2 df), ``p_value``,
        ``p_adjusted``, ``flagged``, ``linked_on`` (the item entered the final link). ``attrs``:
        ``A``, ``B`` (the link), ``alpha``, ``correction``, ``purify``, ``n_linked``.
    """
    if correction not in CORRECTIONS:
        raise InputError(f"correction must be one of {CORRECTIONS}, got {correction!r}")
    if not 0 < alpha < 1:
        raise InputError(f"alpha must lie in (0, 1), got {alpha}")
    common = calibration_1.a.index.intersection(calibration_2.a.index, sort=False)
    if common.size < 2:
        raise InputError(f"the two calibrations share {common.size} item(s); drift needs at least 2 common items")
    cov_1, cov_2 = covariances if covariances is not None else (
        _item_covariance(matrix_1, calibration_1), _item_covariance(matrix_2, calibration_2))
    cov_1, cov_2 = cov_1.reindex(common), cov_2.reindex(common)
    a1, b1 = calibration_1.a.reindex(common).to_numpy(float), calibration_1.b.reindex(common).to_numpy(float)
    a2_raw, b2_raw = calibration_2.a.reindex(common).to_numpy(float), calibration_2.b.reindex(common).to_numpy(float)
    linked = np.ones(common.size, dtype=bool)
    for round_ in range(int(purify) + 1):
        A, B = mean_sigma(b1[linked], b2_raw[linked])
        a2, b2 = a2_raw / A, A * b2_raw + B
        se_a2, se_b2 = cov_2["se_a"].to_numpy() / A, cov_2["se_b"].to_numpy() * A
        var_a = cov_1["se_a"].to_numpy() ** 2 + se_a2**2
        var_b = cov_1["se_b"].to_numpy() ** 2 + se_b2**2
        cov = cov_1["cov_ab"].to_numpy() + cov_2["cov_ab"].to_numpy()
        stat = _lord_chi2(a2 - a1, b2 - b1, var_a, var_b, cov)
        p = np.where(np.isfinite(stat), chi2.sf(stat, 2), np.nan)
        p_adj = adjust_pvalues(p, correction=correction)
        flagged = p_adj <= alpha
        next_linked = ~flagged
        if round_ == int(purify) or next_linked.sum() < 2 or np.array_equal(next_linked, linked):
            break
        linked = next_linked
    with np.errstate(divide="ignore", invalid="ignore"):
        out = pd.DataFrame({"a_1": a1, "b_1": b1, "a_2": a2, "b_2": b2,
                            "se_a_1": cov_1["se_a"].to_numpy(), "se_b_1": cov_1["se_b"].to_numpy(),
                            "se_a_2": se_a2, "se_b_2": se_b2,
                            "z_a": (a2 - a1) / np.sqrt(var_a), "z_b": (b2 - b1) / np.sqrt(var_b),
                            "chi2": stat, "p_value": p, "p_adjusted": p_adj, "flagged": flagged,
                            "linked_on": linked}, index=common)
    out.attrs.update({"A": A, "B": B, "alpha": alpha, "correction": correction, "purify": int(purify),
                      "n_linked": int(linked.sum()), "test": "Lord's chi-square (2 df)",
                      "link": "mean/sigma on the difficulties"})
    return out


# ---------------------------------------------------------------------------- groups of models
def group_labels(matrix: ResponseMatrix, groups: Mapping[str, object] | pd.Series) -> tuple[np.ndarray, list]:
    """Each model's group (exactly two groups; models without a group are refused), and the labels sorted."""
    series = groups if isinstance(groups, pd.Series) else pd.Series(dict(groups), dtype=object)
    labels = series.reindex(matrix.models)
    missing = matrix.models[labels.isna().to_numpy()]
    if missing.size:
        raise InputError(f"no group for {missing.size} model(s), e.g. {list(missing[:3])}")
    levels = sorted(pd.unique(labels.astype(str)))
    if len(levels) != 2:
        raise InputError(f"drift compares exactly 2 groups of models, got {len(levels)}: {levels[:5]}")
    return labels.astype(str).to_numpy(), levels


def mantel_haenszel(matrix: ResponseMatrix, groups: Mapping[str, object] | pd.Series, *,
                    reference: str | None = None, n_strata: int = 5, alpha: float = 0.05,
                    correction: str = "bh") -> pd.DataFrame:
    """Mantel-Haenszel DIF of every item between two groups of models matched on their score.

    Holland and Thayer (1988). Models are cut into ``n_strata`` strata of about equal size by their
    share of safe responses (the matching score, studied item included, as Holland and Thayer
    recommend). In stratum ``k`` let ``A, B`` be the reference group's safe and unsafe responses to the
    item, ``C, D`` the focal group's, ``N`` their total. Then ``alpha_MH = sum(A D / N) / sum(B C / N)``
    (above 1: the item is easier, safer, for the reference group at equal score), the ETS delta
    ``-2.35 ln alpha_MH`` and the chi-square ``(|sum A - sum E(A)| - 1/2)^2 / sum Var(A)`` on 1 degree of
    freedom, with ``E(A) = n_R m_1 / N`` and ``Var(A) = n_R n_F m_1 m_0 / (N^2 (N - 1))``.

    Parameters
    ----------
    matrix : ResponseMatrix, shape (n_models, n_items)
    groups : mapping or Series, model -> label
        Exactly two labels.
    reference : str, optional
        The reference group's label (default: the first label in sorted order).
    n_strata : int
        Score strata (fewer models call for fewer strata; strata with one model add nothing).
    alpha, correction
        As in :func:`compare_calibrations`.

    Returns
    -------
    DataFrame, indexed by item
        ``alpha_mh``, ``delta`` (ETS), ``chi2``, ``p_value``, ``p_adjusted``, ``flagged``,
        ``rate_reference``, ``rate_focal`` (raw safe rates). ``attrs``: the groups and settings.

    Notes
    -----
    Under a 2PL with groups of different ability, matching on the summed score is not exact and MH can
    flag items of high discrimination (Zwick 1990); read the flags with the two groups' score
    distributions in mind.
    """
    if correction not in CORRECTIONS:
        raise InputError(f"correction must be one of {CORRECTIONS}, got {correction!r}")
    if int(n_strata) < 1:
        raise InputError(f"n_strata must be at least 1, got {n_strata}")
    labels, levels = group_labels(matrix, groups)
    reference = levels[0] if reference is None else str(reference)
    if reference not in levels:
        raise InputError(f"reference group {reference!r} is not one of the groups {levels}")
    focal = levels[1] if reference == levels[0] else levels[0]
    x, observed = np.nan_to_num(matrix.values), matrix.observed
    score = np.where(observed, x, 0.0).sum(axis=1) / np.maximum(observed.sum(axis=1), 1)
    ranks = pd.Series(score).rank(method="average").to_numpy()
    stratum = np.minimum((ranks - 1) * int(n_strata) // len(score), int(n_strata) - 1).astype(int)
    onehot = np.eye(int(n_strata))[stratum]                                   # (n_models, n_strata)
    is_ref = (labels == reference)[:, None]
    safe, seen = np.where(observed, x, 0.0), observed.astype(float)
    A = (onehot * is_ref).T @ safe                                             # (n_strata, n_items)
    n_r = (onehot * is_ref).T @ seen
    C = (onehot * ~is_ref).T @ safe
    n_f = (onehot * ~is_ref).T @ seen
    B, D, N = n_r - A, n_f - C, n_r + n_f
    m1, m0 = A + C, B + D
    with np.errstate(divide="ignore", invalid="ignore"):
        use = N > 1
        num = np.where(use, A * D / N, 0.0).sum(axis=0)
        den = np.where(use, B * C / N, 0.0).sum(axis=0)
        alpha_mh = num / den
        expected = np.where(use, n_r * m1 / N, 0.0).sum(axis=0)
        var = np.where(use, n_r * n_f * m1 * m0 / (N * N * (N - 1)), 0.0).sum(axis=0)
        stat = np.where(var > 0, (np.maximum(np.abs(A.sum(axis=0) - expected) - 0.5, 0.0)) ** 2 / var, np.nan)
        delta = -2.35 * np.log(alpha_mh)
        rate_r = A.sum(axis=0) / n_r.sum(axis=0)
        rate_f = C.sum(axis=0) / n_f.sum(axis=0)
    p = np.where(np.isfinite(stat), chi2.sf(stat, 1), np.nan)
    p_adj = adjust_pvalues(p, correction=correction)
    out = pd.DataFrame({"alpha_mh": alpha_mh, "delta": delta, "chi2": stat, "p_value": p, "p_adjusted": p_adj,
                        "flagged": p_adj <= alpha, "rate_reference": rate_r, "rate_focal": rate_f},
                       index=matrix.items)
    out.attrs.update({"reference": reference, "focal": focal, "n_reference": int(is_ref.sum()),
                      "n_focal": int((~is_ref).sum()), "n_strata": int(n_strata), "alpha": alpha,
                      "correction": correction, "test": "Mantel-Haenszel (Holland and Thayer 1988)"})
    return out


def drift_by_group(matrix: ResponseMatrix, groups: Mapping[str, object] | pd.Series, *,
                   reference: str | None = None, variance_threshold: float = 0.01, alpha: float = 0.05,
                   correction: str = "bh", purify: int = 1) -> pd.DataFrame:
    """Calibrate each group of models on its own (MAP engine) and compare the items (:func:`compare_calibrations`).

    Items with ``p (1 - p) < variance_threshold`` in either group are left out (their parameters
    are not identified within that group) and listed in ``attrs["not_tested"]``.

    Returns
    -------
    DataFrame as :func:`compare_calibrations`, group 1 = ``reference`` (default: first in sorted order).
    """
    labels, levels = group_labels(matrix, groups)
    reference = levels[0] if reference is None else str(reference)
    if reference not in levels:
        raise InputError(f"reference group {reference!r} is not one of the groups {levels}")
    focal = levels[1] if reference == levels[0] else levels[0]
    parts = [matrix.subset(models=list(matrix.models[labels == g])) for g in (reference, focal)]
    keep = np.ones(matrix.shape[1], dtype=bool)
    for part in parts:
        if part.shape[0] < 2:
            raise InputError(f"group has {part.shape[0]} model(s); each group needs at least 2")
        keep &= (part.item_variance() >= variance_threshold).to_numpy()
    if keep.sum() < 2:
        raise InputError(f"{int(keep.sum())} item(s) vary in both groups (p(1-p) >= {variance_threshold}); "
                         "drift needs at least 2")
    items = list(matrix.items[keep])
    parts = [part.subset(items=items) for part in parts]
    fits = [fit_2pl(part, engine="map") for part in parts]
    out = compare_calibrations(parts[0], fits[0], parts[1], fits[1], alpha=alpha, correction=correction,
                               purify=purify)
    out.attrs.update({"reference": reference, "focal": focal, "n_reference": parts[0].shape[0],
                      "n_focal": parts[1].shape[0], "not_tested": list(matrix.items[~keep])})
    return out

