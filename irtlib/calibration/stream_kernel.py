"""torch's CPU random streams in C, for the batched py-irt fit's per-split draws.

:func:`irtlib.calibration.pyirt_batch.fit_hierarchical_batch` gives every split its own torch
generator, seeded like a separate py-irt fit, and draws from each, every epoch, in py-irt's order:
nine small torch calls per split and epoch, made from Python (about 4.5 microseconds each, a fifth
of the fit's time on the authors' benchmarks). ``_torch_streams.c`` (beside this module) writes
those draws as torch computes them on the CPU (the Mersenne Twister, its uniform floats and doubles,
the scalar Box-Muller Normal with its cached second value, Marsaglia and Tsang's Gamma, and the
vectorised Box-Muller of 16 floats at a time) and makes one epoch's draws of every split in one call.

The draws must be torch's bit for bit, or the fit is no longer the authors'. torch picks its
vectorised Normal by processor (single-precision polynomials on AVX2 machines, the C library's
``logf``, ``sinf`` and ``cosf`` otherwise), so :func:`load` compares each of the C kernel's modes
with torch itself (scalar Normals, noise of several lengths with and without a tail, Gammas on both
sides of 1) the first time it is asked, and returns the library only with a mode that matched
everything; otherwise the fit keeps drawing with torch (no warning: the numbers are the same, only
slower). ``IRTLIB_STREAM_KERNEL=0`` turns it off.

Compiled like :mod:`irtlib.calibration.fused_kernel` (the same compiler, flags and per-user
directory).
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

__all__ = ["SOURCE", "load", "CStreams", "matches_torch"]

SOURCE = Path(__file__).with_name("_torch_streams.c")
#: The C kernel's Box-Muller modes: 0 the AVX2 polynomials, 1 the C library's functions.
MODES = (0, 1)

_LOADED: dict = {}       # "lib": (library, mode) or None once load() has decided


def _bind(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    i64, i32, ptr = ctypes.c_int64, ctypes.c_int32, ctypes.c_void_p
    lib.stream_size.restype = i64
    lib.stream_size.argtypes = []
    lib.stream_seed.argtypes = [ptr, ctypes.c_uint64]
    lib.draw_epoch.argtypes = [i64, ptr, ptr, ptr, ptr, ptr, i64, ptr, i64, i64, i32, i32]
    lib.draw_scalar_normals.argtypes = [ptr, ptr, i64]
    lib.draw_normal_fill.argtypes = [ptr, ptr, i64, i32]
    lib.draw_gammas.argtypes = [ptr, ptr, ptr, i64]
    lib.has_avx2_mode.argtypes = []
    lib.has_avx2_mode.restype = i32
    for name in ("stream_seed", "draw_epoch", "draw_scalar_normals", "draw_normal_fill", "draw_gammas"):
        getattr(lib, name).restype = None
    return lib


def _streams(lib: ctypes.CDLL, n: int, seed) -> np.ndarray:
    """``n`` generator states seeded with ``seed`` (one int, or one per state): a byte array (n, the struct size)."""
    state = np.zeros((n, int(lib.stream_size())), dtype=np.uint8)
    for row, one in zip(state, np.broadcast_to(np.asarray(seed, dtype=np.int64), (n,)), strict=True):
        lib.stream_seed(row.ctypes.data, int(one))
    return state


def matches_torch(lib: ctypes.CDLL, mode: int, *, seeds: tuple[int, ...] = (0, 1, 12345)) -> bool:
    """Whether the C streams in ``mode`` draw what torch draws, bit for bit, for a set of cases.

    Per seed, one generator of each kind draws alike: 3 scalar Normals, noise of lengths 7, 16, 23,
    67 and 79 (under 16, a multiple of 16, with a tail), Gammas with concentrations 0.3, 1, 2.5 and
    40, then the same again (the scalar Normal's cached value carried across calls).
    """
    import torch

    alphas = np.array([0.3, 1.0, 2.5, 40.0], dtype=np.float32)
    for seed in seeds:
        g = torch.Generator().manual_seed(int(seed))
        state = _streams(lib, 1, int(seed))
        ptr = state.ctypes.data
        for _ in range(2):
            ours = np.empty(3, dtype=np.float32)
            lib.draw_scalar_normals(ptr, ours.ctypes.data, 3)
            theirs = np.array([torch.zeros(1).normal_(generator=g).item() for _ in range(3)], dtype=np.float32)
            if not np.array_equal(ours.view(np.uint32), theirs.view(np.uint32)):
                return False
            for n in (7, 16, 23, 67, 79):
                ours = np.empty(n, dtype=np.float32)
                lib.draw_normal_fill(ptr, ours.ctypes.data, n, mode)
                theirs = torch.empty(n).normal_(generator=g).numpy()
                if not np.array_equal(ours.view(np.uint32), theirs.view(np.uint32)):
                    return False
            ours = np.empty(alphas.size, dtype=np.float32)
            lib.draw_gammas(ptr, alphas.ctypes.data, ours.ctypes.data, alphas.size)
            theirs = np.array([torch._standard_gamma(torch.tensor([a]), generator=g).item() for a in alphas],
                              dtype=np.float32)
            if not np.array_equal(ours.view(np.uint32), theirs.view(np.uint32)):
                return False
    return True


def load() -> tuple[ctypes.CDLL, int] | None:
    """``(library, mode)`` when the C streams draw torch's numbers on this machine, else None.

    Decided once per process (compiling at first use, then :func:`matches_torch` for each mode).
    """
    if "lib" not in _LOADED:
        from irtlib.calibration.fused_kernel import compiled

        lib = compiled(SOURCE, _bind, switch="IRTLIB_STREAM_KERNEL")
        _LOADED["lib"] = (None if lib is None else
                          next(((lib, mode) for mode in _runnable_modes(lib) if matches_torch(lib, mode)), None))
    return _LOADED["lib"]


def _runnable_modes(lib: ctypes.CDLL) -> list[int]:
    """The modes this processor can run: mode 0 needs AVX2 and FMA (and to have been compiled)."""
    from irtlib.calibration.fused_kernel import cpu_flags

    avx2 = bool(lib.has_avx2_mode()) and {"avx2", "fma"} <= cpu_flags()
    return [mode for mode in MODES if mode != 0 or avx2]


class CStreams:
    """One torch-equal generator per split, drawing one epoch of every split in one C call.

    The interface of :class:`irtlib.calibration.pyirt_batch._Streams`: :meth:`draw` fills
    ``eps_mu`` (n_splits, 3: b, theta, a), ``eps`` (n_splits, n_max + 2 n_items: theta, b, log a)
    and ``gamma`` (n_splits, 3), float32 torch tensors sharing memory with numpy arrays; without
    ``hyper`` (the fixed priors' model) only ``eps``.
    """

    def __init__(self, torch, lib, mode: int, sizes: np.ndarray, n_items: int, seed, *, hyper: bool = True):
        self.lib, self.mode, self.n_items, self.hyper = lib, int(mode), int(n_items), bool(hyper)
        self.rows = np.ascontiguousarray(sizes, dtype=np.int64)
        self.n_max = int(self.rows.max())
        n_splits = self.rows.size
        self._state = _streams(lib, n_splits, seed)
        self._alpha = np.zeros((n_splits, 3), dtype=np.float32)
        self._eps_mu = np.zeros((n_splits, 3), dtype=np.float32)
        self._gamma = np.zeros((n_splits, 3), dtype=np.float32)
        self._eps = np.zeros((n_splits, self.n_max + 2 * self.n_items), dtype=np.float32)
        self.eps_mu, self.gamma, self.eps = (torch.from_numpy(a) for a in (self._eps_mu, self._gamma, self._eps))
        # draw_epoch's arguments but the mode flags, the addresses read once (numpy's ``.ctypes`` costs
        # microseconds a read, every epoch)
        self._args = (self.rows.size, self._state.ctypes.data, self._alpha.ctypes.data, self._eps_mu.ctypes.data,
                      self._gamma.ctypes.data, self._eps.ctypes.data, self._eps.shape[1], self.rows.ctypes.data,
                      self.n_max, self.n_items)

    def draw(self, alpha: object) -> None:
        """Fill the noise buffers; ``alpha`` (n_splits, 3) are the Gamma concentrations (no grad).

        Without ``hyper`` (the fixed priors' guide draws theta, b and log a alone) ``alpha`` is unused.
        """
        if self.hyper:
            np.copyto(self._alpha, alpha.numpy())
        self.lib.draw_epoch(*self._args, self.mode, int(self.hyper))
