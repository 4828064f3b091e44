"""Certification (irtlib.selection.certify): the cut's mapping, the two decision rules, error rates by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from irtlib.core.kernels import log_likelihood, probability
from irtlib.errors import InputError
from irtlib.selection.adaptive import run_adaptive
from irtlib.selection.certify import ConfidenceRule, Cut, SprtRule, check_confidence
from irtlib.selection.items import TwoPLItems
from irtlib.selection.stopping import StoppingRule


def _bank(n_items=200, seed=0):
    rng = np.random.default_rng(seed)
    return np.exp(rng.normal(0, 0.5, n_items)), rng.normal(0, 1.2, n_items)


# ---------------------------------------------------------------------------- the cut
def test_a_score_cut_maps_through_the_test_characteristic_curve():
    a, b = _bank()
    items = TwoPLItems(a, b)
    filtered, n_full = 17.3, 230                       # 30 filtered items, their safe rates summing to 17.3
    cut = Cut.at_score(0.8, items, filtered_sum=filtered, n_full=n_full, indifference=0.02)

    def tcc(t):
        return (probability(t, a, b).sum() + filtered) / n_full

    assert tcc(cut.theta) == pytest.approx(0.8, abs=1e-10)
    assert tcc(cut.low) == pytest.approx(0.78, abs=1e-10) and tcc(cut.high) == pytest.approx(0.82, abs=1e-10)
    # the mapping's SD: the Bernoulli spread of the full score at the cut over the slope of the curve
    p = probability(cut.theta, a, b)
    slope = (tcc(cut.theta + 1e-6) - tcc(cut.theta - 1e-6)) / 2e-6
    assert cut.sd == pytest.approx(math.sqrt((p * (1 - p)).sum()) / n_full / slope, rel=1e-6)
    assert cut.reachable == pytest.approx((tcc(-8.0), tcc(8.0)))


@pytest.mark.parametrize("score, indifference, match", [
    (0.9999, None, r"the pass score 0.9999 is outside what this bank can tell apart: its predicted full-benchmark "
                   r"scores run from 0\.\d{4} to 0\.\d{4} \(theta -8 to 8\)"),
    (0.95, 0.2, r"the pass score 0.95 \+/- 0.2 is outside"),
    (1.0, None, r"strictly between 0 and 1"),
    (float("nan"), None, r"must be finite"),
    (0.5, -0.1, r"half-width must be positive"),
])
def test_a_cut_the_bank_cannot_reach_is_refused_naming_the_range(score, indifference, match):
    a, b = _bank()
    with pytest.raises(InputError, match=match):
        Cut.at_score(score, TwoPLItems(a, b), indifference=indifference)


@pytest.mark.parametrize("confidence", [0.0, 1.0, 1.5, -0.2, 0.5, 0.3, float("nan"), "0.9", True])
def test_confidence_outside_the_open_interval_is_refused(confidence):
    with pytest.raises(InputError, match="confidence"):
        check_confidence(confidence)
    with pytest.raises(InputError, match="confidence"):
        ConfidenceRule(Cut.at_theta(0.0), confidence=confidence)


def test_the_sprt_needs_an_indifference_region():
    with pytest.raises(InputError, match="indifference region"):
        SprtRule(Cut.at_theta(0.5))
    with pytest.raises(InputError, match="outside the ability range"):
        Cut.at_theta(7.9, indifference=0.5)


# ---------------------------------------------------------------------------- the rules, by hand
def test_the_interval_rule_is_the_exact_posterior_probability_above_the_cut():
    """Against scipy's quadrature of prior x likelihood, with the cut's own spread and a tempered likelihood."""
    a, b = _bank(10, seed=3)
    items = TwoPLItems(a, b)
    cut = Cut(theta=0.4, sd=0.2)
    rule = ConfidenceRule(cut, confidence=0.9, prior_mean=np.array([0.0, 0.5, 0.0]), prior_sd=1.2,
                          inflation=lambda k: 1.0 + 0.1 * k)
    run = rule.begin(items, 3)
    x = np.array([[1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0, 0.0, 1.0]])
    for t in range(6):
        run.push(np.full(3, t), x[:, t])
    decision, p = run.evaluate(np.array([6, 6, 0]))
    for m, mu in enumerate((0.0, 0.5, 0.0)):
        f = 1.6 if m < 2 else 1.0

        def post(t, m=m, mu=mu, f=f):
            return np.exp(log_likelihood(x[m], t, a[:6], b[:6]).sum() / f ** 2) * stats.norm.pdf(t, mu, 1.2)

        kw = {"limit": 200, "epsabs": 0, "epsrel": 1e-10}
        z = integrate.quad(post, -8, 8, **kw)[0]
        above = integrate.quad(lambda t, post=post: post(t) * stats.norm.cdf((t - 0.4) / 0.2), -8, 8, **kw)[0] / z
        assert p[m] == pytest.approx(above, abs=1e-6)
    assert decision.tolist() == [int(p[0] >= 0.9) - int(p[0] <= 0.1), int(p[1] >= 0.9) - int(p[1] <= 0.1), 0]
    assert decision[2] == 0 and p[2] < 0.1                # the last: no decision before any item counted


def test_the_sprt_accumulates_the_log_likelihood_ratio_against_walds_bounds():
    a, b = _bank(20)
    items = TwoPLItems(a, b)
    rule = SprtRule(Cut.at_theta(0.2, indifference=0.3), confidence=0.9)
    assert rule.upper == pytest.approx(math.log(9)) and rule.lower == pytest.approx(-math.log(9))
    run = rule.begin(items, 2)
    j = np.array([[0, 3, 5, 7], [1, 2, -1, 4]])
    x = np.array([[1.0, 1.0, 0.0, 1.0], [0.0, 0.0, np.nan, 0.0]])
    for t in range(4):
        run.push(j[:, t], x[:, t])
    for m in range(2):
        ok = j[m] >= 0
        want = (log_likelihood(x[m, ok], 0.5, a[j[m, ok]], b[j[m, ok]])
                - log_likelihood(x[m, ok], -0.1, a[j[m, ok]], b[j[m, ok]])).sum()
        assert run.llr[m] == pytest.approx(want, rel=1e-12)
    decision, _ = run.evaluate(np.array([4, 3]))
    assert decision.tolist() == [int(run.llr[0] >= math.log(9)) - int(run.llr[0] <= -math.log(9)),
                                 int(run.llr[1] >= math.log(9)) - int(run.llr[1] <= -math.log(9))]


# ---------------------------------------------------------------------------- error rates by simulation
def _simulate(theta, a, b, seed):
    rng = np.random.default_rng(seed)
    return (rng.random((theta.size, a.size)) < probability(theta[:, None], a, b)).astype(float)


def _error_bound(rate, n):
    """The asked rate plus three Monte Carlo standard errors of a rate measured on ``n`` decisions."""
    return rate + 3 * math.sqrt(rate * (1 - rate) / n)


def test_sprt_errors_at_the_ends_of_the_indifference_region_stay_within_the_asked_rate():
    """Wald: at theta_hi a "fail" (and at theta_lo a "pass") has probability about 1 - confidence or less."""
    a, b = _bank(300, seed=1)
    cut = Cut.at_theta(0.3, indifference=0.3)
    rule = SprtRule(cut, confidence=0.9)
    n = 250
    for truth, wrong in ((cut.high, -1), (cut.low, 1)):
        x = _simulate(np.full(n, truth), a, b, seed=int(10 * truth) + 5)
        traj = run_adaptive(x, a, b, budget=80, stopping=StoppingRule(max_items=80, decision=rule))
        errors = (traj.decision == wrong).sum()
        assert errors / n <= _error_bound(0.1, n), (truth, errors)
        assert (traj.decision == -wrong).mean() > 0.6      # most tests decide, and decide right


def test_interval_rule_errors_outside_an_indifference_region_stay_within_the_asked_rate():
    a, b = _bank(300, seed=2)
    rng = np.random.default_rng(3)
    theta = rng.normal(0, 1, 500)
    x = _simulate(theta, a, b, seed=4)
    traj = run_adaptive(x, a, b, budget=80, stopping=StoppingRule(
        max_items=80, decision=ConfidenceRule(Cut.at_theta(0.3), confidence=0.9)))
    outside = np.abs(theta - 0.3) > 0.3
    wrong = ((traj.decision == 1) & (theta < 0.3)) | ((traj.decision == -1) & (theta > 0.3))
    assert wrong[outside].mean() <= _error_bound(0.1, outside.sum())
    assert traj.n_items[outside].mean() < traj.n_items[~outside].mean()       # easy calls are quick


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["ci", "sprt"])
def test_error_rates_by_region_on_a_large_simulation(rule):
    """4,000 simulees from N(0, 1), confidence 0.95: in every ability band outside the region the
    error rate is within the Monte Carlo interval of 5% or below it."""
    a, b = _bank(400, seed=5)
    rng = np.random.default_rng(6)
    theta = rng.normal(0, 1, 4000)
    x = _simulate(theta, a, b, seed=7)
    cut = Cut.at_theta(0.5, indifference=0.25)
    decision = SprtRule(cut, confidence=0.95) if rule == "sprt" else ConfidenceRule(Cut.at_theta(0.5),
                                                                                     confidence=0.95)
    traj = run_adaptive(x, a, b, budget=150, stopping=StoppingRule(max_items=150, decision=decision))
    wrong = ((traj.decision == 1) & (theta < 0.5)) | ((traj.decision == -1) & (theta > 0.5))
    for lo, hi in ((-9, 0.0), (0.0, 0.25), (0.75, 1.0), (1.0, 9)):
        band = (theta > lo) & (theta <= hi)
        assert wrong[band].mean() <= _error_bound(0.05, band.sum()), (lo, hi, wrong[band].mean())
    # the posterior probability is calibrated: among decided tests, the mean probability of the
    # decision is within Monte Carlo error of the share that is right
    decided = traj.decision != 0
    prob = np.where(traj.decision > 0, traj.p_above, 1 - traj.p_above)[decided]
    right = ~wrong[decided]
    assert abs(prob.mean() - right.mean()) < 3 * math.sqrt(right.mean() * (1 - right.mean()) / decided.sum()) + 0.01


def test_the_mle_of_a_decided_test_is_on_the_decided_side():
    """A consistency check against an independent estimator: scipy's MLE on the items a test used."""
    a, b = _bank(200, seed=8)
    theta = np.array([-1.5, 1.8])
    x = _simulate(theta, a, b, seed=9)
    traj = run_adaptive(x, a, b, budget=120, stopping=StoppingRule(
        max_items=120, decision=ConfidenceRule(Cut.at_theta(0.0), confidence=0.95)))
    for m in range(2):
        used = traj.items[m, :traj.n_items[m]]
        mle = optimize.minimize_scalar(lambda t, m=m, used=used: -log_likelihood(x[m, used], t, a[used], b[used]).sum(),
                                       bounds=(-8, 8), method="bounded").x
        assert np.sign(mle) == traj.decision[m] == np.sign(theta[m])
