"""The CAT toolkit (irtlib.selection.cat, irtlib.core.eap): each rule against an independent computation."""

import numpy as np
import pytest
from item_banks import tricky_bank, tricky_models
from scipy import integrate, stats

from irtlib import map_ability
from irtlib.core.eap import eap_ability
from irtlib.core.kernels import fisher_information, probability
from irtlib.errors import InputError
from irtlib.selection.adaptive import run_adaptive_reference
from irtlib.selection.cat import (
    ContentBalance,
    ExposureControl,
    StoppingRule,
    TwoPLItems,
    kingsbury_zara_category,
    run_cat,
    sympson_hetter,
)
from irtlib.selection.sympson_hetter_kernel import _ranked_choice  # every item of every row ranked


def _bank(n_items=120, n_models=12, seed=0):
    rng = np.random.default_rng(seed)
    a = np.exp(rng.normal(0, 0.5, n_items))
    b = rng.normal(0, 1.2, n_items)
    theta = rng.normal(0, 1, n_models)
    x = (rng.random((n_models, n_items)) < probability(theta[:, None], a, b)).astype(float)
    return a, b, theta, x


# ------------------------------------------------------------------------------ EAP
def _quad_eap(x, a, b, mu=0.0, sd=1.0):
    def like(t):
        p = probability(t, a, b)
        return np.prod(np.where(x == 1, p, 1 - p)) * stats.norm.pdf(t, mu, sd)

    kw = {"points": [-3, 0, 3], "limit": 200, "epsabs": 0, "epsrel": 1e-11}
    z = integrate.quad(like, -12, 12, **kw)[0]
    m = integrate.quad(lambda t: t * like(t), -12, 12, **kw)[0] / z
    v = integrate.quad(lambda t: (t - m) ** 2 * like(t), -12, 12, **kw)[0] / z
    return m, np.sqrt(v)


@pytest.mark.parametrize("n", [1, 5, 40])
def test_eap_matches_scipy_quadrature(n):
    a, b, _, x = _bank(n_items=n, n_models=4, seed=n)
    est = eap_ability(x, a, b)
    for m in range(4):
        mean, sd = _quad_eap(x[m], a, b)
        assert est.theta[m] == pytest.approx(mean, abs=1e-6)
        assert est.se[m] == pytest.approx(sd, abs=1e-6)


def test_eap_with_another_prior_and_missing_cells():
    a, b, _, x = _bank(n_items=30, n_models=2, seed=3)
    x[0, ::3] = np.nan
    est = eap_ability(x, a, b, prior_mean=0.5, prior_sd=1.5)
    obs = ~np.isnan(x[0])
    mean, sd = _quad_eap(x[0, obs], a[obs], b[obs], 0.5, 1.5)
    assert est.theta[0] == pytest.approx(mean, abs=1e-6)
    assert est.se[0] == pytest.approx(sd, abs=1e-6)


def test_eap_of_an_extreme_all_safe_pattern_matches_quadrature():
    a = np.full(300, 2.0)
    b = np.zeros(300)
    est = eap_ability(np.ones(300), a, b)
    mean, sd = _quad_eap(np.ones(300), a, b)
    assert est.theta == pytest.approx(mean, abs=1e-6) and est.se == pytest.approx(sd, abs=1e-6)
    assert est.theta != pytest.approx(float(map_ability(np.ones(300), a, b).theta), abs=1e-3)


def test_eap_rejects_bad_input():
    with pytest.raises(InputError, match="0, 1 or NaN"):
        eap_ability([0.5, 1], [1, 1], [0, 0])
    with pytest.raises(InputError, match="shape"):
        eap_ability([1, 1], [1], [0, 0])


# ------------------------------------------------------------------------------ stopping rules
def test_budget_only_reproduces_the_reference_fluid_loop():
    a, b, _, x = _bank()
    res = run_cat(x, TwoPLItems(a, b), stopping=StoppingRule(max_items=25))
    ref = run_adaptive_reference(x, a, b, budget=25)
    np.testing.assert_array_equal(res.items, ref.items)
    np.testing.assert_allclose(res.theta, ref.estimate, atol=1e-7)
    assert (res.stop_reason == "max_items").all()


def test_se_target_stops_at_the_first_step_a_brute_force_map_reaches_it():
    a, b, _, x = _bank(seed=1)
    target = 0.45
    res = run_cat(x, TwoPLItems(a, b), stopping=StoppingRule(target_se=target, max_items=80))
    for m in range(x.shape[0]):
        n = res.n_items[m]
        given = res.items[m, :n]
        ses = [float(map_ability(x[m, given[:t]], a[given[:t]], b[given[:t]]).se) for t in range(1, n + 1)]
        np.testing.assert_allclose(res.se[m, :n], ses, rtol=1e-6)
        if res.stop_reason[m] == "target_se":
            assert ses[-1] <= target and all(s > target for s in ses[:-1])
        else:
            assert res.stop_reason[m] == "max_items" and n == 80 and all(s > target for s in ses)
    assert (res.stop_reason == "target_se").any()


def test_min_information_stops_when_no_remaining_item_is_worth_giving():
    a, b, _, x = _bank(seed=2)
    floor = 0.15
    res = run_cat(x, TwoPLItems(a, b), stopping=StoppingRule(min_information=floor, max_items=120))
    for m in range(x.shape[0]):
        n = res.n_items[m]
        given = list(res.items[m, :n])
        for t in range(n + 1):                     # before item t + 1: brute-force best remaining item
            theta = 0.0 if t == 0 else res.theta[m, t - 1]
            left = np.setdiff1d(np.arange(a.size), given[:t])
            best = fisher_information(theta, a[left], b[left]).max()
            assert (best < floor) == (t == n), (m, t)
        assert res.stop_reason[m] == "min_information"


def test_eap_estimator_path_equals_eap_on_the_items_given():
    a, b, _, x = _bank(seed=4)
    res = run_cat(x, TwoPLItems(a, b), stopping=StoppingRule(max_items=15), estimator="eap")
    for m in range(x.shape[0]):
        for t in (1, 7, 15):
            g = res.items[m, :t]
            est = eap_ability(x[m, g], a[g], b[g])
            assert res.theta[m, t - 1] == pytest.approx(est.theta, abs=1e-9)
            assert res.se[m, t - 1] == pytest.approx(est.se, abs=1e-9)
        # selection used the EAP: item t+1 maximises information at the EAP after t items
        info = fisher_information(res.theta[m, 4], a, b)
        info[res.items[m, :5]] = -np.inf
        assert res.items[m, 5] == np.argmax(info)


# ------------------------------------------------------------------------------ exposure control
def test_randomesque_draws_uniformly_among_the_k_most_informative():
    a, b, _, _ = _bank(n_items=60, seed=5)
    n = 6000
    x = np.ones((n, a.size))                        # every model identical: only the draw differs
    res = run_cat(x, TwoPLItems(a, b), stopping=StoppingRule(max_items=1),
                  exposure=ExposureControl(randomesque=5), seed=11)
    top5 = np.argsort(-fisher_information(0.0, a, b), kind="stable")[:5]
    first = res.items[:, 0]
    assert set(first) <= set(top5)
    counts = np.array([(first == j).sum() for j in top5])
    assert stats.chisquare(counts).pvalue > 1e-3
    again = run_cat(x[:50], TwoPLItems(a, b), stopping=StoppingRule(max_items=1),
                    exposure=ExposureControl(randomesque=5), seed=11)
    np.testing.assert_array_equal(again.items, res.items[:50])      # seeded


def test_sympson_hetter_step_follows_the_closed_form():
    a, b, _, _ = _bank(n_items=40, seed=6)
    order = np.argsort(-fisher_information(0.0, a, b), kind="stable")
    k = np.ones(a.size)
    k[order[:3]] = [0.3, 0.5, 0.6]
    n = 20000
    res = run_cat(np.ones((n, a.size)), TwoPLItems(a, b), stopping=StoppingRule(max_items=1),
                  exposure=ExposureControl(sympson_hetter=k), seed=3)
    # P(rank r given first) = prod_{i<r} (1 - K_i) K_r
    expect = [0.3, 0.7 * 0.5, 0.7 * 0.5 * 0.6, 0.7 * 0.5 * 0.4]
    for r, p in enumerate(expect):
        got = (res.items[:, 0] == order[r]).mean()
        assert abs(got - p) < 4 * np.sqrt(p * (1 - p) / n), (r, got, p)


def test_sympson_hetter_calibration_caps_exposure_in_a_fresh_simulation():
    a, b, _, _ = _bank(n_items=150, seed=7)
    items = TwoPLItems(a, b)
    k, _ = sympson_hetter(items, max_exposure=0.3, max_items=10, n_simulees=1500, seed=0)
    rng = np.random.default_rng(99)
    theta = rng.standard_normal(1500)
    x = (rng.random((theta.size, a.size)) < probability(theta[:, None], a, b)).astype(float)
    free = run_cat(x, items, stopping=StoppingRule(max_items=10)).exposure(a.size)
    capped = run_cat(x, items, stopping=StoppingRule(max_items=10), exposure=ExposureControl(sympson_hetter=k),
                     seed=5).exposure(a.size)
    assert free.max() > 0.6                  # without control some items are in most tests
    assert capped.max() <= 0.3 + 0.05
    assert (k < 1).any()


@pytest.mark.parametrize("k", [1, 3])
def test_sympson_hetter_choice_matches_ranking_every_item(k):
    from irtlib.selection.selectors import SYMPSON_HETTER_HEAD, choose_items

    rng = np.random.default_rng(4)
    n_models, n_items = 60, 3 * SYMPSON_HETTER_HEAD
    info = rng.random((n_models, n_items)).round(2)          # many ties, some across the head's end
    info[:5] = 1.0                                           # rows of one long tie
    info[9:20] = 0.5                                         # a few better items, then a tie across the head's end
    info[9:20, rng.permutation(n_items)[:30]] = 0.9
    avail = rng.random((n_models, n_items)) < 0.9
    avail[5:8, 10:] = False                                  # rows with fewer items than the head
    avail[8] = False                                         # a row with none
    k_exposure = np.where(rng.random(n_items) < 0.5, 0.02, 1.0)   # half the items almost always set aside
    k_exposure[rng.permutation(n_items)[:20]] = 0.0
    for seed in range(5):
        got_item, got_rejected = choose_items(info, avail, np.random.default_rng(seed),
                                              ExposureControl(sympson_hetter=k_exposure, randomesque=k))
        draws = np.random.default_rng(seed)
        u = draws.random((n_models, n_items))
        v = draws.random(n_models) if k > 1 else None
        item, rejected = _ranked_choice(info, avail, u, v, k_exposure, k)
        np.testing.assert_array_equal(got_item, item)
        np.testing.assert_array_equal(got_rejected, rejected)
        assert (item[:8] >= 0).all() and item[8] == -1


@pytest.mark.parametrize("k", [1, 3])
def test_sympson_hetter_from_candidate_cells_matches_ranking_every_item(k):
    from irtlib.selection.selectors import SympsonHetterCandidates, choose_items

    rng = np.random.default_rng(7)
    n_models, n_items = 200, 1500
    a, b = tricky_bank(rng, n_items)                          # exact ties, a negative discrimination
    cells = SympsonHetterCandidates(a, b, n_candidates=64, width=0.05, span=4.0)
    for trial in range(4):
        theta, avail = tricky_models(rng, n_models, n_items)   # at the cells' edges; no item left
        k_exposure = np.where(rng.random(n_items) < 0.3, rng.random(n_items) * 0.5, 1.0)
        if trial == 3:
            k_exposure = np.where(rng.random(n_items) < 0.8, 0.05, 1.0)   # choices far down the ranking
        info = fisher_information(theta[:, None], a, b)
        item, rejected = choose_items(info, avail, np.random.default_rng(trial),
                                      ExposureControl(sympson_hetter=k_exposure, randomesque=k))
        draws = np.random.default_rng(trial)
        u = draws.random((n_models, n_items))
        v = draws.random(n_models) if k > 1 else None
        got_item, got_rejected = cells.choose(theta, avail, u, v, k_exposure, k)
        np.testing.assert_array_equal(got_item, item)
        np.testing.assert_array_equal(got_rejected, rejected)
        assert item[7] == -1


def test_row_draws_are_the_rows_of_one_draw_and_leave_the_generator_after_it():
    from irtlib.selection.selectors import RowDraws

    whole = np.random.default_rng(3)
    u, after = whole.random((50, 70)), whole.random(5)
    for rows, width in ((np.array([0, 4, 49]), 9), (np.arange(50), 70), (np.array([12]), 1)):
        rng = np.random.default_rng(3)
        draws = RowDraws(rng, (50, 70))
        np.testing.assert_array_equal(rng.random(5), after)
        np.testing.assert_array_equal(draws.rows(rows, width), u[rows, :width])
        np.testing.assert_array_equal(draws.rows(rows[:1], 70), u[rows[:1]])   # again, from the same draws
    other = np.random.Generator(np.random.Philox(3))                         # not PCG64: drawn whole
    np.testing.assert_array_equal(RowDraws(other, (4, 6)).rows(np.array([1, 3]), 2),
                                  np.random.Generator(np.random.Philox(3)).random((4, 6))[[1, 3], :2])


def test_sympson_hetter_calibration_is_the_same_with_every_item_ranked(monkeypatch):
    from irtlib.selection import selectors

    a, b, _, _ = _bank(n_items=400, seed=2)
    items = TwoPLItems(a, b)
    fast = sympson_hetter(items, max_exposure=0.2, max_items=15, n_simulees=150, seed=1, n_rounds=6)
    monkeypatch.setattr(selectors, "sympson_hetter_candidates", lambda items: None)
    slow = sympson_hetter(TwoPLItems(a, b), max_exposure=0.2, max_items=15, n_simulees=150, seed=1, n_rounds=6)
    np.testing.assert_array_equal(fast[0], slow[0])
    np.testing.assert_array_equal(fast[1], slow[1])
    assert (fast[0] < 1).any()                               # the rounds did set items aside


# ------------------------------------------------------------------------------ content balancing
def test_kingsbury_zara_picks_the_largest_shortfall():
    counts = np.array([[2, 1, 0], [0, 0, 0], [1, 1, 1]])
    share = np.array([0.5, 0.3, 0.2])
    has = np.array([[True, True, True], [True, True, True], [False, True, True]])
    # row 0: t=3 -> deficits (4*.5-2, 4*.3-1, 4*.2-0) = (0, .2, .8): category 2
    np.testing.assert_array_equal(kingsbury_zara_category(counts, share, has), [2, 0, 1])
    assert kingsbury_zara_category(counts[:1], share, np.zeros((1, 3), bool))[0] == -1


def test_content_balanced_test_keeps_every_category_within_one_item_of_its_quota():
    a, b, _, x = _bank(n_items=150, seed=8)
    labels = np.array(["violence", "fraud", "privacy"])[np.arange(a.size) % 3]
    content = ContentBalance(labels, targets={"violence": 0.5, "fraud": 0.3, "privacy": 0.2})
    res = run_cat(x, TwoPLItems(a, b), stopping=StoppingRule(max_items=30), content=content)
    share = content.share
    for m in range(x.shape[0]):
        cats = content.code[res.items[m]]
        for t in range(1, 31):
            counts = np.bincount(cats[:t], minlength=3)
            assert np.all(np.abs(counts - t * share) < 1 + 1e-9)
        # brute force: each item is the most informative unused one in its category
        for t in range(1, 30):
            info = fisher_information(res.theta[m, t - 1], a, b)
            info[res.items[m, :t]] = -np.inf
            info[content.code != cats[t]] = -np.inf
            assert res.items[m, t] == np.argmax(info)


def test_settings_are_checked():
    with pytest.raises(InputError, match="at least one stopping rule"):
        StoppingRule()
    with pytest.raises(InputError, match="target_se"):
        StoppingRule(target_se=-1)
    with pytest.raises(InputError, match="randomesque"):
        ExposureControl(randomesque=0)
    with pytest.raises(InputError, match="no item has"):
        ContentBalance(np.array(["x", "y"]), targets={"z": 1})
    a, b, _, x = _bank()
    with pytest.raises(InputError, match="estimator"):
        run_cat(x, TwoPLItems(a, b), stopping=StoppingRule(max_items=3), estimator="mle")
