"""irtlib.calibration.fused_kernel: the batched py-irt fit's likelihood in one pass over the cells (C).

Against float64 autograd of the plain formula (ragged splits, missing cells, items not a multiple of
the vector width, rows long enough to flush the loss's products mid-row), in saturated cells, between
its AVX2 and its plain build (the same bits), and against the torch likelihood over a whole fit.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from irtlib.calibration import fused_kernel  # noqa: E402
from irtlib.calibration.pyirt_batch import _FusedLikelihood, fit_hierarchical_batch  # noqa: E402

pytestmark = pytest.mark.skipif(fused_kernel.load() is None, reason="no C compiler builds the kernel here")


def plain(theta, b, a, x, w):
    """Per split, sum of w log p(x | z) and its gradient, in float64 with numpy (saturation-safe forms)."""
    z = a[:, None, :] * (theta[:, :, None] - b[:, None, :])
    s = (2 * x - 1) * z
    value = (-np.logaddexp(0.0, -s) * w).sum((1, 2))
    r = w * (2 * x - 1) / (1 + np.exp(s))                # d/dz = sign sigmoid(-s)
    g_theta = (r * a[:, None, :]).sum(2)
    g_b = -(r * a[:, None, :]).sum(1)
    g_a = (r * (theta[:, :, None] - b[:, None, :])).sum(1)
    return value, [g_theta, g_b, g_a]


def fused(theta, b, a, x, w, sizes, lib=None):
    sign = torch.tensor(2 * x - 1, dtype=torch.float32)
    lik = _FusedLikelihood(torch, lib or fused_kernel.load(), sign, torch.tensor(w, dtype=torch.float32), sizes)
    out = lik.value_and_gradient(*(torch.tensor(v, dtype=torch.float32) for v in (theta, b, a)))
    return [t.numpy() for t in out]


def problem(seed, n_splits, n, m, sizes):
    rng = np.random.default_rng(seed)
    x = (rng.random((n_splits, n, m)) < 0.6).astype(float)
    w = (rng.random((n_splits, n, m)) < 0.9).astype(float)
    for s, size in enumerate(sizes):
        w[s, size:] = 0.0                                   # padded rows: no observation
    theta = rng.normal(0, 1.5, (n_splits, n))
    b, a = rng.normal(0, 1.5, (n_splits, m)), rng.lognormal(0, 0.7, (n_splits, m))
    return theta, b, a, x, w


@pytest.mark.parametrize(("n", "m", "sizes"), [(7, 13, [7, 3, 5]), (5, 1001, [5, 2])])
def test_value_and_gradient_are_the_plain_formula(n, m, sizes):
    theta, b, a, x, w = problem(0, len(sizes), n, m, sizes)
    value, g_theta, g_b, g_a = fused(theta, b, a, x, w, np.array(sizes))
    exact, (e_theta, e_b, e_a) = plain(theta, b, a, x, w)
    np.testing.assert_allclose(value, exact, rtol=2e-6)
    for got, want in ((g_theta, e_theta), (g_b, e_b), (g_a, e_a)):
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * np.abs(want).max())
    for s, size in enumerate(sizes):
        assert (g_theta[s, size:] == 0).all()


def test_saturated_cells_keep_their_relative_precision():
    """d/dz = sign sigmoid(-s) of well-predicted cells (s up to 40) to float32 precision, and the loss."""
    theta = np.array([[-40.0, -12.0, 3.0, 9.0, 25.0, 40.0]] * 2)
    b, a = np.zeros((2, 1)), np.ones((2, 1))
    x = np.array([[1.0, 0.0, 1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 1.0, 0.0, 1.0, 1.0]])[:, :, None]
    w = np.ones_like(x)
    value, g_theta, _, _ = fused(theta, b, a, x, w, np.array([6, 6]))
    exact, (e_theta, _, _) = plain(theta, b, a, x, w)
    np.testing.assert_allclose(g_theta, e_theta, rtol=1e-6, atol=0)
    np.testing.assert_allclose(value, exact, rtol=1e-6)


def test_a_split_is_the_same_bit_for_bit_wherever_it_sits():
    theta, b, a, x, w = problem(1, 4, 9, 21, [9, 4, 9, 6])
    together = fused(theta, b, a, x, w, np.array([9, 4, 9, 6]))
    alone = fused(theta[2:3], b[2:3], a[2:3], x[2:3], w[2:3], np.array([9]))
    for t, o in zip(together, alone, strict=True):
        assert np.array_equal(t[2:3], o)


@pytest.mark.skipif(not fused_kernel._has_avx2(), reason="the processor has no AVX2")
def test_the_avx2_build_and_the_plain_build_give_the_same_bits(tmp_path):
    theta, b, a, x, w = problem(2, 3, 11, 203, [11, 7, 10])
    runs = [fused(theta, b, a, x, w, np.array([11, 7, 10]),
                  lib=fused_kernel.bind_library(fused_kernel.compile_kernel(avx2=flag, directory=tmp_path)))
            for flag in (True, False)]
    assert len(list(tmp_path.glob("*.so"))) == 2
    for with_avx2, without in zip(*runs, strict=True):
        assert np.array_equal(with_avx2, without)


def test_a_fit_with_the_kernel_is_the_fit_with_the_torch_likelihood(monkeypatch):
    rng = np.random.default_rng(5)
    x = (rng.random((40, 30)) < 0.6).astype(float)
    x[3, 4] = np.nan
    rows = [np.arange(40), np.arange(0, 40, 3)]
    kernel = fit_hierarchical_batch(x, rows, epochs=150)
    monkeypatch.setattr(fused_kernel, "_LOADED", {"lib": None})
    with_torch = fit_hierarchical_batch(x, rows, epochs=150)
    np.testing.assert_allclose(np.log(kernel.a), np.log(with_torch.a), atol=1e-4)
    np.testing.assert_allclose(kernel.b, with_torch.b, atol=1e-4)
    np.testing.assert_allclose(kernel.loss, with_torch.loss, rtol=1e-5)
    assert np.array_equal(kernel.best_epoch, with_torch.best_epoch)


def test_without_a_compiler_the_fit_warns_and_uses_torch(monkeypatch, tmp_path):
    monkeypatch.setattr(fused_kernel, "_LOADED", {})
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv("IRTLIB_KERNEL_DIR", str(tmp_path))
    with pytest.warns(RuntimeWarning, match="fused likelihood kernel is not available .*no C compiler"):
        fit = fit_hierarchical_batch(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), [np.arange(3)], epochs=3)
    assert np.isfinite(fit.loss).all() and fused_kernel.load() is None
    monkeypatch.setattr(fused_kernel, "_LOADED", {})
    monkeypatch.setenv("IRTLIB_FUSED_KERNEL", "0")                         # turned off: no warning
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fused_kernel.load() is None


def test_the_avx512_pass_and_the_plain_pass_give_the_same_bits():
    """loglik_2pl's pair-at-a-time pass (AVX-512) against its vector-after-vector pass: ragged splits,
    missing cells, widths with a lone vector at a row's end and rows long enough to flush mid-row."""
    lib = fused_kernel.load()
    if lib.loglik_2pl_mode(1) != 1:
        pytest.skip("the processor has no AVX-512F")
    try:
        for seed, (n, m, sizes) in enumerate([(7, 13, [7, 3, 5]), (5, 1001, [5, 2]), (4, 2000, [4, 4]),
                                              (9, 24, [9, 1, 8])]):
            theta, b, a, x, w = problem(10 + seed, len(sizes), n, m, sizes)
            theta[0, 0], a[0, :3] = 60.0, 30.0                     # saturated cells too
            assert lib.loglik_2pl_mode(1) == 1
            wide = fused(theta, b, a, x, w, np.array(sizes))
            assert lib.loglik_2pl_mode(0) == 0
            narrow = fused(theta, b, a, x, w, np.array(sizes))
            for got, want in zip(wide, narrow, strict=True):
                assert np.array_equal(got, want)
    finally:
        lib.loglik_2pl_mode(1)


def _columns(seed, n_splits, n, m):
    rng = np.random.default_rng(seed)
    width = n + 2 * m
    loc, log_scale, eps = (rng.normal(0, 1, (n_splits, width)).astype(np.float32) for _ in range(3))
    return loc, log_scale, eps


@pytest.mark.parametrize(("n", "m", "sizes"), [(7, 13, [7, 3, 5]), (23, 301, [23, 20])])
def test_guide_sample_is_loc_plus_eps_times_the_kernels_exp_elementwise(n, m, sizes):
    """step = eps * exp(log_scale) and value = loc + step, each one float32 operation per column."""
    lib = fused_kernel.load()
    n_splits = len(sizes)
    loc, log_scale, eps = _columns(3, n_splits, n, m)

    def sample(loc, eps):
        step, value = (np.empty_like(loc) for _ in range(2))
        a = np.empty((n_splits, m), dtype=np.float32)
        lib.guide_sample(n_splits, n, m, loc.ctypes.data, log_scale.ctypes.data, loc.shape[1], eps.ctypes.data,
                         step.ctypes.data, value.ctypes.data, a.ctypes.data)
        return step, value, a

    scale, _, _ = sample(np.zeros_like(loc), np.ones_like(eps))           # the kernel's exp(log_scale)
    np.testing.assert_allclose(scale, np.exp(log_scale.astype(float)), rtol=3e-7)
    step, value, a = sample(loc, eps)
    assert np.array_equal(step, eps * scale) and np.array_equal(value, loc + step)
    np.testing.assert_allclose(a, np.exp(value[:, n + m:].astype(float)), rtol=3e-7)


@pytest.mark.parametrize(("n", "m", "sizes"), [(7, 13, [7, 3, 5]), (23, 301, [23, 20]), (2, 700, [2, 2])])
def test_prior_terms_are_float32_terms_summed_in_column_order_in_double(n, m, sizes):
    """Bit for bit against numpy: each column's float32 terms, and the per-site sums as a sequential float64 sum."""
    lib = fused_kernel.load()
    n_splits, width = len(sizes), n + 2 * m
    rng = np.random.default_rng(4)
    value, step, eps = _columns(5, n_splits, n, m)
    log_scale = np.ascontiguousarray(rng.normal(0, 1, (n_splits, width)).astype(np.float32))
    mu, u = rng.normal(0, 1, (n_splits, 3)).astype(np.float32), rng.uniform(0.5, 2, (n_splits, 3)).astype(np.float32)
    g_theta = rng.normal(0, 1, (n_splits, n)).astype(np.float32)
    g_b, g_a, a = (rng.normal(0, 1, (n_splits, m)).astype(np.float32) for _ in range(3))
    g_loc, g_log_scale = np.full((n_splits, width), np.nan, np.float32), np.full((n_splits, width), np.nan, np.float32)
    sums = np.empty((n_splits, 4, 3), dtype=np.float32)
    rows = np.array(sizes, dtype=np.int64)
    lib.prior_terms(n_splits, n, m, rows.ctypes.data, value.ctypes.data, step.ctypes.data, eps.ctypes.data,
                    log_scale.ctypes.data, width, mu.ctypes.data, u.ctypes.data, g_theta.ctypes.data, g_b.ctypes.data,
                    g_a.ctypes.data, a.ctypes.data, g_loc.ctypes.data, g_log_scale.ctypes.data, sums.ctypes.data)
    for s, size in enumerate(sizes):
        sites = [(slice(0, size), 1, g_theta[s, :size]), (slice(n, n + m), 0, g_b[s]),
                 (slice(n + m, width), 2, g_a[s] * a[s])]
        for k, (cols, hyper, g_lik) in enumerate(sites):
            du = (value[s, cols] - mu[s, hyper]) * u[s, hyper]
            du2 = du * u[s, hyper]
            want_loc = du2 - g_lik
            assert np.array_equal(g_loc[s, cols], want_loc)
            assert np.array_equal(g_log_scale[s, cols], want_loc * step[s, cols] - np.float32(1.0))
            for row, terms in enumerate((du2, du * du, eps[s, cols] * eps[s, cols], log_scale[s, cols])):
                assert sums[s, row, k] == np.float32(np.cumsum(terms.astype(np.float64))[-1])
        assert (g_loc[s, size:n] == 0).all() and (g_log_scale[s, size:n] == 0).all()
