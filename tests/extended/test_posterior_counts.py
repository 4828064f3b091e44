"""The M2PL's and the GRM's expected counts from lifted weights: every fit the same as with the plain product."""

import numpy as np
import pytest

from irtlib.extended import grm, mirt


def _plain(weights, indicator):
    return weights.T @ indicator


def _same(x, y):
    x, y = np.atleast_1d(np.asarray(x, float)), np.atleast_1d(np.asarray(y, float))
    return x.shape == y.shape and np.array_equal(x.view(np.int64), y.view(np.int64))


def _equal_fits(got, want):
    for name in got.__dataclass_fields__:
        if name in ("seconds", "diagnostics"):
            continue
        value = getattr(got, name)
        if value is None or isinstance(value, str):
            assert value == getattr(want, name)
        else:
            assert _same(value, getattr(want, name)), name
    assert got.diagnostics == want.diagnostics


def _binary(n_models, n_items, *, d, seed, missing=0.0):
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=(n_models, d))
    loadings = np.abs(rng.normal(1.5, 0.8, (n_items, d))) * (rng.random((n_items, d)) < 0.7 if d > 1 else 1)
    loadings[np.arange(n_items), rng.integers(0, d, n_items)] += 0.5
    x = (rng.random((n_models, n_items)) < mirt.probability(theta, loadings, rng.normal(0, 2, n_items))).astype(float)
    x[rng.random(x.shape) < missing] = np.nan
    return x


@pytest.mark.parametrize("d, structured, missing", [(2, False, 0.0), (3, True, 0.0), (2, True, 0.1)])
def test_mirt_fit_equals_the_plain_products(monkeypatch, d, structured, missing):
    x = _binary(60, 45, d=d, seed=d, missing=missing)
    structure = (np.arange(45)[:, None] % d == np.arange(d)[None, :]) if structured else None
    lifted = mirt.fit_mirt(x, n_dims=d, structure=structure, tol=1e-7)
    monkeypatch.setattr(mirt, "posterior_counts", _plain)
    plain = mirt.fit_mirt(x, n_dims=d, structure=structure, tol=1e-7)
    _equal_fits(lifted, plain)


@pytest.mark.parametrize("missing", [0.0, 0.15])
def test_grm_marginal_fit_equals_the_plain_product(monkeypatch, missing):
    rng = np.random.default_rng(4)
    theta = rng.normal(size=120)
    a = np.exp(rng.normal(0.5, 0.4, 30))
    b = np.sort(rng.normal(0, 1.5, (30, 3)), axis=1)
    p = np.exp(grm.category_log_probabilities(theta[:, None], a, b))
    cats = (rng.random((120, 30, 1)) > np.cumsum(p, axis=-1)).sum(axis=-1).astype(float)
    cats[rng.random(cats.shape) < missing] = np.nan
    lifted = grm.fit_grm(cats, method="mml", tol=1e-7)
    monkeypatch.setattr(grm, "posterior_counts", _plain)
    plain = grm.fit_grm(cats, method="mml", tol=1e-7)
    _equal_fits(lifted, plain)
