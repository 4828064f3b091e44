"""Tests of the book's build infrastructure (Makefile + tools/).

The Makefile is run on tiny throw-away books in ``tmp_path`` (a copy of the
project's Makefile and tools/, with the current Python environment passed as
``VENV=... MANAGE_VENV=0`` so nothing is installed).  They check that a failing
chapter fails ``make book``; that a clean tiny book renders with the executed
notebook as the page source; that re-execution follows the chapter, library and
parameter changes; and that an executed notebook holding an error output is
rejected by tools/check_executed.py before rendering.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "tools"
sys.path.insert(0, str(TOOLS))
import chapters  # noqa: E402  (tools/chapters.py)

FRONT_MATTER = """\
---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""


def _chapter(title: str, body: str, params: str = "QUICK = False\nSEED = 0") -> str:
    return (
        FRONT_MATTER
        + f"\n# {title}\n\nSome text.\n\n```{{code-cell}} ipython3\n:tags: [parameters]\n\n{params}\n```\n\n"
        + f"```{{code-cell}} ipython3\n{textwrap.dedent(body).strip()}\n```\n"
    )


def _tiny_book(tmp_path: Path, chapters_md: dict[str, str]) -> Path:
    """A book with the project's Makefile and tools/ and the given chapters."""
    book = tmp_path / "tinybook"
    (book / "book").mkdir(parents=True)
    shutil.copy2(ROOT / "Makefile", book / "Makefile")
    shutil.copytree(TOOLS, book / "tools", ignore=shutil.ignore_patterns("__pycache__"))
    (book / "irtlib").mkdir()
    (book / "irtlib" / "__init__.py").write_text('"""stand-in library sources."""\n')
    (book / "_config.yml").write_text(
        textwrap.dedent(
            """\
            title: Tiny book
            only_build_toc_files: true
            exclude_patterns: [_build, tools, irtlib]
            execute:
              execute_notebooks: force
            sphinx:
              config:
                nb_execution_raise_on_error: true
                html_theme_options:
                  use_download_button: true
            """
        )
    )
    names = list(chapters_md)
    toc = "format: jb-book\nroot: book/" + names[0] + "\n"
    if names[1:]:
        toc += "chapters:\n" + "".join(f"  - file: book/{name}\n" for name in names[1:])
    (book / "_toc.yml").write_text(toc)
    for name, text in chapters_md.items():
        (book / "book" / f"{name}.md").write_text(text)
    return book


def _make(book: Path, *targets: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"}}
    return subprocess.run(
        ["make", "-C", str(book), f"VENV={sys.prefix}", "MANAGE_VENV=0", *targets],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")

GOOD_INTRO = _chapter(
    "Intro",
    """
    import numpy as np
    value = float(np.sqrt(16.0)) + SEED
    print("QUICK is", QUICK)
    value
    """,
)


# ---------------------------------------------------------------------------
# (a) failures must fail the build
# ---------------------------------------------------------------------------
@needs_make
def test_make_book_fails_when_a_chapter_raises(tmp_path):
    book = _tiny_book(
        tmp_path,
        {
            "intro": GOOD_INTRO,
            "boom": _chapter("Boom", 'raise RuntimeError("deliberate failure in boom")'),
        },
    )
    result = _make(book, "book", "QUICK=1")
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "deliberate failure in boom" in output
    assert not (book / "_build" / "html" / "index.html").exists()
    # the failed chapter leaves no executed notebook (so make retries it next time) ...
    assert not (book / "_build" / "executed" / "boom.ipynb").exists()
    # ... but its partial notebook stays for inspection
    assert (book / "_build" / "executing" / "boom.ipynb").exists()


def _executed_notebook(cells: list[dict], exception: bool | None = None) -> dict:
    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"papermill": {"exception": exception, "duration": 1.0, "parameters": {}}},
        "cells": cells,
    }


def _code(source: str, count: int | None, outputs: list | None = None) -> dict:
    return {"cell_type": "code", "metadata": {}, "source": source, "execution_count": count,
            "outputs": outputs or []}


ERROR_OUTPUT = {
    "output_type": "error",
    "ename": "ValueError",
    "evalue": "bad value",
    "traceback": ["Traceback (most recent call last)", "ValueError: bad value"],
}


@pytest.mark.parametrize(
    "cells, exception, message",
    [
        ([_code("x = 1", 1), _code("f(x)", 2, [ERROR_OUTPUT])], None, "ValueError: bad value"),
        ([_code("x = 1", 1), _code("y = 2", None)], None, "no execution count"),
        ([_code("x = 1", 1)], True, "papermill recorded an exception"),
    ],
    ids=["error-output", "unexecuted-cell", "papermill-exception"],
)
def test_check_executed_rejects(tmp_path, cells, exception, message):
    path = tmp_path / "chapter.ipynb"
    path.write_text(json.dumps(_executed_notebook(cells, exception)))
    result = subprocess.run(
        [sys.executable, str(TOOLS / "check_executed.py"), str(path)], capture_output=True, text=True
    )
    assert result.returncode == 1
    assert message in result.stderr


def test_check_executed_accepts_clean_notebooks_and_rejects_missing(tmp_path):
    clean = tmp_path / "clean.ipynb"
    clean.write_text(
        json.dumps(
            _executed_notebook(
                [
                    _code("x = 1", 1, [{"output_type": "stream", "name": "stderr", "text": "a warning"}]),
                    _code("   \n", None),  # empty cells are never executed: fine
                    {"cell_type": "markdown", "metadata": {}, "source": "text"},
                ]
            )
        )
    )
    check = [sys.executable, str(TOOLS / "check_executed.py")]
    assert subprocess.run([*check, str(clean)], capture_output=True).returncode == 0
    missing = subprocess.run([*check, str(clean), str(tmp_path / "missing.ipynb")], capture_output=True, text=True)
    assert missing.returncode == 1 and "missing" in missing.stderr


# ---------------------------------------------------------------------------
# a clean tiny book renders, and re-execution follows the dependencies
# ---------------------------------------------------------------------------
@needs_make
def test_make_book_renders_executed_notebooks(tmp_path):
    plain = "# Notes\n\nA plain MyST page, not executed.\n"
    book = _tiny_book(tmp_path, {"intro": GOOD_INTRO, "notes": plain})
    result = _make(book, "book", "QUICK=1")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    html = book / "_build" / "html"
    assert (html / "index.html").exists()
    # the page source (download button) is the executed notebook, with the injected QUICK
    source = html / "_sources" / "book" / "intro.ipynb"
    assert source.exists()
    executed = json.loads(source.read_text())
    tags = [cell["metadata"].get("tags", []) for cell in executed["cells"]]
    assert ["injected-parameters"] in tags
    assert executed["metadata"]["papermill"]["parameters"] == {"QUICK": True}
    assert "QUICK is True" in (html / "book" / "intro.html").read_text()
    assert (html / "book" / "notes.html").exists()
    config = yaml.safe_load((book / "_build" / "src" / "_config.yml").read_text())
    assert config["execute"]["execute_notebooks"] == "off"
    assert not (book / "_build" / "src" / "book" / "intro.md").exists()

    executed_nb = book / "_build" / "executed" / "intro.ipynb"

    def executes_again(*args: str) -> bool:
        before = executed_nb.stat().st_mtime_ns
        run = _make(book, "executed", *args)
        assert run.returncode == 0, run.stdout + run.stderr
        return executed_nb.stat().st_mtime_ns != before

    assert not executes_again("QUICK=1")  # nothing changed
    assert executes_again()  # QUICK=1 -> QUICK=0 changes the papermill arguments
    assert not executes_again()
    os.utime(book / "irtlib" / "__init__.py")  # a library change re-executes
    assert executes_again()
    os.utime(book / "book" / "intro.md")  # so does a chapter change
    assert executes_again()
    assert not executes_again()

    # An executed notebook with an error output must not be rendered, even though it is
    # up to date for make (papermill itself rejects error outputs; this is the second line).
    notebook = json.loads(executed_nb.read_text())
    code_cell = next(cell for cell in notebook["cells"] if cell["cell_type"] == "code")
    code_cell["outputs"].append(ERROR_OUTPUT)
    executed_nb.write_text(json.dumps(notebook))
    assert not executes_again()
    result = _make(book, "html")
    assert result.returncode != 0
    assert "check_executed" in result.stderr and "ValueError: bad value" in result.stderr


# ---------------------------------------------------------------------------
# (b) the project's table of contents
# ---------------------------------------------------------------------------
def _toc_files(node) -> list[str]:
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in {"root", "file"} and isinstance(value, str):
                found.append(value)
            else:
                found.extend(_toc_files(value))
    elif isinstance(node, list):
        for item in node:
            found.extend(_toc_files(item))
    return found


def test_toc_entries_exist():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    assert toc["format"] == "jb-book"
    assert toc["root"] == "book/intro"
    files = _toc_files(toc)
    assert files and len(files) == len(set(files)), "duplicate toc entries"
    missing = [f for f in files if not any((ROOT / f"{f}{s}").is_file() for s in ("", ".md", ".ipynb"))]
    assert not missing, f"_toc.yml lists files that do not exist: {missing}"
    # the Makefile's stdlib parser sees the same pages as YAML does
    assert [re.sub(r"\.(md|ipynb)$", "", f) for f in files] == chapters.toc_entries(ROOT / "_toc.yml")
    assert files[-2:] == ["book/reproducibility", "book/references"], "keep these two last"


def _literal_assignments(source: str) -> bool:
    for node in ast.parse(source).body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            return False
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if not all(isinstance(t, ast.Name) for t in targets):
            return False
        try:
            ast.literal_eval(node.value)
        except ValueError:
            return False
    return True


@pytest.mark.parametrize(
    "entry", [entry for entry, _, notebook in chapters.pages(ROOT / "_toc.yml", ROOT) if notebook]
)
def test_chapter_parameters_cell(entry):
    """Each notebook chapter's first code cell is tagged `parameters` and holds literals only.

    Papermill injects its values after that cell, so a value derived there from another
    parameter (`N = 3 if QUICK else 100`) would silently ignore the injected one.
    """
    jupytext = pytest.importorskip("jupytext")
    notebook = jupytext.read(chapters.page_path(entry, ROOT))
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code, f"{entry} has no code cell"
    first = code[0]
    assert "parameters" in first.metadata.get("tags", []), f"{entry}: first code cell not tagged parameters"
    assert _literal_assignments(first.source), f"{entry}: parameters cell must hold `NAME = literal` lines only"
    assert "QUICK" in first.source, f"{entry}: parameters cell must define QUICK (make book QUICK=1)"


# ---------------------------------------------------------------------------
# tools/chapters.py: the standard-library toc reader the Makefile uses
# ---------------------------------------------------------------------------
def test_chapters_reads_parts_comments_and_notebook_front_matter(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "_toc.yml").write_text(
        textwrap.dedent(
            """\
            # comment
            format: jb-book
            root: book/intro
            parts:
              - caption: Chapters
                chapters:
                  # - file: book/commented_out
                  - file: book/01_data.md   # suffix and comment are ignored
                  - file: "book/notes"
            """
        )
    )
    (tmp_path / "book" / "intro.md").write_text(FRONT_MATTER + "\n# Intro\n")
    (tmp_path / "book" / "01_data.md").write_text("---\nkernelspec:\n  name: python3\n---\n# Data\n")
    (tmp_path / "book" / "notes.md").write_text("---\ntitle: notes\n---\n# Notes\njupytext: not front matter\n")
    assert chapters.toc_entries(tmp_path / "_toc.yml") == ["book/intro", "book/01_data", "book/notes"]
    found = {entry: notebook for entry, _, notebook in chapters.pages(tmp_path / "_toc.yml", tmp_path)}
    assert found == {"book/intro": True, "book/01_data": True, "book/notes": False}
    listed = subprocess.run(
        [sys.executable, str(TOOLS / "chapters.py"), "--notebooks", "--root", str(tmp_path)],
        capture_output=True, text=True, check=True,
    )
    assert listed.stdout.split() == ["book/intro", "book/01_data"]


def test_chapters_rejects_globs_and_missing_files(tmp_path):
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n  - glob: book/*\n")
    with pytest.raises(ValueError, match="glob"):
        chapters.toc_entries(tmp_path / "_toc.yml")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/missing\n")
    with pytest.raises(FileNotFoundError):
        chapters.pages(tmp_path / "_toc.yml", tmp_path)
    result = subprocess.run(
        [sys.executable, str(TOOLS / "chapters.py"), "--root", str(tmp_path)], capture_output=True, text=True
    )
    assert result.returncode == 1 and "book/missing" in result.stderr
