"""The logistic tables of the M2PL's and the GRM's marginal likelihoods in C: scipy's numbers in fewer calls.

Each evaluation of :func:`irtlib.extended.mirt.fit_mirt`'s objective takes ``log_expit(z)``,
``log_expit(-z)`` and ``expit(z)`` of a nodes x items table (729 x 395 for HarmBench's three
dimensions), and :func:`irtlib.extended.grm.fit_grm`'s those of the cumulative logits and ``expit(-z)``
(the GRM's category log-probabilities). Both models go beyond the paper's 2PL (its section "Model: 2PL"),
in the book's chapter "Beyond the paper". scipy evaluates each
with its own calls of the C library's ``exp`` and ``log1p``, about 22 ns a cell for a ``log_expit``:
most of an M2PL evaluation. ``_logistic_kernel.c`` (beside this module) computes them in one pass,
from one ``log1p`` and one or two ``exp`` a cell, each value by scipy's operation on the same operands
(see the comment at its top), so the tables are scipy's bit for bit and every fit, score and printed
number stays the same. A table of two or more dimensions is read as rows, and a cell whose ``z`` has the
bits of the cell above it copies that cell's values (the same operations on the same operand): the
confirmatory M2PL's nodes x items table repeats so over long runs of nodes (an item's logit depends on its
own dimension's node coordinate only), which halves its work on HarmBench.

Compiled like :mod:`irtlib.calibration.fused_kernel` (the same compiler, flags and per-user
directory). The first :func:`load` of a process compares the kernel's tables with scipy's on values
over the whole double range (zeros of both signs, infinities, NaN, subnormals, the overflow edges of
``exp``) and returns the kernel only if every value has scipy's bits; otherwise, or without a
compiler, or with ``IRTLIB_LOGISTIC_KERNEL=0`` (read at every call), :func:`tables` calls scipy (no
warning: the same numbers, slower).

Layer rule: part of ``extended``; imports the compiler driver of ``calibration`` only.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np
from scipy.special import expit, log_expit

from irtlib._typing import ArrayLike
from irtlib.core.bits import same_bits as _same_bits

__all__ = ["SOURCE", "SWITCH", "load", "tables"]

SOURCE = Path(__file__).with_name("_logistic_kernel.c")
#: The environment variable that turns the kernel off (``"0"``), read at every call.
SWITCH = "IRTLIB_LOGISTIC_KERNEL"

_LOADED: dict = {}       # "lib": the library or None once load() has decided


def _bind(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    ptr = ctypes.c_void_p
    lib.logistic_tables.argtypes = [ctypes.c_int64, ptr, ptr, ptr, ptr, ptr, ctypes.c_int64]
    lib.logistic_tables.restype = None
    return lib


def _scipy_tables(z: np.ndarray, sigmoid: bool, sigmoid_neg: bool) -> tuple:
    """The tables as scipy gives them (the reference, and the path without the kernel)."""
    out = [log_expit(z), log_expit(-z)]
    if sigmoid:
        out.append(expit(z))
    if sigmoid_neg:
        out.append(expit(-z))
    return tuple(out)


def _kernel_tables(lib: ctypes.CDLL, z: np.ndarray, sigmoid: bool, sigmoid_neg: bool, *, reuse: bool = True) -> tuple:
    """The kernel's tables; ``reuse``: a cell whose ``z`` has the bits of the one above it copies its values."""
    z = np.ascontiguousarray(z, dtype=np.float64)
    out = [np.empty_like(z), np.empty_like(z)]
    out += [np.empty_like(z) for wanted in (sigmoid, sigmoid_neg) if wanted]
    ep = out[2].ctypes.data if sigmoid else None
    en = out[-1].ctypes.data if sigmoid_neg else None
    row = z.shape[-1] if reuse and z.ndim >= 2 else 0
    lib.logistic_tables(z.size, z.ctypes.data, out[0].ctypes.data, out[1].ctypes.data, ep, en, row)
    return tuple(out)


def tables(z: ArrayLike, *, sigmoid: bool = False, sigmoid_neg: bool = False) -> tuple[np.ndarray, ...]:
    """``log_expit(z)``, ``log_expit(-z)`` and, when asked, ``expit(z)`` and ``expit(-z)``, as scipy gives them.

    Parameters
    ----------
    z : array_like of float
        Any shape.
    sigmoid, sigmoid_neg : bool
        Also return ``expit(z)``, ``expit(-z)`` (in that order, after the two logarithms).

    Returns
    -------
    tuple of ndarray
        Each of ``z``'s shape and memory layout, float64, equal bit for bit to :func:`scipy.special.log_expit`
        and :func:`scipy.special.expit` of ``z`` and ``-z`` (computed in one pass by the kernel where it
        loads and ``z`` is C-contiguous, else by scipy).
    """
    z = np.asarray(z, dtype=np.float64)
    lib = load() if z.flags.c_contiguous else None      # scipy's tables keep another layout, and so do they
    if lib is None:
        return _scipy_tables(z, sigmoid, sigmoid_neg)
    return _kernel_tables(lib, z, sigmoid, sigmoid_neg)


def _check_values() -> np.ndarray:
    """Values over the whole double range where the tables could part from scipy's, if anywhere."""
    rng = np.random.default_rng(20261204)
    tiny = np.nextafter(0.0, 1.0)
    edges = [0.0, -0.0, np.inf, -np.inf, np.nan, tiny, -tiny, 2.2250738585072014e-308, -2.2250738585072014e-308,
             1e-300, -1e-300, 36.0, -36.0, 37.0, -37.0, 709.0, -709.0, 709.79, -709.79, 745.0, -745.0, 745.2, -745.2,
             1e308, -1e308, np.finfo(float).max, -np.finfo(float).max]
    return np.concatenate([edges, rng.normal(0.0, 3.0, 20_000), rng.normal(0.0, 40.0, 4_000),
                           rng.uniform(-800.0, 800.0, 4_000), rng.normal(0.0, 1e-8, 1_000),
                           tiny * np.arange(-500.0, 500.0)])



def _matches_scipy(lib: ctypes.CDLL) -> bool:
    """Whether the kernel's four tables have scipy's bits on :func:`_check_values`, cell by cell and as rows.

    As rows: the values laid out in rows, some repeating the row above (every value, zeros of both
    signs and NaN among them), so that the copied cells are checked too.
    """
    z = _check_values()
    n = z.size - z.size % 4
    rows = np.stack([z[:n // 4], z[:n // 4], z[n // 4:n // 2], -z[n // 4:n // 2], z[n // 2:3 * n // 4],
                     z[3 * n // 4:n], z[3 * n // 4:n]])
    rows[2, ::3] = rows[1, ::3]                     # a row that repeats the one above in some columns only
    with np.errstate(over="ignore"):
        checks = [(_scipy_tables(v, True, True), _kernel_tables(lib, v, True, True)) for v in (z, rows)]
    return all(_same_bits(g, w) for want, got in checks for g, w in zip(got, want, strict=True))


def load() -> ctypes.CDLL | None:
    """The compiled kernel, or None (no compiler, ``IRTLIB_LOGISTIC_KERNEL=0``, or tables unlike scipy's).

    The build and the check are made once per process; the switch is read at every call.
    """
    if os.environ.get(SWITCH, "1") == "0":
        return None
    from irtlib.calibration.fused_kernel import verified

    return verified(SOURCE, _bind, switch=SWITCH, matches=_matches_scipy, cache=_LOADED)
