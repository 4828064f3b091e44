"""The protocol as written and as run: irtlib.protocol.presets and run_protocol(protocol=...).

The authors' rules (their released code) are checked against the
authors' own released per-split fits of SimpleSafetyTests where those exist, against independent
computations (pandas.qcut, a brute-force likelihood maximiser) and on hand-made inputs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import simulate_2pl

from irtlib import ResponseMatrix
from irtlib.core.kernels import log_likelihood
from irtlib.datasets import authors as authors_data
from irtlib.errors import InputError
from irtlib.protocol import agreement
from irtlib.protocol import presets as protocols
from irtlib.protocol.agreement import agreement_curves, calibrate_splits, run_protocol
from irtlib.selection.adaptive import MaxInformation, MleEstimator, run_adaptive
from irtlib.selection.items import TwoPLItems
from irtlib.selection.methods import REGISTRY, Training
from irtlib.selection.static import (
    MarginalFisherOrder,
    b_quantile_bins,
    interleave_bins,
    interleave_quota,
    marginal_fisher,
)

REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "realdata" / "paper"
SST = REAL / "helm_simplesafety_irt_data.jsonl"
FITS = REAL / "authors_fits" / "helm_simplesafety_100samples_test10_4bquant_minvar0.01_step20_items.csv"
needs_real = pytest.mark.skipif(not (SST.exists() and FITS.exists()),
                                reason="the authors' files are not beside the checkout")


def _sst() -> ResponseMatrix:
    """SimpleSafetyTests as the authors released it (read with a few lines of json: no loader needed)."""
    rows = [json.loads(line) for line in SST.read_text().splitlines() if line.strip()]
    items = list(rows[0]["responses"])
    x = np.array([[r["responses"][i] for i in items] for r in rows], float)
    return ResponseMatrix(x, [r["subject_id"] for r in rows], items, source="SimpleSafetyTests (authors' file)")


# ---------------------------------------------------------------------------- the named protocols
def test_named_protocols_and_their_sizes():
    sizes = {"airbench2024": (70, 10, 1000), "anthropic-red-team": (100, 10, 500), "harmbench": (100, 10, 400),
             "simplesafetytests": (100, 10, 100), "safetybench": (70, 6, 3000), "wmdp-bio": (70, 6, 1000)}
    for bench, (n_splits, n_test, top) in sizes.items():
        p = protocols.get("authors", benchmark=bench)
        assert (p.n_splits, p.n_test, p.max_budget, p.benchmark) == (n_splits, n_test, top, bench)
        assert (p.nan_policy, p.band, p.fluid_estimator, p.random_order) == ("omit", "se", "mle", "shared")
    paper = protocols.get("paper")
    assert (paper.n_splits, paper.n_test, paper.split_rule, paper.nan_policy, paper.band) == (100, 10, "stream", "zero",
                                                                                                "sd")
    with pytest.raises(InputError, match="benchmark"):
        protocols.get("authors")
    with pytest.raises(InputError, match="unknown protocol"):
        protocols.get("neither")
    with pytest.raises(InputError, match="band"):
        protocols.Protocol("mine", band="iqr")
    # every setting on which the two differ is documented, citing the released code at the commit read
    authors = protocols.get("authors", benchmark="wmdp-bio")
    differing = {k for k, v in authors.settings().items() if v != paper.settings()[k]} - {"name", "benchmark", "seed",
                                                                                          "max_budget"}
    assert differing <= set(protocols.DIFFERENCES)
    assert protocols.CODE.endswith(authors_data.COMMIT[:7])
    assert all(protocols.CODE in line for line in protocols.DIFFERENCES.values())


def test_the_authors_budget_grid():
    assert protocols.authors_budget_grid(79, max_budget=100) == [1, 2, 3, 4, 5, 6, 8, 10, 13, 16, 20, 25, 31, 40, 50,
                                                                 63, 79]
    grid = protocols.authors_budget_grid(512, max_budget=500)           # Anthropic Red Team
    assert grid[-1] == 500 and 51 in grid and len(grid) <= 20


def test_the_authors_split_rule_by_hand():
    # numpy's Generator stream is fixed across versions (NEP 19): these are default_rng((42, i))
    # .choice(77, size=10, replace=False), written out once by hand; the rows an authors' split tests
    want = {0: [6, 7, 15, 31, 45, 52, 53, 62, 71, 73], 1: [17, 29, 31, 43, 47, 54, 60, 62, 66, 68],
            99: [10, 14, 19, 23, 34, 36, 48, 50, 61, 63]}
    for split, rows in want.items():
        train, test = protocols.authors_split(77, 10, split)
        np.testing.assert_array_equal(test, rows)
        np.testing.assert_array_equal(train, [i for i in range(77) if i not in set(rows)])   # file order
        # split_models routes the rule
        np.testing.assert_array_equal(agreement.split_models(77, 10, 42, split, rule="authors")[1], rows)
    with pytest.raises(InputError):
        agreement.split_models(77, 10, 42, 3, rule="authors", groups=np.arange(77) % 5)


def test_shared_random_order_is_a_default_rng_shuffle():
    order = protocols.shared_random_order(79, 7)
    ref = np.arange(79)
    np.random.default_rng(7).shuffle(ref)      # an ndarray shuffle draws the same permutation as the list one
    np.testing.assert_array_equal(order, ref)


# ---------------------------------------------------------------------------- b-quantile interleaving
def test_b_quantile_bins_cut_like_pandas_qcut():
    rng = np.random.default_rng(0)
    for b in (rng.normal(size=79), np.round(rng.normal(size=200), 1), np.r_[np.zeros(30), rng.normal(size=10)]):
        want = pd.qcut(b, q=4, labels=False, duplicates="drop")
        np.testing.assert_array_equal(b_quantile_bins(b, 4), want)


def test_interleave_bins_by_hand():
    # greedy order 5 3 0 1 4 2; bins: items 0,1 -> 0; 2,3 -> 1; 4,5 -> 2
    bins = np.array([0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(interleave_bins([5, 3, 0, 1, 4, 2], bins), [0, 3, 5, 1, 2, 4])
    # an exhausted bin is skipped
    np.testing.assert_array_equal(interleave_bins([2, 0, 1], np.array([0, 1, 1])), [0, 2, 1])


def test_interleave_quota_by_hand():
    # bins of sizes 3, 1, 2: round 1 takes 3 items, round 2 five, round 3 six
    bins = np.array([0, 2, 0, 1, 2, 0])
    np.testing.assert_array_equal(interleave_quota(bins, 3), [1, 1, 1])
    np.testing.assert_array_equal(interleave_quota(bins, 4), [2, 1, 2])
    np.testing.assert_array_equal(interleave_quota(bins, 6), [3, 1, 2])


def test_interleaved_b_quartiles_from_a_partial_greedy_order_equal_those_of_the_whole_order():
    # the authors' rule interleaves the greedy order of every item; the library runs the greedy only as far
    # as the first k interleaved items need, sharing the run with Marginal Fisher
    rng = np.random.default_rng(3)
    for trial in range(12):
        n, m = int(rng.integers(8, 300)), int(rng.integers(3, 30))
        a, b, theta = np.exp(rng.normal(0, 0.7, n)), rng.normal(0, 1.5, n), rng.normal(size=m)
        if trial % 3 == 0:
            b = np.round(b)                                   # tied b: merged quantile edges, fewer bins
        whole = interleave_bins(marginal_fisher(a, b, theta, n).items, b_quantile_bins(b, 4))
        ks = sorted({int(k) for k in rng.integers(1, n + 1, 4)})
        training = Training(a=a, b=b, theta=theta, bquartile_rule="interleave")
        mf = REGISTRY["marginal-fisher"].select(training, ks)
        bq = REGISTRY["marginal-fisher-bq"].select(training, ks)
        for k in ks:
            np.testing.assert_array_equal(bq[k].items, whole[:k])
            np.testing.assert_array_equal(mf[k].items, marginal_fisher(a, b, theta, k).items)
        assert len(training.marginal_fisher_order._order) < n or ks[-1] > 0.7 * n     # stopped early as a rule


def test_a_greedy_order_resumes_where_it_stopped():
    rng = np.random.default_rng(4)
    a, b, theta = np.exp(rng.normal(0, 0.5, 120)), rng.normal(size=120), rng.normal(size=15)
    order = MarginalFisherOrder(a, b, theta)
    first = order.first(10)
    np.testing.assert_array_equal(order.first(120), marginal_fisher(a, b, theta, 120).items)
    np.testing.assert_array_equal(order.first(10), first)


# ---------------------------------------------------------------------------- Fluid's MLE
def _brute_mle(x, a, b, lo=-8.0, hi=8.0):
    grid = np.linspace(lo, hi, 160001)
    ll = np.nansum(log_likelihood(x[None, :], grid[:, None], a, b), axis=1)
    return grid[np.argmax(ll)]


def test_mle_after_one_item_sits_on_a_bound():
    a, b = np.array([1.0, 1.2]), np.array([0.0, 0.5])
    for x, want in (([1.0, np.nan], 8.0), ([0.0, np.nan], -8.0)):
        traj = run_adaptive(np.array([x]), a, b, budget=1, estimator=MleEstimator(), theta0=0.3)
        assert traj.items[0, 0] == 0 and traj.estimate[0, 0] == want


def test_mle_matches_a_brute_force_likelihood_maximiser():
    rng = np.random.default_rng(3)
    a, b = rng.lognormal(0, 0.4, 12), rng.normal(0, 1, 12)
    x = np.array([[1, 0, 1, 1, 0, 1, 0, 1, 1, 1, 0, 1], [0, 0, 1, 0, 1, 0, 0, 1, 0, 0, 1, 0]], float)
    traj = run_adaptive(x, a, b, budget=12, selector=MaxInformation(), estimator=MleEstimator(tol=1e-10),
                        theta0=np.array([0.5, -1.0]))
    for m in range(2):
        assert abs(traj.estimate[m, -1] - _brute_mle(x[m], a, b)) < 2e-4


def test_mle_stops_where_the_score_falls_below_tol_as_the_authors_code_does():
    # one safe answer to a sharp easy item: the score a (1 - P) drops below 1e-6 well before +8
    a, b = np.array([4.0]), np.array([-1.0])
    est = MleEstimator().begin(TwoPLItems(a, b), 1, 1, 0.0)
    est.push(np.array([0]), np.array([1.0]))
    theta = est.estimate()[0][0]
    p = 1 / (1 + np.exp(-a[0] * (theta - b[0])))
    assert theta < 8.0 and a[0] * (1 - p) < 1e-6
    exact = MleEstimator(tol=0.0).begin(TwoPLItems(a, b), 1, 1, 0.0)       # tol 0: the exact bounded MLE
    exact.push(np.array([0]), np.array([1.0]))
    assert exact.estimate()[0][0] == 8.0


def test_fluid_starts_at_a_per_model_ability():
    a, b = np.array([1.0, 1.0, 1.0]), np.array([-2.0, 0.0, 2.0])
    x = np.ones((2, 3))
    traj = run_adaptive(x, a, b, budget=1, estimator=MleEstimator(), theta0=np.array([-2.1, 1.9]))
    np.testing.assert_array_equal(traj.items[:, 0], [0, 2])     # the most informative item at each start


# ---------------------------------------------------------------------------- the summaries' rules
def _frame(values, **attrs):
    df = pd.DataFrame({"split": range(len(values)), "method": "fluid", "k": 5, "agreement": values})
    df.attrs.update(attrs)
    return df


def test_authors_summaries_nanmean_and_one_standard_error():
    vals = [0.9, np.nan, 0.5, 0.7]
    row = agreement_curves(_frame(vals, nan_policy="omit", band="se")).iloc[0]
    valid = np.array([0.9, 0.5, 0.7])
    se = valid.std(ddof=1) / np.sqrt(3)
    assert row["mean"] == pytest.approx(0.7) and row["se"] == pytest.approx(se)
    assert (row["band_lo"], row["band_hi"]) == (pytest.approx(0.7 - se), pytest.approx(0.7 + se))
    assert row["n_undefined"] == 1
    # the paper's rule: the undefined split counts as 0, the band is 1 SD
    paper = agreement_curves(_frame(vals))
    full = np.array([0.9, 0.0, 0.5, 0.7])
    assert paper.iloc[0]["mean"] == pytest.approx(full.mean())
    assert paper.iloc[0]["band_hi"] - paper.iloc[0]["mean"] == pytest.approx(full.std(ddof=1))
    assert paper.attrs["band"] == "sd" and "SD" in paper.attrs["band_label"]
    # an explicit rule overrides the recorded one
    assert agreement_curves(_frame(vals, nan_policy="omit"), nan_policy="zero").iloc[0]["mean"] == pytest.approx(0.525)


# ---------------------------------------------------------------------------- run_protocol
@pytest.fixture(scope="module")
def small():
    values, *_ = simulate_2pl(30, 40, seed=8)
    return ResponseMatrix(values, [f"m{i:02d}" for i in range(30)], [f"q{j:02d}" for j in range(40)], source="small")


def test_paper_protocol_is_the_default(small):
    base = run_protocol(small, ks=[1, 5, 20], n_splits=2, n_test=8, seed=3, progress=False)
    named = run_protocol(small, ks=[1, 5, 20], n_splits=2, n_test=8, seed=3, progress=False, protocol="paper")
    pd.testing.assert_frame_equal(base, named)
    assert base.attrs["protocol"] == "paper" and base.attrs["band"] == "sd"


def test_authors_protocol_records_and_overrides(small):
    res = run_protocol(small, protocol="authors", benchmark="wmdp-bio", n_splits=3, progress=False)
    assert res.attrs["protocol"] == "authors" and res.attrs["n_splits"] == 3 and res.attrs["n_test"] == 6
    assert res.attrs["reference"] == "filtered" and res.attrs["protocol_settings"]["fluid_estimator"] == "mle"
    assert res.attrs["ks"] == protocols.authors_budget_grid(res.attrs["n_items_filtered"], max_budget=1000)
    assert sorted(res["split"].unique()) == [0, 1, 2]
    with pytest.raises(InputError, match="benchmark"):
        run_protocol(small, protocol="authors", progress=False)


def test_shared_order_gives_random_and_random_irt_the_same_items(small, monkeypatch):
    seen = []
    real, real_blocks = agreement.score_subset, agreement.score_blocks_map

    def spy(x, subset, **kw):
        seen.append((kw["how"], tuple(subset.items)))
        return real(x, subset, **kw)

    def spy_blocks(blocks, **kw):           # Random IRT's MAP scores: every split and budget in one call
        seen.extend(("map", tuple(block[1].items)) for block in blocks)
        return real_blocks(blocks, **kw)

    monkeypatch.setattr(agreement, "score_subset", spy)
    monkeypatch.setattr(agreement, "score_blocks_map", spy_blocks)
    run_protocol(small, methods=["random", "random-irt"], protocol="authors", benchmark="harmbench", n_splits=1,
                 ks=[3, 10], progress=False)
    order = protocols.shared_random_order(int((small.item_variance() >= 0.01).sum()), 0)
    assert seen == [("mean", tuple(order[:3])), ("mean", tuple(order[:10])),
                    ("map", tuple(order[:3])), ("map", tuple(order[:10]))]


def test_random_irt_on_the_shared_order_scores_as_one_map_call_per_split_and_budget(small):
    """Random IRT's batched MAP scores equal score_subset's, split by split and budget by budget, bit for bit."""
    from irtlib.core.stats import spearman
    from irtlib.selection.static import Subset, score_subset

    proto = protocols.get("authors", benchmark="harmbench")
    ks = [1, 3, 10, 25]
    df = run_protocol(small, methods=["random-irt"], protocol="authors", benchmark="harmbench", n_splits=4, ks=ks,
                      n_test=6, engine="map", progress=False)
    filtered, ref, _ = agreement.protocol_data(small, variance_threshold=proto.variance_threshold,
                                               reference=proto.reference, groups=None, n_test=6, seed=proto.seed,
                                               n_test_groups=1, variance_rule=proto.variance_rule,
                                               split_rule=proto.split_rule)
    for split in range(4):
        train, test = agreement.split_models(filtered.shape[0], 6, proto.seed, split, rule=proto.split_rule)
        (a, b), = agreement.calibrate_splits(filtered.values, [train], engine="map", seed=[0])
        order = protocols.shared_random_order(filtered.shape[1], split)
        scores = [score_subset(filtered.values[test], Subset(order[:k]), how="map", a=a, b=b) for k in ks]
        rho = spearman(np.vstack(scores), ref[test])
        got = df[df["split"] == split]["agreement"].to_numpy()
        np.testing.assert_array_equal(got, rho)


def test_a_batched_engine_plugs_in_and_sees_only_training_rows(small, monkeypatch):
    calls = []

    def batched(blocks, seeds):
        calls.append([blk.shape for blk in blocks])
        return [agreement._fit_items(blk, engine="map", seed=s) for blk, s in zip(blocks, seeds, strict=True)]

    monkeypatch.setitem(agreement.CALIBRATION_ENGINES, "fake-batched", batched)
    kw = dict(ks=[1, 5, 20], n_splits=4, n_test=8, seed=1, progress=False, split_batch=4)
    ours = run_protocol(small, engine="fake-batched", **kw)
    base = run_protocol(small, **kw)
    pd.testing.assert_frame_equal(ours.reset_index(drop=True), base.reset_index(drop=True), check_like=False)
    assert calls == [[(22, 40)] * 4]                          # one call for the four splits, training rows only
    fits = calibrate_splits(small.values, [np.arange(20)], engine="map", seed=[0])
    assert fits[0][0].shape == (40,)


# ---------------------------------------------------------------------------- against the authors' fits
@needs_real
def test_static_rankings_reproduce_the_authors_fits_on_every_split():
    fits = pd.read_csv(FITS)
    out = protocols.compare_static_rankings(fits, _sst())
    per = out.groupby("method")[["exact", "exact_up_to_ties"]].sum()
    # GIVEN their a and b and their split's training rows, their orders come out exactly
    for m in ("random", "total-fisher", "marginal-fisher", "marginal-fisher-bq"):
        assert per.loc[m, "exact"] == 100, m
    # DISCO: the same entropy at every rank in every split; only the order within ties of equal
    # entropy differs (their pandas sort is an unstable quicksort; ours keeps file order)
    assert per.loc["disco", "exact_up_to_ties"] == 100
    # anchor points: 17 budgets x 100 splits; sets differ, but almost always among equal-loss medoid
    # sets (identical items): measured 1,685 of 1,700 with the same k-medoids loss, 440 identical
    anchors = out[out["method"] == "anchor-points"]
    assert len(anchors) == 1700 and anchors["exact"].sum() >= 400
    assert anchors["exact_up_to_ties"].mean() >= 0.98
    assert anchors.loc[anchors["k"] == 79, "exact"].all()     # every item its own medoid


#: The methods whose scores rest on the calibration (Random's on its shared order alone).
CALIBRATED = ["fluid", "random", "random-irt", "total-fisher", "marginal-fisher", "marginal-fisher-bq"]


def _authors_fits_engine(blocks, seeds):
    """The authors' released (a, b) of every split, as a batched engine (one call, in split order)."""
    fits = pd.read_csv(FITS)
    assert len(blocks) == 100 and all(blk.shape == (67, 79) for blk in blocks)
    return [(fits.loc[fits["fold"] == i, "a"].to_numpy(), fits.loc[fits["fold"] == i, "b"].to_numpy())
            for i in range(len(blocks))]


@pytest.fixture(scope="module")
def on_their_fits():
    """The authors' protocol on SimpleSafetyTests with their own per-split fits plugged in."""
    agreement.register_calibration_engine("authors-fits", _authors_fits_engine)
    try:
        return run_protocol(_sst(), protocol="authors", benchmark="simplesafetytests", engine="authors-fits",
                            methods=CALIBRATED, split_batch=100, progress=False)
    finally:
        del agreement.CALIBRATION_ENGINES["authors-fits"]


@needs_real
def test_authors_protocol_on_their_own_fits_gives_table_2(on_their_fits):
    """With the authors' (a, b) per split plugged in as a batched engine, Table 2's SimpleSafetyTests row."""
    curves = agreement_curves(on_their_fits)
    at20 = curves[curves["k"] == 20].set_index("method")["mean"]
    # paper, Table 2: Fluid 0.91, Random 0.75, Random IRT 0.75 at k = 20, the first k reaching 0.90
    assert at20[["fluid", "random", "random-irt"]].round(2).to_dict() == {"fluid": 0.91, "random": 0.75,
                                                                          "random-irt": 0.75}
    fluid = curves[curves["method"] == "fluid"].sort_values("k")
    assert fluid.loc[fluid["mean"] >= 0.90, "k"].min() == 20
    assert curves.attrs["band"] == "se"


def test_the_authors_protocol_calibrates_with_the_authors_engine_unless_told(small, monkeypatch):
    seen = []
    monkeypatch.setitem(agreement.CALIBRATION_ENGINES, "pyirt-authors",
                        lambda blocks, seeds: seen.append(seeds) or [agreement._fit_items(b, engine="map", seed=0)
                                                                     for b in blocks])
    kw = dict(ks=[1, 5], n_splits=2, progress=False, split_batch=2)
    res = run_protocol(small, protocol="authors", benchmark="harmbench", **kw)
    assert res.attrs["engine"] == "pyirt-authors" and seen == [[0, 0]]      # the authors' seed 0 for every split
    assert run_protocol(small, protocol="authors", benchmark="harmbench", engine="map", **kw).attrs["engine"] == "map"
    assert run_protocol(small, protocol="paper", **kw).attrs["engine"] == "map" and len(seen) == 1
    with pytest.raises(InputError, match="unknown calibration engine 'gpu'"):
        run_protocol(small, engine="gpu", **kw)


@needs_real
@pytest.mark.slow
def test_the_authors_pipeline_reproduces_agreement_on_their_own_fits(on_their_fits):
    """run_protocol(protocol="authors") with no engine: the agreement of the authors' own fits at every k."""
    pytest.importorskip("torch")
    ours = run_protocol(_sst(), protocol="authors", benchmark="simplesafetytests", methods=CALIBRATED,
                        split_batch=100, progress=False)
    assert ours.attrs["engine"] == "pyirt-authors"
    mine = agreement_curves(ours).set_index(["method", "k"])["mean"]
    theirs = agreement_curves(on_their_fits).set_index(["method", "k"])["mean"]
    assert mine.index.equals(theirs.index) and len(mine) == len(CALIBRATED) * 17     # every k of their grid
    assert float((mine - theirs).abs().max()) <= 1e-3


def test_the_ceiling_reuses_the_protocols_split_calibrations_from_the_cache(small, monkeypatch, tmp_path):
    pytest.importorskip("torch")
    from irtlib.calibration import pyirt_batch
    from irtlib.protocol.ceiling import agreement_ceiling

    real, fitted = pyirt_batch.fit_2pl_splits, []

    def counting(values, rows, **kw):
        fitted.append(len(rows))
        return real(values, rows, **dict(kw, epochs=20))     # short fits: the test is about reuse

    monkeypatch.setattr(pyirt_batch, "fit_2pl_splits", counting)
    kw = dict(protocol="authors", benchmark="harmbench", n_splits=3, calibration_cache=tmp_path)
    res = run_protocol(small, ks=[1, 5], progress=False, split_batch=3, **kw)
    ceiling = agreement_ceiling(small, **kw)
    assert fitted == [3] and len(list(tmp_path.glob("*.npz"))) == 3      # fitted once, by the protocol
    # the same numbers as without a cache (where every split is fitted again)
    pd.testing.assert_frame_equal(res, run_protocol(small, ks=[1, 5], progress=False, split_batch=3,
                                                    **dict(kw, calibration_cache=None)), check_like=False)
    pd.testing.assert_series_equal(ceiling, agreement_ceiling(small, **dict(kw, calibration_cache=None)))
    assert fitted == [3, 3, 3]


def test_one_test_model_is_refused_and_intervals_stay_within_minus_one_and_one(small):
    with pytest.raises(InputError, match="n_test must be at least 2"):
        run_protocol(small, ks=[1, 5], n_splits=2, n_test=1, progress=False)
    res = pd.DataFrame({"split": [0, 1, 2], "method": "fluid", "k": 5, "agreement": [1.0, 1.0, 0.2]})
    curve = agreement_curves(res).iloc[0]
    assert curve["ci_hi"] == 1.0 and curve["band_hi"] == 1.0 and curve["ci_lo"] >= -1.0
    assert curve["mean"] == pytest.approx(2.2 / 3)
