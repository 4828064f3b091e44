"""irtlib.calibration.stream_kernel: torch's CPU random streams in C, for the batched fit's draws.

Against torch itself (the only reference that matters: the draws must be its bits): scalar Normals
with the cached second value carried across calls, noise of lengths under, at and around multiples of
16, Gammas on both sides of 1, one whole epoch's layout for ragged splits, and a whole batched fit
drawn both ways.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from irtlib.calibration import stream_kernel  # noqa: E402
from irtlib.calibration.pyirt_batch import _Streams, fit_hierarchical_batch  # noqa: E402

FOUND = stream_kernel.load()
pytestmark = pytest.mark.skipif(FOUND is None, reason="the C streams do not draw torch's numbers here")


def bits(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(np.uint32)


@pytest.mark.parametrize("seed", [0, 3, 2**40 + 5])
def test_interleaved_draws_are_torchs_bit_for_bit(seed):
    lib, mode = FOUND
    state = stream_kernel._streams(lib, 1, seed)
    g = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed % 2**32)
    for n in [1, 2, 15, 16, 17, 31, 32, 33, 67, 395, 512, 1090]:
        ours = np.empty(n, dtype=np.float32)
        if rng.random() < 0.5:         # a scalar Normal first: leaves a cached value for the next one
            one = np.empty(1, dtype=np.float32)
            lib.draw_scalar_normals(state.ctypes.data, one.ctypes.data, 1)
            assert bits(one) == bits(torch.zeros(1).normal_(generator=g).numpy())
        lib.draw_normal_fill(state.ctypes.data, ours.ctypes.data, n, mode)
        assert np.array_equal(bits(ours), bits(torch.empty(n).normal_(generator=g).numpy())), n
    alphas = np.exp(rng.normal(0.0, 2.0, 3000)).astype(np.float32)   # about 0.002 to 500, a third below 1
    ours = np.empty(alphas.size, dtype=np.float32)
    lib.draw_gammas(state.ctypes.data, alphas.ctypes.data, ours.ctypes.data, alphas.size)
    theirs = torch._standard_gamma(torch.from_numpy(alphas), generator=g).numpy()
    assert np.array_equal(bits(ours), bits(theirs))


@pytest.mark.parametrize("hyper", [True, False])
def test_one_epoch_of_ragged_splits_is_the_torch_loops(hyper):
    lib, mode = FOUND
    sizes, n_items, seed = np.array([67, 5, 23, 40]), 79, 0
    ours = stream_kernel.CStreams(torch, lib, mode, sizes, n_items, seed, hyper=hyper)
    theirs = _Streams(torch, sizes, n_items, seed, hyper=hyper)
    rng = np.random.default_rng(1)
    for _ in range(4):
        alpha = torch.from_numpy(np.exp(rng.normal(0, 1.5, (sizes.size, 3))).astype(np.float32))
        ours.draw(alpha)
        theirs.draw(alpha)
        for name in ("eps_mu", "gamma", "eps"):
            assert np.array_equal(bits(getattr(ours, name).numpy()), bits(getattr(theirs, name).numpy())), name


@pytest.mark.parametrize("priors", ["hierarchical", "paper"])
def test_a_batched_fit_is_the_same_with_c_or_torch_draws(monkeypatch, priors):
    rng = np.random.default_rng(4)
    theta, b = rng.normal(size=30), rng.normal(size=40)
    x = (rng.random((30, 40)) < 1 / (1 + np.exp(-(theta[:, None] - b)))).astype(float)
    x[rng.random(x.shape) < 0.05] = np.nan
    rows = [np.arange(0, 25), np.arange(5, 30), np.arange(0, 30, 2)]
    with_c = fit_hierarchical_batch(x, rows, epochs=60, priors=priors)
    monkeypatch.setitem(stream_kernel._LOADED, "lib", None)           # as without a compiler
    with_torch = fit_hierarchical_batch(x, rows, epochs=60, priors=priors)
    for name in ("a", "b", "theta", "best_epoch", "loss"):
        assert np.array_equal(getattr(with_c, name), getattr(with_torch, name), equal_nan=True), name


def test_off_switch_and_a_wrong_mode_are_refused(monkeypatch):
    monkeypatch.setenv("IRTLIB_STREAM_KERNEL", "0")
    monkeypatch.delitem(stream_kernel._LOADED, "lib")
    assert stream_kernel.load() is None
    lib, mode = FOUND
    other = 1 - mode
    if other in stream_kernel._runnable_modes(lib):      # the other Box-Muller differs from torch's here
        assert not stream_kernel.matches_torch(lib, other)
