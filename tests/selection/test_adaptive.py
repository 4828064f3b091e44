"""Algorithm 1 (irtlib.selection.adaptive): selection rules, estimators and the vectorised loop."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import simulate_2pl

from irtlib.bank.coverage import REPLAY_RADII
from irtlib.core.ability import map_ability
from irtlib.core.kernels import fisher_information
from irtlib.selection.adaptive import (
    MapEstimator,
    MaxInformation,
    MeanScoreEstimator,
    RandomSelection,
    Trajectory,
    run_adaptive,
    run_adaptive_reference,
)
from irtlib.selection.items import TwoPLItems
from irtlib.selection.selectors import Streams


def _administered(x, traj, k):
    """Responses and parameters of the first k items each model was given."""
    items = traj.items[:, :k]
    return np.take_along_axis(x, items, axis=1), items


# ---------------------------------------------------------------------------- selection
def test_max_information_first_pick_is_the_argmax_of_a2_p_1_minus_p():
    # Hand-made bank: at theta = 0 the information a^2 P (1 - P) of the five items is
    # 0.250, 0.462, 0.137, 0.110 and 0.961 (a = 2, b = 0.2: the largest a close to theta), so
    # item 4 comes first; at theta = 2 it is 0.105, 0.219, 0.049, 0.360 and 0.104: item 3
    # (a = 1.2, b = 2) sits at its peak a^2 / 4 and wins.
    a = np.array([1.0, 1.5, 0.8, 1.2, 2.0])
    b = np.array([0.0, 0.6, -1.0, 2.0, 0.2])
    x = np.ones((2, 5))
    for theta, expected in ((0.0, 4), (2.0, 3)):
        info = fisher_information(theta, a, b)
        assert np.argmax(info) == expected
        for sel in (MaxInformation(), MaxInformation(cache_size=0), MaxInformation(cache_size=2, screen=False)):
            run = sel.begin(TwoPLItems(a, b), ~np.isnan(x))
            assert run.select(np.full(2, theta)).tolist() == [expected, expected]


def test_max_information_never_repeats_and_skips_unavailable_items():
    rng = np.random.default_rng(3)
    a, b = rng.lognormal(0, 0.5, 40), rng.normal(size=40)
    available = rng.random((5, 40)) > 0.3
    run = MaxInformation(cache_size=8).begin(TwoPLItems(a, b), available)
    theta = np.zeros(5)
    seen = [set() for _ in range(5)]
    for _ in range(40):
        picks = run.select(theta)
        for m, j in enumerate(picks):
            if j >= 0:
                assert available[m, j] and j not in seen[m]
                # the pick is the best unused available item at this theta
                info = fisher_information(theta[m], a, b)
                info[~available[m]] = -np.inf
                info[list(seen[m])] = -np.inf
                assert j == np.argmax(info)
                seen[m].add(j)
            else:
                assert len(seen[m]) == available[m].sum()      # -1 only once exhausted
        theta = theta + rng.normal(0, 0.2, 5)                  # move around: caches must follow
    assert [len(s) for s in seen] == available.sum(axis=1).tolist()


def test_caches_and_screening_change_nothing():
    x, _, a, b = simulate_2pl(12, 600, seed=4, sd_log_a=0.8)
    ref = run_adaptive(x, a, b, budget=200, selector=MaxInformation(cache_size=0, screen=False))
    for sel in (MaxInformation(), MaxInformation(cache_size=16), MaxInformation(cache_size=0),
                MaxInformation(cache_size=64, screen=False), MaxInformation(radii=REPLAY_RADII)):
        traj = run_adaptive(x, a, b, budget=200, selector=sel)
        np.testing.assert_array_equal(traj.items, ref.items)
        np.testing.assert_array_equal(traj.estimate, ref.estimate)


def test_twin_items_go_to_the_lowest_index():
    # items 1 and 3 are identical: equal information everywhere, so 1 comes before 3
    a = np.array([0.5, 2.0, 0.7, 2.0, 0.6])
    b = np.array([1.0, 0.1, -1.0, 0.1, 2.0])
    x = np.array([[1.0, 0.0, 1.0, 1.0, 0.0]])
    traj = run_adaptive(x, a, b, budget=2)
    assert traj.items[0].tolist() == [1, 3]


def test_random_selection_is_a_seeded_permutation_of_available_items():
    available = np.ones((3, 30), dtype=bool)
    available[1, :10] = False
    orders = [RandomSelection().begin(None, available, Streams(s)) for s in (7, 7, 8)]
    picks = [np.array([o.select() for _ in range(30)]).T for o in orders]
    np.testing.assert_array_equal(picks[0], picks[1])          # same seed, same orders
    assert not np.array_equal(picks[0], picks[2])
    assert sorted(picks[0][0]) == list(range(30))
    assert sorted(picks[0][1][:20]) == list(range(10, 30)) and (picks[0][1][20:] == -1).all()
    assert not np.array_equal(picks[0][0], picks[0][2])        # every model has its own order


# ---------------------------------------------------------------------------- the loop
def test_vectorised_loop_equals_the_one_model_at_a_time_loop():
    x, _, a, b = simulate_2pl(8, 400, seed=1, sd_log_a=0.8, missing=0.02)
    ref = run_adaptive_reference(x, a, b, budget=120)
    traj = run_adaptive(x, a, b, budget=120)
    np.testing.assert_array_equal(traj.items, ref.items)
    np.testing.assert_allclose(traj.estimate, ref.estimate, atol=1e-7, rtol=0)
    warm = run_adaptive_reference(x[:2], a, b, budget=120, warm_start=True)
    np.testing.assert_array_equal(warm.items, ref.items[:2])


def test_estimates_are_map_ability_on_the_administered_items():
    x, _, a, b = simulate_2pl(10, 500, seed=2, sd_log_a=0.9)
    traj = run_adaptive(x, a, b, budget=300)
    for k in (1, 2, 5, 40, 300):
        xs, items = _administered(x, traj, k)
        fit = map_ability(xs, a[items], b[items])
        np.testing.assert_allclose(traj.at(k), fit.theta, atol=1e-7, rtol=0)
    # the exact-pass estimator (no Taylor moments) agrees too
    plain = run_adaptive(x, a, b, budget=300, estimator=MapEstimator(order=0))
    np.testing.assert_array_equal(plain.items, traj.items)
    np.testing.assert_allclose(plain.estimate, traj.estimate, atol=1e-7, rtol=0)


def test_paper_start_first_item_is_the_most_informative_at_theta_zero():
    x, _, a, b = simulate_2pl(6, 300, seed=5)
    traj = run_adaptive(x, a, b, budget=3)
    assert (traj.items[:, 0] == np.argmax(fisher_information(0.0, a, b))).all()
    # after one item the estimate is the MAP of that single response
    fit = map_ability(x[:, traj.items[0, 0]][:, None], a[[traj.items[0, 0]]], b[[traj.items[0, 0]]])
    np.testing.assert_allclose(traj.at(1), fit.theta, atol=1e-7)       # 10 x map_ability's stopping tol


def test_one_run_to_the_largest_budget_gives_every_smaller_budget():
    x, _, a, b = simulate_2pl(6, 300, seed=6)
    long = run_adaptive(x, a, b, budget=80)
    short = run_adaptive(x, a, b, budget=25)
    np.testing.assert_array_equal(long.items[:, :25], short.items)
    np.testing.assert_allclose(long.estimate[:, :25], short.estimate, atol=1e-12)
    r_long = run_adaptive(x, a, b, budget=80, selector=RandomSelection(), estimator=MeanScoreEstimator(), seed=1)
    r_short = run_adaptive(x, a, b, budget=25, selector=RandomSelection(), estimator=MeanScoreEstimator(), seed=1)
    np.testing.assert_array_equal(r_long.items[:, :25], r_short.items)


def test_random_baselines_share_orders_and_estimate_as_specified():
    x, _, a, b = simulate_2pl(7, 250, seed=7, missing=0.05)
    mean = run_adaptive(x, a, b, budget=100, selector=RandomSelection(), estimator=MeanScoreEstimator(), seed=3)
    irt = run_adaptive(x, a, b, budget=100, selector=RandomSelection(), estimator=MapEstimator(), seed=3,
                       record=[10, 50, 100])
    np.testing.assert_array_equal(mean.items, irt.items)
    assert not np.isnan(x[np.arange(7)[:, None], mean.items]).any()   # unobserved cells never given
    for k in (10, 50, 100):
        xs, items = _administered(x, mean, k)
        np.testing.assert_allclose(mean.at(k), xs.mean(axis=1), atol=1e-12)
        np.testing.assert_allclose(irt.at(k), map_ability(xs, a[items], b[items]).theta, atol=1e-7)
    assert np.isnan(irt.estimate[:, 10]).all()                 # step 11 was not recorded
    with pytest.raises(ValueError, match="not recorded"):
        irt.at(11)


def test_exhausted_models_carry_their_estimate_forward():
    x, _, a, b = simulate_2pl(3, 20, seed=8)
    x[0, 5:] = np.nan                                          # model 0 has only 5 items
    traj = run_adaptive(x, a, b, budget=12)
    assert (traj.items[0, 5:] == -1).all() and (traj.items[0, :5] >= 0).all()
    np.testing.assert_allclose(traj.estimate[0, 5:], traj.estimate[0, 4], atol=1e-9)
    ref = run_adaptive_reference(x, a, b, budget=12)
    np.testing.assert_array_equal(traj.items, ref.items)
    np.testing.assert_allclose(traj.estimate, ref.estimate, atol=1e-7)


def test_per_model_item_parameters_batch_independent_runs():
    # two "splits" with their own calibrations run together give what they give alone
    x, _, a, b = simulate_2pl(10, 300, seed=9, sd_log_a=0.8)
    a2, b2 = a * np.exp(np.random.default_rng(1).normal(0, 0.2, 300)), b + 0.1
    alone = [run_adaptive(x[:5], a, b, budget=90), run_adaptive(x[5:], a2, b2, budget=90)]
    both = run_adaptive(x, np.vstack([np.tile(a, (5, 1)), np.tile(a2, (5, 1))]),
                        np.vstack([np.tile(b, (5, 1)), np.tile(b2, (5, 1))]), budget=90)
    np.testing.assert_array_equal(both.items, np.vstack([t.items for t in alone]))
    np.testing.assert_array_equal(both.estimate, np.vstack([t.estimate for t in alone]))


def test_input_checks():
    x, _, a, b = simulate_2pl(3, 10, seed=0)
    with pytest.raises(ValueError, match="budget"):
        run_adaptive(x, a, b, budget=11)
    with pytest.raises(ValueError, match="shape"):
        run_adaptive(x, a[:5], b, budget=3)
    with pytest.raises(ValueError, match="0, 1 or NaN"):
        run_adaptive(x * 2, a, b, budget=3)
    with pytest.raises(ValueError, match="needs an ability"):
        run_adaptive(x, a, b, budget=3, selector=MaxInformation(), estimator=MeanScoreEstimator())
    traj = run_adaptive(x, a, b, budget=4)
    assert isinstance(traj, Trajectory) and traj.budget == 4 and traj.items.shape == (3, 4)


# ---------------------------------------------------------------------------- paths the others do not reach
def test_near_tie_beyond_the_screened_top_falls_back_to_the_exact_argmax(monkeypatch):
    """More than _SCREEN_TOP items within the screen's margin of the best: the whole row is
    evaluated exactly, and the pick is the exact argmax (here, to the last bit)."""
    from irtlib.selection import selectors

    # 16 items whose information at theta = 0 differs only in the 12th digit: b = +-j * 1e-7
    n = 16
    a = np.ones(n)
    b = np.array([(j // 2 + 1) * 1e-7 * (1 if j % 2 else -1) for j in range(n)])
    b[11] = 0.0                                        # the unique exact maximum (P = 1/2)
    x = np.ones((1, n))
    full = []
    original = selectors._MaxInfoRun._exact

    def spy(self, rows, theta, cols=None):
        if self.screen and cols is None:               # only the fallback asks for every column
            full.append(rows.size)
        return original(self, rows, theta, cols)

    monkeypatch.setattr(selectors._MaxInfoRun, "_exact", spy)
    monkeypatch.setenv("IRTLIB_MAXINFO_FULL", "0")      # the numpy full pass (the C one has no screen)
    traj = run_adaptive(x, a, b, budget=1, selector=MaxInformation(cache_size=0))
    assert full, "the exact fallback did not run"
    assert traj.items[0, 0] == 11 == int(np.argmax(fisher_information(0.0, a, b)))
    ref = run_adaptive_reference(x, a, b, budget=1)
    assert ref.items[0, 0] == 11


def test_an_adaptive_selector_needs_an_ability_estimator():
    """MaxInformation with MeanScoreEstimator is refused (so the mean estimator never needs item-by-item pushes)."""
    values, _, a, b = simulate_2pl(2, 10, seed=8)
    with pytest.raises(ValueError, match="needs an ability estimate; MeanScoreEstimator"):
        run_adaptive(values, a, b, budget=3, selector=MaxInformation(), estimator=MeanScoreEstimator())


def test_random_selection_gives_every_item_then_none():
    values, _, a, b = simulate_2pl(3, 5, seed=2)
    values[0, [1, 3]] = np.nan                         # model 0 has 3 items available
    traj = run_adaptive(values, a, b, budget=5, selector=RandomSelection(), estimator=MeanScoreEstimator(), seed=1)
    assert (traj.items[0, 3:] == -1).all() and sorted(traj.items[0, :3]) == [0, 2, 4]
    assert (np.sort(traj.items[1:], axis=1) == np.arange(5)).all()
    np.testing.assert_allclose(traj.estimate[:, 4], np.nanmean(values, axis=1))


def test_one_item_bank():
    traj = run_adaptive(np.array([[1.0], [0.0]]), [1.3], [0.2], budget=1)
    assert traj.items.tolist() == [[0], [0]]
    assert traj.estimate[0, 0] > 0 > traj.estimate[1, 0]


def test_map_estimator_powers_equal_numpy_cumulative_products():
    from irtlib.selection.estimators import _powers

    v = np.random.default_rng(5).uniform(-3.0, 3.0, (40, 30))
    for n in (1, 2, 6):
        np.testing.assert_array_equal(_powers(v, n), np.cumprod(np.repeat(v[..., None], n, axis=-1), axis=-1))
