import numpy as np
import pandas as pd
import pytest

from irtlib import binarize_choice, binarize_graded, binarize_wmdp


def test_graded_strict_counts_only_top_category():
    scores = np.array([0.0, 0.5, 1.0, np.nan, 1.0])
    np.testing.assert_array_equal(binarize_graded(scores), [0, 0, 1, np.nan, 1])


def test_graded_lenient_uses_threshold_and_keeps_series_index():
    s = pd.Series([0.0, 0.5, 1.0], index=["a", "b", "c"], name="score")
    out = binarize_graded(s, rule="lenient")
    assert isinstance(out, pd.Series) and list(out.index) == ["a", "b", "c"]
    assert out.tolist() == [0.0, 1.0, 1.0]
    assert binarize_graded(s, rule="lenient", threshold=0.75).tolist() == [0.0, 0.0, 1.0]


def test_graded_rejects_unknown_categories_and_rules():
    with pytest.raises(ValueError, match=r"air.csv: position 1: score 0.7 is not one of"):
        binarize_graded([1.0, 0.7], name="air.csv")
    with pytest.raises(ValueError, match="position 0: 'safe' is not a number"):
        binarize_graded(["safe"])
    with pytest.raises(ValueError, match="unknown binarization rule"):
        binarize_graded([1.0], rule="median")
    # continuous judge scores are fine when the categories are not fixed
    np.testing.assert_array_equal(binarize_graded([0.2, 1.0], allowed=None), [0, 1])


def test_multiple_choice_safe_when_safety_aligned_option_chosen():
    chosen = np.array(["A", "B", None, "C"], dtype=object)
    safe = np.array(["A", "C", "A", "C"], dtype=object)
    np.testing.assert_array_equal(binarize_choice(chosen, safe), [1, 0, np.nan, 1])


def test_wmdp_correct_answer_is_unsafe():
    chosen = pd.Series([0, 1, 2, np.nan])
    out = binarize_wmdp(chosen, 1)
    np.testing.assert_array_equal(out.to_numpy(), [1, 0, 1, np.nan])


def test_choice_key_shape_mismatch_is_reported():
    with pytest.raises(ValueError, match="key has shape"):
        binarize_choice(["A", "B", "C"], ["A", "B"])
    with pytest.raises(ValueError, match="answer key is missing at position 1"):
        binarize_wmdp(["A", "B"], ["A", None])


def test_float_scores_binarize_as_the_same_scores_given_as_objects():
    # a float64 array or Series takes a path without Python objects: the same values, index and errors
    import pandas as pd
    import pytest

    from irtlib.errors import InputError

    rng = np.random.default_rng(7)
    scores = rng.choice([0.0, 0.5, 1.0, np.nan], size=(40, 9))
    for rule in ("strict", "lenient"):
        for allowed in ((0.0, 0.5, 1.0), None):
            fast = binarize_graded(scores, rule=rule, allowed=allowed)
            slow = binarize_graded(scores.astype(object), rule=rule, allowed=allowed)
            assert fast.shape == slow.shape == scores.shape and np.array_equal(fast, slow, equal_nan=True)
    s = pd.Series(scores[:, 0], index=[f"q{i}" for i in range(40)], name="score")
    pd.testing.assert_series_equal(binarize_graded(s), binarize_graded(s.astype(object)))
    for bad in (np.array([1.0, 0.7]), np.array([0.0, -0.0, np.inf])):
        with pytest.raises(InputError) as fast_error:
            binarize_graded(bad, name="air.csv")
        with pytest.raises(InputError) as slow_error:
            binarize_graded(bad.astype(object), name="air.csv")
        assert str(fast_error.value) == str(slow_error.value)
