"""The long reader on categorical columns (pyarrow's codes taken as they are) against the same table as text.

pyarrow's CSV reader hands the long table over as categorical columns; the reader uses their codes
directly, whatever order the categories are in. Every result (the matrix, its order, the warnings and
the errors naming rows) must be the one the plain-text table (factorized row by row) gives.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from irtlib.errors import InputError
from irtlib.io.tables import _long


def _read(frame: pd.DataFrame):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        matrix, _ = _long(frame, "t.csv", rule="auto", threshold=0.5, model_column="model", item_column="item",
                          score_column="score", key_column=None, prompt_column=None)
    return matrix, [str(w.message) for w in caught]


def _shuffled_categories(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The same table, each column categorical with its categories in a random order (not that of appearance)."""
    rng = np.random.default_rng(seed)
    out = {}
    for column in frame.columns:
        distinct = pd.unique(frame[column].dropna())
        out[column] = pd.Categorical(frame[column], categories=distinct[rng.permutation(distinct.size)])
    return pd.DataFrame(out)


def _table(rng, n_models=7, n_items=9, blank=0.2):
    rows = [(f"m{m}", f"q{j}", str(int(rng.integers(0, 2)))) for m in rng.permutation(n_models)
            for j in rng.permutation(n_items)]
    frame = pd.DataFrame(rows, columns=["model", "item", "score"], dtype=object)
    frame.loc[rng.random(len(frame)) < blank, "score"] = None
    frame.loc[frame["model"] == "m3", "score"] = None            # a model with only blank scores: left out
    frame.loc[frame["item"] == "q5", "score"] = None             # an item too
    frame.loc[frame["item"] == "q2", "score"] = None
    return frame


@pytest.mark.parametrize("seed", range(4))
def test_categorical_codes_in_any_order_give_the_text_tables_matrix_and_warnings(seed):
    text = _table(np.random.default_rng(seed))
    want, want_warnings = _read(text)
    got, got_warnings = _read(_shuffled_categories(text, seed))
    assert list(got.models) == list(want.models) and list(got.items) == list(want.items)
    np.testing.assert_array_equal(got.values, want.values)
    assert got_warnings == want_warnings
    assert any("left out 2 items" in w for w in got_warnings) and any("left out 1 model" in w for w in got_warnings)


def test_every_score_given_reads_each_cell_once_in_order_of_first_appearance():
    frame = pd.DataFrame({"model": ["b", "a", "b", "a"], "item": ["y", "y", "x", "x"], "score": ["1", "0", "0", "1"]})
    matrix, _ = _read(_shuffled_categories(frame, 1))
    assert list(matrix.models) == ["b", "a"] and list(matrix.items) == ["y", "x"]
    np.testing.assert_array_equal(matrix.values, [[1.0, 0.0], [0.0, 1.0]])


@pytest.mark.parametrize("categorical", [False, True])
def test_ids_differing_by_whitespace_are_named_by_their_first_rows_in_file_order(categorical):
    frame = pd.DataFrame({"model": ["m1", "m2 ", "m1", " m2", "m2", "m1 "], "item": list("abcdef"),
                          "score": ["1", "0", "1", "0", "1", "0"]})
    frame = _shuffled_categories(frame, 3) if categorical else frame
    with pytest.raises(InputError, match=r"rows 1 and 6: model ids 'm1' and 'm1 ' differ only by surrounding"):
        _read(frame)


@pytest.mark.parametrize("categorical", [False, True])
def test_conflicting_scores_are_named_by_their_rows(categorical):
    frame = pd.DataFrame({"model": ["m1", "m2", "m1", "m1"], "item": ["a", "a", "b", "a"],
                          "score": ["1", "0", "1", "0"]})
    frame = _shuffled_categories(frame, 5) if categorical else frame
    with pytest.raises(InputError, match=r"rows \[1, 4\]: model 'm1', item 'a' has conflicting scores"):
        _read(frame)
