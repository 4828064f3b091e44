"""irtlib.calibration.models through its public entry points: fit_irt and compare_models on a ResponseMatrix.

tests/fit/test_fit_checks.py tests the engine on plain complete arrays (posterior mode, recovery,
each pairwise comparison); here the same engine is reached as a user reaches it, on a labelled
matrix with 5% of the cells missing, and the three models are compared together.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import pearsonr

from irtlib import ResponseMatrix, compare_models, fit_irt
from irtlib.calibration.models import n_parameters


def simulate(model: str, *, seed: int, n_models: int = 200, n_items: int = 150):
    """Responses drawn from ``model`` (1PL: one a = 1.2; 3PL: c ~ Beta(5, 17)), 5% missing."""
    rng = np.random.default_rng(seed)
    theta, b = rng.normal(size=n_models), rng.normal(0.3, 1, n_items)
    a = np.full(n_items, 1.2) if model == "1pl" else np.exp(rng.normal(0.2, 0.4, n_items))
    c = rng.beta(5, 17, n_items) if model == "3pl" else np.zeros(n_items)
    x = (rng.random((n_models, n_items)) < c + (1 - c) * expit(a * (theta[:, None] - b))).astype(float)
    x[rng.random(x.shape) < 0.05] = np.nan
    matrix = ResponseMatrix(x, [f"m{i}" for i in range(n_models)], [f"q{j}" for j in range(n_items)])
    return matrix, theta, a, b, c


def test_fit_irt_recovers_the_1pl_on_a_matrix_with_missing_cells():
    matrix, theta, _, b, _ = simulate("1pl", seed=1)
    cal = fit_irt(matrix, model="1pl")
    # measured: r(theta) 0.982, r(b) 0.986
    assert pearsonr(theta, cal.theta)[0] > 0.97 and pearsonr(b, cal.b)[0] > 0.97
    assert np.ptp(cal.a.to_numpy()) == 0 and cal.c is None
    assert list(cal.a.index) == list(matrix.items) and list(cal.theta.index) == list(matrix.models)
    assert cal.settings["model"] == "1pl" and cal.diagnostics["converged"]


def test_fit_irt_recovers_the_3pl_on_a_matrix_with_missing_cells():
    matrix, theta, _, b, c = simulate("3pl", seed=1)
    cal = fit_irt(matrix, model="3pl")
    # measured: r(theta) 0.969, r(b) 0.926, r(c) 0.41, mean c 0.192 (true 0.221)
    assert pearsonr(theta, cal.theta)[0] > 0.95 and pearsonr(b, cal.b)[0] > 0.9
    assert pearsonr(c, cal.c)[0] > 0.3 and abs(cal.c.mean() - c.mean()) < 0.05
    assert ((cal.c > 0) & (cal.c < 1)).all() and list(cal.c.index) == list(matrix.items)
    assert cal.settings["priors"]["c"] == "Beta(5.0, 17.0)"


@pytest.mark.parametrize("generating", ["1pl", "2pl"])
def test_compare_models_chooses_the_generating_model(generating):
    matrix, *_ = simulate(generating, seed=2)
    table = compare_models(matrix, folds=3, seed=0).set_index("model")
    # measured (held-out log-likelihood per response): 1PL data 1pl -0.5006, 2pl -0.5057, 3pl -0.5086;
    # 2PL data 1pl -0.5101, 2pl -0.5063, 3pl -0.5100
    assert table["heldout_loglik"].idxmax() == generating
    assert list(table.index) == ["1pl", "2pl", "3pl"]
    n_cells = int((~np.isnan(matrix.values)).sum())
    for model, row in table.iterrows():
        k = n_parameters(model, *matrix.shape)
        assert row["n_parameters"] == k
        assert row["bic"] == pytest.approx(-2 * row["loglik"] + k * np.log(n_cells))
        assert row["aic"] == pytest.approx(-2 * row["loglik"] + 2 * k)


def test_n_parameters_counts_each_model():
    assert [n_parameters(m, 10, 4) for m in ("1pl", "2pl", "3pl")] == [10 + 1 + 4, 10 + 8, 10 + 12]
