"""The 3PL's cell tables of :mod:`irtlib.calibration.models` in C: numpy's numbers in one pass per table.

:func:`irtlib.calibration.models.compare_models` fits the 3PL by joint Fisher scoring (the book's model
comparison, beyond the paper's 2PL of its section "Model: 2PL"), and on SafetyBench (29 x 11,395 cells)
the scoring's cell arithmetic is most of the fit: at every point tried, ``z = a (theta - b)``, ``s =
expit(z)`` and the clipped probability ``P``; at every step about thirty numpy passes over the models x
items table (``expit(-z)``, ``expit(z - log c)``, the score and information in ``z`` and in the
asymptote's logit, their products with ``z`` and ``a``). ``_threepl_kernel.c`` (beside this module)
writes each table in one pass with numpy's operations on the same operands in the same order (compiled
without contraction; ``expit`` as scipy computes it, ``1 / (1 + exp(-t))`` with the C library's ``exp``),
so the tables are numpy's bit for bit; the sums, the logarithms of the log-likelihood and the products
with BLAS stay with numpy.

:func:`point_tables` and :func:`step_tables` take the kernel where it loads and every table is C-ordered
(numpy's reductions over a table depend on its layout, and the kernel writes C order), else compute the
same tables with numpy (:func:`numpy_point_tables`, :func:`numpy_step_tables`: the reference). Compiled
like :mod:`irtlib.calibration.fused_kernel` (the same compiler, flags and per-user directory); the first
:func:`load` of a process compares the kernel's tables with the reference's on cells over the whole range
(overflowing ``exp``, asymptotes at 0 and 1, masked cells, NaN) and returns the kernel only if every value
has the same bits. ``IRTLIB_THREEPL_KERNEL=0`` (read at every call) turns it off.
"""

from __future__ import annotations

import ctypes
import itertools
import os
from pathlib import Path

import numpy as np
from scipy.special import expit

from irtlib.core.bits import same_bits as _same_bits

__all__ = ["SOURCE", "SWITCH", "STEP_TABLES", "load", "c_tables", "point_tables", "step_tables",
           "numpy_point_tables", "numpy_step_tables"]

SOURCE = Path(__file__).with_name("_threepl_kernel.c")
#: The environment variable that turns the kernel off (``"0"``), read at every call.
SWITCH = "IRTLIB_THREEPL_KERNEL"
#: The tables :func:`step_tables` returns, in order.
STEP_TABLES = ("g_z", "w_zz", "g_g", "w_zg", "w_gg", "wa", "wz", "g_z_z", "wz_z", "w_zg_z", "cross_a", "cross_b",
               "cross_g")

#: The probability bounds the load-time check clips to (``irtlib.calibration.models.P_FLOOR`` is 1e-12).
CHECK_BOUNDS = ((1e-12, 1.0 - 1e-12), (0.0, 1.0), (0.1, 0.9))

_LOADED: dict = {}       # "lib": the library or None once load() has decided


def _bind(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    i64, ptr, dbl = ctypes.c_int64, ctypes.c_void_p, ctypes.c_double
    lib.threepl_point.argtypes = [i64, i64, ptr, ptr, ptr, ptr, ptr, dbl, dbl, ptr, ptr, ptr]
    lib.threepl_point.restype = None
    lib.threepl_step.argtypes = [i64, i64, *[ptr] * 10, ptr]
    lib.threepl_step.restype = None
    return lib


def numpy_point_tables(theta: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray, lo: float,
                       hi: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``z = a (theta - b)``, ``s = expit(z)`` and ``P = clip(c + (1 - c) s, lo, hi)`` with numpy (the reference)."""
    z = a * (theta[:, None] - b)
    s = expit(z)
    return z, s, np.clip(c + (1.0 - c) * s, lo, hi)


def numpy_step_tables(x: np.ndarray, mask: np.ndarray | None, z: np.ndarray, s: np.ndarray, p: np.ndarray,
                      a: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, ...]:
    """The tables of :data:`STEP_TABLES` with numpy: :mod:`irtlib.calibration.models`' expressions (the reference).

    ``g_z``, ``w_zz``: the score and information in ``z``; ``g_g``, ``w_zg``, ``w_gg``: in ``gamma = logit c``
    (each times ``mask`` when given); then ``wa = w_zz a``, ``wz = w_zz z``, ``g_z z``, ``wz z``, ``w_zg z``,
    and the cross blocks ``wz a``, ``(-wa) a``, ``w_zg a``.
    """
    q = expit(-z)
    with np.errstate(divide="ignore"):
        ratio = expit(z - np.log(c))                # s / P
    g_z, w_zz = (x - 1.0 + (1.0 - c) * q) * ratio, (1.0 - c) * s * q * ratio
    g_g = (x - p) * c / p
    dc = c * (1.0 - c)
    w_zg = dc * s * q / p
    w_gg = c * dc * q / p
    if mask is not None:
        g_g, w_zg, w_gg = g_g * mask, w_zg * mask, w_gg * mask
        g_z, w_zz = g_z * mask, w_zz * mask
    wa = w_zz * a
    wz = w_zz * z
    return g_z, w_zz, g_g, w_zg, w_gg, wa, wz, g_z * z, wz * z, w_zg * z, wz * a, -wa * a, w_zg * a


def _vectors(*arrays) -> list[np.ndarray]:
    return [np.ascontiguousarray(v, dtype=np.float64) for v in arrays]


def _kernel_point(lib, theta, a, b, c, lo, hi):
    theta, a, b, c = _vectors(theta, a, b, c)
    omc = 1.0 - c
    shape = (theta.size, a.size)
    z, s, p = (np.empty(shape) for _ in range(3))
    lib.threepl_point(shape[0], shape[1], theta.ctypes.data, a.ctypes.data, b.ctypes.data, c.ctypes.data,
                      omc.ctypes.data, float(lo), float(hi), z.ctypes.data, s.ctypes.data, p.ctypes.data)
    return z, s, p


def _kernel_step(lib, x, mask, z, s, p, a, c):
    a, c = _vectors(a, c)
    omc = 1.0 - c
    dc = c * omc
    with np.errstate(divide="ignore"):
        logc = np.log(c)
    out = [np.empty(z.shape) for _ in STEP_TABLES]
    pointers = (ctypes.c_void_p * len(out))(*[o.ctypes.data for o in out])
    lib.threepl_step(z.shape[0], z.shape[1], x.ctypes.data, None if mask is None else mask.ctypes.data,
                     z.ctypes.data, s.ctypes.data, p.ctypes.data, a.ctypes.data, c.ctypes.data, omc.ctypes.data,
                     dc.ctypes.data, logc.ctypes.data, pointers)
    return tuple(out)


def c_tables(*tables: np.ndarray | None) -> bool:
    """Whether every table given (None aside) is a 2-D float64 C-ordered array: those the kernel takes."""
    return all(t is None or (t.dtype == np.float64 and t.ndim == 2 and t.flags.c_contiguous) for t in tables)


def point_tables(theta: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray, lo: float,
                 hi: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``z``, ``s`` and ``P`` of :func:`numpy_point_tables`, bit for bit (from the kernel where it loads)."""
    lib = load()
    if lib is None:
        return numpy_point_tables(theta, a, b, c, lo, hi)
    return _kernel_point(lib, theta, a, b, c, lo, hi)


def step_tables(x: np.ndarray, mask: np.ndarray | None, z: np.ndarray, s: np.ndarray, p: np.ndarray,
                a: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, ...]:
    """The tables of :func:`numpy_step_tables`, bit for bit (from the kernel where it loads and all are C-ordered).

    Parameters
    ----------
    x : ndarray, shape (n_models, n_items)
        Responses, 0 where missing.
    mask : ndarray or None
        1.0 on observed cells, 0.0 elsewhere; None when every cell is observed.
    z, s, p : ndarray
        The point's tables (:func:`point_tables`).
    a, c : ndarray, shape (n_items,)
        Slopes and asymptotes.

    Returns
    -------
    tuple of ndarray
        :data:`STEP_TABLES`, each C-ordered when computed by the kernel (numpy's would be too).
    """
    lib = load()
    if lib is None or not c_tables(x, mask, z, s, p):
        return numpy_step_tables(x, mask, z, s, p, a, c)
    return _kernel_step(lib, x, mask, z, s, p, a, c)



def check_cases() -> list[tuple]:
    """Points and responses where the kernel's tables could part from numpy's, if anywhere.

    Each case is ``(theta, a, b, c, x, mask)``: abilities and items spread so that ``a (theta - b)`` covers
    the whole range (``exp`` overflowing both ways), asymptotes from 0 to 1 (``log c`` infinite), a NaN
    ability, and responses with and without a mask.
    """
    rng = np.random.default_rng(20261205)
    cases = []
    for n_models, n_items in ((7, 5), (29, 113), (3, 1)):
        theta = rng.normal(0.0, 2.0, n_models)
        a = np.exp(rng.normal(0.0, 1.5, n_items))
        b = rng.normal(0.0, 3.0, n_items)
        c = rng.uniform(0.0, 1.0, n_items)
        x = (rng.random((n_models, n_items)) < 0.5).astype(float)
        mask = (rng.random((n_models, n_items)) < 0.8).astype(float)
        cases += [(theta, a, b, c, x, None), (theta, a, b, c, x * mask, mask)]
    theta = np.array([-800.0, -40.0, -1e-300, -0.0, 0.0, 1e-300, 0.5, 40.0, 800.0, np.nan])
    a = np.array([1e-3, 0.2, 1.0, 7.0, 300.0, 1.0])
    b = np.array([0.0, -2.0, 2.0, 0.5, -0.0, 1e-8])
    c = np.array([0.0, 1e-12, 0.2, 0.5, 1.0 - 1e-12, 1.0])
    x = np.tile([0.0, 1.0, 1.0, 0.0, 1.0, 0.0], (theta.size, 1))
    cases += [(theta, a, b, c, x, None), (theta, a, b, c, x, np.tile([1.0, 0.0, 1.0, 1.0, 0.0, 1.0], (theta.size, 1)))]
    return cases


def _matches_numpy(lib: ctypes.CDLL) -> bool:
    """Whether the kernel's point and step tables have the reference's bits on :func:`check_cases`.

    Clipped to :data:`CHECK_BOUNDS` in turn (the models' ``P_FLOOR`` of 1e-12 among them).
    """
    with np.errstate(all="ignore"):
        for (theta, a, b, c, x, mask), (lo, hi) in itertools.product(check_cases(), CHECK_BOUNDS):
            want = numpy_point_tables(theta, a, b, c, lo, hi)
            got = _kernel_point(lib, theta, a, b, c, lo, hi)
            if not all(_same_bits(w, g) for w, g in zip(want, got, strict=True)):
                return False
            z, s, p = want
            if not all(_same_bits(w, g) for w, g in zip(numpy_step_tables(x, mask, z, s, p, a, c),
                                                       _kernel_step(lib, x, mask, z, s, p, a, c), strict=True)):
                return False
    return True


def load() -> ctypes.CDLL | None:
    """The compiled kernel, or None (no compiler, ``IRTLIB_THREEPL_KERNEL=0``, or tables unlike numpy's).

    The build and the check are made once per process; the switch is read at every call.
    """
    if os.environ.get(SWITCH, "1") == "0":
        return None
    from .fused_kernel import verified

    return verified(SOURCE, _bind, switch=SWITCH, matches=_matches_numpy, cache=_LOADED)
