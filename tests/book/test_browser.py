"""Open the built book (_build/html) in a real headless browser.

Debian's chromium (/usr/bin/chromium) is driven by the ``playwright`` Python
package; playwright's own browser download is never used (do not run
``playwright install``).  The pages are served by a local ``http.server`` on
127.0.0.1; every request to any other host is aborted (and recorded), so the
test needs no network and shows that the book reads offline.

MathJax 3 ships with the book (``_build/html/_static/mathjax``, copied there by
tools/make_build_tree.py): every page with math must render it (``mjx-container``
elements) with MathJax loaded from the book's own ``_static``.

Prerequisites: ``apt-get install -y chromium`` (as root) and ``make book`` (or
``make book QUICK=1``).  A screenshot of the first page is saved to ``artifacts/``.
"""

from __future__ import annotations

import functools
import http.server
import re
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
ARTIFACTS = ROOT / "artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
]
# jupyter-book 1.0.4 with sphinx-thebe 0.3.1 writes the thebe configuration script twice on
# every page; the second copy fails with this error. Harmless (thebe is off), so tolerated.
KNOWN_JS_ERRORS = re.compile(r"Identifier 'THEBE_JS_URL' has already been declared")
MATHJAX_LOCAL = "/_static/mathjax/es5/tex-mml-chtml.js"

sys.path.insert(0, str(ROOT / "tools"))
import chapters  # noqa: E402  (tools/chapters.py)

pytestmark = pytest.mark.browser


def _page_urls() -> list[str]:
    """index.html plus every page of the table of contents, as paths below _build/html."""
    entries = [entry for entry, _, _ in chapters.pages(ROOT / "_toc.yml", ROOT)]
    return ["index.html"] + [f"{entry}.html" for entry in entries]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture(scope="module")
def server():
    if not (HTML / "index.html").is_file():
        pytest.skip(f"no built book at {HTML}: run `make book` (or `make book QUICK=1`) first")
    handler = functools.partial(_QuietHandler, directory=str(HTML))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(
            f"{CHROMIUM} not found: install Debian's chromium with `apt-get install -y chromium` "
            "(as root), then `make book`; never `playwright install`"
        )
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is missing: make venv")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def visited(server, browser):
    """Visit every page once; return {path: facts} (and the open context for screenshots)."""
    blocked: list[str] = []
    context = browser.new_context(viewport={"width": 1280, "height": 900})

    def route(route_obj):
        url = route_obj.request.url
        if url.startswith(server + "/"):
            return route_obj.continue_()
        blocked.append(url)  # no network: anything not served by the book is aborted
        return route_obj.abort()

    context.route("**/*", route)
    page = context.new_page()
    console_errors: list[str] = []
    page.on("pageerror", lambda exc: console_errors.append(str(exc)))
    served: dict[str, int] = {}  # local path -> HTTP status of the responses seen
    page.on("response", lambda r: served.__setitem__(r.url[len(server):].split("?")[0], r.status)
            if r.url.startswith(server) else None)

    facts = {}
    for path in _page_urls():
        console_errors.clear()
        redirect = re.search(r'http-equiv="Refresh" content="0; url=([^"]+)"', (HTML / path).read_text())
        if redirect:  # index.html only redirects to the root page: follow it
            response = page.goto(f"{server}/{path}", wait_until="commit")
            page.wait_for_url(f"**/{redirect.group(1)}", wait_until="load")
        else:
            response = page.goto(f"{server}/{path}", wait_until="load")
        has_math = page.evaluate("document.querySelectorAll('.math, div.math, span.math').length") > 0
        mathjax_ready = False
        if has_math:
            try:
                page.wait_for_function(
                    "window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=10_000
                )
                page.evaluate("MathJax.startup.promise")
                page.wait_for_function("document.querySelector('mjx-container') !== null", timeout=10_000)
                mathjax_ready = True
            except Exception:  # MathJax did not load or render: reported by test_math_renders
                mathjax_ready = False
        facts[path] = {
            "status": response.status if response else None,
            "url": page.url,
            "title": page.title(),
            "broken_images": page.evaluate(
                "Array.from(document.images)"
                ".filter(img => !(img.complete && img.naturalWidth > 0))"
                ".map(img => img.currentSrc || img.src)"
            ),
            "n_images": page.evaluate("document.images.length"),
            "text": page.inner_text("body"),
            "error_outputs": page.evaluate(
                "Array.from(document.querySelectorAll('.output.error, .output.traceback, "
                "div.cell_output .traceback')).map(e => e.innerText.slice(0, 300))"
            ),
            "stderr_errors": page.evaluate(
                "Array.from(document.querySelectorAll('.output.stderr'))"
                ".map(e => e.innerText).filter(t => /Error|Exception/.test(t))"
                ".map(t => t.slice(0, 300))"
            ),
            "has_math": has_math,
            "mathjax_ready": mathjax_ready,
            "n_mjx": page.evaluate("document.querySelectorAll('mjx-container').length"),
            "mathjax_scripts": page.evaluate(
                "Array.from(document.scripts).map(s => s.src).filter(s => /mathjax/i.test(s))"
            ),
            "page_errors": [e for e in console_errors if not KNOWN_JS_ERRORS.search(e)],
        }
        if path != "index.html":  # index.html only redirects to the introduction, measured as itself
            # the layout once MathJax has typeset the page (the reader's final layout)
            facts[path]["layout"] = {name: page.evaluate(js) for name, js in LAYOUT_SCRIPTS.items()}
    yield {"facts": facts, "page": page, "server": server, "blocked": blocked, "served": served}
    context.close()


def test_every_page_loads(visited):
    for path, facts in visited["facts"].items():
        assert facts["status"] == 200, f"{path}: HTTP {facts['status']}"
        assert facts["title"], f"{path}: no <title>"
    # index.html redirects to the root page of the toc
    assert visited["facts"]["index.html"]["url"].endswith("/book/intro.html")


def test_images_render(visited):
    broken = {p: f["broken_images"] for p, f in visited["facts"].items() if f["broken_images"]}
    assert not broken, f"images that did not load (naturalWidth 0): {broken}"


def test_no_errors_on_pages(visited):
    for path, facts in visited["facts"].items():
        assert "Traceback (most recent call last)" not in facts["text"], f"{path} shows a traceback"
        assert not facts["error_outputs"], f"{path} shows error outputs: {facts['error_outputs']}"
        assert not facts["stderr_errors"], f"{path} shows errors on stderr: {facts['stderr_errors']}"
        assert not facts["page_errors"], f"{path} raised JavaScript errors: {facts['page_errors']}"


def test_math_renders(visited):
    with_math = {p: f for p, f in visited["facts"].items() if f["has_math"]}
    assert "book/intro.html" in with_math, "the intro should contain the 2PL equation"
    unrendered = [p for p, f in with_math.items() if f["n_mjx"] == 0]
    assert not unrendered, (
        f"math not rendered by MathJax (no mjx-container) on {unrendered}; MathJax scripts: "
        f"{ {p: with_math[p]['mathjax_scripts'] for p in unrendered} }; blocked requests: {visited['blocked'][:5]}"
    )


def test_mathjax_is_served_from_the_book(visited):
    """MathJax comes from _build/html/_static, never from the network (which is blocked)."""
    for path, facts in visited["facts"].items():
        if facts["has_math"]:
            assert facts["mathjax_scripts"], f"{path} has math but loads no MathJax"
            for src in facts["mathjax_scripts"]:
                assert src.split("?")[0] == visited["server"] + MATHJAX_LOCAL, (
                    f"{path} loads MathJax from {src}, not from the book's _static/mathjax"
                )
    assert visited["served"].get(MATHJAX_LOCAL) == 200, f"{MATHJAX_LOCAL} was not served by the book"
    fonts = [p for p, status in visited["served"].items() if "/_static/mathjax/" in p and p.endswith(".woff")]
    assert fonts and all(visited["served"][p] == 200 for p in fonts), "MathJax's fonts were not served"
    mathjax_blocked = [url for url in visited["blocked"] if "mathjax" in url.lower()]
    assert not mathjax_blocked, f"MathJax asked the network for {mathjax_blocked}"


def test_pages_need_no_network(visited):
    """Nothing a page asks for lives outside the book (every such request was aborted)."""
    assert not visited["blocked"], f"requests outside the book (blocked): {sorted(set(visited['blocked']))[:10]}"


#: The tallest table row a reader should meet (px at 1280 px wide): a row hundreds of pixels tall
#: is a column squeezed so narrow that its text wraps every word or two (the datasheet's "why").
MAX_ROW_HEIGHT = 300

TABLE_WIDTHS_JS = """() => {
    const column = document.querySelector('article.bd-article') || document.querySelector('main');
    const style = getComputedStyle(column);
    const inner = column.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const name = t => {
        const box = t.closest('figure, .captioned-table, div.cell, section');
        const caption = t.querySelector('caption') || (box && box.querySelector('figcaption, caption'));
        const heading = t.closest('section') && t.closest('section').querySelector('h1, h2, h3');
        return (caption ? caption.innerText : (heading ? heading.innerText : '')).slice(0, 60);
    };
    return {column: inner, tables: Array.from(column.querySelectorAll('table')).map(t => ({
        name: name(t), classes: t.className,
        width: t.getBoundingClientRect().width,
        font: parseFloat(getComputedStyle(t).fontSize),
        tallest: Math.max(0, ...Array.from(t.rows).map(r => r.getBoundingClientRect().height))}))};
}"""


@pytest.fixture(scope="module")
def page_facts(visited):
    """Per page (not index.html): its tables' widths, the words broken inside table cells and the figures
    without a number, measured during the one visit of every page (``visited``)."""
    return {path: facts["layout"] for path, facts in visited["facts"].items() if "layout" in facts}


@pytest.fixture(scope="module")
def tables(page_facts):
    return {path: facts["tables"] for path, facts in page_facts.items()}


def test_every_table_fits_the_text_column(tables):
    """No table of any page is wider than the text column (the datasheet's, Table 2's, ...)."""
    assert any(facts["tables"] for facts in tables.values()), "no table found on any page"
    too_wide = {path: [(t["name"], round(t["width"])) for t in facts["tables"] if t["width"] > facts["column"] + 1]
                for path, facts in tables.items()}
    too_wide = {path: found for path, found in too_wide.items() if found}
    assert not too_wide, f"tables wider than the text column: {too_wide}"


#: The type size of every table (px): the book's 0.72rem (_static/book.css). A wide table is reshaped
#: to fit the column at this size, never set in smaller type.
TABLE_FONT_PX = 0.72 * 16


def test_every_table_is_set_in_the_ordinary_type_size(tables):
    small = {path: [(t["name"], t["font"]) for t in facts["tables"] if t["font"] < TABLE_FONT_PX - 0.05]
             for path, facts in tables.items()}
    small = {path: found for path, found in small.items() if found}
    assert not small, f"tables set below {TABLE_FONT_PX:.2f} px type (reshape them instead): {small}"


def test_no_table_row_is_hundreds_of_pixels_tall(tables):
    tall = {path: [(t["name"], round(t["tallest"])) for t in facts["tables"] if t["tallest"] > MAX_ROW_HEIGHT]
            for path, facts in tables.items()}
    tall = {path: found for path, found in tall.items() if found}
    assert not tall, f"table rows taller than {MAX_ROW_HEIGHT} px (a column squeezed too narrow): {tall}"


def test_table2_pages_use_the_compact_class(tables):
    """Table 2's page marks its wide tables compact (the class the book's CSS narrows)."""
    classes = " ".join(t["classes"] for t in tables["book/06_table2.html"]["tables"])
    assert "table2-compact" in classes


def test_glued_value_and_citations_on_intro(visited):
    text = visited["facts"]["book/intro.html"]["text"]
    assert re.search(r"probability 0\.\d{3} by a model", text), "glued value missing in the intro"
    references = visited["facts"]["book/references.html"]["text"]
    assert "fluid language model benchmarking" in references.lower()


def test_screenshot_of_a_chapter(visited):
    ARTIFACTS.mkdir(exist_ok=True)
    page = visited["page"]
    page.goto(f"{visited['server']}/book/intro.html", wait_until="load")
    if visited["facts"]["book/intro.html"]["mathjax_ready"]:
        page.wait_for_function("document.querySelector('mjx-container') !== null", timeout=10_000)
    target = ARTIFACTS / "intro.png"
    page.screenshot(path=str(target), full_page=True)
    assert target.stat().st_size > 10_000


# --------------------------------------------------------------------------- cells, figures, the results page
#: Every word and number of every table cell stays on one line (1280-px page): a piece is a run of
#: non-space characters up to and including a hyphen, slash or dash, after which a line may break.
CELL_BREAKS_JS = """() => {
    const column = document.querySelector('article.bd-article') || document.querySelector('main');
    const broken = [];
    for (const cell of column.querySelectorAll('table td, table th')) {
        const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
        let node;
        while ((node = walker.nextNode())) {
            const re = /[^\\s\\-\\/\\u2013\\u2014]+[\\-\\/\\u2013\\u2014]?/g;
            let m;
            while ((m = re.exec(node.textContent))) {
                if (m[0].length < 2) continue;
                const range = document.createRange();
                range.setStart(node, m.index);
                range.setEnd(node, m.index + m[0].length);
                const tops = Array.from(range.getClientRects()).filter(r => r.width > 0).map(r => r.top);
                if (tops.length > 1 && Math.max(...tops) - Math.min(...tops) > 4) {
                    broken.push(m[0]);
                }
            }
        }
    }
    return broken;
}"""

#: Every image of a page's text is a numbered figure: inside a <figure> whose caption carries its number.
FIGURES_JS = """() => {
    const column = document.querySelector('article.bd-article') || document.querySelector('main');
    const images = Array.from(column.querySelectorAll('img')).filter(img => !img.closest('.MathJax, mjx-container'));
    return {
        n: images.length,
        unnumbered: images.filter(img => {
            const figure = img.closest('figure');
            return !(figure && figure.querySelector('figcaption .caption-number'));
        }).map(img => (img.getAttribute('alt') || img.getAttribute('src') || '').slice(0, 60)),
        untitled: Array.from(column.querySelectorAll('figure figcaption')).map(c => c.textContent)
            .filter(t => !/[a-z]{3,}\\s+[a-z]{3,}/i.test(t.replace(/^\\s*(Figure|Table) \\d+[.:]?/, ''))),
    };
}"""


@pytest.fixture(scope="module")
def layout(page_facts):
    """Per page: the words broken inside table cells and the figures without a number."""
    return page_facts


#: What ``visited`` evaluates on every page besides its facts (``page_facts``).
LAYOUT_SCRIPTS = {"tables": TABLE_WIDTHS_JS, "broken": CELL_BREAKS_JS, "figures": FIGURES_JS}


def test_no_word_or_number_breaks_inside_a_table_cell(layout):
    broken = {path: sorted(set(f["broken"]))[:8] for path, f in layout.items() if f["broken"]}
    assert not broken, f"words or numbers broken across lines inside table cells at 1280 px: {broken}"


def test_every_figure_is_numbered_and_titled_in_words(layout):
    assert sum(f["figures"]["n"] for f in layout.values()) > 10, "the book's figures were not found"
    unnumbered = {path: f["figures"]["unnumbered"] for path, f in layout.items() if f["figures"]["unnumbered"]}
    assert not unnumbered, f"images that are not numbered figures (no 'Figure N' caption): {unnumbered}"
    untitled = {path: f["figures"]["untitled"] for path, f in layout.items() if f["figures"]["untitled"]}
    assert not untitled, f"figure captions without words: {untitled}"


def test_results_page_is_present_and_linked_from_the_introduction(visited):
    assert "book/results.html" in visited["facts"], "the results page is not in the table of contents"
    results_page = visited["facts"]["book/results.html"]
    assert results_page["status"] == 200 and "Results at a glance" in results_page["text"]
    assert "Limits of this reproduction" in results_page["text"]
    page = visited["page"]
    page.goto(f"{visited['server']}/book/intro.html", wait_until="load")
    links = page.evaluate("Array.from(document.querySelectorAll('article.bd-article a')).map(a => a.href)")
    assert any(link.split("#")[0].endswith("/book/results.html") for link in links), \
        "the introduction does not link to the results page"
    entries = [entry for entry, _, _ in chapters.pages(ROOT / "_toc.yml", ROOT)]
    assert entries.index("book/results") == 1, "the results page comes right after the introduction"
