"""Work the GRM no longer repeats gives the same bits: graded items' last information table, the joint mode's hot mask.

- :meth:`irtlib.extended.grm.GradedItems.information` keeps its last table and returns it again for abilities of
  the same bits; checked against the module's :func:`~irtlib.extended.grm.information` on every call, and a
  graded adaptive test against one whose items recompute every table.
- ``_expected_loglik`` with ``hot`` (0/1 counts, ``counts > 0`` computed once) and C-ordered counts against its
  previous form (``tests/grm_previous_forms.py``) on the transposed view the joint mode passed before.
"""

import warnings

import grm_previous_forms as previous
import numpy as np
import pytest

from irtlib.extended import grm
from irtlib.selection.cat import StoppingRule, run_cat


def same_bits(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and np.array_equal(a.view(np.int64), b.view(np.int64))


class _Recomputing(grm.GradedItems):
    """GradedItems as before: every call computes its table."""

    def information(self, theta, rows=None):
        return grm.information(np.asarray(theta, dtype=float)[:, None], self.a, self.thresholds)


def _items(n_items, n_cat, seed):
    rng = np.random.default_rng(seed)
    a = np.exp(rng.normal(0, 0.5, n_items))
    b = np.sort(rng.normal(0, 1.5, (n_items, n_cat - 1)), axis=1) + 1e-3 * np.arange(n_cat - 1)
    return a, b


def test_information_is_the_module_function_on_repeated_and_new_abilities():
    a, b = _items(40, 4, seed=1)
    items = grm.GradedItems(a, b)
    theta = np.array([0.0, -0.0, 1.5, -2.25, 7.0, np.nan])
    for t in (theta, theta, theta.copy(), theta + 0.5, theta + 0.5, theta, theta[:3], theta[:3]):
        want = grm.information(t[:, None], a, b)
        assert same_bits(items.information(t), want)
        assert same_bits(items.information(list(t)), want)


def test_information_kept_table_is_not_changed_by_the_caller():
    a, b = _items(12, 3, seed=2)
    items = grm.GradedItems(a, b)
    theta = np.linspace(-2, 2, 5)
    first = items.information(theta)
    first[:] = -1.0                          # a caller scribbling on its table
    theta[0] = 9.0                           # and on its abilities
    assert same_bits(items.information(np.linspace(-2, 2, 5)), grm.information(np.linspace(-2, 2, 5)[:, None], a, b))
    assert same_bits(items.information(theta), grm.information(theta[:, None], a, b))


@pytest.mark.parametrize(("n_cat", "estimator"), [(3, "map"), (5, "map"), (3, "eap"), (2, "map")])
def test_graded_adaptive_test_equals_one_that_recomputes_every_table(n_cat, estimator):
    a, b = _items(60, n_cat, seed=n_cat)
    rng = np.random.default_rng(7)
    theta = rng.standard_normal(9)
    p = grm.category_probabilities(theta[:, None], a, b)
    x = (rng.random((9, 60, 1)) > np.cumsum(p, axis=-1)).sum(axis=-1).astype(float)
    x[rng.random(x.shape) < 0.1] = np.nan
    runs = [run_cat(x, cls(a, b), stopping=StoppingRule(max_items=20), estimator=estimator)
            for cls in (grm.GradedItems, _Recomputing)]
    for name in ("items", "theta", "se", "n_items", "stop_reason", "final_theta", "final_se", "set_aside"):
        got, want = (getattr(r, name) for r in runs)
        if want is None:
            assert got is None, name
        elif np.asarray(want).dtype.kind == "f":  # every float to the bit
            assert same_bits(got, want), name
        else:
            assert np.array_equal(got, want), name


@pytest.mark.parametrize(("n_models", "n_items", "n_cat"), [(12, 900, 3), (22, 300, 3), (30, 40, 2), (9, 200, 10)])
def test_expected_loglik_with_hot_mask_and_c_ordered_counts_equals_its_previous_form(n_models, n_items, n_cat):
    rng = np.random.default_rng(n_items)
    alpha = rng.normal(0, 1.0, n_items)
    c = rng.normal(0, 1.5, (n_items, n_cat - 1))
    b = np.cumsum(np.concatenate([c[:, :1], np.exp(c[:, 1:])], axis=1), axis=1)
    theta = rng.normal(0, 2, n_models)
    theta[:2] = [40.0, -40.0]                # cells whose probabilities underflow: -inf logs, inf ratios
    x = rng.integers(0, n_cat, (n_models, n_items)).astype(float)
    obs = rng.random((n_models, n_items)) > 0.1
    view = grm._one_hot(np.where(obs, x, 0.0), obs, n_cat).transpose(1, 0, 2)     # what the joint mode passed
    counts = np.ascontiguousarray(view)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for want_theta in (True, False):
            got = grm._expected_loglik(alpha, c, b, theta, counts, want_theta=want_theta, hot=counts > 0)
            old = previous.expected_loglik(alpha, c, b, theta, view, want_theta=want_theta)
            assert all(same_bits(u, v) for u, v in zip(got, old, strict=True) if v is not None)


@pytest.mark.parametrize(("n_items", "n_nodes", "n_thresholds"), [(4906, 12, 2), (600, 22, 1), (900, 10, 4),
                                                                  (89, 41, 9), (3, 5, 2)])
def test_offset_and_gap_product_threshold_by_threshold_are_the_broadcast_expressions(n_items, n_nodes, n_thresholds):
    rng = np.random.default_rng(n_items + n_thresholds)
    b = rng.normal(0, 2, (n_items, n_thresholds))
    b.flat[::7] = -0.0
    nodes = rng.normal(0, 2, n_nodes)
    nodes[0] = 0.0
    got = grm._offset(nodes, b)
    assert got.flags.c_contiguous and same_bits(got, nodes[None, :, None] - b[:, None, :])
    ratio = np.exp(rng.normal(0, 30, (n_items, n_nodes, n_thresholds + 1)))          # up to inf
    ratio[rng.random(ratio.shape) < 0.3] = 0.0
    ratio.flat[::11] = np.nan
    ds = rng.random((n_items, n_nodes, n_thresholds))
    ds.flat[::5] = 0.0
    with np.errstate(invalid="ignore"):
        got = grm._gap_product(ds, ratio)
        want = ds * (ratio[..., 1:] - ratio[..., :-1])
    assert got.flags.c_contiguous and same_bits(got, want)
