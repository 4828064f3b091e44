#!/usr/bin/env python3
"""Print the book's single-page HTML to one PDF with headless Chromium (no TeX needed).

Usage::

    python tools/pdf.py SINGLEHTML_INDEX OUTPUT_PDF
    python tools/pdf.py --facts OUTPUT_PDF        # print the page and image counts of a PDF

``make pdf`` builds ``_build/pdf/_build/singlehtml/index.html`` (jupyter-book's ``singlehtml``
builder on the executed chapters) and calls this script, which

1. serves that directory on 127.0.0.1 and opens the page in Debian's Chromium
   (``/usr/bin/chromium``, driven by the ``playwright`` package; never ``playwright install``),
   aborting every request that leaves the book (the book ships MathJax and reads offline);
2. waits until MathJax has typeset the math, so formulas are in the PDF as rendered glyphs;
3. prints the page to A4 with backgrounds (``page.pdf``): figures and tables as on screen;
   folded code stays folded, as in the HTML book.

:func:`pdf_facts` counts pages, embedded images and fonts (MathJax's fonts mean rendered math)
of a PDF with the standard library only (the tests use it).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import re
import sys
import threading
import zlib
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Printed pages: hide the navigation chrome of the theme, keep the article.
PRINT_CSS = """
.bd-header, .bd-sidebar-primary, .bd-sidebar-secondary, .bd-footer, .bd-footer-article,
.header-article, .prev-next-area, .bd-header-announcement, #pst-back-to-top { display: none !important; }
.bd-main .bd-content .bd-article-container { max-width: 100% !important; }
figure, table, img { break-inside: avoid; }
"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def print_pdf(index: Path, output: Path, *, timeout_ms: int = 120_000) -> None:
    """Print the single-page HTML ``index`` to the PDF ``output`` with headless Chromium."""
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        raise FileNotFoundError(f"{CHROMIUM} not found: apt-get install -y chromium (never `playwright install`)")
    index = index.resolve()
    root = index.parent
    # jupyter-book's index.html only redirects to the root page (book/intro.html in singlehtml),
    # which Sphinx wrote with links relative to the output root (_static/..., _images/...): print
    # a copy of it placed at the root, where those links resolve.
    redirect = re.search(r'http-equiv="Refresh" content="0; url=([^"]+)"', index.read_text(encoding="utf-8"))
    if redirect:
        single = root / "_print.html"
        single.write_text((root / redirect.group(1)).read_text(encoding="utf-8"), encoding="utf-8")
        index = single
    handler = functools.partial(_Quiet, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    server = f"http://127.0.0.1:{httpd.server_address[1]}"
    blocked: list[str] = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1100, "height": 1400})

            def route(r):
                if r.request.url.startswith(server + "/"):
                    return r.continue_()
                blocked.append(r.request.url)
                return r.abort()

            page.route("**/*", route)
            page.goto(f"{server}/{index.relative_to(root).as_posix()}", wait_until="load", timeout=timeout_ms)
            if page.evaluate("document.querySelectorAll('.math').length") > 0:
                page.wait_for_function("window.MathJax && MathJax.startup && MathJax.startup.promise",
                                       timeout=timeout_ms)
                page.evaluate("MathJax.startup.promise")
                page.wait_for_function("document.querySelector('mjx-container') !== null", timeout=timeout_ms)
            page.add_style_tag(content=PRINT_CSS)
            page.emulate_media(media="print")
            output.parent.mkdir(parents=True, exist_ok=True)
            page.pdf(path=str(output), format="A4", print_background=True,
                     margin={"top": "15mm", "bottom": "15mm", "left": "12mm", "right": "12mm"})
            browser.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
    if blocked:
        print(f"pdf: requests outside the book were blocked: {sorted(set(blocked))[:5]}", file=sys.stderr)


_STREAM = re.compile(rb"stream\r?\n(.*?)\r?\nendstream", re.S)


def pdf_facts(path: Path) -> dict[str, int]:
    """``{"pages": ..., "images": ...}`` of a PDF, with its size and fonts.

    Page objects and image XObjects are counted also inside Flate-compressed object streams (standard
    library only).
    """
    data = Path(path).read_bytes()
    if not data.startswith(b"%PDF-"):
        raise ValueError(f"{path} is not a PDF")
    chunks = [data]
    for match in _STREAM.finditer(data):
        try:
            chunks.append(zlib.decompress(match.group(1)))
        except zlib.error:
            pass
    pages = images = 0
    fonts: set[str] = set()
    for chunk in chunks:
        pages += len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", chunk))
        images += len(re.findall(rb"/Subtype\s*/Image\b", chunk))
        names = re.findall(rb"/(?:BaseFont|FontName)\s*/([A-Za-z0-9+\-_]+)", chunk)
        fonts |= {f.decode().split("+")[-1] for f in names}
    mathjax = sorted(f for f in fonts if f.startswith("MathJax"))
    return {"pages": pages, "images": images, "bytes": len(data), "fonts": sorted(fonts), "mathjax_fonts": mathjax}


def main(argv: list[str] | None = None) -> int:
    """The command line: print a PDF, or with --facts describe one."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path, help="INDEX_HTML OUTPUT_PDF, or with --facts: PDF")
    parser.add_argument("--facts", action="store_true", help="print the page and image counts of a PDF")
    args = parser.parse_args(argv)
    if args.facts:
        for path in args.paths:
            print(path, pdf_facts(path))
        return 0
    if len(args.paths) != 2:
        parser.error("give the single-page HTML and the PDF to write")
    index, output = args.paths
    if not index.is_file():
        print(f"pdf: no {index}: run `make pdf` (it builds the single-page HTML first)", file=sys.stderr)
        return 2
    print_pdf(index, output)
    facts = pdf_facts(output)
    print(f"pdf: {output}: {facts['pages']} pages, {facts['images']} images, "
          f"{len(facts['mathjax_fonts'])} MathJax fonts (rendered math), {facts['bytes'] / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
