"""The book's scorecard helpers (irtlib.book.scorecard) that the chapters' tests do not reach."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from irtlib.book import scorecard


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
    from irtlib.book import pipeline

    bench = pipeline.load_benchmark("simplesafetytests", source="simulated")
    cal = pipeline.calibrate_benchmark(bench, engine="map")
    out = scorecard.ceiling_pairs(bench, cal)
    scores = bench.full.safety_scores()
    assert out["n"] == int((scores > 0.95).sum()) and out["n"] >= 2
    assert 0.0 <= out["score"] <= 1.0 and 0.0 <= out["theta"] <= 1.0
    assert 0 <= out["at_bound"] <= out["n"]
