"""Table 2 like for like: our agreement at the paper's own budgets, budgets compared as budgets.

The paper's Table 2 reports, per benchmark, two budgets (left: Fluid first reaches 0.90; right:
the largest swept k before Random catches up) and several methods' mean agreement there. Our own
crossing budgets differ from the paper's, so comparing "agreement at our crossing" with "agreement
at the paper's crossing" mixes two questions. This module answers each separately:

- :func:`at_paper_budgets`: every reported agreement value of Table 2, set beside our mean
  agreement *at the paper's k*, with the 95% confidence interval of the mean over splits;
- :func:`budget_comparison`: the paper's budgets beside ours, censored budgets shown as "> k".
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from irtlib.datasets import paper
from irtlib.errors import InputError
from irtlib.protocol.agreement import agreement_at

from .scorecard import budget_verdict, nearest_swept

#: Presentation only: a change here cannot change a computed number (irtlib.book.cache leaves it out).
__presentation__ = True
__all__ = ["TOLERANCE", "paper_values", "at_paper_budgets", "compact", "budget_comparison", "format_budget"]

#: Widening of the 95% interval of our mean within which a paper value counts as matched.
TOLERANCE = 0.03

_FIELDS = {"fluid": "fluid", "random": "random", "random-irt": "random_irt"}


def paper_values(bench: str) -> list[dict]:
    """Every agreement value Table 2 reports for ``bench``: column, k, method, value, ref."""
    out = []
    left, right = paper.TABLE2_LEFT[bench], paper.TABLE2_RIGHT[bench]
    for method, field in _FIELDS.items():
        out.append({"column": "left", "k_paper": left.k, "method": method, "paper": getattr(left, field),
                    "ref": f"TABLE2_LEFT[{bench}].{field}"})
    for method, value in left.others.items():
        out.append({"column": "left", "k_paper": left.k, "method": method, "paper": value,
                    "ref": f"TABLE2_LEFT[{bench}].others.{method}"})
    for method, value in right.values.items():
        out.append({"column": "right", "k_paper": right.k, "method": method, "paper": value,
                    "ref": f"TABLE2_RIGHT[{bench}].values.{method}"})
    return out


def at_paper_budgets(results: dict, *, tolerance: float = TOLERANCE, level: float = 0.95) -> pd.DataFrame:
    """Our agreement at the budgets where the paper reports its Table 2 values.

    Parameters
    ----------
    results : dict
        Benchmark -> :func:`irtlib.run_protocol` results (the paper's budgets should be among the
        swept ``k``; where one is not, the nearest swept budget on a log scale is used and
        ``k`` differs from ``k_paper``).
    tolerance : float
        A paper value is ``within`` when it lies in our ``level`` interval of the mean widened by
        ``tolerance`` on each side.

    Returns
    -------
    DataFrame, one row per reported value
        ``benchmark``, ``column``, ``method``, ``k_paper``, ``k``, ``paper``, ``mean``, ``ci_lo``,
        ``ci_hi``, ``sd``, ``lo``, ``hi`` (spread of single splits), ``n_splits``,
        ``n_undefined``, ``within`` (bool) and ``ref`` (the paper number's key).
    """
    rows = []
    for bench, res in results.items():
        for v in paper_values(bench):
            k = nearest_swept(res, v["k_paper"])
            at = agreement_at(res, k, methods=[v["method"]]) if "benchmark" not in res.columns else \
                agreement_at(res, {bench: k}, methods=[v["method"]])
            if at.empty:
                continue
            r = at.iloc[0]
            within = bool(r["ci_lo"] - tolerance <= v["paper"] <= r["ci_hi"] + tolerance)
            rows.append({"benchmark": bench, "column": v["column"], "method": v["method"], "k_paper": v["k_paper"],
                         "k": k, "paper": v["paper"], **{c: r[c] for c in ("mean", "ci_lo", "ci_hi", "sd", "lo", "hi",
                                                                          "n_splits", "n_undefined")},
                         "within": within, "ref": v["ref"]})
    return pd.DataFrame(rows)


def compact(long: pd.DataFrame, *, column: str, methods, names: dict | None = None, labels: dict | None = None,
            layout: str = "wide") -> pd.DataFrame:
    """One column of Table 2 as a compact table, the paper's value beside ours.

    Parameters
    ----------
    long : DataFrame
        :func:`at_paper_budgets`.
    column : {"left", "right"}
    methods : sequence of str
        Methods to show, in order.
    names, labels : dict, optional
        Display names of benchmarks and of methods.
    layout : {"wide", "long"}
        ``wide``: one row per benchmark, two columns (paper, ours) per method (Table 2's left
        column: three methods everywhere). ``long``: one row per reported value, columns
        benchmark, k, method, paper, ours (the right column, where each benchmark reports other
        methods).

    Returns
    -------
    DataFrame
        ``wide``: indexed by benchmark, columns ``("", "k")`` then ``(method, "paper")`` and
        ``(method, "ours")``. ``long``: a plain frame.
    """
    t = long[long["column"] == column]
    labels = labels or {}
    if layout == "long":
        t = t[t["method"].isin(list(methods))].copy()
        t["order"] = t["method"].map({m: i for i, m in enumerate(methods)})
        t = t.sort_values(["order"], kind="stable").sort_values("benchmark", key=lambda b: b.map(
            {bb: i for i, bb in enumerate(dict.fromkeys(long["benchmark"]))}), kind="stable")
        return pd.DataFrame({"benchmark": t["benchmark"].map(lambda b: (names or {}).get(b, b)),
                             "k": [format_budget(int(k)) for k in t["k_paper"]],
                             "method": t["method"].map(lambda m: labels.get(m, m)),
                             "paper": t["paper"].to_numpy(), "ours": t["mean"].to_numpy()}).reset_index(drop=True)
    if layout != "wide":
        raise InputError(f"layout must be 'wide' or 'long', got {layout!r}")
    frame = {}
    for bench, tb in t.groupby("benchmark", sort=False):
        tb = tb.set_index("method")
        rec = {("", "k"): format_budget(int(tb["k_paper"].iloc[0]),
                                        at_least=bench == "safetybench" and column == "left")}
        for m in methods:
            if m in tb.index:
                rec[(labels.get(m, m), "paper")] = float(tb.loc[m, "paper"])
                rec[(labels.get(m, m), "ours")] = float(tb.loc[m, "mean"])
        frame[(names or {}).get(bench, bench)] = rec
    out = pd.DataFrame.from_dict(frame, orient="index")
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    return out


def format_budget(k: int | None, *, at_least: bool = False) -> str:
    """A budget as the table prints it: "17", "3,000", "> 3,431" for a censored one, "-" for none."""
    if k is None or (isinstance(k, float) and np.isnan(k)):
        return "-"
    return ("> " if at_least else "") + f"{int(k):,}"


def budget_comparison(summary: pd.DataFrame, *, names: dict | None = None) -> pd.DataFrame:
    """The paper's Table 2 budgets beside ours, with a verdict per budget.

    Parameters
    ----------
    summary : DataFrame
        :func:`irtlib.protocol.agreement.summarise_table2` over several benchmarks.

    Returns
    -------
    DataFrame indexed by benchmark display name
        ``left k (paper)``, ``left k (ours)``, ``left verdict``, ``right k (paper)``,
        ``right k (ours)``, ``right verdict``; censored budgets print as "> k".
    """
    out = {}
    for bench, tb in summary.groupby("benchmark", sort=False):
        rec = {}
        for column, p in (("left", paper.TABLE2_LEFT[bench]), ("right", paper.TABLE2_RIGHT[bench])):
            ours = tb[tb["column"] == column]
            at_least = bool(getattr(p, "k_at_least", False))
            rec[f"{column} k (paper)"] = format_budget(p.k, at_least=at_least)
            if ours.empty:
                rec[f"{column} k (ours)"] = "never led" if column == "right" else "-"
                rec[f"{column} verdict"] = budget_verdict(None, p.k)
                continue
            k, censored = int(ours["k"].iloc[0]), bool(ours["censored"].iloc[0])
            rec[f"{column} k (ours)"] = format_budget(k, at_least=censored)
            rec[f"{column} verdict"] = budget_verdict(k, p.k, censored=censored, paper_at_least=at_least)
        out[(names or {}).get(bench, bench)] = rec
    return pd.DataFrame.from_dict(out, orient="index")
