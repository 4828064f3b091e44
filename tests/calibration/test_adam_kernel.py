"""irtlib.calibration.adam_kernel: torch's Adam step in C, for the batched fit's optimiser.

Against torch itself: ``torch.optim.Adam`` with ``ExponentialLR`` (pyro's settings) over many steps
on parameters and gradients spread over many orders of magnitude, the fit's own torch step, a whole
batched fit stepped both ways, and the refusals (the switch, a wrong square root).
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from irtlib.calibration import adam_kernel  # noqa: E402
from irtlib.calibration.pyirt_batch import fit_hierarchical_batch  # noqa: E402

KERNEL = adam_kernel.load()
pytestmark = pytest.mark.skipif(KERNEL is None, reason="the C Adam step does not give torch's numbers here")


def bits(t) -> np.ndarray:
    return t.detach().numpy().view(np.uint32)


@pytest.mark.parametrize("n", [5, 64, 2053])
def test_steps_are_torch_optim_adams_bit_for_bit(n):
    rng = np.random.default_rng(n)
    start = rng.normal(0.0, 3.0, n).astype(np.float32)
    ours = torch.from_numpy(start.copy())
    theirs = torch.nn.Parameter(torch.from_numpy(start.copy()))
    optim = torch.optim.Adam([theirs], lr=0.1, betas=(0.9, 0.999), eps=1e-8)
    schedule = torch.optim.lr_scheduler.ExponentialLR(optim, gamma=0.9999)
    adam = adam_kernel.CAdam(torch, KERNEL, ours, 0.1, 0.9999)
    for _ in range(40):
        grad = rng.normal(0.0, 1.0, n) * 10.0 ** rng.uniform(-9, 5, n)
        grad[rng.random(n) < 0.1] = 0.0
        grad = torch.from_numpy(grad.astype(np.float32))
        theirs.grad = grad.clone()
        optim.step()
        schedule.step()
        adam.step(grad)
    state = optim.state[theirs]
    assert np.array_equal(bits(ours), bits(theirs))
    assert np.array_equal(bits(adam.exp_avg), bits(state["exp_avg"]))
    assert np.array_equal(bits(adam.exp_avg_sq), bits(state["exp_avg_sq"]))


def test_a_batched_fit_is_the_same_with_the_c_or_the_torch_step(monkeypatch):
    rng = np.random.default_rng(7)
    theta, b = rng.normal(size=30), rng.normal(size=45)
    x = (rng.random((30, 45)) < 1 / (1 + np.exp(-(theta[:, None] - b)))).astype(float)
    x[rng.random(x.shape) < 0.05] = np.nan
    rows = [np.arange(0, 25), np.arange(5, 30), np.arange(0, 30, 2)]
    with_c = fit_hierarchical_batch(x, rows, epochs=80)
    monkeypatch.setitem(adam_kernel._LOADED, "kernel", None)          # as without a compiler
    with_torch = fit_hierarchical_batch(x, rows, epochs=80)
    for name in ("a", "b", "theta", "best_epoch", "loss"):
        assert np.array_equal(getattr(with_c, name), getattr(with_torch, name), equal_nan=True), name


def test_off_switch_and_a_square_root_one_ulp_off_are_refused(monkeypatch):
    monkeypatch.setenv("IRTLIB_ADAM_KERNEL", "0")
    monkeypatch.delitem(adam_kernel._LOADED, "kernel")
    assert adam_kernel.load() is None
    # a square root one ulp above the correctly rounded one on every value: the check must notice. (torch's
    # own, MKL's vsSqrt, is within an ulp of it and how often it differs depends on the processor, so the
    # wrong root is made wrong on purpose.)
    lib, _, fma_path = KERNEL
    sqrt_fn = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_float))

    def one_ulp_off(n, src, dst):
        out = np.sqrt(np.ctypeslib.as_array(src, (n,)))
        np.ctypeslib.as_array(dst, (n,))[:] = np.nextafter(out, np.float32(np.inf))

    root = sqrt_fn(one_ulp_off)
    assert not adam_kernel.matches_torch((lib, ctypes.cast(root, ctypes.c_void_p).value, fma_path))
