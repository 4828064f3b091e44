"""The adaptive-testing engine (irtlib.selection.engine and its parts), each against an independent computation.

Item models against finite differences, estimators against scipy, selectors on hand-made banks,
the stopping rule's precedence on hand-made sequences, and the two drivers (the batch
``run_adaptive`` and the step-wise ``AdaptiveSession``) against each other.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import simulate_2pl
from kernel_helpers import numpy_or_kernel
from scipy import integrate, optimize, stats

from irtlib.bank.build import calibrate_bank
from irtlib.bank.session import AdaptiveSession
from irtlib.core.kernels import (
    fisher_information,
    log_likelihood,
    probability,
    probability_slope,
    score_and_information,
)
from irtlib.core.responses import ResponseMatrix
from irtlib.errors import InputError
from irtlib.extended import grm, mirt
from irtlib.selection.adaptive import run_adaptive
from irtlib.selection.certify import ConfidenceRule, Cut, SprtRule
from irtlib.selection.engine import AdaptiveTest
from irtlib.selection.estimators import EapEstimator, MapEstimator, MeanScoreEstimator, MleEstimator
from irtlib.selection.items import TwoPLItems
from irtlib.selection.selectors import (
    ContentBalance,
    ContentBalanced,
    DOptimal,
    MaxInformation,
    Randomesque,
    RandomSelection,
    Streams,
    SympsonHetter,
)
from irtlib.selection.stopping import STOP_REASONS, StoppingRule

H = 1e-5


# ---------------------------------------------------------------------------- item models
@pytest.mark.parametrize("c", [None, 0.2])
def test_2pl_and_3pl_information_is_the_squared_slope_over_the_bernoulli_variance(c):
    rng = np.random.default_rng(0)
    a, b = np.exp(rng.normal(0, 0.5, 30)), rng.normal(0, 1, 30)
    cc = None if c is None else np.full(30, c)
    items = TwoPLItems(a, b, cc)
    theta = np.array([-1.3, 0.2, 2.1])
    p = probability(theta[:, None], a, b, cc)
    dp = (probability(theta[:, None] + H, a, b, cc) - probability(theta[:, None] - H, a, b, cc)) / (2 * H)
    np.testing.assert_allclose(items.information(theta), dp * dp / (p * (1 - p)), rtol=1e-7)
    np.testing.assert_allclose(probability_slope(theta[:, None], a, b, cc), dp, rtol=1e-7)
    slope, var = items.total_slope_and_variance(0.2)
    assert slope == pytest.approx(dp[1].sum(), rel=1e-7) and var == pytest.approx((p[1] * (1 - p[1])).sum())


def test_graded_information_and_log_likelihood_by_finite_differences():
    rng = np.random.default_rng(1)
    a = np.exp(rng.normal(0, 0.4, 12))
    thr = np.sort(rng.normal(0, 1, (12, 3)), axis=1)
    items = grm.GradedItems(a, thr)
    theta = np.array([-0.7, 0.4])
    p = grm.category_probabilities(theta[:, None], a, thr)
    dp = (grm.category_probabilities(theta[:, None] + H, a, thr)
          - grm.category_probabilities(theta[:, None] - H, a, thr)) / (2 * H)
    np.testing.assert_allclose(items.information(theta), (dp * dp / p).sum(axis=-1), rtol=1e-6)
    j, x = np.array([3, 7]), np.array([2.0, 0.0])
    np.testing.assert_allclose(items.log_likelihood(j, x, theta), np.log(p[[0, 1], j, x.astype(int)]), rtol=1e-12)


def test_m2pl_trace_information_is_the_determinant_gain():
    rng = np.random.default_rng(2)
    loadings, intercepts = np.abs(rng.normal(1, 0.3, (8, 2))), rng.normal(0, 1, 8)
    fit = mirt.MirtFit(loadings=loadings, intercepts=intercepts, corr=np.eye(2), theta=np.zeros((0, 2)),
                       log_likelihood=0.0, structure=None, seconds=0.0)
    items = mirt.MirtItems(fit)
    mean = np.array([[0.3, -0.5]])
    cov = np.array([[[0.4, 0.1], [0.1, 0.3]]])
    got = items.trace_information(mean, cov)[0]
    for j in range(8):        # the item's Fisher information matrix from the finite-difference gradient of P
        grad = np.array([(mirt.probability(mean + H * e, loadings[j:j + 1], intercepts[j:j + 1])
                          - mirt.probability(mean - H * e, loadings[j:j + 1], intercepts[j:j + 1]))[0, 0] / (2 * H)
                         for e in np.eye(2)])
        p = mirt.probability(mean, loadings[j:j + 1], intercepts[j:j + 1])[0, 0]
        info = np.outer(grad, grad) / (p * (1 - p))
        assert got[j] == pytest.approx(np.trace(cov[0] @ info), rel=1e-6)
        # the matrix determinant lemma: det(F + I_j) / det(F) = 1 + tr(S I_j) for a rank-one I_j
        f = np.linalg.inv(cov[0])
        assert np.linalg.det(f + info) / np.linalg.det(f) == pytest.approx(1 + got[j], rel=1e-6)


# ---------------------------------------------------------------------------- estimators
def _bank(n_items=60, seed=0):
    rng = np.random.default_rng(seed)
    return np.exp(rng.normal(0, 0.5, n_items)), rng.normal(0, 1, n_items)


def _push_all(run, j, x):
    for t in range(j.shape[1]):
        run.push(j[:, t], x[:, t])


def test_map_estimate_and_se_are_scipys_posterior_mode():
    a, b = _bank()
    x, _, _, _ = simulate_2pl(5, 60, seed=3)
    j = np.tile(np.arange(0, 60, 3), (5, 1))
    xs = np.take_along_axis(x, j, 1)
    run = MapEstimator(prior_mean=0.3, prior_sd=1.5).begin(TwoPLItems(a, b), 5, 20, 0.0)
    _push_all(run, j, xs)
    theta, _ = run.estimate()
    se = run.standard_error()
    for m in range(5):
        def neg(t, m=m):
            return -(log_likelihood(xs[m], t, a[j[m]], b[j[m]]).sum() - 0.5 * ((t - 0.3) / 1.5) ** 2)
        best = optimize.minimize_scalar(neg, bounds=(-8, 8), method="bounded", options={"xatol": 1e-11})
        assert theta[m] == pytest.approx(best.x, abs=1e-7)
        curv = (neg(best.x + 1e-4) - 2 * neg(best.x) + neg(best.x - 1e-4)) / 1e-8     # 2PL: observed = expected
        assert se[m] == pytest.approx(1 / np.sqrt(curv), rel=1e-4)


def test_mle_is_scipys_bounded_maximum_likelihood():
    a, b = _bank(seed=1)
    x, _, _, _ = simulate_2pl(6, 60, seed=4)
    j = np.tile(np.arange(40), (6, 1))
    xs = np.take_along_axis(x, j, 1)
    run = MleEstimator(tol=0.0).begin(TwoPLItems(a, b), 6, 40, 0.0)
    _push_all(run, j, xs)
    theta, _ = run.estimate()
    for m in range(6):
        best = optimize.minimize_scalar(lambda t, m=m: -log_likelihood(xs[m], t, a[:40], b[:40]).sum(),
                                        bounds=(-8, 8), method="bounded", options={"xatol": 1e-10})
        assert theta[m] == pytest.approx(best.x, abs=1e-6)
    np.testing.assert_allclose(run.standard_error(), 1 / np.sqrt(fisher_information(theta[:, None], a[:40],
                                                                                     b[:40]).sum(1)), rtol=1e-10)


@pytest.mark.parametrize("model", ["2pl", "graded"])
def test_eap_is_scipys_posterior_mean_and_sd(model):
    rng = np.random.default_rng(5)
    if model == "2pl":
        a, b = _bank(30, seed=2)
        items, x = TwoPLItems(a, b), (rng.random((3, 30)) < 0.6).astype(float)

        def like(t, m):
            return np.exp(log_likelihood(x[m], t, a, b).sum())
    else:
        a, thr = np.exp(rng.normal(0, 0.4, 30)), np.sort(rng.normal(0, 1, (30, 2)), axis=1)
        items, x = grm.GradedItems(a, thr), rng.integers(0, 3, (3, 30)).astype(float)

        def like(t, m):
            return np.exp(grm.log_likelihood(x[m][None, :], np.array([t]), a, thr).sum())
    run = EapEstimator().begin(items, 3, 30, 0.0)
    _push_all(run, np.tile(np.arange(30), (3, 1)), x)
    mean, _ = run.estimate()
    sd = run.standard_error()
    for m in range(3):
        kw = {"limit": 200, "epsabs": 0, "epsrel": 1e-11}
        z = integrate.quad(lambda t, m=m: like(t, m) * stats.norm.pdf(t), -10, 10, **kw)[0]
        mu = integrate.quad(lambda t, m=m: t * like(t, m) * stats.norm.pdf(t), -10, 10, **kw)[0] / z
        var = integrate.quad(lambda t, m=m, mu=mu: (t - mu) ** 2 * like(t, m) * stats.norm.pdf(t), -10, 10, **kw)[0] / z
        assert mean[m] == pytest.approx(mu, abs=1e-6) and sd[m] == pytest.approx(np.sqrt(var), abs=1e-6)


def test_mean_score_is_the_share_of_safe_responses():
    run = MeanScoreEstimator().begin(TwoPLItems(np.ones(4), np.zeros(4)), 2, 4)
    run.push(np.array([0, 1]), np.array([1.0, 0.0]))
    run.push(np.array([2, -1]), np.array([0.0, np.nan]))
    assert run.estimate()[0].tolist() == [0.5, 0.0] and run.estimate()[1] is None


# ---------------------------------------------------------------------------- selectors on hand-made banks
A = np.array([1.0, 1.5, 0.8, 1.2, 2.0])
B = np.array([0.0, 0.6, -1.0, 2.0, 0.2])
# at theta = 0 the information a^2 P (1 - P) is 0.250, 0.462, 0.137, 0.110, 0.961: ranks 4, 1, 0, 2, 3


def test_randomesque_draws_only_from_the_k_most_informative():
    run = Randomesque(2).begin(TwoPLItems(A, B), np.ones((4000, 5), bool), Streams(3))
    first = run.select(np.zeros(4000))
    assert set(first) == {4, 1} and abs((first == 4).mean() - 0.5) < 0.04
    again = Randomesque(2).begin(TwoPLItems(A, B), np.ones((4000, 5), bool), Streams(3)).select(np.zeros(4000))
    np.testing.assert_array_equal(first, again)


def test_sympson_hetter_gives_the_best_with_probability_k_and_sets_aside_the_rest():
    k = np.array([1.0, 0.5, 1.0, 1.0, 0.0])             # item 4 (the best) never given, item 1 half the time
    run = SympsonHetter(k).begin(TwoPLItems(A, B), np.ones((4000, 5), bool), Streams(1))
    first = run.select(np.zeros(4000))
    assert set(first) == {1, 0} and abs((first == 1).mean() - 0.5) < 0.04
    assert run.set_aside[4] == 4000 and run.set_aside[1] == (first == 0).sum()
    assert not run.unused[:, 4].any()                    # set aside for good


def test_content_balance_takes_the_category_furthest_below_its_share():
    balance = ContentBalance(np.array(["x", "x", "y", "y", "x"]), targets={"x": 0.5, "y": 0.5})
    run = ContentBalanced(balance).begin(TwoPLItems(A, B), np.ones((1, 5), bool), Streams(0))
    # x first (tie at 0.5: the lowest category), the best x item is 4; then y: 2 (0.137) beats 3 (0.110)
    assert [int(run.select(np.zeros(1))[0]) for _ in range(4)] == [4, 2, 1, 3]


def test_d_optimal_in_one_dimension_is_maximum_information():
    est = EapEstimator().begin(TwoPLItems(A, B), 1, 5, 0.0)
    run = DOptimal().begin(TwoPLItems(A, B), np.ones((1, 5), bool), Streams(0))
    assert run.select(np.zeros(1), est)[0] == 4


def test_inactive_models_are_given_nothing():
    for sel in (MaxInformation(), RandomSelection(), Randomesque(2)):
        run = sel.begin(TwoPLItems(A, B), np.ones((3, 5), bool), Streams(0))
        got = run.select(np.zeros(3), None, np.array([True, False, True]))
        assert got[1] == -1 and (got[[0, 2]] >= 0).all() and run.unused[1].all()


# ---------------------------------------------------------------------------- stopping precedence
def test_stopping_precedence_on_a_hand_made_sequence():
    decide = ConfidenceRule(Cut.at_theta(0.0), confidence=0.9)
    rule = StoppingRule(max_items=3, target_se=0.5, min_information=0.1, decision=decide)
    # five models, each with several rules holding at once
    n_items = np.array([3, 3, 3, 2, 0])
    se = np.array([0.4, 0.4, 0.9, 0.9, 1.0])
    left = np.array([5, 0, 0, 0, 4])
    best = np.array([0.0, -np.inf, -np.inf, -np.inf, 0.05])
    decided = np.array([1, 0, 0, 0, 0])
    got = rule.reasons(n_items=n_items, left=left, se=se, best_information=best, decided=decided)
    assert [STOP_REASONS[g] for g in got] == ["decided", "target_se", "max_items", "exhausted", "min_information"]
    assert rule.reasons(n_items=np.array([1]), left=np.array([3]), se=np.array([0.6]),
                        best_information=np.array([0.3]), decided=np.array([0]))[0] == -1
    with pytest.raises(InputError, match="at least one stopping rule"):
        StoppingRule()


def test_the_engine_reports_the_precedence_on_a_hand_made_run():
    # 3 items, budget 3: after the 3rd item the budget, the bank and (possibly) the SE all hold
    items = TwoPLItems(np.array([3.0, 3.0, 3.0]), np.array([0.0, 0.1, -0.1]))
    for target, expected in ((5.0, "target_se"), (1e-3, "max_items")):
        test = AdaptiveTest(items, stopping=StoppingRule(max_items=3, target_se=target, min_information=10.0))
        assert STOP_REASONS[test.status()[0]] == "min_information"      # before any item: nothing is worth 10
        test.stopping = StoppingRule(max_items=3, target_se=target)
        for _ in range(3):
            test.record(test.propose(), np.array([1.0]))
        assert STOP_REASONS[test.status()[0]] == expected
    test = AdaptiveTest(items, stopping=StoppingRule(max_items=9, min_information=10.0))
    for _ in range(3):
        test.record(test.propose(), np.array([0.0]))
    assert STOP_REASONS[test.status()[0]] == "exhausted"


# ---------------------------------------------------------------------------- the two drivers agree
@pytest.fixture(scope="module")
def bank_and_rows():
    values, _, _, _ = simulate_2pl(48, 150, seed=8, sd_log_a=0.6)
    matrix = ResponseMatrix(values, [f"m{i:02d}" for i in range(48)], [f"q{j:03d}" for j in range(150)])
    bank = calibrate_bank(matrix.subset(models=matrix.models[:40]), interval_check=False)
    rows = matrix.to_frame().loc[matrix.models[40:], list(bank.item_ids)]
    return bank, rows


def _session_run(bank, row, **kw):
    session = AdaptiveSession(bank, **kw)
    result = session.run(row.get)
    return session, result


@pytest.mark.parametrize("options", [
    {},
    {"estimator": "eap"},
    {"randomesque": 3, "seed": 4},
    {"categories": "quarters"},
])
def test_session_and_batch_replay_give_the_same_items_and_estimates(bank_and_rows, options):
    bank, rows = bank_and_rows
    kw = dict(options)
    if kw.get("categories") == "quarters":
        kw["categories"] = {item: "AB"[j % 4 == 0] for j, item in enumerate(bank.item_ids)}
    est = EapEstimator() if kw.get("estimator") == "eap" else MapEstimator()
    sel = (Randomesque(3) if "randomesque" in kw else
           ContentBalanced(ContentBalance(np.array(list(kw["categories"].values())))) if "categories" in kw else
           MaxInformation())
    for model in rows.index[:4]:
        x = rows.loc[[model]].to_numpy()
        batch = run_adaptive(x, bank.a, bank.b, budget=25, selector=sel, estimator=est, seed=kw.get("seed", 0))
        _, result = _session_run(bank, rows.loc[model], max_items=25, **kw)
        assert list(bank.item_ids.get_indexer(result.items)) == list(batch.items[0])
        assert result.theta == pytest.approx(batch.estimate[0, -1], abs=1e-12)


@pytest.mark.parametrize("rule", ["ci", "sprt"])
def test_session_and_batch_certify_alike(bank_and_rows, rule):
    bank, rows = bank_and_rows
    items = TwoPLItems(bank.a, bank.b)
    filtered = float(bank.filtered.get("safe_rate_sum", 0.0))
    indifference = 0.03 if rule == "sprt" else None
    cut = Cut.at_score(0.55, items, filtered_sum=filtered, n_full=bank.n_items_full, indifference=indifference)
    decision = SprtRule(cut, confidence=0.9) if rule == "sprt" else ConfidenceRule(cut, confidence=0.9)
    x = rows.to_numpy()
    batch = run_adaptive(x, bank.a, bank.b, budget=60, stopping=StoppingRule(max_items=60, decision=decision))
    for m, model in enumerate(rows.index):
        session, result = _session_run(bank, rows.loc[model], max_items=60, pass_score=0.55, confidence=0.9,
                                       indifference=indifference)
        assert result.n_items == batch.n_items[m] and result.stop_reason == batch.stop_reason[m]
        assert list(bank.item_ids.get_indexer(result.items)) == list(batch.items[m, :batch.n_items[m]])
        d = session.decision
        assert d.outcome == ("fail", "undecided", "pass")[batch.decision[m] + 1]
        assert d.p_above == pytest.approx(batch.p_above[m], abs=1e-9)
    assert (batch.decision != 0).sum() >= 6 and (batch.stop_reason == "decided").sum() >= 6


@pytest.fixture(params=["numpy", "C kernel"])
def mle_terms_path(request, monkeypatch):
    """Fluid's MLE score terms by numpy, or by the C kernel (skipped where it cannot be built)."""
    from irtlib.selection import score_kernel

    return numpy_or_kernel(request.param, score_kernel, monkeypatch, what="the MLE score kernel")


def test_mle_score_in_work_arrays_is_score_and_information_bit_for_bit(mle_terms_path):
    from irtlib.selection.portable_exp import score_and_information

    rng = np.random.default_rng(1)
    n_models, n_items = 20, 300
    a, b = np.exp(rng.normal(0, 1, n_items)), rng.normal(0, 2, n_items)
    run = MleEstimator().begin(TwoPLItems(a, b), n_models, 16, 0.0)       # capacity grows past 16
    for t in range(60):
        j = rng.integers(0, n_items, n_models)
        x = (rng.random(n_models) < 0.6).astype(float)
        x[rng.random(n_models) < 0.05] = np.nan                             # no response: no term
        if t % 7 == 0:
            j[:3] = -1
        run.push(j, x)
    for rows in (np.sort(rng.choice(n_models, 13, replace=False)), np.arange(n_models)):
        theta = rng.normal(0, 3, rows.size)
        theta[0] = 8.0
        g, info = score_and_information(run.X[rows, :run.t], theta[:, None], run.A[rows, :run.t],
                                        run.B[rows, :run.t])
        score, slope = run._score(rows, theta, slope=True)
        np.testing.assert_array_equal(score, g.sum(axis=1))
        np.testing.assert_array_equal(slope, -info.sum(axis=1))
        np.testing.assert_array_equal(run._score(rows, theta), g.sum(axis=1))


def test_mle_adaptive_run_is_the_same_with_the_c_kernel_and_with_numpy(monkeypatch):
    from irtlib.selection import score_kernel

    if score_kernel.load() is None:
        pytest.skip("the MLE score kernel cannot be built here")
    rng = np.random.default_rng(3)
    n_models, n_items = 24, 400
    a = np.exp(rng.normal(0, 1, (n_models, n_items)))          # per-model banks, as the protocol's batches
    b = rng.normal(0, 2, (n_models, n_items))
    x = (rng.random((n_models, n_items)) < 1 / (1 + np.exp(-a * (rng.normal(0, 2, n_models)[:, None] - b))))
    x = x.astype(float)
    x[:4] = 1.0                                                  # all safe: the path sits on the +8 bound
    x[rng.random(x.shape) < 0.02] = np.nan
    start = rng.normal(0, 1, n_models)

    def run():
        return run_adaptive(x, a, b, budget=150, estimator=MleEstimator(), theta0=start)

    with_kernel = run()
    monkeypatch.setitem(score_kernel._LOADED, "lib", None)
    with_numpy = run()
    np.testing.assert_array_equal(with_kernel.items, with_numpy.items)
    np.testing.assert_array_equal(with_kernel.estimate, with_numpy.estimate)
    assert (with_numpy.estimate[:4, -1] == 8.0).all() and np.unique(with_numpy.estimate[:, -1]).size > 10


def test_mle_kernel_row_sums_are_numpys_pairwise_sums_on_every_length():
    from irtlib.selection import score_kernel

    lib = score_kernel.load()
    if lib is None:
        pytest.skip("the MLE score kernel cannot be built here")
    rng = np.random.default_rng(5)
    lengths = [*range(0, 300), *rng.integers(300, 12000, 40)]
    for n in lengths:
        for n_rows, ld in ((1, n), (4, n + 13)):          # rows of a wider array, as the run's work arrays
            g = rng.normal(size=(n_rows, ld)) * np.exp(rng.normal(0.0, 8.0, (n_rows, ld)))
            h = rng.normal(size=(n_rows, ld)) * np.exp(rng.normal(0.0, 8.0, (n_rows, ld)))
            sg, sh = np.empty(n_rows), np.empty(n_rows)
            lib.row_sums(n_rows, n, ld, g.ctypes.data, h.ctypes.data, sg.ctypes.data, sh.ctypes.data)
            np.testing.assert_array_equal(sg, g[np.arange(n_rows), :n].sum(axis=1), err_msg=f"length {n}")
            np.testing.assert_array_equal(sh, h[np.arange(n_rows), :n].sum(axis=1), err_msg=f"length {n}")


@pytest.mark.parametrize("settings", [{}, {"tol": 0.0}, {"max_newton": 2, "max_halvings": 1},
                                      {"max_newton": 1, "max_halvings": 0, "max_bisection": 5}])
def test_mle_estimate_in_c_is_the_numpy_iteration_bit_for_bit(monkeypatch, settings):
    from irtlib.selection import score_kernel

    if score_kernel.load() is None:
        pytest.skip("the MLE score kernel cannot be built here")
    rng = np.random.default_rng(7)
    n_models, n_items = 30, 500
    a = np.exp(rng.normal(0, 1, (n_models, n_items)))
    b = rng.normal(0, 3, (n_models, n_items))
    ability = rng.normal(0, 2, n_models)
    x = (rng.random((n_models, n_items)) < 1 / (1 + np.exp(-a * (ability[:, None] - b)))).astype(float)
    x[:3], x[3:5] = 1.0, 0.0                                     # on the +8 and the -8 bound
    x[rng.random(x.shape) < 0.03] = np.nan                       # no response: no term
    est = MleEstimator(**settings)
    items = TwoPLItems(a, b)
    start = rng.normal(0, 1, n_models)
    in_c = est.begin(items, n_models, 8, start)                  # capacity grows past 8
    monkeypatch.setitem(score_kernel._LOADED, "lib", None)
    in_numpy = est.begin(items, n_models, 8, start)
    assert in_c._terms is not None and in_numpy._terms is None
    for t in range(30 if settings.get("tol") == 0.0 else 120):        # tol 0: every model to the bisection
        j = rng.integers(0, n_items, n_models)
        j[rng.random(n_models) < 0.05] = -1                      # exhausted models
        xj = np.where(j >= 0, x[np.arange(n_models), np.maximum(j, 0)], np.nan)
        in_c.push(j, xj)
        in_numpy.push(j, xj)
        c_value, np_value = in_c.estimate()[0], in_numpy.estimate()[0]
        np.testing.assert_array_equal(c_value, np_value, err_msg=f"step {t}")
    assert (np_value[:3] == 8.0).all() and (np_value[3:5] == -8.0).all()


def test_mle_kernel_built_for_avx512_gives_the_default_builds_estimates_at_every_step(monkeypatch):
    """Where the processor has AVX-512 the loader keeps the eight-lane build: the same estimates, bit for bit."""
    from irtlib.calibration.fused_kernel import compiled, cpu_flags
    from irtlib.selection import score_kernel

    if "avx512f" not in cpu_flags() or score_kernel.load() is None:
        pytest.skip("no AVX-512 or no MLE score kernel here")
    wide = compiled(score_kernel.SOURCE, score_kernel._bind, switch="IRTLIB_SCORE_KERNEL",
                    extra_flags=score_kernel.AVX512_FLAGS)
    narrow = compiled(score_kernel.SOURCE, score_kernel._bind, switch="IRTLIB_SCORE_KERNEL")
    assert score_kernel.load()._name == wide._name != narrow._name
    rng = np.random.default_rng(11)
    n_models, n_items = 23, 700                     # not a multiple of the eight lanes
    a = np.exp(rng.normal(0, 1, (n_models, n_items)))
    b = rng.normal(0, 3, (n_models, n_items))
    x = (rng.random((n_models, n_items)) < 1 / (1 + np.exp(-a * (rng.normal(0, 2, n_models)[:, None] - b))))
    x = x.astype(float)
    x[:2] = 1.0
    x[rng.random(x.shape) < 0.03] = np.nan
    runs = []
    for lib in (wide, narrow):
        monkeypatch.setitem(score_kernel._LOADED, "lib", lib)
        runs.append(run_adaptive(x, a, b, budget=300, estimator=MleEstimator(), theta0=0.5))
    np.testing.assert_array_equal(runs[0].items, runs[1].items)
    np.testing.assert_array_equal(runs[0].estimate, runs[1].estimate)
    monkeypatch.setattr(score_kernel, "_LOADED", {})
    monkeypatch.setenv("IRTLIB_SCORE_KERNEL_AVX512", "0")
    assert score_kernel.load()._name == narrow._name


def test_mle_score_kernel_is_off_when_turned_off(monkeypatch):
    from irtlib.selection import score_kernel

    monkeypatch.setattr(score_kernel, "_LOADED", {})
    monkeypatch.setenv("IRTLIB_SCORE_KERNEL", "0")
    assert score_kernel.load() is None


def _every_model_newton(run):
    """The MAP estimator's Taylor Newton evaluating every model at every iteration (before it skipped stopped ones)."""
    e = run.e
    lo, hi = e.bounds
    inv_var, cap = 1.0 / e.prior_sd ** 2, e.max_step
    theta, info = run.theta, run.info
    done = np.zeros(theta.size, dtype=bool)
    for _ in range(e.max_newton):
        terms = run._terms(theta)
        M = run.M
        g = run.sax - np.einsum("ij,ij->i", M[:, :-1], terms) - (theta - e.prior_mean) * inv_var
        h = np.einsum("ij,ij->i", M[:, 1:], terms)
        dh = np.einsum("ij,ij->i", M[:, 2:], terms[:, :-1])
        hp = h + inv_var
        raw = g / hp
        new = np.minimum(np.maximum(theta + np.minimum(np.maximum(raw, -cap), cap), lo), hi)
        moved = np.abs(new - theta)
        if done.any():
            new, h = np.where(done, theta, new), np.where(done, info, h)
        theta, info = new, h
        done |= (moved < e.tol) | ((np.abs(dh) * raw * raw < 0.2 * e.tol * hp) & (np.abs(raw) < cap)
                                    & (new > lo) & (new < hi))
        if done.all():
            break
    run.info = info
    return run._finish(theta, done)


@pytest.mark.parametrize("shape", [(60, 500), (7, 40)])
def test_map_newton_on_the_moving_models_only_is_every_models_newton_bit_for_bit(shape, monkeypatch):
    """Skipping the stopped models keeps every re-centring, so every item and estimate of a long test is the same."""
    from irtlib.selection import estimators

    n_models, n_items = shape
    values, _, a, b = simulate_2pl(n_models, n_items, seed=5, sd_log_a=0.8)
    values[:2] = 1.0                                                  # all safe: estimates pile up at the bound
    values[np.random.default_rng(6).random(values.shape) < 0.03] = np.nan

    def run():
        return run_adaptive(values, a, b, budget=n_items // 2, selector=MaxInformation(radii=(0.01, 0.03, 0.1, 0.3)))

    fast = run()
    monkeypatch.setattr(estimators._MapRun, "_estimate_taylor", _every_model_newton)
    every = run()
    np.testing.assert_array_equal(fast.items, every.items)
    np.testing.assert_array_equal(fast.estimate, every.estimate)
    assert np.unique(fast.estimate[:, -1]).size > n_models // 2 and (fast.estimate[:2, -1] > 2.0).all()


def test_random_selection_block_is_the_same_as_one_select_per_step():
    from irtlib.selection.selectors import RandomSelection, Streams

    rng = np.random.default_rng(11)
    available = rng.random((12, 40)) < 0.8
    available[0] = False                                   # a model with no item
    available[1, 3:] = False                                # one with three
    one, block = (RandomSelection().begin(None, available, Streams(5)) for _ in range(2))
    steps = np.stack([one.select() for _ in range(25)], axis=1)
    np.testing.assert_array_equal(np.hstack([block.select_block(10), block.select_block(15)]), steps)
    np.testing.assert_array_equal(block.unused, one.unused)
    np.testing.assert_array_equal(block.pos, one.pos)
    assert (steps[0] == -1).all() and (steps[1, 3:] == -1).all() and (steps[1, :3] >= 0).all()


def test_best_candidates_is_numpys_argmax_of_the_exact_information_with_twins_and_near_ties():
    from irtlib.selection import score_kernel

    lib = score_kernel.load()
    if lib is None:
        pytest.skip("the MLE score kernel cannot be built here")
    rng = np.random.default_rng(13)
    for trial in range(100):
        n, c = 40, int(rng.integers(1, 300))
        a, b = np.exp(rng.normal(0, 1.5, (n, c))), rng.normal(0, 5, (n, c))
        twin = rng.random((n, c)) < 0.3                          # copies of another candidate: exact ties
        src = rng.integers(0, c, (n, c))
        a = np.where(twin, np.take_along_axis(a, src, 1), a)
        b = np.where(twin, np.take_along_axis(b, src, 1), b)
        b = np.where(rng.random((n, c)) < 0.1, np.nextafter(b, np.inf), b)     # near ties, one ulp apart
        if trial % 5 == 0:
            a[:5] *= 1e3                                          # information far below 1e-280 away from b
        theta = rng.uniform(-8, 8, n)
        theta[:3] = 8.0, -8.0, 700.0
        used = rng.random((n, c)) < rng.random()
        used[-1] = True
        k, best = score_kernel.best_candidates(lib, theta, a, b, used)
        info = np.where(used, -np.inf, fisher_information(theta[:, None], a, b))
        want = np.argmax(info, axis=1)
        np.testing.assert_array_equal(k, want)
        np.testing.assert_array_equal(best, info[np.arange(n), want])


def test_candidate_bounds_in_c_equal_numpys_passes_per_radius_on_every_row_length():
    from irtlib.selection import score_kernel

    lib = score_kernel.load()
    if lib is None:
        pytest.skip("the MLE score kernel cannot be built here")
    rng = np.random.default_rng(11)
    radii = np.array([0.001, 0.003, 0.01, 0.03, 0.1, 0.3], dtype=np.float32)
    for m in [*range(1, 40), 255, 256, 257, 4906]:
        base = np.log(rng.random((5, m)).astype(np.float32) * np.float32(rng.uniform(0.1, 3.0)))
        base[rng.random((5, m)) < 0.3] = -np.inf                     # blocked or candidate items
        a32 = np.exp(rng.normal(0.0, 0.8, (5, m))).astype(np.float32)
        peak = np.log(a32 * a32 / np.float32(4.0))
        for a, p in ((a32, peak), (a32[0], peak[0])):                 # per-model and shared parameters
            np.testing.assert_array_equal(score_kernel.radius_bounds(lib, base, a, p, radii),
                                          score_kernel.numpy_radius_bounds(base, a, p, radii), err_msg=f"m={m}")


def test_candidate_bounds_in_c_propagate_nan_and_infinities_as_numpy():
    from irtlib.selection import score_kernel

    lib = score_kernel.load()
    if lib is None:
        pytest.skip("the MLE score kernel cannot be built here")
    radii = np.array([0.0, 0.5], dtype=np.float32)
    base = np.zeros((4, 9), dtype=np.float32)
    a32 = np.ones((4, 9), dtype=np.float32)
    peak = np.full((4, 9), 0.25, dtype=np.float32)
    base[0, 3] = np.nan                 # NaN anywhere: the row's maxima are NaN
    a32[1, 2] = np.inf                  # inf * 0 is NaN at radius 0, +inf capped by the peak at 0.5
    base[2, 4] = np.inf                 # +inf capped by the peak
    got = score_kernel.radius_bounds(lib, base, a32, peak, radii)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(got, score_kernel.numpy_radius_bounds(base, a32, peak, radii))
    assert np.isnan(got[0]).all() and np.isnan(got[1, 0]) and got[1, 1] == np.float32(0.25)
    np.testing.assert_array_equal(got[3], [0.0, 0.25])


def test_mle_kernel_terms_with_the_portable_exp_are_within_a_few_ulp_of_the_c_librarys_expit():
    from irtlib.selection import score_kernel

    lib = score_kernel.load()
    if lib is None:
        pytest.skip("the MLE score kernel cannot be built here")
    rng = np.random.default_rng(11)
    n, t = 40, 1003                                             # not a multiple of the eight-cell blocks
    a = np.exp(rng.normal(0.0, 1.0, (n, t)))
    a[:, ::7] = 0.0                                              # no response: no term
    b = rng.normal(0.0, 4.0, (n, t))
    x = (rng.random((n, t)) < 0.5).astype(float)
    theta = rng.uniform(-8.0, 8.0, n)
    g, h = np.empty((n, t)), np.empty((n, t))
    start = rng.integers(0, 9, n)                                # rows continued from a kept column
    g[:], h[:] = np.nan, np.nan
    score_kernel._terms(lib, np.arange(n), theta, start, x, a, b, t, g, h)
    g0, h0 = score_and_information(x, theta[:, None], a, b)         # scipy's expit (the C library's exp)
    cols = np.arange(t)[None, :] >= start[:, None]
    np.testing.assert_allclose(g[cols], g0[cols], rtol=2e-15, atol=1e-300)
    np.testing.assert_allclose(h[cols], h0[cols], rtol=2e-15, atol=1e-300)
    assert np.isnan(g[~cols]).all()                              # the kept columns are not written


def test_the_map_newtons_einsum_is_numpys_bit_for_bit():
    from irtlib.selection import estimators

    rng = np.random.default_rng(5)
    m, t = rng.normal(size=(7, 9)), rng.normal(size=(7, 9))
    assert np.array_equal(estimators._c_einsum("ij,ij->i", m, t), np.einsum("ij,ij->i", m, t))
