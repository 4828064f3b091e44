"""The portable exp (irtlib.selection.portable_exp, _portable_exp.h): accuracy, special values, same bits everywhere."""

from __future__ import annotations

import math
import os
import shutil
import subprocess

import numpy as np
import pytest

from irtlib.calibration.fused_kernel import BASE_FLAGS, compile_kernel, cpu_flags
from irtlib.selection import portable_exp as pe

#: Arguments where exp is finite and normal (the MLE's ``a (theta - b)`` and far beyond).
NORMAL_RANGE = (-708.39, 709.78)


def _grid() -> np.ndarray:
    """Dense grids over the whole finite range and over the kernel's usual one, random draws, and edges."""
    rng = np.random.default_rng(20261204)
    return np.concatenate([
        np.linspace(-745.2, 709.78, 2_000_001),
        np.linspace(-40.0, 40.0, 1_000_001),
        np.linspace(-1.0, 1.0, 200_001),
        rng.uniform(-40.0, 40.0, 500_000),
        rng.normal(0.0, 8.0, 500_000),
        np.ldexp(rng.uniform(-1.0, 1.0, 100_000), rng.integers(-1074, 0, 100_000)),     # tiny arguments
        np.arange(-1077, 1025) * math.log(2.0),            # the reduction's edges: k ln 2 and halfway
        (np.arange(-1077, 1025) + 0.5) * math.log(2.0),
    ])


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, -5e-324, 1e-300, -1e-300,
                    709.782712893384, np.nextafter(709.782712893384, np.inf), 710.0, 745.9, 746.0, 746.1, 1e308,
                    -708.3964185322641, -708.4, -720.0, -740.0, -745.1332191019411,
                    np.nextafter(-745.1332191019411, -np.inf), -745.2, -746.0, -746.1, -1e308])


def _bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(np.int64)


def _numpy_exp(x):
    with np.errstate(over="ignore", under="ignore"):
        return np.exp(x)


@pytest.fixture(scope="module")
def c_builds(tmp_path_factory):
    """``_portable_exp.c`` built several ways: vectorised with AVX2 and with AVX-512 at ``-O3`` (where the
    processor has them), with the baseline instruction set, and with the vectorisers off (one by one)."""
    compiler = os.environ.get("CC") or "cc"
    if shutil.which(compiler) is None:
        pytest.skip("no C compiler")
    directory = tmp_path_factory.mktemp("portable-exp")
    builds = {"baseline": pe.load_c(path=compile_kernel(source=pe.C_SOURCE, avx2=False, directory=directory))}
    if "avx2" in cpu_flags():
        builds["avx2"] = pe.load_c(path=compile_kernel(source=pe.C_SOURCE, avx2=True, directory=directory))
    extra = {"scalar": ["-fno-tree-vectorize", "-fno-tree-slp-vectorize"]}
    if "avx512f" in cpu_flags():
        extra["avx512"] = ["-O3", "-mavx512f", "-mprefer-vector-width=512"]
    for name, flags in extra.items():
        path = directory / f"portable_exp_{name}.so"
        subprocess.run([compiler, *BASE_FLAGS, *flags, "-o", str(path), str(pe.C_SOURCE), "-lm"], check=True,
                       capture_output=True)
        builds[name] = pe.load_c(path=path)
    return builds


def test_the_c_builds_and_the_numpy_twin_give_the_same_bits(c_builds):
    x = np.concatenate([_grid(), SPECIAL, -SPECIAL])
    want = _bits(pe.portable_exp(x))
    for name, lib in c_builds.items():
        np.testing.assert_array_equal(_bits(pe.c_exp(lib, x)), want, err_msg=name)
        for n in range(0, 40):                                 # the vector blocks' remainders, one by one
            np.testing.assert_array_equal(_bits(pe.c_exp(lib, x[:n])), want[:n], err_msg=f"{name}, {n} values")
        ex, enx = pe.c_exp(lib, x, pair=True)
        np.testing.assert_array_equal(_bits(ex), want, err_msg=name)
        np.testing.assert_array_equal(_bits(enx), _bits(pe.portable_exp(-x)), err_msg=name)


def test_the_normal_range_pair_is_the_pair_bit_for_bit_within_its_range(c_builds):
    # portable_exp_pair_normal (the MLE kernel's pair where |z| <= 700): one product by 2^k instead of two
    # halves, the same bits wherever the results are normal numbers; the range's edges, both signed zeros,
    # tiny arguments and the reduction's edges k ln 2 and halfway included
    x = _grid()
    x = np.concatenate([x[np.abs(x) <= 700.0], [700.0, -700.0, 0.0, -0.0, 5e-324, -5e-324, 699.9999999999999]])
    for name, lib in c_builds.items():
        ex, enx = pe.c_exp(lib, x, pair=True)
        fx, fnx = pe.c_exp(lib, x, pair=True, normal=True)
        np.testing.assert_array_equal(_bits(fx), _bits(ex), err_msg=name)
        np.testing.assert_array_equal(_bits(fnx), _bits(enx), err_msg=name)
        for n in range(0, 20):                                 # the vector blocks' remainders
            fx, fnx = pe.c_exp(lib, x[-n - 7:], pair=True, normal=True)
            np.testing.assert_array_equal(_bits(fx), _bits(ex[-n - 7:]), err_msg=f"{name}, {n}")
            np.testing.assert_array_equal(_bits(fnx), _bits(enx[-n - 7:]), err_msg=f"{name}, {n}")


def test_the_pair_is_exp_of_x_and_of_minus_x_bit_for_bit():
    x = np.concatenate([_grid(), SPECIAL, -SPECIAL])
    ex, enx = pe.portable_exp_pair(x)
    np.testing.assert_array_equal(_bits(ex), _bits(pe.portable_exp(x)))
    np.testing.assert_array_equal(_bits(enx), _bits(pe.portable_exp(-x)))


def _ulp_error(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """|y - exp(x)| in units in the last place of the double nearest exp(x), exp(x) in long double."""
    exact = np.exp(x.astype(np.longdouble))
    return np.abs((y.astype(np.longdouble) - exact) / np.spacing(exact.astype(np.float64)).astype(np.longdouble))


@pytest.mark.skipif(np.finfo(np.longdouble).nmant < 63, reason="long double is not extended precision here")
def test_within_one_unit_in_the_last_place_of_the_exact_exp():
    x = _grid()
    x = x[(x > NORMAL_RANGE[0]) & (x < NORMAL_RANGE[1])]
    err = _ulp_error(pe.portable_exp(x), x)
    assert err.max() < 1.0
    assert _ulp_error(_numpy_exp(x), x).max() < 1.0               # the reference's own, for comparison


def test_at_most_one_unit_in_the_last_place_from_the_c_librarys_exp():
    x = _grid()
    y = pe.portable_exp(x)
    ref = _numpy_exp(x)
    assert np.abs(_bits(y) - _bits(ref)).max() <= 1
    some = x[:: 997][x[:: 997] < 709.78]
    libm = np.array([math.exp(v) for v in some])
    assert np.abs(_bits(pe.portable_exp(some)) - _bits(libm)).max() <= 1


def test_special_values_overflow_and_underflow_are_the_c_librarys():
    got = pe.portable_exp(SPECIAL)
    want = _numpy_exp(SPECIAL)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    both = ~np.isnan(want)
    np.testing.assert_array_equal(got[both], want[both])
    assert pe.portable_exp(np.array([np.inf]))[0] == np.inf and pe.portable_exp(np.array([-np.inf]))[0] == 0.0
    assert pe.portable_exp(np.array([0.0]))[0] == 1.0 and pe.portable_exp(np.array([-0.0]))[0] == 1.0
    # the edges of the finite range: the largest finite result, then +inf; the smallest subnormal, then 0
    top = np.nextafter(709.782712893384, np.inf)
    assert np.isfinite(pe.portable_exp(np.array([709.782712893384]))[0])
    assert pe.portable_exp(np.array([top]))[0] == np.inf
    assert pe.portable_exp(np.array([-745.1332191019411]))[0] == 5e-324
    assert pe.portable_exp(np.array([-745.14]))[0] == 0.0


def test_subnormal_results_are_within_one_subnormal_step_of_the_c_librarys():
    x = np.linspace(-745.2, -708.0, 400_001)
    y, ref = pe.portable_exp(x), _numpy_exp(x)
    assert np.abs(_bits(y) - _bits(ref)).max() <= 1


def test_the_expit_pair_saturates_like_scipys_expit():
    from scipy.special import expit

    z = np.concatenate([np.linspace(-800.0, 800.0, 160_001), SPECIAL, -SPECIAL])
    s, q = pe.portable_expit_pair(z)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(np.isnan(s), np.isnan(z))
    ok = ~np.isnan(z)
    for p, w in ((s, z), (q, -z)):              # exp(-w) below half an ulp of 1 (p = 1), or overflowing (p = 0)
        saturated = ok & ((w > 40.0) | (w < -709.79))
        np.testing.assert_array_equal(p[saturated], expit(w[saturated]))
        assert set(np.unique(p[saturated])) == {0.0, 1.0}
    # elsewhere within three units in the last place: exp's one is a relative 2^-52 at most, up to two
    # units of 1 / (1 + e) where their binades fall apart, and the division rounds again
    assert np.abs(_bits(s[ok]) - _bits(expit(z[ok]))).max() <= 3
    assert np.abs(_bits(q[ok]) - _bits(expit(-z[ok]))).max() <= 3
    assert s[z == np.inf].tolist() == [1.0] * int((z == np.inf).sum()) and (q[z == np.inf] == 0.0).all()
    assert (s[z == -np.inf] == 0.0).all() and (q[z == -np.inf] == 1.0).all()


def test_the_mle_kernels_terms_are_the_numpy_twins_on_every_block_remainder():
    from irtlib.selection import score_kernel

    lib = score_kernel.load()
    if lib is None:
        pytest.skip("the MLE score kernel cannot be built here")
    rng = np.random.default_rng(11)
    n, t = 24, 53
    a = np.exp(rng.normal(0.0, 2.0, (n, t)))
    b = rng.normal(0.0, 20.0, (n, t))
    x = (rng.random((n, t)) < 0.5).astype(float)
    theta = rng.normal(0.0, 3.0, n)
    theta[:3] = (700.0, -700.0, 8.0)
    b[3:6, ::5] = theta[3:6, None] - 700.0 / a[3:6, ::5]      # |z| at the fast pair's edge (700), and past it
    b[6, ::3] = theta[6] - np.nextafter(700.0, np.inf) / a[6, ::3]
    g0, h0 = pe.score_and_information(x, theta[:, None], a, b)
    for stop in range(0, t + 1, 3):
        start = rng.integers(0, stop + 1, n)
        g, h = np.full((n, t), np.nan), np.full((n, t), np.nan)
        score_kernel._terms(lib, np.arange(n), theta, start, x, a, b, stop, g, h)
        cols = (np.arange(t)[None, :] >= start[:, None]) & (np.arange(t)[None, :] < stop)
        np.testing.assert_array_equal(g[cols], g0[cols])
        np.testing.assert_array_equal(h[cols], h0[cols])
        assert np.isnan(g[~cols]).all()
