"""The book's calibration stage (irtbook.split_stage): it calibrates exactly the blocks the protocol asks for."""

from __future__ import annotations

import numpy as np
import pytest

from irtbook import split_stage
from irtbook.pipeline import Benchmark
from irtlib.core.responses import ResponseMatrix
from irtlib.protocol import agreement
from irtlib.protocol import presets as protocols


def _bench(seed=3, n_models=24, n_items=40):
    rng = np.random.default_rng(seed)
    theta, b = rng.normal(size=n_models), rng.normal(size=n_items)
    x = (rng.random((n_models, n_items)) < 1 / (1 + np.exp(-(theta[:, None] - b)))).astype(float)
    x[0, :3] = np.nan
    m = ResponseMatrix(x, models=[f"m{i}" for i in range(n_models)], items=[f"i{j}" for j in range(n_items)])
    return Benchmark("simplesafetytests", "SST", m, m.filter_variance(), "binary")


@pytest.mark.parametrize("name", ["authors", "paper"])
def test_stage_blocks_are_the_blocks_the_protocol_calibrates(name):
    bench = _bench()
    proto = protocols.resolve(name, benchmark="simplesafetytests")
    seen = []

    def recording(blocks, seeds):
        seen.extend((blk.copy(), int(s)) for blk, s in zip(blocks, np.broadcast_to(seeds, len(blocks)), strict=True))
        return [(np.ones(blk.shape[1]), np.zeros(blk.shape[1])) for blk in blocks]

    agreement.register_calibration_engine("recording-test", recording)
    try:
        agreement.run_protocol(bench.full, methods=["random"], ks=[2, 5], n_splits=4, n_test=6, engine="recording-test",
                               variance_threshold=0.01, protocol=proto, benchmark="simplesafetytests")
    finally:
        agreement.CALIBRATION_ENGINES.pop("recording-test")
    run = split_stage.StageRun("test", bench, proto, 4, 6, proto.seed)
    blocks, seeds = split_stage.training_blocks(run)
    assert len(blocks) == len(seen) == 4
    for (want, want_seed), got, seed in zip(seen, blocks, seeds, strict=True):
        np.testing.assert_array_equal(got, want)
        assert seed == want_seed
    if name == "authors":
        assert set(seeds) == {0}                     # the authors seed every split's calibration with 0
    else:
        assert len(set(seeds)) == 4                  # one stream per split


def test_stage_runs_cover_the_protocol_chapters_on_simulated_data():
    runs = split_stage.stage_runs(quick=True, data="simulated")
    labels = [r.label for r in runs]
    assert [lab for lab in labels if lab.startswith("05/06")] == [f"05/06 {b}" for b in split_stage.BOOK_BENCHMARKS]
    assert all(r.n_splits <= split_stage.QUICK_MAX_SPLITS for r in runs)
    assert not any("copyright" in lab for lab in labels)    # the HarmBench variants need the paper's item file
    assert labels[-1] == "04b harmbench" and runs[-1].protocol.name == "paper"


def test_stage_skips_the_whole_benchmark_fits_already_cached(tmp_path, monkeypatch):
    """The key the stage looks up is the one calibrate_benchmark writes: a cached fit is not refitted."""
    from irtbook import pipeline
    from irtbook.cache import cache_path

    bench = _bench()
    fit = pipeline.calibrate_benchmark(bench, engine="map", cache_dir=tmp_path)
    path = cache_path(pipeline.benchmark_fit_key(bench, engine="map", seed=0, epochs=1000, lr=0.1), tmp_path)
    assert path.exists() and len(list(tmp_path.glob("*.pkl"))) == 1
    pipeline.calibrate_benchmark(bench, engine="map", seed=5, epochs=3, cache_dir=tmp_path)   # MAP: same entry
    assert len(list(tmp_path.glob("*.pkl"))) == 1
    fitted = []
    monkeypatch.setattr(pipeline, "load_benchmark", lambda name, **_: bench)
    monkeypatch.setattr(pipeline, "CHAPTER_ENGINES", ("map",))
    monkeypatch.setattr(split_stage, "BOOK_BENCHMARKS", ("simplesafetytests",))
    monkeypatch.setattr(split_stage, "_benchmark_fit", lambda *job: fitted.append(job[1]) or 0.0)
    split_stage.benchmark_fits(quick=True, cache_dir=tmp_path, workers=1)
    assert fitted == ["pyirt"]          # the MAP fit was cached; only chapter 2's py-irt seed check is missing
    assert pipeline.calibrate_benchmark(bench, engine="map", cache_dir=tmp_path).a.equals(fit.a)


def test_splits_of_one_width_share_one_batch_whatever_their_seeds(tmp_path, monkeypatch):
    """The authors' splits (seed 0) and the paper's (a seed per split) of one benchmark: one batched fit,
    whose entries are the ones each run's own one-seed lookup finds."""
    from irtbook.pipeline import split_cache
    from irtlib.calibration import pyirt_batch
    from irtlib.calibration.split_cache import missing_splits

    pytest.importorskip("torch")
    bench = _bench(n_models=20, n_items=12)
    runs = [split_stage.StageRun(name, bench, protocols.resolve(name, benchmark="simplesafetytests"), 2, 5,
                                 protocols.resolve(name, benchmark="simplesafetytests").seed)
            for name in ("authors", "paper")]
    calls = []
    real = pyirt_batch.fit_2pl_splits
    monkeypatch.setattr(pyirt_batch, "fit_2pl_splits", lambda x, rows, **kw: calls.append(list(kw["seed"]))
                        or real(x, rows, **kw))
    out = split_stage.run_stage(runs, cache_dir=tmp_path, workers=1)
    assert out["splits"] == out["fitted"] == 4
    assert len(calls) == 1 and calls[0][:2] == [0, 0] and len(set(calls[0][2:])) == 2    # one batch, three seeds
    for run in runs:
        blocks, seeds = split_stage.training_blocks(run)
        for block, seed in zip(blocks, seeds, strict=True):
            assert missing_splits(block, [np.arange(block.shape[0])], seed=seed, cache_dir=split_cache(tmp_path)) == 0


def test_jobs_cut_only_the_costliest_width_and_cover_every_split_once(tmp_path, monkeypatch):
    """Two workers: the width with most cells is cut in two contiguous parts, the others stay whole; every
    split's block and seed reaches exactly one job, with its rows counted from the job's own block."""
    monkeypatch.setattr(split_stage, "CUT_MIN_COST", 0.0)        # tiny matrices: the cells alone decide
    monkeypatch.setattr(split_stage, "COST_PER_FIT", 0.0)
    wide, narrow = _bench(n_models=30, n_items=150), _bench(seed=4, n_models=30, n_items=8)
    runs = [split_stage.StageRun(name, bench, protocols.resolve("paper", benchmark="simplesafetytests"), 6, 5, 0)
            for name, bench in (("wide", wide), ("narrow", narrow))]
    jobs, asked, fitted = split_stage.split_jobs(runs, cache_dir=tmp_path, workers=2)
    assert asked == fitted == 12
    names = [job.args[0] for job in jobs]
    assert names == ["wide (part 1 of 2)", "wide (part 2 of 2)", "narrow"]
    assert jobs[0].cost == jobs[1].cost > jobs[2].cost
    for run in runs:
        blocks, seeds = split_stage.training_blocks(run)
        got = [(job.args[1][r], seed) for job in jobs if job.args[0].startswith(run.label)
               for r, seed in zip(job.args[2], job.args[3], strict=True)]
        assert len(got) == len(blocks)
        for (block, seed), (want, want_seed) in zip(got, zip(blocks, seeds, strict=True), strict=True):
            np.testing.assert_array_equal(block, want)
            assert seed == want_seed
    assert [job.args[0] for job in split_stage.split_jobs(runs, cache_dir=tmp_path, workers=1)[0]] == ["wide", "narrow"]


def test_jobs_carry_each_matrix_once_with_every_split_as_its_rows(tmp_path):
    """Two runs on one matrix (one width): the job holds the matrix's rows once, each split's block as rows into it."""
    bench = _bench(n_models=20, n_items=12)
    runs = [split_stage.StageRun(name, bench, protocols.resolve(name, benchmark="simplesafetytests"), 3, 5,
                                 protocols.resolve(name, benchmark="simplesafetytests").seed)
            for name in ("authors", "paper")]
    (job,), asked, fitted = split_stage.split_jobs(runs, cache_dir=tmp_path, workers=1)
    assert asked == fitted == 6
    _, matrix, rows, seeds, *_ = job.args
    values, _, _ = split_stage.training_rows(runs[0])
    np.testing.assert_array_equal(matrix, values)               # the same filtered matrix, once
    want = [(blk, s) for run in runs for blk, s in zip(*split_stage.training_blocks(run), strict=True)]
    assert len(rows) == len(want)
    for r, seed, (block, want_seed) in zip(rows, seeds, want, strict=True):
        np.testing.assert_array_equal(matrix[r], block)
        assert seed == want_seed
