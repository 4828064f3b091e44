"""The stopping rule's reasons (irtlib.selection.stopping): the first criterion that holds, as np.select gives it."""

from __future__ import annotations

import numpy as np
import pytest

from irtlib.selection.stopping import STOP_REASONS, StoppingRule, _first_reason


def _select(conditions, shape):
    """The reference: np.select over the criteria, an unset one (None) all False."""
    return np.select([np.zeros(shape, dtype=bool) if c is None else c for c in conditions],
                     np.arange(len(STOP_REASONS)), -1)


def test_first_reason_equals_np_select_on_random_criteria():
    rng = np.random.default_rng(3)
    for _ in range(500):
        shape = () if rng.random() < 0.2 else (int(rng.integers(0, 7)),)
        conditions = [None if rng.random() < 0.4 else rng.random(shape) < 0.3 for _ in STOP_REASONS]
        conditions[3] = rng.random(shape) < 0.3                   # "exhausted" is always checked
        got, want = _first_reason(conditions, shape), _select(conditions, shape)
        assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)


def test_first_reason_by_hand():
    t, f = np.array([True, False, True, False]), np.array([False, False, True, True])
    assert _first_reason([None, None, t, f, None], (4,)).tolist() == [2, -1, 2, 3]
    assert _first_reason([f, t, t, f, t], (4,)).tolist() == [1, -1, 0, 0]
    assert _first_reason([None, None, None, np.zeros(0, bool), None], (0,)).shape == (0,)


@pytest.mark.parametrize("rule", [StoppingRule(max_items=3), StoppingRule(target_se=0.3, min_information=0.05),
                                  StoppingRule(max_items=5, target_se=0.4, min_information=0.1)])
def test_reasons_equal_np_select(rule):
    rng = np.random.default_rng(5)
    n = 50
    n_items, left = rng.integers(0, 7, n), rng.integers(0, 3, n)
    se, best = rng.uniform(0.2, 0.6, n), rng.uniform(0.0, 0.2, n)
    got = rule.reasons(n_items=n_items, left=left, se=se, best_information=best)
    conditions = [None,
                  None if rule.target_se is None else (n_items > 0) & (se <= rule.target_se),
                  None if rule.max_items is None else n_items >= rule.max_items,
                  left == 0,
                  None if rule.min_information is None else best < rule.min_information]
    assert np.array_equal(got, _select(conditions, (n,))) and got.dtype == np.arange(1).dtype
