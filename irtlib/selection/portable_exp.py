"""A portable, deterministic ``exp``: the same bits on every machine with IEEE-754 doubles, in numpy and in C.

Fluid's MLE estimate (:class:`irtlib.selection.estimators.MleEstimator`, Section 4 of the paper:
maximum-likelihood ability after every administered item) evaluates two exponentials per
administered item at every Newton step: the logistic of ``z = a (theta - b)`` and of ``-z``. The C
library's ``exp`` (what scipy's ``expit`` calls) is scalar, and its last bits depend on the library
and its version; glibc's vector ``exp`` is faster but depends on the machine. :func:`portable_exp`
uses only IEEE-754 additions, multiplications and integer bit operations in a fixed order, without
a branch on its argument (``_portable_exp.h``, whose comment gives the algorithm: Cody and Waite's
reduction by ``ln 2``, a degree-13 polynomial, scaling by exponent bits), so the C kernel computes it
four lanes at a time and numpy computes it here, element by element, with exactly the same bits.
It is within one unit in the last place of the exact exponential (``tests/selection/test_portable_exp.py``).

Layer rule: part of ``selection``; imports ``calibration`` (the compiler driver, for :func:`load_c`) and below.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from irtlib._typing import ArrayLike

__all__ = ["portable_exp", "portable_exp_pair", "portable_expit_pair", "score_and_information", "load_c", "c_exp",
           "C_SOURCE"]

#: The C function over arrays (for tests and benchmarks); the kernels include ``_portable_exp.h`` itself.
C_SOURCE = Path(__file__).with_name("_portable_exp.c")

_LOG2E = float.fromhex("0x1.71547652b82fep+0")
_SHIFT = float.fromhex("0x1.8p+52")
_LN2_HI = float.fromhex("0x1.62e42feep-1")
_LN2_LO = float.fromhex("0x1.a39ef35793c76p-33")
_CLAMP = 746.0
_ODD = [float.fromhex(h) for h in ("0x1.6124613a86d09p-33", "0x1.ae64567f544e4p-26", "0x1.71de3a556c734p-19",
                                   "0x1.a01a01a01a01ap-13", "0x1.1111111111111p-7", "0x1.5555555555555p-3")]
_EVEN = [float.fromhex(h) for h in ("0x1.1eed8eff8d898p-29", "0x1.27e4fb7789f5cp-22", "0x1.a01a01a01a01ap-16",
                                    "0x1.6c16c16c16c17p-10", "0x1.5555555555555p-5", "0x1.0p-1")]


def _horner(coefficients, r2):
    p = np.multiply(r2, coefficients[0])
    for c in coefficients[1:-1]:
        p += c
        p *= r2
    p += coefficients[-1]
    return p


def _reduce(x):
    x = np.clip(x, -_CLAMP, _CLAMP)              # NaN stays NaN
    k = x * _LOG2E
    k += _SHIFT
    k -= _SHIFT
    hi = k * _LN2_HI
    np.subtract(x, hi, out=hi)
    lo = k * _LN2_LO
    r = hi - lo
    return k, hi, lo, r, r * r


def _two_to(t):
    """``2^k`` from ``t = k + 1.5 2^52``'s bits (``t`` overwritten)."""
    u = np.ascontiguousarray(t).view(np.uint64)
    u += np.uint64(1023)
    u <<= np.uint64(52)
    return u.view(np.float64)


def _finish(k, hi, lo, r, r2, e, o):
    with np.errstate(over="ignore", under="ignore"):
        return _scaled(k, hi, lo, r, r2, e, o)


def _scaled(k, hi, lo, r, r2, e, o):
    y = r * o
    y += e                       # P(r)
    y *= r2
    np.subtract(lo, y, out=y)    # c
    np.subtract(hi, y, out=y)
    y += 1.0
    t1 = k * 0.5
    t1 += _SHIFT
    k2 = t1 - _SHIFT
    np.subtract(k, k2, out=k2)
    k2 += _SHIFT                 # t2
    y *= _two_to(t1)
    y *= _two_to(k2)
    return y


def portable_exp(x: ArrayLike) -> np.ndarray:
    """``exp(x)`` of every element, as ``_portable_exp.h``'s ``portable_exp`` computes it, bit for bit.

    Within one unit in the last place of the exact value; ``exp(-inf) = 0``, ``exp(+inf) = +inf``,
    NaN stays NaN, overflow gives ``+inf`` and underflow 0 (or a subnormal) where the C library's
    does, without a warning.

    Parameters
    ----------
    x : array_like of float

    Returns
    -------
    ndarray of float64, the shape of ``x``
    """
    x = np.asarray(x, dtype=np.float64)
    k, hi, lo, r, r2 = _reduce(x.reshape(-1))
    return _finish(k, hi, lo, r, r2, _horner(_EVEN, r2), _horner(_ODD, r2)).reshape(x.shape)


def portable_exp_pair(x: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """``portable_exp(x)`` and ``portable_exp(-x)`` from one reduction (``portable_exp_pair`` in C), bit for bit."""
    x = np.asarray(x, dtype=np.float64)
    k, hi, lo, r, r2 = _reduce(x.reshape(-1))
    e, o = _horner(_EVEN, r2), _horner(_ODD, r2)
    return (_finish(k, hi, lo, r, r2, e, o).reshape(x.shape),
            _finish(-k, -hi, -lo, -r, r2, e, o).reshape(x.shape))


def portable_expit_pair(z: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """The logistic of ``z`` and of ``-z``, ``1 / (1 + exp(-z))`` and ``1 / (1 + exp(z))``, with :func:`portable_exp`.

    scipy's ``expit`` form (so 0 and 1 where the exponential overflows), the MLE kernel's ``s`` and ``q``.
    """
    ep, en = portable_exp_pair(z)
    en += 1.0
    ep += 1.0
    return np.divide(1.0, en, out=en), np.divide(1.0, ep, out=ep)


def score_and_information(responses: ArrayLike, theta: ArrayLike, a: ArrayLike,
                          b: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """:func:`irtlib.core.kernels.score_and_information` (2PL) with :func:`portable_expit_pair`: the MLE kernel's terms.

    ``a (x q - (1 - x) s)`` and ``((a a) s) q`` with ``z = a (theta - b)``, ``s, q`` the logistic of
    ``z`` and ``-z``, operation by operation as ``_mle_kernel.c``'s ``mle_terms``, bit for bit.
    """
    x = np.asarray(responses, dtype=float)
    a = np.asarray(a, dtype=float)
    z = a * (np.asarray(theta, dtype=float) - np.asarray(b, dtype=float))
    s, q = portable_expit_pair(z)
    return a * (x * q - (1.0 - x) * s), a * a * s * q


def _bind(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.portable_exp_array.argtypes = [i64, ptr, ptr]
    lib.portable_exp_array.restype = None
    lib.portable_exp_pair_array.argtypes = [i64, ptr, ptr, ptr]
    lib.portable_exp_pair_array.restype = None
    lib.portable_exp_pair_normal_array.argtypes = [i64, ptr, ptr, ptr]
    lib.portable_exp_pair_normal_array.restype = None
    return lib


def load_c(*, path: Path | None = None) -> ctypes.CDLL:
    """``_portable_exp.c`` built by :func:`~irtlib.calibration.fused_kernel.compile_kernel` (or the one at ``path``).

    Raises OSError where it cannot be built.
    """
    from irtlib.calibration.fused_kernel import compile_kernel

    return _bind(path if path is not None else compile_kernel(source=C_SOURCE))


def c_exp(lib: ctypes.CDLL, x: ArrayLike, *, pair: bool = False,
          normal: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """``portable_exp`` of every element by the C library ``lib`` (:func:`load_c`); with ``pair``, also of ``-x``.

    ``normal`` (with ``pair``): by ``portable_exp_pair_normal``, the MLE kernel's pair where ``|x| <= 700``
    (elsewhere its results are not exp's).
    """
    x = np.ascontiguousarray(x, dtype=np.float64)
    out = np.empty_like(x)
    if not pair:
        lib.portable_exp_array(x.size, x.ctypes.data, out.ctypes.data)
        return out
    neg = np.empty_like(x)
    fn = lib.portable_exp_pair_normal_array if normal else lib.portable_exp_pair_array
    fn(x.size, x.ctypes.data, out.ctypes.data, neg.ctypes.data)
    return out, neg
