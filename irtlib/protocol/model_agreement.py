"""Fluid Benchmarking's agreement with a bank calibrated by the 1PL, 2PL or 3PL (model choice).

The paper fits the 2PL only (section "Model: 2PL"); the model-check chapter asks whether the
1PL or the 3PL would rank test models differently when Fluid Benchmarking runs on their banks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.special import expit

from irtlib._typing import ArrayLike
from irtlib.calibration.models import P_FLOOR, check_model, fit_irt_values
from irtlib.core.responses import ResponseMatrix
from irtlib.errors import InputError

from .agreement import spearman, split_models

__all__ = ["map_ability_irt", "fluid_irt", "fluid_agreement"]


def map_ability_irt(responses: ArrayLike, a: ArrayLike, b: ArrayLike, c: ArrayLike | None = None, *,
                    theta0: ArrayLike = 0.0, prior_sd: float = 1.0, max_iter: int = 50, tol: float = 1e-6,
                    bounds: tuple[float, float] = (-8.0, 8.0)) -> np.ndarray:
    """MAP abilities under the 2PL or 3PL, many models at once (Fisher scoring, steps capped at 1).

    Parameters
    ----------
    responses : ndarray, shape (n_models, n_items)
        0, 1 or NaN (not administered).
    a, b, c : ndarray, shape (n_items,) or (n_models, n_items)
        Item parameters (``c=None``: the 2PL).
    theta0 : float or ndarray, shape (n_models,)
        Starting point (an adaptive test passes the previous estimate).

    Returns
    -------
    ndarray, shape (n_models,)

    Notes
    -----
    For the 2PL this is the paper's MAP (section "Model: 2PL") reached by Fisher scoring rather
    than Newton (the two coincide for the 2PL). For the 3PL the posterior in theta need not be
    unimodal; the iteration finds the mode nearest the start.
    """
    x = np.asarray(responses, dtype=float)
    obs = ~np.isnan(x)
    x = np.where(obs, x, 0.0)
    theta = np.broadcast_to(np.asarray(theta0, dtype=float), x.shape[:1]).copy()
    for _ in range(max_iter):
        z = a * (theta[:, None] - b)
        s = expit(z)
        if c is None:
            g_z, w_zz = x - s, s * (1.0 - s)
        else:
            p = np.clip(c + (1.0 - c) * s, P_FLOOR, 1.0 - P_FLOOR)
            g_z, w_zz = (x - p) * s / p, (1.0 - c) * s * s * (1.0 - s) / p
        grad = np.where(obs, a * g_z, 0.0).sum(axis=1) - theta / prior_sd**2
        info = np.where(obs, a * a * w_zz, 0.0).sum(axis=1) + 1.0 / prior_sd**2
        step = np.clip(grad / info, -1.0, 1.0)
        theta = np.clip(theta + step, *bounds)
        if np.abs(step).max() < tol:
            break
    return theta


def _item_information(theta, a, b, c):
    """Fisher information about theta, shape (n_models, n_items).

    ``a^2 P (1 - P)`` for the 2PL; Birnbaum's ``a^2 (1 - c) s^2 (1 - s) / P`` with
    ``s = sigmoid(a (theta - b))`` for the 3PL.
    """
    s = expit(a * (theta[:, None] - b))
    if c is None:
        return a * a * s * (1.0 - s)
    p = c + (1.0 - c) * s
    return a * a * (1.0 - c) * s * s * (1.0 - s) / np.maximum(p, P_FLOOR)


def fluid_irt(responses: ArrayLike, a: ArrayLike, b: ArrayLike, c: ArrayLike | None = None, *,
              budget: int) -> np.ndarray:
    """Fluid Benchmarking (Algorithm 1) with a 2PL or 3PL bank, vectorised over models.

    Maximum Fisher information at the current estimate (Birnbaum's information for the 3PL),
    MAP update after every response (:func:`map_ability_irt`), start at theta = 0.

    Parameters
    ----------
    responses : ndarray, shape (n_models, n_items)
        The models' answers to every item of the bank (NaN: unavailable).
    a, b, c : ndarray, shape (n_items,)
    budget : int

    Returns
    -------
    ndarray, shape (n_models, budget)
        The estimate after each of the first ``budget`` items.
    """
    x = np.asarray(responses, dtype=float)
    n, n_items = x.shape
    if not 1 <= int(budget) <= n_items:
        raise InputError(f"budget must lie between 1 and {n_items}, got {budget}")
    rows = np.arange(n)
    used = np.isnan(x)
    theta = np.zeros(n)
    took = np.zeros((n, int(budget)), dtype=int)
    out = np.empty((n, int(budget)))
    for k in range(int(budget)):
        info = np.where(used, -np.inf, _item_information(theta, a, b, c))
        j = info.argmax(axis=1)
        used[rows, j] = True
        took[:, k] = j
        t = took[:, :k + 1]
        theta = map_ability_irt(x[rows[:, None], t], a[t], b[t], None if c is None else c[t], theta0=theta)
        out[:, k] = theta
    return out


def fluid_agreement(matrix: ResponseMatrix, *, model: str = "2pl", ks: Sequence[int], n_splits: int = 20,
                    n_test: int = 10, seed: int = 0, variance_threshold: float = 0.01,
                    prior_c: tuple[float, float] = (5.0, 17.0)) -> pd.DataFrame:
    """Fluid Benchmarking's agreement curve with a bank calibrated by the 1PL, 2PL or 3PL.

    The paper's protocol (section "Evaluation") for the one method: per split (the same test
    models as :func:`irtlib.run_protocol` with the same seed), calibrate ``model`` on the
    training rows, run :func:`fluid_irt` on the test rows, and take Spearman's rho between the
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
    rows = []
    for split in range(int(n_splits)):
        train, test = split_models(values.shape[0], n_test, seed, split)
        fit = fit_irt_values(values[train], model=model, prior_c=prior_c)
        est = fluid_irt(values[test], fit["a"], fit["b"], fit["c"], budget=ks[-1])
        rho = spearman(est[:, [k - 1 for k in ks]].T, reference[test])
        rows.extend((split, "fluid", k, float(r), model) for k, r in zip(ks, rho, strict=True))
    out = pd.DataFrame(rows, columns=["split", "method", "k", "agreement", "model"])
    out.attrs.update({"n_splits": int(n_splits), "n_test": int(n_test), "seed": seed, "model": model,
                      "source": matrix.source})
    return out
