"""Maximum information's full pass in C (maxinfo_kernel.FullPass): the brute-force argmax at every step, safe bounds."""

from __future__ import annotations

import numpy as np
import pytest

from irtlib.core.kernels import fisher_information
from irtlib.selection import maxinfo_kernel, selectors
from irtlib.selection.items import TwoPLItems
from irtlib.selection.selectors import MaxInformation


@pytest.fixture(scope="module")
def lib():
    built = maxinfo_kernel.load()
    if built is None:
        pytest.skip("the four-lane maximum-information kernel is not available here")
    return built


def _brute(a, b, unused, theta):
    """numpy's argmax of fisher_information over the unused items (the rule's definition)."""
    with np.errstate(over="ignore", invalid="ignore"):
        info = fisher_information(theta[:, None], a, b)
    return np.argmax(np.where(unused, info, -np.inf), axis=1)


def _walk(rng, n_models, steps, scale):
    """Abilities that move by steps of every size: small (cached picks) and large (bound-triggered passes)."""
    jumps = rng.normal(0.0, 1.0, (steps, n_models)) * scale * np.exp(rng.normal(0.0, 1.5, (steps, n_models)))
    return np.clip(np.cumsum(jumps, axis=0) + rng.normal(0.0, 1.0, n_models), -8.0, 8.0)


def _run(a, b, available, thetas, *, fused, **options):
    """The picks of every step, checked against the brute force; also the run (for its counters)."""
    import os

    os.environ["IRTLIB_MAXINFO_FULL"] = "1" if fused else "0"
    try:
        run = MaxInformation(**options).begin(TwoPLItems(a, b), available)
    finally:
        os.environ.pop("IRTLIB_MAXINFO_FULL")
    assert (run.fused is not None) == fused
    picks = []
    for theta in thetas:
        live = run.unused.any(axis=1)
        want = _brute(a, b, run.unused, theta)
        got = run.select(theta)
        np.testing.assert_array_equal(got[live], want[live])
        assert (got[~live] == -1).all()
        picks.append(got)
    return np.array(picks), run


def _bank(rng, n_models, n_items, *, per_model, twins=0.0, spread=1.0):
    shape = (n_models, n_items) if per_model else (n_items,)
    a = np.exp(rng.normal(0.0, 0.6 * spread, shape))
    b = rng.normal(0.0, 1.5 * spread, shape)
    if twins:
        src = rng.integers(0, max(n_items // 20, 1), shape)           # a few items copied many times
        copy = rng.random(shape) < twins
        a = np.where(copy, np.take_along_axis(a, src, -1), a)
        b = np.where(copy, np.take_along_axis(b, src, -1), b)
    return a, b


@pytest.mark.parametrize("per_model", [False, True])
@pytest.mark.parametrize("twins", [0.0, 0.6])
def test_c_full_pass_gives_the_brute_force_argmax_and_the_numpy_runs_picks(lib, per_model, twins):
    rng = np.random.default_rng(31 + per_model + int(10 * twins))
    n_models, n_items, steps = 12, 1500, 120
    a, b = _bank(rng, n_models, n_items, per_model=per_model, twins=twins)
    available = rng.random((n_models, n_items)) > 0.1
    available[0, :] = False
    available[0, :50] = True                                          # a model that runs out of items
    thetas = _walk(rng, n_models, steps, 0.05)
    for cache in (64, 256):
        new, run = _run(a, b, available, thetas, fused=True, cache_size=cache)
        old, _ = _run(a, b, available, thetas, fused=False, cache_size=cache)
        np.testing.assert_array_equal(new, old)
        live_steps = int((new >= 0).sum())
        assert n_models <= run.full_passes < live_steps                # cached picks and bound-triggered passes


def test_ties_and_exact_twins_beyond_the_cache_take_the_lowest_column(lib):
    rng = np.random.default_rng(5)
    n_items = 900
    a = np.full(n_items, 1.3)
    b = np.repeat(rng.normal(0.0, 1.0, 9), 100)                       # nine groups of 100 identical items
    b[::7] = 0.25                                                     # and a tie group across them
    available = np.ones((6, n_items), dtype=bool)
    thetas = _walk(rng, 6, 200, 0.02)
    new, run = _run(a, b, available, thetas, fused=True, cache_size=64)
    old, _ = _run(a, b, available, thetas, fused=False, cache_size=64)
    np.testing.assert_array_equal(new, old)


def test_large_discriminations_and_far_items_fall_back_to_numpy_rows(lib):
    rng = np.random.default_rng(9)
    n_items = 700
    a = np.exp(rng.normal(0.0, 1.0, n_items))
    a[:40] = rng.uniform(60.0, 120.0, 40)                             # |a (theta - b)| beyond 700 for some thetas
    b = rng.normal(0.0, 2.0, n_items)
    b[:40] = 0.0
    available = np.ones((8, n_items), dtype=bool)
    thetas = _walk(rng, 8, 80, 0.3)
    thetas[:, 0] = -8.0                                              # model 0's rows: numpy's, the others C's
    run = MaxInformation(cache_size=128).begin(TwoPLItems(a, b), available)
    wild = run.fused(np.arange(8), np.array([-8.0, 0.0, 0.5, -1.0, 1.0, 2.0, -7.9, 0.1]))[1]
    assert wild[0] and wild[6] and not wild[1:6].any()
    new, _ = _run(a, b, available, thetas, fused=True, cache_size=128)
    old, _ = _run(a, b, available, thetas, fused=False, cache_size=128)
    np.testing.assert_array_equal(new, old)


def test_near_ties_within_the_margin_are_decided_exactly(lib):
    n = 16
    a = np.ones(n)
    b = np.array([(j // 2 + 1) * 1e-7 * (1 if j % 2 else -1) for j in range(n)])
    b[11] = 0.0                                                        # the unique exact maximum at theta = 0
    for cache in (0, 4):
        picks, _ = _run(a, b, np.ones((1, n), dtype=bool), np.zeros((n, 1)), fused=True, cache_size=cache)
        assert picks[0, 0] == 11
        np.testing.assert_array_equal(np.sort(picks[:, 0]), np.arange(n))


@pytest.mark.parametrize("per_model", [False, True])
def test_full_pass_bounds_cover_every_other_item_within_each_radius(lib, per_model):
    """The bound of radius r is at least every unused non-candidate's exact information within r of the centre
    (twins left out only behind an unused candidate of lower column), and the candidates are the largest."""
    rng = np.random.default_rng(13)
    n_models, n_items, cache = 10, 2000, 128
    a, b = _bank(rng, n_models, n_items, per_model=per_model, twins=0.3)
    a[..., :5] = 40.0                                                 # steep items: the cap a^2 / 4 matters
    available = rng.random((n_models, n_items)) > 0.2
    run = MaxInformation(cache_size=cache).begin(TwoPLItems(a, b), available)
    assert run.fused is not None
    theta = rng.normal(0.0, 1.5, n_models)
    rows = np.arange(n_models)
    run._full(rows, theta)
    np.testing.assert_array_equal(run.theta_c, theta)
    for m in rows:
        am, bm = (a[m], b[m]) if per_model else (a, b)
        cand = run.items[m]
        assert (np.diff(cand) > 0).all() and not run.used[m].any()
        other = available[m].copy()
        other[cand] = False
        twin = run.twin[m] if per_model else run.twin
        if run.twinned[m]:                                           # left out: after the label's last candidate
            last = {}
            for j in cand:
                last[twin[j]] = j
            out = np.array([j > last.get(twin[j], n_items) for j in range(n_items)])
            other &= ~out
        info = fisher_information(theta[m], am, bm)
        assert info[cand].min() >= info[other].max() * (1 - 1e-9)    # the cache's largest (ties aside)
        for level, r in enumerate(run.radii):
            grid = theta[m] + np.linspace(-r, r, 41)
            worst = fisher_information(grid[:, None], am[other], bm[other]).max()
            assert run.bound[m, level] >= worst
            assert run.bound[m, level] <= worst * np.exp(am.max() * r) * 1.01 + 1e-300   # and not vacuous
        assert run.bound[m, -1] == np.inf


def test_the_switch_keeps_the_numpy_full_pass(monkeypatch):
    monkeypatch.setenv("IRTLIB_MAXINFO_FULL", "0")
    a, b = np.ones(300), np.linspace(-2, 2, 300)
    run = MaxInformation().begin(TwoPLItems(a, b), np.ones((2, 300), dtype=bool))
    assert isinstance(run, selectors._MaxInfoRun) and run.fused is None
    theta = np.array([0.0, 0.7])
    np.testing.assert_array_equal(run.select(theta), _brute(a, b, np.ones((2, 300), dtype=bool), theta))


def test_inactive_models_keep_their_state_and_the_c_step_matches_numpy(lib):
    import os

    rng = np.random.default_rng(23)
    n_models, n_items = 9, 800
    a, b = _bank(rng, n_models, n_items, per_model=True, twins=0.2)
    available = np.ones((n_models, n_items), dtype=bool)
    thetas = _walk(rng, n_models, 100, 0.05)
    actives = rng.random((100, n_models)) < 0.7
    runs = {}
    for fused in (True, False):
        os.environ["IRTLIB_MAXINFO_FULL"] = "1" if fused else "0"
        try:
            runs[fused] = MaxInformation(cache_size=64).begin(TwoPLItems(a, b), available)
        finally:
            os.environ.pop("IRTLIB_MAXINFO_FULL")
    for theta, active in zip(thetas, actives, strict=True):
        want = np.where(active, _brute(a, b, runs[True].unused, theta), -1)
        for run in runs.values():
            np.testing.assert_array_equal(run.select(theta, active=active), want)
        np.testing.assert_array_equal(runs[True].unused, runs[False].unused)
        np.testing.assert_array_equal(runs[True].left, runs[False].left)


def test_column_major_inputs_take_the_c_path_with_the_same_picks(lib):
    """A DataFrame's values are often column-major: the run keeps a row-major copy for the kernel."""
    rng = np.random.default_rng(29)
    n_models, n_items = 7, 600
    a, b = _bank(rng, n_models, n_items, per_model=True)
    available = np.asfortranarray(rng.random((n_models, n_items)) > 0.2)
    a, b = np.asfortranarray(a), np.asfortranarray(b)
    thetas = _walk(rng, n_models, 60, 0.1)
    new, run = _run(a, b, available, thetas, fused=True, cache_size=64)
    old, _ = _run(a, b, available, thetas, fused=False, cache_size=64)
    np.testing.assert_array_equal(new, old)


def test_models_sharing_a_bank_row_take_it_once_with_the_brute_force_picks(lib):
    """Per-model banks whose consecutive rows are equal (a split's test models): the full pass reads one copy of each
    (maxinfo_full_mapped) and gives the brute-force argmax at every step, twins and all."""
    rng = np.random.default_rng(29)
    n_items = 700
    a0, b0 = _bank(rng, 4, n_items, per_model=True, twins=0.3)
    reps = np.array([3, 1, 4, 2])                                      # groups of equal rows, one alone
    a, b = np.repeat(a0, reps, axis=0), np.repeat(b0, reps, axis=0)
    available = rng.random(a.shape) > 0.1
    thetas = _walk(rng, a.shape[0], 120, 0.05)
    picks, run = _run(a, b, available, thetas, fused=True, cache_size=32)
    assert run.fused.bankrow is not None and np.array_equal(run.fused.bankrow, np.repeat(np.arange(4), reps))
    assert run.full_passes > a.shape[0]
    want, _ = _run(a, b, available, thetas, fused=False, cache_size=32)
    np.testing.assert_array_equal(picks, want)
