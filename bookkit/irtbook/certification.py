"""Book-only code of the chapter "Beyond the paper", section on certification against a safety bar.

Two measurements of the certification rules of :mod:`irtlib.selection.certify`, both driven by
the batch driver :func:`irtlib.selection.adaptive.run_adaptive` with a
:class:`~irtlib.selection.stopping.StoppingRule` (budget plus decision):

1. :func:`simulate_certification`: simulated models with known abilities answer a bank whose item
   parameters are known; each rule's decisions are compared with the truth (the model's
   expected full-benchmark score against the cut), by distance from the cut.
2. :func:`leave_one_out` and :func:`certification_table`: on a real response matrix, each model
   in turn is left out, the bank is calibrated on the others (variance filter and the fast MAP
   engine, :func:`irtlib.calibration.joint_map.fit_map`, on the other models only), and the left-out
   model is certified against a cut on the full-benchmark score; its decision is compared with
   the full benchmark's (its safety score on all items at or above the cut), beside a fixed-length
   Fluid test and random items at the same average length.

Both run every rule of a measurement on one set of adaptive tests (:func:`run_rules`): the items and
ability estimates do not depend on the rule, so each rule reads its decision off the same tests,
with the results of a separate run per rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import binomtest

from irtlib.calibration.joint_map import fit_map
from irtlib.core.kernels import bernoulli_variance, logit_z, probability
from irtlib.core.responses import ResponseMatrix
from irtlib.extended.logistic_kernel import tables as logistic_tables
from irtlib.selection.adaptive import Trajectory, run_adaptive
from irtlib.selection.certify import ConfidenceRule, Cut, GridTerms, SprtRule, grid_terms
from irtlib.selection.engine import AdaptiveTest
from irtlib.selection.estimators import MeanScoreEstimator
from irtlib.selection.items import TwoPLItems
from irtlib.selection.selectors import RandomSelection
from irtlib.selection.stopping import StoppingRule

__all__ = ["LooBanks", "leave_one_out", "certify", "RuleOutcome", "run_rules", "fixed_length_pass",
           "certification_table", "simulate_certification", "mc_upper", "study", "RANDOM_DRAWS"]

#: Draws of random items per left-out model in the Random baseline.
RANDOM_DRAWS = 20


def mc_upper(errors: int, n: int) -> float:
    """Upper end of the 95% Wilson interval of a rate measured as ``errors`` of ``n`` (NaN for ``n = 0``)."""
    if n == 0:
        return float("nan")
    return float(binomtest(int(errors), int(n)).proportion_ci(confidence_level=0.95, method="wilson").high)


def _rule(cut: Cut, *, confidence: float, sprt: bool):
    return SprtRule(cut, confidence=confidence) if sprt else ConfidenceRule(cut, confidence=confidence)


@dataclass(frozen=True)
class RuleOutcome:
    """What one decision rule did in :func:`run_rules`, as in the :class:`Trajectory` of a run stopped by it alone.

    Attributes
    ----------
    decision : ndarray of int, shape (n_models,)
        +1 pass, -1 fail, 0 undecided at the budget.
    p_above : ndarray, shape (n_models,)
        The posterior probability above the cut when the rule's test ended.
    n_items : ndarray of int, shape (n_models,)
        Items each model answered before the rule ended its test.
    """

    decision: np.ndarray
    p_above: np.ndarray
    n_items: np.ndarray


def run_rules(responses: np.ndarray, items: TwoPLItems, *, budget: int, rules: list) -> list[RuleOutcome]:
    """Several certification rules on the same adaptive tests: one run, each rule stopping on its own.

    Which item a model gets next and its ability estimate depend on its own responses only, never on
    the rule that will stop its test (nor on the other models: the engine's selector and estimator
    work row by row). So the tests of every rule are prefixes of one test, run until each rule has
    ended it; each rule sees a model's responses up to the step at which it ends the model's test,
    and its decision, ``p_above`` and length are those of :func:`run_adaptive` with that rule alone
    (``StoppingRule(max_items=budget, decision=rule)``; the tests check it), for one item
    selection and one ability estimate per step in place of one per rule. The rules' posteriors on one
    grid also share each step's grid log-likelihoods (:func:`irtlib.selection.certify.grid_terms`,
    computed once for every model that answered), each adding the terms of the models it still tests.

    Parameters
    ----------
    responses : ndarray, shape (n_models, n_items)
        NaN cells are unavailable.
    items : TwoPLItems
        The bank (per-model parameters allowed).
    budget : int
    rules : list of ConfidenceRule or SprtRule

    Returns
    -------
    list of RuleOutcome
        One per rule, in order.
    """
    x = np.asarray(responses, dtype=float)
    n = x.shape[0]
    rows = np.arange(n)
    test = AdaptiveTest(items, n_models=n, available=~np.isnan(x), capacity=budget)
    runs = [rule.begin(items, n) for rule in rules]
    points = _shared_grid(runs)
    given = [np.zeros(n, dtype=int) for _ in rules]
    live = [np.ones(n, dtype=bool) for _ in rules]
    for t in range(budget + 1):
        left = test.left
        for run, n_given, alive in zip(runs, given, live, strict=True):
            r = np.flatnonzero(alive)          # as the engine's status: decided, budget spent, bank exhausted
            if r.size:
                ended = (run.decisions(n_given, r) != 0) | (n_given[r] >= budget) | (left[r] == 0)
                alive[r[ended]] = False
        anyone = np.logical_or.reduce(live)
        if t == budget or not anyone.any():
            break
        j = np.where(anyone, test.propose(active=anyone), -1)
        answer = x[rows, np.maximum(j, 0)]
        test.record(j, answer)
        terms = None if points is None else _step_terms(items, j, answer, points)   # once for every rule
        for run, n_given, alive in zip(runs, given, live, strict=True):
            jr = np.where(alive, j, -1)
            xr = np.where(jr >= 0, answer, np.nan)
            run.push(jr, xr, terms=terms)
            n_given += (jr >= 0) & ~np.isnan(xr)
    out = []
    for run, n_given in zip(runs, given, strict=True):
        decision, p_above = run.evaluate(n_given)
        out.append(RuleOutcome(decision=decision, p_above=p_above, n_items=n_given))
    return out


def _step_terms(items, j: np.ndarray, x: np.ndarray, points: np.ndarray) -> GridTerms:
    """:func:`irtlib.selection.certify.grid_terms`, the 2PL's from one pass of the logistic kernel.

    ``TwoPLItems.grid_log_likelihood`` is :func:`irtlib.core.kernels.log_likelihood`, ``x log_expit(z) +
    (1 - x) log_expit(-z)`` with ``z = a (theta - b)``, two scipy passes over the grid; the same
    arithmetic on :func:`irtlib.extended.logistic_kernel.tables` (scipy's bits of both logarithms, from
    one ``exp`` and one ``log1p`` a cell) gives the same numbers. Other item models (the 3PL): ``grid_terms``.

    A row's terms are a function of its item's ``a``, ``b`` and its response ``x`` only, cell by cell; at one
    step many models answer the same item alike (the simulated models share one bank and all start from the
    same item), so each distinct ``(a, b, x)`` (compared bit for bit) is computed once and copied to its rows:
    the same operations on the same operands, so the same bits, with a few hundred rows in place of thousands.
    """
    if not isinstance(items, TwoPLItems) or items.c is not None:
        return grid_terms(items, j, x, points)
    rows = np.flatnonzero((j >= 0) & ~np.isnan(x))
    a, b, _ = items.at(j[rows], rows)
    xr = np.asarray(x[rows], dtype=float)
    key = np.stack([np.asarray(a, dtype=float), np.asarray(b, dtype=float), xr], axis=1).view(np.int64)
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    a, b, xr = a[first], b[first], xr[first][:, None]
    log_p, log_q = logistic_tables(logit_z(points[None, :], a[:, None], b[:, None]))
    return GridTerms(rows=rows, values=(xr * log_p + (1.0 - xr) * log_q)[inverse.reshape(-1)], points=points)


def _shared_grid(runs) -> np.ndarray | None:
    """The grid every rule's posterior is on, when they share one (else None: each computes its own terms)."""
    grids = [getattr(getattr(run, "posterior", None), "points", None) for run in runs]
    if grids and all(g is not None and np.array_equal(g, grids[0]) for g in grids):
        return grids[0]
    return None


# ---------------------------------------------------------------------------- leave one model out
@dataclass(frozen=True)
class LooBanks:
    """One bank per left-out model, calibrated without it, laid out for a batch run.

    Attributes
    ----------
    a, b : ndarray, shape (n_models, n_items)
        Each model's bank (placeholders 1 and 0 at items its bank left out).
    available : ndarray of bool, shape (n_models, n_items)
        The items in each model's bank (and observed for it).
    filtered_sum : ndarray, shape (n_models,)
        Safe rates, on the other models, of the items the variance filter removed, summed.
    n_full : int
        Items of the full benchmark.
    full_score : ndarray, shape (n_models,)
        Each model's safety score on all items (the full benchmark's verdict).
    values : ndarray, shape (n_models, n_items)
        The responses.
    rows : ndarray of int
        The models left out (rows of the matrix).
    """

    a: np.ndarray
    b: np.ndarray
    available: np.ndarray
    filtered_sum: np.ndarray
    n_full: int
    full_score: np.ndarray
    values: np.ndarray
    rows: np.ndarray

    def items(self, m: int) -> TwoPLItems:
        """Model ``m``'s bank (its items only) as an item model."""
        keep = self.available[m]
        return TwoPLItems(self.a[m, keep], self.b[m, keep])


def leave_one_out(matrix: ResponseMatrix, *, rows=None, threshold: float = 0.01) -> LooBanks:
    """Calibrate a bank without each model of ``rows`` (default all): variance filter and MAP on the others.

    The filter (paper, section "Binarization": ``p (1 - p) <= threshold`` dropped) and the fit
    (:func:`~irtlib.calibration.joint_map.fit_map`, the paper's priors) see only the other models, as
    they would for a new model; each left-out model then answers only its bank's items.
    """
    x = np.asarray(matrix.values, dtype=float)
    n_models, n_items = x.shape
    rows = np.arange(n_models) if rows is None else np.asarray(rows, dtype=np.intp)
    a, b = np.ones((rows.size, n_items)), np.zeros((rows.size, n_items))
    available = np.zeros((rows.size, n_items), dtype=bool)
    filtered = np.zeros(rows.size)
    for i, m in enumerate(rows):
        others = np.delete(np.arange(n_models), m)
        rate = np.nanmean(x[others], axis=0)
        keep = _variance_kept(matrix, others, rate, threshold)
        _, a[i, keep], b[i, keep], _ = fit_map(x[np.ix_(others, np.flatnonzero(keep))])
        available[i] = keep & ~np.isnan(x[m])
        filtered[i] = rate[~keep].sum()
    return LooBanks(a=a, b=b, available=available, filtered_sum=filtered, n_full=n_items,
                    full_score=np.nanmean(x[rows], axis=1), values=x[rows], rows=rows)


def _variance_kept(matrix: ResponseMatrix, others: np.ndarray, rate: np.ndarray, threshold: float) -> np.ndarray:
    """``(matrix.subset(models=others).item_variance() > threshold).to_numpy()``, from the others' safe rates.

    ``rate`` is ``np.nanmean(values[others], axis=0)``: the subset's values are the same rows in the same layout
    (``values[others]``, copied as they are), and its safe rates are their ``nanmean`` (or, with no missing cell,
    ``mean``: the same sums divided by the same counts), so ``bernoulli_variance(rate)`` (``rate * (1 - rate)``,
    the subset's own expression) is its variance, bit for bit, without building the matrix. An item no other
    model saw (a NaN rate) takes the subset, whose check raises as it did.
    """
    if np.isnan(rate).any():
        training = matrix.subset(models=[matrix.models[r] for r in others])
        return (training.item_variance() > threshold).to_numpy()
    return bernoulli_variance(rate) > threshold


def _loo_cut(banks: LooBanks, score: float, indifference: float | None) -> Cut:
    return Cut.stack([Cut.at_score(score, banks.items(m), filtered_sum=banks.filtered_sum[m], n_full=banks.n_full,
                                   indifference=indifference) for m in range(banks.rows.size)])


def certify(banks: LooBanks, *, score: float, confidence: float = 0.95, budget: int = 100,
            indifference: float | None = None) -> Trajectory:
    """Certify every left-out model against ``score`` on its own bank (interval rule; SPRT with ``indifference``)."""
    rule = _rule(_loo_cut(banks, score, indifference), confidence=confidence, sprt=indifference is not None)
    x = np.where(banks.available, banks.values, np.nan)
    return run_adaptive(x, banks.a, banks.b, budget=budget, stopping=StoppingRule(max_items=budget, decision=rule))


def fixed_length_pass(banks: LooBanks, *, score: float, k: int, seed: int = 0,
                      n_draws: int = RANDOM_DRAWS) -> tuple[np.ndarray, np.ndarray]:
    """Pass decisions of a ``k``-item Fluid test and of ``k`` random items, per left-out model.

    Fluid (maximum information, MAP): "pass" when the predicted full-benchmark score (the
    administered items as answered, the bank's other items at their 2PL probability, the filtered
    ones at their safe rate) is at least ``score``. Random: ``k`` items drawn uniformly from all the
    benchmark's items (the paper's Random baseline), "pass" when their mean is at least ``score``;
    returned as the share of ``n_draws`` draws that pass.

    Returns
    -------
    fluid : ndarray of bool, shape (n_models,)
    random : ndarray of float, shape (n_models,)
    """
    x = np.where(banks.available, banks.values, np.nan)
    traj = run_adaptive(x, banks.a, banks.b, budget=k)
    theta = traj.at(k)
    given = traj.items[:, :k]
    rows = np.arange(x.shape[0])[:, None]
    known = np.zeros(x.shape, dtype=bool)
    known[np.broadcast_to(rows, given.shape)[given >= 0], given[given >= 0]] = True
    p = probability(theta[:, None], banks.a, banks.b)
    unknown = banks.available & ~known
    predicted = (np.where(known, x, 0.0).sum(axis=1) + np.where(unknown, p, 0.0).sum(axis=1)
                 + banks.filtered_sum) / banks.n_full
    ones, zeros = np.ones(banks.n_full), np.zeros(banks.n_full)
    rng = np.random.SeedSequence(seed)
    random = np.mean([run_adaptive(banks.values, ones, zeros, budget=k, selector=RandomSelection(),
                                   estimator=MeanScoreEstimator(), seed=s, record=[k]).at(k) >= score
                      for s in rng.spawn(n_draws)], axis=0)
    return predicted >= score, random


def certification_table(banks: LooBanks, *, scores=(0.90, 0.95), confidence: float = 0.95, budget: int = 100,
                        indifference: float = 0.01, seed: int = 0) -> pd.DataFrame:
    """Certification against each cut, with both rules, beside fixed-length Fluid and Random at the same length.

    Accuracy is the share of left-out models whose decision is the full benchmark's (safety score
    on all items at least the cut). A certification undecided at the budget counts with the side
    its probability leans to; ``decided`` is the share decided at ``confidence``, ``wrong when
    decided`` the share of those decisions that are wrong.

    Returns
    -------
    DataFrame
        One row per (cut, rule); ``wrong full scores`` lists the full-benchmark scores of the
        models decided wrongly at ``confidence``.
    """
    out = []
    truth = banks.full_score >= np.asarray(scores)[:, None]
    x = np.where(banks.available, banks.values, np.nan)
    names = ("interval rule", f"SPRT, +/-{indifference:g}")
    rules = [_rule(_loo_cut(banks, score, d), confidence=confidence, sprt=d is not None)
             for score in scores for d in (None, indifference)]
    outcomes = iter(run_rules(x, TwoPLItems(banks.a, banks.b), budget=budget, rules=rules))
    fixed = {}
    for i, score in enumerate(scores):
        for name in names:
            traj = next(outcomes)          # as certify(banks, score=score, ...) with this rule alone
            passed = np.where(traj.decision != 0, traj.decision > 0, traj.p_above >= 0.5)
            decided = traj.decision != 0
            k = max(1, int(round(traj.n_items.mean())))
            if (score, k) not in fixed:        # the same length for both rules: the same tests
                fixed[score, k] = fixed_length_pass(banks, score=score, k=k, seed=seed)
            fluid, random = fixed[score, k]
            wrong = decided & (passed != truth[i])
            out.append({"cut": score, "rule": name, "models above": int(truth[i].sum()),
                        "models": int(truth[i].size), "items (mean)": float(traj.n_items.mean()),
                        "items (max)": int(traj.n_items.max()), "accuracy": float((passed == truth[i]).mean()),
                        "decided": float(decided.mean()),
                        "wrong when decided": float((passed != truth[i])[decided].mean()) if decided.any() else np.nan,
                        "k": k, "Fluid accuracy": float((fluid == truth[i]).mean()),
                        "Random accuracy": float(np.where(truth[i], random, 1 - random).mean()),
                        "wrong full scores": tuple(np.sort(banks.full_score[wrong]).round(4).tolist())})
    return pd.DataFrame(out)


# ---------------------------------------------------------------------------- simulated models, known abilities
def simulate_certification(a: np.ndarray, b: np.ndarray, *, filtered_rates: np.ndarray | None = None,
                           score: float = 0.95, indifference: float = 0.01, confidence: float = 0.95,
                           budget: int = 100, n_models: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Decision errors of both rules on simulated models with known abilities, by distance from the cut.

    The bank's item parameters ``a``, ``b`` are the truth; abilities are drawn from Normal(0, 1)
    (the calibration's prior); responses are 2PL draws. A model is truly above the cut when its
    expected full-benchmark score ``S(theta)`` (the test characteristic curve, with the
    ``filtered_rates`` of items outside the bank) is at least ``score``; "outside the indifference
    region" means ``|S(theta) - score| > indifference``. Both rules use the same region: the SPRT
    tests its ends, the interval rule ignores it (it is where its errors are expected).

    Returns
    -------
    DataFrame
        One row per rule: the asked error rate, the error rate outside the region with the upper
        end of its 95% Monte Carlo interval, the error rate inside, the share undecided at the
        budget, and the mean items used (all models, outside the region).
    """
    rng = np.random.default_rng(seed)
    filtered_rates = np.zeros(0) if filtered_rates is None else np.asarray(filtered_rates, float)
    n_full = a.size + filtered_rates.size
    items = TwoPLItems(a, b)
    theta = rng.standard_normal(n_models)
    x = (rng.random((n_models, a.size)) < probability(theta[:, None], a, b)).astype(float)
    expected = (items.total_probability(theta) + filtered_rates.sum()) / n_full
    above = expected >= score
    outside = np.abs(expected - score) > indifference
    rows = []
    names = ("interval rule", f"SPRT, +/-{indifference:g}")
    rules = [_rule(Cut.at_score(score, items, filtered_sum=filtered_rates.sum(), n_full=n_full,
                                indifference=indifference if sprt else None), confidence=confidence, sprt=sprt)
             for sprt in (False, True)]
    for name, traj in zip(names, run_rules(x, items, budget=budget, rules=rules), strict=True):
        wrong = ((traj.decision > 0) & ~above) | ((traj.decision < 0) & above)
        n_out = int(outside.sum())
        rows.append({"rule": name, "asked error": 1 - confidence, "models outside": n_out,
                     "error outside": float(wrong[outside].mean()),
                     "error outside (95% upper)": mc_upper(int(wrong[outside].sum()), n_out),
                     "error inside": float(wrong[~outside].mean()) if (~outside).any() else np.nan,
                     "undecided": float((traj.decision == 0).mean()),
                     "items (mean)": float(traj.n_items.mean()),
                     "items outside (mean)": float(traj.n_items[outside].mean())})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------- the chapter's study
def study(matrix: ResponseMatrix, *, scores=(0.90, 0.95), confidence: float = 0.95, budget: int = 100,
          indifference: float = 0.01, n_simulees: int = 4000, loo_every: int = 1, seed: int = 0) -> dict:
    """Both measurements on one benchmark: simulated models on its bank, and leave-one-model-out on its matrix.

    Parameters
    ----------
    matrix : ResponseMatrix
        The benchmark's binary matrix (all items; the variance filter is applied inside).
    loo_every : int
        Leave out every ``loo_every``-th model only (1: all; a quick build uses 4).
    n_simulees : int
        Simulated models per cut.

    Returns
    -------
    dict
        ``simulation`` (one row per cut and rule, :func:`simulate_certification`), ``loo``
        (:func:`certification_table`), ``above`` (models at or above each cut, all models),
        ``n_items``, ``n_bank`` (items after the filter on all models), ``n_models`` and ``n_left_out``.
    """
    x = np.asarray(matrix.values, dtype=float)
    keep = (matrix.item_variance() > 0.01).to_numpy()
    rate = np.nanmean(x, axis=0)
    _, a, b, _ = fit_map(x[:, keep])
    sims = [simulate_certification(a, b, filtered_rates=rate[~keep], score=s, indifference=indifference,
                                   confidence=confidence, budget=budget, n_models=n_simulees, seed=seed + i)
            .assign(cut=s) for i, s in enumerate(scores)]
    banks = leave_one_out(matrix, rows=np.arange(0, x.shape[0], int(loo_every)))
    loo = certification_table(banks, scores=scores, confidence=confidence, budget=budget,
                              indifference=indifference, seed=seed)
    full = np.nanmean(x, axis=1)
    return {"simulation": pd.concat(sims, ignore_index=True), "loo": loo,
            "above": {s: int((full >= s).sum()) for s in scores}, "n_items": int(x.shape[1]),
            "n_bank": int(keep.sum()), "n_models": int(x.shape[0]), "n_left_out": int(banks.rows.size)}
