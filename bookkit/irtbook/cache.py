"""A small on-disk cache so chapters can share expensive results (py-irt fits, protocol runs).

The key of an entry is a hash of the caller's key (any picklable description of the inputs:
data checksum, settings, seed) AND of every source file of irtlib, so a change anywhere in the
library invalidates every entry: a cached number can never be staler than the code that would
recompute it. Entries are written atomically by the library's one writer
(:func:`irtlib.io.atomic_write`: temporary file, then rename, the umask's permissions, nothing
left behind by a failure), so two chapters running the same computation in parallel at worst both
compute it.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import time
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from irtlib.io.atomic import atomic_write

__all__ = ["cached", "cached_call", "content_key",
           "cache_path", "library_fingerprint", "array_checksum", "is_presentation", "presentation_modules",
           "PRESENTATION_PACKAGES", "PRESENTATION_MARKER"]


#: Subpackages whose every module only presents results (figures, the HTML report).
PRESENTATION_PACKAGES = ("viz",)
#: A module-level line that declares a module presentation-only (the command line, the book's
#: comparison tables, the paper's numbers): a change to it cannot change a cached fit or protocol run.
PRESENTATION_MARKER = "__presentation__ = True"


def is_presentation(relative: str | os.PathLike, text: str) -> bool:
    """Whether a module of irtlib only presents results, and so stays out of the fingerprint.

    Parameters
    ----------
    relative : path-like
        The module's path relative to the package directory (``"viz/figures.py"``).
    text : str
        The module's source.

    Returns
    -------
    bool
        True for every module under :data:`PRESENTATION_PACKAGES` and every module with the line
        :data:`PRESENTATION_MARKER` (at the start of a line, outside any function).
    """
    parts = Path(relative).parts
    if parts and parts[0] in PRESENTATION_PACKAGES:
        return True
    return any(line.rstrip() == PRESENTATION_MARKER for line in text.splitlines())


def source_roots() -> tuple[tuple[str, Path], ...]:
    """``(prefix, directory)`` of the two packages whose modules count: irtlib's, and this one's as ``book/``."""
    from importlib.util import find_spec

    library = Path(find_spec("irtlib").submodule_search_locations[0]).resolve()
    return (("", library), ("book/", Path(__file__).resolve().parent))


#: Source files that compute: Python modules and the C kernels they compile (with their headers).
SOURCE_PATTERNS = ("*.py", "*.c", "*.h")

def _source_files() -> list[tuple[str, Path]]:
    """Every module and C source of irtlib and of this package: ``(relative name, path)``, sorted by path.

    irtlib's modules are named relative to its package (``protocol/agreement.py``), the book's own
    under ``book/`` (``book/compare.py``), as when they were one package.
    """
    return [(prefix + p.relative_to(root).as_posix(), p)
            for prefix, root in source_roots()
            for p in sorted(f for pattern in SOURCE_PATTERNS for f in root.rglob(pattern))]


def presentation_modules() -> tuple[str, ...]:
    """The presentation-only modules (names as :func:`_source_files` gives them), sorted."""
    return tuple(sorted(rel for rel, p in _source_files() if is_presentation(rel, p.read_text(encoding="utf-8"))))


@lru_cache(maxsize=1)
def library_fingerprint() -> str:
    """SHA-256 over the contents of every module and C source of irtlib and of the book's package that computes.

    Presentation-only modules (:func:`is_presentation`) are left out.
    """
    digest = hashlib.sha256()
    for rel, path in _source_files():
        data = path.read_bytes()
        if is_presentation(rel, data.decode("utf-8")):
            continue
        digest.update(rel.encode())
        digest.update(data)
    return digest.hexdigest()


def array_checksum(*arrays) -> str:
    """SHA-256 of arrays' shapes and bytes (NaN-safe): a data set's identity for cache keys."""
    digest = hashlib.sha256()
    for arr in arrays:
        arr = np.ascontiguousarray(np.asarray(arr))
        digest.update(str((arr.shape, arr.dtype.str)).encode())
        digest.update(arr.tobytes())
    return digest.hexdigest()


def cache_path(key: Any, cache_dir: str | os.PathLike) -> Path:
    """Where :func:`cached` keeps the value of ``key`` under this version of the library (it may not exist yet)."""
    digest = hashlib.sha256((library_fingerprint() + repr(key)).encode()).hexdigest()[:32]
    return Path(cache_dir) / f"{digest}.pkl"


def cached(compute: Callable[[], Any], *, key: Any, cache_dir: str | os.PathLike | None) -> Any:
    """Return ``compute()``, reusing a stored result for the same key and library version.

    Parameters
    ----------
    compute : callable with no arguments
        Produces the value (must be picklable).
    key : picklable
        Everything the value depends on besides the library's code (e.g. a tuple of the data
        checksum, the function name and its settings). ``repr`` must be deterministic.
    cache_dir : path or None
        Where entries live; ``None`` disables caching.
    """
    if cache_dir is None:
        return compute()
    path = cache_path(key, cache_dir)
    if path.exists():
        try:
            with path.open("rb") as fh:
                return pickle.load(fh)
        except (OSError, EOFError, pickle.UnpicklingError):
            pass  # a damaged entry is recomputed and replaced
    value = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), force=True)
    return value


def _labels(index) -> np.ndarray:
    """An index's labels as a fixed-width text array (an object array's bytes would be its pointers)."""
    return np.array([str(label) for label in index], dtype=str)


def content_key(value: Any) -> Any:
    """A deterministic description of ``value`` by its content, for a cache key.

    Arrays, pandas objects and response matrices are replaced by a checksum of their values and
    labels; an object with a ``content_key()`` method (a :class:`~irtbook.pipeline.Benchmark`:
    its name, rule and checksum) by what that method returns; tuples, lists and dicts element by element;
    numbers, strings, booleans and None stand for themselves.

    Raises
    ------
    TypeError
        For any other type (a generator, a callable, an object without a content checksum):
        its ``repr`` could name a memory address or hide what a result depends on.
    """
    import pandas as pd

    from irtlib.core.responses import ResponseMatrix

    if value is None or isinstance(value, (bool, int, float, str, np.integer, np.floating)):
        return value
    if isinstance(value, np.ndarray):
        return ("array", array_checksum(value))
    if isinstance(value, (pd.Series, pd.DataFrame, pd.Index)):
        frame = value.to_frame() if isinstance(value, (pd.Series, pd.Index)) else value
        labels = [_labels(frame.columns)] + ([] if isinstance(value, pd.Index) else [_labels(frame.index)])
        return (type(value).__name__, array_checksum(pd.util.hash_pandas_object(frame, index=False).to_numpy(),
                                                     *labels))
    if isinstance(value, ResponseMatrix):
        return ("ResponseMatrix", array_checksum(value.values, _labels(value.models), _labels(value.items)))
    if callable(getattr(value, "content_key", None)):
        return (type(value).__name__, content_key(value.content_key()))
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(content_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((repr(k), content_key(v)) for k, v in value.items())))
    raise TypeError(f"content_key: cannot key a cache entry on a {type(value).__name__} "
                    "(pass arrays, pandas objects, response matrices, benchmarks, numbers or strings)")


def cached_call(func: Callable[..., Any], /, *args: Any, cache_dir: str | os.PathLike | None,
                return_seconds: bool = False, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)`` through :func:`cached`, keyed by the function's name and its arguments' content.

    For a chapter's deterministic (seeded) computations on data: the key is the function's module
    and qualified name with :func:`content_key` of every argument, so the same call on the same
    data under the same library reuses the stored result, and any change to the data, an argument
    or the library's code recomputes it.

    Parameters
    ----------
    func : callable
        A module-level function of irtlib or of this package (its code is in the fingerprint).
    *args, **kwargs
        Its arguments, each accepted by :func:`content_key`.
    cache_dir : path or None
        As in :func:`cached` (None: no caching).
    return_seconds : bool
        Return ``(result, seconds)``: the wall seconds the computation took when it ran, stored
        with the result, so a page that reports a computation's cost reports it truly when the
        result is read from the cache.
    """
    if func.__module__.split(".")[0] not in ("irtlib", "irtbook"):
        raise ValueError(f"cached_call: {func.__module__}.{func.__qualname__} is not irtlib's or irtbook's, so a "
                         "change to its code would not invalidate the cache")
    key = ("call", func.__module__, func.__qualname__, content_key(args),
           content_key(dict(kwargs)))
    if not return_seconds:
        return cached(lambda: func(*args, **kwargs), key=key, cache_dir=cache_dir)

    def timed():
        start = time.perf_counter()
        value = func(*args, **kwargs)
        return value, time.perf_counter() - start

    return cached(timed, key=key + ("seconds",), cache_dir=cache_dir)
