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
import weakref
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.typing import DTypeLike

from .cells import DenseBlock, SparseBlock, cell_arrays

__all__ = ["SOURCE", "SWITCH", "AGREE", "load", "cell_pass", "block_pass", "differences"]

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


class _BlockBuffers:
    """A block's fixed inputs and outputs for the kernel, their addresses taken once (:func:`block_pass`).

    Reading an array's address through ``ndarray.ctypes`` costs about a microsecond, as much as copying a
    few hundred numbers: per pass, :func:`cell_pass` took about 13 addresses and made six small arrays,
    several times the kernel's own time on a per-split block of a few thousand cells. Here the padded
    ``a``, ``b``, ``a`` and ``a^2`` of the pass's precision, the block's abilities, the sums and (from the
    first pass that keeps them) the per-cell weights live in arrays made once per block; a pass copies its
    parameters in, calls the kernel and copies the sums out (new arrays, as :func:`cell_pass` returns).
    """

    def __init__(self, block: DenseBlock | SparseBlock):
        n_rows, n_items = block.rows.stop - block.rows.start, block.n_items
        padded = -(-n_items // LANES) * LANES
        self.n_items, self.shape, self.sparse = n_items, block.shape, isinstance(block, SparseBlock)
        self.flip = np.ascontiguousarray(block.flip, dtype=np.float32)
        self.a, self.b, self.a2 = np.zeros(padded), np.zeros(padded), np.empty(n_items)
        self.ac = {np.dtype(t): np.zeros(padded, t) for t in (np.float32, np.float64)}
        self.a2c = {np.dtype(t): np.zeros(padded, t) for t in (np.float32, np.float64)}
        self.theta, self.log_lik = np.empty(n_rows), np.zeros(1)
        self.item_sums, self.model_sums = np.empty((5, n_items)), np.empty((2, n_rows))
        self.kept, self.kept_at = None, (None,) * 3
        self._address = {}
        for x in (self.flip, self.a, self.b, self.theta, self.log_lik, self.item_sums, self.model_sums,
                  *self.ac.values(), *self.a2c.values()):
            self._address[id(x)] = x.ctypes.data
        head = ((self.flip.size, n_rows, n_items, block.row_of.ctypes.data, block.col.ctypes.data)
                if self.sparse else (n_rows, n_items))
        self.head = (*head, self.at(self.flip), self.at(self.theta), self.at(self.a), self.at(self.b))

    def at(self, array: np.ndarray) -> int:
        """The address of one of the buffers' own arrays."""
        return self._address[id(array)]

    def keep_arrays(self) -> tuple[int, int, int]:
        """The addresses of the kept ``w``, ``w z`` and ``g`` (float32, the block's shape), made at first use."""
        if self.kept is None:
            self.kept = tuple(np.empty(self.shape, np.float32) for _ in range(3))
            self.kept_at = tuple(k.ctypes.data for k in self.kept)
        return self.kept_at


def block_pass(lib: ctypes.CDLL, block: DenseBlock | SparseBlock, theta: np.ndarray, a: np.ndarray,
               b: np.ndarray, derive: bool, dtype: DTypeLike, keep_cells: bool = True) -> tuple:
    """:func:`cell_pass` through the block's :class:`_BlockBuffers`: the same numbers, less per-pass Python.

    The kept weights are the buffers' own arrays (the block's state: overwritten by its next pass that keeps
    them, as :func:`cell_pass` overwrites the ``reuse`` it is given); the sums are returned as new arrays.
    The buffers live as long as the block (kept in a weak mapping from the block).
    """
    buffers = _BUFFERS.get(block)
    if buffers is None:
        buffers = _BUFFERS[block] = _BlockBuffers(block)
    dtype = np.dtype(dtype)
    n = buffers.n_items
    buffers.a[:n], buffers.b[:n] = a, b
    ac, a2c = buffers.ac[dtype], buffers.a2c[dtype]
    ac[:n] = a                                       # _padded(a, dtype): one rounding of a to the precision
    a2c[:n] = np.multiply(a, a, out=buffers.a2)      # _padded(a * a, dtype)
    buffers.theta[:] = theta[block.rows]
    keep = derive and keep_cells
    at = buffers.at
    outputs = (at(buffers.log_lik), at(buffers.item_sums) if derive else None,
               at(buffers.model_sums) if derive else None, *(buffers.keep_arrays() if keep else (None,) * 3))
    name = f"cell_pass_{'sparse' if buffers.sparse else 'dense'}_{'f32' if dtype == np.float32 else 'f64'}"
    status = getattr(lib, name)(*buffers.head, at(ac), at(a2c), int(derive), int(keep), *outputs)
    if status != 0:
        raise MemoryError("the cell kernel could not allocate its column sums")
    if not derive:
        return (float(buffers.log_lik[0]), None, None), None
    return (float(buffers.log_lik[0]), buffers.item_sums.copy(), buffers.model_sums.copy()), \
        (buffers.kept if keep else None)


#: Each block's :class:`_BlockBuffers` (weakly keyed: they go with the block).
_BUFFERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


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
