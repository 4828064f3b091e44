"""The simulation study's generator variants (simulate_variant) and its runner."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from irtbook import simulation_study as study
from irtlib.datasets import simulate as sim


def test_variant_defaults_reproduce_the_release():
    for name in ("safetybench", "simplesafetytests"):
        a, b = sim.simulate(name), sim.simulate_variant(name)
        pd.testing.assert_frame_equal(a.responses, b.responses)
        pd.testing.assert_frame_equal(a.items, b.items)
        pd.testing.assert_frame_equal(a.models, b.models)


def test_variant_knobs_do_what_they_say():
    base = sim.simulate_variant(n_items=200)
    assert base.items.shape[0] == 200 and base.models.shape[0] == 29
    none = sim.simulate_variant(n_items=200, guess_scale=0.0)
    assert (none.models["gen_guess"] == 0).all()
    double = sim.simulate_variant(n_items=200, guess_scale=2.0)
    np.testing.assert_allclose(double.models["gen_guess"], np.minimum(2 * base.models["gen_guess"], 1))
    one = sim.simulate_variant(n_items=200, dim_correlation=1.0)
    theta = one.models.filter(like="gen_theta_").to_numpy()
    np.testing.assert_allclose(theta, theta[:, :1].repeat(theta.shape[1], axis=1))
    shifted = sim.simulate_variant(n_items=200, ability_shift=2.0)
    np.testing.assert_allclose(shifted.models.filter(like="gen_theta_").to_numpy(),
                               base.models.filter(like="gen_theta_").to_numpy() + 2.0)
    for cv in (0.2, 1.3):
        a = sim.simulate_variant(n_items=4000, a_cv=cv).items["gen_a"]
        assert a.std() / a.mean() == pytest.approx(cv, rel=0.15)
    big = sim.simulate_variant(n_items=50, n_models=77)
    assert big.models.shape[0] == 77 and big.responses["model"].nunique() == 77


def test_variant_rejects_bad_arguments():
    with pytest.raises(ValueError, match="guess_scale"):
        sim.simulate_variant(guess_scale=-1)
    with pytest.raises(ValueError, match="dim_correlation"):
        sim.simulate_variant(dim_correlation=1.5)
    with pytest.raises(ValueError, match="n_models"):
        sim.simulate_variant(n_models=2)
    with pytest.raises(ValueError, match="n_items"):
        sim.simulate_variant(n_items=3)
    with pytest.raises(ValueError, match="n_models"):
        sim.simulate_variant("harmbench", n_models=40)      # HarmBench takes a subset of its population
    with pytest.raises(ValueError, match="cv"):
        sim.lognormal_for_cv(0.0, 1.0)


def test_lognormal_for_cv():
    mu, sigma = sim.lognormal_for_cv(0.5, 2.0)
    assert np.sqrt(np.exp(sigma ** 2) - 1) == pytest.approx(0.5)
    assert np.exp(mu + sigma ** 2 / 2) == pytest.approx(2.0)


def test_run_study_small_and_shared_settings():
    factors = {"guessing": ("guess_scale", (0.0, 1.0)), "ability shift": ("ability_shift", (0.0,))}
    summary, curves, runs = study.run_study(factors, n_items=60, n_splits=2, max_k=30, n_points=5)
    assert list(summary["factor"]) == ["guessing", "guessing", "ability shift"]
    assert runs[("guessing", 1.0)] is runs[("ability shift", 0.0)]     # the baseline runs once
    assert (summary["k"] == 20).all()
    np.testing.assert_allclose(summary["diff_k"], summary["fluid_k"] - summary["random_k"], atol=1e-12)
    assert summary["ceiling"].between(-1, 1).all()
    run = runs[("guessing", 0.0)]
    assert len(run["ceiling"]) == 2 and set(run["results"]["method"]) == {"fluid", "random"}
    assert set(curves["factor"]) == {"guessing", "ability shift"}


def test_run_setting_cached(tmp_path):
    first = study.run_setting({"guess_scale": 0.0}, n_items=40, n_splits=2, max_k=20, n_points=4, cache_dir=tmp_path)
    second = study.run_setting({"guess_scale": 0.0}, n_items=40, n_splits=2, max_k=20, n_points=4, cache_dir=tmp_path)
    pd.testing.assert_frame_equal(first["results"], second["results"])
    assert len(list(tmp_path.glob("*.pkl"))) == 1
