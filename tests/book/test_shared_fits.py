"""Each split calibrated once for the protocol and its ceiling: the same fits and results as calibrating twice."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from irtbook import simulation_study as study
from irtbook.shared_fits import calibrate_block, shared_calibrations
from irtlib.datasets.simulate import DEFAULT_SEED
from irtlib.protocol import presets
from irtlib.protocol.agreement import CALIBRATION_ENGINES, calibrate_splits, run_protocol, split_training
from irtlib.protocol.ceiling import agreement_ceiling


def _values(n_items=150, missing=False):
    m = study.study_matrix(dict(study.BASELINE), n_items=n_items, seed=3)
    values = np.ascontiguousarray(m.filter_variance().values)
    if missing:      # whole columns unseen by some training blocks, and scattered gaps
        values = values.copy()
        for j in range(6):          # column j seen by row j alone: unseen where row j is a test row
            values[np.arange(values.shape[0]) != j, j] = np.nan
        values[np.random.default_rng(0).random(values.shape) < 0.05] = np.nan
    return values


def _same(fits, other):
    return all(np.array_equal(a, c, equal_nan=True) and np.array_equal(b, d, equal_nan=True)
               for (a, b), (c, d) in zip(fits, other, strict=True))


@pytest.mark.parametrize("missing", [False, True])
def test_calibrate_block_equals_the_protocols_calibration(missing):
    values = _values(missing=missing)
    rows, seeds = split_training(values.shape[0], range(3), n_test=10, seed=0, protocol=presets.PAPER)
    old = calibrate_splits(values, rows, engine="map", seed=seeds)
    new = [calibrate_block(values[r], engine="map", seed=s) for r, s in zip(rows, seeds, strict=True)]
    if missing:
        assert any(np.isnan(a).any() for a, _ in old)
    assert all(np.array_equal(a, c, equal_nan=True) for (a, _), (c, _) in zip(old, new, strict=True))
    assert all(np.array_equal(b, d, equal_nan=True) for (_, b), (_, d) in zip(old, new, strict=True))


def test_shared_calibrations_fit_each_split_once_and_leave_the_registry_as_it_was():
    values = _values(missing=True)
    rows, seeds = split_training(values.shape[0], range(3), n_test=10, seed=0, protocol=presets.PAPER)
    old = calibrate_splits(values, rows, engine="map", seed=seeds)
    before = dict(CALIBRATION_ENGINES)
    with shared_calibrations("map") as kept:
        first = calibrate_splits(values, rows, engine="map", seed=seeds)
        again = calibrate_splits(values, rows, engine="map", seed=seeds)
        assert len(kept) == 3
        again[0][0][:] = 0.0       # callers get copies: the kept fits cannot be altered
        third = calibrate_splits(values, rows, engine="map", seed=seeds)
    assert CALIBRATION_ENGINES == before
    assert _same(old, first) and _same(old, third)
    with shared_calibrations("pyirt-authors") as kept:      # a batched engine keeps its own cache
        assert CALIBRATION_ENGINES == before and kept == {}


def test_run_setting_equals_the_protocol_and_ceiling_calibrated_apart():
    settings = {**study.BASELINE, "guess_scale": 2.0}
    kw = dict(n_items=120, n_splits=4, n_test=10, seed=0)
    run = study.run_setting(settings, max_k=40, n_points=5, **kw)
    m = study.study_matrix(settings, n_items=kw["n_items"], seed=DEFAULT_SEED)
    ks = study.setting_budgets(m.filter_variance().shape[1], max_k=40, n_points=5)
    res = run_protocol(m, methods=("fluid", "random"), ks=ks, n_splits=4, n_test=10, seed=0, engine="map",
                       progress=False)
    ceiling = agreement_ceiling(m, n_splits=4, n_test=10, seed=0, engine="map")
    assert run["results"].equals(res) and run["ceiling"].equals(ceiling)
    drop = lambda attrs: {k: v for k, v in attrs.items() if k != "seconds"}      # noqa: E731
    assert drop(run["results"].attrs) == drop(res.attrs) and run["ceiling"].attrs == ceiling.attrs


def test_run_study_does_not_depend_on_the_workers():
    factors = {"guessing": ("guess_scale", (0.0, 1.0)), "training models": ("n_models", (29, 40))}
    kw = dict(n_items=60, n_splits=2, max_k=30, n_points=5)
    one, curves_one, _ = study.run_study(factors, n_jobs=1, **kw)
    two, curves_two, runs = study.run_study(factors, n_jobs=2, **kw)
    assert one.equals(two) and curves_one.equals(curves_two)
    assert runs[("guessing", 1.0)] is runs[("training models", 29)]


PANDAGUARD = Path(__file__).resolve().parents[2] / ".." / "shared" / "realdata" / "pandaguard_jbb"


@pytest.mark.skipif(not (PANDAGUARD / "responses.csv").exists(), reason=f"PandaGuard data not found at {PANDAGUARD}")
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_pandaguard_run_equals_the_protocols_and_ceilings_calibrated_apart(n_jobs):
    from irtbook import pandaguard_claims as pg
    from irtlib import datasets

    ks = [1, 5, 20, 89]
    result = pg.run(data_dir=PANDAGUARD, n_splits=3, ks=ks, n_jobs=n_jobs)
    m = datasets.load("pandaguard-jbb", data_dir=PANDAGUARD)
    models = datasets.load_models("pandaguard-jbb", data_dir=PANDAGUARD).set_index("model").reindex(m.models)
    drop = lambda attrs: {k: v for k, v in attrs.items() if k != "seconds"}      # noqa: E731
    for name, extra in (("random", {}), ("grouped", {"groups": models["target"].to_numpy(), "n_test_groups": 2})):
        kw = dict(n_splits=3, n_test=10, seed=0, engine="map", **extra)
        res = run_protocol(m, ks=ks, progress=False, **kw)
        ceiling = agreement_ceiling(m, **kw)
        assert result[name]["results"].equals(res) and result[name]["ceiling"].equals(ceiling)
        assert drop(result[name]["results"].attrs) == drop(res.attrs)
        assert result[name]["ceiling"].attrs == ceiling.attrs


def test_splits_training_on_the_same_models_share_one_map_fit_whatever_their_seeds():
    values = _values(missing=True)
    rows, _ = split_training(values.shape[0], range(2), n_test=10, seed=0, protocol=presets.PAPER)
    rows, seeds = [rows[0], rows[1], rows[0], rows[0]], [3, 4, 5, 3]    # a block again under other seeds
    old = calibrate_splits(values, rows, engine="map", seed=seeds)
    with shared_calibrations("map") as kept:
        new = calibrate_splits(values, rows, engine="map", seed=seeds)
        assert len(kept) == 2
    assert _same(old, new)
