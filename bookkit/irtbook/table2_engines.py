"""What the calibration engine changes: the paper's quantities under each engine and protocol.

The paper's numbers come from the authors' whole pipeline, their calibration included (py-irt's
hierarchical priors, learning-rate decay, best epoch). The book runs that pipeline, and sets two
named alternatives beside it: py-irt with the text's fixed priors and irtlib's MAP engine.
:func:`protocol_quantities` reads the Table 2 quantities off one protocol run (Fluid's first
budget at 0.90, Fluid and Total Fisher at the paper's budget); :func:`fit_quantities` reads the
fit's (CV of a, item RMSE, the ability span of the ceiling models) off one calibration of every
model. The Table 2 chapter stacks both into one table per benchmark and engine.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from irtlib.datasets import paper
from irtlib.fit.summaries import coefficient_of_variation, item_rmse
from irtlib.protocol.agreement import agreement_curves, summarise_table2

__all__ = ["TABLE_COLUMNS", "protocol_quantities", "fit_quantities", "paper_quantities", "first_k_phrase"]

#: The columns of the chapter's engine table: a row's benchmark and setup, then the quantities of
#: :func:`protocol_quantities`, :func:`fit_quantities` and :func:`paper_quantities` (a build without the
#: paper's released matrices has no rows, and the table keeps its columns).
TABLE_COLUMNS = ("benchmark", "setup", "first_k", "censored", "fluid_at_k", "total_fisher_at_k", "splits",
                 "cv_a", "item_rmse", "theta_lo", "theta_hi")


def protocol_quantities(run: pd.DataFrame, *, benchmark: str, n_items: int, threshold: float = 0.90,
                        nan_policy: str | None = None) -> dict:
    """Table 2's left column of one benchmark from one protocol run (paper, Section 5, Table 2).

    Parameters
    ----------
    run : DataFrame
        :func:`irtlib.run_protocol` rows of one benchmark (``fluid`` among its methods).
    benchmark : str
        The benchmark id (for the paper's budget).
    n_items : int
        Items of the full benchmark (for the saving).
    threshold : float
        The agreement Fluid's mean curve must reach.
    nan_policy : {"zero", "omit"}, optional
        Default: the run's own (its protocol's).

    Returns
    -------
    dict
        ``first_k`` (int), ``censored`` (bool: not reached within the sweep, so "> first_k"),
        ``fluid_at_k`` and ``total_fisher_at_k`` (mean agreement at the paper's left-column budget;
        NaN where that budget or method was not run), ``splits`` (how many).
    """
    summary = summarise_table2(run, n_items, threshold=threshold, nan_policy=nan_policy)
    left = summary[(summary["column"] == "left") & (summary["method"] == "fluid")].iloc[0]
    curves = agreement_curves(run, nan_policy=nan_policy).set_index(["method", "k"])["mean"]
    k = paper.TABLE2_LEFT[benchmark].k if benchmark in paper.TABLE2_LEFT else None

    def at(method):
        return float(curves.get((method, k), np.nan)) if k is not None else float("nan")

    return {"first_k": int(left["k"]), "censored": bool(left["censored"]), "fluid_at_k": at("fluid"),
            "total_fisher_at_k": at("total-fisher"), "splits": int(run["split"].nunique())}


def fit_quantities(bench, calibration, *, ceiling: float | None = None) -> dict:
    """The fit's quantities the paper reports, from one calibration of every model (paper, Sections 4 and 5).

    Parameters
    ----------
    bench : irtbook.pipeline.Benchmark
    calibration : Calibration
        A 2PL fit of ``bench.filtered`` (every model).
    ceiling : float, optional
        The ceiling score (default the paper's 0.95); models scoring at least this are the
        ceiling models whose ability span is reported.

    Returns
    -------
    dict
        ``cv_a`` (CV of a), ``item_rmse`` (appendix E), ``theta_lo`` and ``theta_hi`` (the
        ability range of the ceiling models, on this fit's own scale; NaN without any).
    """
    c = paper.CEILING_SCORE if ceiling is None else ceiling
    theta = calibration.theta
    top = theta[bench.full.safety_scores().reindex(theta.index).to_numpy() >= c]
    return {"cv_a": coefficient_of_variation(calibration.a.to_numpy()),
            "item_rmse": item_rmse(bench.filtered, calibration),
            "theta_lo": float(top.min()) if len(top) else float("nan"),
            "theta_hi": float(top.max()) if len(top) else float("nan")}


def paper_quantities(benchmark: str) -> dict:
    """The paper's printed values of the same quantities (NaN where it prints none)."""
    left = paper.TABLE2_LEFT[benchmark]
    span = paper.CEILING.get(benchmark, {}).get("theta_range_above", (np.nan, np.nan))
    return {"first_k": left.k, "censored": bool(left.k_at_least), "fluid_at_k": left.fluid,
            "total_fisher_at_k": left.others.get("total-fisher", np.nan), "cv_a": paper.FIGURE3_CV[benchmark],
            "item_rmse": paper.ITEM_RMSE[benchmark], "theta_lo": span[0], "theta_hi": span[1]}


def first_k_phrase(k: int | None, censored: bool) -> str:
    """A budget as a table prints it: ``"51"``, or ``"> 113"`` when not reached within the sweep."""
    if k is None:
        return "-"
    return f"> {int(k)}" if censored else str(int(k))
