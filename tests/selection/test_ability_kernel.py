"""The MAP ability's Newton sums in C: map_ability's estimates, standard errors and flags, bit for bit."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from scipy.special import expit

from irtlib.core.ability import map_ability
from irtlib.selection import ability_kernel
from irtlib.selection.static import Subset, score_blocks_map, score_subset


@pytest.fixture(scope="module")
def lib():
    from irtlib.calibration.fused_kernel import compiled

    built = compiled(ability_kernel.SOURCE, ability_kernel._bind, switch="IRTLIB_ABILITY_KERNEL")
    if built is None:
        pytest.skip("the ability kernel cannot be built here")
    return built


def _same(x, y):
    return np.array_equal(x, y) and np.array_equal(np.signbit(x), np.signbit(y))


def _patterns(rng, n_models, n_items, *, per_model, missing, spread=1.0):
    shape = (n_models, n_items) if per_model else (n_items,)
    a = rng.lognormal(0.0, 0.6 * spread, shape)
    b = rng.normal(0.0, 1.5 * spread, shape)
    theta = rng.normal(0.0, 2.0, n_models)
    x = (rng.random((n_models, n_items)) < expit(a * (theta[:, None] - b))).astype(float)
    x[rng.random(x.shape) < missing] = np.nan
    return x, a, b


CASES = [(1, 1, False, 0.0), (3, 7, True, 0.0), (5, 8, False, 0.3), (9, 129, True, 0.1), (40, 300, False, 0.05),
         (25, 1000, True, 0.0), (4, 9000, False, 0.02)]


@pytest.mark.parametrize(("n_models", "n_items", "per_model", "missing"), CASES)
def test_map_ability_with_the_kernels_sums_gives_numpys_estimates_bit_for_bit(lib, n_models, n_items, per_model,
                                                                                missing):
    rng = np.random.default_rng([n_models, n_items, int(per_model)])
    x, a, b = _patterns(rng, n_models, n_items, per_model=per_model, missing=missing)
    x[0] = 1.0                                     # an all-safe pattern: the estimate runs to the bracket
    theta0 = rng.normal(0.0, 3.0, n_models)
    for kw in ({}, {"theta0": theta0}, {"prior_mean": 0.5, "prior_sd": 0.3}, {"max_newton": 2}, {"max_step": 0.01},
               {"bounds": (-1.0, 1.5), "tol": 1e-12}):
        want = map_ability(x, a, b, **kw)
        got = map_ability(x, a, b, row_sums=ability_kernel.row_sums(lib), **kw)
        assert _same(got.theta, want.theta) and _same(got.se, want.se)
        assert np.array_equal(got.at_bound, want.at_bound)
        assert np.array_equal(got.used_bisection, want.used_bisection)


def test_the_bisection_fallback_and_the_bracket_are_the_numpy_paths(lib):
    rng = np.random.default_rng(7)
    x, a, b = _patterns(rng, 30, 200, per_model=True, missing=0.1, spread=3.0)
    x[:5] = 1.0
    x[5:10] = 0.0
    for max_newton in (1, 3, 100):
        want = map_ability(x, a * 20.0, b, max_newton=max_newton, max_step=5.0)
        got = map_ability(x, a * 20.0, b, max_newton=max_newton, max_step=5.0, row_sums=ability_kernel.row_sums(lib))
        assert want.used_bisection.any() or max_newton == 100
        assert _same(got.theta, want.theta) and _same(got.se, want.se)
        assert np.array_equal(got.at_bound, want.at_bound)


def test_the_kernels_sums_are_numpys_on_every_row_length_and_subset_of_rows(lib):
    rng = np.random.default_rng(11)
    prepare = ability_kernel.row_sums(lib)
    for n_items in [0, 1, 2, 7, 8, 9, 15, 16, 17, 127, 128, 129, 130, 255, 256, 1023, 1024, 1025, 11395]:
        x, a, b = _patterns(rng, 6, n_items, per_model=n_items % 2 == 1, missing=0.2)
        observed = ~np.isnan(x)
        x = np.where(observed, x, 0.0)
        theta = rng.normal(0.0, 3.0, 6)
        sums = prepare(x, observed, a, b)
        for rows in (None, np.array([4, 1]), np.array([5])):
            th = theta if rows is None else theta[rows]
            got = sums(rows, th)
            want = ability_kernel._numpy_sums(x, observed, a, b, rows, th)
            assert all(_same(g, w) for g, w in zip(got, want, strict=True))


def test_a_kernel_with_other_sums_is_refused(lib, monkeypatch):
    """The loader's check catches sums one unit in the last place away from numpy's."""
    real = ability_kernel.row_sums

    def off(lib_):
        prepare = real(lib_)

        def wrapped(*args):
            sums = prepare(*args)
            return lambda rows, theta: tuple(np.nextafter(s, np.inf) for s in sums(rows, theta))

        return wrapped

    assert ability_kernel._matches_numpy(lib)
    monkeypatch.setattr(ability_kernel, "row_sums", off)
    assert not ability_kernel._matches_numpy(lib)


def test_score_blocks_map_equals_score_subset_with_and_without_the_kernel():
    rng = np.random.default_rng(3)
    blocks, want = [], []
    for size in (5, 5, 40, 300):
        x, a, b = _patterns(rng, 10, 400, per_model=False, missing=0.05)
        subset = Subset(np.sort(rng.choice(400, size=size, replace=False)))
        start = rng.normal(0.0, 1.0, 10) if size == 40 else None
        blocks.append((x, subset, a, b, start))
        want.append(score_subset(x, subset, how="map", a=a, b=b, theta0=start))
    got = score_blocks_map(blocks)
    assert all(_same(g, w) for g, w in zip(got, want, strict=True))


def test_without_the_kernel_the_protocols_scores_are_the_same_bytes(tmp_path):
    """A process with the kernel switched off (``IRTLIB_ABILITY_KERNEL=0``) gives the kernel's scores, byte for byte."""
    code = ("import numpy as np, sys\n"
            "from irtlib.selection.static import Subset, score_blocks_map\n"
            "rng = np.random.default_rng(5)\n"
            "x = (rng.random((30, 500)) < 0.6).astype(float); x[rng.random(x.shape) < 0.05] = np.nan\n"
            "a, b = rng.lognormal(0, 0.6, 500), rng.normal(0, 1.5, 500)\n"
            "blocks = [(x, Subset(np.arange(k)), a, b, None) for k in (3, 50, 500)]\n"
            "sys.stdout.write(np.concatenate(score_blocks_map(blocks)).tobytes().hex())\n")
    out = {}
    for switch in ("0", "1"):
        env = dict(os.environ, IRTLIB_ABILITY_KERNEL=switch)
        out[switch] = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                     check=True).stdout
    assert out["0"] == out["1"] and len(out["0"]) == 90 * 16


def _newton_iterates(x, a, b, theta, steps):
    """The numpy loop's Newton iterates of one model (prior Normal(0, 1), steps capped at 1, bracket [-8, 8])."""
    from irtlib.core.kernels import score_and_information

    out = [theta]
    for _ in range(steps):
        score, info = score_and_information(x, theta, a, b)
        grad = score.sum() - theta
        theta = float(np.clip(theta + np.clip(grad / (info.sum() + 1.0), -1.0, 1.0), -8.0, 8.0))
        out.append(theta)
    return out


@pytest.mark.parametrize("scale", [30.0, 100.0])
def test_rows_whose_newton_steps_cycle_go_to_the_bisection_as_in_numpy(lib, scale):
    x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, np.nan]])
    a, b = np.array([scale, scale]), np.array([0.3, -0.2])
    iterates = _newton_iterates(x[2], a, b, 0.0, 100)
    assert len({t.hex() for t in iterates}) < len(iterates)        # the third model's steps repeat a theta
    for kw in ({}, {"max_newton": 7}, {"max_newton": 0}, {"theta0": np.array([8.0, -8.0, 3.0, 0.5])}):
        want = map_ability(x, a, b, **kw)
        got = map_ability(x, a, b, row_sums=ability_kernel.row_sums(lib), **kw)
        assert want.used_bisection[2]
        assert _same(got.theta, want.theta) and _same(got.se, want.se)
        assert np.array_equal(got.at_bound, want.at_bound)
        assert np.array_equal(got.used_bisection, want.used_bisection)


def test_the_kernels_row_steps_are_checked_against_the_numpy_loop_when_loaded(lib):
    prepare = ability_kernel.row_sums(lib)
    assert ability_kernel._solves_like_numpy(prepare, np.random.default_rng(1))

    def wrong(*args):
        sums = prepare(*args)
        solve = sums.solve

        def off(theta, **kw):
            est, converged = solve(theta, **kw)
            return np.nextafter(est, np.inf), converged

        sums.solve = off
        return sums

    assert not ability_kernel._solves_like_numpy(wrong, np.random.default_rng(1))


def _stacked(blocks, **kw):
    """score_blocks_map's stacked form: one map_ability call per subset size, the C sums and row steps."""
    out = [None] * len(blocks)
    for size in {len(block[1]) for block in blocks}:
        group = [i for i, block in enumerate(blocks) if len(block[1]) == size]
        x = np.concatenate([np.asarray(blocks[i][0], float)[:, blocks[i][1].items] for i in group])
        rows_a = np.concatenate([np.broadcast_to(np.asarray(blocks[i][2], float)[blocks[i][1].items],
                                                 (np.shape(blocks[i][0])[0], size)) for i in group])
        rows_b = np.concatenate([np.broadcast_to(np.asarray(blocks[i][3], float)[blocks[i][1].items],
                                                 (np.shape(blocks[i][0])[0], size)) for i in group])
        start = np.concatenate([np.broadcast_to(np.asarray(kw.get("prior_mean", 0.0) if blocks[i][4] is None
                                                           else blocks[i][4], float), (np.shape(blocks[i][0])[0],))
                                for i in group])
        theta = map_ability(x, rows_a, rows_b, theta0=start, row_sums=ability_kernel.map_row_sums(),
                            standard_errors=False, **kw).theta
        at = 0
        for i in group:
            n = np.shape(blocks[i][0])[0]
            out[i] = theta[at:at + n]
            at += n
    return out


def test_blocks_read_through_item_lists_equal_the_stacked_map_ability_bit_for_bit():
    if ability_kernel.load() is None:
        pytest.skip("the ability kernel cannot be built here")
    rng = np.random.default_rng(23)
    blocks = []
    for split in range(4):                            # splits of different widths, some models missing cells
        n_items = int(rng.integers(50, 400))
        x, a, b = _patterns(rng, int(rng.integers(1, 12)), n_items, per_model=False, missing=0.1 * (split % 2),
                            spread=3.0 if split == 3 else 1.0)
        x[0, :] = 1.0                                 # an all-safe model: the estimate runs to the bracket
        if split == 2:
            a[:5] = 40.0                              # steep items: rows that bisect
        for size in (1, 3, 17, min(200, n_items)):
            items = rng.choice(n_items, size=size, replace=False)     # unsorted, as the greedy orders are
            start = None if size == 1 else rng.normal(0.0, 4.0 if size == 3 else 1.0, x.shape[0])
            blocks.append((x, Subset(items), a, b, start))
    blocks.append((blocks[0][0].tolist(), blocks[0][1], list(blocks[0][2]), blocks[0][3], 9.0))  # lists, a far start
    for kw in ({}, {"prior_mean": 0.4, "prior_sd": 0.7}):
        got, want = score_blocks_map(blocks, **kw), _stacked(blocks, **kw)
        assert len(got) == len(want)
        assert all(_same(g, w) for g, w in zip(got, want, strict=True))
        assert all(_same(g, score_subset(v, s, how="map", a=a, b=b, theta0=t, **kw))
                   for g, (v, s, a, b, t) in zip(got, blocks, strict=True))


def test_blocks_map_ability_refuses_are_refused_with_its_message():
    from irtlib.errors import InputError

    rng = np.random.default_rng(29)
    x, a, b = _patterns(rng, 5, 60, per_model=False, missing=0.0)
    good = (x, Subset(np.arange(10)), a, b, None)
    bad_x = x.copy()
    bad_x[2, 4] = 0.5
    bad_a = a.copy()
    bad_a[3] = np.inf
    for block, match in (((bad_x, Subset(np.arange(10)), a, b, None), "responses must be 0, 1 or NaN"),
                         ((x, Subset(np.arange(10)), bad_a, b, None), "a contains non-finite values"),
                         ((x, Subset(np.arange(10)), a * 1e7, b, None), "beyond")):
        with pytest.raises(InputError, match=match):
            score_blocks_map([good, block])
    # an item the kernel cannot read (negative: numpy's position from the end) is scored as numpy indexes it
    wrapped = score_blocks_map([(x, Subset(np.array([-1, -2, 3])), a, b, None)])
    assert _same(wrapped[0], score_subset(x, Subset(np.array([59, 58, 3])), how="map", a=a, b=b))
    assert score_blocks_map([]) == []


def test_the_load_check_refuses_block_estimates_one_ulp_away(lib, monkeypatch):
    real = ability_kernel.map_blocks

    def off(lib_, desc, items, theta, **kw):
        bad = real(lib_, desc, items, theta, **kw)
        theta[-1] = np.nextafter(theta[-1], np.inf)
        return bad

    assert ability_kernel._matches_numpy(lib)
    monkeypatch.setattr(ability_kernel, "map_blocks", off)
    assert not ability_kernel._matches_numpy(lib)
