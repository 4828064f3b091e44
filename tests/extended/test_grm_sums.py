"""The GRM's sums over models (or nodes) and thresholds give numpy's bits (``grm._sum_middle``, ``grm._sum_last``).

Each is checked against numpy's ``sum`` on tables with zeros of both signs, infinities, NaN and
subnormals, in the shapes the fits make; ``_expected_loglik`` and ``fit_grm`` (joint mode and
marginal ML) against their previous form (``tests/grm_previous_forms.py``).
"""

import itertools
import warnings

import grm_previous_forms as previous
import numpy as np
import pytest

from irtlib.extended import grm

EDGES = np.array([0.0, -0.0, 1.5, -1.5, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e308, -1e308, 2.0 ** -1074])


def same_bits(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and np.array_equal(a.view(np.int64), b.view(np.int64))


def _tables(shape, seed):
    rng = np.random.default_rng(seed)
    g = rng.standard_normal(shape) * np.exp(rng.normal(0, 6, shape))
    edge = rng.random(shape) < 0.15
    g[edge] = rng.choice(EDGES, size=int(edge.sum()))
    return g


@pytest.mark.parametrize("shape", [(4906, 12, 2), (300, 67, 2), (5, 22, 3), (1, 30, 2), (40, 1, 2), (200, 30, 9),
                                   (17, 8, 1), (3, 5, 5), (0, 4, 2)])
def test_sum_over_the_middle_axis_is_numpys(shape):
    g = _tables(shape, seed=sum(shape))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert same_bits(grm._sum_middle(g), g.sum(axis=1))
        f = np.asfortranarray(g)                      # another layout: numpy's own sum (another order)
        assert same_bits(grm._sum_middle(f), f.sum(axis=1))


def test_sum_over_two_thresholds_is_numpys_on_every_pair_of_edge_values():
    pairs = np.array(list(itertools.product(EDGES, EDGES)))
    g = np.ascontiguousarray(pairs.reshape(-1, 1, 2).repeat(3, axis=1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert same_bits(grm._sum_last(g), g.sum(axis=-1))
        for shape in [(4906, 12, 2), (7, 3, 4), (9, 1), (5, 6, 1)]:
            h = _tables(shape, seed=3)
            assert same_bits(grm._sum_last(h), h.sum(axis=-1))


def _grm_data(n_models, n_items, n_cat, seed, missing=0.1):
    rng = np.random.default_rng(seed)
    alpha = rng.normal(0, 1.0, n_items)
    c = rng.normal(0, 1.5, (n_items, n_cat - 1))
    b = np.cumsum(np.concatenate([c[:, :1], np.exp(c[:, 1:])], axis=1), axis=1)
    theta = rng.normal(0, 2, n_models)
    x = rng.integers(0, n_cat, (n_models, n_items)).astype(float)
    obs = rng.random((n_models, n_items)) > missing
    return alpha, c, b, theta, np.where(obs, x, np.nan), obs


@pytest.mark.parametrize(("n_models", "n_items", "n_cat"), [(12, 900, 3), (22, 300, 3), (30, 40, 2), (25, 60, 6),
                                                           (300, 20, 4), (9, 200, 10)])
def test_expected_loglik_equals_its_previous_form(n_models, n_items, n_cat):
    alpha, c, b, theta, x, obs = _grm_data(n_models, n_items, n_cat, seed=n_items)
    counts = grm._one_hot(np.nan_to_num(x), obs, n_cat).transpose(1, 0, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for want in (True, False):
            got = grm._expected_loglik(alpha, c, b, theta, counts, want_theta=want)
            old = previous.expected_loglik(alpha, c, b, theta, counts, want_theta=want)
            assert all(same_bits(u, v) for u, v in zip(got, old, strict=True) if v is not None)


@pytest.mark.parametrize(("method", "n_models", "n_items", "n_cat"), [("jmap", 12, 150, 3), ("jmap", 20, 60, 5),
                                                                     ("mml", 80, 15, 3), ("mml", 60, 10, 6)])
def test_fit_grm_equals_its_previous_form(monkeypatch, method, n_models, n_items, n_cat):
    _, _, _, _, x, _ = _grm_data(n_models, n_items, n_cat, seed=7)
    got = grm.fit_grm(x, method=method, tol=1e-6)
    monkeypatch.setattr(grm, "_expected_loglik", previous.expected_loglik)
    old = grm.fit_grm(x, method=method, tol=1e-6)
    for name in ("a", "thresholds", "theta", "theta_se"):
        assert same_bits(getattr(got, name), getattr(old, name))
    assert got.log_likelihood == old.log_likelihood and got.diagnostics == old.diagnostics
