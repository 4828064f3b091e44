"""Let papermill run the book's chapters straight from their MyST Markdown sources.

``papermill book/05_selection.md out.ipynb -p N_SPLITS 20`` works because irtlib registers a
papermill I/O handler (:class:`JupytextHandler`, in :mod:`irtbook._papermill_handler`) as a
``papermill.io`` entry point. papermill imports that module while it loads its entry points, so
the handler lives in a module of its own; this one imports papermill first (which installs the
handler) and re-exports it, so that ``import irtbook.papermill_io`` works whether or not
papermill was imported before.
"""

from __future__ import annotations

import papermill.iorw  # noqa: F401  (loads the entry points, which define and install the handler)

from ._papermill_handler import TEXT_SUFFIXES, JupytextHandler, install

__all__ = ["JupytextHandler", "TEXT_SUFFIXES", "install"]
