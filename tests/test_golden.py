"""Golden outputs: the MAP calibration, MAP ability and the agreement protocol on a small fixed
input, compared with stored values at the tolerance each algorithm guarantees.

A recovery bound (``Spearman > 0.9``) absorbs a change in results; these tests see it. The
stored values (``fixtures/golden.json``) were computed by irtlib before its modules were restructured into layers,
so they also prove that the restructuring left the numbers as they were. If a change of results
is intended, regenerate them with ``python tests/test_golden.py`` and say so in the commit.

Tolerances. Both estimators are iterative and stop on their own rule, so the digits
below that rule depend on the machine (BLAS build, summation order, library versions):

- ``fit_map`` stops when its largest step in (theta, log a, b) is below ``tol = 1e-6``; two
  machines may stop at different points within a few ``tol`` of the same mode. The stored answer is
  compared at ``10 tol`` on that scale (log a, not a: a = 7.7 moves 7.7 times more), and is checked
  to be a stationary point of the current objective: the full Newton step from it, computed here
  from an independent gradient and a finite-difference Hessian, is below ``10 tol``.
- ``map_ability`` stops when its Newton step is below ``tol = 1e-8``; it is run on the *stored*
  item parameters (so the fit's own tolerance does not propagate) and compared at ``10 tol``.
- The protocol's agreements are Spearman correlations of 8 test models: functions of ranks only,
  so they are exact up to float rounding (1e-12) unless a change of results reorders models.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import simulate_2pl

GOLDEN = Path(__file__).with_name("fixtures") / "golden.json"
FIT_TOL = 1e-6          # irtlib.calibration.joint_map.fit_map's default stopping tolerance (largest step)
ABILITY_TOL = 1e-8      # irtlib.core.ability.map_ability's default stopping tolerance (Newton step)
RANK_ATOL = 1e-12       # a Spearman rho from ranks: exact up to float rounding


def golden_values() -> np.ndarray:
    values, *_ = simulate_2pl(30, 60, seed=21, sd_log_a=0.8, missing=0.05)
    return values


def compute(item_params: tuple[np.ndarray, np.ndarray] | None = None) -> dict:
    """The golden quantities from the installed irtlib (the same calls that made the fixture).

    ``map_ability`` runs on ``item_params`` (the stored a and b) when given, else on this fit's.
    """
    from irtlib import ResponseMatrix, fit_2pl, map_ability, run_protocol

    values = golden_values()
    m = ResponseMatrix(values, [f"m{i:02d}" for i in range(30)], [f"q{j:02d}" for j in range(60)], source="golden")
    cal = fit_2pl(m, engine="map")
    a, b = item_params if item_params is not None else (cal.a.to_numpy(), cal.b.to_numpy())
    est = map_ability(values[:5, :20], a[:20], b[:20])
    res = run_protocol(m, ks=[1, 3, 8, 20], n_splits=3, n_test=8, seed=4, progress=False)
    return {
        "fit_2pl_map": {"a": cal.a.tolist(), "b": cal.b.tolist(), "theta": cal.theta.tolist()},
        "map_ability": {"theta": np.asarray(est.theta).tolist(), "se": np.asarray(est.se).tolist()},
        "run_protocol": {"split": res["split"].tolist(), "method": res["method"].tolist(), "k": res["k"].tolist(),
                         "agreement": [None if np.isnan(v) else float(v) for v in res["agreement"]]},
    }


@pytest.fixture(scope="module")
def pair():
    stored = json.loads(GOLDEN.read_text())
    fit = stored["fit_2pl_map"]
    return stored, compute((np.asarray(fit["a"]), np.asarray(fit["b"])))


def log_posterior_gradient(params: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Gradient of the 2PL joint log posterior (priors N(0, 1) on theta, log a, b), written anew here.

    ``params`` is ``(theta, log a, b)`` concatenated; missing cells (NaN) drop out.
    """
    n_models, n_items = x.shape
    theta, log_a, b = np.split(params, [n_models, n_models + n_items])
    a = np.exp(log_a)
    observed = ~np.isnan(x)
    z = a * (theta[:, None] - b)
    r = np.where(observed, np.nan_to_num(x) - 1.0 / (1.0 + np.exp(-z)), 0.0)
    return np.concatenate([r @ a - theta, (r * z).sum(axis=0) - log_a, -a * r.sum(axis=0) - b])


def test_fit_2pl_map_is_unchanged(pair):
    stored, now = pair
    # on the scale of the stopping rule: theta, log a, b
    for key, scale in (("a", np.log), ("b", np.asarray), ("theta", np.asarray)):
        np.testing.assert_allclose(scale(now["fit_2pl_map"][key]), scale(stored["fit_2pl_map"][key]), rtol=0,
                                   atol=10 * FIT_TOL, err_msg=key)


def test_stored_fit_is_a_mode_of_the_current_objective(pair):
    """The full Newton step from the stored answer is below the fit's stopping tolerance (times 10)."""
    stored, _ = pair
    x = golden_values()
    fit = stored["fit_2pl_map"]
    params = np.concatenate([fit["theta"], np.log(fit["a"]), fit["b"]])
    g = log_posterior_gradient(params, x)
    h = 1e-5
    eye = np.eye(params.size)
    hessian = np.stack([(log_posterior_gradient(params + h * e, x) - log_posterior_gradient(params - h * e, x))
                        / (2 * h) for e in eye], axis=1)
    hessian = (hessian + hessian.T) / 2
    assert np.linalg.eigvalsh(hessian).max() < 0            # a maximum, not a saddle
    newton_step = np.linalg.solve(-hessian, g)
    assert np.abs(newton_step).max() < 10 * FIT_TOL
    # and the check can fail: a point 100 tol away is not accepted
    moved = params + 100 * FIT_TOL
    assert np.abs(np.linalg.solve(-hessian, log_posterior_gradient(moved, x))).max() > 10 * FIT_TOL


def test_map_ability_is_unchanged(pair):
    stored, now = pair
    for key in ("theta", "se"):
        np.testing.assert_allclose(now["map_ability"][key], stored["map_ability"][key], rtol=0,
                                   atol=10 * ABILITY_TOL, err_msg=key)


def test_run_protocol_is_unchanged(pair):
    stored, now = pair
    for key in ("split", "method", "k"):
        assert now["run_protocol"][key] == stored["run_protocol"][key], key
    got = np.array([np.nan if v is None else v for v in now["run_protocol"]["agreement"]])
    want = np.array([np.nan if v is None else v for v in stored["run_protocol"]["agreement"]])
    np.testing.assert_allclose(got, want, rtol=0, atol=RANK_ATOL)
    assert len(set(stored["run_protocol"]["method"])) == 8 and np.isfinite(want).sum() > 80


if __name__ == "__main__":          # regenerate the fixture (only for an intended change of results)
    sys.path.insert(0, str(Path(__file__).parent))
    doc = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    doc.update(compute())       # map_ability on this fit's a and b, the ones stored beside it
    GOLDEN.write_text(json.dumps(doc, indent=1))
