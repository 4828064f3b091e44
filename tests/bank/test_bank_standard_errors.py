"""Item standard errors in the bank: stored, read back (and banks without them too), used by the intervals."""

import warnings

import numpy as np
import pytest

from irtlib import ResponseMatrix
from irtlib.bank.build import calibrate_bank
from irtlib.bank.format import ItemBank, read_bank
from irtlib.bank.intervals import score_interval
from irtlib.calibration.standard_errors import item_standard_errors
from irtlib.core.kernels import probability
from irtlib.errors import InputError
from irtlib.fit.summaries import CVDraws, coefficient_of_variation, cv_interval


def planted(seed, n_models=120, n_items=30, log_a_sd=0.4):
    rng = np.random.default_rng(seed)
    theta, a, b = rng.normal(size=n_models), np.exp(rng.normal(0, log_a_sd, n_items)), rng.normal(size=n_items)
    x = (rng.random((n_models, n_items)) < probability(theta[:, None], a, b)).astype(float)
    return ResponseMatrix(x, [f"m{i:03d}" for i in range(n_models)], [f"q{j:03d}" for j in range(n_items)]), a


@pytest.fixture(scope="module")
def small():
    m, _ = planted(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return m, calibrate_bank(m, interval_check=False)


def test_bank_stores_the_errors_of_its_fit_and_reads_them_back(small, tmp_path):
    m, bank = small
    kept = m.filter_variance(0.01)
    theta = bank.calibration_theta
    want = item_standard_errors(kept, bank.items["a"], bank.items["b"], theta)
    np.testing.assert_allclose(bank.se_a, want["se_a"].to_numpy(), rtol=1e-9)
    np.testing.assert_allclose(bank.se_b, want["se_b"].to_numpy(), rtol=1e-9)
    assert bank.meta["standard_errors"]["method"] == "observed"
    back = read_bank(bank.write(tmp_path / "bank.csv"))
    np.testing.assert_array_equal(back.se_a, bank.se_a)
    lo, hi = back.meta["diagnostics"]["cv_a_interval"]
    assert lo < back.meta["diagnostics"]["cv_a"] < hi


def test_standard_scale_carries_the_errors_with_the_unit(small):
    m, fit_bank = small
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        std = calibrate_bank(m, interval_check=False, scale="standard")
    s = std.meta["scale"]["fit_theta_sd"]
    np.testing.assert_allclose(std.se_a, fit_bank.se_a * s, rtol=1e-9)
    np.testing.assert_allclose(std.se_b, fit_bank.se_b / s, rtol=1e-9)


def test_a_bank_without_errors_reads_back_and_bad_errors_are_refused(small, tmp_path):
    _, bank = small
    old = ItemBank(bank.items.drop(columns=["se_a", "se_b"]), dict(bank.meta))
    back = read_bank(old.write(tmp_path / "old.csv"))
    assert back.se_a is None and back.se_b is None
    bad = bank.items.copy()
    bad.iloc[2, bad.columns.get_loc("se_b")] = -1.0
    with pytest.raises(InputError, match="row 3: item 'q002': se_b"):
        ItemBank(bad, {})


def test_item_uncertainty_widens_the_score_interval_by_the_delta_method():
    a, b = np.tile([1.0, 2.0, 0.5], 10), np.tile([0.0, 1.0, -1.0], 10)
    se_a, se_b = np.tile([0.2, 0.3, 0.1], 10), np.tile([0.1, 0.2, 0.3], 10)
    score, lo, hi = score_interval(a, b, 0.5, 0.0)
    score2, lo2, hi2 = score_interval(a, b, 0.5, 0.0, item_se=(se_a, se_b))
    p = probability(0.5, a, b)
    w = p * (1 - p)
    var = (w + w**2 * ((0.5 - b) ** 2 * se_a**2 + a**2 * se_b**2)).sum()
    assert score2 == score
    np.testing.assert_allclose(hi2 - score2, 1.959963984540054 * np.sqrt(var) / 30)
    assert lo2 < lo and hi2 > hi


def test_cv_interval_is_a_point_without_error_and_widens_with_it():
    a = np.array([0.5, 1.0, 1.5, 2.0])
    lo, hi = cv_interval(a, np.zeros(4))
    assert lo == pytest.approx(coefficient_of_variation(a)) and hi == pytest.approx(lo)
    narrow, wide = cv_interval(a, 0.05 * a), cv_interval(a, 0.3 * a)
    assert wide[0] < narrow[0] < narrow[1] < wide[1]
    assert cv_interval(a, 0.3 * a, seed=3) == cv_interval(a, 0.3 * a, seed=3)


def _cv_interval_as_drawn_in_one_array(a, se_a, *, draws, seed, level=0.95):
    """The interval from all the draws at once (``np.std``, ``np.mean``): what the blocks must reproduce."""
    z = np.random.default_rng(seed).standard_normal((draws, a.size))
    sims = np.exp(np.log(a) + (se_a / a) * z)
    cvs = np.std(sims, axis=1, ddof=1) / np.mean(sims, axis=1)
    lo, hi = np.quantile(cvs, [(1 - level) / 2, (1 + level) / 2])
    cv = coefficient_of_variation(a)
    return max(0.0, float(2 * cv - hi)), float(2 * cv - lo)


@pytest.mark.parametrize("ahead", [1, 3, 8])
def test_cv_interval_from_draws_made_ahead_is_the_one_of_all_draws_at_once(ahead):
    rng = np.random.default_rng(4)
    a = np.exp(rng.normal(0, 0.6, 333))
    se_a = a * rng.uniform(0.05, 0.5, 333)
    want = _cv_interval_as_drawn_in_one_array(a, se_a, draws=1100, seed=9)
    assert cv_interval(a, se_a, draws=1100, seed=9) == want
    assert cv_interval(a, se_a, draws=1100, seed=9, drawn=CVDraws(333, draws=1100, seed=9, ahead=ahead)) == want


def test_cv_draws_are_refused_for_another_interval_and_stop_when_closed_unused():
    drawn = CVDraws(50, draws=2000, seed=1, ahead=2)
    with pytest.raises(ValueError, match="draws made for"):
        cv_interval(np.ones(50), np.full(50, 0.1), seed=2, drawn=drawn)
    drawn.close()                                     # the thread, blocked on a full queue, ends
    assert not drawn._thread.is_alive()


@pytest.mark.slow
def test_cv_interval_covers_the_planted_cv():
    inside = 0
    for seed in range(10):
        m, a = planted(seed, n_models=200, n_items=60)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bank = calibrate_bank(m, interval_check=False, variance_threshold=0.0)
        lo, hi = bank.meta["diagnostics"]["cv_a_interval"]
        inside += lo <= coefficient_of_variation(a) <= hi
    # measured: 9 of 10 (the one miss: a fit in which one item's a blew up to a CV of 4)
    assert inside >= 8


def test_bank_errors_by_bootstrap_or_none():
    m, _ = planted(1, n_models=40, n_items=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        boot = calibrate_bank(m, interval_check=False, standard_errors="bootstrap", se_bootstrap=3)
        none = calibrate_bank(m, interval_check=False, standard_errors="none")
    assert boot.meta["standard_errors"]["method"] == "bootstrap" and (boot.se_a > 0).all()
    assert none.se_a is None and "standard_errors" not in none.meta and "cv_a_interval" not in none.meta["diagnostics"]
    with pytest.raises(InputError, match="unknown standard_errors 'auto'"):
        calibrate_bank(m, interval_check=False, standard_errors="auto")
