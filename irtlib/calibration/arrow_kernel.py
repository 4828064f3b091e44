"""The 2PL direction's item-block inverse between two conjugate-gradient products, in C (the same numbers).

Each conjugate-gradient product of the MAP engine's joint step (paper, appendix B's 2PL, fitted by
:func:`irtlib.calibration.joint_map.fit_map`) is ``C (B^-1 (C^T v))``: two column products over the
per-cell weights, the items' 2 x 2 inverse blocks ``B^-1`` in between, two row products. Between the
products, per item, numpy makes fourteen passes over vectors of the items' length (the cross weights'
factors ``a`` and ``-a^2``, :func:`irtlib.calibration.newton.row_sum`'s sums, the casts to float32); on the
protocol's per-split fits (a few dozen models, hundreds of items) their per-call cost is most of a
product's. ``_arrow_kernel.c`` (beside this module) makes them one loop, each operation rounded as numpy
rounds it, so the step is the same to the bit. The same file holds the right-hand side's and the items'
step's chains (:func:`kernel_rhs`, :func:`kernel_back`) and each direction's item blocks, every item's
gradient and inverse 2 x 2 information (:func:`kernel_item_blocks`, about twenty vector operations in numpy).

The first :func:`load` of a process compares the kernel with numpy's chain (:func:`numpy_binv`) on
hand-made vectors (signed zeros, both signs, magnitudes from 1e-300 to 1e300, float32 overflow) and returns
it only if every output is equal bit for bit; otherwise, or without a compiler, None, and the engine keeps
numpy's chain. ``IRTLIB_ARROW_KERNEL=0`` turns the kernel off.

Layer rule: part of ``calibration``; imports the compiler driver only.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from irtlib.core.c_arrays import addresses

from .fused_kernel import verified

__all__ = ["SOURCE", "SWITCH", "load", "numpy_binv", "kernel_binv", "numpy_rhs", "kernel_rhs",
           "numpy_back", "kernel_back", "numpy_item_blocks", "kernel_item_blocks"]

SOURCE = Path(__file__).with_name("_arrow_kernel.c")
#: The environment variable that turns the kernel off (``"0"``).
SWITCH = "IRTLIB_ARROW_KERNEL"

_LOADED: dict = {}


def _bind(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    lib.arrow_binv_f32.argtypes = [ctypes.c_int64, *[ctypes.c_void_p] * 9]
    lib.arrow_rhs_f64.argtypes = [ctypes.c_int64, *[ctypes.c_void_p] * 9]
    lib.arrow_back_f64.argtypes = [ctypes.c_int64, *[ctypes.c_void_p] * 11]
    lib.item_blocks_f64.argtypes = [ctypes.c_int64, *[ctypes.c_void_p] * 4, *[ctypes.c_double] * 7, ctypes.c_int64,
                                    *[ctypes.c_void_p] * 6]
    lib.arrow_binv_f32.restype = lib.arrow_rhs_f64.restype = lib.arrow_back_f64.restype = None
    lib.item_blocks_f64.restype = None
    return lib


def numpy_binv(c_h: np.ndarray, c_w: np.ndarray, a: np.ndarray, neg_a2: np.ndarray,
               inverse: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``(y_w, y_h)`` in float32 by numpy: the engine's chain (``cross_t``, ``binv``, ``cross``'s casts).

    Parameters
    ----------
    c_h, c_w : ndarray of float32, shape (n_items,)
        Column products of the ``h`` and ``w`` weights with the product's vector.
    a, neg_a2 : ndarray, shape (n_items,)
        The items' ``a`` and ``-a^2``.
    inverse : (d_aa, d_ab, d_bb)
        The entries of each item's inverse 2 x 2 block.
    """
    from .newton import row_sum

    d_aa, d_ab, d_bb = inverse
    us = [a * c_h, neg_a2 * c_w]
    ys = [row_sum([d_aa, d_ab], us), row_sum([d_ab, d_bb], us)]
    return (neg_a2 * ys[1]).T.astype(np.float32), (a * ys[0]).T.astype(np.float32)


def numpy_rhs(g_items: list, a: np.ndarray, neg_a2: np.ndarray,
              inverse: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``(y_w, y_h)`` of the right-hand side by numpy: ``B^-1 g`` (``g_items``: the gradient in log a and b), cast."""
    from .newton import row_sum

    d_aa, d_ab, d_bb = inverse
    ys = [row_sum([d_aa, d_ab], g_items), row_sum([d_ab, d_bb], g_items)]
    return (neg_a2 * ys[1]).T.astype(np.float32), (a * ys[0]).T.astype(np.float32)


def numpy_back(g_items: list, c_h: np.ndarray, c_w: np.ndarray, a: np.ndarray, neg_a2: np.ndarray,
               inverse: tuple[np.ndarray, np.ndarray, np.ndarray]) -> list[np.ndarray]:
    """The items' step ``B^-1 (g - C^T d)`` by numpy, from the column products ``c_h``, ``c_w`` of ``d``."""
    from .newton import row_sum

    d_aa, d_ab, d_bb = inverse
    h = [g - c for g, c in zip(g_items, (a * c_h, neg_a2 * c_w), strict=True)]
    return [row_sum([d_aa, d_ab], h), row_sum([d_ab, d_bb], h)]


def kernel_rhs(lib: ctypes.CDLL, g_items: list, a: np.ndarray, neg_a2: np.ndarray,
               inverse: tuple[np.ndarray, np.ndarray, np.ndarray], *,
               fixed: tuple[int, ...] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`numpy_rhs` by the kernel (``a``, ``neg_a2`` and ``inverse`` contiguous float64).

    ``fixed``: the addresses of ``a``, ``neg_a2`` and the three ``inverse`` arrays
    (:func:`irtlib.core.c_arrays.addresses`), read once by a caller that calls again with the same arrays (else
    read here).
    """
    g_items = [np.ascontiguousarray(g, dtype=np.float64) for g in g_items]
    y_w, y_h = np.empty(a.shape, np.float32), np.empty(a.shape, np.float32)
    fixed = addresses(a, neg_a2, *inverse) if fixed is None else fixed
    lib.arrow_rhs_f64(a.size, *addresses(*g_items), *fixed, *addresses(y_w, y_h))
    return y_w, y_h


def kernel_back(lib: ctypes.CDLL, g_items: list, c_h: np.ndarray, c_w: np.ndarray, a: np.ndarray,
                neg_a2: np.ndarray, inverse: tuple[np.ndarray, np.ndarray, np.ndarray], *,
                fixed: tuple[int, ...] | None = None) -> list[np.ndarray]:
    """:func:`numpy_back` by the kernel (``c_h``, ``c_w`` contiguous float32; the rest contiguous float64).

    ``fixed``: as in :func:`kernel_rhs`.
    """
    g_items = [np.ascontiguousarray(g, dtype=np.float64) for g in g_items]
    out = [np.empty(a.shape), np.empty(a.shape)]
    fixed = addresses(a, neg_a2, *inverse) if fixed is None else fixed
    lib.arrow_back_f64(a.size, *addresses(*g_items, c_h, c_w), *fixed, *addresses(*out))
    return out


def numpy_item_blocks(sums: np.ndarray, a: np.ndarray, alpha: np.ndarray, b: np.ndarray, priors: tuple, *,
                      newton: float) -> tuple:
    """Each item's gradient and inverse 2 x 2 information block by numpy (``joint_map._item_blocks``'s formulas).

    ``sums`` (5, n_items): the column sums of ``g``, ``g z``, ``w``, ``w z``, ``w z^2``; ``priors`` the engine's
    ``((mean, sd) of theta, of log a, of b)``. Returns ``((g_al, g_b), (d_aa, d_ab, d_bb), newton_item)``.
    """
    _, (ma, sa), (mb, sb) = priors
    s_g, s_gz, s_w, s_wz, s_wz2 = sums
    g_al = s_gz - (alpha - ma) / sa**2
    g_b = -a * s_g - (b - mb) / sb**2
    j_bb = a * a * s_w + 1.0 / sb**2
    # Newton: the second derivatives of z times the residuals
    obs_aa, obs_ab = s_wz2 + 1.0 / sa**2 - newton * s_gz, -a * s_wz + newton * a * s_g
    newton_item = np.zeros(a.shape, dtype=bool)
    if newton:
        newton_item = (obs_aa > 0) & (obs_aa * j_bb - obs_ab**2 > 0)
    j_aa = np.where(newton_item, obs_aa, s_wz2 + 1.0 / sa**2)
    j_ab = np.where(newton_item, obs_ab, -a * s_wz)
    det = j_aa * j_bb - j_ab**2
    return (g_al, g_b), (j_bb / det, -j_ab / det, j_aa / det), newton_item


def kernel_item_blocks(lib: ctypes.CDLL, sums: np.ndarray, a: np.ndarray, alpha: np.ndarray, b: np.ndarray,
                       priors: tuple, *, newton: float) -> tuple:
    """:func:`numpy_item_blocks` by the kernel: one loop over the items, the same numbers."""
    _, (ma, sa), (mb, sb) = priors
    sums, a, alpha, b = (np.ascontiguousarray(x, dtype=np.float64) for x in (sums, a, alpha, b))
    out = [np.empty(a.shape) for _ in range(5)]
    newton_item = np.empty(a.shape, dtype=bool)
    lib.item_blocks_f64(a.size, a.ctypes.data, alpha.ctypes.data, b.ctypes.data, sums.ctypes.data, float(ma),
                        float(sa**2), 1.0 / sa**2, float(mb), float(sb**2), 1.0 / sb**2, float(newton),
                        int(bool(newton)), *(x.ctypes.data for x in out), newton_item.ctypes.data)
    return (out[0], out[1]), (out[2], out[3], out[4]), newton_item


def kernel_binv(lib: ctypes.CDLL, c_h: np.ndarray, c_w: np.ndarray, a: np.ndarray, neg_a2: np.ndarray,
                inverse: tuple[np.ndarray, np.ndarray, np.ndarray], *,
                out: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`numpy_binv` by the kernel (every array contiguous; ``c_h``, ``c_w`` float32, the rest float64).

    ``out``: two float32 arrays of the items' length to write ``(y_w, y_h)`` into (else new ones).
    """
    y_w, y_h = (np.empty(a.shape, np.float32), np.empty(a.shape, np.float32)) if out is None else out
    d_aa, d_ab, d_bb = inverse
    lib.arrow_binv_f32(a.size, c_h.ctypes.data, c_w.ctypes.data, a.ctypes.data, neg_a2.ctypes.data,
                       d_aa.ctypes.data, d_ab.ctypes.data, d_bb.ctypes.data, y_w.ctypes.data, y_h.ctypes.data)
    return y_w, y_h


def _check_vectors() -> list[tuple]:
    """Hand-made inputs for the load-time check: ``(c_h, c_w, a, neg_a2, inverse)``.

    Random vectors of 1, 7 and 203 items over many magnitudes, then signed zeros, float32's overflow and
    subnormals.
    """
    rng = np.random.default_rng(20261205)
    out = []
    for n in (1, 7, 203):
        c_h, c_w = ((rng.normal(size=n) * 10.0 ** rng.uniform(-30, 30, n)).astype(np.float32) for _ in range(2))
        a = np.exp(rng.normal(0.0, 2.0, n))
        inverse = tuple(rng.normal(size=n) * 10.0 ** rng.uniform(-100, 100, n) for _ in range(3))
        out.append((c_h, c_w, a, -a * a, inverse))
    special = np.array([0.0, -0.0, 1.0, -1.0, 3.4e38, -3.4e38, 1e-45, -1e-40, 1e30])
    c = special.astype(np.float32)
    a = np.array([1.0, 1.0, 2.0, 0.5, 1e20, 1e-20, 1.0, 1.0, 1e10])
    out.append((c, -c, a, -a * a, (special, -special, special[::-1].copy())))
    out.append((c, np.zeros_like(c), a, -a * a, (-special, np.zeros(c.size), -np.zeros(c.size))))
    return out


def _matches_numpy(lib: ctypes.CDLL) -> bool:
    """Whether the three kernels equal numpy's chains bit for bit on :func:`_check_vectors`."""
    for c_h, c_w, a, neg_a2, inverse in _check_vectors():
        g_items = [c_h.astype(float) * 3.0, c_w.astype(float) - 1.0]
        with np.errstate(over="ignore", invalid="ignore"):
            pairs = ((numpy_binv(c_h, c_w, a, neg_a2, inverse), kernel_binv(lib, c_h, c_w, a, neg_a2, inverse)),
                     (numpy_rhs(g_items, a, neg_a2, inverse), kernel_rhs(lib, g_items, a, neg_a2, inverse)),
                     (numpy_back(g_items, c_h, c_w, a, neg_a2, inverse),
                      kernel_back(lib, g_items, c_h, c_w, a, neg_a2, inverse)))
        for want, got in pairs:
            if not all(w.dtype == g.dtype and w.tobytes() == g.tobytes() for w, g in zip(want, got, strict=True)):
                return False
    for sums, a, alpha, b, priors, newton in _item_cases():
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            want, got = (f(*([lib] if f is kernel_item_blocks else []), sums, a, alpha, b, priors, newton=newton)
                         for f in (numpy_item_blocks, kernel_item_blocks))
        flat = [(*w[0], *w[1], w[2]) for w in (want, got)]
        if not all(u.dtype == v.dtype and u.tobytes() == v.tobytes() for u, v in zip(*flat, strict=True)):
            return False
    return True


def _item_cases() -> list[tuple]:
    """Hand-made inputs of :func:`numpy_item_blocks`.

    Sums of both signs (blocks positive definite or not), every Newton weight, the paper's priors and others
    (an infinite SD, as the item refits' theta prior).
    """
    rng = np.random.default_rng(20261206)
    cases = []
    for n, newton, priors in ((1, 1.0, ((0.0, 1.0), (0.0, 1.0), (0.0, 1.0))),
                              (9, 0.5, ((0.0, np.inf), (0.3, 1.7), (-0.2, 0.6))),
                              (203, 0.0, ((0.0, 1.0), (0.0, 1.0), (0.0, 1.0))),
                              (203, 1.0, ((0.0, 1.0), (0, 2), (1, 3)))):
        sums = rng.normal(size=(5, n)) * 10.0 ** rng.uniform(-3, 3, (5, n))
        sums[2] = np.abs(sums[2])
        sums[4] = np.abs(sums[4])
        a = np.exp(rng.normal(0.0, 1.0, n))
        cases.append((sums, a, np.log(a), rng.normal(size=n), priors, newton))
    return cases




def load() -> ctypes.CDLL | None:
    """The compiled kernel, or None (``IRTLIB_ARROW_KERNEL=0``, no compiler, or numbers unlike numpy's)."""
    import os

    if os.environ.get(SWITCH, "1") == "0":
        return None
    return verified(SOURCE, _bind, switch=SWITCH, matches=_matches_numpy, cache=_LOADED)
