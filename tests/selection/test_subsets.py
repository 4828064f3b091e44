"""Static subsets (irtlib.selection.static): the five methods and how subsets score models."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import simulate_2pl

from irtlib.core.ability import map_ability
from irtlib.selection.static import (
    Subset,
    anchor_points,
    anchor_points_path,
    b_quartile_bins,
    correlation_features,
    disco,
    information_matrix,
    kmedoids_loss,
    marginal_fisher,
    marginal_fisher_bq,
    score_blocks_map,
    score_subset,
    score_subsets_map,
    summed_se,
    total_fisher,
)


@pytest.fixture(scope="module")
def bank():
    x, theta, a, b = simulate_2pl(40, 300, seed=2, sd_log_a=0.8)
    return x, theta, a, b


def _brute_force_step(info, chosen, prior=0.0, allowed=None):
    """The item whose addition gives the smallest summed SE, over every candidate."""
    s = prior + info[:, chosen].sum(axis=1)
    with np.errstate(divide="ignore"):
        total = (1.0 / np.sqrt(s[:, None] + info)).sum(axis=0)
    total[chosen] = np.inf
    if allowed is not None:
        total[~allowed] = np.inf
    return int(np.argmin(total))


# ---------------------------------------------------------------------------- Fisher methods
def test_total_fisher_ranks_by_summed_information(bank):
    _, theta, a, b = bank
    info = information_matrix(a, b, theta)
    sub = total_fisher(a, b, theta, 25)
    total = info.sum(axis=0)
    assert sub.weights is None and len(sub) == 25
    assert total[sub.items].min() >= np.delete(total, sub.items).max()
    assert (np.diff(total[sub.items]) <= 0).all()
    np.testing.assert_array_equal(total_fisher(a, b, theta, 10).items, sub.items[:10])     # nested


def test_one_marginal_fisher_step_equals_brute_force(bank):
    _, theta, a, b = bank
    info = information_matrix(a, b, theta)
    for prior in (0.0, 1.0):
        picks = marginal_fisher(a, b, theta, 60, prior_information=prior).items
        for step in range(60):        # every greedy step: the brute-force best over all items
            assert picks[step] == _brute_force_step(info, list(picks[:step]), prior)
        # and each step really lowers the objective the most: adding any other item is worse
        s = prior + info[:, picks[:10]].sum(axis=1)
        best = summed_se(s + info[:, picks[10]])
        others = [summed_se(s + info[:, j]) for j in range(300) if j not in picks[:11]]
        assert best <= min(others)


def test_marginal_fisher_first_pick_and_objective(bank):
    _, theta, a, b = bank
    info = information_matrix(a, b, theta)
    # no prior information: the SE of the empty set is infinite, the first pick minimises
    # sum_m I_mj^-1/2 (the summed ML SE after one item)
    first = marginal_fisher(a, b, theta, 1).items[0]
    assert first == np.argmin((1.0 / np.sqrt(info)).sum(axis=0))
    # the greedy subset's summed SE falls with k and beats the same-size Total Fisher subset
    mf = marginal_fisher(a, b, theta, 40).items
    se = [summed_se(info[:, mf[:k]].sum(axis=1)) for k in (5, 10, 20, 40)]
    assert se == sorted(se, reverse=True)
    tf = total_fisher(a, b, theta, 40).items
    assert summed_se(info[:, mf].sum(axis=1)) <= summed_se(info[:, tf].sum(axis=1))


def test_b_quartile_variant_cycles_through_quartiles(bank):
    _, theta, a, b = bank
    info = information_matrix(a, b, theta)
    bins = b_quartile_bins(b)
    assert np.bincount(bins).tolist() == [75, 75, 75, 75]
    assert (np.diff(b[np.argsort(b)][np.r_[74, 149, 224]]) >= 0).all()
    assert b[bins == 0].max() <= b[bins == 1].min() and b[bins == 2].max() <= b[bins == 3].min()
    picks = marginal_fisher_bq(a, b, theta, 80).items
    seq = bins[picks]
    # starts in the bin of the unconstrained first pick, then cycles 0 -> 1 -> 2 -> 3 -> 0 ...
    assert seq[0] == bins[marginal_fisher(a, b, theta, 1).items[0]]
    np.testing.assert_array_equal(seq, (seq[0] + np.arange(80)) % 4)
    for r in range(1, 21):                     # every prefix of 4 r picks: r per quartile
        assert np.bincount(seq[:4 * r], minlength=4).tolist() == [r] * 4
    for step in range(80):                     # within its bin, each pick is the greedy best
        assert picks[step] == _brute_force_step(info, list(picks[:step]), allowed=bins == seq[step])
    low = marginal_fisher_bq(a, b, theta, 8, start="lowest").items
    assert bins[low].tolist() == [0, 1, 2, 3, 0, 1, 2, 3]


def test_b_quartile_variant_skips_an_exhausted_bin():
    a = np.ones(9)
    b = np.linspace(-2, 2, 9)                  # bins of 3, 2, 2, 2 items
    theta = np.array([-1.0, 0.0, 1.0])
    picks = marginal_fisher_bq(a, b, theta, 9).items
    assert sorted(picks) == list(range(9))


# ---------------------------------------------------------------------------- anchor points
def test_correlation_features_give_pearson_correlations():
    rng = np.random.default_rng(0)
    x = (rng.random((30, 12)) < 0.5).astype(float)
    x[:, 10] = 1.0                             # constant: all safe
    x[:, 11] = 0.0                             # constant: all unsafe
    u = correlation_features(x)
    np.testing.assert_allclose(np.linalg.norm(u, axis=1), 1.0)
    np.testing.assert_allclose((u @ u.T)[:10, :10], np.corrcoef(x[:, :10].T), atol=1e-12)
    sim = u @ u.T
    assert sim[10, 11] == 0.0 and sim[10, 10] == 1.0 and (sim[10, :10] == 0).all()


def test_anchor_points_hand_made_clusters():
    # three groups of items with identical score vectors (correlation 1 within a group),
    # sizes 5, 3 and 2: with k = 3 every group gets one medoid weighted by its size
    base = np.array([[1, 0, 1, 0, 1, 1, 0, 0], [0, 0, 1, 1, 0, 1, 1, 0], [1, 1, 0, 0, 0, 1, 0, 1]], float).T
    x = np.repeat(base, [5, 3, 2], axis=1)
    group = np.repeat([0, 1, 2], [5, 3, 2])
    for solver in ("fasterpam", "alternate"):
        sub = anchor_points(x, 3, seed=0, solver=solver)
        assert sorted(group[sub.items].tolist()) == [0, 1, 2]
        assert dict(zip(group[sub.items].tolist(), sub.weights.tolist(), strict=False)) == {0: 5.0, 1: 3.0, 2: 2.0}


def test_anchor_points_weights_sum_to_the_number_of_items(bank):
    x, _, _, _ = bank
    train = x[:30]
    for solver in ("fasterpam", "alternate"):
        path = anchor_points_path(train, [1, 5, 20, 60], seed=1, solver=solver)
        for k, sub in path.items():
            assert len(sub) == k == np.unique(sub.items).size
            assert sub.weights.sum() == 300 and (sub.weights >= 1).all()
    single = anchor_points(train, 20, seed=1)
    assert single.weights.sum() == 300


def test_anchor_points_solvers_reach_similar_losses(bank):
    # measured: FasterPAM 132.1, alternating 149.8 at k = 20 (alternating's local optima are
    # worse: 13% here)
    x, _, _, _ = bank
    u = correlation_features(x[:30])
    pam = kmedoids_loss(u, anchor_points(x[:30], 20, seed=0, solver="fasterpam").items)
    alt = kmedoids_loss(u, anchor_points(x[:30], 20, seed=0, solver="alternate").items)
    assert pam <= alt <= 1.25 * pam


def test_anchor_points_handles_missing_and_constant_items():
    x, _, _, _ = simulate_2pl(25, 80, seed=3, missing=0.05)
    x[:, 0] = 1.0
    x[:, 1] = 1.0
    sub = anchor_points(x, 10, seed=0)
    assert sub.weights.sum() == 80
    np.testing.assert_array_equal(anchor_points(x, 10, seed=0).items, sub.items)     # seeded


# ---------------------------------------------------------------------------- DISCO
def test_disco_orders_by_binary_entropy_of_training_safe_rates():
    # safe rates 0.1, 0.5, 0.9, 0.3, 1.0, 0.45: entropy order 0.5, 0.45, 0.3, 0.1 = 0.9 (tie:
    # lower position first), 1.0 (entropy 0) last
    rates = np.array([0.1, 0.5, 0.9, 0.3, 1.0, 0.45])
    x = (np.arange(20)[:, None] < rates * 20).astype(float)
    np.testing.assert_allclose(x.mean(axis=0), rates)
    order = disco(x, 6).items
    assert order.tolist() == [1, 5, 3, 0, 2, 4]
    p = rates[order]
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.nan_to_num(-(p * np.log(p) + (1 - p) * np.log(1 - p)))
    assert (np.diff(h) <= 1e-12).all() and h[-1] == 0.0
    np.testing.assert_array_equal(disco(x, 3).items, order[:3])


# ---------------------------------------------------------------------------- scoring
def test_score_subset():
    x = np.array([[1, 0, 1, np.nan], [0, 0, 1, 1.0]])
    sub = Subset(np.array([0, 2, 3]), np.array([2.0, 1.0, 1.0]))
    np.testing.assert_allclose(score_subset(x, sub, how="mean"), [1.0, 2 / 3])
    np.testing.assert_allclose(score_subset(x, sub, how="weighted"), [1.0, 0.5])
    a, b = np.array([1.0, 2.0, 0.5, 1.5]), np.array([0.0, 0.5, -1.0, 1.0])
    np.testing.assert_allclose(score_subset(x, sub, how="map", a=a, b=b),
                               map_ability(x[:, [0, 2, 3]], a[[0, 2, 3]], b[[0, 2, 3]]).theta)
    with pytest.raises(ValueError):
        score_subset(x, Subset(np.array([0])), how="weighted")


def test_score_subsets_map_equals_one_score_subset_per_subset():
    rng = np.random.default_rng(3)
    for trial in range(20):
        n, m = int(rng.integers(1, 15)), int(rng.integers(8, 300))
        x = (rng.random((n, m)) < rng.random(m)).astype(float)
        if trial % 3 == 0:
            x[rng.random((n, m)) < 0.1] = np.nan
        if trial % 4 == 0:
            x[0] = 1.0                    # an all-safe row: the estimate ends on the bracket
        a, b = np.exp(rng.normal(0.0, 1.0, m)), rng.normal(0.0, 2.0, m)
        # two subsets of one size (stacked), others of other sizes; starts from the prior or given
        sizes = [7, 7, int(rng.integers(1, m + 1)), m]
        subsets = [Subset(rng.choice(m, k, replace=False)) for k in sizes]
        starts = [None, rng.normal(0.0, 1.0, n), 0.5, None]
        got = score_subsets_map(x, subsets, a=a, b=b, theta0=starts)
        for sub, start, theta in zip(subsets, starts, got, strict=True):
            expected = score_subset(x, sub, how="map", a=a, b=b, theta0=start)
            assert np.array_equal(theta, expected)
    with pytest.raises(ValueError, match="theta0 has 1 entries for 2 subsets"):
        score_subsets_map(x, subsets[:2], a=a, b=b, theta0=[None])


def test_score_blocks_map_of_several_banks_equals_one_score_subset_per_block():
    rng = np.random.default_rng(8)
    for trial in range(10):
        blocks = []
        for _ in range(int(rng.integers(1, 6))):              # splits: own test rows, bank and parameters
            n, m = int(rng.integers(2, 12)), int(rng.integers(10, 200))
            x = (rng.random((n, m)) < rng.random(m)).astype(float)
            if trial % 2:
                x[rng.random((n, m)) < 0.1] = np.nan
            x[0] = 1.0 if trial % 3 == 0 else x[0]            # an all-safe row ends on the bracket
            a, b = np.exp(rng.normal(0.0, 1.0, m)), rng.normal(0.0, 2.0, m)
            for k in (5, 5, int(rng.integers(1, m + 1))):     # sizes shared across banks and within one
                start = [None, rng.normal(0.0, 1.0, n), 0.3][int(rng.integers(0, 3))]
                blocks.append((x, Subset(rng.choice(m, k, replace=False)), a, b, start))
        got = score_blocks_map(blocks)
        for (x, sub, a, b, start), theta in zip(blocks, got, strict=True):
            assert np.array_equal(theta, score_subset(x, sub, how="map", a=a, b=b, theta0=start))


def test_stable_order_of_labels_equals_numpy_stable_argsort():
    from irtlib.selection.static import _stable_order

    rng = np.random.default_rng(4)
    for k in (1, 2, 300, 65536, 70000):
        lab = rng.integers(0, k, 5000)
        assert np.array_equal(_stable_order(lab, k), np.argsort(lab, kind="stable"))


def _alternate_recomputing_every_sum(u, med, *, max_iter, lab=None, best=None, weight=None, state=None):
    """Alternating k-medoids without any shortcut: every point against every medoid and every cluster summed.

    At every iteration (and at the warm start) each point's nearest medoid is taken over all the medoids
    with the twin of the nearest-medoid kernel (the similarities do not depend on which points or medoids a
    call holds), ties to the first; the medoids own their clusters. The path's restrictions (only the new
    medoids at a warm start, only the moved medoids' points against every medoid, the others against the
    moved medoids, only the changed clusters summed) must give the same medoids and labels. ``lab``,
    ``best`` and ``state``'s carried sums are ignored; ``state["best"]`` is set as the path reads it.
    """
    from irtlib.selection.anchor_kernel import numpy_nearest
    from irtlib.selection.static import _stable_order

    wu = u if weight is None else u * weight[:, None]
    med = np.array(med, dtype=np.intp)
    k = med.size

    def assign(med):
        lab, best = numpy_nearest(u, med)
        lab[med], best[med] = np.arange(k), 1.0
        return lab, best

    lab, best = assign(med)
    for _ in range(max_iter):
        order = _stable_order(lab, k)
        sorted_lab = lab[order]
        starts = np.searchsorted(sorted_lab, np.arange(k))
        sums = np.add.reduceat(wu[order], starts, axis=0)
        score = np.einsum("ij,ij->i", u, sums[lab])
        top = np.maximum.reduceat(score[order], starts)
        at_top = order[score[order] >= top[sorted_lab]]
        new = med.copy()
        new[lab[at_top[::-1]]] = at_top[::-1]
        keep_current = score[med] >= top
        new[keep_current] = med[keep_current]
        if np.array_equal(new, med):
            break
        med = new
        lab, best = assign(med)
    if state is not None:
        state["best"] = best
    return med, lab


def _numpy_unique_rows(u):
    """The path's distinct rows as it took them before: ``np.unique`` over rows."""
    uniq, first, inverse, count = np.unique(u, axis=0, return_index=True, return_inverse=True, return_counts=True)
    return uniq, first, inverse.reshape(-1), count


@pytest.mark.parametrize("shape, seed", [((23, 2500), 0), ((12, 4000), 1), ((40, 1500), 2), ((5, 3000), 3),
                                         ((9, 3000), 4)])
def test_alternating_path_with_incremental_sums_equals_recomputing_every_sum(shape, seed, monkeypatch):
    """The warm-started path (SafetyBench's and AIR-Bench's anchor points) against the full Voronoi iteration."""
    from irtlib.selection import anchor_kernel, static

    monkeypatch.setattr(anchor_kernel, "FILTER_MIN_PAIRS", 0)      # the kernel's filter at every size
    rng = np.random.default_rng(seed)
    n_models, n_items = shape
    ability = rng.normal(size=(n_models, 1))
    x = (rng.random(shape) < 1.0 / (1.0 + np.exp(rng.normal(size=(1, n_items)) - ability))).astype(float)
    x[rng.random(shape) < 0.01] = np.nan
    ks = [1, 2, 5, 13, 40, 111, 300, 800, min(2000, n_items)]
    got = anchor_points_path(x, ks, seed=seed, solver="alternate")
    monkeypatch.setattr(static, "_alternate", _alternate_recomputing_every_sum)
    monkeypatch.setattr(static, "_unique_rows", _numpy_unique_rows)
    ref = anchor_points_path(x, ks, seed=seed, solver="alternate")
    for k in ks:
        np.testing.assert_array_equal(got[k].items, ref[k].items)
        np.testing.assert_array_equal(got[k].weights, ref[k].weights)


def _full_sums(u, wu, labels, k):
    """Every cluster's sum and every point's score, as the full pass of ``_alternate`` computes them."""
    from irtlib.selection.static import _stable_order

    order = _stable_order(labels, k)
    sums = np.add.reduceat(wu[order], np.searchsorted(labels[order], np.arange(k)), axis=0)
    return sums, np.einsum("ij,ij->i", u, sums[labels])


def test_incremental_scores_equal_the_full_pass():
    from irtlib.selection.static import _update_scores

    rng = np.random.default_rng(9)
    for _ in range(50):
        k = int(rng.integers(1, 80))
        n = int(rng.integers(k, 6000))
        u = rng.normal(size=(n, 25)) * np.exp(rng.normal(0.0, 3.0, (n, 1)))
        wu = u * rng.integers(1, 5, n)[:, None]
        before = rng.choice(k, n, p=rng.dirichlet(np.full(k, 0.3)))
        before[:k] = np.arange(k)                      # every cluster keeps a member (its medoid)
        lab = before.copy()
        moving = rng.random(n) < rng.choice([0.0, 0.001, 0.05, 0.5])
        moving[:k] = False
        lab[moving] = rng.integers(0, k, int(moving.sum()))

        _, score = _full_sums(u, wu, before, k)
        want_sums, want_score = _full_sums(u, wu, lab, k)
        _update_scores(u, lab, k, before, want_sums, score)
        np.testing.assert_array_equal(score, want_score)


def test_cluster_sums_and_update_step_equal_numpys():
    """The kernel's cluster sums (numpy's add.reduceat order, by counting sort) and new medoids, bit for bit."""
    from irtlib.selection import anchor_kernel

    rng = np.random.default_rng(10)
    for trial in range(60):
        k = int(rng.integers(1, 150))
        n = int(rng.integers(k, 4000))
        d = int(rng.integers(1, 30))
        wu = rng.normal(size=(n, d)) * np.exp(rng.normal(0.0, 4.0, (n, 1)))
        wu[rng.random((n, d)) < 0.05] = -0.0
        lab = rng.choice(k, n, p=rng.dirichlet(np.full(k, rng.choice([0.05, 0.5, 5.0]))))   # clusters up to thousands
        lab[:k] = rng.permutation(k)
        got, want = anchor_kernel.cluster_sums(wu, lab, k), _full_sums(wu, wu, lab, k)[0]
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
        # only some clusters summed again, into the sums of other labels: those rows as the full pass's
        wanted = rng.random(k) < rng.choice([0.0, 0.1, 0.9])
        kept = anchor_kernel.cluster_sums(wu, rng.permutation(lab), k)
        again = anchor_kernel.cluster_sums(wu, lab, k, want=wanted, sums=kept.copy())
        np.testing.assert_array_equal(again[wanted], want[wanted])
        np.testing.assert_array_equal(np.signbit(again[wanted]), np.signbit(want[wanted]))
        np.testing.assert_array_equal(again[~wanted], kept[~wanted])
        score = rng.integers(0, 4, n).astype(float) if trial % 2 else rng.normal(size=n)       # ties, or none
        score[rng.random(n) < 0.002] = np.nan
        med = np.array([rng.choice(np.flatnonzero(lab == c)) for c in range(k)])
        np.testing.assert_array_equal(anchor_kernel.cluster_top(lab, score, med),
                                      anchor_kernel.numpy_cluster_top(lab, score, med))


def test_row_order_equals_lexsort():
    """The kernel's merge sort of whole rows: lexsort's stable order (NaN, infinities, signed zeros, ties)."""
    from irtlib.selection import anchor_kernel

    rng = np.random.default_rng(18)
    for trial in range(120):
        n, d = int(rng.integers(1, 2500)), int(rng.integers(1, 30))
        u = rng.integers(0, int(rng.integers(1, 5)), (n, d)).astype(float)
        u[rng.random((n, d)) < 0.05] *= -1.0
        u[rng.random((n, d)) < 0.02 * (trial % 2)] = rng.choice([np.nan, np.inf, -np.inf])
        if trial % 5 == 0:
            u = rng.normal(size=(n, d))
        np.testing.assert_array_equal(anchor_kernel.row_order(u), np.lexsort(u.T[::-1]))


def test_unique_rows_equal_numpy_unique_over_rows():
    from irtlib.selection.static import _unique_rows

    rng = np.random.default_rng(12)
    for n, d, levels in ((1, 3, 2), (2, 1, 1), (500, 4, 2), (3000, 6, 3), (2000, 25, 50)):
        u = rng.integers(0, levels, (n, d)).astype(float) - (levels - 1) / 2
        u[rng.random((n, d)) < 0.1] *= -1.0                  # signed zeros among the values
        got = _unique_rows(u)
        want = _numpy_unique_rows(u)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(np.signbit(got[0]), np.signbit(want[0]))


def test_path_with_too_few_iterations_per_budget_equals_the_full_iteration(monkeypatch):
    """Budgets that stop at ``max_iter`` before settling: the warm start from an unsettled assignment."""
    from irtlib.selection import static

    rng = np.random.default_rng(14)
    x = (rng.random((15, 2500)) < rng.random((1, 2500))).astype(float)
    ks = [3, 10, 50, 200, 700]
    got = anchor_points_path(x, ks, seed=1, solver="alternate", max_iter=2)
    monkeypatch.setattr(static, "_alternate", _alternate_recomputing_every_sum)
    monkeypatch.setattr(static, "_unique_rows", _numpy_unique_rows)
    ref = anchor_points_path(x, ks, seed=1, solver="alternate", max_iter=2)
    for k in ks:
        np.testing.assert_array_equal(got[k].items, ref[k].items)
        np.testing.assert_array_equal(got[k].weights, ref[k].weights)


def test_weighted_draws_equal_generator_choice_and_leave_the_same_state():
    """The path's D-sampling draws: numpy's ``choice(replace=False, p=...)`` draw for draw, generator state after."""
    from irtlib.selection.static import _weighted_draws

    rng = np.random.default_rng(16)
    for trial in range(3000):
        n = int(rng.integers(1, 400))
        w = [rng.random(n), rng.random(n) ** 12, np.where(rng.random(n) < 0.2, rng.random(n), 0.0),
             np.exp(rng.normal(0.0, 6.0, n))][trial % 4]           # spread, peaked (repeated draws), sparse
        positive = np.count_nonzero(w)
        if not positive:
            continue
        size = int(rng.integers(1, positive + 1))
        seed = int(rng.integers(1 << 40))
        want_rng, got_rng = np.random.default_rng(seed), np.random.default_rng(seed)
        want = want_rng.choice(n, size=size, replace=False, p=w / w.sum())
        got = _weighted_draws(got_rng, w / w.sum(), size)
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype
        assert got_rng.bit_generator.state == want_rng.bit_generator.state
    with pytest.raises(ValueError):                  # choice's refusal stands
        _weighted_draws(np.random.default_rng(0), np.array([0.0, 1.0, 0.0]), 2)


def test_correlation_features_equal_the_nanmean_form():
    """Without a NaN the features skip nanmean's copy and fill: the same bits, C, Fortran or strided input."""
    from irtlib.selection.static import correlation_features

    def nanmean_form(x):
        x = np.asarray(x, float)
        mean = np.nanmean(x, axis=0)
        z = np.where(np.isnan(x), 0.0, x - mean)
        norm = np.sqrt((z * z).sum(axis=0))
        const = norm <= 1e-12 * np.sqrt(x.shape[0])
        u = np.zeros((x.shape[1], x.shape[0] + 2))
        u[~const, :-2] = (z[:, ~const] / norm[~const]).T
        u[const & (mean >= 0.5), -2] = 1.0
        u[const & (mean < 0.5), -1] = 1.0
        return u

    rng = np.random.default_rng(19)
    for trial in range(60):
        n, m = int(rng.integers(1, 60)), int(rng.integers(1, 300))
        x = (rng.random((n, m)) < rng.random(m)).astype(float) if trial % 2 else rng.normal(size=(n, m))
        if trial % 3 == 0:
            x[rng.random((n, m)) < 0.05] = np.nan
        for form in (x, np.asfortranarray(x), np.repeat(x, 2, axis=1)[:, ::2], x.tolist()):
            got, want = correlation_features(form), nanmean_form(form)
            np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))
