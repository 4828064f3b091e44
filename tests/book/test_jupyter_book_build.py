"""tools/jupyter_book_build.py and book/_ext/parallel_reading.py: Sphinx reads and writes the pages in
parallel, and the HTML is the serial build's, byte for byte."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGES = 7   # Sphinx reads in parallel only from six documents on

pytestmark = pytest.mark.book


def _book(src: Path) -> None:
    (src / "book").mkdir(parents=True)
    config = {"title": "Pages", "only_build_toc_files": True, "execute": {"execute_notebooks": "off"},
              "sphinx": {"local_extensions": {"parallel_reading": str(ROOT / "book" / "_ext")},
                         "config": {"numfig": True}}}
    (src / "_config.yml").write_text(yaml.safe_dump(config))
    chapters = "".join(f"  - file: book/page{i}\n" for i in range(1, PAGES))
    (src / "_toc.yml").write_text(f"format: jb-book\nroot: book/page0\nchapters:\n{chapters}")
    for i in range(PAGES):
        other = (i + 1) % PAGES
        (src / "book" / f"page{i}.md").write_text(
            f"# Page {i}\n\nText of page {i}, see {{numref}}`fig-{other}`.\n\n"
            f"```{{figure}} ../pic.svg\n:name: fig-{i}\n\nFigure of page {i}.\n```\n")
    (src / "pic.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>')


def _build(src: Path, out: Path, jobs: int) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")}
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "jupyter_book_build.py"), "--jobs", str(jobs), "--",
                           "build", "--all", "-W", "-n", "--path-output", str(out), str(src)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout + done.stderr


def _html(out: Path) -> dict[str, bytes]:
    html = out / "_build" / "html"
    return {str(p.relative_to(html)): p.read_bytes() for p in sorted(html.rglob("*.html"))}


def test_parallel_build_reads_in_parallel_and_writes_the_serial_html(tmp_path):
    pytest.importorskip("jupyter_book")
    _book(tmp_path / "src")
    log = _build(tmp_path / "src", tmp_path / "parallel", jobs=2)
    assert "serial read" not in log and "parallel reading" not in log
    _build(tmp_path / "src", tmp_path / "serial", jobs=1)
    parallel, serial = _html(tmp_path / "parallel"), _html(tmp_path / "serial")
    assert len(serial) >= PAGES and parallel == serial
    page1 = serial["book/page1.html"].decode()
    assert "Fig. 2" in page1 and "Fig. 3" in page1     # its own figure, and page 2's: numbered across the pages


def test_without_the_extension_sphinx_would_read_serially(tmp_path):
    """The declaration is what lets Sphinx read in parallel: without it, -W makes the fallback an error."""
    pytest.importorskip("jupyter_book")
    src = tmp_path / "src"
    _book(src)
    config = yaml.safe_load((src / "_config.yml").read_text())
    del config["sphinx"]["local_extensions"]
    (src / "_config.yml").write_text(yaml.safe_dump(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")}
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "jupyter_book_build.py"), "--jobs", "2", "--",
                           "build", "--all", "-W", "-n", "--path-output", str(tmp_path / "out"), str(src)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode != 0
    assert "does not declare if it is safe for parallel reading" in done.stdout + done.stderr
