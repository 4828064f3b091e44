"""The book's cached pipeline (irtlib.book.pipeline): what it computes, its cache keys, and invalidation."""

from __future__ import annotations

import numpy as np
import pytest

from irtlib.book import cache, paper, pipeline


@pytest.fixture(scope="module")
def sst():
    return pipeline.load_benchmark("simplesafetytests", source="simulated")


def test_load_benchmark_binarizes_and_filters(sst):
    from irtlib import datasets

    assert sst.name == "simplesafetytests" and sst.rule == "strict"
    assert sst.display_name == datasets.display_name("simplesafetytests")
    assert sst.full.shape[1] == 100
    rates = sst.full.item_safe_rates()
    kept = rates[rates * (1 - rates) > 0.01].index
    assert list(sst.filtered.items) == list(kept)                 # the paper's variance filter
    assert sst.checksum == pipeline.load_benchmark("simplesafetytests", source="simulated").checksum
    lenient = pipeline.load_benchmark("simplesafetytests", rule="lenient", source="simulated")
    assert lenient.rule == "lenient"
    # a multiple-choice benchmark has a single rule: `rule` is ignored and recorded as strict
    assert pipeline.load_benchmark("wmdp-bio", rule="lenient", source="simulated").rule == "strict"


class Counter:
    def __init__(self, func):
        self.func, self.calls = func, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.func(*args, **kwargs)


def test_calibration_is_cached_by_data_settings_and_library(sst, tmp_path, monkeypatch):
    fit = Counter(pipeline.fit_2pl)
    monkeypatch.setattr(pipeline, "fit_2pl", fit)
    first = pipeline.calibrate_benchmark(sst, engine="map", cache_dir=tmp_path)
    again = pipeline.calibrate_benchmark(sst, engine="map", cache_dir=tmp_path)
    assert fit.calls == 1 and again.a.equals(first.a) and again.theta.equals(first.theta)
    # the MAP engine ignores seed and epochs: they are not part of its key
    pipeline.calibrate_benchmark(sst, engine="map", seed=5, epochs=10, cache_dir=tmp_path)
    assert fit.calls == 1
    # other data (another binarization) is another entry
    lenient = pipeline.load_benchmark("simplesafetytests", rule="lenient", source="simulated")
    pipeline.calibrate_benchmark(lenient, engine="map", cache_dir=tmp_path)
    assert fit.calls == 2
    # a change of the library's code invalidates every entry
    monkeypatch.setattr(cache, "library_fingerprint", lambda: "another version of irtlib")
    pipeline.calibrate_benchmark(sst, engine="map", cache_dir=tmp_path)
    assert fit.calls == 3
    # no cache directory: always computed
    pipeline.calibrate_benchmark(sst, engine="map", cache_dir=None)
    assert fit.calls == 4


def test_library_fingerprint_follows_the_computing_sources(tmp_path, monkeypatch):
    """The fingerprint hashes every computing module: editing one changes it."""
    from pathlib import Path

    cache.library_fingerprint.cache_clear()
    before = cache.library_fingerprint()
    real = Path.read_bytes
    target = Path(cache.__file__).resolve().parent.parent / "agreement.py"

    def edited(self):
        data = real(self)
        return data + b"\n# edited\n" if self.resolve() == target else data

    monkeypatch.setattr(Path, "read_bytes", edited)
    cache.library_fingerprint.cache_clear()
    try:
        assert cache.library_fingerprint() != before
    finally:
        monkeypatch.undo()
        cache.library_fingerprint.cache_clear()
    assert cache.library_fingerprint() == before


def test_paper_and_protocol_budgets(sst):
    assert pipeline.paper_budgets("no such benchmark") == []
    sb = pipeline.paper_budgets("safetybench")
    facts = paper.SAFETYBENCH_APPENDIX_F
    assert {paper.TABLE2_LEFT["safetybench"].k, facts["k_small"], facts["random_reaches_090_at_k"]} <= set(sb)
    assert sb == sorted(sb)
    ks = pipeline.protocol_budgets(sst)
    from irtlib.agreement import budget_grid

    grid = budget_grid(sst.filtered.shape[1])
    assert set(grid) <= set(ks) and ks == sorted(set(ks)) and max(ks) == max(grid)
    assert {k for k in pipeline.paper_budgets("simplesafetytests") if k <= max(grid)} <= set(ks)


def test_protocol_is_cached_and_n_jobs_is_not_part_of_the_key(sst, tmp_path, monkeypatch):
    import irtlib.agreement

    run = Counter(irtlib.agreement.run_protocol)
    monkeypatch.setattr(irtlib.agreement, "run_protocol", run)
    first = pipeline.protocol_benchmark(sst, n_splits=2, ks=[1, 5, 20], cache_dir=tmp_path)
    assert run.calls == 1
    assert set(first["benchmark"]) == {"simplesafetytests"} and first.attrs["n_splits"] == 2
    again = pipeline.protocol_benchmark(sst, n_splits=2, ks=[20, 5, 1], n_jobs=2, cache_dir=tmp_path)
    assert run.calls == 1 and again.equals(first) and again.attrs["ks"] == [1, 5, 20]
    pipeline.protocol_benchmark(sst, n_splits=2, ks=[1, 5, 20], seed=1, cache_dir=tmp_path)
    assert run.calls == 2
    np.testing.assert_array_equal(first["k"].unique(), [1, 5, 20])
