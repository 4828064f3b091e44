"""Marginal Fisher's greedy order: the C kernel's picks against the numpy path and a brute-force greedy."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from irtlib.selection import greedy_kernel
from irtlib.selection.static import (
    MarginalFisherOrder,
    _greedy_picks,
    b_quantile_bins,
    information_matrix,
    interleave_quota,
)


@pytest.fixture
def lib():
    lib = greedy_kernel.load()
    if lib is None:
        pytest.skip("the greedy kernel cannot be built here")
    return lib


def _brute_force_order(info, prior_information=0.0):
    """Every step evaluates every remaining item; the largest gain wins, ties to the lowest position."""
    info_t = np.ascontiguousarray(info.T)
    n_items = info_t.shape[0]
    s = np.full(info_t.shape[1], prior_information)
    if prior_information > 0:
        first = greedy_kernel.numpy_gains(s, info_t)
    else:
        with np.errstate(divide="ignore"):
            first = -(1.0 / np.sqrt(info_t)).sum(axis=1)
    order = [int(np.argmax(first))]
    s = s + info_t[order[0]]
    left = np.ones(n_items, dtype=bool)
    left[order[0]] = False
    while left.any():
        g = np.where(left, greedy_kernel.numpy_gains(s, info_t), -np.inf)
        j = int(np.argmax(g))
        order.append(j)
        left[j] = False
        s = s + info_t[j]
    return order


def _bank(rng, n_items, n_models, *, rounded=False):
    a = np.exp(rng.normal(0.0, 0.7, n_items))
    b = rng.normal(0.0, 2.0, n_items)
    if rounded:                          # many identical items: ties between positions
        a, b = np.round(a, 1), np.round(b, 0)
    return information_matrix(a, b, rng.normal(0.0, 1.5, n_models))


def test_kernel_gains_equal_numpy_gains_bit_for_bit(lib):
    rng = np.random.default_rng(7)
    for n_models in (1, 7, 8, 9, 127, 128, 129, 255, 256, 257, 1000):
        info_t = np.exp(rng.normal(-2.0, 3.0, (11, n_models)))
        info_t[:, ::4] = 0.0
        s = np.exp(rng.normal(0.0, 3.0, n_models))
        assert np.array_equal(greedy_kernel.gains(lib, s, info_t), greedy_kernel.numpy_gains(s, info_t))


@pytest.mark.parametrize("path", ["numpy", "C kernel"])
@pytest.mark.parametrize("prior_information", [0.0, 1.0])
def test_greedy_order_equals_brute_force_greedy(path, prior_information):
    if path == "C kernel" and greedy_kernel.load() is None:
        pytest.skip("the greedy kernel cannot be built here")
    rng = np.random.default_rng(11)
    for trial in range(12):
        info = _bank(rng, int(rng.integers(2, 80)), int(rng.integers(1, 40)), rounded=trial % 3 == 0)
        order = list(_greedy_picks(info, prior_information=prior_information, kernel=path == "C kernel"))
        assert order == _brute_force_order(info, prior_information)


def test_identical_items_are_picked_lowest_position_first(lib):
    # items 1, 3 and 4 are copies of one item, the best one; item 0 and 2 are worse
    info = np.array([[0.1, 0.5, 0.2, 0.5, 0.5],
                     [0.2, 0.6, 0.1, 0.6, 0.6],
                     [0.1, 0.4, 0.3, 0.4, 0.4]])
    order = list(_greedy_picks(info))
    assert order[:3] == [1, 3, 4]
    assert order == list(_greedy_picks(info, kernel=False)) == _brute_force_order(info)


@pytest.mark.parametrize("prior_information", [0.0, 1.0])
def test_kernel_order_equals_numpy_order_on_large_random_banks(lib, prior_information):
    rng = np.random.default_rng(5)
    for n_items, n_models, rounded in ((1500, 60, False), (900, 9, True), (400, 150, False)):
        info = _bank(rng, n_items, n_models, rounded=rounded)
        numpy_path = list(_greedy_picks(info, prior_information=prior_information, kernel=False))
        assert list(_greedy_picks(info, prior_information=prior_information)) == numpy_path
        assert sorted(numpy_path) == list(range(n_items))


def test_marginal_fisher_order_prefixes_equal_the_numpy_path(lib, monkeypatch):
    rng = np.random.default_rng(9)
    a, b = np.exp(rng.normal(0.0, 0.5, 700)), rng.normal(0.0, 1.5, 700)
    theta = rng.normal(0.0, 1.0, 40)
    bins = b_quantile_bins(b, 4)
    need = interleave_quota(bins, 400)
    with_kernel = MarginalFisherOrder(a, b, theta)
    first, covering = with_kernel.first(37), with_kernel.covering(bins, need)
    monkeypatch.setitem(greedy_kernel._LOADED, "lib", None)
    numpy_path = MarginalFisherOrder(a, b, theta)
    assert np.array_equal(first, numpy_path.first(37))
    assert np.array_equal(covering, numpy_path.covering(bins, need))
    assert list(itertools.islice(_greedy_picks(information_matrix(a, b, theta), kernel=False), covering.size)) \
        == covering.tolist()


def _brute_force_binned_order(info, bins, *, start_bin=None):
    """Round-robin over the bins; each pick the bin's item of largest gain (ties: lowest position), all evaluated."""
    info_t = np.ascontiguousarray(info.T)
    n_items = info_t.shape[0]
    with np.errstate(divide="ignore"):
        first = -(1.0 / np.sqrt(info_t)).sum(axis=1)
    if start_bin is None:
        order = [int(np.argmax(first))]
    else:
        order = [int(np.flatnonzero(bins == start_bin)[np.argmax(first[bins == start_bin])])]
    cur, n_bins = int(bins[order[0]]), int(bins.max()) + 1
    s = info_t[order[0]].copy()
    left = np.ones(n_items, dtype=bool)
    left[order[0]] = False
    while left.any():
        cur = (cur + 1) % n_bins
        while not (left & (bins == cur)).any():
            cur = (cur + 1) % n_bins
        g = np.where(left & (bins == cur), greedy_kernel.numpy_gains(s, info_t), -np.inf)
        j = int(np.argmax(g))
        order.append(j)
        left[j] = False
        s = s + info_t[j]
    return order


@pytest.mark.parametrize("start_bin", [None, 0])
def test_kernel_binned_order_equals_numpy_and_brute_force_round_robin(lib, start_bin):
    rng = np.random.default_rng(11)
    for n_items, n_models, rounded, n_bins in ((300, 40, False, 4), (240, 7, True, 4), (90, 25, False, 3)):
        info = _bank(rng, n_items, n_models, rounded=rounded)
        bins = rng.integers(0, n_bins, n_items)               # bins of unequal sizes: some run out first
        bins[:n_bins] = np.arange(n_bins)
        numpy_path = list(_greedy_picks(info, bins=bins, start_bin=start_bin, kernel=False))
        assert list(_greedy_picks(info, bins=bins, start_bin=start_bin)) == numpy_path
        assert numpy_path == _brute_force_binned_order(info, bins, start_bin=start_bin)


def test_four_lane_gains_equal_the_scalar_build_bit_for_bit(lib):
    from irtlib.calibration.fused_kernel import _has_avx2, compile_kernel

    if not _has_avx2():
        pytest.skip("no AVX2 here: only the scalar gains are built")
    scalar = greedy_kernel._bind(compile_kernel(source=greedy_kernel.SOURCE, avx2=False))
    lanes = greedy_kernel._bind(compile_kernel(source=greedy_kernel.SOURCE, avx2=True))
    rng = np.random.default_rng(11)
    for n_models in [*range(1, 140), 255, 256, 257, 300, 1000, 1777]:     # every remainder and split
        info_t = np.exp(rng.normal(-2.0, 3.0, (5, n_models)))
        info_t[:, ::3] = 0.0
        s = np.exp(rng.normal(0.0, 3.0, n_models))
        assert np.array_equal(greedy_kernel.gains(lanes, s, info_t), greedy_kernel.gains(scalar, s, info_t))


def _duplicated_bank(rng, n_distinct, n_items, n_models):
    """A bank whose items are copies of ``n_distinct`` items (equal information rows), in shuffled positions."""
    a = np.exp(rng.normal(0.0, 0.7, n_distinct))
    b = rng.normal(0.0, 2.0, n_distinct)
    which = rng.integers(0, n_distinct, n_items)
    which[:n_distinct] = np.arange(n_distinct)
    rng.shuffle(which)
    return information_matrix(a[which], b[which], rng.normal(0.0, 1.5, n_models))


def test_equal_rows_chain_only_equal_rows_in_increasing_position():
    rng = np.random.default_rng(13)
    info_t = np.ascontiguousarray(_duplicated_bank(rng, 30, 200, 9).T)
    info_t[7] = -0.0 * info_t[7]                         # a row of zeros and one of negative zeros: not equal bits
    info_t[8] = 0.0 * info_t[8]
    items = np.setdiff1d(np.arange(200), [5, 17])
    bins = rng.integers(0, 3, 200)
    for chain_bins in (None, bins):
        nxt = greedy_kernel.equal_rows(info_t, items, chain_bins)
        linked = np.flatnonzero(nxt >= 0)
        assert np.isin(linked, items).all() and np.isin(nxt[linked], items).all()
        assert (nxt[linked] > linked).all()
        assert np.array_equal(info_t[linked].view(np.uint64), info_t[nxt[linked]].view(np.uint64))
        if chain_bins is not None:
            assert np.array_equal(bins[linked], bins[nxt[linked]])
        # every group of equal rows (and bins) is one chain: its members link to the next member
        key = [tuple(r) + ((int(chain_bins[j]),) if chain_bins is not None else ()) for j, r in
               zip(items, info_t[items].view(np.uint64).tolist(), strict=True)]
        groups = {}
        for j, k in zip(items, key, strict=True):
            groups.setdefault(k, []).append(int(j))
        for members in groups.values():
            assert [int(nxt[j]) for j in members] == members[1:] + [-1]


@pytest.mark.parametrize("prior_information", [0.0, 1.0])
def test_banks_of_copied_items_give_the_numpy_and_brute_force_order(lib, prior_information):
    rng = np.random.default_rng(17)
    for n_distinct, n_items, n_models in ((12, 150, 8), (60, 400, 19), (3, 40, 2)):
        info = _duplicated_bank(rng, n_distinct, n_items, n_models)
        numpy_path = list(_greedy_picks(info, prior_information=prior_information, kernel=False))
        assert list(_greedy_picks(info, prior_information=prior_information)) == numpy_path
        assert numpy_path == _brute_force_order(info, prior_information)


@pytest.mark.parametrize("start_bin", [None, 0])
def test_banks_of_copied_items_give_the_numpy_and_brute_force_round_robin(lib, start_bin):
    rng = np.random.default_rng(19)
    for n_distinct, n_items, n_models, n_bins in ((12, 160, 8, 4), (50, 300, 19, 4), (5, 60, 3, 3)):
        info = _duplicated_bank(rng, n_distinct, n_items, n_models)
        bins = rng.integers(0, n_bins, n_items)               # copies of one item in several bins too
        bins[:n_bins] = np.arange(n_bins)
        numpy_path = list(_greedy_picks(info, bins=bins, start_bin=start_bin, kernel=False))
        assert list(_greedy_picks(info, bins=bins, start_bin=start_bin)) == numpy_path
        assert numpy_path == _brute_force_binned_order(info, bins, start_bin=start_bin)
