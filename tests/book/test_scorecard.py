"""The book's scorecard helpers (irtbook.scorecard) that the chapters' tests do not reach."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from irtbook import scorecard


def _paired(fluid: float, random: float, ks=(5, 20, 60, 120, 400), n_splits: int = 6, spread: float = 0.01):
    rows = []
    for s in range(n_splits):
        for k in ks:
            rows.append((s, "fluid", k, fluid + spread * (s - 2.5)))
            rows.append((s, "random", k, random + spread * (s - 2.5) * 0.5))
    return pd.DataFrame(rows, columns=["split", "method", "k", "agreement"])


def test_nearest_swept_on_a_log_scale():
    res = _paired(0.9, 0.8, ks=(10, 100, 1000))
    assert scorecard.nearest_swept(res, 30) == 10          # 30 / 10 = 3 < 100 / 30: nearer 10 in log k
    assert scorecard.nearest_swept(res, 40) == 100
    assert scorecard.nearest_swept(res, 1000) == 1000


def test_exception_table_tests_each_claim_split_by_split():
    results = {"simplesafetytests": _paired(0.95, 0.80),              # Fluid clearly ahead: supported
               "harmbench": _paired(0.90, 0.899),                      # within the match tolerance
               "safetybench": _paired(0.70, 0.85)}                     # Random ahead: the reversed claim holds
    table = scorecard.exception_table(results, display_names={"harmbench": "HarmBench"}).set_index("benchmark")
    assert list(table.index) == ["simplesafetytests", "HarmBench", "safetybench"]
    assert table.loc["simplesafetytests", "difference"] == pytest.approx(0.15)
    assert table.loc["simplesafetytests", "share_fluid_ahead"] == 1.0
    assert table.loc["safetybench", "share_fluid_ahead"] == 0.0
    assert table.loc["HarmBench", "rule"] == "match" and table.loc["safetybench", "rule"] == "direction"
    assert table.loc["simplesafetytests", "verdict"] == scorecard.direction_verdict(0.15, 0.14, 0.16)
    assert table.loc["safetybench", "verdict"] == table.loc["simplesafetytests", "verdict"]
    assert set(table["k"]) <= {5, 20, 60, 120, 400}
    assert scorecard.exception_table({"wmdp-bio": _paired(0.9, 0.8)}).empty


def test_cv_advantage_and_separated_share():
    results = {"a": _paired(0.95, 0.80), "b": _paired(0.90, 0.89)}
    table = scorecard.cv_advantage(results, {"a": 1.2, "b": 0.4}, k=20)
    assert list(table.columns) == ["cv", "k", "lead", "ci_lo", "ci_hi"] and (table["k"] == 20).all()
    assert table.loc["a", "lead"] == pytest.approx(0.15) and table.loc["b", "lead"] == pytest.approx(0.01)
    assert table.loc["a", "ci_lo"] < 0.15 < table.loc["a", "ci_hi"]
    # three intervals: [0, 2], [1, 3] overlap; [5, 7] is apart from both -> 2 of 3 pairs told apart
    assert scorecard.separated_share([1.0, 2.0, 6.0], [1.0, 1.0, 1.0]) == pytest.approx(2 / 3)
    assert np.isnan(scorecard.separated_share([1.0], [0.5]))


def test_ceiling_pairs():
    from irtbook import pipeline

    bench = pipeline.load_benchmark("simplesafetytests", source="simulated")
    cal = pipeline.calibrate_benchmark(bench, engine="map")
    out = scorecard.ceiling_pairs(bench, cal)
    scores = bench.full.safety_scores()
    assert out["n"] == int((scores >= 0.95).sum()) and out["n"] >= 2      # at or above: the one ceiling rule
    assert 0.0 <= out["score"] <= 1.0 and 0.0 <= out["theta"] <= 1.0
    assert 0 <= out["at_bound"] <= out["n"]


# --- the rules: values at the printed decimals --------------------------------------------------

@pytest.mark.parametrize("ours, paper, expected", [
    (0.905, 0.91, "reproduced"),       # a tie rounds half up: 0.905 prints as 0.91 ...
    (0.905, 0.90, "close"),            # ... so it does not reproduce 0.90, but lies within 0.02
    (0.895, 0.90, "reproduced"),       # 0.895 is stored as 0.89500000000000001776: rounds to 0.90
    (0.8949999999999999, 0.90, "reproduced"),   # the same tie reached by arithmetic, a hair below
    (0.8949, 0.90, "close"),           # a genuine 0.8949 prints as 0.89
    (0.865, 0.87, "reproduced"),       # stored as 0.86499999999999999112; Python's round gives 0.86
    (0.88, 0.90, "close"),             # exactly 0.02 away (0.020000000000000018 in float)
    (0.879, 0.90, "not reproduced"),
    (0.86, 0.91, "not reproduced"),    # the old rule's widened interval [0.83, 0.89] + 0.03 reached 0.91
    (None, 0.90, "not reproduced"), (float("nan"), 0.90, "not reproduced")])
def test_value_rule_rounds_half_up_at_two_decimals(ours, paper, expected):
    assert scorecard.value_verdict(ours, paper, decimals=2) == expected


def test_value_rule_at_three_decimals_and_with_a_stated_close_band():
    assert scorecard.value_verdict(0.0085, 0.009, decimals=3) == "reproduced"
    assert scorecard.value_verdict(0.0104, 0.008, decimals=3) == "not reproduced"     # 0.0024 > 0.002
    assert scorecard.value_verdict(0.0099, 0.008, decimals=3) == "close"
    assert scorecard.value_verdict(4.6, 5.0, decimals=0, close=1.0) == "reproduced"
    assert scorecard.value_verdict(4.2, 5.0, decimals=0, close=1.0) == "close"
    assert scorecard.value_verdict(3.9, 5.0, decimals=0, close=1.0) == "not reproduced"


def test_printed_round_differs_from_pythons_round_on_stored_ties():
    from decimal import Decimal

    assert round(0.865, 2) == 0.86 and scorecard.printed_round(0.865, decimals=2) == Decimal("0.87")
    assert scorecard.printed_round(0.125, decimals=2) == Decimal("0.13")         # half up, not half even
    assert scorecard.printed_round(0.9994, decimals=3) == Decimal("0.999")
    assert scorecard.rounds_to(0.9995, 1.0, decimals=3)


# --- the rules: budgets in steps of the authors' grid --------------------------------------------

SST_GRID = [1, 2, 3, 4, 5, 6, 8, 10, 13, 16, 20, 25, 31, 40, 50, 63, 79]


@pytest.mark.parametrize("ours, paper, kwargs, expected", [
    (20, 20, {}, "reproduced"),
    (25, 20, {}, "close"), (16, 20, {}, "close"),                      # one grid step late or early
    (31, 20, {}, "not reproduced"), (13, 20, {}, "not reproduced"),   # two steps
    (25, 20, {"censored": True}, "not reproduced"),                    # never reached: "> 25"
    (79, 20, {"censored": True}, "not reproduced"),
    (None, 20, {}, "not reproduced"),                                  # no budget at all
    (22, 20, {}, "reproduced"),             # off the grid: the nearest grid point on a log scale is 20
    (79, 63, {"paper_at_least": True, "censored": True}, "reproduced"),       # both beyond their sweeps
    (50, 63, {"paper_at_least": True, "censored": True}, "not testable here"),  # our sweep stopped sooner
    (63, 63, {"paper_at_least": True}, "close"),    # reached at the paper's own "> 63": one step early
    (50, 63, {"paper_at_least": True}, "close"),
    (40, 63, {"paper_at_least": True}, "not reproduced"),
    (79, 63, {"paper_at_least": True}, "reproduced"),
    (None, 63, {"paper_at_least": True}, "not testable here")])
def test_budget_rule_counts_grid_steps(ours, paper, kwargs, expected):
    assert scorecard.budget_verdict(ours, paper, grid=SST_GRID, **kwargs) == expected


def test_budget_steps_are_signed_and_grid_positions_tie_to_the_smaller_budget():
    assert scorecard.budget_steps(25, 20, grid=SST_GRID) == 1
    assert scorecard.budget_steps(13, 20, grid=SST_GRID) == -2
    assert scorecard.grid_position(np.sqrt(20 * 25), SST_GRID) == SST_GRID.index(20)   # the geometric midpoint
    assert scorecard.grid_position(1000, SST_GRID) == len(SST_GRID) - 1


# --- the rules: counts, bounds, at the ceiling ------------------------------------------------

def test_counts_reproduce_only_when_equal():
    assert scorecard.count_verdict([67, 19, 0], [67, 19, 0]) == "reproduced"
    assert scorecard.count_verdict([66, 19, 0], [67, 19, 0]) == "not reproduced"
    assert scorecard.count_verdict([], []) == "not testable here"


def test_bound_rule_at_the_printed_precision():
    assert scorecard.bound_verdict([0.99, 0.966], bound=0.97, decimals=2) == "reproduced"   # prints as 0.97
    assert scorecard.bound_verdict([0.99, 0.963], bound=0.97, decimals=2) == "close"        # prints as 0.96
    assert scorecard.bound_verdict([0.99, 0.99, 0.90], bound=0.97, decimals=2) == "partly"
    assert scorecard.bound_verdict([0.90, 0.91, 0.99], bound=0.97, decimals=2) == "not reproduced"
    assert scorecard.bound_verdict([0.044, 0.01], bound=0.04, above=False, decimals=2) == "reproduced"
    assert scorecard.bound_verdict([0.963], bound=0.97) == "not reproduced"     # exact: no close


def test_at_ceiling_includes_the_ceiling_itself():
    assert scorecard.at_ceiling([0.949, 0.95, 1.0]).tolist() == [False, True, True]


def test_every_verdict_rule_is_stated_on_the_page():
    assert "close" in scorecard.VERDICTS and "paper" in scorecard.KINDS
    for rule in ("value", "budget", "count", "bound", "direction", "match", "correlation", "construction"):
        assert rule in scorecard.RULES
    assert "0.02" in scorecard.RULES["value"] and "grid step" in scorecard.RULES["budget"]
