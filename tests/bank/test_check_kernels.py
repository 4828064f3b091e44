"""The interval check's kernels (irtlib.bank.replay_kernel, irtlib.bank.interval_sums) against the engine, brute
force and score_interval."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import simulate_2pl

from irtlib.bank import coverage, interval_sums, replay_kernel
from irtlib.bank.intervals import score_interval
from irtlib.core.ability import map_ability
from irtlib.core.kernels import fisher_information
from irtlib.core.responses import ResponseMatrix
from irtlib.selection.adaptive import run_adaptive
from irtlib.selection.selectors import MaxInformation


@pytest.fixture(scope="module")
def lib():
    got = replay_kernel.load()
    if got is None:
        pytest.skip("the replay kernel cannot be built here")
    return got


def _bank(seed, n_models, n_items, *, spread=0.7, missing=0.1):
    rng = np.random.default_rng(seed)
    a, b = np.exp(rng.normal(0.0, spread, n_items)), rng.normal(0.0, 1.5, n_items)
    theta = rng.normal(0.0, 1.5, n_models)
    x = (rng.random((n_models, n_items)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    x[rng.random(x.shape) < missing] = np.nan
    return x, a, b


@pytest.mark.parametrize("seed, n_models, n_items, spread", [(0, 40, 700, 0.7), (1, 30, 2000, 1.2), (2, 36, 500, 0.1)])
def test_replays_give_the_engines_items_and_estimates(lib, seed, n_models, n_items, spread):
    x, a, b = _bank(seed, n_models, n_items, spread=spread)
    x[3, 50:] = np.nan                        # a model that runs out of items before the budget
    budget = 80
    items, estimate = replay_kernel.fluid_replay(lib, x, a, b, budget=budget)
    want = run_adaptive(x, a, b, budget=budget, selector=MaxInformation(radii=coverage.REPLAY_RADII))
    np.testing.assert_array_equal(items, want.items)
    np.testing.assert_allclose(estimate, want.estimate, rtol=0, atol=1e-6)
    assert (items[3, int((~np.isnan(x[3])).sum()):] == -1).all()


def test_each_pick_is_the_argmax_of_the_information_over_the_unused_items(lib):
    x, a, b = _bank(3, 25, 900, spread=1.0)
    a[600:650], b[600:650] = a[100:150], b[100:150]      # duplicated items: ties go to the lower index
    items, estimate = replay_kernel.fluid_replay(lib, x, a, b, budget=60)
    for m in range(x.shape[0]):
        blocked = np.isnan(x[m])
        theta = 0.0
        for t in range(60):
            info = fisher_information(theta, a, b)
            info[blocked] = -np.inf
            j = int(np.argmax(info))
            assert items[m, t] == j
            blocked[j] = True
            theta = estimate[m, t]


def test_estimates_are_the_posterior_mode_of_the_items_given(lib):
    x, a, b = _bank(4, 20, 600)
    items, estimate = replay_kernel.fluid_replay(lib, x, a, b, budget=50)
    for m in range(0, 20, 3):
        for t in (0, 1, 9, 49):
            given = items[m, :t + 1]
            mode = map_ability(x[m, given], a[given], b[given], tol=1e-14).theta
            assert estimate[m, t] == pytest.approx(float(mode), abs=1e-12)


def test_replays_do_not_depend_on_the_threads(lib):
    x, a, b = _bank(5, 70, 400)
    one = replay_kernel.fluid_replay(lib, x, a, b, budget=40, threads=1)
    two = replay_kernel.fluid_replay(lib, x, a, b, budget=40, threads=2)
    for got, want in zip(one, two, strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("off", [("replay",), ("sums",), ("replay", "sums")])
def test_the_interval_check_is_the_same_with_its_kernels_and_without(lib, monkeypatch, off):
    if interval_sums.load() is None:
        pytest.skip("the interval sums kernel cannot be built here")
    values, *_ = simulate_2pl(60, 300, seed=6)
    matrix = ResponseMatrix(values, [f"m{i:02d}" for i in range(60)], [f"q{j:03d}" for j in range(300)])
    kept = matrix.filter_variance(0.01)
    rates = matrix.item_safe_rates()
    filtered_sum = float(rates[~rates.index.isin(kept.items)].sum())
    with_kernels = coverage.interval_check(matrix, kept.items, filtered_sum)
    for name in off:
        monkeypatch.setitem({"replay": replay_kernel, "sums": interval_sums}[name]._LOADED, "lib", None)
    assert coverage.interval_check(matrix, kept.items, filtered_sum) == with_kernels
    assert len(with_kernels["k"]) >= 8 and max(with_kernels["inflation"]) > 1.0


def test_interval_sums_give_score_intervals_to_rounding():
    lib = interval_sums.load()
    if lib is None:
        pytest.skip("the interval sums kernel cannot be built here")
    rng = np.random.default_rng(7)
    n, m = 30, 3001                                   # not a multiple of the kernel's chunk of items
    a, b = np.exp(rng.normal(0.0, 1.0, m)), rng.normal(0.0, 2.0, m)
    theta, se = rng.normal(0.0, 2.0, n), rng.uniform(0.05, 1.5, n)
    known = np.where(rng.random((n, 40)) < 0.7, rng.integers(0, m, (n, 40)), -1)
    known[0] = -1                                     # a model with no known item
    kwargs = {"known_items": known, "known_sum": rng.integers(0, 30, n).astype(float), "filtered_sum": 2.5,
              "n_full": m + 7}
    for got, want in zip(interval_sums.interval(lib, a, b, theta, se, **kwargs),
                         score_interval(a, b, theta, se, **kwargs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


def test_the_interval_sums_kernel_is_off_when_turned_off(monkeypatch):
    monkeypatch.setattr(interval_sums, "_LOADED", {})
    monkeypatch.setenv("IRTLIB_INTERVAL_SUMS", "0")
    assert interval_sums.load() is None


def test_the_replay_kernel_is_off_when_turned_off(monkeypatch):
    monkeypatch.setattr(replay_kernel, "_LOADED", {})
    monkeypatch.setenv("IRTLIB_REPLAY_KERNEL", "0")
    assert replay_kernel.load() is None
