"""Linking constants: the bootstrap's vectorised Stocking-Lord solver against scipy, and the bootstrap itself."""

import numpy as np
import pytest

from irtlib.calibration import linking
from irtlib.errors import InputError


def noisy_pair(seed, n=30):
    rng = np.random.default_rng(seed)
    a_y, b_y = np.exp(rng.normal(0, 0.3, n)), rng.normal(size=n)
    slope, shift = 1.3, 0.4
    a_x = a_y * slope * np.exp(rng.normal(0, 0.1, n))
    b_x = (b_y - shift) / slope + rng.normal(0, 0.1, n)
    return a_x, b_x, a_y, b_y


def test_vectorised_stocking_lord_finds_scipys_minimum_on_each_resample():
    a_x, b_x, a_y, b_y = noisy_pair(0)
    grid, weights = linking._GRID, linking._WEIGHTS
    picks = np.random.default_rng(1).integers(0, 30, size=(4, 30))
    counts = np.stack([np.bincount(p, minlength=30) for p in picks]).astype(float)
    start = linking.linking_constants(a_x, b_x, a_y, b_y)["stocking-lord"]
    together = linking._stocking_lord(counts, a_x, b_x, a_y, b_y, start=start, grid=grid, weights=weights)
    for p, got in zip(picks, together, strict=True):
        want = linking._stocking_lord_scipy(a_x[p], b_x[p], a_y[p], b_y[p], start=start, grid=grid, weights=weights)
        np.testing.assert_allclose(got, want, atol=1e-6)


def test_bootstrap_errors_shrink_with_more_common_items_and_are_seeded():
    small = linking.link_constants_with_errors(*noisy_pair(2, n=15), n_boot=60, seed=0)
    large = linking.link_constants_with_errors(*noisy_pair(2, n=120), n_boot=60, seed=0)
    assert (large["se_A"] < small["se_A"]).all() and (large["se_B"] < small["se_B"]).all()
    again = linking.link_constants_with_errors(*noisy_pair(2, n=15), n_boot=60, seed=0)
    assert small.equals(again)


def test_too_few_common_items_are_refused_with_their_count():
    with pytest.raises(InputError, match="only 1 common item: a link needs at least 5"):
        linking.link_constants_with_errors(*(np.ones(1),) * 4)
