"""The built book's HTML (_build/html) as its readers meet it.

The checks are small functions of one page's HTML (tools/check_html.py).  Each is
first shown to fail on hand-made HTML, then applied to every page of the built
book; the built-book tests skip when ``_build/html`` is absent (run
``make book QUICK=1`` or ``make book``).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
sys.path.insert(0, str(ROOT / "tools"))
pytest.importorskip("bs4", reason="BeautifulSoup comes with jupyter-book: make venv")
import chapters  # noqa: E402  (tools/chapters.py)
import check_html  # noqa: E402  (tools/check_html.py)


# ---------------------------------------------------------------------------
# the checks, on hand-made HTML
# ---------------------------------------------------------------------------
def _cell(source: str, *tags: str, folded: bool = False, output: str = "") -> str:
    classes = " ".join(f"tag_{t}" for t in tags)
    code = f'<div class="cell_input docutils container"><div class="highlight"><pre>{source}</pre></div></div>'
    if folded:
        code = f'<details class="hide above-input"><summary>Show code cell source</summary>{code}</details>'
    return f'<div class="cell {classes} docutils container">{code}<div class="cell_output">{output}</div></div>'


def _page(*body: str) -> str:
    return "<html><head><title>t</title></head><body><article>" + "".join(body) + "</article></body></html>"


def test_hidden_code_check_fails_on_parameters_and_visible_glue():
    good = _page(_cell("x = f()\nglue('x', x)", "hide-input", folded=True), _cell("fit(model)", "show-input"),
                 _cell("n = 10 if QUICK else 100", folded=True))
    assert check_html.hidden_code_problems(good) == []
    assert check_html.hidden_code_problems(_page(_cell("glue('x', 1)", "show-input"))) == [
        "visible code calls glue(): \"glue('x', 1)\""]
    assert check_html.hidden_code_problems(_page(_cell("QUICK = False\nSEED = 0", folded=True))) == [
        "code setting QUICK is on the page: 'QUICK = False'"]
    problems = check_html.hidden_code_problems(_page(_cell("# Parameters\nQUICK = True", "injected-parameters")))
    assert "a cell tagged injected-parameters is on the page" in problems and len(problems) == 2
    assert check_html.hidden_code_problems(_page(_cell("N = 1", "parameters"))) == [
        "a cell tagged parameters is on the page"]


def test_decimal_check_fails_on_long_numbers_in_table_cells():
    table = "<table><tr><th>k/N 0.12345</th><td>{}</td></tr></table>"
    assert check_html.long_decimals(_page(table.format("0.123"), "<p>0.123456 in prose is not a table</p>")) == []
    assert check_html.long_decimals(_page(table.format("12.5%"), table.format("1,234"))) == []
    assert check_html.long_decimals(_page(table.format("0.1235"))) == ["0.1235"]
    assert check_html.long_decimals(_page(table.format("[0.912, 0.93456]"))) == ["[0.912, 0.93456]"]


def test_banner_check():
    banner = ('<div class="admonition warning quick-build"><p class="admonition-title">Quick build</p>'
              "<p>This page was built with QUICK=True</p></div>")
    assert check_html.has_quick_banner(_page("<h1>T</h1>", banner))
    assert not check_html.has_quick_banner(_page("<h1>T</h1>", banner.replace("quick-build", "other")))
    assert not check_html.has_quick_banner(_page("<p class='quick-build'>not an admonition</p>"))


def test_mathjax_check_wants_a_file_of_the_book(tmp_path):
    (tmp_path / "_static" / "mathjax" / "es5").mkdir(parents=True)
    (tmp_path / "_static" / "mathjax" / "es5" / "tex-mml-chtml.js").write_text("x")
    (tmp_path / "book").mkdir()
    page = tmp_path / "book" / "p.html"
    local = '<script defer="defer" src="../_static/mathjax/es5/tex-mml-chtml.js"></script>'
    cdn = '<script defer="defer" src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"></script>'
    assert check_html.mathjax_sources(local) == ["../_static/mathjax/es5/tex-mml-chtml.js"]
    assert check_html.local_mathjax_problems(local, page, tmp_path) == []
    assert check_html.local_mathjax_problems(cdn, page, tmp_path) == [
        "MathJax loaded from https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"]
    missing = local.replace("es5/", "es5/missing-")
    assert "is not a file of the book" in check_html.local_mathjax_problems(missing, page, tmp_path)[0]


def test_verdict_check_reads_the_verdict_column():
    plain = ("<table><thead><tr><th>claim</th><th>verdict</th></tr></thead><tbody>"
             "<tr><td>a</td><td>reproduced</td></tr><tr><td>b</td><td>Not testable here</td></tr></tbody></table>")
    assert check_html.verdict_cells(plain) == ["reproduced", "Not testable here"]
    assert check_html.bad_verdicts(plain) == []
    # a pandas Styler table: a blank index header, <th> index cells in the body
    styler = ('<table id="T_x"><thead><tr><th class="blank level0">&nbsp;</th><th class="col_heading">claim</th>'
              '<th class="col_heading">verdict</th></tr></thead><tbody>'
              '<tr><th class="row_heading">0</th><td>c</td><td>partly</td></tr>'
              '<tr><th class="row_heading">1</th><td>d</td><td>mostly</td></tr></tbody></table>')
    assert check_html.verdict_cells(styler) == ["partly", "mostly"]
    assert check_html.bad_verdicts(styler) == ["mostly"]
    assert check_html.bad_verdicts("<table><tr><th>claim</th></tr><tr><td>x</td></tr></table>") == [
        "no table with a 'verdict' header cell and rows"]


def test_section_and_csv_checks_read_the_page():
    page = _page('<section id="a"><h2>What this chapter found<a class="headerlink" href="#a">#</a></h2>'
                 "<p>It found two things. Both hold.</p></section>",
                 '<section id="b"><h2>Downloads</h2><ul><li><a class="reference download internal" '
                 'href="../_downloads/0a/curves.csv">curves.csv</a></li><li><a href="x.png">x</a></li></ul></section>')
    assert check_html.section_text(page, "What this chapter found") == "It found two things. Both hold."
    assert check_html.section_text(page, "Exercises") is None
    assert check_html.csv_links(page) == ["../_downloads/0a/curves.csv"]
    assert check_html.csv_links(_page("<p>no link</p>")) == []


# ---------------------------------------------------------------------------
# the built book
# ---------------------------------------------------------------------------
PAGES = chapters.pages(ROOT / "_toc.yml", ROOT)


@pytest.fixture(scope="module")
def built():
    if not (HTML / "index.html").is_file():
        pytest.skip(f"no built book at {HTML}: run `make book QUICK=1` (or `make book`) first")
    pages = {}
    for entry, _, notebook in PAGES:
        path = HTML / f"{entry}.html"
        assert path.is_file(), f"{entry} is in _toc.yml but {path} was not built"
        pages[entry] = (path, path.read_text(encoding="utf-8"), notebook)
    return pages


def _rendered_notebook(entry: str) -> dict:
    """The executed notebook behind a page, as the download button serves it."""
    return json.loads((HTML / "_sources" / f"{entry}.ipynb").read_text(encoding="utf-8"))


def test_no_page_shows_parameters_or_glue_code(built):
    problems = {entry: found for entry, (_, html, _) in built.items()
                if (found := check_html.hidden_code_problems(html))}
    assert not problems, f"pages showing parameters or glue code: {problems}"


def test_code_is_folded_unless_show_input(built):
    for entry, (_, html, notebook) in built.items():
        if not notebook:
            continue
        shown = [src for src, visible in check_html.code_inputs(html) if visible]
        tagged = {"".join(c["source"]).strip() for c in _rendered_notebook(entry)["cells"]
                  if "show-input" in c.get("metadata", {}).get("tags", [])}
        unexpected = [src[:80] for src in shown if src.strip() not in tagged]
        assert not unexpected, f"{entry}: code shown without the show-input tag: {unexpected}"


def test_downloaded_notebooks_keep_the_parameters(built):
    for entry, (_, _, notebook) in built.items():
        if notebook:
            tags = [c.get("metadata", {}).get("tags", []) for c in _rendered_notebook(entry)["cells"]]
            assert any("parameters" in t for t in tags), f"{entry}: parameters cell missing from the download"
            assert any("injected-parameters" in t for t in tags), f"{entry}: papermill's cell missing"


# hand-written pages with exact values of more decimals (the datasheet's judge_flip = 0.0005)
DECIMALS_EXEMPT = check_html.DECIMALS_EXEMPT


def test_no_table_number_has_more_than_three_decimals(built):
    found = {entry: check_html.long_decimals(html)[:5] for entry, (_, html, _) in built.items()
             if entry not in DECIMALS_EXEMPT and check_html.long_decimals(html)}
    assert not found, f"table cells with more than three decimals (round them in the chapter): {found}"


def test_mathjax_is_served_by_the_book(built):
    assert (HTML / "_static" / "mathjax" / "es5" / "tex-mml-chtml.js").is_file(), (
        "MathJax is not in _build/html/_static/mathjax: is django-static-mathjax installed (make venv)? "
        "Look for the make_build_tree line about MathJax in the build log"
    )
    with_mathjax = []
    for entry, (path, html, _) in built.items():
        assert not check_html.local_mathjax_problems(html, path, HTML), entry
        if check_html.mathjax_sources(html):
            with_mathjax.append(entry)
    assert "book/intro" in with_mathjax, "the intro has the 2PL equation: it must load MathJax"


def _quick_build() -> bool:
    args = ROOT / "_build" / "executed" / ".papermill-args"
    if args.is_file():
        return bool(re.search(r"-p QUICK True\b", args.read_text()))
    pytest.skip("no _build/executed/.papermill-args: cannot tell whether the book was a QUICK build")


def test_quick_banner_on_every_executed_page_of_a_quick_build(built):
    quick = _quick_build()
    for entry, (_, html, notebook) in built.items():
        if notebook:
            parameters = _rendered_notebook(entry)["metadata"]["papermill"]["parameters"]
            assert parameters.get("QUICK") is quick, f"{entry} was executed with QUICK={parameters.get('QUICK')}"
            assert check_html.has_quick_banner(html) is quick, (
                f"{entry}: {'no' if quick else 'a'} quick-build banner on a {'QUICK' if quick else 'full'} build")
        else:
            assert not check_html.has_quick_banner(html), f"{entry}: a plain page carries the quick-build banner"


def test_placeholder_check_finds_example_urls():
    assert check_html.placeholder_urls('<a href="https://github.com/example/safety-irt/issues">x</a>') == [
        "https://github.com/example/safety-irt/issues"]
    assert check_html.placeholder_urls('<a href="https://github.com/executablebooks/jupyter-book">') == [
        "https://github.com/executablebooks/jupyter-book"]
    assert check_html.placeholder_urls('<a href="https://github.com/someorg/safety-irt">x</a>') == []


def test_no_page_carries_a_placeholder_url(built):
    found = {entry: urls for entry, (_, html, _) in built.items() if (urls := check_html.placeholder_urls(html))}
    assert not found, f"placeholder repository URLs: {found}"


def test_the_book_ships_and_links_its_code(built):
    """The two wheels (the library, the book's helpers) and the source archive are in
    _build/html/_downloads, linked from the introduction and every Reproduce box."""
    wheels = sorted(HTML.glob("_downloads/*/irtlib-*.whl"))
    book_wheels = sorted(HTML.glob("_downloads/*/irtbook-*.whl"))
    sources = sorted(HTML.glob("_downloads/*/safety-irt-*-src.tar.gz"))
    assert len(wheels) == 1 and len(book_wheels) == 1 and len(sources) == 1, (wheels, book_wheels, sources)
    boxed = [entry for entry, (_, html, _) in built.items() if "Reproduce this" in html]
    assert "book/01_data" in boxed
    for entry in ["book/intro", *boxed]:
        path, html, _ = built[entry]
        links = check_html.download_links(html)
        for kind, target in (("wheel", wheels[0]), ("book_wheel", book_wheels[0]), ("source", sources[0])):
            assert links[kind], f"{entry} does not link the {kind}"
            assert all((path.parent / href).resolve() == target.resolve() for href in links[kind]), links[kind]


def test_every_box_lists_the_parameters_of_its_notebook(built):
    sys.path.insert(0, str(ROOT / "tools"))
    import reproduce_box

    for entry, (_, html, notebook) in built.items():
        rows = check_html.parameter_rows(html)
        if not notebook or rows is None:
            continue
        params = reproduce_box.parameters(_rendered_notebook(entry), where=entry)
        assert [row[0] for row in rows] == [p.name for p in params], entry
        def words(text):  # the page renders `code` and smart quotes: compare the words
            return re.sub(r"[^\w]+", " ", text.replace("\u2019", "'")).split()

        assert [words(row[2]) for row in rows] == [words(p.comment) for p in params], entry


def test_datasheet_is_a_page(built):
    _, html, notebook = built["book/datasheet"]
    assert not notebook
    assert "Datasheet" in html and "These data are" in html
    assert 'href="#datasheet-real-data"' in html, "the in-page link to 'Real data' must resolve"


def _verdict_page(name: str) -> str:
    """The built page ``book/<name>.html``, checked to show verdicts in a 'verdict' column, and only verdict words."""
    if not (HTML / "index.html").is_file():
        pytest.skip(f"no built book at {HTML}")
    page = HTML / "book" / f"{name}.html"
    assert page.is_file(), f"book/{name}.html was not built: is book/{name} in _toc.yml?"
    html = page.read_text(encoding="utf-8")
    assert check_html.verdict_cells(html), f"book/{name} has no table with a 'verdict' header cell"
    assert not check_html.bad_verdicts(html), (
        f"verdicts outside {sorted(check_html.VERDICTS)}: {check_html.bad_verdicts(html)}")
    return html


def test_scorecard_verdicts():
    if not (ROOT / "book" / "scorecard.md").is_file():
        pytest.xfail("book/scorecard.md is not written yet")
    _verdict_page("scorecard")


def test_results_page_shows_only_verdict_words_and_links_each_claim():
    html = _verdict_page("results")
    assert 'id="sec-limits"' in html or 'id="limits-of-this-reproduction"' in html
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", html, re.S)[1:]
    claim_rows = [r for r in rows if "<td" in r]
    assert claim_rows and all('href="' in r for r in claim_rows), "a claim's line links no section"


#: The chapters (numbered pages) and those that compute item parameters, agreement curves or per-split
#: results, which offer them as CSV beside the chapter (irtbook.downloads).
CHAPTER = re.compile(r"^book/\d\d")
WITH_DOWNLOADS = ("book/02_fit", "book/03_ceiling", "book/04_discrimination", "book/04b_model_fit", "book/05_selection",
                  "book/06_table2", "book/07_own_benchmark", "book/08_simulation_study", "book/09_pandaguard",
                  "book/10_beyond")


def test_every_chapter_says_what_it_found(built):
    for entry, (_, html, _) in built.items():
        if CHAPTER.match(entry):
            text = check_html.section_text(html, "What this chapter found")
            assert text is not None, f"{entry} has no section 'What this chapter found'"
            assert len(re.findall(r"[.!?](?:\s|$)", text)) >= 2 and "n/a" not in text, f"{entry}: {text!r}"


def test_a_chapter_names_the_data_of_all_its_benchmarks_once(built):
    """The page's data are stated at the top; the prose and captions do not repeat the whole list."""
    from bs4 import BeautifulSoup

    for entry, (_, html, _) in built.items():
        if CHAPTER.match(entry):
            text = BeautifulSoup(html, "html.parser").get_text(" ")
            whole = re.findall(r"released matrices\) for [^;.]+;", text)
            assert len(whole) <= 1, f"{entry} names the data of all its benchmarks {len(whole)} times: {whole}"


def test_chapter_downloads_are_csv_files_of_the_book(built):
    for entry in WITH_DOWNLOADS:
        if entry not in built:
            continue
        path, html, _ = built[entry]
        links = check_html.csv_links(html)
        if not links and "No table" in (check_html.section_text(html, "Downloads") or ""):
            continue  # the chapter's data are absent from this build (PandaGuard's, say), and it says so
        assert links, f"{entry} offers no CSV download"
        for href in links:
            target = (path.parent / href).resolve()
            assert target.is_file() and HTML.resolve() in target.parents, f"{entry}: {href} is not a file of the book"
            lines = target.read_text(encoding="utf-8").splitlines()
            assert len(lines) >= 2 and "," in lines[0], f"{entry}: {href} has no header and rows"
