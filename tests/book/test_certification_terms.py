"""The certification rules' shared grid log-likelihoods: the kernel's equal the item model's, bit for bit."""

import numpy as np
import pytest

from irtbook import certification as cz
from irtlib.extended import logistic_kernel
from irtlib.selection.certify import RULE_POINTS, grid_terms
from irtlib.selection.items import TwoPLItems


def _assert_step_terms_are_grid_terms(items, j, x, points):
    """The certification's step terms equal grid_terms' row for row, bit for bit."""
    want, got = grid_terms(items, j, x, points), cz._step_terms(items, j, x, points)
    assert np.array_equal(want.rows, got.rows)
    assert np.array_equal(want.values.view(np.int64), got.values.view(np.int64))


@pytest.mark.parametrize("per_model", [False, True])
def test_step_terms_are_the_item_models_grid_log_likelihoods(per_model):
    if logistic_kernel.load() is None:
        pytest.skip("no compiled logistic kernel here: the terms are grid_terms' by construction")
    rng = np.random.default_rng(4)
    n, n_items = 300, 50
    shape = (n, n_items) if per_model else (n_items,)
    items = TwoPLItems(np.exp(rng.normal(0, 1.2, shape)), rng.normal(0, 3, shape))
    points, _ = items.ability_grid(0.0, 1.0, RULE_POINTS)
    j = rng.integers(-1, n_items, n)
    x = np.where(rng.random(n) < 0.1, np.nan, (rng.random(n) < 0.6).astype(float))
    _assert_step_terms_are_grid_terms(items, j, x, points)


def test_step_terms_of_a_3pl_bank_are_grid_terms():
    rng = np.random.default_rng(5)
    items = TwoPLItems(np.ones(10), rng.normal(size=10), np.full(10, 0.2))
    points, _ = items.ability_grid(0.0, 1.0, 41)
    j, x = rng.integers(0, 10, 20), (rng.random(20) < 0.5).astype(float)
    assert np.array_equal(cz._step_terms(items, j, x, points).values, grid_terms(items, j, x, points).values)


@pytest.mark.parametrize("per_model", [False, True])
def test_step_terms_computed_once_per_item_and_answer_are_grid_terms_for_every_row(per_model):
    """Many rows on few items (as a step of the simulation): each distinct (a, b, x) once, copied to its rows."""
    rng = np.random.default_rng(6)
    n, n_items = 2000, 7
    a, b = np.exp(rng.normal(0, 1.0, n_items)), rng.normal(0, 2, n_items)
    b[1] = -0.0                                    # and a zero of each sign among the difficulties
    b[2] = 0.0
    if per_model:                                  # per-model banks that repeat (left-out banks of one benchmark)
        which = rng.integers(0, 3, n)
        a = np.stack([a, a * 1.5, a])[which]
        b = np.stack([b, b, b + 0.25])[which]
    items = TwoPLItems(a, b)
    points, _ = items.ability_grid(0.0, 1.0, RULE_POINTS)
    j = rng.integers(-1, n_items, n)
    x = np.where(rng.random(n) < 0.05, np.nan, (rng.random(n) < 0.5).astype(float))
    _assert_step_terms_are_grid_terms(items, j, x, points)
    none = cz._step_terms(items, np.full(3, -1), np.ones(3), points)
    assert none.rows.size == 0 and none.values.shape == (0, points.size)
