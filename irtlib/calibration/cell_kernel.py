"""The MAP engine's cell pass in C: one loop over a block's cells instead of a dozen numpy passes.

:func:`irtlib.calibration.joint_map.fit_map` spends most of its time in *cell passes*: per cell
``z = a (theta - b)``, one ``exp``, the 2PL's score and weight, and their row and column sums
(``joint_map._cell_pass``). numpy makes a pass over memory for each of about fifteen operations (22 to
28 ns a cell); ``_cell_kernel.c`` (beside this module) does them in one loop over the block's float32
``1 - 2x`` cells, dense or sparse, in the pass's precision (float32 while the steps are large, float64
for the last ones), and returns the same sums and kept weights. A block is one call, made from the
runner's thread that owns it (ctypes releases the GIL, so both cores work); its sums depend on the
block only, so a fit has the same digits on any number of threads.

The numbers are the numpy path's formulas, rounded differently only where the C ``exp`` differs from
numpy's (about an ulp) and where sums are added in another order (column sums of 16 rows in the
pass's precision, then in float64). Compiled like :mod:`irtlib.calibration.fused_kernel` (the same
compiler, flags and per-user directory). The first :func:`load` of a process compares the kernel with
the numpy path on hand-made blocks (dense, dense with missing cells, sparse; ``z`` over the whole range
of both tails) in both precisions and returns the kernel only if they agree to :data:`AGREE`; otherwise,
or without a compiler, the engine keeps its numpy path (no warning: the same fit, slower).
``IRTLIB_CELL_KERNEL=0`` turns the kernel off; it is read at every call, so one process can time both.

Layer rule: part of ``calibration``; imports ``calibration.cells`` and the compiler driver only.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.typing import DTypeLike

from .cells import DenseBlock, SparseBlock, cell_arrays

__all__ = ["SOURCE", "SWITCH", "AGREE", "load", "cell_pass", "differences"]

SOURCE = Path(__file__).with_name("_cell_kernel.c")
#: The environment variable that turns the kernel off (``"0"``), read at every call.
SWITCH = "IRTLIB_CELL_KERNEL"
#: Largest difference from the numpy path :func:`load` accepts, per precision, relative to the scale of
#: each output (its largest magnitude; for a sum, the same sum of the terms' magnitudes): a few ulps of
#: the precision, summed over the terms' magnitudes (measured on the check's blocks: at most 3.3e-7 in
#: float32 and 2e-15 in float64).
AGREE = {np.dtype(np.float32): 4e-6, np.dtype(np.float64): 1e-13}
#: Lanes of the kernel: a, b and a^2 are passed padded to a multiple of it.
LANES = 8

_LOADED: dict = {}          # "lib": the library or None once load() has decided
_LOCK = threading.Lock()


def _bind(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    for precision in ("f32", "f64"):
        dense = getattr(lib, f"cell_pass_dense_{precision}")
        dense.argtypes = [i64, i64, *[ptr] * 6, i64, i64, *[ptr] * 6]
        sparse = getattr(lib, f"cell_pass_sparse_{precision}")
        sparse.argtypes = [i64, i64, i64, *[ptr] * 8, i64, i64, *[ptr] * 6]
        dense.restype = sparse.restype = i64
    return lib


def _padded(values: np.ndarray, dtype) -> np.ndarray:
    """``values`` in ``dtype``, zero padded to a multiple of :data:`LANES`."""
    out = np.zeros(-(-values.size // LANES) * LANES, dtype)
    out[:values.size] = values
    return out


def _address(array: np.ndarray | None) -> int | None:
    return None if array is None else array.ctypes.data


def cell_pass(lib: ctypes.CDLL, block: DenseBlock | SparseBlock, theta: np.ndarray, a: np.ndarray,
              b: np.ndarray, derive: bool, dtype: DTypeLike, keep_cells: bool = True, *,
              reuse: tuple | None = None) -> tuple:
    """``joint_map._cell_pass`` by the kernel: ``((log_lik, item_sums, model_sums), kept)``.

    Parameters
    ----------
    lib : the loaded kernel (:func:`load`)
    block : DenseBlock or SparseBlock
    theta : ndarray, shape (n_models,)
        Every model's ability (the block's rows are taken from it).
    a, b : ndarray, shape (n_items,)
    derive : bool
        Also the sums (``item_sums`` (5, n_items), ``model_sums`` (2, n_rows)) and, with ``keep_cells``,
        the per-cell ``w``, ``w z`` and ``g`` in float32 (the block's shape); else those are None.
    dtype : float32 or float64
        Precision of the per-cell arithmetic.
    reuse : tuple of 3 ndarrays, optional
        Kept weights of an earlier pass over this block (float32, the block's shape), overwritten with
        the new ones instead of allocating (:func:`irtlib.calibration.cells.cell_arrays`).
    """
    dtype = np.dtype(dtype)
    precision = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}[dtype]
    n_rows = block.rows.stop - block.rows.start
    n_items = block.n_items
    pa, pb, pac, pa2 = _padded(a, np.float64), _padded(b, np.float64), _padded(a, dtype), _padded(a * a, dtype)
    th = np.ascontiguousarray(theta[block.rows], dtype=np.float64)
    flip = np.ascontiguousarray(block.flip, dtype=np.float32)
    log_lik = np.zeros(1)
    item_sums = model_sums = kept = None
    if derive:
        item_sums, model_sums = np.empty((5, n_items)), np.empty((2, n_rows))
        if keep_cells:
            kept = cell_arrays(reuse, block.shape)
    outputs = (_address(log_lik), _address(item_sums), _address(model_sums),
               *((None,) * 3 if kept is None else (k.ctypes.data for k in kept)))
    flags = (int(derive), int(derive and keep_cells))
    if isinstance(block, SparseBlock):
        status = getattr(lib, f"cell_pass_sparse_{precision}")(
            flip.size, n_rows, n_items, block.row_of.ctypes.data, block.col.ctypes.data, flip.ctypes.data,
            th.ctypes.data, pa.ctypes.data, pb.ctypes.data, pac.ctypes.data, pa2.ctypes.data, *flags, *outputs)
    else:
        status = getattr(lib, f"cell_pass_dense_{precision}")(
            n_rows, n_items, flip.ctypes.data, th.ctypes.data, pa.ctypes.data, pb.ctypes.data, pac.ctypes.data,
            pa2.ctypes.data, *flags, *outputs)
    if status != 0:
        raise MemoryError("the cell kernel could not allocate its column sums")
    return (float(log_lik[0]), item_sums, model_sums), kept


def _check_blocks() -> list[tuple]:
    """Hand-made blocks and parameters for the load-time check: ``(block, theta, a, b)``.

    ``a (theta - b)`` reaches beyond both exponentials' clamps (|z| up to about 900), every block has a
    row length that is not a multiple of the lanes, and the missing cells sit in whole rows, whole
    columns and at random.
    """
    rng = np.random.default_rng(20261202)
    n, m = 37, 203
    theta = np.concatenate([rng.normal(0.0, 2.0, n - 3), [-40.0, 0.0, 40.0]])
    a = np.exp(rng.normal(0.0, 1.2, m))
    a[:3] = (1e-3, 25.0, 1.0)
    b = rng.normal(0.0, 1.5, m)
    values = (rng.random((n, m)) < 0.5).astype(float)
    holes = values.copy()
    holes[rng.random((n, m)) < 0.3] = np.nan
    holes[5], holes[:, 7] = np.nan, np.nan
    sparse = holes.copy()
    sparse[rng.random((n, m)) < 0.6] = np.nan
    rows = slice(0, n)
    return [(DenseBlock(values, rows), theta, a, b), (DenseBlock(holes, rows), theta, a, b),
            (SparseBlock(sparse, rows), theta, a, b)]


def _cell_z(block, theta: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``a`` and ``z = a (theta - b)`` of each stored cell of ``block`` (the block's per-cell shape), in float64."""
    if isinstance(block, SparseBlock):
        a_cells = a[block.col]
        return a_cells, a_cells * (theta[block.rows][block.row_of] - b[block.col])
    a_cells = np.broadcast_to(a, block.shape)
    return a_cells, a_cells * (theta[block.rows, None] - b)


def differences(lib: ctypes.CDLL, reference: Callable, block: DenseBlock | SparseBlock, theta: np.ndarray,
                a: np.ndarray, b: np.ndarray, dtype: DTypeLike) -> dict:
    """How far the kernel's pass is from ``reference``'s (the numpy path) on one block.

    Returns
    -------
    dict
        ``log_lik``, ``item_sums``, ``model_sums``, ``kept``: the largest difference of each output,
        relative to its scale: the log-likelihood per cell; each sum over the same sum of its terms'
        magnitudes (``|g|``, ``|g z|``, ``|w|``, ... from the numpy path's cells); each kept array over
        its largest magnitude.
    """
    (ll0, items0, models0), kept0 = reference(block, None, theta, a, b, True, dtype)
    (ll1, items1, models1), kept1 = cell_pass(lib, block, theta, a, b, True, dtype)
    w, wz, g = (np.abs(k.astype(float)) for k in kept0)
    a_cells, z = _cell_z(block, theta, a, b)
    z = np.abs(z)
    columns = (g, g * z, w, wz, wz * z)
    rows = (g * a_cells, w * a_cells**2)
    if isinstance(block, SparseBlock):
        col_scale = np.stack([np.bincount(block.col, c, minlength=block.n_items) for c in columns])
        row_scale = np.stack([np.bincount(block.row_of, c, minlength=block.n_rows) for c in rows])
    else:
        col_scale = np.stack([c.sum(axis=0) for c in columns])
        row_scale = np.stack([c.sum(axis=1) for c in rows])
    tiny = np.finfo(float).tiny
    return {"log_lik": abs(ll1 - ll0) / block.flip.size,
            "item_sums": float((np.abs(items1 - items0) / (col_scale + tiny)).max()),
            "model_sums": float((np.abs(models1 - models0) / (row_scale + tiny)).max()),
            "kept": max(float(np.abs(k1.astype(float) - k0).max() / max(np.abs(k0).max(), tiny))
                        for k0, k1 in zip(kept0, kept1, strict=True))}


def _agrees(lib: ctypes.CDLL, reference: Callable) -> bool:
    """Whether the kernel's passes agree with ``reference`` to :data:`AGREE` on :func:`_check_blocks`."""
    for dtype, limit in AGREE.items():
        for block, theta, a, b in _check_blocks():
            if max(differences(lib, reference, block, theta, a, b, dtype).values()) > limit:
                return False
    return True


def load(reference: Callable) -> ctypes.CDLL | None:
    """The compiled kernel, or None (``IRTLIB_CELL_KERNEL=0``, no compiler, or passes unlike ``reference``'s).

    Parameters
    ----------
    reference : callable
        The numpy cell pass (``joint_map._numpy_cell_pass``) the kernel is checked against, once per
        process; the switch is read at every call.
    """
    if os.environ.get(SWITCH, "1") == "0":
        return None
    if "lib" not in _LOADED:
        with _LOCK:
            if "lib" not in _LOADED:
                from .fused_kernel import compiled

                lib = compiled(SOURCE, _bind, switch=SWITCH)
                _LOADED["lib"] = lib if lib is not None and _agrees(lib, reference) else None
    return _LOADED["lib"]
