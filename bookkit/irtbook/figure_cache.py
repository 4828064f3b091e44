"""Figures drawn once: a page's matplotlib figure is rendered to PNG only when no identical figure was.

Drawing and encoding a figure is most of what a warm page spends besides importing (the
constrained layout, the ticks, the text extents, then the PNG: 0.3 to 2 s a multi-panel figure,
measured in benchmarks/RESULTS.md), though the figures of a rerun are the same figures. The
display formatters that IPython's inline backend registers for :class:`matplotlib.figure.Figure`
are wrapped (:func:`install`): each call first reduces the figure to a digest of its whole state,
the artists, their data, the transforms and any formatter functions (:func:`figure_digest`, a
pickle of the figure as matplotlib pickles it, made deterministic), and keys the rendered output by
that digest, the formatter and its options, every rcParam, the sources of irtlib and of this
package (the plotting code, classes included) and the versions of matplotlib, FreeType, Pillow and
IPython. An identical figure reuses the stored output, byte for byte what the formatter returned
when it drew it; any other figure is drawn, and stored. A figure that cannot be pickled
is drawn as before. Nothing any chapter computes depends on this module, so it stays out of the
results cache's fingerprint (:mod:`irtbook.cache`).
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import pickle
import types
from pathlib import Path
from typing import Any

from irtlib.io.atomic import atomic_write

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["figure_digest", "render_key", "CachedFigurePrinter", "install", "SUBDIR"]


#: The sub-folder of a chapter's cache directory holding the rendered figures.
SUBDIR = "figures"


def _rebuilt(*_args: Any) -> None:  # pragma: no cover - the digest's pickle is never loaded
    """Placeholder reconstructor named by :class:`_DigestPickler` reductions."""


def _code(code: types.CodeType) -> tuple:
    """A code object's behaviour without where it was compiled (a notebook cell's file name varies)."""
    consts = tuple(_code(c) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return (code.co_name, code.co_code, consts, code.co_names, code.co_varnames, code.co_freevars,
            code.co_argcount, code.co_kwonlyargcount, code.co_flags)


@functools.lru_cache(maxsize=1)
def _transform_node() -> type:
    """The class ``matplotlib.transforms.TransformNode`` (imported on the first digest, not with this module)."""
    from matplotlib.transforms import TransformNode

    return TransformNode


class _DigestPickler(pickle.Pickler):
    """matplotlib's own pickle of a figure, made independent of memory addresses and cell file names.

    Transforms keep their dependants in a dict keyed by ``id()``; here they are listed in order.
    Functions (a tick formatter's lambda, or a library's function named by reference) are described
    by their code, defaults and closure, so a changed formatter changes the digest.
    """

    #: Containers pickled as they are (most of the objects a figure holds): answered without the checks below.
    _PLAIN = frozenset({list, dict, tuple, set, frozenset, bytearray, complex})

    def reducer_override(self, obj: Any) -> Any:
        cls = type(obj)
        if cls in self._PLAIN:
            return NotImplemented
        if isinstance(obj, _transform_node()):
            state = dict(obj.__getstate__())
            state["_parents"] = list(state.get("_parents", {}).values())
            return _rebuilt, (cls.__module__, cls.__qualname__), state
        if cls is types.FunctionType and obj is not _rebuilt:
            cells = tuple(c.cell_contents for c in obj.__closure__ or ())
            return _rebuilt, ("function", obj.__module__, obj.__qualname__, _code(obj.__code__),
                              obj.__defaults__, obj.__kwdefaults__, cells)
        return NotImplemented


def figure_digest(fig: Any) -> str | None:
    """SHA-256 of a figure's whole state (as matplotlib pickles it), or None when it cannot be pickled.

    Two figures built alike, in this process or another, have the same digest; a figure that differs
    in any artist, datum, text, style or formatter has another.
    """
    buffer = io.BytesIO()
    try:
        _DigestPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(fig)
    except Exception:  # noqa: BLE001 - whatever matplotlib or a custom artist cannot pickle: draw it
        return None
    return hashlib.sha256(buffer.getvalue()).hexdigest()


def _describe_printer(printer: Any) -> tuple:
    """The formatter's identity and options (``functools.partial`` of IPython's ``print_figure``)."""
    if isinstance(printer, functools.partial):
        return (_describe_printer(printer.func), repr(printer.args), repr(sorted(printer.keywords.items())))
    return (getattr(printer, "__module__", ""), getattr(printer, "__qualname__", repr(type(printer))))


@functools.lru_cache(maxsize=4)
def _sources_digest(paths: tuple[Path, ...]) -> str:
    """SHA-256 of the library's and the book's modules, presentation ones included (the figures' code)."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def render_key(fig: Any, *, mime: str, printer: Any) -> str | None:
    """Everything the rendered output of ``printer(fig)`` depends on, hashed; None for an unpicklable figure."""
    import IPython
    import matplotlib
    import PIL
    from matplotlib import ft2font

    from irtbook.cache import source_roots

    digest = figure_digest(fig)
    if digest is None:
        return None
    sources = tuple(p for _, root in source_roots() for p in sorted(root.rglob("*.py")))
    environment = (_sources_digest(sources), matplotlib.__version__,
                   ft2font.__freetype_version__, PIL.__version__, IPython.__version__,
                   repr(sorted((k, repr(v)) for k, v in matplotlib.rcParams.items())))
    return hashlib.sha256(repr((digest, mime, _describe_printer(printer), environment)).encode()).hexdigest()


class CachedFigurePrinter:
    """A display formatter's function for figures that stores what it returns by :func:`render_key`.

    Parameters
    ----------
    printer : callable
        The formatter's own function (``fig -> bytes or str``).
    mime : str
        The formatter's MIME type.
    cache_dir : path-like
        The chapter's cache directory; outputs go to its :data:`SUBDIR` folder.
    """

    def __init__(self, printer: Any, *, mime: str, cache_dir: str | os.PathLike) -> None:
        self.printer = printer
        self.mime = mime
        self.folder = Path(cache_dir) / SUBDIR

    def __call__(self, fig: Any) -> Any:
        """The formatter's output for ``fig``: stored for its key, else drawn and stored."""
        key = render_key(fig, mime=self.mime, printer=self.printer)
        if key is None:
            return self.printer(fig)
        path = self.folder / f"{key[:40]}.pkl"
        if path.exists():
            try:
                with path.open("rb") as fh:
                    return pickle.load(fh)
            except (OSError, EOFError, pickle.UnpicklingError):
                pass  # a damaged entry is drawn again and replaced
        value = self.printer(fig)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), force=True)
        return value


def install(*, cache_dir: str | os.PathLike | None, shell: Any = None) -> None:
    """Wrap the IPython shell's figure formatters with :class:`CachedFigurePrinter`.

    Call it after ``%matplotlib inline`` (which registers the formatters). ``cache_dir=None`` (a
    chapter run without a cache) or no IPython shell leaves everything as it is. Calling it again
    keeps one wrapper per formatter; a later ``%matplotlib`` or change of the inline backend's
    options registers its own functions again, uncached.
    """
    if cache_dir is None:
        return
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is None:
            return
    from matplotlib.figure import Figure

    for mime, formatter in shell.display_formatter.formatters.items():
        try:
            printer = formatter.lookup_by_type(Figure)
        except KeyError:
            continue
        if isinstance(printer, CachedFigurePrinter):
            printer = printer.printer
        formatter.for_type(Figure, CachedFigurePrinter(printer, mime=mime, cache_dir=cache_dir))
