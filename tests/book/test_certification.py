"""The certification study's helpers (irtbook.certification) on small simulated matrices."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import simulate_2pl

from irtbook import certification as cz
from irtlib.bank.build import calibrate_bank
from irtlib.bank.session import AdaptiveSession
from irtlib.calibration.joint_map import fit_map
from irtlib.core.responses import ResponseMatrix


@pytest.fixture(scope="module")
def matrix():
    values, _, _, _ = simulate_2pl(24, 80, seed=31, sd_log_a=0.6)
    values[:, :3] = 1.0                                  # three items every model passes: filtered out
    return ResponseMatrix(values, [f"m{i:02d}" for i in range(24)], [f"q{j:02d}" for j in range(80)])


def test_each_left_out_bank_is_fitted_without_its_model(matrix):
    banks = cz.leave_one_out(matrix, rows=[0, 5])
    x = matrix.values
    for i, m in enumerate((0, 5)):
        others = np.delete(np.arange(24), m)
        _, a, b, _ = fit_map(x[others][:, 3:])
        np.testing.assert_allclose(banks.a[i, 3:], a, rtol=1e-12)
        np.testing.assert_allclose(banks.b[i, 3:], b, rtol=1e-12)
        assert not banks.available[i, :3].any() and banks.available[i, 3:].all()
        assert banks.filtered_sum[i] == 3.0 and banks.full_score[i] == pytest.approx(np.nanmean(x[m]))


def test_batch_certification_of_left_out_models_is_the_session_on_their_banks(matrix):
    """The book's batch run per left-out model equals AdaptiveSession on a bank calibrated without it."""
    rows = [2, 9]
    banks = cz.leave_one_out(matrix, rows=rows)
    traj = cz.certify(banks, score=0.5, confidence=0.9, budget=30)
    for i, m in enumerate(rows):
        others = [name for r, name in enumerate(matrix.models) if r != m]
        bank = calibrate_bank(matrix.subset(models=others), interval_check=False)
        row = matrix.to_frame().loc[matrix.models[m]]
        result = AdaptiveSession(bank, max_items=30, pass_score=0.5, confidence=0.9).run(row.get)
        assert result.n_items == traj.n_items[i]
        assert result.decision["outcome"] == ("fail", "undecided", "pass")[traj.decision[i] + 1]
        assert result.decision["p_above"] == pytest.approx(traj.p_above[i], abs=1e-6)


def test_the_table_counts_agreement_with_the_full_benchmark(matrix):
    banks = cz.leave_one_out(matrix, rows=range(0, 24, 3))
    table = cz.certification_table(banks, scores=(0.5,), confidence=0.9, budget=20, indifference=0.05)
    assert list(table.rule) == ["interval rule", "SPRT, +/-0.05"]
    truth = banks.full_score >= 0.5
    for _, row in table.iterrows():
        d = 0.05 if row.rule.startswith("SPRT") else None
        traj = cz.certify(banks, score=0.5, confidence=0.9, budget=20, indifference=d)
        passed = np.where(traj.decision != 0, traj.decision > 0, traj.p_above >= 0.5)
        assert row.accuracy == pytest.approx((passed == truth).mean())
        assert row["items (mean)"] == pytest.approx(traj.n_items.mean()) and row.k == round(traj.n_items.mean())
        assert row["models above"] == truth.sum() and 0 <= row["Random accuracy"] <= 1


def test_simulated_errors_outside_the_region_are_rare_and_the_interval_is_wilsons():
    rng = np.random.default_rng(2)
    a, b = np.exp(rng.normal(0, 0.5, 150)), rng.normal(0, 1, 150)
    out = cz.simulate_certification(a, b, score=0.6, indifference=0.03, confidence=0.9, budget=40, n_models=300)
    assert (out["error outside"] <= out["error outside (95% upper)"]).all()
    assert (out["error outside (95% upper)"] < 0.1 + 0.05).all()
    assert cz.mc_upper(0, 100) == pytest.approx(0.037, abs=1e-3)      # Wilson's rule of three, roughly
    assert cz.mc_upper(5, 100) == pytest.approx(0.1118, abs=1e-3)


def _alone(x, items, rule, budget):
    """One rule's run, as the chapter measured it before: run_adaptive stopped by that rule alone."""
    from irtlib.selection.adaptive import run_adaptive
    from irtlib.selection.stopping import StoppingRule

    return run_adaptive(x, items=items, budget=budget, stopping=StoppingRule(max_items=budget, decision=rule))


def test_rules_read_off_one_run_are_each_rules_own_run_bit_for_bit():
    """run_rules: decisions, lengths and probabilities of every rule equal a separate stopped run per rule."""
    from irtlib.selection.certify import ConfidenceRule, Cut, SprtRule
    from irtlib.selection.items import TwoPLItems

    rng = np.random.default_rng(5)
    a, b = np.exp(rng.normal(0, 0.5, 120)), rng.normal(0, 1, 120)
    items = TwoPLItems(a, b)
    theta = rng.standard_normal(400)
    x = (rng.random((400, 120)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    x[rng.random(x.shape) < 0.05] = np.nan                     # unavailable cells
    rules = [ConfidenceRule(Cut.at_score(0.55, items), confidence=0.9),
             SprtRule(Cut.at_score(0.55, items, indifference=0.03), confidence=0.9),
             ConfidenceRule(Cut.at_score(0.7, items), confidence=0.95)]
    for rule, got in zip(rules, cz.run_rules(x, items, budget=40, rules=rules), strict=True):
        want = _alone(x, items, rule, 40)
        assert np.array_equal(got.decision, want.decision) and np.array_equal(got.n_items, want.n_items)
        assert np.array_equal(got.p_above, want.p_above)
    assert len({tuple(r.n_items) for r in cz.run_rules(x, items, budget=40, rules=rules)}) == 3   # they differ


def test_rules_on_left_out_banks_are_certify_per_rule_bit_for_bit(matrix):
    """Per-model banks and cuts (the leave-one-out study): the same as certify() for each cut and rule."""
    banks = cz.leave_one_out(matrix, rows=range(0, 24, 2))
    x = np.where(banks.available, banks.values, np.nan)
    cases = [(s, d) for s in (0.4, 0.6) for d in (None, 0.04)]
    rules = [cz._rule(cz._loo_cut(banks, s, d), confidence=0.9, sprt=d is not None) for s, d in cases]
    got = cz.run_rules(x, cz.TwoPLItems(banks.a, banks.b), budget=25, rules=rules)
    for (s, d), outcome in zip(cases, got, strict=True):
        want = cz.certify(banks, score=s, confidence=0.9, budget=25, indifference=d)
        assert np.array_equal(outcome.decision, want.decision) and np.array_equal(outcome.n_items, want.n_items)
        assert np.array_equal(outcome.p_above, want.p_above)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("missing", [0.0, 0.1])
def test_the_left_out_variance_filter_is_the_subsets_bit_for_bit(order, missing):
    rng = np.random.default_rng(41)
    values, _, _, _ = simulate_2pl(30, 57, seed=42, sd_log_a=0.6)
    values[:, :4] = 1.0
    values[rng.random(values.shape) < missing] = np.nan
    values[:, 5] = np.nan
    values[7, 5] = 1.0                                    # an item only model 7 saw: the subset raises without it
    m = ResponseMatrix(np.asarray(values, order=order), [f"m{i}" for i in range(30)], [f"q{j}" for j in range(57)])
    x = np.asarray(m.values, dtype=float)
    for left in (0, 7, 29):
        others = np.delete(np.arange(30), left)
        rate = np.nanmean(x[others], axis=0)
        if left == 7:
            with pytest.raises(ValueError):
                cz._variance_kept(m, others, rate, 0.01)
            continue
        subset = m.subset(models=[m.models[r] for r in others]).item_variance().to_numpy()
        ours = rate * (1.0 - rate)
        assert np.array_equal(ours.view(np.int64), subset.view(np.int64))
        assert np.array_equal(cz._variance_kept(m, others, rate, 0.01), subset > 0.01)
