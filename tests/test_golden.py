"""Golden outputs: the MAP calibration, MAP ability and the agreement protocol on a small fixed
input, compared with stored values at a tight tolerance.

A recovery bound (``Spearman > 0.9``) absorbs a change in results; these tests see it. The
stored values (``fixtures/golden.json``) were computed by irtlib before issue 14's restructuring,
so they also prove that the restructuring left the numbers as they were. If a change of results
is intended, regenerate them with ``python tests/test_golden.py`` and say so in the commit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import simulate_2pl

GOLDEN = Path(__file__).with_name("fixtures") / "golden.json"
RTOL, ATOL = 1e-9, 1e-10


def compute() -> dict:
    """The golden quantities from the installed irtlib (the same calls that made the fixture)."""
    from irtlib import ResponseMatrix, fit_2pl, map_ability, run_protocol

    values, *_ = simulate_2pl(30, 60, seed=21, sd_log_a=0.8, missing=0.05)
    m = ResponseMatrix(values, [f"m{i:02d}" for i in range(30)], [f"q{j:02d}" for j in range(60)], source="golden")
    cal = fit_2pl(m, engine="map")
    est = map_ability(values[:5, :20], cal.a.to_numpy()[:20], cal.b.to_numpy()[:20])
    res = run_protocol(m, ks=[1, 3, 8, 20], n_splits=3, n_test=8, seed=4, progress=False)
    return {
        "fit_2pl_map": {"a": cal.a.tolist(), "b": cal.b.tolist(), "theta": cal.theta.tolist()},
        "map_ability": {"theta": np.asarray(est.theta).tolist(), "se": np.asarray(est.se).tolist()},
        "run_protocol": {"split": res["split"].tolist(), "method": res["method"].tolist(), "k": res["k"].tolist(),
                         "agreement": [None if np.isnan(v) else float(v) for v in res["agreement"]]},
    }


@pytest.fixture(scope="module")
def pair():
    return json.loads(GOLDEN.read_text()), compute()


def test_fit_2pl_map_is_unchanged(pair):
    stored, now = pair
    for key in ("a", "b", "theta"):
        np.testing.assert_allclose(now["fit_2pl_map"][key], stored["fit_2pl_map"][key], rtol=RTOL, atol=ATOL,
                                   err_msg=key)


def test_map_ability_is_unchanged(pair):
    stored, now = pair
    for key in ("theta", "se"):
        np.testing.assert_allclose(now["map_ability"][key], stored["map_ability"][key], rtol=RTOL, atol=ATOL,
                                   err_msg=key)


def test_run_protocol_is_unchanged(pair):
    stored, now = pair
    for key in ("split", "method", "k"):
        assert now["run_protocol"][key] == stored["run_protocol"][key], key
    got = np.array([np.nan if v is None else v for v in now["run_protocol"]["agreement"]])
    want = np.array([np.nan if v is None else v for v in stored["run_protocol"]["agreement"]])
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    assert len(set(stored["run_protocol"]["method"])) == 8 and np.isfinite(want).sum() > 80


if __name__ == "__main__":          # regenerate the fixture (only for an intended change of results)
    sys.path.insert(0, str(Path(__file__).parent))
    doc = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    doc.update(compute())
    GOLDEN.write_text(json.dumps(doc, indent=1))
