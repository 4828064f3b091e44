"""The authors' calibration of many splits, cached on disk split by split, by content.

:func:`fit_2pl_splits_cached` is :func:`irtlib.calibration.pyirt_batch.fit_2pl_splits` with a
directory of results: each split is stored under a key made of what determines its fit and nothing
else, namely

* the split's training block, ``values[train_rows[s]]`` (shape, float64 bytes, the NaN pattern
  included: a missing cell is not an observation),
* the fit's settings (epochs, learning rate and its decay, seed, best or last epoch, torch threads),
* the calibration code: irtlib's version, a checksum of :mod:`irtlib.calibration.pyirt_batch`'s
  source, torch's version (whose generator draws the random streams), and the likelihood that runs
  (a checksum of the fused kernel's source, or the torch likelihood where no compiler builds it).

A call fits only the splits without an entry, all of them in one batched fit, and writes one file
per split atomically (:func:`irtlib.io.atomic.atomic_write`). So a second call with more splits, fewer,
or the same ones in another order reuses what exists; a changed setting, a changed training cell or
another version of the code misses. A split's fit does not depend on the other splits of its batch
(the module :mod:`~irtlib.calibration.pyirt_batch`), so a cached result is the one a fresh call gives.
An entry that cannot be read, or that does not hold what its name promises, is refitted and
rewritten, with a warning.

:func:`fit_map_splits_cached` does the same for the fast MAP engine's per-split fits (``engine="map"``,
:func:`irtlib.calibration.joint_map.fit_2pl`), which the paper's-text protocol runs in several chapters
on the same training blocks (chapter 6's 100 splits of every benchmark; chapter 8's comparison of the
simulated release with the real data and chapter 4b's engine comparison run their first 20). The MAP
fit is deterministic and takes no seed, so its key is the training block and the code only
(:func:`map_code_fingerprint`: the engine's sources, whether its C cell kernel runs, numpy's and scipy's
versions and the BLAS core the products run on), with every setting at :func:`fit_2pl`'s defaults.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import warnings
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

import numpy as np

from irtlib._typing import ArrayLike, PathLike
from irtlib._version import __version__
from irtlib.io.atomic import atomic_write

from . import fused_kernel, pyirt_batch

#: The engine sources a MAP split fit's key holds (relative to :mod:`irtlib`).
MAP_SOURCES = ("calibration/joint_map.py", "calibration/newton.py", "calibration/cells.py",
               "calibration/cell_kernel.py", "calibration/_cell_kernel.c", "calibration/blas.py",
               "calibration/split_cache.py", "calibration/fused_kernel.py", "calibration/arrow_kernel.py",
               "calibration/_arrow_kernel.c", "core/kernels.py", "core/responses.py")

__all__ = ["fit_2pl_splits_cached", "read_splits_cached", "missing_splits", "split_keys", "fit_map_splits_cached",
           "map_split_keys", "map_code_fingerprint"]

#: Bump when the layout of an entry changes.
ENTRY_FORMAT = 1


def fit_2pl_splits_cached(values: ArrayLike, train_rows: Sequence[ArrayLike], *, cache_dir: PathLike | None,
                          epochs: int = 1000, lr: float = 0.1, lr_decay: float = 0.9999, seed: int | Sequence[int] = 0,
                          best: bool = True, threads: int | None = 1,
                          workers: int = 1) -> list[tuple[np.ndarray, np.ndarray]]:
    """:func:`~irtlib.calibration.pyirt_batch.fit_2pl_splits`, reusing each split's cached fit.

    Parameters
    ----------
    values : array_like, shape (n_models, n_items)
        Responses: 1 safe, 0 unsafe, NaN missing.
    train_rows : sequence of array_like of int
        One entry per split: the row indices of ``values`` it is calibrated on, in py-irt's order.
    cache_dir : path-like or None
        Directory of the entries (created if missing), one ``<key>.npz`` file per split. ``None``:
        no cache, every split is fitted.
    epochs, lr, lr_decay, seed, best, threads, workers
        As in :func:`~irtlib.calibration.pyirt_batch.fit_2pl_splits`; all but ``workers`` (which does
        not change the numbers) are part of each split's key (``seed`` one int, or one per split: a
        split's key holds its own seed, the key a call with that one seed gives).

    Returns
    -------
    list of (a, b)
        Per split, in the order of ``train_rows``: ``a`` and ``b`` of shape (n_items,), float64.

    Raises
    ------
    InputError
        As :func:`~irtlib.calibration.pyirt_batch.fit_2pl_splits` (checked before the cache is read).

    Warns
    -----
    UserWarning
        An entry could not be read or did not match its key; the split is refitted and the entry
        rewritten.

    Examples
    --------
    >>> fits = fit_2pl_splits_cached(x, rows, cache_dir="artifacts/calibrations")   # doctest: +SKIP
    >>> more = fit_2pl_splits_cached(x, rows + extra, cache_dir="artifacts/calibrations")  # doctest: +SKIP

    The second call fits only the splits of ``extra``.
    """
    settings = {"epochs": epochs, "lr": lr, "lr_decay": lr_decay, "seed": seed, "best": best, "threads": threads}
    x, rows = pyirt_batch.check_splits(values, train_rows, epochs=epochs, lr=lr, lr_decay=lr_decay, seed=seed)
    if cache_dir is None:
        return pyirt_batch.fit_2pl_splits(x, rows, workers=workers, **settings)
    directory = Path(cache_dir)
    directory.mkdir(parents=True, exist_ok=True)
    seeds = _seeds(seed, len(rows))
    keys = _keys(x, rows, seeds, settings)
    found = {key: _read_entry(directory / f"{key}.npz", key, x.shape[1]) for key in dict.fromkeys(keys)}
    missing = [key for key, entry in found.items() if entry is None]
    if missing:
        first = {key: s for s, key in reversed(list(enumerate(keys)))}      # one fit per distinct key
        fitted = pyirt_batch.fit_2pl_splits(x, [rows[first[key]] for key in missing], workers=workers,
                                            **{**settings, "seed": [seeds[first[key]] for key in missing]})
        for key, (a, b) in zip(missing, fitted, strict=True):
            _write_entry(directory / f"{key}.npz", key, a, b)
            found[key] = (a, b)
    return [(found[key][0].copy(), found[key][1].copy()) for key in keys]


def read_splits_cached(values: ArrayLike, train_rows: Sequence[ArrayLike], *, cache_dir: PathLike,
                       epochs: int = 1000, lr: float = 0.1, lr_decay: float = 0.9999, seed: int | Sequence[int] = 0,
                       best: bool = True, threads: int | None = 1) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """Every split's fit as :func:`fit_2pl_splits_cached` reads it, or None when some split has no readable entry.

    The same keys and entries, nothing fitted and nothing written: for a caller that holds the whole matrix and
    each split's rows of it (the protocol, paper section "Evaluation"), and that would otherwise stack every
    split's training rows into one array only to hand it to :func:`fit_2pl_splits_cached` (about 150 MB for
    70 splits of a SafetyBench-sized bank) when the build's calibration stage has already fitted them all.
    On None the caller fits through :func:`fit_2pl_splits_cached`, which refits (and warns about) any entry
    that could not be read.

    Parameters
    ----------
    values, train_rows, cache_dir, epochs, lr, lr_decay, seed, best, threads
        As in :func:`fit_2pl_splits_cached` (``cache_dir`` required).

    Returns
    -------
    list of (a, b) or None
    """
    settings = {"epochs": epochs, "lr": lr, "lr_decay": lr_decay, "seed": seed, "best": best, "threads": threads}
    x, rows = pyirt_batch.check_splits(values, train_rows, epochs=epochs, lr=lr, lr_decay=lr_decay, seed=seed)
    keys = _keys(x, rows, _seeds(seed, len(rows)), settings)
    paths = {key: Path(cache_dir) / f"{key}.npz" for key in dict.fromkeys(keys)}
    if not all(path.exists() for path in paths.values()):
        return None
    with warnings.catch_warnings():             # the fit's own read warns, once, about an entry it replaces
        warnings.simplefilter("ignore")
        found = {key: _read_entry(path, key, x.shape[1]) for key, path in paths.items()}
    if any(entry is None for entry in found.values()):
        return None
    return [(found[key][0].copy(), found[key][1].copy()) for key in keys]


def missing_splits(values: ArrayLike, train_rows: Sequence[ArrayLike], *, cache_dir: PathLike, epochs: int = 1000,
                   lr: float = 0.1, lr_decay: float = 0.9999, seed: int | Sequence[int] = 0, best: bool = True,
                   threads: int | None = 1) -> int:
    """How many distinct splits :func:`fit_2pl_splits_cached` would fit (no entry under ``cache_dir`` yet).

    Only the presence of the files is looked at; an unreadable entry counts as present here.
    """
    x, rows = pyirt_batch.check_splits(values, train_rows, epochs=epochs, lr=lr, lr_decay=lr_decay, seed=seed)
    keys = _keys(x, rows, _seeds(seed, len(rows)),
                 {"epochs": epochs, "lr": lr, "lr_decay": lr_decay, "best": best, "threads": threads})
    return sum(not (Path(cache_dir) / f"{key}.npz").exists() for key in dict.fromkeys(keys))


def _seeds(seed, n_splits: int) -> list[int]:
    """``seed`` as one int per split (checked by :func:`~irtlib.calibration.pyirt_batch.check_splits` before)."""
    return [int(s) for s in np.broadcast_to(np.asarray(seed, dtype=np.int64), (n_splits,))]


def _keys(x: np.ndarray, rows: list, seeds: list[int], settings: dict) -> list[str]:
    """:func:`split_keys` of every split with its own seed (the splits of one seed keyed together)."""
    keys: list = [None] * len(rows)
    for seed in dict.fromkeys(seeds):
        which = [s for s, one in enumerate(seeds) if one == seed]
        for s, key in zip(which, split_keys(x, [rows[s] for s in which], **{**settings, "seed": seed}), strict=True):
            keys[s] = key
    return keys


def split_keys(values: ArrayLike, train_rows: Sequence[ArrayLike], **settings: float | bool | None) -> list[str]:
    """The cache key of every split: hex SHA-256 of its training block, the settings and the code.

    Parameters
    ----------
    values, train_rows
        As in :func:`fit_2pl_splits_cached` (``values`` as float64).
    **settings
        The keyword settings of the fit (their values must be JSON numbers, booleans or None).

    Returns
    -------
    list of str
        One 64-character key per split; equal blocks with equal settings give equal keys.
    """
    x = np.asarray(values, dtype=np.float64)
    common = hashlib.sha256(json.dumps({"format": ENTRY_FORMAT, "code": code_fingerprint(), "settings": settings},
                                       sort_keys=True).encode())
    keys = []
    for r in train_rows:
        block = x[np.asarray(r, dtype=np.int64)]
        if np.isnan(block).any():
            block = np.where(np.isnan(block), np.nan, block)                # one NaN bit pattern
        digest = common.copy()
        digest.update(repr(block.shape).encode() + b"\0")
        digest.update(np.ascontiguousarray(block))                          # its bytes, without a copy
        keys.append(digest.hexdigest())
    return keys


def code_fingerprint() -> dict:
    """What identifies the calibration code: irtlib's version, the fit's source, torch, the likelihood.

    The likelihood is the fused kernel's source checksum, or "torch" where it cannot be built.
    """
    source = Path(pyirt_batch.__file__).read_bytes()
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:       # pragma: no cover - the fit itself will say so
        torch_version = None
    kernel = fused_kernel.kernel_fingerprint() if fused_kernel.load() is not None else "torch"
    return {"irtlib": __version__, "pyirt_batch": hashlib.sha256(source).hexdigest(), "torch": torch_version,
            "likelihood": kernel}


def _read_entry(path: Path, key: str, n_items: int, *,
                allow_nan: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
    """The (a, b) stored at ``path``, or None when there is none or it cannot be trusted.

    ``allow_nan``: NaN marks items the block never saw (the MAP entries), the same ones in ``a`` and ``b``.
    """
    if not path.exists():
        return None
    try:
        with np.load(io.BytesIO(path.read_bytes()), allow_pickle=False) as entry:
            stored_key, a, b = str(entry["key"]), entry["a"], entry["b"]
        seen = ~np.isnan(a) if allow_nan else np.ones(a.shape, dtype=bool)
        ok = (stored_key == key and a.shape == b.shape == (n_items,) and a.dtype == b.dtype == np.float64
              and np.array_equal(seen, ~np.isnan(b)) and np.isfinite(a[seen]).all() and np.isfinite(b[seen]).all()
              and (a[seen] > 0).all())
    except (OSError, ValueError, KeyError, EOFError) as exc:
        ok, why = False, f"{type(exc).__name__}: {exc}"
    else:
        why = "its content does not match its key"
    if not ok:
        warnings.warn(f"{path}: cached calibration unreadable ({why}); refitting the split", stacklevel=3)
        return None
    return a, b


def _write_entry(path: Path, key: str, a: np.ndarray, b: np.ndarray) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, key=np.array(key), a=np.asarray(a, dtype=np.float64), b=np.asarray(b, dtype=np.float64))
    atomic_write(path, buffer.getvalue(), force=True)


def fit_map_splits_cached(blocks: Sequence[ArrayLike], *,
                          cache_dir: PathLike | None) -> list[tuple[np.ndarray, np.ndarray]]:
    """The MAP engine's fit of every training block, reusing each block's fit kept under ``cache_dir``.

    Per block, the protocol's per-split calibration with ``engine="map"``
    (:func:`irtlib.protocol.agreement.calibrate_splits`): :func:`~irtlib.calibration.joint_map.fit_2pl`
    with its defaults on the items some row of the block saw, NaN for the others; the same arrays bit for
    bit, read from ``map-<key>.npz`` where an earlier call (another chapter's) fitted the same block with
    the same code (:func:`map_split_keys`). Blocks equal to each other in one call are fitted once.

    Parameters
    ----------
    blocks : sequence of array_like, shape (n_train, n_items)
        The training rows of each split (1 safe, 0 unsafe, NaN missing).
    cache_dir : path-like or None
        Directory of the entries (created if missing); None: no cache, every block is fitted.

    Returns
    -------
    list of (a, b)
        Per block, arrays of shape (n_items,), float64.

    Warns
    -----
    UserWarning
        An entry could not be read or did not match its key; the block is refitted and the entry rewritten.
    """
    xs = [np.asarray(x, dtype=np.float64) for x in blocks]
    if cache_dir is None:
        return [_map_block(x) for x in xs]
    directory = Path(cache_dir)
    directory.mkdir(parents=True, exist_ok=True)
    keys = map_split_keys(xs)
    found: dict = {}
    for x, key in zip(xs, keys, strict=True):
        if key in found:
            continue
        path = directory / f"map-{key}.npz"
        entry = _read_entry(path, key, x.shape[1], allow_nan=True)
        if entry is None:
            entry = _map_block(x)
            _write_entry(path, key, *entry)
        found[key] = entry
    return [(found[key][0].copy(), found[key][1].copy()) for key in keys]


def _map_block(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``fit_2pl(..., engine="map")`` on the block's seen items, NaN elsewhere (the protocol's per-split fit).

    :func:`~irtlib.calibration.joint_map.fit_2pl` with the MAP engine hands its matrix's values to
    :func:`~irtlib.calibration.joint_map.fit_map` with that function's defaults and wraps ``a`` and ``b``
    in Series: the same arrays as :func:`fit_map` on the block itself, here without a
    :class:`~irtlib.core.responses.ResponseMatrix` and its labels (a fifth of a small fit's time).
    """
    from .joint_map import fit_map

    pool = np.flatnonzero((~np.isnan(x)).any(axis=0))
    _, a_pool, b_pool, _ = fit_map(x[:, pool])
    a, b = np.full(x.shape[1], np.nan), np.full(x.shape[1], np.nan)
    a[pool], b[pool] = a_pool, b_pool
    return a, b


def map_split_keys(blocks: Sequence[np.ndarray]) -> list[str]:
    """The cache key of each block's MAP fit: hex SHA-256 of the block (shape and cells) and the code.

    A block of 0, 1 and NaN only (every training block) is hashed as one byte a cell (0, 1, 2 for NaN, whatever
    its bit pattern): the same block, an eighth of the bytes to hash. Any other block is hashed as its float64
    bytes (NaNs made one pattern), under another tag, so no two different blocks share a key.
    """
    common = hashlib.sha256(json.dumps({"format": ENTRY_FORMAT, "engine": "map", "code": map_code_fingerprint()},
                                       sort_keys=True).encode())
    keys = []
    for x in blocks:
        missing = np.isnan(x)
        binary = bool(((x == 0.0) | (x == 1.0) | missing).all())
        if binary:
            cells = (x == 1.0).view(np.int8)                                 # 0 or 1 (a bool's byte)
            cells[missing] = 2
        else:
            cells = np.where(missing, np.nan, x)                             # one NaN bit pattern
        digest = common.copy()
        digest.update(f"{'binary' if binary else 'float64'} {x.shape}".encode() + b"\0")
        digest.update(np.ascontiguousarray(cells).tobytes())
        keys.append(digest.hexdigest())
    return keys


def map_code_fingerprint() -> dict:
    """What identifies the MAP engine's numbers: its sources, its cell kernel, numpy, scipy and the BLAS core.

    The C cell kernel and the numpy cell pass differ in the last bits (:mod:`irtlib.calibration.cell_kernel`),
    as may BLAS's products on another processor core, so each is part of the key.
    """
    from .joint_map import cell_kernel_in_use

    return {**_map_environment(), "cell_kernel": cell_kernel_in_use()}    # its switch is read at every call


@functools.lru_cache(maxsize=1)
def _map_environment() -> dict:
    """The part of :func:`map_code_fingerprint` fixed for a process: sources, versions, BLAS."""
    from .blas import blas_libraries

    root = Path(__file__).resolve().parents[1]
    sources = {name: hashlib.sha256((root / name).read_bytes()).hexdigest() for name in MAP_SOURCES}
    return {"irtlib": __version__, "sources": sources, "numpy": np.__version__, "scipy": metadata.version("scipy"),
            "blas": blas_libraries()}
