"""The chapter "Beyond the paper"'s helpers (irtbook.beyond) on hand-made inputs."""

import numpy as np
import pandas as pd
import pytest

from irtbook import beyond as bz


def test_heldout_mask_hides_observed_cells_only_and_keeps_two_per_row_and_column():
    obs = np.ones((30, 40), bool)
    obs[0, 2:] = False                                  # row 0 has only two cells: none may be hidden
    hide = bz.heldout_mask(obs, fraction=0.3, seed=1)
    assert not (hide & ~obs).any() and not hide[0].any()
    assert ((obs & ~hide).sum(axis=1) >= 2).all() and ((obs & ~hide).sum(axis=0) >= 2).all()
    assert 0.2 < hide.sum() / obs.sum() < 0.4
    np.testing.assert_array_equal(hide, bz.heldout_mask(obs, fraction=0.3, seed=1))


def test_binarize_and_smallest_budget():
    np.testing.assert_array_equal(bz.binarize(np.array([0, 1, 2, np.nan]), 2), [0, 0, 1, np.nan])
    curve = pd.DataFrame({"method": ["a"] * 3 + ["b"] * 3, "k": [1, 5, 10] * 2,
                          "mean": [0.5, 0.91, 0.95, 0.2, 0.3, 0.4]})
    assert bz.smallest_budget(curve, "a") == 5 and bz.smallest_budget(curve, "b") is None


def test_verdicts():
    v = bz.verdict
    assert v(ll_new=-0.2, ll_old=-0.3, agree_new=0.9, agree_old=0.85, k_new=5, k_old=8) == "pays"
    assert v(ll_new=-0.4, ll_old=-0.3, agree_new=0.8, agree_old=0.85, k_new=None, k_old=8) == "does not pay"
    assert v(ll_new=-0.2, ll_old=-0.3, agree_new=0.84, agree_old=0.85, k_new=8, k_old=2) == "mixed"
    assert v(ll_new=-0.4, ll_old=-0.3, agree_new=0.95, agree_old=0.85, k_new=3, k_old=8) == "mixed"


def test_curves_follow_the_protocols_nan_rule():
    from irtbook.words import nan_rule_words
    from irtlib.protocol import presets

    runs = pd.DataFrame({"split": [0, 1, 2], "method": ["a"] * 3, "k": [5] * 3, "agreement": [0.9, np.nan, 0.6]})
    zero = bz.curves(runs, nan_policy="zero").iloc[0]
    omit = bz.curves(runs, nan_policy="omit").iloc[0]
    assert np.isclose(zero["mean"], 0.5) and zero["count"] == 3        # the undefined rho counted as 0
    assert np.isclose(omit["mean"], 0.75) and omit["count"] == 2       # dropped (nanmean)
    assert np.isclose(bz.curves(runs)["mean"].iloc[0], 0.5)           # default: the paper's text
    with pytest.raises(ValueError, match="nan_policy"):
        bz.curves(runs, nan_policy="mean")
    # the sentence a chapter glues names the protocol's own rule, one per protocol
    paper_words = nan_rule_words(presets.resolve("paper"))
    authors_words = nan_rule_words(presets.resolve("authors", benchmark="harmbench"))
    assert "counts as 0" in paper_words and "paper's text" in paper_words
    assert "dropped" in authors_words and "authors' released code" in authors_words
