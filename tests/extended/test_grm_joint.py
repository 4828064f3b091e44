"""The GRM's joint-mode objective: ``r / P`` evaluated at the observed categories only, the same numbers."""

import numpy as np
import pytest

from irtlib.extended import grm


@pytest.mark.parametrize("n_cat", [2, 3, 10])
def test_expected_loglik_on_live_cells_is_the_dense_one_bit_for_bit(n_cat):
    rng = np.random.default_rng(n_cat)
    n_models, n_items = 37, 23
    x = rng.integers(0, n_cat, (n_models, n_items)).astype(float)
    obs = rng.random(x.shape) > 0.1
    counts = grm._one_hot(x, obs, n_cat).transpose(1, 0, 2)          # (J, M, K), as the joint mode lays it out
    alpha = rng.normal(0, 1.5, n_items)
    b = np.sort(rng.normal(0, 3, (n_items, n_cat - 1)), axis=1)
    c = np.concatenate([b[:, :1], np.log(np.maximum(np.diff(b, axis=1), 1e-6))], axis=1)
    theta = rng.normal(0, 4, n_models)
    live = np.flatnonzero(counts > 0)
    dense = grm._expected_loglik(alpha, c, b, theta, counts, want_theta=True)
    sparse = grm._expected_loglik(alpha, c, b, theta, counts, want_theta=True, live=live)
    assert dense[0] == sparse[0]
    for want, got in zip(dense[1:], sparse[1:], strict=True):
        assert np.array_equal(want, got, equal_nan=True)      # extreme cells overflow alike


def test_joint_fit_is_unchanged_by_the_live_cells(monkeypatch):
    """fit_grm's joint mode with the dense r / P (live ignored) gives the same fit, evaluation for evaluation."""
    rng = np.random.default_rng(9)
    theta = rng.normal(size=120)
    a, b = np.exp(rng.normal(0, 0.3, 15)), np.sort(rng.normal(0, 1, (15, 3)), axis=1)
    p = np.exp(grm.category_log_probabilities(theta[:, None], a, b))
    x = (rng.random((120, 15, 1)) > np.cumsum(p, axis=2)).sum(axis=2).astype(float)
    new = grm.fit_grm(x, method="jmap")
    dense = grm._expected_loglik
    monkeypatch.setattr(grm, "_expected_loglik", lambda *args, live=None, **kw: dense(*args, **kw))
    old = grm.fit_grm(x, method="jmap")
    assert new.diagnostics["evaluations"] == old.diagnostics["evaluations"]
    for field in ("a", "thresholds", "theta", "theta_se"):
        assert np.array_equal(getattr(new, field), getattr(old, field))
