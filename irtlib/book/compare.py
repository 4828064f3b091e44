"""Comparison tables: the paper's value, ours, the difference, and whether it is within tolerance.

Every chapter ends with one. Each row names the paper number it compares against by its
reference in :func:`irtlib.book.paper.numbers` (e.g. ``"FIGURE3_CV[wmdp-bio]"``), so a test can check
that every number the paper reports is set beside ours somewhere in the book.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import paper

__all__ = ["Row", "row", "comparison_table", "style_comparison"]


@dataclass(frozen=True)
class Row:
    """One comparison: a paper number (by reference) against our value."""

    quantity: str
    ref: str
    paper: object
    ours: object
    tolerance: float | None = None
    note: str = ""


def row(quantity: str, ref: str, ours, *, tolerance: float | None = None, note: str = "") -> Row:
    """A comparison row whose paper value is looked up by reference.

    Parameters
    ----------
    quantity : str
        What is compared, in words ("CV of a, WMDP (Bio)").
    ref : str
        A key of :func:`irtlib.book.paper.numbers`; an unknown key raises ``KeyError``.
    ours : number, str or None
        Our value (``None`` when we have none, e.g. a threshold never reached).
    tolerance : float, optional
        Largest absolute difference called agreement; ``None`` for facts compared only by eye.
    note : str
        Why a difference arises, where it does.
    """
    numbers = paper.numbers()
    if ref not in numbers:
        raise KeyError(f"no paper number {ref!r}; see irtlib.book.paper.numbers()")
    return Row(quantity, ref, numbers[ref], ours, tolerance, note)


def _is_number(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and not (isinstance(x, float) and math.isnan(x))


def _rounded(x, digits):
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(x)
    if _is_number(x) and float(x).is_integer() and abs(x) >= 1:
        return int(x)
    return round(float(x), digits) if _is_number(x) else x


def comparison_table(rows, *, digits: int = 3) -> pd.DataFrame:
    """Lay rows out as the book's comparison table.

    Returns
    -------
    DataFrame
        Columns ``quantity``, ``paper``, ``ours``, ``difference`` (ours - paper, where both are
        numbers), ``tolerance``, ``within`` ("yes" / "no" / "n/a"), ``note`` and ``paper ref``.
    """
    records = []
    for r in rows:
        both = _is_number(r.paper) and _is_number(r.ours)
        diff = float(r.ours) - float(r.paper) if both else None
        if diff is None or r.tolerance is None:
            within = "n/a"
        else:
            within = "yes" if abs(diff) <= r.tolerance + 1e-12 else "no"
        records.append({
            "quantity": r.quantity,
            "paper": r.paper,
            "ours": "not reached" if r.ours is None else _rounded(r.ours, digits),
            "difference": "" if diff is None else _rounded(diff, digits),
            "tolerance": "" if r.tolerance is None else r.tolerance,
            "within": within,
            "note": r.note,
            "paper ref": r.ref,
        })
    table = pd.DataFrame.from_records(records, columns=["quantity", "paper", "ours", "difference", "tolerance",
                                                        "within", "note", "paper ref"])
    return table.astype(object)


def style_comparison(table: pd.DataFrame):
    """Render a comparison table in full (every row, no index), rows outside tolerance shaded.

    Returns
    -------
    pandas Styler
        Unlike a DataFrame's own display, a Styler is never truncated to ``display.max_rows``.
    """
    def shade(r):
        colour = "background-color: #fde2e1" if r["within"] == "no" else ""
        return [colour] * len(r)

    def number(v):
        if isinstance(v, float):
            return f"{v:.3f}".rstrip("0").rstrip(".") if v != int(v) else f"{int(v)}"
        return str(v)

    return table.style.apply(shade, axis=1).format(number).hide(axis="index")
