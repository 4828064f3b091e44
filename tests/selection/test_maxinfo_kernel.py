"""Maximum information's four-lane candidate kernel: numpy's argmax and value, bit for bit, and the same tests."""

from __future__ import annotations

import numpy as np
import pytest

from irtlib.core.kernels import fisher_information
from irtlib.selection import maxinfo_kernel, score_kernel
from irtlib.selection.adaptive import run_adaptive
from irtlib.selection.estimators import MapEstimator, MleEstimator
from irtlib.selection.selectors import MaxInformation


@pytest.fixture(scope="module", params=["avx2", "avx512"])
def lib(request):
    """The kernel built four lanes wide (AVX2) and, where the processor has AVX-512F and DQ, eight lanes wide."""
    from irtlib.calibration.fused_kernel import compiled, cpu_flags

    flags = ()
    if request.param == "avx512":
        if not {"avx512f", "avx512dq"} <= cpu_flags():
            pytest.skip("no AVX-512F and DQ here")
        flags = maxinfo_kernel.AVX512_FLAGS
    built = compiled(maxinfo_kernel.SOURCE, maxinfo_kernel._bind, switch="IRTLIB_MAXINFO_KERNEL", extra_flags=flags)
    if built is None:
        pytest.skip("the four-lane candidate kernel cannot be built here")
    assert built.maxinfo_vector_width() == (8 if flags else 4)
    return built


def _numpy(theta, a, b, used):
    with np.errstate(invalid="ignore", over="ignore"):
        info = np.where(used, -np.inf, fisher_information(theta[:, None], a, b))
    k = np.argmax(info, axis=1)
    return k, info[np.arange(k.size), k]


def test_four_lane_candidates_are_numpys_argmax_with_twins_near_ties_and_every_row_length(lib):
    rng = np.random.default_rng(17)
    lengths = [*range(1, 20), 255, 256, 257, 300]
    for trial in range(120):
        n, c = 30, lengths[trial % len(lengths)]
        a, b = np.exp(rng.normal(0, 1.5, (n, c))), rng.normal(0, 5, (n, c))
        twin = rng.random((n, c)) < 0.3                          # copies of another candidate: exact ties
        src = rng.integers(0, c, (n, c))
        a = np.where(twin, np.take_along_axis(a, src, 1), a)
        b = np.where(twin, np.take_along_axis(b, src, 1), b)
        b = np.where(rng.random((n, c)) < 0.1, np.nextafter(b, np.inf), b)     # near ties, one ulp apart
        theta = rng.uniform(-8, 8, n)
        theta[:2] = 8.0, -8.0
        used = rng.random((n, c)) < rng.random()
        used[-1] = True                                          # every candidate used: k 0, -inf
        k, best = maxinfo_kernel.best_candidates(lib, theta, a, b, used)
        k0, best0 = _numpy(theta, a, b, used)
        np.testing.assert_array_equal(k, k0, err_msg=f"c={c}")
        np.testing.assert_array_equal(best, best0, err_msg=f"c={c}")
        assert k[-1] == 0 and best[-1] == -np.inf


def test_four_lane_candidates_equal_the_scalar_kernel_and_numpy_on_the_loaders_random_cases(lib):
    rng = np.random.default_rng(3)
    scalar = score_kernel.load()
    for spread in (0.0, 0.01, 1.0, 30.0):
        for wild in (False, True):
            theta, a, b, used = maxinfo_kernel.random_case(rng, 50, 261, spread=spread, wild=wild)
            k, best = maxinfo_kernel.best_candidates(lib, theta, a, b, used)
            k0, best0 = maxinfo_kernel.numpy_best(theta, a, b, used)
            np.testing.assert_array_equal(k, k0)
            np.testing.assert_array_equal(best, best0)
            if scalar is not None:
                k1, best1 = score_kernel.best_candidates(scalar, theta, a, b, used)
                np.testing.assert_array_equal(k, k1)
                np.testing.assert_array_equal(best, best1)


def test_four_lane_candidates_take_nan_infinities_and_far_abilities_as_numpy(lib):
    c = 9
    a = np.ones((7, c))
    b = np.linspace(-2.0, 2.0, c)[None, :].repeat(7, axis=0)
    theta = np.zeros(7)
    a[0, 5] = np.nan                 # a NaN information: numpy's argmax returns the first NaN
    b[1, 2] = np.inf                 # b infinite: that candidate's information is 0
    theta[2] = np.inf                # an infinite ability: every information is 0 or NaN
    b[3, :4] = 800.0                 # z beyond the rough exponential's range on one lane group
    a[4, 6] = 1e150                  # a beyond 1e100 (its information 0 here): the row is evaluated exactly whole
    a[5] = 1e3                       # information far below 1e-280 away from b
    b[5] = np.linspace(1.0, 2.0, c)
    used = np.zeros((7, c), dtype=bool)
    used[6, ::2] = True
    k, best = maxinfo_kernel.best_candidates(lib, theta, a, b, used)
    k0, best0 = _numpy(theta, a, b, used)
    np.testing.assert_array_equal(k, k0)
    np.testing.assert_array_equal(best, best0)
    assert k[0] == 5 and np.isnan(best[0])


def test_max_information_gives_the_same_items_and_estimates_with_and_without_the_four_lane_kernel(monkeypatch):
    if maxinfo_kernel.load() is None or score_kernel.load() is None:
        pytest.skip("the candidate kernels cannot be built here (or this processor has no AVX2)")
    rng = np.random.default_rng(8)
    n, m = 40, 900
    a = np.exp(rng.normal(0.0, 0.5, (n, m)))
    b = rng.normal(0.0, 1.5, (n, m))
    theta = rng.normal(0.0, 1.0, n)
    x = (rng.random((n, m)) < 1.0 / (1.0 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    x[rng.random((n, m)) < 0.05] = np.nan
    runs = {}
    for vector in (True, False):
        if not vector:
            monkeypatch.setattr(maxinfo_kernel, "load", lambda: None)
        for est in (MapEstimator, MleEstimator):
            runs[vector, est] = run_adaptive(x, a, b, budget=400, selector=MaxInformation(), estimator=est())
    for est in (MapEstimator, MleEstimator):
        np.testing.assert_array_equal(runs[True, est].items, runs[False, est].items)
        np.testing.assert_array_equal(runs[True, est].estimate, runs[False, est].estimate)


@pytest.mark.parametrize("per_model", [False, True])
def test_max_information_with_twin_groups_larger_than_its_cache_picks_as_without_cache(per_model):
    rng = np.random.default_rng(21)
    n, groups, size = 24, 30, 40                              # 1,200 items, 30 distinct (a, b), 40 copies each
    ga, gb = np.exp(rng.normal(0.0, 0.4, groups)), rng.normal(0.0, 1.2, groups)
    label = rng.permutation(np.repeat(np.arange(groups), size))
    a, b = ga[label], gb[label]
    if per_model:                                             # two calibrations, models alternating
        a = np.where(np.arange(n)[:, None] % 2 == 0, a[None, :], a[None, ::-1])
        b = np.where(np.arange(n)[:, None] % 2 == 0, b[None, :], b[None, ::-1])
    theta = rng.normal(0.0, 1.0, n)
    x = (rng.random((n, label.size)) < 0.5).astype(float)
    x[rng.random(x.shape) < 0.05] = np.nan
    cached = run_adaptive(x, a, b, budget=500, selector=MaxInformation(cache_size=32), estimator=MapEstimator(),
                          theta0=theta)
    plain = run_adaptive(x, a, b, budget=500, selector=MaxInformation(cache_size=0, screen=False),
                         estimator=MapEstimator(), theta0=theta)
    np.testing.assert_array_equal(cached.items, plain.items)
    np.testing.assert_array_equal(cached.estimate, plain.estimate)


def test_twins_of_lower_index_candidates_are_left_out_of_the_bound_until_their_label_runs_out():
    from irtlib.selection.selectors import _MaxInfoRun

    a = np.array([1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 1.0, 1.0])      # label of (1, 0): items 0-3, 6, 7
    b = np.array([0.0, 0.0, 0.0, 0.0, 2.0, 2.0, 0.0, 0.0])
    run = _MaxInfoRun(a, b, np.ones((1, a.size), dtype=bool), 2, np.array([0.001, 0.3]), True)
    theta = np.zeros(1)
    picks = [int(run.select(theta)[0]) for _ in range(6)]
    assert picks == [0, 1, 2, 3, 6, 7]                          # twins in index order, then the next label
    assert run.full_passes < 6                                  # the twins beyond the cache did not force passes


def test_the_eight_lane_build_gives_the_four_lane_builds_items_and_estimates(monkeypatch):
    """Where the processor has AVX-512 the loader keeps the eight-lane build: the same picks at every step."""
    from irtlib.calibration.fused_kernel import compiled, cpu_flags

    if not {"avx512f", "avx512dq"} <= cpu_flags() or maxinfo_kernel.load() is None or score_kernel.load() is None:
        pytest.skip("no AVX-512 or no candidate kernel here")
    wide = compiled(maxinfo_kernel.SOURCE, maxinfo_kernel._bind, switch="IRTLIB_MAXINFO_KERNEL",
                    extra_flags=maxinfo_kernel.AVX512_FLAGS)
    narrow = compiled(maxinfo_kernel.SOURCE, maxinfo_kernel._bind, switch="IRTLIB_MAXINFO_KERNEL")
    assert maxinfo_kernel.load()._name == wide._name != narrow._name
    rng = np.random.default_rng(12)
    n, m = 37, 1203                                 # neither a multiple of the eight lanes
    a = np.exp(rng.normal(0.0, 0.5, m))
    b = rng.normal(0.0, 1.5, m)
    a[1::9], b[1::9] = a[0::9][:a[1::9].size], b[0::9][:b[1::9].size]      # twins
    theta = rng.normal(0.0, 1.0, n)
    x = (rng.random((n, m)) < 1.0 / (1.0 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    x[rng.random((n, m)) < 0.05] = np.nan
    for bank in ((a, b), (np.tile(a, (n, 1)) * rng.uniform(0.9, 1.1, (n, m)), np.tile(b, (n, 1)))):
        runs = []
        for built in (wide, narrow):
            monkeypatch.setitem(maxinfo_kernel._LOADED, "lib", built)
            runs.append(run_adaptive(x, *bank, budget=500, selector=MaxInformation(), estimator=MleEstimator()))
        np.testing.assert_array_equal(runs[0].items, runs[1].items)
        np.testing.assert_array_equal(runs[0].estimate, runs[1].estimate)
    monkeypatch.setattr(maxinfo_kernel, "_LOADED", {})
    monkeypatch.setenv("IRTLIB_MAXINFO_KERNEL_AVX512", "0")
    assert maxinfo_kernel.load()._name == narrow._name


@pytest.mark.parametrize("seed", range(1, 9))
def test_the_ranked_step_gives_the_full_scans_picks_and_state_along_random_walks(lib, seed):
    """maxinfo_step_sorted (candidates ranked once per full pass, bounds by the tangent of the log-information)
    against maxinfo_step (every candidate evaluated), with twins, groups of copies and near ties."""
    assert maxinfo_kernel.ranked_steps_match(lib, seed=seed, n_steps=150)


def test_the_ranked_step_keeps_the_brute_force_argmax_as_candidates_run_out(monkeypatch):
    """Long tests on a small cache (used candidates dropped from the ranking as the scan passes them) and the
    switch back to the full scan: the same items and estimates."""
    rng = np.random.default_rng(31)
    n_models, n_items = 7, 400
    a = np.exp(rng.normal(0.0, 0.7, (n_models, n_items)))
    b = rng.normal(0.0, 1.5, (n_models, n_items))
    a[:, 50:90], b[:, 50:90] = a[:, 50:51], b[:, 50:51]                    # copies: exact ties
    p = 1.0 / (1.0 + np.exp(-a * (rng.normal(size=(n_models, 1)) - b)))
    x = (rng.random((n_models, n_items)) < p).astype(float)
    x[rng.random(x.shape) < 0.05] = np.nan
    runs = []
    for ranked in ("1", "0"):
        monkeypatch.setenv("IRTLIB_MAXINFO_RANKED", ranked)
        runs.append(run_adaptive(x, a, b, budget=300, selector=MaxInformation(cache_size=16),
                                 estimator=MapEstimator()))
    runs.append(run_adaptive(x, a, b, budget=300, selector=MaxInformation(cache_size=0), estimator=MapEstimator()))
    np.testing.assert_array_equal(runs[0].items, runs[1].items)
    np.testing.assert_array_equal(runs[0].estimate, runs[1].estimate)
    np.testing.assert_array_equal(runs[0].items, runs[2].items)        # without a cache: every item each step
    np.testing.assert_array_equal(runs[0].estimate, runs[2].estimate)
