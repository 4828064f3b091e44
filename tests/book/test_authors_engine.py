"""The authors' calibration at other epochs as a protocol engine (irtbook.authors_engine): a QUICK build's."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from irtbook import authors_engine, split_stage, words
from irtbook.pipeline import Benchmark, split_cache
from irtlib.core.responses import ResponseMatrix
from irtlib.protocol import agreement
from irtlib.protocol import presets as protocols


def _bench(seed=5, n_models=22, n_items=30):
    rng = np.random.default_rng(seed)
    theta, b = rng.normal(size=n_models), rng.normal(size=n_items)
    x = (rng.random((n_models, n_items)) < 1 / (1 + np.exp(-(theta[:, None] - b)))).astype(float)
    m = ResponseMatrix(x, models=[f"m{i}" for i in range(n_models)], items=[f"i{j}" for j in range(n_items)])
    return Benchmark("simplesafetytests", "SST", m, m.filter_variance(), "binary")


def test_the_protocols_own_epochs_keep_the_protocols_own_engine():
    assert authors_engine.authors_epochs() == 1000
    assert authors_engine.engine_name(1000) == "pyirt-authors"
    assert authors_engine.parse_engine("pyirt-authors") == ("pyirt-authors", None)
    assert authors_engine.parse_engine("pyirt-authors@12") == ("pyirt-authors", 12)
    assert authors_engine.parse_engine("map@12") == ("map@12", None)
    with pytest.raises(Exception, match="at least 1"):
        authors_engine.engine_name(0)


def test_other_epochs_are_the_split_caches_fit_at_those_epochs(tmp_path):
    """The engine's fits are fit_2pl_splits_cached's at its epochs, bit for bit, and at 1,000 epochs those of
    the protocol's own "pyirt-authors"."""
    pytest.importorskip("torch")
    from irtlib.calibration.split_cache import fit_2pl_splits_cached

    x = _bench().filtered.values
    blocks = [x[:15], x[3:20], x[5:]]
    name = authors_engine.engine_name(9)
    assert name == "pyirt-authors@9" and name in agreement.CALIBRATION_ENGINES
    got = agreement.calibrate_splits(np.vstack(blocks), [np.arange(0, 15), np.arange(15, 32), np.arange(32, 49)],
                                     engine=name, seed=[0, 0, 3])
    for (a, b), block, seed in zip(got, blocks, (0, 0, 3), strict=True):
        (want_a, want_b), = fit_2pl_splits_cached(block, [np.arange(block.shape[0])], cache_dir=None, epochs=9,
                                                  seed=seed)
        np.testing.assert_array_equal(a, want_a)
        np.testing.assert_array_equal(b, want_b)
    own = agreement.CALIBRATION_ENGINES["pyirt-authors"](blocks, [0, 0, 3], cache_dir=tmp_path)
    at_1000 = agreement.CALIBRATION_ENGINES["pyirt-authors"](blocks, [0, 0, 3], epochs=1000)   # given, not defaulted
    for (a, b), (a2, b2) in zip(own, at_1000, strict=True):
        np.testing.assert_array_equal(a, a2)
        np.testing.assert_array_equal(b, b2)


def test_a_protocol_run_at_other_epochs_reads_every_split_the_stage_fitted(tmp_path, monkeypatch):
    """The stage fits a run's splits at the run's epochs; the protocol with the renamed engine then fits none."""
    pytest.importorskip("torch")
    from irtlib.calibration import pyirt_batch

    bench = _bench()
    proto = protocols.resolve("authors", benchmark="simplesafetytests")
    run = split_stage.StageRun("test", bench, proto, 3, 5, proto.seed, epochs=7)
    assert split_stage.run_stage([run], cache_dir=tmp_path, workers=1)["fitted"] == 3

    def no_fit(*args, **kwargs):
        raise AssertionError("the protocol recalibrated a split the stage fitted")

    monkeypatch.setattr(pyirt_batch, "fit_2pl_splits", no_fit)
    quick = replace(proto, engine=authors_engine.engine_name(7))
    out = agreement.run_protocol(bench.full, methods=["fluid"], ks=[2, 5], n_splits=3, n_test=5, protocol=quick,
                                 benchmark="simplesafetytests", calibration_cache=split_cache(tmp_path))
    assert out["split"].nunique() == 3
    with pytest.raises(AssertionError, match="recalibrated"):          # the protocol's own epochs: not fitted
        agreement.run_protocol(bench.full, methods=["fluid"], ks=[2, 5], n_splits=3, n_test=5, protocol=proto,
                               benchmark="simplesafetytests", calibration_cache=split_cache(tmp_path))


def test_the_words_name_the_epochs_of_a_renamed_engine():
    name = authors_engine.engine_name(300)
    assert words.engine_short(name) == f"{words.ENGINE_SHORT['pyirt-authors']}, 300 epochs"
    assert words.engine_noun(name) == f"{words.ENGINE_NOUN['pyirt-authors']} at 300 epochs"
    assert words.engine_words(name).startswith(words.ENGINE_WORDS["pyirt-authors"])
    assert words.engine_caption(name, 300) == words.engine_short(name)
    assert words.engine_short("pyirt-authors") == words.ENGINE_SHORT["pyirt-authors"]
    assert words.engine_caption("pyirt-authors", 1000) == f"{words.ENGINE_SHORT['pyirt-authors']}, 1,000 epochs"
