import numpy as np
import pandas as pd
import pytest

from irtlib import ResponseMatrix


def small_long():
    return pd.DataFrame({
        "model": ["m1", "m1", "m1", "m2", "m2", "m3", "m3", "m3"],
        "item": ["i1", "i2", "i3", "i1", "i3", "i1", "i2", "i3"],
        "score": [1, 0, 1, 0, 1, 1, 1, 0],
    })


def test_from_long_builds_matrix_with_missing_cells():
    df = small_long()
    before = df.copy()
    m = ResponseMatrix.from_long(df)
    pd.testing.assert_frame_equal(df, before)  # input untouched
    assert list(m.models) == ["m1", "m2", "m3"] and list(m.items) == ["i1", "i2", "i3"]
    np.testing.assert_array_equal(m.values, [[1, 0, 1], [0, np.nan, 1], [1, 1, 0]])
    assert m.n_observations == 8
    # safety score over observed items only
    np.testing.assert_allclose(m.safety_scores().to_numpy(), [2 / 3, 1 / 2, 2 / 3])
    np.testing.assert_allclose(m.item_safe_rates().to_numpy(), [2 / 3, 1 / 2, 2 / 3])


def test_values_are_read_only_and_roundtrip_long_and_wide():
    m = ResponseMatrix.from_long(small_long())
    with pytest.raises(ValueError):
        m.values[0, 0] = 0.0
    assert ResponseMatrix.from_long(m.to_long()) == m
    assert ResponseMatrix.from_wide(m.to_frame()) == m
    wide = m.to_frame().reset_index()
    assert ResponseMatrix.from_wide(wide, model="model") == m


def test_custom_column_names_and_identical_duplicates():
    df = small_long().rename(columns={"model": "llm", "item": "prompt", "score": "safe"})
    df = pd.concat([df, df.iloc[[0]]], ignore_index=True)  # same judgment twice: fine
    m = ResponseMatrix.from_long(df, model="llm", item="prompt", score="safe")
    assert m.shape == (3, 3)


def test_filter_variance_uses_binomial_variance_threshold():
    # safe rates 1.0, 0.99 (var 0.0099), 0.98 (var 0.0196), 0.5
    n = 100
    cols = []
    for ones in (100, 99, 98, 50):
        col = np.zeros(n)
        col[:ones] = 1
        cols.append(col)
    m = ResponseMatrix(np.column_stack(cols), [f"m{i}" for i in range(n)], ["all", "p99", "p98", "p50"])
    kept = m.filter_variance()
    assert list(kept.items) == ["p98", "p50"]
    assert list(m.filter_variance(threshold=0.02).items) == ["p50"]


def test_subset_keeps_requested_order_and_rejects_unknown():
    m = ResponseMatrix.from_long(small_long())
    s = m.subset(models=["m3", "m1"], items=["i3", "i1"])
    np.testing.assert_array_equal(s.values, [[0, 1], [1, 1]])
    with pytest.raises(ValueError, match="unknown item.*'nope'"):
        m.subset(items=["nope"])


@pytest.mark.parametrize("score, message", [
    (2, r"row 3: score 2.0 in column 'score' is not 0 or 1"),
    ("yes", r"row 3: score 'yes' in column 'score' is not numeric"),
])
def test_bad_scores_are_named_by_row(score, message):
    df = small_long().astype({"score": object})
    df.loc[2, "score"] = score
    with pytest.raises(ValueError, match=message):
        ResponseMatrix.from_long(df, source="judgments.csv")


def test_conflicting_duplicates_are_named():
    df = pd.concat([small_long(), pd.DataFrame({"model": ["m2"], "item": ["i1"], "score": [1]})],
                   ignore_index=True)
    with pytest.raises(ValueError, match=r"rows \[4, 9\]: model 'm2', item 'i1' has conflicting scores"):
        ResponseMatrix.from_long(df)


def test_missing_columns_empty_and_unobserved_are_rejected():
    with pytest.raises(ValueError, match=r"missing column\(s\) \['score'\]"):
        ResponseMatrix.from_long(small_long().drop(columns="score"), source="x.csv")
    with pytest.raises(ValueError, match="empty"):
        ResponseMatrix.from_long(small_long().iloc[:0])
    with pytest.raises(ValueError, match="empty"):
        ResponseMatrix(np.zeros((0, 3)), [], ["a", "b", "c"])
    with pytest.raises(ValueError, match="model 'm2' has no observed response"):
        ResponseMatrix([[1, 0], [np.nan, np.nan]], ["m1", "m2"], ["i1", "i2"])
    with pytest.raises(ValueError, match="item 'i2' has no observed response"):
        ResponseMatrix([[1, np.nan], [0, np.nan]], ["m1", "m2"], ["i1", "i2"])
    with pytest.raises(ValueError, match="model 'm1', item 'i2' has 0.5"):
        ResponseMatrix([[1, 0.5], [0, 1]], ["m1", "m2"], ["i1", "i2"])
    with pytest.raises(ValueError, match="values have shape"):
        ResponseMatrix([[1, 0], [0, 1]], ["m1"], ["i1", "i2"])


def test_from_wide_names_non_numeric_cell():
    df = pd.DataFrame({"i1": [1, 0], "i2": [1, "x"]}, index=["m1", "m2"])
    with pytest.raises(ValueError, match=r"row 2 \(model 'm2'\), column 'i2': 'x' is not numeric"):
        ResponseMatrix.from_wide(df)
