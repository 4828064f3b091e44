"""What a budget saves: the first k at which a method reaches a target agreement, and 1 - k/N.

Paper, section "Evaluation": cost is proportional to the number of items, so a budget of k of
N items saves ``1 - k / N``; "Reported results, savings" gives the savings at 90% agreement.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from irtlib.errors import InputError
from irtlib.selection.methods import static_ids

__all__ = ["first_budget", "savings_table", "table2_column"]


def first_budget(curves: pd.DataFrame, methods: Sequence[str], *, threshold: float = 0.90) -> int | None:
    """Smallest swept k at which the best of ``methods`` reaches ``threshold`` mean agreement.

    Parameters
    ----------
    curves : DataFrame
        One benchmark's :func:`irtlib.protocol.agreement.agreement_curves` (columns method, k, mean).
    methods : sequence of str
        Methods pooled by taking, at each k, the best mean among them.
    threshold : float

    Returns
    -------
    int or None
        None when no swept k reaches the threshold.
    """
    wide = curves.pivot_table(index="k", columns="method", values="mean").sort_index()
    present = [m for m in methods if m in wide.columns]
    if not present:
        raise InputError(f"none of the methods {list(methods)} is in the curves")
    best = wide[present].max(axis=1)
    hit = best.index[best >= threshold]
    return int(hit.min()) if len(hit) else None


def savings_table(curves: pd.DataFrame, n_items: dict, *, threshold: float = 0.90) -> pd.DataFrame:
    """Savings ``1 - k/N`` at ``threshold`` agreement per benchmark: adaptive, best static, Marginal Fisher.

    Parameters
    ----------
    curves : DataFrame
        :func:`irtlib.protocol.agreement.agreement_curves` of several benchmarks (a ``benchmark`` column).
    n_items : dict
        Benchmark -> N, the full benchmark's number of items.

    Returns
    -------
    DataFrame, indexed by benchmark
        Columns ``adaptive``, ``best static``, ``marginal-fisher``: the saving, NaN where the
        threshold is not reached within the sweep.
    """
    groups = {"adaptive": ["fluid"], "best static": list(static_ids()), "marginal-fisher": ["marginal-fisher"]}
    rows = {}
    for bench, curve in curves.groupby("benchmark", sort=False):
        n = n_items[bench]
        rows[bench] = {}
        for label, methods in groups.items():
            k = first_budget(curve, methods, threshold=threshold)
            rows[bench][label] = np.nan if k is None else 1.0 - k / n
    return pd.DataFrame.from_dict(rows, orient="index")


def table2_column(table: pd.DataFrame, which: str, methods: Sequence[str]) -> pd.DataFrame:
    """One column of Table 2 laid out per benchmark, with the spread over splits.

    Parameters
    ----------
    table : DataFrame
        :func:`irtlib.protocol.agreement.summarise_table2` of several benchmarks.
    which : {"left", "right"}
    methods : sequence of str

    Returns
    -------
    DataFrame, indexed by benchmark
        ``k``, ``k/N``, ``status``, then for each method ``mean``, ``sd`` and the interval
        ``lo``-``hi`` (columns as a two-level index: method, statistic).
    """
    t = table[table["column"] == which]
    out = {}
    for bench, tb in t.groupby("benchmark", sort=False):
        tb = tb.set_index("method")
        rec = {("", "k"): int(tb["k"].iloc[0]), ("", "k/N"): float(tb["k_over_n"].iloc[0]),
               ("", "status"): tb["status"].iloc[0]}
        for m in methods:
            if m in tb.index:
                for stat in ("mean", "sd", "lo", "hi"):
                    rec[(m, stat)] = float(tb.loc[m, stat])
        out[bench] = rec
    frame = pd.DataFrame.from_dict(out, orient="index")
    frame.columns = pd.MultiIndex.from_tuples(frame.columns)
    return frame
