"""irtbook.table2_engines: Table 2's left column and the fit's quantities, on hand-made runs and fits."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from irtbook import table2_engines as engines
from irtbook.pipeline import Benchmark
from irtlib.calibration.joint_map import Calibration
from irtlib.core.responses import ResponseMatrix
from irtlib.datasets import paper


def _run(values: dict) -> pd.DataFrame:
    """Hand-made protocol results: method -> k -> per-split agreements."""
    rows = [(s, m, k, v) for m, by_k in values.items() for k, vs in by_k.items() for s, v in enumerate(vs)]
    return pd.DataFrame(rows, columns=["split", "method", "k", "agreement"])


def test_first_k_and_the_values_at_the_papers_budget():
    k_paper = paper.TABLE2_LEFT["anthropic-red-team"].k          # 51
    run = _run({"fluid": {1: [0.5, 0.6], 20: [0.89, 0.93], k_paper: [0.95, 0.97]},
                "random": {1: [0.2, 0.3], 20: [0.7, 0.8], k_paper: [0.9, 0.9]},
                "total-fisher": {1: [0.1, 0.1], 20: [0.5, 0.5], k_paper: [0.7, 0.66]}})
    q = engines.protocol_quantities(run, benchmark="anthropic-red-team", n_items=1000)
    assert q["first_k"] == 20 and not q["censored"] and q["splits"] == 2
    assert q["fluid_at_k"] == pytest.approx(0.96) and q["total_fisher_at_k"] == pytest.approx(0.68)


def test_a_budget_never_reached_is_censored_and_a_method_not_run_is_nan():
    run = _run({"fluid": {1: [0.5, 0.6], 51: [0.8, 0.85]}, "random": {1: [0.1, 0.2], 51: [0.9, 0.9]}})
    q = engines.protocol_quantities(run, benchmark="anthropic-red-team", n_items=1000)
    assert q["first_k"] == 51 and q["censored"]
    assert np.isnan(q["total_fisher_at_k"])
    assert engines.first_k_phrase(q["first_k"], q["censored"]) == "> 51"
    assert engines.first_k_phrase(20, False) == "20" and engines.first_k_phrase(None, False) == "-"


def test_fit_quantities_on_a_hand_made_fit():
    # safety scores 1.0, 1.0 (one cell missing), 0.5 and 0.95: three ceiling models (the paper's "at least 0.95")
    x = np.ones((4, 20))
    x[1, 0] = np.nan
    x[2, 10:] = 0
    x[3, 19] = 0
    m = ResponseMatrix(x, ["m0", "m1", "m2", "m3"], [f"i{j}" for j in range(20)], source="hand-made")
    bench = Benchmark("hand", "Hand", m, m, "binary")
    a = pd.Series(np.linspace(0.5, 2.5, 20), index=m.items)
    theta = pd.Series([3.0, 2.0, -1.0, 0.5], index=m.models)
    cal = Calibration(a=a, b=pd.Series(0.0, index=m.items), theta=theta, engine="hand")
    q = engines.fit_quantities(bench, cal)
    assert (q["theta_lo"], q["theta_hi"]) == (0.5, 3.0)
    assert q["cv_a"] == pytest.approx(a.std(ddof=1) / a.mean())
    p = np.where(np.isnan(x), np.nan, 1 / (1 + np.exp(-np.outer(theta, a))))
    assert q["item_rmse"] == pytest.approx(np.sqrt(np.mean((np.nanmean(x, axis=0) - np.nanmean(p, axis=0)) ** 2)))


def test_the_papers_quantities():
    q = engines.paper_quantities("anthropic-red-team")
    assert (q["first_k"], q["fluid_at_k"], q["total_fisher_at_k"]) == (51, 0.91, 0.68)
    assert (q["theta_lo"], q["theta_hi"], q["cv_a"], q["item_rmse"]) == (1.19, 6.06, 0.69, 0.008)
    assert np.isnan(engines.paper_quantities("harmbench")["total_fisher_at_k"])


def test_the_table_columns_hold_every_quantity_and_nothing_else():
    # the chapter builds its table with columns=TABLE_COLUMNS (so a build without rows keeps them): a quantity
    # missing from the list would be dropped silently, a name in the list that no function returns stays empty
    run = _run({"fluid": {1: [0.5, 0.6], 51: [0.95, 0.97]}, "total-fisher": {1: [0.1, 0.1], 51: [0.7, 0.66]}})
    x = np.ones((2, 3))
    x[1, 0] = 0
    m = ResponseMatrix(x, ["m0", "m1"], ["i0", "i1", "i2"], source="hand-made")
    cal = Calibration(a=pd.Series(1.0, index=m.items), b=pd.Series(0.0, index=m.items),
                      theta=pd.Series([1.0, 0.0], index=m.models), engine="hand")
    keys = {"benchmark", "setup"}
    keys |= set(engines.protocol_quantities(run, benchmark="anthropic-red-team", n_items=100))
    keys |= set(engines.fit_quantities(Benchmark("hand", "Hand", m, m, "binary"), cal))
    keys |= set(engines.paper_quantities("anthropic-red-team"))
    assert set(engines.TABLE_COLUMNS) == keys and len(engines.TABLE_COLUMNS) == len(keys)
    assert list(pd.DataFrame([], columns=list(engines.TABLE_COLUMNS)).columns) == list(engines.TABLE_COLUMNS)
