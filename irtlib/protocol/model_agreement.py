"""Fluid Benchmarking's agreement with a bank calibrated by the 1PL, 2PL or 3PL (model choice).

The paper fits the 2PL only (section "Model: 2PL"); the model-check chapter asks whether the
1PL or the 3PL would rank test models differently when Fluid Benchmarking runs on their banks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from irtlib._typing import ArrayLike
from irtlib.calibration.models import check_model, fit_irt_values
from irtlib.core.responses import ResponseMatrix
from irtlib.selection.adaptive import run_adaptive

from .agreement import split_agreements, split_models

__all__ = ["fluid_irt", "fluid_agreement"]


def fluid_irt(responses: ArrayLike, a: ArrayLike, b: ArrayLike, c: ArrayLike | None = None, *,
              budget: int) -> np.ndarray:
    """Fluid Benchmarking (Algorithm 1) with a 2PL or 3PL bank: the estimate after each item.

    :func:`irtlib.selection.adaptive.run_adaptive` with ``c`` (maximum Fisher information at the
    current estimate, Birnbaum's for the 3PL; the MAP of :func:`irtlib.map_ability` after every
    response; start at theta = 0).

    Parameters
    ----------
    responses : ndarray, shape (n_models, n_items)
        The models' answers to every item of the bank (NaN: unavailable).
    a, b, c : ndarray, shape (n_items,)
        Item parameters (``c=None``: the 2PL).
    budget : int

    Returns
    -------
    ndarray, shape (n_models, budget)
    """
    return run_adaptive(responses, a, b, budget=budget, c=c).estimate


def _fluid_splits(values: np.ndarray, splits, *, model: str, n_test: int, seed: int, budget: int,
                  prior_c: tuple[float, float]) -> dict:
    """Every split's Fluid run on its own bank, all splits' test models in one :func:`fluid_irt`.

    Each split's bank is calibrated on its training rows (the rows :func:`split_agreements` draws);
    its test models then run with that bank's parameters as theirs (per-model parameters). The
    engine selects items and estimates abilities model by model (a model's path depends on its own
    responses and parameters only), so each split's estimates are those of a run of its own test
    models alone (``tests/protocol`` checks it), with one loop over the budget in place of one per split.

    Returns
    -------
    dict
        Split -> estimates of its test models, shape (n_test, budget).
    """
    rows, a, b, c = [], [], [], []
    for split in splits:
        train, test = split_models(values.shape[0], n_test, seed, split)
        fit = fit_irt_values(values[train], model=model, prior_c=prior_c)
        rows.append(test)
        shape = (test.size, values.shape[1])
        a.append(np.broadcast_to(fit["a"], shape))
        b.append(np.broadcast_to(fit["b"], shape))
        c.append(None if fit["c"] is None else np.broadcast_to(fit["c"], shape))
    if not rows:
        return {}
    guess = None if any(v is None for v in c) else np.concatenate(c)
    est = fluid_irt(values[np.concatenate(rows)], np.concatenate(a), np.concatenate(b), guess, budget=budget)
    ends = np.cumsum([r.size for r in rows])
    return {split: part for split, part in zip(splits, np.split(est, ends[:-1]), strict=True)}


def fluid_agreement(matrix: ResponseMatrix, *, model: str = "2pl", ks: Sequence[int], n_splits: int = 20,
                    n_test: int = 10, seed: int = 0, variance_threshold: float = 0.01,
                    prior_c: tuple[float, float] = (5.0, 17.0)) -> pd.DataFrame:
    """Fluid Benchmarking's agreement curve with a bank calibrated by the 1PL, 2PL or 3PL.

    The paper's protocol (section "Evaluation") for the one method: per split (the same test
    models as :func:`irtlib.run_protocol` with the same seed), calibrate ``model`` on the
    training rows, run :func:`fluid_irt` on the test rows (the loop of
    :func:`irtlib.protocol.agreement.split_agreements`), and take Spearman's rho between the
    estimates after k items and the test models' full safety scores.

    Parameters
    ----------
    matrix : ResponseMatrix
        Unfiltered; the variance filter runs first, as in the paper.
    model : {"1pl", "2pl", "3pl"}
    ks : sequence of int
        Budgets.
    n_splits, n_test, seed
        As in :func:`irtlib.run_protocol`.

    Returns
    -------
    DataFrame with columns ``split``, ``method`` ("fluid"), ``k``, ``agreement``, ``model``,
    the layout of :func:`irtlib.run_protocol` (so :func:`irtlib.agreement_curves` reads it).
    """
    check_model(model)
    filtered = matrix.filter_variance(variance_threshold)
    reference = matrix.safety_scores().to_numpy()
    values = filtered.values
    ks = sorted({int(k) for k in ks})

    splits = range(int(n_splits))
    estimates = _fluid_splits(values, splits, model=model, n_test=n_test, seed=seed, budget=ks[-1], prior_c=prior_c)

    def score(split, train, test):        # the split's test models' estimates after each budget
        return estimates[split][:, [k - 1 for k in ks]].T

    rhos = split_agreements(values, reference, splits, score, n_test=n_test, seed=seed)
    rows = [(split, "fluid", k, float(r), model) for split, rho in zip(splits, rhos, strict=True)
            for k, r in zip(ks, rho, strict=True)]
    out = pd.DataFrame(rows, columns=["split", "method", "k", "agreement", "model"])
    out.attrs.update({"n_splits": int(n_splits), "n_test": int(n_test), "seed": seed, "model": model,
                      "source": matrix.source})
    return out
