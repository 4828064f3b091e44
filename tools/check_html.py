#!/usr/bin/env python3
"""Checks on the built book's HTML, as small functions of one page's HTML text.

tests/book/test_book_build.py and tests/book/test_browser.py apply them to ``_build/html``
(and test them on hand-made HTML, so each can be seen to fail).  Run by hand::

    python tools/check_html.py [_build/html]

prints every problem found on the pages of the table of contents and exits 1 if
there is any.  Needs BeautifulSoup (installed with jupyter-book).

What a rendered code cell looks like (myst-nb 1.x): ``div.cell`` with the classes
``tag_<tag>`` of its tags; its code in ``div.cell_input``; a folded input
(``hide-input``, ``hide-cell``) sits inside a ``<details>`` element.
"""

from __future__ import annotations

import functools
import re
import sys
from pathlib import Path

from bs4 import BeautifulSoup

QUICK_BANNER_CLASS = "quick-build"
# the words of irtbook.scorecard.VERDICTS
VERDICTS = frozenset({"reproduced", "close", "partly", "not reproduced", "reversed", "not testable here"})
LONG_DECIMAL = re.compile(r"\d\.\d{4,}")
PARAMETER_ASSIGNMENT = re.compile(r"^\s*QUICK\s*=", re.M)
# Hand-written pages whose tables hold exact values with more decimals, not computed numbers
# (none since the datasheet's tables are rewritten for the book: tools/wide_tables.py).
DECIMALS_EXEMPT: dict[str, str] = {}
# URLs no page may carry: the placeholder repository of old, and jupyter-book's own default
PLACEHOLDER_URL = re.compile(r"https?://github\.com/(?:example|executablebooks/jupyter-book)\b[^\s\"'<]*", re.I)


@functools.lru_cache(maxsize=64)
def _soup(html: str) -> BeautifulSoup:
    """The page parsed once (several checks read the same page; none of them changes the tree)."""
    return BeautifulSoup(html, "html.parser")


def _text(element) -> str:
    return re.sub(r"\s+", " ", element.get_text(" ", strip=True)).strip()


def code_inputs(html: str) -> list[tuple[str, bool]]:
    """Every code cell's source on the page, with whether it is visible without a click.

    A cell input is folded when it sits inside a ``<details>`` element (myst-nb's
    ``hide-input`` and ``hide-cell``).
    """
    found = []
    for element in _soup(html).select("div.cell_input"):
        folded = element.find_parent("details") is not None
        found.append((element.get_text(), not folded))
    return found


def hidden_code_problems(html: str) -> list[str]:
    """Parameters or glue code shown on the page.

    * a cell of papermill's (tagged ``parameters`` or ``injected-parameters``) on the page,
      folded or not;
    * ``QUICK = ...`` in any code on the page (only the parameters cells set it);
    * ``glue(`` in code visible without a click.
    """
    soup = _soup(html)
    problems = []
    for tag in ("parameters", "injected-parameters"):
        if soup.select(f"div.cell.tag_{tag}"):
            problems.append(f"a cell tagged {tag} is on the page")
    for source, visible in code_inputs(html):
        first = source.strip().splitlines()[0][:60] if source.strip() else ""
        if PARAMETER_ASSIGNMENT.search(source):
            problems.append(f"code setting QUICK is on the page: {first!r}")
        if visible and "glue(" in source:
            problems.append(f"visible code calls glue(): {first!r}")
    return problems


def long_decimals(html: str) -> list[str]:
    """Texts of table cells (``<td>``) holding a number with more than three decimals."""
    return [text for td in _soup(html).find_all("td") if LONG_DECIMAL.search(text := _text(td))]


def placeholder_urls(html: str) -> list[str]:
    """Placeholder or default repository URLs anywhere in the page's HTML."""
    return PLACEHOLDER_URL.findall(html)


def download_links(html: str) -> dict[str, list[str]]:
    """``{"wheel": [...], "book_wheel": [...], "source": [...]}``: hrefs of the page's links to the shipped code."""
    links = {"wheel": [], "book_wheel": [], "source": []}
    for a in _soup(html).find_all("a", href=True):
        href = a["href"]
        if re.search(r"_downloads/[^\s]*/irtlib-[^/]+\.whl$", href):
            links["wheel"].append(href)
        elif re.search(r"_downloads/[^\s]*/irtbook-[^/]+\.whl$", href):
            links["book_wheel"].append(href)
        elif re.search(r"_downloads/[^\s]*/safety-irt-[^/]+-src\.tar\.gz$", href):
            links["source"].append(href)
    return links


def section_text(html: str, heading: str) -> str | None:
    """The text of the page's section headed ``heading`` (its heading left out), or None without one."""
    for section in _soup(html).find_all("section"):
        title = section.find(re.compile(r"^h[1-6]$"))
        if title is not None and _text(title).rstrip("#").strip() == heading:
            title.extract()
            return _text(section)
    return None


def csv_links(html: str) -> list[str]:
    """The hrefs of the page's links to CSV files (a chapter's downloads)."""
    return [a["href"] for a in _soup(html).find_all("a", href=True) if a["href"].split("?")[0].endswith(".csv")]


def parameter_rows(html: str) -> list[list[str]] | None:
    """Rows (name, default, text) of the page's Reproduce-box parameter table, or None."""
    table = _soup(html).select_one("table.reproduce-parameters")
    if table is None:
        return None
    rows = [[_text(cell) for cell in row.find_all(["th", "td"])] for row in table.find_all("tr")]
    return rows[1:]


def has_quick_banner(html: str) -> bool:
    """True when the page carries the QUICK-build admonition (class ``quick-build``)."""
    return bool(_soup(html).select(f".admonition.{QUICK_BANNER_CLASS}"))


def mathjax_sources(html: str) -> list[str]:
    """The ``src`` of every ``<script>`` that loads MathJax."""
    return [s["src"] for s in _soup(html).find_all("script", src=True) if "mathjax" in s["src"].lower()]


def local_mathjax_problems(html: str, page: Path, html_root: Path) -> list[str]:
    """MathJax must be loaded from a file under ``html_root`` (never a URL)."""
    problems = []
    for src in mathjax_sources(html):
        if re.match(r"^[a-z]+:|^//", src, re.I):
            problems.append(f"MathJax loaded from {src}")
            continue
        target = (page.parent / src.split("?")[0]).resolve()
        if html_root.resolve() not in target.parents or not target.is_file():
            problems.append(f"MathJax script {src} is not a file of the book ({target})")
    return problems


def verdict_cells(html: str) -> list[str] | None:
    """The texts under every column headed "verdict", or None when no table has one.

    Works on plain HTML tables and on pandas Styler tables (whose body rows start with
    ``<th>`` index cells): cells are counted by position in their row, ``th`` and
    ``td`` alike, taking ``colspan`` into account.
    """
    found = None
    for table in _soup(html).find_all("table"):
        rows = table.find_all("tr")
        column = None
        for row in rows:
            position, positions = 0, []
            for cell in row.find_all(["th", "td"], recursive=False):
                positions.append((position, cell))
                position += int(cell.get("colspan", 1) or 1)
            if column is None:
                for pos, cell in positions:
                    if cell.name == "th" and _text(cell).lower() == "verdict":
                        column = pos
                        found = [] if found is None else found
                        break
                continue
            for pos, cell in positions:
                if pos == column:
                    found.append(_text(cell))
    return found


def bad_verdicts(html: str) -> list[str]:
    """Verdicts outside ``VERDICTS``; ['no verdict column'] when there is none."""
    cells = verdict_cells(html)
    if not cells:
        return ["no table with a 'verdict' header cell and rows"]
    return [cell for cell in cells if cell.lower() not in VERDICTS]


def main(argv: list[str] | None = None) -> int:
    """The command line: check the built HTML under the directory named (default _build/html)."""
    argv = sys.argv[1:] if argv is None else argv
    html_root = Path(argv[0] if argv else "_build/html")
    bad = 0
    for page in sorted(html_root.glob("book/*.html")):
        html = page.read_text(encoding="utf-8")
        problems = hidden_code_problems(html)
        if f"book/{page.stem}" not in DECIMALS_EXEMPT:
            problems += [f"long decimal in a table: {t[:80]!r}" for t in long_decimals(html)]
        problems += local_mathjax_problems(html, page, html_root)
        problems += [f"placeholder URL {url}" for url in placeholder_urls(html)]
        for problem in problems:
            print(f"{page}: {problem}")
        bad += bool(problems)
    print(f"check_html: {bad} page(s) with problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
