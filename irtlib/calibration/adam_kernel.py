"""torch's Adam step in C, for the batched py-irt fit's optimiser.

:func:`irtlib.calibration.pyirt_batch.fit_hierarchical_batch` steps one flat float32 parameter tensor
with pyro's Adam every epoch: seven torch passes over it (``lerp_``, ``mul_``, ``addcmul_``,
``sqrt``, a division, ``add_``, ``addcdiv_``), two of them into new tensors, about a fifth of an
epoch on the benchmarks with many items. ``_adam_step.c`` (beside this module) makes the same step
in one pass over blocks of the parameters, each operation as torch computes it on the CPU (see the
comment at its top); the square root is the very function torch calls (MKL's ``vsSqrt``, found in
torch's own library), because it is not the correctly rounded one.

The step must be torch's bit for bit, or the fit is no longer the authors'. :func:`load` compares the
C step with :class:`TorchAdam` (torch's operations) on random parameters
of several lengths over several steps the first time it is asked, and returns the kernel only if
every number matched; otherwise (no compiler, no ``vsSqrt`` in torch's library, a processor or a
torch build computing otherwise) the fit keeps stepping with torch, with the same numbers, only more
slowly. ``IRTLIB_ADAM_KERNEL=0`` turns it off.

Compiled like :mod:`irtlib.calibration.fused_kernel` (the same compiler, flags and per-user
directory).
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from types import ModuleType

import numpy as np

__all__ = ["SOURCE", "load", "optimizer", "TorchAdam", "CAdam", "matches_torch", "torch_square_root"]

SOURCE = Path(__file__).with_name("_adam_step.c")

_LOADED: dict = {}       # "kernel": (library, square root, fma path) or None once load() has decided


def _bind(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    i64, i32, f32, ptr = ctypes.c_int64, ctypes.c_int32, ctypes.c_float, ctypes.c_void_p
    lib.adam_step.argtypes = [i64, ptr, ptr, ptr, ptr, f32, f32, f32, f32, f32, f32, ptr, i32]
    lib.adam_step.restype = None
    lib.has_fma_path.argtypes = []
    lib.has_fma_path.restype = i32
    return lib


def torch_square_root() -> int | None:
    """The address of the square root torch's CPU kernels call on float32 tensors (MKL's ``vsSqrt``).

    Looked up in torch's own ``libtorch_cpu`` (already loaded with torch); None where it is not there
    (a torch built without MKL, another platform).
    """
    import torch

    for path in sorted((Path(torch.__file__).parent / "lib").glob("libtorch_cpu.*")):
        try:
            return ctypes.cast(ctypes.CDLL(str(path)).vsSqrt, ctypes.c_void_p).value
        except (OSError, AttributeError):
            continue
    return None


class TorchAdam:
    """``torch.optim.Adam`` with ``ExponentialLR``'s decay, without ``torch.optim``.

    pyro's defaults (betas 0.9 and 0.999, eps 1e-8), as the same operations in the same order as
    torch's single-tensor step (the same numbers, bit for bit); ``torch.optim``'s first use in a
    process imports ``torch._dynamo`` (about 2 CPU seconds, in every worker process too).
    """

    BETA1, BETA2, EPS = 0.9, 0.999, 1e-8

    def __init__(self, torch, param, lr: float, decay: float):
        self.param, self.lr, self.decay, self.steps = param, lr, decay, 0
        self.exp_avg, self.exp_avg_sq = torch.zeros_like(param), torch.zeros_like(param)

    def step(self, grad: object) -> None:
        """One Adam step of ``param`` along ``grad``, then the learning rate times ``decay``."""
        self.steps += 1
        beta1, beta2 = self.BETA1, self.BETA2
        self.exp_avg.lerp_(grad, 1 - beta1)
        self.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        step = float(self.steps)
        step_size = self.lr / (1 - beta1**step)
        denom = (self.exp_avg_sq.sqrt() / (1 - beta2**step) ** 0.5).add_(self.EPS)
        self.param.addcdiv_(self.exp_avg, denom, value=-step_size)
        self.lr = self.lr * self.decay


class CAdam:
    """:class:`TorchAdam` with its step in C (one call per epoch).

    Parameters
    ----------
    torch : module
    kernel : tuple
        :func:`load`'s ``(library, square root, fma path)``.
    param : Tensor
        The flat float32 parameters (contiguous), stepped in place.
    lr, decay : float
        The learning rate and its factor after every step (``ExponentialLR``).
    """

    BETA1, BETA2, EPS = 0.9, 0.999, 1e-8

    def __init__(self, torch, kernel, param, lr: float, decay: float):
        if param.dtype != torch.float32 or not param.is_contiguous():
            raise ValueError("the C Adam step takes one contiguous float32 tensor")
        self.lib, self.root, self.fma_path = kernel
        self.param, self.lr, self.decay, self.steps = param, lr, decay, 0
        self.exp_avg, self.exp_avg_sq = torch.zeros_like(param), torch.zeros_like(param)

    def step(self, grad: object) -> None:
        """One Adam step of ``param`` along ``grad`` (contiguous float32), then the learning rate times ``decay``."""
        self.steps += 1
        step = float(self.steps)
        beta1, beta2 = self.BETA1, self.BETA2
        # torch's scalars, as it rounds them to float32: the same Python expressions as TorchAdam's
        self.lib.adam_step(self.param.numel(), self.param.data_ptr(), grad.data_ptr(), self.exp_avg.data_ptr(),
                           self.exp_avg_sq.data_ptr(), 1 - beta1, beta2, 1 - beta2, (1 - beta2**step) ** 0.5,
                           self.EPS, -(self.lr / (1 - beta1**step)), self.root, self.fma_path)
        self.lr = self.lr * self.decay


def matches_torch(kernel: tuple, *, lengths: tuple[int, ...] = (1, 7, 8, 1023, 1025, 3001), steps: int = 12) -> bool:
    """Whether the C step gives torch's numbers, bit for bit, on random parameters and gradients.

    For each length, the same parameters are stepped ``steps`` times along the same gradients (spread
    over many orders of magnitude, some zero) by :class:`CAdam` and by
    :class:`TorchAdam`; parameters and both moments are compared.
    """
    import torch

    rng = np.random.default_rng(0)
    for n in lengths:
        start = rng.normal(0.0, 2.0, n).astype(np.float32)
        ours, theirs = torch.from_numpy(start.copy()), torch.from_numpy(start.copy())
        c_adam, t_adam = CAdam(torch, kernel, ours, 0.1, 0.9999), TorchAdam(torch, theirs, 0.1, 0.9999)
        for _ in range(steps):
            grad = rng.normal(0.0, 1.0, n) * 10.0 ** rng.uniform(-8, 4, n)
            grad[rng.random(n) < 0.05] = 0.0
            grad = torch.from_numpy(grad.astype(np.float32))
            c_adam.step(grad)
            t_adam.step(grad)
        for a, b in ((ours, theirs), (c_adam.exp_avg, t_adam.exp_avg), (c_adam.exp_avg_sq, t_adam.exp_avg_sq)):
            if not np.array_equal(a.numpy().view(np.uint32), b.numpy().view(np.uint32)):
                return False
    return True


def load() -> tuple | None:
    """``(library, square root, fma path)`` when the C step gives torch's numbers here, else None.

    Decided once per process (compiling at first use, finding torch's square root, then
    :func:`matches_torch`).
    """
    if "kernel" not in _LOADED:
        from irtlib.calibration.fused_kernel import compiled, cpu_flags

        lib = compiled(SOURCE, _bind, switch="IRTLIB_ADAM_KERNEL")
        root = None if lib is None else torch_square_root()
        kernel = None
        if root is not None:
            kernel = (lib, root, int(bool(lib.has_fma_path()) and {"avx2", "fma"} <= cpu_flags()))
            if not matches_torch(kernel):
                kernel = None
        _LOADED["kernel"] = kernel
    return _LOADED["kernel"]


def optimizer(torch: ModuleType, flat: object, lr: float, decay: float) -> CAdam | TorchAdam:
    """Adam on ``flat``: its step in C where it gives torch's numbers (:func:`load`), else :class:`TorchAdam`."""
    kernel = load()
    if kernel is None:
        return TorchAdam(torch, flat, lr, decay)
    return CAdam(torch, kernel, flat, lr, decay)
