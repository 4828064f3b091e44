"""Markdown tables that fit the book's text column (the generated pages: the datasheet).

``data/README.md`` is written for GitHub, where a wide table scrolls; in the book the text column
is about 700 px and a table of eight or thirteen columns either overflows or squeezes its cells
into rows hundreds of pixels tall. :func:`fit_tables` rewrites every pipe table of a Markdown
text for the book:

* a column of prose (cells averaging more than ``prose_chars`` characters) in a table of more
  than two columns leaves the table: it follows it as a list, one item per row, headed by the
  row's first cell (the parameter table's "why");
* a table of more than ``max_columns`` columns is split into tables of at most that many,
  each repeating the first column (the calibration table: shapes, then the fit);
* a number with more than three decimals is written in scientific notation with at most three
  significant digits (``0.0005`` becomes ``5e-04``);
* each table is wrapped in a MyST ``{table}`` directive with the class ``table2-compact`` (tight
  padding at the book's one table type size: ``_static/book.css``).

Text inside code fences is left alone.
"""

from __future__ import annotations

import re

TABLE_CLASS = "table2-compact"
_ROW = re.compile(r"^\s*\|.*\|\s*$")
_RULE = re.compile(r"^\s*\|(\s*:?-{3,}:?\s*\|)+\s*$")
_LONG_DECIMAL = re.compile(r"(?<![\w.])(-?\d+\.\d{4,})(?![\w.])")


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def short_number(text: str) -> str:
    """``text`` with every number of more than three decimals shortened.

    At least 0.01 in size: rounded to three decimals (``0.12345`` -> ``0.123``); smaller:
    scientific notation with at most three significant digits (``0.0005`` -> ``5e-04``).
    """
    def sub(match: re.Match) -> str:
        value = float(match.group(1))
        if value == 0:
            return "0"
        if abs(value) >= 0.01:
            return f"{value:.3f}"
        mantissa, exponent = f"{value:.2e}".split("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{exponent}"
    return _LONG_DECIMAL.sub(sub, text)


def _render(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["```{table}", f":class: {TABLE_CLASS}", "", _row(header), "|" + "---|" * len(header),
            *[_row(r) for r in rows], "```"]


def _split(columns: list[int], header: list[str], size: int) -> list[list[int]]:
    """``columns`` in runs of at most ``size``, as even as possible.

    Headers that share their first word ("CV a paper", "CV a ours") stay in one run.
    """
    if len(columns) <= size:
        return [columns]
    n_parts = -(-len(columns) // size)
    target = -(-len(columns) // n_parts)
    parts, current = [], []
    for index, j in enumerate(columns):
        first = header[j].split()[0] if header[j].split() else ""
        after = columns[index + 1] if index + 1 < len(columns) else None
        current.append(j)
        same_next = after is not None and header[after].split()[:1] == [first]
        if len(current) >= target and not same_next:
            parts.append(current)
            current = []
        elif len(current) == size:          # full in the middle of a group: the group moves on
            carry = [c for c in current if (header[c].split()[:1] == [first])]
            carry = carry if len(carry) < len(current) else []
            parts.append(current[: len(current) - len(carry)])
            current = carry
    if current:
        parts.append(current)
    return parts


def fit_table(header: list[str], rows: list[list[str]], *, max_columns: int = 8,
              prose_chars: int = 40) -> list[str]:
    """The lines that replace one pipe table (see the module docstring)."""
    rows = [[short_number(cell) for cell in row] + [""] * (len(header) - len(row)) for row in rows]
    prose = []
    if len(header) > 2:
        prose = [j for j in range(1, len(header))
                 if rows and sum(len(r[j]) for r in rows) / len(rows) > prose_chars]
    keep = [j for j in range(len(header)) if j not in prose]
    out: list[str] = []
    groups = [keep[:1] + part for part in _split(keep[1:], header, max_columns - 1)]
    for index, columns in enumerate(groups):
        if index:
            out.append("")
        out += _render([header[j] for j in columns], [[r[j] for j in columns] for r in rows])
    for j in prose:
        out += ["", f"{header[j].capitalize()}:", ""]
        out += [f"- {r[0]}: {r[j]}" for r in rows]
    return out


def fit_tables(text: str, **options) -> str:
    """``text`` with every pipe table outside code fences rewritten by :func:`fit_table`."""
    lines = text.split("\n")
    out: list[str] = []
    fence = None
    i = 0
    while i < len(lines):
        line = lines[i]
        marker = re.match(r"^\s*(`{3,}|~{3,})", line)
        if marker:
            fence = None if fence and line.strip().startswith(fence) else (fence or marker.group(1))
        if fence is None and _ROW.match(line) and i + 1 < len(lines) and _RULE.match(lines[i + 1]):
            header = _cells(line)
            j = i + 2
            rows = []
            while j < len(lines) and _ROW.match(lines[j]):
                rows.append(_cells(lines[j]))
                j += 1
            out += fit_table(header, rows, **options)
            i = j
            continue
        out.append(line)
        i += 1
    return "\n".join(out)
