"""Fluid agreement with 1PL/2PL/3PL banks: every split's test models in one run, as each split alone."""

import numpy as np
import pytest

from irtlib.calibration.models import fit_irt_values
from irtlib.core.responses import ResponseMatrix
from irtlib.protocol.agreement import split_agreements, split_models
from irtlib.protocol.model_agreement import _fluid_splits, fluid_agreement, fluid_irt


def _matrix(seed):
    rng = np.random.default_rng(seed)
    theta, a, b = rng.normal(size=60), np.exp(rng.normal(0, 0.4, 150)), rng.normal(-0.5, 1, 150)
    p = 0.15 + 0.85 / (1 + np.exp(-a * (theta[:, None] - b)))
    x = (rng.random(p.shape) < p).astype(float)
    x[rng.random(x.shape) < 0.03] = np.nan                     # unavailable cells
    return x


@pytest.mark.parametrize("model", ["1pl", "2pl", "3pl"])
def test_splits_run_together_equal_each_split_alone_bit_for_bit(model):
    x = _matrix(3)
    got = _fluid_splits(x, range(4), model=model, n_test=8, seed=2, budget=30, prior_c=(5.0, 17.0))
    for split in range(4):
        train, test = split_models(x.shape[0], 8, 2, split)
        fit = fit_irt_values(x[train], model=model, prior_c=(5.0, 17.0))
        alone = fluid_irt(x[test], fit["a"], fit["b"], fit["c"], budget=30)
        assert np.array_equal(got[split], alone)


def test_agreement_equals_the_per_split_loop():
    """fluid_agreement's frame: the rho of a per-split calibrate-and-run loop, exactly."""
    x = _matrix(4)
    m = ResponseMatrix(x, [f"m{i}" for i in range(60)], [f"i{j}" for j in range(150)], source="simulated")
    ks = [1, 5, 20]
    out = fluid_agreement(m, model="3pl", ks=ks, n_splits=3, n_test=10, seed=1)
    values = m.filter_variance(0.01).values

    def score(split, train, test):
        fit = fit_irt_values(values[train], model="3pl", prior_c=(5.0, 17.0))
        return fluid_irt(values[test], fit["a"], fit["b"], fit["c"], budget=20)[:, [k - 1 for k in ks]].T

    rhos = split_agreements(values, m.safety_scores().to_numpy(), range(3), score, n_test=10, seed=1)
    assert np.array_equal(out["agreement"].to_numpy(), np.concatenate(rhos))
