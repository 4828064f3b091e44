"""Wide tables reshaped to fit the book's text column at its ordinary type size.

A table of one row per benchmark and ten or more measures does not fit the column (about 720 px on
a 1280-px page) at the book's table type (``_static/book.css``); rather than setting it smaller, a
chapter turns it on its side with :func:`on_its_side`: one row per measure, one column per benchmark,
each measure keeping its own number format. tests/book/test_browser.py measures the fit and the type.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["on_its_side"]


def _formatted(value, fmt: str, na: str) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return na
    if isinstance(value, bool):
        return "yes" if value else "no"
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def on_its_side(frame: pd.DataFrame, formats: Mapping[str, str] | None = None, *, default: str = "{}",
                na: str = "-", measure: str = "") -> pd.DataFrame:
    """``frame`` transposed, its cells formatted as text: one row per column of ``frame``.

    Parameters
    ----------
    frame : DataFrame, shape (rows, columns)
        One row per benchmark (or model), indexed by its name; one column per measure.
    formats : mapping, optional
        Column -> format string (``"{:.3f}"``, ``"{:.1%}"``, ``"{:,}"``); other columns use ``default``.
        Booleans read ``yes`` or ``no``, missing values ``na``.
    default : str
        The format of the columns ``formats`` does not name.
    na : str
        The text of a missing value.
    measure : str
        The name of the new index (the measures); empty: none.

    Returns
    -------
    DataFrame, shape (columns, rows)
        Text cells; the index is ``frame``'s columns, the columns ``frame``'s index.
    """
    formats = dict(formats or {})
    unknown = sorted(set(formats) - set(frame.columns))
    if unknown:
        raise KeyError(f"formats name columns the table does not have: {unknown}")
    cells = pd.DataFrame({c: [_formatted(v, formats.get(c, default), na) for v in frame[c]] for c in frame.columns},
                         index=frame.index)
    turned = cells.T
    turned.index.name = measure or None      # an empty name would still draw an empty header row
    turned.columns.name = None
    return turned
