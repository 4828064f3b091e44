"""The C lazy walk of Sympson-Hetter's ranks (irtlib.selection.sympson_hetter_kernel) against numpy's choice."""

import numpy as np
import pytest
from item_banks import tricky_bank, tricky_models

from irtlib.core.kernels import fisher_information
from irtlib.selection import selectors
from irtlib.selection import sympson_hetter_kernel as shk
from irtlib.selection.cat import TwoPLItems, sympson_hetter
from irtlib.selection.selectors import ExposureControl, RowDraws, SympsonHetterCandidates, choose_items

LIB = shk.load()
pytestmark = pytest.mark.skipif(LIB is None, reason="no C compiler, or the kernel differs from numpy here")


def test_kernel_draws_are_numpys_pcg64_draws_after_any_jump():
    for seed in (0, 1, 12345):
        bg = np.random.PCG64(seed)
        start = bg.state
        for delta in (0, 1, 3, 4906, 4906 * 1000, 2**63 + 1, 2**70):
            bg.state = start
            bg.advance(delta)
            np.testing.assert_array_equal(shk.pcg64_draws(LIB, start, delta, 7), np.random.Generator(bg).random(7))


def _choose_both(cells, theta, avail, kexp, k, seed, sparse):
    """The cells' choice with the kernel and without it (numpy), from the same PCG64 draws."""
    out = []
    for use in (True, False):
        gen = np.random.Generator(np.random.PCG64(seed))
        u = RowDraws(gen, avail.shape)
        v = gen.random(avail.shape[0]) if k > 1 else None
        saved = selectors._sympson_hetter_kernel
        selectors._sympson_hetter_kernel = (lambda: LIB) if use else (lambda: None)
        try:
            out.append((cells.choose(theta, avail, u, v, kexp, k, sparse=sparse), gen.random(3)))
        finally:
            selectors._sympson_hetter_kernel = saved
    return out


@pytest.mark.parametrize("k", [1, 3])
def test_lazy_walk_matches_choose_items_ranking_every_item(k):
    rng = np.random.default_rng(11)
    n_models, n_items = 150, 900
    a, b = tricky_bank(rng, n_items)                          # exact ties, a negative discrimination
    a[6] = np.nan                                             # an item of NaN information (ranked last)
    a[7] = 5000.0                                             # a bound not trusted (evaluated first)
    cells = SympsonHetterCandidates(a, b, n_candidates=64, width=0.05, span=4.0)
    for trial in range(4):
        theta, avail = tricky_models(rng, n_models, n_items)   # at the cells' edges; no item left
        avail[8, 100:] = False                                # a model with few items: its ranks run out
        kexp = np.where(rng.random(n_items) < 0.3, rng.random(n_items) * 0.5, 1.0)
        if trial == 3:
            kexp = np.where(rng.random(n_items) < 0.8, 0.05, 1.0)   # choices far down the ranking
        kexp[rng.permutation(n_items)[:30]] = 0.0
        info = fisher_information(theta[:, None], a, b)
        want_item, want_rejected = choose_items(info, avail, np.random.default_rng(trial),
                                                ExposureControl(sympson_hetter=kexp, randomesque=k))
        (got, after), (numpy_got, numpy_after) = _choose_both(cells, theta, avail, kexp, k, trial, sparse=False)
        np.testing.assert_array_equal(got[0], want_item)
        np.testing.assert_array_equal(got[1], want_rejected)
        np.testing.assert_array_equal(numpy_got[0], want_item)
        np.testing.assert_array_equal(after, numpy_after)    # the generator left where the step's draws end
        assert want_item[7] == -1


@pytest.mark.parametrize("seed", range(3))
def test_lazy_walk_sets_aside_the_same_pairs_in_the_same_order_as_the_numpy_cells(seed):
    rng = np.random.default_rng(100 + seed)
    n_models, n_items = 300, 2000
    a, b = np.exp(rng.normal(0.0, 0.5, n_items)), rng.normal(0, 1.2, n_items)
    cells = SympsonHetterCandidates(a, b)
    theta = rng.normal(0, 1.5, n_models)
    avail = rng.random((n_models, n_items)) < 0.98
    kexp = np.clip(rng.random(n_items) * 1.3, 0, 1)
    (got, _), (want, _) = _choose_both(cells, theta, avail, kexp, 1, seed, sparse=True)
    np.testing.assert_array_equal(got[0], want[0])
    got_pairs = set(zip(got[1][0].tolist(), got[1][1].tolist(), strict=True))
    want_pairs = set(zip(want[1][0].tolist(), want[1][1].tolist(), strict=True))
    assert got_pairs == want_pairs and got[1][0].size == want[1][0].size > 0
    np.testing.assert_array_equal(np.diff(got[1][0]) >= 0, True)     # by model


def test_calibration_is_the_same_with_the_kernel_as_with_numpy(monkeypatch):
    rng = np.random.default_rng(2)
    a, b = np.exp(rng.normal(0.1, 0.5, 500)), rng.normal(0, 1.2, 500)
    fast = sympson_hetter(TwoPLItems(a, b), max_exposure=0.2, max_items=15, n_simulees=200, seed=1, n_rounds=6)
    monkeypatch.setattr(selectors, "_sympson_hetter_kernel", lambda: None)
    slow = sympson_hetter(TwoPLItems(a, b), max_exposure=0.2, max_items=15, n_simulees=200, seed=1, n_rounds=6)
    np.testing.assert_array_equal(fast[0], slow[0])
    np.testing.assert_array_equal(fast[1], slow[1])
    assert (fast[0] < 1).any()


def test_lazy_tables_put_untrusted_bounds_first():
    bound = np.array([[0.5, 1e-300, np.nan, 0.2, 0.7]])
    a = np.array([1.0, 1.0, 1.0, 1e4, 1.0])
    order, ub = shk.lazy_tables(bound, a, 0.02)
    assert order.tolist() == [[1, 2, 3, 4, 0]]
    assert ub.tolist() == [[np.inf, np.inf, np.inf, 0.7, 0.5]]


@pytest.mark.parametrize("k", [1, 3])
def test_load_checks_reference_is_choose_items(k):
    rng = np.random.default_rng(5)
    for case in range(6):
        a, b, theta, avail, kexp, k_case = shk._random_bank(rng, case)
        info = fisher_information(theta[:, None], a, b)
        gen = np.random.default_rng(case)
        u = gen.random(avail.shape)
        v = gen.random(avail.shape[0]) if k > 1 else None
        exposure = ExposureControl(sympson_hetter=kexp, randomesque=k)
        want = choose_items(info, avail, np.random.default_rng(case), exposure)
        got = shk._ranked_choice(info, avail, u, v, kexp, k)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_load_check_passes_and_decides_rows():
    assert shk._matches_numpy(LIB)
