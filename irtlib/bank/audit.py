"""The audit of an item bank against its responses: which items are bad, and why.

:func:`audit_bank` runs irtlib's model checks (:mod:`irtlib.fit.checks`) on a bank and the
responses it was calibrated on, and returns each finding with its evidence and one line on how to
read it:

- ``low_discrimination``: items whose discrimination per standard deviation of the models' abilities,
  ``a sd(theta)``, is below ``a_min`` (they barely separate models; the product does not depend on the
  scale the calibration engine happened to fix, which for joint MAP is far from N(0, 1));
- ``against_trend``: items whose responses correlate negatively with the rest of the bank (the
  corrected item-rest correlation, one-sided test, corrected for multiple testing): safer answers
  from weaker models, a possible label (judge) error;
- ``constant``: items every model passes or every model fails (no information on anyone);
- ``misfit``: Orlando and Thissen's S-X2 (:func:`irtlib.fit.checks.item_fit`), corrected;
- ``local_dependence``: item pairs whose Q3 (:func:`irtlib.fit.checks.q3`) exceeds the
  ``1 - alpha`` quantile of the largest Q3 of matrices drawn from the fitted model
  (:func:`irtlib.fit.checks.simulate_fitted`), a family-wise rule over all pairs;
- ``dimensionality``: residual eigenvalues above parallel analysis
  (:func:`irtlib.fit.checks.dimensionality`);
- the test information curve at the models' abilities (no flag: where the bank measures well).

The abilities are the models' MAP abilities on the bank (:func:`irtlib.core.ability.map_ability`),
so the audit works for responses of models the bank was not calibrated on too.

Layer rule: imports :mod:`irtlib.fit`, :mod:`irtlib.selection` and below.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import t as student_t

from irtlib.calibration.joint_map import Calibration
from irtlib.core.ability import map_ability
from irtlib.core.kernels import fisher_information
from irtlib.core.responses import ResponseMatrix, shown
from irtlib.errors import InputError
from irtlib.fit.checks import adjust_pvalues, dimensionality, item_fit, q3, simulate_fitted

from .format import ItemBank

__all__ = ["audit_bank", "HOW_TO_READ", "CHECKS"]

#: The audit's checks, in report order.
CHECKS = ("low_discrimination", "against_trend", "constant", "misfit", "local_dependence", "dimensionality")

#: One line per check on how to read a flag.
HOW_TO_READ = {
    "low_discrimination": "a times the SD of the models' abilities below the cut: the item barely separates weak "
                          "from strong models; it adds noise, "
                          "not information, and is a candidate to drop or rewrite.",
    "against_trend": "models that are safer on the rest of the bank are LESS often safe here: look at the "
                     "item's judge labels and its reference answer first (a flipped label looks exactly like this).",
    "constant": "every model passes (or every model fails): the item says nothing about any of these models; "
                "the variance filter leaves it out of the bank.",
    "misfit": "within groups of models with similar scores the item's safe rate departs from the 2PL curve "
              "(S-X2): its curve has another shape (a guessing floor, a ceiling, a dip).",
    "local_dependence": "the two items' residuals correlate beyond what the fitted model produces: they share "
                        "something besides safety (a rewrite of one prompt, a common context); count them once.",
    "dimensionality": "the residuals still share a dimension beyond parallel analysis: one ability does not "
                      "explain every item; look at the items loading on it before trusting a single score.",
}


def _check_items(bank: ItemBank, matrix: ResponseMatrix, bank_name: str, responses_name: str) -> None:
    missing = bank.item_ids.difference(matrix.items, sort=False)
    if missing.size == len(bank):
        raise InputError(f"{responses_name}: none of the {len(bank)} items of the bank {bank_name} is in the "
                         f"responses (bank items e.g. {shown(list(bank.item_ids[:3]))}, response items e.g. "
                         f"{shown(list(matrix.items[:3]))}): is this the bank of these responses?")
    if missing.size:
        raise InputError(f"{responses_name}: {missing.size} of the {len(bank)} items of the bank {bank_name} "
                         f"have no responses, e.g. {shown(list(missing[:3]))}: audit the bank with the "
                         "responses it was calibrated on")


def _item_rest(x: np.ndarray, observed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Corrected item-rest correlation of each item (over models), and its one-sided p-value of r < 0."""
    xs = np.where(observed, x, 0.0)
    seen = observed.sum(axis=1, keepdims=True)
    rest = (xs.sum(axis=1, keepdims=True) - xs) / np.maximum(seen - observed, 1)   # (n_models, n_items)
    w = observed.astype(float)
    n = w.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = (w * xs).sum(axis=0) / n
        mr = (w * rest).sum(axis=0) / n
        dx, dr = np.where(observed, xs - mx, 0.0), np.where(observed, rest - mr, 0.0)
        r = (dx * dr).sum(axis=0) / np.sqrt((dx * dx).sum(axis=0) * (dr * dr).sum(axis=0))
        tstat = r * np.sqrt((n - 2) / (1 - r * r))
    p = np.where(np.isfinite(tstat), student_t.cdf(tstat, np.maximum(n - 2, 1)), np.nan)
    return r, p


def _q3_pairs(matrix, calibration, *, alpha, n_replications, seed):
    """Pairs above the simulated family-wise Q3 cut, the cut and the mean off-diagonal Q3."""
    q = q3(matrix, calibration).to_numpy()
    iu = np.triu_indices_from(q, k=1)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 3]))
    maxima = []
    for _ in range(int(n_replications)):
        sim = simulate_fitted(matrix, calibration, rng=rng)
        qs = q3(sim, calibration).to_numpy()
        maxima.append(np.nanmax(qs[np.triu_indices_from(qs, k=1)]))
    cut = float(np.quantile(maxima, 1 - alpha)) if maxima else np.nan
    vals = q[iu]
    hit = np.nonzero(vals > cut)[0]
    order = hit[np.argsort(-vals[hit])]
    pairs = pd.DataFrame({"item_1": matrix.items[iu[0][order]], "item_2": matrix.items[iu[1][order]],
                          "q3": vals[order]})
    return pairs, cut, float(np.nanmean(vals))


def audit_bank(bank: ItemBank, matrix: ResponseMatrix, *, alpha: float = 0.05, correction: str = "bh",
               a_min: float = 0.3, n_replications: int = 10, seed: int = 0, bank_name: str = "BANK",
               responses_name: str = "RESPONSES") -> dict:
    """Audit a bank against responses: every check of the module docstring, with its evidence.

    Parameters
    ----------
    bank : ItemBank
    matrix : ResponseMatrix, shape (n_models, n_items)
        Responses holding every bank item (items outside the bank are checked for ``constant`` only).
    alpha, correction
        Level and multiple-testing correction (:func:`irtlib.fit.checks.adjust_pvalues`) of the tests.
    a_min : float
        ``a sd(theta)`` below which an item is flagged (0.3: a model one SD above another has log-odds of a
        safe answer 0.3 higher, odds 1.35 times).
    n_replications : int
        Matrices simulated from the fitted model for the Q3 cut and parallel analysis.
    seed : int
    bank_name, responses_name : str
        Named in error messages.

    Returns
    -------
    dict
        ``checks``: for each name of :data:`CHECKS`, a DataFrame of the flagged items (or pairs, or
        eigenvalues) with their evidence; ``items``: a DataFrame of every bank item's numbers
        (``a``, ``b``, ``safe_rate``, ``item_rest``, ``sx2_p``...); ``theta``: the models' abilities;
        ``information``: the test information curve (``theta``, ``information``); ``summary``: counts
        and settings (JSON-ready); ``flagged_items``: the items flagged by any item check (constant
        items count only when they are in the bank: the variance filter leaves the others out by design).
    """
    if not 0 < alpha < 1:
        raise InputError(f"alpha must lie in (0, 1), got {alpha}")
    _check_items(bank, matrix, bank_name, responses_name)
    rates = matrix.item_safe_rates()
    constant_items = rates.index[(rates == 0) | (rates == 1)]
    m = matrix.subset(items=list(bank.item_ids))
    a = pd.Series(bank.a, index=bank.item_ids)
    b = pd.Series(bank.b, index=bank.item_ids)
    theta = pd.Series(map_ability(m.values, bank.a, bank.b).theta, index=m.models)
    cal = Calibration(a=a, b=b, theta=theta, engine=str(bank.meta.get("settings", {}).get("engine", "bank")))
    items = pd.DataFrame({"a": a, "b": b, "safe_rate": rates.reindex(bank.item_ids)})
    checks: dict[str, pd.DataFrame] = {}

    theta_sd = float(theta.std(ddof=1)) if theta.size > 1 else 1.0
    items["a_per_sd"] = items["a"] * theta_sd
    checks["low_discrimination"] = items.loc[items["a_per_sd"] < a_min, ["a", "a_per_sd", "b", "safe_rate"]
                                             ].sort_values("a")

    r, p_one = _item_rest(m.values, m.observed)
    items["item_rest"] = r
    items["trend_p_adjusted"] = adjust_pvalues(p_one, correction=correction)
    trend = (items["item_rest"] < 0) & (items["trend_p_adjusted"] <= alpha)
    checks["against_trend"] = items.loc[trend, ["item_rest", "trend_p_adjusted", "a", "safe_rate"]]

    checks["constant"] = pd.DataFrame({"safe_rate": rates.reindex(constant_items),
                                       "in_bank": constant_items.isin(bank.item_ids)}, index=constant_items)

    n_groups = min(10, m.shape[0] // 5)
    if n_groups > 2 and m.shape[1] >= 3:
        fit = item_fit(m, cal, method="sx2", alpha=alpha, correction=correction)
        items["sx2"], items["sx2_p_adjusted"] = fit["statistic"], fit["p_adjusted"]
        checks["misfit"] = fit.loc[fit["flagged"], ["statistic", "df", "p_value", "p_adjusted"]]
        misfit_note = f"S-X2 in {fit.attrs['n_groups']} score groups"
    else:
        checks["misfit"] = pd.DataFrame(columns=["statistic", "df", "p_value", "p_adjusted"])
        misfit_note = f"not run: {m.shape[0]} models are too few for S-X2 (needs 15)"

    pairs, cut, mean_q3 = _q3_pairs(m, cal, alpha=alpha, n_replications=n_replications, seed=seed)
    checks["local_dependence"] = pairs

    dim = dimensionality(m, cal, n=min(8, m.shape[0] - 1, m.shape[1]), n_replications=n_replications,
                         quantile=1 - alpha, seed=seed)
    checks["dimensionality"] = dim.loc[dim.index <= max(dim.attrs["n_above"], 0)] if dim.attrs["n_above"] else \
        dim.iloc[:0]

    grid = np.linspace(min(-4.0, float(theta.min()) - 0.5), max(4.0, float(theta.max()) + 0.5), 161)
    info = fisher_information(grid[:, None], bank.a, bank.b).sum(axis=1)
    info_models = fisher_information(theta.to_numpy()[:, None], bank.a, bank.b).sum(axis=1)

    constant_bank = checks["constant"].index[checks["constant"]["in_bank"].to_numpy(dtype=bool)]
    flagged_items = sorted(set(checks["low_discrimination"].index) | set(checks["against_trend"].index)
                           | set(constant_bank)
                           | set(checks["misfit"].index) | set(pairs["item_1"]) | set(pairs["item_2"]))
    summary = {
        "n_models": int(m.shape[0]), "n_bank_items": len(bank), "n_response_items": int(matrix.shape[1]),
        "counts": {name: int(len(frame)) for name, frame in checks.items()},
        "n_flagged_items": len(flagged_items),
        "ok": not flagged_items and not len(checks["dimensionality"]),
        "settings": {"theta_sd": theta_sd, "alpha": alpha, "correction": correction, "a_min": a_min,
                     "n_replications": int(n_replications),
                     "seed": seed, "q3_cut": cut, "misfit": misfit_note},
        "mean_q3": mean_q3,
        "dimensionality": {"eigenvalues": dim["eigenvalue"].tolist(), "parallel": dim["parallel"].tolist(),
                           "n_above": int(dim.attrs["n_above"])},
        "information_at_models": {"min": float(info_models.min()), "median": float(np.median(info_models)),
                                  "max": float(info_models.max()),
                                  "theta_of_min": float(theta.iloc[int(np.argmin(info_models))])},
    }
    return {"checks": checks, "items": items, "theta": theta, "summary": summary, "flagged_items": flagged_items,
            "information": pd.DataFrame({"theta": grid, "information": info}), "eigenvalues": dim}
