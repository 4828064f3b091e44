"""The observed cells of a response matrix, in row blocks, and the passes the engine makes over them.

The MAP engine (:func:`irtlib.calibration.joint_map.fit_map`) touches the data only through
*passes*: a function applied to every block of rows, returning small per-model and per-item sums
that the engine adds up in block order. This module holds the blocks and runs the passes:

- :class:`DenseBlock` -- a block of consecutive models stored as a float32 array of ``1 - 2x``
  (4 bytes a cell; 0 where a cell is missing) plus, only when cells are missing, a bool mask; a pass
  works through it in *tiles* of a few rows, small enough for its float64 work arrays
  (:func:`workspace`) to stay in a core's cache;
- :class:`SparseBlock` -- the same rows stored as their observed cells only (coordinates), chosen
  when most cells are missing, so that a missing cell costs nothing;
- :class:`ThreadRunner` -- runs a pass over the blocks on several threads (numpy releases the GIL
  in its loops, so two threads keep both cores busy); :class:`DaskRunner` runs it on a Dask
  cluster, each block (and its state) staying on the worker it was sent to.

A pass is ``fn(block, state, *args) -> (small, new_state)``: ``state`` is what the previous pass
with ``keep=True`` left for that block (the engine's per-cell weights; a pass with ``keep=True`` gets it
as memory to overwrite), ``small`` what is sent back.
Results are combined in block order, and block boundaries depend only on the matrix's shape, so a fit
gives the same numbers on any number of threads or workers.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from irtlib.core.kernels import logit_z
from irtlib.errors import InputError

__all__ = ["BLOCK_CELLS", "TILE_CELLS", "SPARSE_BELOW", "DenseBlock", "SparseBlock", "split_blocks", "workspace",
           "cell_arrays", "available_cores", "ThreadRunner", "DaskRunner", "make_runner"]

#: Cells per block: the unit of work of a thread (or a Dask task), and of the sums sent back.
BLOCK_CELLS = 1 << 19
#: Cells per tile of a dense block: a tile's work arrays (256 kB in float32) stay in a core's cache.
TILE_CELLS = 1 << 16
#: Blocks are stored sparse (observed cells only) when fewer than this share of their cells is observed.
SPARSE_BELOW = 0.25


class DenseBlock:
    """Rows ``start:stop`` of the matrix, every cell stored.

    Attributes
    ----------
    rows : slice
        The block's models (rows of the full matrix).
    flip : ndarray of float32, shape (n_rows, n_items)
        ``1 - 2x``: -1 safe, +1 unsafe, 0 missing.
    observed : ndarray of bool, shape (n_rows, n_items), or None
        None when every cell of the block is observed.
    """

    def __init__(self, values: np.ndarray, rows: slice):
        observed = ~np.isnan(values)
        self.rows = rows
        flip = values * -2.0
        flip += 1.0                   # 1 - 2x in float64 (NaN where missing), then rounded once
        self.flip = flip.astype(np.float32)
        self.observed = None if observed.all() else observed
        if self.observed is not None:
            self.flip[~observed] = 0.0
        self.n_items = values.shape[1]

    def tiles(self) -> Iterator[tuple[slice, DenseBlock]]:
        """``(local_rows, tile)`` pairs covering the block: tiles of about :data:`TILE_CELLS` cells."""
        step = max(1, TILE_CELLS // max(1, self.n_items))
        n_rows = self.flip.shape[0]
        if step >= n_rows:
            yield slice(0, n_rows), self
            return
        for start in range(0, n_rows, step):
            local = slice(start, min(start + step, n_rows))
            tile = object.__new__(DenseBlock)
            tile.rows = slice(self.rows.start + local.start, self.rows.start + local.stop)
            tile.flip, tile.n_items = self.flip[local], self.n_items
            tile.observed = None if self.observed is None else self.observed[local]
            yield local, tile

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the block's per-cell arrays: (n_rows, n_items)."""
        return self.flip.shape

    def z(self, theta: np.ndarray, a: np.ndarray, b: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
        """``a (theta - b)`` of every cell, shape (n_rows, n_items)."""
        return logit_z(theta[self.rows, None], a, b, out=out)

    def item_cells(self, v: np.ndarray) -> np.ndarray:
        """An item vector ``v`` (n_items,) laid over the block's cells (here: broadcast along the rows)."""
        return v

    def row_dot(self, cells: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``sum_j cells[m, j] v[j]`` per row; ``v`` of shape (n_items,) or (n_items, k)."""
        return cells @ v

    def col_dot(self, cells: np.ndarray, u: np.ndarray) -> np.ndarray:
        """``sum_m u[m] cells[m, j]`` per item; ``u`` of shape (n_rows,) or (n_rows, k) (then (k, n_items))."""
        return u.T @ cells

    def col_sum(self, cells: np.ndarray) -> np.ndarray:
        """Column sums, shape (n_items,): a matrix-vector product, in the dtype of ``cells``.

        A tile has few rows (about :data:`TILE_CELLS` / n_items), so float32 adds few terms here; the
        callers accumulate the tiles' sums in float64. (``sum(axis=0, dtype=float64)`` costs four times more.)
        """
        return _ones(cells.shape[0], cells.dtype) @ cells

    def cells(self, local: slice) -> slice:
        """Where a tile's cells sit in an array of the block's shape: its rows ``local``."""
        return local


class SparseBlock:
    """Rows ``start:stop`` of the matrix, observed cells only.

    Attributes
    ----------
    rows : slice
    row_of, col : ndarray of int32, shape (n_cells,)
        Row within the block and item of each observed cell.
    flip : ndarray of float32, shape (n_cells,)
        ``1 - 2x`` of each observed cell.
    """

    observed = None

    def __init__(self, values: np.ndarray, rows: slice):
        r, c = np.nonzero(~np.isnan(values))
        self.rows = rows
        self.row_of, self.col = r.astype(np.int32), c.astype(np.int32)
        self.flip = (1.0 - 2.0 * values[r, c]).astype(np.float32)
        self.n_rows, self.n_items = values.shape

    def tiles(self) -> Iterator[tuple[slice, SparseBlock]]:
        """The whole block as its one tile (its cells are already only the observed ones)."""
        yield slice(0, self.n_rows), self

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the block's per-cell arrays: (n_cells,)."""
        return self.flip.shape

    def z(self, theta: np.ndarray, a: np.ndarray, b: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
        """``a (theta - b)`` of every observed cell, shape (n_cells,)."""
        return logit_z(theta[self.rows][self.row_of], a[self.col], b[self.col], out=out)

    def item_cells(self, v: np.ndarray) -> np.ndarray:
        """An item vector ``v`` (n_items,) laid over the block's cells: ``v`` of each cell's item, (n_cells,)."""
        return v[self.col]

    def row_dot(self, cells: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``sum_j cells[m, j] v[j]`` per row; ``v`` of shape (n_items,) or (n_items, k)."""
        if v.ndim == 2:
            return np.stack([self.row_dot(cells, v[:, k]) for k in range(v.shape[1])], axis=1)
        return np.bincount(self.row_of, cells * v[self.col], minlength=self.n_rows)

    def col_dot(self, cells: np.ndarray, u: np.ndarray) -> np.ndarray:
        """``sum_m u[m] cells[m, j]`` per item; ``u`` of shape (n_rows,) or (n_rows, k) (then (k, n_items))."""
        if u.ndim == 2:
            return np.stack([self.col_dot(cells, u[:, k]) for k in range(u.shape[1])])
        return np.bincount(self.col, cells * u[self.row_of], minlength=self.n_items)

    def col_sum(self, cells: np.ndarray) -> np.ndarray:
        """Column sums, shape (n_items,)."""
        return np.bincount(self.col, cells, minlength=self.n_items)

    def cells(self, local: slice) -> slice:
        """Where the (only) tile's cells sit in an array of the block's shape: all of it."""
        return slice(None)


_local = threading.local()


def _ones(n: int, dtype) -> np.ndarray:
    """A cached vector of ``n`` ones (column sums as matrix-vector products)."""
    key = ("ones", n, np.dtype(dtype).str)
    cache = getattr(_local, "ones", None)
    if cache is None:
        cache = _local.ones = {}
    if key not in cache:
        cache[key] = np.ones(n, dtype)
    return cache[key]


def workspace(shape: tuple[int, ...], count: int, dtype: DTypeLike = np.float64) -> list[np.ndarray]:
    """``count`` work arrays of ``shape`` and ``dtype``, reused by every pass of the calling thread.

    A pass over a block needs about ten temporaries of the block's size; allocating them afresh for
    every block of every pass cost more than the arithmetic (measured: 28 against 40 to 120 ns a cell).
    """
    cache = getattr(_local, "arrays", None)
    if cache is None:
        cache = _local.arrays = {}
    key = (shape, np.dtype(dtype).str)
    arrays = cache.get(key)
    if arrays is None or len(arrays) < count:
        if len(cache) > 6:            # a few block shapes per thread (the last block is shorter), two dtypes
            cache.clear()
        arrays = cache[key] = [np.empty(shape, dtype) for _ in range(count)]
    return arrays[:count]


def cell_arrays(old: Any, shape: tuple[int, ...], count: int = 3) -> tuple[np.ndarray, ...]:
    """``count`` float32 arrays of a block's per-cell ``shape`` for a pass to keep.

    ``old`` (the block's previous state, to be overwritten) when it is such arrays, else new ones.

    A pass with ``keep=True`` gets the old state (:meth:`ThreadRunner.run`); writing into it spares the
    fresh pages of a new allocation (12 bytes a cell every pass, as costly as the arithmetic in C).
    """
    if (isinstance(old, tuple) and len(old) == count
            and all(isinstance(k, np.ndarray) and k.shape == shape and k.dtype == np.float32
                    and k.flags.c_contiguous and k.flags.writeable for k in old)):
        return old
    return tuple(np.empty(shape, np.float32) for _ in range(count))


def split_blocks(values: np.ndarray, *, block_cells: int | None = None,
                 sparse: bool | None = None) -> list[DenseBlock | SparseBlock]:
    """The matrix cut into blocks of whole rows, about ``block_cells`` cells each.

    Parameters
    ----------
    values : ndarray, shape (n_models, n_items)
        0, 1 or NaN (missing).
    block_cells : int, optional
        Cells per block (stored cells for a sparse block; default :data:`BLOCK_CELLS`); the
        boundaries depend only on the matrix, never on the number of threads.
    sparse : bool, optional
        Store every block sparse (True) or dense (False); None decides per matrix: sparse when
        fewer than :data:`SPARSE_BELOW` of the cells are observed.

    Returns
    -------
    list of DenseBlock or SparseBlock
    """
    values = np.asarray(values, dtype=float)
    block_cells = BLOCK_CELLS if block_cells is None else int(block_cells)
    n_models, n_items = values.shape
    observed_share = float((~np.isnan(values)).mean())
    if sparse is None:
        sparse = observed_share < SPARSE_BELOW
    per_row = max(1.0, n_items * (observed_share if sparse else 1.0))
    step = max(1, int(block_cells // per_row))
    kind = SparseBlock if sparse else DenseBlock
    return [kind(values[start:start + step], slice(start, min(start + step, n_models)))
            for start in range(0, n_models, step)]


def available_cores() -> int:
    """The cores this process may use (its CPU affinity where the system reports one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class ThreadRunner:
    """Runs passes over blocks held in memory, on ``n_threads`` threads.

    Parameters
    ----------
    blocks : list of DenseBlock or SparseBlock
    n_threads : int, optional
        Threads (default: the cores this process may use, at most one per block).
    """

    def __init__(self, blocks: Sequence, *, n_threads: int | None = None):
        self.blocks = list(blocks)
        self.states: list = [None] * len(self.blocks)
        cores = available_cores() if n_threads is None else int(n_threads)
        self.n_threads = max(1, min(len(self.blocks), cores))
        self._pool = ThreadPoolExecutor(self.n_threads) if self.n_threads > 1 else None

    def run(self, fn: Callable, *args: Any, keep: bool = False) -> list:
        """``fn(block, state, *args)`` on every block; the ``small`` parts, in block order.

        With ``keep=True`` each block's new state replaces its old one, and ``fn`` gets the old one as
        memory to write the new one into (it must not read it: the engine's per-cell weights are
        overwritten in place, which saves a fresh allocation of as many bytes per pass), so the two
        never take memory at the same time.
        """
        calls = zip(self.blocks, self.states, strict=True)
        if self._pool is None:
            out = [fn(block, state, *args) for block, state in calls]
        else:
            out = list(self._pool.map(lambda bs: fn(bs[0], bs[1], *args), calls))
        if keep:
            self.states = [state for _, state in out]
        return [small for small, _ in out]

    def close(self) -> None:
        """Shut the threads down and drop the blocks' states."""
        if self._pool is not None:
            self._pool.shutdown()
        self.states = [None] * len(self.blocks)


class _BlockActor:
    """One block and its state, living on a Dask worker (a Dask actor: calls skip the scheduler)."""

    def __init__(self, block):
        self.block, self.state = block, None

    def run(self, fn: Callable, args: tuple, keep: bool):
        small, state = fn(self.block, self.state, *args)          # with keep, fn may reuse the old state's memory
        if keep:
            self.state = state
        return small


class DaskRunner:
    """Runs passes on a Dask cluster: each block is sent once, to a worker that keeps it.

    Each block lives in a Dask actor on one worker (blocks dealt to the workers in turn), with its
    state (the engine's per-cell weights, as large as the block); a pass calls every actor and
    gets back only the small per-model and per-item sums. Results equal :class:`ThreadRunner`'s
    exactly (same blocks, same functions, sums added in block order).

    Parameters
    ----------
    blocks : list of DenseBlock or SparseBlock
    client : distributed.Client
    """

    def __init__(self, blocks: Sequence, client):
        workers = sorted(client.scheduler_info()["workers"])
        if not workers:
            raise InputError("the Dask cluster has no workers")
        self.n_threads = len(workers)
        self._futures = [client.submit(_BlockActor, block, actor=True, workers=[workers[i % len(workers)]],
                                       allow_other_workers=False, pure=False) for i, block in enumerate(blocks)]
        self.actors = [f.result() for f in self._futures]

    def run(self, fn: Callable, *args: Any, keep: bool = False) -> list:
        """As :meth:`ThreadRunner.run`, each block's call running on the worker that holds it."""
        calls = [actor.run(fn, args, keep) for actor in self.actors]
        return [call.result() for call in calls]

    def close(self) -> None:
        """Release the blocks and their states on the cluster."""
        self.actors, self._futures = [], []


def make_runner(values: np.ndarray, *, n_threads: int | None = None, client: Any = None,
                block_cells: int | None = None, sparse: bool | None = None) -> ThreadRunner | DaskRunner:
    """The blocks of ``values`` and the runner that makes passes over them.

    Parameters
    ----------
    values : ndarray, shape (n_models, n_items)
    n_threads : int, optional
        Threads of a local fit (default: all cores). Ignored with ``client``.
    client : distributed.Client, optional
        Fit on this Dask cluster instead (:class:`DaskRunner`).
    block_cells, sparse
        As in :func:`split_blocks`.
    """
    if n_threads is not None and (isinstance(n_threads, bool) or int(n_threads) < 1):
        raise InputError(f"n_threads must be a positive integer, got {n_threads!r}")
    blocks = split_blocks(values, block_cells=block_cells, sparse=sparse)
    if client is not None:
        return DaskRunner(blocks, client)
    return ThreadRunner(blocks, n_threads=n_threads)
