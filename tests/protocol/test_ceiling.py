"""The agreement ceiling (irtlib.protocol.ceiling.agreement_ceiling) and held-out groups in the protocol."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import simulate_2pl
from scipy.stats import spearmanr

from irtlib import fit_2pl, map_ability
from irtlib.core.responses import ResponseMatrix
from irtlib.protocol.agreement import agreement_curves, run_protocol, split_models
from irtlib.protocol.ceiling import agreement_ceiling


def _matrix(values):
    return ResponseMatrix(values, [f"m{i}" for i in range(values.shape[0])],
                          [f"i{j}" for j in range(values.shape[1])], source="test")


def _two_dimensional(n_models=60, seed=5):
    """A planted second dimension: 40 sharp items measure trait 1, 160 weak items trait 2.

    The safety score is dominated by the 160 items (trait 2), the 2PL ability by the sharp
    ones (trait 1); the traits are independent, so ability and score disagree by construction.
    """
    rng = np.random.default_rng(seed)
    t1, t2 = rng.normal(size=n_models), rng.normal(size=n_models)
    a = np.r_[np.full(40, 3.0), np.full(160, 0.8)]
    b = rng.normal(size=200)
    theta = np.c_[np.repeat(t1[:, None], 40, 1), np.repeat(t2[:, None], 160, 1)]
    p = 1.0 / (1.0 + np.exp(-a * (theta - b)))
    return (rng.random(p.shape) < p).astype(float)


def test_ceiling_equals_brute_force():
    values, *_ = simulate_2pl(40, 60, seed=11, missing=0.02)
    m = _matrix(values)
    got = agreement_ceiling(m, n_splits=4, n_test=8, seed=3, variance_threshold=None)
    assert list(got.index) == [0, 1, 2, 3] and got.index.name == "split"
    ref = m.safety_scores().to_numpy()
    for split in range(4):
        train, test = split_models(40, 8, 3, split)
        keep = ~np.isnan(values[train]).all(axis=0)
        cal = fit_2pl(_matrix(values[train][:, keep]), engine="map")
        theta = map_ability(values[test][:, keep], cal.a.to_numpy(), cal.b.to_numpy()).theta
        assert got[split] == pytest.approx(spearmanr(theta, ref[test]).statistic, abs=1e-12)


def test_ceiling_is_fluid_with_every_item():
    """Fluid given every item is the MAP on all items: the ceiling is its limit, split by split."""
    values, *_ = simulate_2pl(36, 50, seed=2)
    m = _matrix(values)
    n = m.filter_variance().shape[1]
    ceiling = agreement_ceiling(m, n_splits=5, seed=1)
    res = run_protocol(m, methods=["fluid", "random"], ks=[n], n_splits=5, seed=1, progress=False)
    fluid = res[res["method"] == "fluid"].set_index("split")["agreement"]
    np.testing.assert_allclose(fluid.to_numpy(), ceiling.to_numpy(), atol=1e-9)
    random = res[res["method"] == "random"]["agreement"]
    np.testing.assert_allclose(random.to_numpy(), 1.0)    # score-scored methods converge to 1


def test_ceiling_near_one_on_2pl_data():
    values, *_ = simulate_2pl(60, 200, seed=3)
    c = agreement_ceiling(_matrix(values), n_splits=20)
    assert c.mean() > 0.95


def test_ceiling_lower_with_planted_second_dimension_and_fluid_plateaus_there():
    m = _matrix(_two_dimensional())
    c = agreement_ceiling(m, n_splits=20)
    assert c.mean() < 0.9
    plain, *_ = simulate_2pl(60, 200, seed=3)
    assert agreement_ceiling(_matrix(plain), n_splits=20).mean() - c.mean() > 0.1
    res = run_protocol(m, methods=["fluid", "random"], ks=[5, 150], n_splits=20, progress=False)
    curves = agreement_curves(res).set_index(["method", "k"])
    fluid = curves.loc[("fluid", 150), "mean"]
    assert abs(fluid - c.mean()) <= c.std()                  # within the split-to-split spread
    assert curves.loc[("random", 150), "mean"] > fluid        # random, scored by the score, wins


def test_ceiling_arguments_validated():
    values, *_ = simulate_2pl(20, 30, seed=0)
    m = _matrix(values)
    with pytest.raises(TypeError):
        agreement_ceiling(values)
    with pytest.raises(ValueError, match="n_splits"):
        agreement_ceiling(m, n_splits=0)
    with pytest.raises(ValueError, match="reference"):
        agreement_ceiling(m, reference="nope")
    with pytest.raises(ValueError, match="groups"):
        agreement_ceiling(m, groups=np.arange(5))


def test_ceiling_n_jobs_invariant():
    values, *_ = simulate_2pl(30, 40, seed=4)
    m = _matrix(values)
    pd.testing.assert_series_equal(agreement_ceiling(m, n_splits=12, n_test=5),
                                   agreement_ceiling(m, n_splits=12, n_test=5, n_jobs=2))


# ------------------------------------------------------------------- held-out groups
def test_split_models_groups_none_unchanged():
    for split in range(5):
        a = split_models(50, 10, 7, split)
        b = split_models(50, 10, 7, split, groups=None)
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])


def test_split_models_groups_hold_out_whole_groups():
    groups = np.repeat(np.arange(8), 12)
    for split in range(10):
        train, test = split_models(96, 10, 0, split, groups=groups, n_test_groups=2)
        held = np.unique(groups[test])
        assert test.size == 10 and held.size <= 2
        assert not np.isin(groups[train], held).any()         # no member of a test group trains
        assert np.unique(groups[train]).size == 6
    with pytest.raises(ValueError, match="n_test_groups"):
        split_models(96, 10, 0, 0, groups=groups, n_test_groups=8)
    with pytest.raises(ValueError, match="n_test"):
        split_models(96, 30, 0, 0, groups=groups, n_test_groups=2)


def test_protocol_groups_none_identical_and_grouped_runs():
    values, *_ = simulate_2pl(48, 40, seed=6)
    m = _matrix(values)
    kw = dict(methods=["fluid", "random", "disco"], ks=[3, 10], n_splits=3, n_test=6, progress=False)
    a = run_protocol(m, **kw)
    b = run_protocol(m, groups=None, **kw)
    pd.testing.assert_frame_equal(a, b)
    groups = np.repeat(list("abcdef"), 8)
    g = run_protocol(m, groups=groups, n_test_groups=2, **kw)
    assert g.attrs["grouped"] and g.attrs["n_test_groups"] == 2
    assert not g["agreement"].equals(a["agreement"])
    c = agreement_ceiling(m, n_splits=3, n_test=6, groups=groups, n_test_groups=2)
    assert c.attrs["grouped"] and c.notna().all()


def test_ceiling_benchmark_and_table(tmp_path):
    from irtbook.ceiling import ceiling_benchmark, ceiling_table
    from irtbook.pipeline import load_benchmark

    bench = load_benchmark("simplesafetytests", source="simulated")
    c = ceiling_benchmark(bench, n_splits=3, cache_dir=tmp_path)
    pd.testing.assert_series_equal(c, agreement_ceiling(bench.full, n_splits=3))
    pd.testing.assert_series_equal(c, ceiling_benchmark(bench, n_splits=3, cache_dir=tmp_path))
    t = ceiling_table({"sst": c, "with_nan": pd.Series([1.0, np.nan, 0.5])})
    assert t.loc["sst", "mean"] == pytest.approx(c.mean())
    assert t.loc["with_nan", "mean"] == pytest.approx(0.5) and t.loc["with_nan", "n_undefined"] == 1
    table = ceiling_table({"x": pd.Series([1.0, np.nan, 0.5])}, nan_policy="omit")
    assert table.loc["x", "mean"] == pytest.approx(0.75)


def test_ceiling_with_the_c_ability_sums_equals_numpys_bit_for_bit(monkeypatch):
    from irtlib.selection import ability_kernel

    if ability_kernel.load() is None:
        pytest.skip("the ability kernel cannot be built here")
    values, *_ = simulate_2pl(45, 300, seed=13, missing=0.05)
    m = _matrix(values)
    with_kernel = agreement_ceiling(m, n_splits=6, n_test=9, seed=4, variance_threshold=None)
    monkeypatch.setitem(ability_kernel._LOADED, "lib", None)
    assert ability_kernel.map_row_sums() is None
    with_numpy = agreement_ceiling(m, n_splits=6, n_test=9, seed=4, variance_threshold=None)
    assert with_kernel.equals(with_numpy)
