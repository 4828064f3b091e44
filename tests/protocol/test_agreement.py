"""The agreement protocol (irtlib.protocol.agreement): splits, leakage, parallelism, Table 2, the CV story."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from irtlib.core.responses import ResponseMatrix
from irtlib.protocol import agreement
from irtlib.protocol.agreement import (
    METHODS,
    agreement_at,
    agreement_curves,
    budget_grid,
    calibrate_split,
    run_protocol,
    run_splits,
    spearman,
    split_models,
    static_selections,
    summarise_table2,
)


def simulate(n_models, n_items, *, cv, seed, mean_a=1.0):
    """2PL responses whose discriminations have mean ``mean_a`` and coefficient of variation ``cv``
    (lognormal; all equal for cv = 0), b and theta standard normal."""
    rng = np.random.default_rng(seed)
    if cv > 0:
        sigma = np.sqrt(np.log1p(cv ** 2))
        a = mean_a * np.exp(rng.normal(-sigma ** 2 / 2, sigma, n_items))
    else:
        a = np.full(n_items, mean_a)
    b = rng.normal(size=n_items)
    theta = rng.normal(size=n_models)
    p = 1.0 / (1.0 + np.exp(-a * (theta[:, None] - b)))
    x = (rng.random(p.shape) < p).astype(float)
    return ResponseMatrix(x, [f"m{i}" for i in range(n_models)], [f"i{j}" for j in range(n_items)],
                          source=f"sim cv={cv}")


@pytest.fixture(scope="module")
def small():
    return simulate(30, 160, cv=0.9, seed=11)


# ---------------------------------------------------------------------------- pieces
def test_spearman_equals_scipy():
    rng = np.random.default_rng(0)
    for _ in range(50):
        x = rng.integers(0, 4, size=10).astype(float)          # plenty of ties
        y = rng.normal(size=10)
        assert spearman(x, y) == pytest.approx(spearmanr(x, y).statistic, abs=1e-12)
    rows = rng.normal(size=(6, 10))
    np.testing.assert_allclose(spearman(rows, y), [spearmanr(r, y).statistic for r in rows], atol=1e-12)
    assert np.isnan(spearman(np.ones(10), y))                   # constant scores: undefined
    assert np.isnan(spearman(np.r_[np.nan, np.ones(9)], y))


def test_budget_grid_is_log_spaced_and_covers_the_papers_budgets():
    grid = budget_grid(11435)
    assert grid[0] == 1 and grid == sorted(set(grid)) and grid[-1] == 3431
    ratios = np.diff(np.log(grid))[-10:]
    np.testing.assert_allclose(ratios, ratios.mean(), rtol=0.05)                 # geometric
    # the paper's largest reported budgets: SafetyBench ~3,000, Anthropic 260, WMDP 234,
    # SimpleSafetyTests 63, AIR-Bench 38, HarmBench 17
    for n, k in ((11435, 3000), (1000, 260), (1273, 234), (100, 63), (5694, 38), (400, 17)):
        assert budget_grid(n)[-1] >= k
    assert budget_grid(100)[-1] == 100 and budget_grid(50, max_k=20)[-1] == 20
    with pytest.raises(ValueError):
        budget_grid(10, max_k=11)


def test_splits_are_seeded_and_disjoint():
    train, test = split_models(30, 10, 0, 3)
    assert test.size == 10 and train.size == 20 and not set(train) & set(test)
    np.testing.assert_array_equal(split_models(30, 10, 0, 3)[1], test)           # same seed
    assert not np.array_equal(split_models(30, 10, 1, 3)[1], test)               # other seed
    assert not np.array_equal(split_models(30, 10, 0, 4)[1], test)               # other split
    # split i is the i-th child of SeedSequence(seed).spawn(n_splits)
    child = np.random.SeedSequence(0).spawn(5)[3]
    expected = np.sort(np.random.default_rng(np.random.SeedSequence(child.entropy, spawn_key=child.spawn_key + (0,)))
                       .choice(30, size=10, replace=False))
    np.testing.assert_array_equal(test, expected)


# ---------------------------------------------------------------------------- leakage
def test_test_responses_never_reach_calibration_or_static_selection(small, monkeypatch):
    # Record what calibration and static selection see while the protocol runs, then run it
    # again with the split's test rows replaced by random responses (and, third, by missing
    # ones): item parameters, training abilities and every static subset must be identical.
    values = small.values
    train, test = split_models(values.shape[0], 10, 5, 0)
    seen = []
    real_calibrate, real_static = agreement.calibrate_splits, agreement.static_selections

    def spy_calibrate(x, rows, **kw):     # every split's calibration, in one call
        out = real_calibrate(x, rows, **kw)
        seen.append(("calibration", [v for fit in out for v in fit]))
        return out

    def spy_static(x, a, b, theta, ks, **kw):
        out = real_static(x, a, b, theta, ks, **kw)
        seen.append(("static", {m: {k: (s.items.tolist(), None if s.weights is None else s.weights.tolist())
                                    for k, s in d.items()} for m, d in out.items()}))
        return out

    monkeypatch.setattr(agreement, "calibrate_splits", spy_calibrate)
    monkeypatch.setattr(agreement, "static_selections", spy_static)
    rng = np.random.default_rng(1)
    poisoned_random = values.copy()
    poisoned_random[test] = (rng.random((10, values.shape[1])) < 0.5).astype(float)
    poisoned_nan = values.copy()
    poisoned_nan[test, 1:] = np.nan
    runs = []
    for x in (values, poisoned_random, poisoned_nan):
        seen.clear()
        m = ResponseMatrix(x, small.models, small.items)
        res = run_protocol(m, n_splits=1, seed=5, ks=[1, 5, 20, 60], variance_threshold=None)
        runs.append((list(seen), res))
    (cal0, sub0), (cal1, sub1), (cal2, sub2) = [(r[0][0][1], r[0][1][1]) for r in runs]
    for cal in (cal1, cal2):
        for got, want in zip(cal, cal0, strict=False):
            np.testing.assert_array_equal(got, want)
    assert sub1 == sub0 and sub2 == sub0
    # ... while the test models' scores did change
    assert not runs[1][1]["agreement"].equals(runs[0][1]["agreement"])


def test_calibration_uses_training_abilities_from_map_on_all_items(small):
    x = small.values[:20]
    a, b, theta = calibrate_split(x)
    from irtlib.core.ability import map_ability
    np.testing.assert_allclose(theta, map_ability(x, a, b).theta)
    subsets = static_selections(x, a, b, theta, [3, 10], methods=("disco", "marginal-fisher"))
    assert set(subsets) == {"disco", "marginal-fisher"}
    np.testing.assert_array_equal(subsets["disco"][10].items[:3], subsets["disco"][3].items)


# ---------------------------------------------------------------------------- protocol runs
def test_protocol_table_shape_and_reproducibility(small):
    ks = [1, 3, 10, 40]
    res = run_protocol(small, n_splits=3, ks=ks, seed=2)
    assert list(res.columns) == ["split", "method", "k", "agreement"]
    assert len(res) == 3 * len(METHODS) * len(ks)
    assert res.groupby(["split", "method", "k"]).size().eq(1).all()
    assert set(res["method"]) == set(METHODS)
    assert res["agreement"].dropna().between(-1, 1).all()
    assert res.attrs["n_items"] == 160 and res.attrs["ks"] == ks
    again = run_protocol(small, n_splits=3, ks=ks, seed=2)
    pd.testing.assert_frame_equal(res, again)                                   # same seed
    other = run_protocol(small, n_splits=3, ks=ks, seed=3)
    assert not res["agreement"].equals(other["agreement"])                      # other splits
    one = run_protocol(small, methods=["fluid", "disco"], n_splits=2, ks=ks, seed=2)
    assert set(one["method"]) == {"fluid", "disco"}
    keep = (res["split"] < 2) & res["method"].isin(["fluid", "disco"])
    pd.testing.assert_frame_equal(one, res[keep].reset_index(drop=True))        # methods independent
    with pytest.raises(ValueError, match="unknown method"):
        run_protocol(small, methods=["fluid", "oracle"], n_splits=1)


def test_results_do_not_depend_on_n_jobs_or_batching(small):
    ks = [2, 8, 30]
    serial = run_protocol(small, n_splits=4, ks=ks, seed=4, n_jobs=1, split_batch=4)
    pd.testing.assert_frame_equal(serial, run_protocol(small, n_splits=4, ks=ks, seed=4, n_jobs=2, split_batch=1))
    pd.testing.assert_frame_equal(serial, run_protocol(small, n_splits=4, ks=ks, seed=4, n_jobs=2, split_batch=3))


def test_dask_cluster_gives_identical_results(small):
    distributed = pytest.importorskip("distributed")
    import joblib

    ks = [2, 10, 40]
    serial = run_protocol(small, n_splits=2, ks=ks, seed=6, n_jobs=1)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster):
        with joblib.parallel_config(backend="dask"):
            on_dask = run_protocol(small, n_splits=2, ks=ks, seed=6, n_jobs=2, split_batch=1)
    pd.testing.assert_frame_equal(serial, on_dask)


def test_progress_bar_only_when_asked(small, capsys):
    run_protocol(small, methods=["random"], n_splits=2, ks=[5], progress=False)
    assert capsys.readouterr().err == ""
    run_protocol(small, methods=["random"], n_splits=2, ks=[5], progress=None)   # stderr is not a tty
    assert capsys.readouterr().err == ""
    run_protocol(small, methods=["random"], n_splits=2, ks=[5], progress=True)
    assert "2/2" in capsys.readouterr().err


def test_run_splits_reports_stage_times(small):
    out = run_splits(small.values, small.safety_scores().to_numpy(), [0, 1], ks=[3, 9])
    assert set(out["tests"]) == {0, 1}
    assert {"calibration", "static selection", "fluid", "total"} <= set(out["seconds"])


# ---------------------------------------------------------------------------- Table 2
def _fake_results(curves: dict, n_splits=4, noise=0.0):
    """Protocol-shaped results whose per-split values spread symmetrically around ``curves``."""
    rows = []
    for method, values in curves.items():
        for k, v in values.items():
            for s in range(n_splits):
                rows.append((s, method, k, v + noise * (s - (n_splits - 1) / 2)))
    return pd.DataFrame(rows, columns=["split", "method", "k", "agreement"])


def test_table2_left_and_right_columns():
    ks = [1, 2, 4, 8, 16, 32]
    res = _fake_results({"fluid": dict(zip(ks, [0.5, 0.8, 0.91, 0.93, 0.95, 0.96], strict=False)),
                         "random": dict(zip(ks, [0.6, 0.7, 0.8, 0.92, 0.96, 0.97], strict=False)),
                         "random-irt": dict(zip(ks, [0.6, 0.7, 0.8, 0.9, 0.95, 0.96], strict=False))}, noise=0.02)
    table = summarise_table2(res, n_items=1000)
    left = table[table["column"] == "left"].set_index("method")
    right = table[table["column"] == "right"].set_index("method")
    # left: Fluid first reaches 0.90 at k = 4
    assert (left["k"] == 4).all() and left.loc["fluid", "mean"] == pytest.approx(0.91)
    assert left.loc["random", "mean"] == pytest.approx(0.80)
    assert left["k_over_n"].iloc[0] == 0.004 and left["saving"].iloc[0] == pytest.approx(0.996)
    # right: Fluid leads from k = 2 (0.8 > 0.7); Random catches up at k = 16 -> k = 8
    assert (right["k"] == 8).all() and (right["status"] == "caught up").all()
    # spread over splits: SD and the 95% interval of the per-split values
    sd = np.std([0.93 + 0.02 * (s - 1.5) for s in range(4)], ddof=1)
    assert right.loc["fluid", "sd"] == pytest.approx(sd)
    assert right.loc["fluid", "lo"] < 0.93 < right.loc["fluid", "hi"]


def test_table2_when_fluid_never_reaches_090_and_random_never_catches_up():
    ks = [1, 10, 100]
    res = _fake_results({"fluid": dict(zip(ks, [0.5, 0.7, 0.85], strict=True)),
                         "random": dict(zip(ks, [0.3, 0.5, 0.8], strict=True))})
    table = summarise_table2(res, n_items=200)
    left = table[table["column"] == "left"]
    assert (left["k"] == 100).all() and (left["status"] == "not reached").all()
    right = table[table["column"] == "right"]
    assert (right["k"] == 100).all() and (right["status"] == "not caught up within the sweep").all()
    # Random ahead from the start: no right column
    res = _fake_results({"fluid": dict(zip(ks, [0.3, 0.9, 0.95], strict=True)),
                         "random": dict(zip(ks, [0.5, 0.95, 0.97], strict=True))})
    assert set(summarise_table2(res, n_items=200)["column"]) == {"left"}


def test_undefined_agreement_counts_as_zero_by_default():
    res = pd.DataFrame({"split": [0, 1, 2, 3], "method": "fluid", "k": 1, "agreement": [0.9, np.nan, 0.8, 0.7]})
    zero = agreement_curves(res).iloc[0]
    omit = agreement_curves(res, nan_policy="omit").iloc[0]
    assert zero["mean"] == pytest.approx(0.6) and omit["mean"] == pytest.approx(0.8)
    assert zero["n_undefined"] == 1 and zero["n_splits"] == 4



def test_curve_spread_is_each_groups_percentiles_of_its_defined_splits():
    # groups interleaved and out of order; one group all undefined, one with a single defined split
    res = pd.DataFrame({"split": [0, 0, 1, 1, 2, 2, 3, 0, 1], "method": ["b", "a", "a", "b", "b", "a", "a", "c", "c"],
                        "k": 5, "agreement": [0.1, 0.9, np.nan, 0.4, -0.2, 0.3, 0.5, np.nan, np.nan]})
    for policy, fill in (("omit", None), ("zero", 0.0)):
        curves = agreement_curves(res, nan_policy=policy, level=0.9).set_index("method")
        assert list(curves.index) == ["b", "a", "c"]          # the order the methods first appear in
        for method, group in res.groupby("method"):
            v = group["agreement"].to_numpy()
            v = v[~np.isnan(v)] if fill is None else np.nan_to_num(v, nan=fill)
            lo, hi = (np.percentile(v, [5.0, 95.0]) if v.size else (np.nan, np.nan))
            got = curves.loc[method]
            assert (got["lo"], got["hi"]) == pytest.approx((lo, hi), nan_ok=True, rel=0, abs=1e-15)
        assert curves.loc["a", "n_splits"] == 4 and curves.loc["c", "n_undefined"] == 2
    assert np.isnan(agreement_curves(res, nan_policy="omit").set_index("method").loc["c", "lo"])


# ---------------------------------------------------------------------------- the CV story
def _first_k(curves, method, level=0.90):
    hit = curves.index[curves[method] >= level]
    return int(hit[0]) if len(hit) else None


def test_cv_story_fluid_gains_with_discrimination_spread():
    # Same protocol, two simulated benchmarks of 60 models x 800 items whose discriminations
    # have mean 1: lognormal with CV 1.5, and all equal (CV 0). Measured (20 splits, seed 0):
    #   CV 1.5: Fluid reaches 0.90 mean agreement at k = 2, Random at k = 61 (Random IRT 39);
    #           at k = 10 Fluid 0.963, Random 0.701.
    #   CV 0:   Fluid at k = 77, Random at k = 77 (Random IRT 77); at k = 10 0.616 vs 0.619.
    found = {}
    for cv in (1.5, 0.0):
        res = run_protocol(simulate(60, 800, cv=cv, seed=0), methods=["fluid", "random"], n_splits=20, seed=0)
        curves = agreement_curves(res).pivot(index="k", columns="method", values="mean")
        found[cv] = (_first_k(curves, "fluid"), _first_k(curves, "random"),
                     curves.loc[10, "fluid"] - curves.loc[10, "random"])
    fluid_k, random_k, gap10 = found[1.5]
    assert fluid_k <= 5 and random_k >= 30 and gap10 > 0.15
    fluid_k, random_k, gap10 = found[0.0]
    assert fluid_k >= 0.5 * random_k and abs(gap10) < 0.1


def test_table2_over_several_benchmarks_at_once():
    """Stacked results with a benchmark column: each benchmark's rows are its own Table 2."""
    ks = [1, 2, 4, 8, 16, 32]
    one = _fake_results({"fluid": dict(zip(ks, [0.5, 0.8, 0.91, 0.93, 0.95, 0.96], strict=False)),
                         "random": dict(zip(ks, [0.6, 0.7, 0.8, 0.92, 0.96, 0.97], strict=False))}, noise=0.02)
    two = _fake_results({"fluid": dict(zip(ks, [0.3, 0.5, 0.6, 0.7, 0.8, 0.85], strict=False)),
                         "random": dict(zip(ks, [0.2, 0.3, 0.4, 0.5, 0.6, 0.7], strict=False))}, noise=0.01)
    both = pd.concat([one.assign(benchmark="first"), two.assign(benchmark="second")], ignore_index=True)
    table = summarise_table2(both, n_items={"first": 1000, "second": 200})
    assert list(dict.fromkeys(table["benchmark"])) == ["first", "second"]
    for name, res, n in (("first", one, 1000), ("second", two, 200)):
        alone = summarise_table2(res, n_items=n)
        mine = table[table["benchmark"] == name].drop(columns="benchmark").reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, alone)
    second = table[table["benchmark"] == "second"].set_index(["column", "method"])
    # never reaches 0.90: the largest k, censored; Random never catches up within the sweep
    assert second.loc[("left", "fluid"), "status"] == "not reached" and second.loc[("left", "fluid"), "k"] == 32
    assert second.loc[("right", "fluid"), "status"] == "not caught up within the sweep"
    assert second.loc[("left", "fluid"), "censored"] and second.loc[("left", "fluid"), "k_over_n"] == 32 / 200


def test_random_and_random_irt_together_equal_each_run_alone():
    """Random IRT replays Random's items in one run (one draw of the split's stream): the rows of each alone."""
    full = simulate(40, 120, cv=0.6, seed=11)
    x = full.values.copy()
    x[np.random.default_rng(2).random(x.shape) < 0.05] = np.nan               # models without some items
    m = ResponseMatrix(x, list(full.models), list(full.items), source="sim with gaps")
    kw = dict(ks=[3, 10, 30], n_splits=4, seed=5)
    both = run_protocol(m, methods=["random", "random-irt"], **kw)
    alone = pd.concat([run_protocol(m, methods=[method], **kw) for method in ("random", "random-irt")])
    order = {"random": 0, "random-irt": 1}
    alone = alone.sort_values(["split", "method", "k"], key=lambda s: s.map(order) if s.name == "method" else s,
                              kind="stable").reset_index(drop=True)
    assert both.equals(alone)
    assert both["agreement"].notna().all()


def test_authors_engine_gets_the_training_rows_stacked_as_its_batched_form_stacks_them(small, monkeypatch):
    """calibrate_splits gathers every split's training rows once for the authors' engine: the same stacked
    array, rows and seeds as _authors_batched on one block per split, so the same fits."""
    from irtlib.calibration import split_cache

    calls = []

    def fake(stacked, rows, *, seed, cache_dir):
        calls.append((np.array(stacked), [np.array(r) for r in rows], seed, cache_dir))
        return [(np.nanmean(stacked[r], axis=0) + 1.0 + seed, np.nansum(stacked[r], axis=0)) for r in rows]

    monkeypatch.setattr(split_cache, "fit_2pl_splits_cached", fake)
    x = small.values.copy()
    x[np.random.default_rng(1).random(x.shape) < 0.1] = np.nan
    rows = [split_models(x.shape[0], 5, 3, split)[0] for split in range(4)]
    seeds = [0, 7, 0, 7]
    got = agreement.calibrate_splits(x, rows, engine="pyirt-authors", seed=seeds, cache_dir="somewhere")
    new_calls, calls[:] = list(calls), []
    old = agreement._authors_batched([x[r] for r in rows], seeds, cache_dir="somewhere")
    for (sa, ra, da, ca), (sb, rb, db, cb) in zip(new_calls, calls, strict=True):
        assert np.array_equal(sa, sb, equal_nan=True) and sa.flags.c_contiguous and da == db and ca == cb
        assert all(np.array_equal(p, q) for p, q in zip(ra, rb, strict=True))
    for (a, b), (a0, b0), r in zip(got, old, rows, strict=True):
        seen = (~np.isnan(x[r])).any(axis=0)
        assert np.array_equal(a[seen], a0[seen]) and np.array_equal(b[seen], b0[seen])
        assert np.isnan(a[~seen]).all() and np.isnan(b[~seen]).all()


def test_the_authors_stored_fits_are_read_without_stacking_the_training_rows(small, tmp_path, monkeypatch):
    """Where every split's fit is in the cache, calibrate_splits reads the same fits without gathering the rows."""
    pytest.importorskip("torch")
    x = small.values[:, :15].copy()
    x[np.random.default_rng(2).random(x.shape) < 0.1] = np.nan
    rows = [split_models(x.shape[0], 5, 3, split)[0] for split in range(3)]
    first = agreement.calibrate_splits(x, rows, engine="pyirt-authors", seed=[0, 7, 0], cache_dir=tmp_path)

    def no_stack(*args, **kwargs):
        raise AssertionError("stacked and fitted although every split was stored")

    monkeypatch.setattr(agreement, "_authors_stacked", no_stack)
    again = agreement.calibrate_splits(x, rows, engine="pyirt-authors", seed=[0, 7, 0], cache_dir=tmp_path)
    for (a, b), (a0, b0) in zip(again, first, strict=True):
        assert np.array_equal(a, a0, equal_nan=True) and np.array_equal(b, b0, equal_nan=True)
    with pytest.raises(AssertionError, match="stacked"):           # another seed has no entries: fitted
        agreement.calibrate_splits(x, rows, engine="pyirt-authors", seed=1, cache_dir=tmp_path)


def test_mean_interval_halfwidth_uses_the_t_quantile_scipy_stats_gives():
    # the half-width's t quantile from scipy.special.stdtrit: the same values as scipy.stats.t.ppf, NaN below two
    from scipy import stats

    from irtlib.protocol.agreement import mean_interval_halfwidth

    n = np.concatenate([np.arange(-2, 250), [1e6, np.inf, np.nan]])
    sd = np.random.default_rng(2).uniform(0.0, 0.3, n.size)
    for level in (0.5, 0.9, 0.95, 0.99, 1e-9, 1 - 1e-12):
        with np.errstate(invalid="ignore", divide="ignore"):
            want = stats.t.ppf(0.5 + level / 2.0, np.where(n >= 2, n - 1, np.nan)) * sd / np.sqrt(n)
        got = mean_interval_halfwidth(sd, n, level=level)
        assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)
        one = mean_interval_halfwidth(0.2, 20, level=level)
        assert type(one) is np.float64 and one == stats.t.ppf(0.5 + level / 2.0, 19) * 0.2 / np.sqrt(20.0)
    assert np.isnan(mean_interval_halfwidth(0.2, 1))


def _hostile_values(rng, n, kind):
    """Agreements and worse: ties, signed zeros, infinities, tiny and huge magnitudes, NaN."""
    if kind == 0:
        v = rng.normal(size=n)
    elif kind == 1:
        v = rng.integers(-3, 4, n) / 3.0
    elif kind == 2:
        v = rng.choice([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 0.5], n)
    else:
        v = rng.normal(size=n) * 10.0 ** rng.integers(-300, 300, n)
    v[rng.random(n) < rng.random() * 0.5] = np.nan
    return v


def test_group_percentiles_equal_one_percentile_call_per_group_bit_for_bit():
    rng = np.random.default_rng(26)
    for trial in range(400):
        n_groups, n = int(rng.integers(1, 30)), int(rng.integers(0, 300))
        codes = rng.integers(0, n_groups, n)
        values = _hostile_values(rng, n, trial % 4)
        percents = np.array([2.5, 97.5]) if trial % 2 else rng.uniform(0, 100, int(rng.integers(1, 5)))
        with np.errstate(invalid="ignore"):
            new = agreement._group_percentiles(values, codes, n_groups, percents)
            old = agreement._group_percentiles_loop(values, codes, n_groups, percents)
        assert all(a.tobytes() == b.tobytes() for a, b in zip(new, old, strict=True)), trial


def test_group_percentiles_of_hand_made_groups():
    values = np.array([3.0, np.nan, 1.0, 2.0, 5.0, np.nan, 4.0])
    codes = np.array([0, 0, 0, 1, 1, 2, 0])
    lo, hi = agreement._group_percentiles(values, codes, 4, np.array([0.0, 100.0]))
    assert lo.tolist()[:2] == [1.0, 2.0] and hi.tolist()[:2] == [4.0, 5.0]
    assert np.isnan(lo[2:]).all() and np.isnan(hi[2:]).all()     # only NaN, and no value at all
    mid = agreement._group_percentiles(values, codes, 4, np.array([50.0]))[0]
    assert mid[:2].tolist() == [3.0, 3.5]


def test_agreement_at_with_its_curves_given_equals_computing_them():
    rng = np.random.default_rng(3)
    res = pd.DataFrame([(s, m, k, rng.uniform(-1, 1)) for s in range(4) for m in ("fluid", "random")
                        for k in (5, 10, 20)], columns=["split", "method", "k", "agreement"])
    curves = agreement_curves(res)
    pd.testing.assert_frame_equal(agreement_at(res, 10, methods=["fluid"], curves=curves),
                                  agreement_at(res, 10, methods=["fluid"]))


def _curves_with_pandas_clip(results, nan_policy, band, level=0.95, *, percentiles=None):
    """agreement_curves as it was: the bands cut by ``Series.clip``, the undefined splits by a groupby sum.

    ``percentiles``: the group percentiles' function (default the per-group loop, as it was);
    ``benchmarks/bench_qck_analysis.py`` passes the new one to time the finish alone.
    """
    percentiles = agreement._group_percentiles_loop if percentiles is None else percentiles
    keys = (["benchmark"] if "benchmark" in results.columns else []) + ["method", "k"]
    data = pd.DataFrame({key: results[key].to_numpy() for key in keys})
    data["value"] = agreement._nan_fill(results["agreement"], nan_policy).to_numpy()
    data["undefined"] = results["agreement"].isna().to_numpy()
    q = (1.0 - level) / 2.0
    g = data.groupby(keys, sort=False)
    out = g["value"].agg(mean="mean", sd="std")
    out["lo"], out["hi"] = percentiles(data["value"].to_numpy(float), g.ngroup().to_numpy(), len(out),
                                       np.array([q, 1.0 - q]) * 100.0)
    out["n"], out["n_splits"] = g["value"].count(), g.size()
    half = agreement.mean_interval_halfwidth(out["sd"].to_numpy(), out["n"].to_numpy(), level=level)
    out.insert(out.columns.get_loc("n"), "ci_lo", (out["mean"] - half).clip(-1.0, 1.0))
    out.insert(out.columns.get_loc("n"), "ci_hi", (out["mean"] + half).clip(-1.0, 1.0))
    out["n_undefined"] = g["undefined"].sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        out["se"] = out["sd"] / np.sqrt(out["n"].to_numpy(float))
    width = out["sd"] if band == "sd" else out["se"]
    out["band_lo"], out["band_hi"] = (out["mean"] - width).clip(-1.0, 1.0), (out["mean"] + width).clip(-1.0, 1.0)
    return out.drop(columns="n").reset_index()


def test_agreement_curves_equal_the_pandas_clip_and_groupby_forms_bit_for_bit():
    rng = np.random.default_rng(11)
    for trial in range(120):
        n_splits = int(rng.integers(1, 25))
        ks = sorted(rng.choice(np.arange(1, 300), int(rng.integers(1, 10)), replace=False).tolist())
        methods = ["fluid", "random", "random-irt"][:int(rng.integers(1, 4))]
        pick = [lambda: rng.uniform(-1.2, 1.2), lambda: np.nan, lambda: 1.0, lambda: -1.0, lambda: -0.0]
        rows = [(s, m, k, pick[int(rng.integers(0, 5))]() if trial % 2 else rng.uniform(-1.2, 1.2))
                for s in range(n_splits) for m in methods for k in ks]
        res = pd.DataFrame(rows, columns=["split", "method", "k", "agreement"])
        if trial % 3 == 0:                  # stacked benchmarks, the second in another row order
            res = pd.concat([res.assign(benchmark="a"), res.sample(frac=1, random_state=trial).assign(benchmark="b")],
                            ignore_index=True)
        for policy in ("zero", "omit"):
            for band in ("sd", "se"):
                with np.errstate(invalid="ignore"):
                    old = _curves_with_pandas_clip(res, policy, band)
                new = agreement_curves(res, nan_policy=policy, band=band)
                pd.testing.assert_frame_equal(new, old, check_exact=True)
                for column in old.select_dtypes("float").columns:
                    assert new[column].to_numpy().tobytes() == old[column].to_numpy().tobytes(), (trial, column)
