"""Book-only code of the chapter "Beyond the paper": do severity and a second dimension pay.

Two questions, each answered on real data by the same two measurements:

1. *Held-out fit.* A random tenth of the observed cells is hidden; each model is fitted on the
   rest, and the hidden cells' binarized responses are scored by their mean log-likelihood
   (higher is better). The GRM predicts a strict-binarized cell as ``P(X >= top)``, a 2PL curve
   (:mod:`irtlib.extended.grm`); the M2PL as ``sigmoid(a . theta + d)`` with the EAP abilities.
2. *Agreement at the same budgets.* The paper's protocol (section "Evaluation"): splits of the
   models into training and test models, calibration on the training models only, adaptive tests
   of the test models, Spearman agreement with their full-benchmark safety score (strict
   binarization, all items). The 2PL runs Fluid Benchmarking on the binarized responses; the GRM
   runs the same loop on the graded responses with GRM information (:class:`irtlib.extended.grm.GradedItems`);
   the M2PL runs D-optimal selection and scores by the predicted safety score
   (:func:`irtlib.extended.mirt.mirt_cat`).

A verdict says "pays" when the new model's held-out log-likelihood is higher and its mean
agreement is at least the 2PL's at the budgets compared (or it reaches 0.90 with fewer items).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from irtlib.calibration.joint_map import fit_map
from irtlib.core.ability import map_ability
from irtlib.core.kernels import log_likelihood as loglik_2pl
from irtlib.extended.grm import GradedItems, fit_grm
from irtlib.extended.mirt import DEFAULT_TOL, fit_mirt, mirt_cat
from irtlib.protocol.agreement import spearman, split_models
from irtlib.selection.cat import StoppingRule, TwoPLItems, run_cat

__all__ = ["binarize", "heldout_mask", "wide", "severity_heldout", "severity_agreement",
           "dimension_heldout", "dimension_agreement", "smallest_budget", "verdict", "curves"]


def wide(raw: pd.DataFrame) -> pd.DataFrame:
    """``model, item, score`` rows as a models x items frame (NaN where absent)."""
    return raw.pivot_table(index="model", columns="item", values="score", aggfunc="first").sort_index()


def heldout_mask(observed: np.ndarray, *, fraction: float = 0.1, seed: int = 0) -> np.ndarray:
    """A random ``fraction`` of the observed cells, never a row's or a column's last two."""
    rng = np.random.default_rng(seed)
    hide = observed & (rng.random(observed.shape) < fraction)
    keep_rows = (observed & ~hide).sum(axis=1) >= 2
    keep_cols = (observed & ~hide).sum(axis=0) >= 2
    return hide & keep_rows[:, None] & keep_cols[None, :]


def binarize(cats: np.ndarray, safe_from: int) -> np.ndarray:
    """1 where the category is at least ``safe_from``, 0 below, NaN kept."""
    return np.where(np.isnan(cats), np.nan, (cats >= safe_from).astype(float))


def severity_heldout(cats: np.ndarray, *, safe_from: int, seed: int = 0, fraction: float = 0.1,
                     tol: float = 1e-6) -> dict:
    """Held-out log-likelihood of the binarized cells: binarized 2PL against the GRM.

    Parameters
    ----------
    cats : ndarray, shape (n_models, n_items)
        Categories 0..K-1 (K-1 = the safest), NaN missing.
    safe_from : int
        The binarization: a cell is safe when its category is at least this (AIR-Bench's strict
        rule: the top category; PandaGuard's: anything but the lowest).
    tol : float
        The GRM fit's tolerance (:func:`irtlib.extended.grm.fit_grm`).
    """
    top = int(safe_from)
    obs = ~np.isnan(cats)
    hide = heldout_mask(obs, fraction=fraction, seed=seed)
    train = np.where(hide, np.nan, cats)
    binary_train = binarize(train, top)
    target = (cats[hide] >= top).astype(float)
    theta, a, b, _ = fit_map(binary_train)
    theta = np.asarray(map_ability(binary_train, a, b).theta)
    rows, cols = np.nonzero(hide)
    ll_2pl = loglik_2pl(target, theta[rows], a[cols], b[cols])
    g = fit_grm(train, tol=tol)
    ll_grm = loglik_2pl(target, g.theta[rows], g.a[cols], g.thresholds[cols, top - 1])   # P(X >= top): a 2PL
    return {"cells": int(hide.sum()), "ll_2pl": float(ll_2pl.mean()), "ll_grm": float(ll_grm.mean()),
            "grm_seconds": g.seconds}


def _splits(n_models, n_test, n_splits, seed):
    return [split_models(n_models, n_test, seed, s) for s in range(n_splits)]


def severity_agreement(cats: np.ndarray, reference: np.ndarray, *, safe_from: int, ks, n_splits: int, n_test: int,
                       seed: int = 0, tol: float = 1e-6) -> pd.DataFrame:
    """Agreement of the binarized 2PL's Fluid test and the GRM's adaptive test at budgets ``ks``.

    Returns
    -------
    DataFrame
        One row per (split, method, k): ``agreement``.
    """
    binary = binarize(cats, safe_from)
    budget = int(max(ks))
    out = []
    for s, (train, test) in enumerate(_splits(cats.shape[0], n_test, n_splits, seed)):
        _, a, b, _ = fit_map(binary[train])
        fluid = run_cat(binary[test], TwoPLItems(a, b), stopping=StoppingRule(max_items=budget))
        g = fit_grm(cats[train], tol=tol)
        graded = run_cat(cats[test], GradedItems(g.a, g.thresholds), stopping=StoppingRule(max_items=budget),
                         estimator="map")
        for k in ks:
            out.append((s, "2PL Fluid (binarized)", k, spearman(fluid.at(k), reference[test])))
            out.append((s, "GRM adaptive (graded)", k, spearman(graded.at(k), reference[test])))
    return pd.DataFrame(out, columns=["split", "method", "k", "agreement"])


def dimension_heldout(binary: np.ndarray, *, structure: np.ndarray | None, n_dims: int = 2, seed: int = 0,
                      fraction: float = 0.1, tol: float = DEFAULT_TOL) -> dict:
    """Held-out log-likelihood of 0/1 cells: the 2PL against an M2PL (confirmatory or exploratory).

    ``tol`` is the M2PL fit's stopping tolerance (:func:`irtlib.extended.mirt.fit_mirt`'s default; a QUICK
    build loosens it).
    """
    obs = ~np.isnan(binary)
    hide = heldout_mask(obs, fraction=fraction, seed=seed)
    train = np.where(hide, np.nan, binary)
    rows, cols = np.nonzero(hide)
    target = binary[hide]
    _, a, b, _ = fit_map(train)
    theta = np.asarray(map_ability(train, a, b).theta)
    ll_2pl = loglik_2pl(target, theta[rows], a[cols], b[cols])
    m = fit_mirt(train, structure=structure, n_dims=n_dims, tol=tol)
    z = (m.theta[rows] * m.loadings[cols]).sum(axis=1) + m.intercepts[cols]
    ll_m = loglik_2pl(target, z, 1.0, 0.0)
    corr = m.corr[np.triu_indices(m.n_dims, 1)]
    return {"cells": int(hide.sum()), "ll_2pl": float(ll_2pl.mean()), "ll_mirt": float(ll_m.mean()),
            "corr": corr.tolist(), "mirt_seconds": m.seconds, "fit": m}


def dimension_agreement(binary: np.ndarray, reference: np.ndarray, *, structure: np.ndarray | None, ks,
                        n_splits: int, n_test: int, n_dims: int = 2, seed: int = 0,
                        tol: float = DEFAULT_TOL) -> pd.DataFrame:
    """Agreement of the 2PL's Fluid test and the M2PL's D-optimal test at budgets ``ks`` (``tol``: the M2PL fit's)."""
    budget = int(max(ks))
    out = []
    for s, (train, test) in enumerate(_splits(binary.shape[0], n_test, n_splits, seed)):
        _, a, b, _ = fit_map(binary[train])
        fluid = run_cat(binary[test], TwoPLItems(a, b), stopping=StoppingRule(max_items=budget))
        m = fit_mirt(binary[train], structure=structure, n_dims=n_dims, tol=tol)
        multi = mirt_cat(binary[test], m, budget=budget)
        for k in ks:
            out.append((s, "2PL Fluid", k, spearman(fluid.at(k), reference[test])))
            out.append((s, "M2PL D-optimal", k, spearman(multi.score[:, k - 1], reference[test])))
    return pd.DataFrame(out, columns=["split", "method", "k", "agreement"])


def curves(results: pd.DataFrame, *, nan_policy: str = "zero") -> pd.DataFrame:
    """Mean agreement per method and budget.

    ``nan_policy`` is a protocol's rule for an undefined agreement (``Protocol.nan_policy``):
    ``"zero"`` counts it as 0 (the paper's text, irtlib's ``"paper"`` protocol), ``"omit"`` drops
    it from the mean (the authors' code); ``count`` is the number of values averaged.
    """
    if nan_policy not in ("zero", "omit"):
        raise ValueError(f"nan_policy must be 'zero' or 'omit', got {nan_policy!r}")
    r = results.assign(agreement=results["agreement"].fillna(0.0)) if nan_policy == "zero" else results
    return r.groupby(["method", "k"])["agreement"].agg(["mean", "std", "count"]).reset_index()


def smallest_budget(curve: pd.DataFrame, method: str, *, threshold: float = 0.90) -> int | None:
    """The smallest budget at which ``method``'s mean agreement reaches ``threshold`` (None: never)."""
    c = curve[(curve["method"] == method) & (curve["mean"] >= threshold)]
    return None if c.empty else int(c["k"].min())


def verdict(*, ll_new: float, ll_old: float, agree_new: float, agree_old: float,
            k_new: int | None, k_old: int | None, tol: float = 0.01) -> str:
    """"pays", "does not pay" or "mixed", from held-out fit and agreement (see the module docstring).

    Agreement counts as better when the mean over the compared budgets is higher by more than
    ``tol``, or when the new model reaches 0.90 at a smaller budget (or at all).
    """
    fit_better = ll_new > ll_old
    fewer = k_new is not None and (k_old is None or k_new < k_old)
    more = k_old is not None and (k_new is None or k_new > k_old)
    agree_better = (agree_new > agree_old + tol or fewer) and not more
    agree_worse = agree_new < agree_old - tol or more
    if fit_better and agree_better:
        return "pays"
    if not fit_better and not agree_better or agree_worse and not fit_better:
        return "does not pay"
    return "mixed"
