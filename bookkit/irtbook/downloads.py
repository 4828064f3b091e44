"""Downloads beside a chapter: the tables it computed, as CSV, each with a one-line description.

A chapter writes a table with :func:`write` while it runs; the files go to the build
(``_build/downloads/<chapter>/``, never to the repository: they are data), and
``tools/make_build_tree.py`` copies that folder into the rendered tree at :data:`SITE_DIR`, where the
chapter's MyST ``{download}`` links (:func:`markdown`) find them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["ENV", "DEFAULT_DIR", "SITE_DIR", "Download", "write", "markdown", "item_parameters"]

#: Where the chapters write their CSV files: ``$IRTLIB_BOOK_DOWNLOADS``, else :data:`DEFAULT_DIR`.
ENV = "IRTLIB_BOOK_DOWNLOADS"
DEFAULT_DIR = "_build/downloads"
#: The folder of the rendered book's source tree holding them (``{download}`` paths start here).
SITE_DIR = "book_downloads"

_NAME = re.compile(r"^[a-z0-9][a-z0-9_\-]*$")


@dataclass(frozen=True)
class Download:
    """One CSV file a chapter wrote: its chapter, file name, rows and description."""

    chapter: str
    filename: str
    rows: int
    description: str

    @property
    def site_path(self) -> str:
        """The path a ``{download}`` role gives, from the root of the book's source tree."""
        return f"/{SITE_DIR}/{self.chapter}/{self.filename}"


def _root() -> Path:
    return Path(os.environ.get(ENV) or DEFAULT_DIR)


def write(frame: pd.DataFrame, name: str, *, chapter: str, description: str, index: bool = False) -> Download:
    """Write ``frame`` as ``<downloads>/<chapter>/<name>.csv`` and describe it.

    Parameters
    ----------
    frame : DataFrame
        The table, tidy (one row per observation); its index is written only with ``index=True``.
    name : str
        The file's stem: lower-case letters, digits, ``_`` and ``-``.
    chapter : str
        The chapter's stem (``"02_fit"``).
    description : str
        One sentence: what a row is, what the columns hold, which data and engine produced it.
    index : bool
        Write the index as the first column(s).

    Returns
    -------
    Download
    """
    if not _NAME.match(name) or not _NAME.match(chapter):
        raise ValueError(f"download names are lower-case letters, digits, '_' and '-': got {chapter!r}/{name!r}")
    folder = _root() / chapter
    folder.mkdir(parents=True, exist_ok=True)
    filename = f"{name}.csv"
    frame.to_csv(folder / filename, index=index)
    return Download(chapter, filename, int(len(frame)), " ".join(description.split()))


def markdown(files) -> str:
    """A MyST bullet list linking each file (``{download}`` role) with its rows and description."""
    return "\n".join(f"- {{download}}`{d.filename} <{d.site_path}>` ({d.rows:,} rows): {d.description}"
                     for d in files)


def item_parameters(fits, benches, *, engine: str) -> pd.DataFrame:
    """Every benchmark's fitted item parameters in one tidy table.

    Parameters
    ----------
    fits : mapping
        Benchmark id -> ``Calibration`` (``a`` and ``b`` indexed by item).
    benches : mapping
        Benchmark id -> ``Benchmark`` (for the display name and the data's label).
    engine : str
        The engine that produced the fits, in words.

    Returns
    -------
    DataFrame
        Columns ``benchmark``, ``item``, ``a``, ``b``, ``engine``, ``data``.
    """
    parts = []
    for b, cal in fits.items():
        parts.append(pd.DataFrame({"benchmark": benches[b].display_name, "item": cal.a.index.astype(str),
                                   "a": cal.a.to_numpy(), "b": cal.b.reindex(cal.a.index).to_numpy(),
                                   "engine": engine, "data": benches[b].data.label}))
    return pd.concat(parts, ignore_index=True)
