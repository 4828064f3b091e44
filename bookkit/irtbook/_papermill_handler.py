"""Let papermill run the book's chapters straight from their MyST Markdown sources.

The chapters are jupytext notebooks (``book/<chapter>.md``). Out of the box papermill reads only
JSON notebooks, so ``papermill book/05_selection.md out.ipynb`` fails with "not JSON". This
module is registered as a papermill I/O handler by irtlib's ``pyproject.toml``::

    [project.entry-points."papermill.io"]
    "jupytext://" = "irtbook._papermill_handler:JupytextHandler"

papermill loads every ``papermill.io`` entry point when it starts. Loading this one does two
things:

* it registers :class:`JupytextHandler` for paths written ``jupytext://book/05_selection.md``;
* it puts :class:`JupytextHandler` in place of papermill's local-file handler, so that plain
  paths work too: a path whose suffix is a jupytext text format (``.md``, ``.py``, ``.Rmd``, ...)
  is read through ``jupytext`` (and written through it, should the *output* be such a path);
  every other path (``.ipynb``, ``.json``, ...) is read and written exactly as papermill's own
  handler does.

So, from the repository root::

    papermill book/05_selection.md _build/05_selection.ipynb -p N_SPLITS 20

(papermill's warning that such an input "does not end in one of ['.ipynb', '.json']" is
silenced for these suffixes.)
"""

from __future__ import annotations

from pathlib import Path

from papermill.iorw import LocalHandler
from papermill.utils import chdir

__all__ = ["JupytextHandler", "TEXT_SUFFIXES", "install"]

SCHEME = "jupytext://"
#: Suffixes read through jupytext rather than as JSON.
TEXT_SUFFIXES = (".md", ".markdown", ".myst", ".mystnb", ".py", ".Rmd", ".qmd", ".jl", ".R")


def _strip(path: str) -> str:
    return path[len(SCHEME):] if path.startswith(SCHEME) else path


def _is_text_notebook(path: str) -> bool:
    return Path(path.split("?")[0]).suffix in TEXT_SUFFIXES


class JupytextHandler(LocalHandler):
    """papermill's local-file handler that reads and writes jupytext text notebooks."""

    def read(self, path):
        path = _strip(path)
        if not _is_text_notebook(path):
            return super().read(path)
        import jupytext

        with self._in_cwd():
            notebook = jupytext.read(path)
        return jupytext.writes(notebook, fmt="ipynb")

    def write(self, buf, path):
        path = _strip(path)
        if not _is_text_notebook(path):
            return super().write(buf, path)
        import jupytext
        import nbformat

        with self._in_cwd():
            jupytext.write(nbformat.reads(buf, as_version=4), path)
        return None

    def pretty_path(self, path):
        return _strip(path)

    def listdir(self, path):
        return super().listdir(_strip(path))

    def _in_cwd(self):
        """Papermill's own working-directory switch for local files (``None``: stay)."""
        return chdir(self._cwd)


def install(io=None) -> JupytextHandler:
    """Put a :class:`JupytextHandler` in place of papermill's local handler(s); return it.

    ``io`` defaults to papermill's registry. Safe to call more than once.
    """
    if io is None:
        from papermill.iorw import papermill_io as io
    import re
    import warnings

    suffixes = "|".join(re.escape(s) for s in TEXT_SUFFIXES)
    warnings.filterwarnings("ignore", message=rf"The specified file \(.*({suffixes})\) does not end in one of",
                            category=UserWarning)
    handler = JupytextHandler()
    io._handlers = [(scheme, handler if scheme == "local" else h) for scheme, h in io._handlers]
    return handler


# papermill imports this module while it loads its entry points (papermill.iorw is then still
# being imported, but its registry already holds the local handler): replace that handler.
install()
