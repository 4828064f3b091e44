import numpy as np
import pandas as pd
import pytest

from irtlib.protocol.savings import first_budget, savings_table, table2_column


def curves():
    ks = [1, 2, 5, 10, 20]
    rows = []
    for method, means in {"fluid": [0.5, 0.8, 0.91, 0.95, 0.97], "random": [0.3, 0.5, 0.7, 0.92, 0.96],
                          "disco": [0.4, 0.6, 0.85, 0.89, 0.93],
                          "marginal-fisher": [0.5, 0.7, 0.88, 0.9, 0.95]}.items():
        rows += [{"benchmark": "b", "method": method, "k": k, "mean": m} for k, m in zip(ks, means, strict=False)]
    return pd.DataFrame(rows)


def test_first_budget_pools_methods_by_their_best_mean():
    c = curves()
    assert first_budget(c, ["fluid"]) == 5
    assert first_budget(c, ["marginal-fisher"]) == 10
    assert first_budget(c, ["disco", "marginal-fisher"]) == 10
    assert first_budget(c, ["disco"], threshold=0.99) is None
    with pytest.raises(ValueError, match="none of the methods"):
        first_budget(c, ["anchor-points"])


def test_savings_are_one_minus_k_over_n():
    s = savings_table(curves(), {"b": 100})
    assert s.loc["b", "adaptive"] == pytest.approx(0.95)
    assert s.loc["b", "marginal-fisher"] == pytest.approx(0.90)
    assert s.loc["b", "best static"] == pytest.approx(0.90)
    assert np.isnan(savings_table(curves(), {"b": 100}, threshold=0.99).loc["b", "adaptive"])


def test_table2_column_lays_out_mean_sd_interval():
    table = pd.DataFrame([
        {"benchmark": "b", "column": "left", "k": 5, "k_over_n": 0.05, "status": "reached", "method": m,
         "mean": mean, "sd": 0.1, "lo": mean - 0.2, "hi": min(1, mean + 0.1)}
        for m, mean in (("fluid", 0.91), ("random", 0.7))])
    col = table2_column(table, "left", ["fluid", "random", "disco"])
    assert col.loc["b", ("", "k")] == 5
    assert col.loc["b", ("random", "mean")] == 0.7
    assert ("disco", "mean") not in col.columns
