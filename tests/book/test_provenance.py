"""What a page says about its data (irtbook.provenance) and the ceiling helpers of paper_claims."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from irtbook import paper_claims, provenance
from irtbook.pipeline import Benchmark
from irtlib.calibration.joint_map import Calibration
from irtlib.core.responses import ResponseMatrix
from irtlib.datasets.sources import DataSource

SIX = ("airbench2024", "anthropic-red-team", "harmbench", "safetybench", "simplesafetytests", "wmdp-bio")


def test_real_expected_follows_the_source_setting(monkeypatch):
    monkeypatch.delenv("IRTLIB_DATA", raising=False)
    auto = provenance.real_expected(SIX)
    assert [b for b, want in auto.items() if want] == [b for b in SIX if b != "safetybench"]
    assert not any(provenance.real_expected(SIX, source="simulated").values())
    assert provenance.real_expected(["harmbench"], source="real") == {"harmbench": True}
    monkeypatch.setenv("IRTLIB_DATA", "simulated")             # source=None reads the environment
    assert not any(provenance.real_expected(SIX).values())


def _bench(name: str, kind: str, scores_by_model: dict[str, list[int]]) -> Benchmark:
    models = list(scores_by_model)
    values = np.array([scores_by_model[m] for m in models], dtype=float)
    m = ResponseMatrix(values, models, [f"i{j}" for j in range(values.shape[1])])
    src = DataSource(name, kind, f"{kind} data", None, True, m.shape)
    return Benchmark(name, name.title(), m, m, "binary", src)


def test_fallback_banner_names_only_what_fell_back():
    benches = {"harmbench": _bench("harmbench", "simulated", {"x": [1, 0], "y": [0, 1]}),
               "wmdp-bio": _bench("wmdp-bio", "paper", {"x": [1, 0], "y": [0, 1]}),
               "safetybench": _bench("safetybench", "simulated", {"x": [1, 0], "y": [0, 1]})}
    expected = provenance.real_expected(benches, source="auto")
    banner = provenance.fallback_banner(benches, real_expected=expected)
    assert "Harmbench" in banner and "Safetybench" not in banner and "Wmdp-Bio" not in banner
    none_expected = provenance.real_expected(benches, source="simulated")
    assert provenance.fallback_banner(benches, real_expected=none_expected) == ""


def test_ceiling_pair_on_a_hand_made_matrix():
    # 1,000 items: model scores 0.957 (one model), 0.999 (two tied models), 0.94 (below the ceiling)
    n = 1000

    def row(k_fail):
        return [0] * k_fail + [1] * (n - k_fail)

    bench = _bench("anthropic-red-team", "paper", {"lo": row(43), "hi1": row(1), "hi2": row(1), "low": row(60)})
    theta = pd.Series({"lo": 1.0, "hi1": 3.0, "hi2": 3.5, "low": -2.0})
    cal = Calibration(pd.Series(1.0, index=bench.full.items), pd.Series(0.0, index=bench.full.items), theta, "map")
    pair = paper_claims.ceiling_pair(bench, cal)
    assert pair["low"] == ["lo"] and sorted(pair["high"]) == ["hi1", "hi2"]
    assert pair["low_score"] == pytest.approx(0.957) and pair["high_score"] == pytest.approx(0.999)
    assert pair["gap_max"] == pytest.approx(2.5) and pair["gap_min"] == pytest.approx(2.0)
    assert pair["theta_sd"] == pytest.approx(float(theta.std()))
    assert pair["gap_max_sd"] == pytest.approx(2.5 / float(theta.std()))
    counts = paper_claims.ceiling_counts(bench)
    assert (counts["above"], counts["at_least"], counts["n_models"], counts["at_one"]) == (3, 3, 4, 0)
    # a score of exactly 0.95 is counted "at or above", not "above"
    edge = _bench("harmbench", "paper", {"a": row(50), "b": row(10)})
    c = paper_claims.ceiling_counts(edge)
    assert (c["above"], c["at_least"]) == (1, 2)


def test_a_simulated_benchmark_is_not_named_after_the_real_data(monkeypatch):
    from irtbook.pipeline import load_benchmark

    monkeypatch.delenv("IRTLIB_DATA", raising=False)
    sim = load_benchmark("airbench2024", source="simulated")
    assert sim.data.kind == "simulated" and sim.display_name == "AIR-Bench 2024"
    auto = load_benchmark("airbench2024")
    if auto.data.kind == "real-subset":                      # the 22 real models beside the checkout
        assert auto.display_name == "AIR-Bench 2024 (real, 22 models)"
