"""Table 2 like for like: intervals of the mean, agreement at given budgets, paired differences,
censored crossings, and the scorecard's verdict rules (irtlib.protocol.agreement, irtbook.scorecard)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from irtbook import scorecard as sc
from irtlib.protocol.agreement import agreement_at, agreement_curves, paired_difference, summarise_table2


def _results(values: dict) -> pd.DataFrame:
    """Hand-made protocol results: method -> k -> list of per-split agreements."""
    rows = [(s, m, k, v) for m, by_k in values.items() for k, vs in by_k.items() for s, v in enumerate(vs)]
    return pd.DataFrame(rows, columns=["split", "method", "k", "agreement"])


def test_confidence_interval_of_the_mean_is_students_t():
    vals = list(np.random.default_rng(0).uniform(0.5, 1.0, 30))
    curve = agreement_curves(_results({"fluid": {5: vals}})).iloc[0]
    lo, hi = stats.t.interval(0.95, len(vals) - 1, loc=np.mean(vals), scale=stats.sem(vals))
    assert curve["ci_lo"] == pytest.approx(lo) and curve["ci_hi"] == pytest.approx(hi)
    # the interval of the mean is narrower than the spread of single splits
    assert curve["lo"] < curve["ci_lo"] < curve["mean"] < curve["ci_hi"] < curve["hi"]


def test_undefined_splits_are_counted_and_enter_the_mean_as_zero():
    curve = agreement_curves(_results({"fluid": {5: [0.8, np.nan, 0.6]}})).iloc[0]
    assert curve["n_undefined"] == 1 and curve["mean"] == pytest.approx(1.4 / 3)


def test_agreement_at_the_papers_budget_and_a_budget_never_swept():
    res = _results({"fluid": {5: [0.8, 0.9], 10: [0.9, 1.0]}, "random": {5: [0.5, 0.7], 10: [0.8, 0.8]}})
    at = agreement_at(res, 10).set_index("method")
    assert at.loc["fluid", "mean"] == pytest.approx(0.95) and at.loc["random", "mean"] == pytest.approx(0.8)
    stacked = pd.concat([res.assign(benchmark="x"), res.assign(benchmark="y")])
    two = agreement_at(stacked, {"x": 5, "y": 10}, methods=["fluid"])
    assert two.set_index("benchmark")["mean"].to_dict() == pytest.approx({"x": 0.85, "y": 0.95})
    with pytest.raises(ValueError, match=r"k = 7 was not swept for benchmark 'x' \(nearest swept: \[5, 10\]\)"):
        agreement_at(stacked, {"x": 7})


def test_paired_difference_matches_a_one_sample_t_interval():
    fluid = [0.9, 0.8, 0.95, 0.7, 0.85]
    random = [0.6, 0.8, 0.7, 0.75, 0.5]
    d = np.subtract(fluid, random)
    out = paired_difference(_results({"fluid": {20: fluid}, "random": {20: random}}), k=20, method="fluid",
                            baseline="random")
    lo, hi = stats.t.interval(0.95, d.size - 1, loc=d.mean(), scale=stats.sem(d))
    assert out["mean"] == pytest.approx(d.mean()) and out["ci_lo"] == pytest.approx(lo)
    assert out["ci_hi"] == pytest.approx(hi) and out["share_ahead"] == pytest.approx(0.6)
    with pytest.raises(ValueError, match="'disco' has no results at k = 20"):
        paired_difference(_results({"fluid": {20: fluid}}), k=20, method="fluid", baseline="disco")


def test_censored_crossings_are_flagged():
    res = _results({"fluid": {1: [0.5, 0.5], 10: [0.7, 0.8]}, "random": {1: [0.3, 0.4], 10: [0.5, 0.6]}})
    table = summarise_table2(res, n_items=100)
    assert table.groupby("column")["censored"].all().to_dict() == {"left": True, "right": True}
    res = _results({"fluid": {1: [0.5, 0.5], 10: [0.9, 0.95]}, "random": {1: [0.3, 0.4], 10: [0.95, 0.99]}})
    table = summarise_table2(res, n_items=100)
    assert not table["censored"].any()


@pytest.mark.parametrize("mean, lo, hi, expected", [
    (0.10, 0.05, 0.15, "reproduced"), (0.02, -0.01, 0.05, "partly"),
    (-0.02, -0.05, 0.01, "not reproduced"), (-0.10, -0.15, -0.05, "reversed"),
    (np.nan, np.nan, np.nan, "not testable here")])
def test_direction_rule(mean, lo, hi, expected):
    assert sc.direction_verdict(mean, lo, hi) == expected


@pytest.mark.parametrize("mean, lo, hi, expected", [
    (0.01, -0.02, 0.025, "reproduced"), (0.01, -0.02, 0.04, "close"), (0.05, 0.01, 0.09, "not reproduced")])
def test_match_rule_needs_the_whole_interval_inside_the_tolerance(mean, lo, hi, expected):
    assert sc.match_verdict(mean, lo, hi) == expected


def test_bound_correlation_rules():
    assert sc.bound_verdict({"a": 0.98, "b": 0.99}, bound=0.97) == "reproduced"
    assert sc.bound_verdict([0.98, 0.96], bound=0.97) == "partly"
    assert sc.bound_verdict([0.98, 0.96, 0.95], bound=0.97) == "not reproduced"
    assert sc.bound_verdict([0.01, 0.05], bound=0.04, above=False) == "partly"
    assert [sc.correlation_verdict(r) for r in (0.8, 0.3, -0.3, -0.8)] == \
        ["reproduced", "partly", "not reproduced", "reversed"]


def test_claims_accept_only_the_allowed_verdicts_and_rules():
    ok = sc.Claim("c", "Figure 2", "simulated release", "0.99", "{ref}`ch-fit`", "reproduced", "bound")
    assert sc.scorecard_frame([ok])["verdict"].tolist() == ["reproduced"]
    with pytest.raises(ValueError, match="verdict 'confirmed'"):
        sc.Claim("c", "Figure 2", "sim", "0.99", "", "confirmed", "bound")
    with pytest.raises(ValueError, match="rule 'vibes'"):
        sc.Claim("c", "Figure 2", "sim", "0.99", "", "reproduced", "vibes")


def _bench_results(bench, k_values):
    """Protocol-like results for one benchmark: every method at the given k, two splits."""
    from irtlib.protocol.agreement import METHODS
    rows = [(s, m, k, v + 0.01 * s) for k, v in k_values.items() for m in METHODS for s in range(2)]
    return pd.DataFrame(rows, columns=["split", "method", "k", "agreement"]).assign(benchmark=bench)


def test_at_paper_budgets_reads_the_papers_k_and_judges_by_the_value_rule():
    from irtbook import table2
    from irtlib.datasets import paper

    res = {"harmbench": _bench_results("harmbench", {9: 0.6, 17: 0.9, 30: 0.95})}
    long = table2.at_paper_budgets(res)
    left = long[long["column"] == "left"].set_index("method")
    assert (left["k"] == paper.TABLE2_LEFT["harmbench"].k).all()          # 17, swept
    assert left.loc["fluid", "mean"] == pytest.approx(0.905)
    assert left.loc["fluid", "paper"] == paper.TABLE2_LEFT["harmbench"].fluid
    # ours 0.905 prints as 0.91, not the paper's 0.90: close, whatever the interval's width
    assert left.loc["fluid", "verdict"] == "close"
    assert left.loc["random", "verdict"] == "close"            # 0.905 against 0.92
    assert "within" not in long.columns
    right = long[long["column"] == "right"]
    assert (right["k"] == 9).all()                                           # the paper's right k for HarmBench


def test_compact_layouts_and_budget_comparison():
    from irtbook import table2

    res = {"harmbench": _bench_results("harmbench", {9: 0.6, 17: 0.9, 30: 0.95}),
           "simplesafetytests": _bench_results("simplesafetytests", {20: 0.8, 63: 0.85})}
    long = table2.at_paper_budgets(res)
    wide = table2.compact(long, column="left", methods=["fluid", "random"], labels={"fluid": "Fluid"})
    assert list(wide.index) == ["harmbench", "simplesafetytests"]
    assert wide.loc["harmbench", ("", "k")] == "17" and wide.loc["harmbench", ("Fluid", "ours")] == pytest.approx(0.905)
    tall = table2.compact(long, column="right", methods=["fluid", "anchor-points", "disco"], layout="long")
    assert tall[["benchmark", "method"]].values.tolist() == [
        ["simplesafetytests", "fluid"], ["simplesafetytests", "anchor-points"], ["simplesafetytests", "disco"]]
    with pytest.raises(ValueError, match="layout"):
        table2.compact(long, column="left", methods=["fluid"], layout="diagonal")
    assert table2.format_budget(3431, at_least=True) == "> 3,431" and table2.format_budget(None) == "-"
    summary = summarise_table2(pd.concat(res.values()), {"harmbench": 400, "simplesafetytests": 100})
    grids = {"harmbench": [1, 2, 3, 5, 9, 17, 30], "simplesafetytests": [1, 5, 20, 40, 63]}
    budgets = table2.budget_comparison(summary, grids=grids)
    # HarmBench: Fluid first reaches 0.90 at k = 17 (the paper's 17): reproduced
    assert budgets.loc["harmbench", "left k (ours)"] == "17"
    assert budgets.loc["harmbench", "left verdict"] == "reproduced"
    assert budgets.loc["harmbench", "left steps"] == "+0"
    # SimpleSafetyTests: never reaches 0.90 within the sweep up to 63: censored, "> 63", not reproduced
    assert budgets.loc["simplesafetytests", "left k (ours)"] == "> 63"
    assert budgets.loc["simplesafetytests", "left verdict"] == "not reproduced"
    assert budgets.loc["simplesafetytests", "left steps"] == ""


# --- irtbook.table2: the two readings, the bootstrap of a budget, the shift ------------------

def test_first_reach_under_both_readings():
    from irtbook import table2 as t2

    assert t2.first_reach([5, 6, 8], [0.85, 0.897, 0.91]) == {"rounded": 6, "unrounded": 8}
    assert t2.first_reach([5, 6], [0.895, 0.90]) == {"rounded": 5, "unrounded": 6}     # 0.895 prints as 0.90
    assert t2.first_reach([5, 6], [0.8949, 0.90]) == {"rounded": 6, "unrounded": 6}
    assert t2.first_reach([5, 6], [0.5, np.nan]) == {"rounded": None, "unrounded": None}


def test_reading_fit_counts_budgets_on_the_papers_grid_point():
    from irtbook import table2 as t2

    grid = [1, 2, 3, 4, 5, 6, 8, 10, 13, 16, 20, 25, 31, 40, 50, 63, 79]
    # SimpleSafetyTests' paper k is 20; HarmBench's 17 (not on this hand-made grid: nearest 16)
    reach = pd.DataFrame({"rounded": [20, 16], "unrounded": [25, 16], "k_max": [79, 79]},
                         index=["simplesafetytests", "harmbench"], dtype=object)
    fit = t2.reading_fit(reach, grids={"simplesafetytests": grid, "harmbench": grid})
    assert fit == {"rounded": 2, "unrounded": 1, "n": 2, "fits": "rounded"}
    reach.loc["simplesafetytests", "unrounded"] = 20
    assert t2.reading_fit(reach, grids={"simplesafetytests": grid, "harmbench": grid})["fits"] == "both equally"


def test_bootstrap_budget_is_seeded_and_reads_budgets_off_resampled_mean_curves():
    from irtbook import table2 as t2

    # every split reaches 0.90 at k = 10: the budget cannot move
    steady = _results({"fluid": {5: [0.8] * 6, 10: [0.95] * 6, 20: [0.97] * 6}})
    out = t2.bootstrap_budget(steady, n_boot=200, seed=1)
    assert (out["lo"], out["hi"], out["share_censored"]) == (10.0, 10.0, 0.0)
    assert out["counts"].to_dict() == {10.0: 1.0}
    # split 0 alone reaches 0.90 at k = 5 and drags the mean there only when drawn often enough
    noisy = _results({"fluid": {5: [1.0, 0.86, 0.86, 0.86], 10: [1.0, 0.95, 0.95, 0.95]}})
    a, b = (t2.bootstrap_budget(noisy, n_boot=500, seed=7) for _ in range(2))
    assert a["counts"].equals(b["counts"])                                  # seeded: the same samples
    assert set(a["counts"].index) == {5.0, 10.0} and (a["lo"], a["hi"]) == (5.0, 10.0)
    # the mean of split 0 and three others: 0.895 < 0.90, so k = 5 needs split 0 at least twice
    p_five = 1 - stats.binom.cdf(1, 4, 0.25)
    assert a["counts"][5.0] == pytest.approx(p_five, abs=0.06)
    never = _results({"fluid": {5: [0.5, 0.6], 10: [0.7, 0.8]}})
    out = t2.bootstrap_budget(never, n_boot=50)
    assert out["share_censored"] == 1.0 and np.isinf(out["hi"])


def test_bootstrap_budget_right_column_follows_table2s_rule():
    from irtbook import table2 as t2

    # Fluid leads at k = 1 and 2, Random catches up at k = 4 in every split: the budget is 2
    res = _results({"fluid": {1: [0.5] * 3, 2: [0.7] * 3, 4: [0.8] * 3},
                    "random": {1: [0.3] * 3, 2: [0.6] * 3, 4: [0.85] * 3}})
    out = t2.bootstrap_budget(res, column="right", n_boot=20)
    assert (out["lo"], out["hi"], out["share_none"]) == (2.0, 2.0, 0.0)
    assert summarise_table2(res, n_items=10).query("column == 'right'")["k"].iloc[0] == 2


def test_budget_shift_flags_budgets_off_in_one_direction():
    from irtbook import table2 as t2

    late = t2.budget_shift([1, 1, 1, 1, 0])
    assert (late["later"], late["earlier"], late["same"], late["one_sided"]) == (4, 0, 1, True)
    assert late["p_sign"] == pytest.approx(0.125)
    assert not t2.budget_shift([1, -1, 0])["one_sided"] and not t2.budget_shift([1, 0])["one_sided"]


def test_at_paper_budgets_carries_the_value_rules_verdict():
    from irtbook import table2 as t2

    res = _results({"fluid": {51: [0.90, 0.92]}, "random": {51: [0.77, 0.78]}, "random-irt": {51: [0.70, 0.70]},
                    "total-fisher": {51: [0.68, 0.68]}, "marginal-fisher": {260: [0.5, 0.5]}})
    res = pd.concat([res, _results({m: {260: [0.5, 0.5]} for m in ("fluid", "random", "random-irt",
                                                                     "total-fisher")})])
    long = t2.at_paper_budgets({"anthropic-red-team": res}).set_index(["column", "method"])
    assert long.loc[("left", "fluid"), "verdict"] == "reproduced"          # 0.91 = paper's 0.91
    assert long.loc[("left", "random"), "verdict"] == "reproduced"         # 0.775 prints as 0.78
    assert long.loc[("left", "random-irt"), "verdict"] == "not reproduced"  # 0.70 for 0.79
    assert long.loc[("left", "total-fisher"), "verdict"] == "reproduced"


def test_bootstrap_budgets_of_all_samples_at_once_equal_one_sample_at_a_time():
    import warnings

    from irtbook import table2 as t2

    rng = np.random.default_rng(26)
    for trial in range(300):
        n, n_k, n_methods = int(rng.integers(1, 120)), int(rng.integers(1, 20)), 1 + trial % 2
        ks = np.sort(rng.choice(np.arange(1, 400), n_k, replace=False))
        cube = (np.round(rng.uniform(0.5, 1.0, (n, n_methods, n_k)), 1) if trial % 3 == 0
                else rng.uniform(-1, 1, (n, n_methods, n_k)))
        cube[rng.random(cube.shape) < rng.random() * 0.6] = np.nan     # undefined agreements, whole samples too
        policy = "omit" if trial % 4 else "zero"
        if policy == "zero":
            cube = np.nan_to_num(cube, nan=0.0)
        draws = rng.integers(0, n, size=(int(rng.integers(1, 200)), n))
        for column in ("left", "right")[:n_methods]:
            threshold = float(rng.choice([0.0, 0.5, 0.9]))
            new = t2._bootstrap_budgets(ks, cube, draws, column=column, threshold=threshold, policy=policy)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                old = t2._bootstrap_budgets_loop(ks, cube, draws, column=column, threshold=threshold, policy=policy)
            assert new.tobytes() == old.tobytes(), (trial, column)


def test_bootstrap_budget_warns_nothing_when_a_sample_has_no_defined_split():
    import warnings

    from irtbook import table2 as t2

    res = _results({"fluid": {5: [np.nan, 0.95], 10: [np.nan, 0.97]}})
    res.attrs["nan_policy"] = "omit"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = t2.bootstrap_budget(res, n_boot=50, seed=0)
    assert out["share_censored"] > 0 and out["counts"].index.tolist() == [5.0, np.inf]


def test_at_paper_budgets_with_one_curve_per_benchmark_equals_agreement_at_per_value():
    from irtbook import table2 as t2

    rng = np.random.default_rng(5)
    bench = "anthropic-red-team"
    ks = sorted({v["k_paper"] for v in t2.paper_values(bench)} | {3, 7})
    res = pd.DataFrame([(s, m, k, rng.uniform(0, 1)) for s in range(5) for m in ("fluid", "random", "random-irt",
                        "anchor-points", "tinybenchmarks") for k in ks], columns=["split", "method", "k", "agreement"])
    long = t2.at_paper_budgets({bench: res})
    assert len(long) == len([v for v in t2.paper_values(bench) if v["method"] in set(res["method"])])
    for r in long.itertuples():
        at = agreement_at(res, r.k, methods=[r.method]).iloc[0]
        assert (r.mean, r.ci_lo, r.ci_hi, r.sd, r.lo, r.hi) == tuple(at[c] for c in ("mean", "ci_lo", "ci_hi", "sd",
                                                                                        "lo", "hi"))
