"""Comparison tables: the paper's value, ours, the difference, and the verdict.

The verdict column is never a separate yes/no: a row that is one of the scorecard's claims carries
that claim's verdict (``row(..., verdict=claim.verdict)``), and any other row is judged by the
scorecard's own rules (:func:`irtbook.scorecard.value_verdict` at the decimals the paper prints
the number with, :func:`irtbook.scorecard.count_verdict` for counts), so the same number gets
the same word on every page.

Every chapter ends with one. Each row names the paper number it compares against by its
reference in :func:`irtlib.datasets.paper.numbers` (e.g. ``"FIGURE3_CV[wmdp-bio]"``), so a test can check
that every number the paper reports is set beside ours somewhere in the book. The reader sees
where the number stands in the paper instead (:func:`cite`, e.g. "Figure 3"); the rendered table
keeps the reference only as the tooltip (``title`` attribute) of that cell.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from irtlib.datasets import paper

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["Row", "row", "judge", "cite", "comparison_table", "tally", "style_comparison"]


@dataclass(frozen=True)
class Row:
    """One comparison: a paper number (by reference) against our value, and its verdict."""

    quantity: str
    ref: str
    paper: object
    ours: object
    verdict: str = "n/a"
    note: str = ""


def row(quantity: str, ref: str, ours, *, verdict: str | None = None, judged: bool = True, note: str = "") -> Row:
    """A comparison row whose paper value is looked up by reference.

    Parameters
    ----------
    quantity : str
        What is compared, in words ("CV of a, WMDP (Bio)").
    ref : str
        A key of :func:`irtlib.datasets.paper.numbers`; an unknown key raises ``KeyError``.
    ours : number, str or None
        Our value (``None`` when we have none, e.g. a threshold never reached).
    verdict : str, optional
        The verdict of the scorecard claim this row shows (the row then repeats it, never
        recomputes it). Default: the scorecard's rule for the number (:func:`judge`).
    judged : bool
        False for facts compared only by eye (verdict "n/a", not counted).
    note : str
        Why a difference arises, where it does.
    """
    from .scorecard import VERDICTS

    numbers = paper.numbers()
    if ref not in numbers:
        raise KeyError(f"no paper number {ref!r}; see irtlib.datasets.paper.numbers()")
    if verdict is not None and verdict not in VERDICTS:
        raise ValueError(f"verdict {verdict!r} is not one of {VERDICTS}")
    if verdict is None:
        verdict = judge(ref, ours) if judged else "n/a"
    return Row(quantity, ref, numbers[ref], ours, verdict, note)


def judge(ref: str, ours) -> str:
    """The scorecard's verdict on our value for one paper number.

    Counts (integers) by the count rule, every other number by the value rule at the decimals the
    paper prints it with (:func:`irtlib.datasets.paper.printed_decimals`); a missing value of ours
    (a threshold never reached) is "not reproduced"; a text value ("467k") is "n/a".

    Examples
    --------
    >>> judge("TABLE2_LEFT[harmbench].fluid", 0.897), judge("TABLE2_LEFT[harmbench].fluid", 0.885)
    ('reproduced', 'close')
    >>> judge("CEILING[anthropic-red-team].above", 66)
    'not reproduced'
    """
    from .scorecard import count_verdict, value_verdict

    value = paper.numbers()[ref]
    if ours is None or (isinstance(ours, float) and math.isnan(ours)):
        return "not reproduced"
    if not (_is_number(value) and _is_number(ours)):
        return "n/a"
    if isinstance(value, int) and float(ours).is_integer():
        return count_verdict([int(ours)], [value])
    return value_verdict(float(ours), float(value), decimals=paper.printed_decimals(ref), close=paper.close_band(ref))


def _is_number(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and not (isinstance(x, float) and math.isnan(x))


def _rounded(x, digits):
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(x)
    if _is_number(x) and float(x).is_integer() and abs(x) >= 1:
        return int(x)
    return round(float(x), digits) if _is_number(x) else x


#: Where in the paper each table of :mod:`irtlib.datasets.paper` is reported.
_CITATIONS = {
    "TABLE1": "Table 1",
    "FIGURE3_CV": "Figure 3",
    "ITEM_RMSE": "Appendix E",
    "CEILING": "Ceiling separation (Results)",
    "SPEARMAN_THETA_SCORE": "Figure 2",
    "TABLE2_LEFT": "Table 2, left column",
    "TABLE2_RIGHT": "Table 2, right column",
    "SAFETYBENCH_APPENDIX_F": "Appendix F",
    "VARIANCE_FILTER": "Binarization (Method)",
    "PRIORS": "Appendix B",
    "ABILITY_ESTIMATION": "Model: 2PL (Method)",
    "PROTOCOL": "Evaluation (Method)",
}

_REF = re.compile(r"^([A-Z0-9_]+)\[([^\]]+)\](.*)$")


def cite(ref: str) -> str:
    """Where in the paper a number stands, in words, from its reference.

    Parameters
    ----------
    ref : str
        A key of :func:`irtlib.datasets.paper.numbers` (``"TABLE2_LEFT[airbench2024].fluid"``).

    Returns
    -------
    str
        E.g. ``"Table 2, left column"``, ``"Figure 3"``, ``"Appendix E"``, ``"Abstract (savings)"``.

    Examples
    --------
    >>> cite("TABLE2_RIGHT[harmbench].values.fluid")
    'Table 2, right column'
    >>> cite("SAVINGS[abstract_static_range].1")
    'Abstract (savings)'
    """
    m = _REF.match(ref)
    if not m:
        raise KeyError(f"not a paper reference: {ref!r}")
    family, key = m.group(1), m.group(2)
    if family == "SAVINGS":        # the abstract states some savings, the body (Results) the others
        return "Abstract (savings)" if key.startswith("abstract") else "Results, savings (body)"
    if family in _CITATIONS:
        return _CITATIONS[family]
    table = getattr(paper, family, None)
    if isinstance(table, paper.PaperTable):
        return table.source[:1].upper() + table.source[1:]
    raise KeyError(f"no paper table {family!r} (reference {ref!r})")


def _is_percent(ref: str) -> bool:
    """Numbers the paper prints as percentages: k/N of Table 2 and every saving."""
    return ref.endswith("k_over_n") or ref.startswith("SAVINGS[")


def comparison_table(rows, *, digits: int = 3) -> pd.DataFrame:
    """Lay rows out as the book's comparison table.

    Returns
    -------
    DataFrame
        Columns ``quantity``, ``paper``, ``ours``, ``difference`` (ours - paper, where both are
        numbers), ``verdict`` (a word of :data:`irtbook.scorecard.VERDICTS`, or "n/a" for a
        fact compared by eye), ``note``, ``source in the paper`` (where the paper reports it,
        :func:`cite`) and ``ref`` (the key of :func:`irtlib.datasets.paper.numbers`; hidden by
        :func:`style_comparison`).
    """
    records = []
    for r in rows:
        both = _is_number(r.paper) and _is_number(r.ours)
        diff = float(r.ours) - float(r.paper) if both else None
        records.append({
            "quantity": r.quantity,
            "paper": r.paper,
            "ours": "not reached" if r.ours is None else _rounded(r.ours, digits),
            "difference": "" if diff is None else _rounded(diff, digits),
            "verdict": r.verdict,
            "note": r.note,
            "source in the paper": cite(r.ref),
            "ref": r.ref,
        })
    table = pd.DataFrame.from_records(records, columns=COLUMNS)
    return table.astype(object)


def tally(table: pd.DataFrame) -> dict:
    """How many judged rows of a comparison table carry each verdict (rows "n/a" left out).

    Returns
    -------
    dict
        ``judged`` (rows with a verdict) and one count per word of
        :data:`irtbook.scorecard.VERDICTS`.
    """
    from .scorecard import VERDICTS

    judged = table[table["verdict"] != "n/a"]
    return {"judged": len(judged), **{v: int((judged["verdict"] == v).sum()) for v in VERDICTS}}


#: Columns of :func:`comparison_table`, in order.
COLUMNS = ["quantity", "paper", "ours", "difference", "verdict", "note", "source in the paper", "ref"]
_NUMERIC = ("paper", "ours", "difference")


def _shown(value, *, percent: bool = False) -> str:
    """One cell as the reader sees it: at most three decimals, percentages with one, integers with commas."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, (bool, np.bool_)) or not _is_number(value):
        return html.escape(str(value))
    if percent:
        text = f"{float(value):.1%}"
        return "0.0%" if text == "-0.0%" else text
    if isinstance(value, (int, np.integer)) or float(value).is_integer():
        return f"{int(value):,}"
    text = f"{float(value):,.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def style_comparison(table: pd.DataFrame, *, caption: str | None = None):
    """Render a comparison table in full (every row, no index), rows not reproduced shaded.

    Every number is shown with at most three decimals (trailing zeros dropped), integers with
    thousands separators, and the numbers the paper prints as percentages (Table 2's k/N, the
    savings) as percentages with one decimal. The ``ref`` column is hidden; each reference stays
    in the HTML as the tooltip of its "source in the paper" cell.

    Parameters
    ----------
    table : DataFrame
        From :func:`comparison_table`.
    caption : str, optional
        A caption above the table.

    Returns
    -------
    pandas Styler
        Unlike a DataFrame's own display, a Styler is never truncated to ``display.max_rows``.
    """
    refs = table["ref"] if "ref" in table.columns else pd.Series("", index=table.index)
    shown = pd.DataFrame(index=table.index)
    for col in table.columns:
        if col in _NUMERIC:
            shown[col] = [_shown(v, percent=_is_percent(ref)) for v, ref in zip(table[col], refs)]
        elif col == "source in the paper":
            shown[col] = [f'<span title="{html.escape(ref)}">{html.escape(str(v))}</span>' for v, ref in zip(table[col], refs)]
        else:
            shown[col] = [_shown(v) for v in table[col]]

    def shade(r):
        colour = ("background-color: #fde2e1" if r["verdict"] in ("not reproduced", "reversed") else
                  "background-color: #fff4d6" if r["verdict"] in ("close", "partly") else "")
        return [colour] * len(r)

    styler = shown.style.apply(shade, axis=1).hide(axis="index")
    if "ref" in shown.columns:
        styler = styler.hide(subset=["ref"], axis="columns")
    if caption:
        styler = styler.set_caption(html.escape(caption))
    return styler
