"""The bank audit's Fluid runs (irtbook.bank_checks.fluid_first_reach) on a small simulated matrix."""

import numpy as np
import pandas as pd

from irtbook import bank_checks as bc
from irtlib.core.responses import ResponseMatrix


def _matrix():
    rng = np.random.default_rng(11)
    theta, a, b = rng.normal(size=40), np.exp(rng.normal(0, 0.4, 60)), rng.normal(-1, 1, 60)
    x = (rng.random((40, 60)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    return ResponseMatrix(x, [f"m{i}" for i in range(40)], [f"i{j}" for j in range(60)], source="simulated")


def _same(r, s):
    return (r["curve"].equals(s["curve"]) and r["n_items"] == s["n_items"]
            and {k: v for k, v in r.items() if k != "curve"} == {k: v for k, v in s.items() if k != "curve"})


def test_a_drop_that_removes_nothing_is_the_run_on_all_items_made_once(monkeypatch):
    m = _matrix()
    bc._REACHED.clear()
    full = bc.fluid_first_reach(m, n_splits=2)
    calls = []
    monkeypatch.setattr(bc, "run_protocol", lambda *a, **k: calls.append(1))
    again = bc.fluid_first_reach(m, drop=[], n_splits=2)
    assert not calls and _same(full, again)
    again["curve"].iloc[0, 1] = -1.0                       # a copy: the kept result is not changed
    assert _same(full, bc.fluid_first_reach(m, n_splits=2))
    monkeypatch.undo()
    bc._REACHED.clear()
    assert _same(full, bc.fluid_first_reach(m, drop=["not an item"], n_splits=2))   # made afresh: the same
    dropped = bc.fluid_first_reach(m, drop=["i0", "i1"], n_splits=2)
    assert dropped["n_items"] == 58 and isinstance(dropped["curve"], pd.DataFrame)
