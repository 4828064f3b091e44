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
from notebook_helpers import MYST_FRONT_MATTER

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools"
sys.path.insert(0, str(TOOLS))
import chapters  # noqa: E402  (tools/chapters.py)

FRONT_MATTER = MYST_FRONT_MATTER


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
    from myst_nb import glue
    value = float(np.sqrt(16.0)) + SEED
    print("QUICK is", QUICK)
    glue("quick_settings", {"tiny splits": "2 (20)"} if QUICK else {}, display=False)
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
    # ... which keeps papermill's cells (tagged remove-cell: not on the page)
    assert ["injected-parameters", "remove-cell"] in tags and ["parameters", "remove-cell"] in tags
    assert executed["metadata"]["papermill"]["parameters"] == {"QUICK": True}
    intro_html = (html / "book" / "intro.html").read_text()
    assert "QUICK is True" in intro_html  # outputs shown ...
    assert "QUICK = False" not in intro_html and "tag_parameters" not in intro_html  # ... parameters not
    assert "tag_hide-input" in intro_html  # code folded
    assert re.search(r'<div class="[^"]*\bquick-build\b[^"]*admonition', intro_html)  # a QUICK build says so
    assert "tiny splits: 2 (20)" in intro_html  # with the settings the chapter glued
    assert "quick-build" not in (html / "book" / "notes.html").read_text()
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
    missing = [f for f in files if f not in chapters.GENERATED_PAGES
               and not any((ROOT / f"{f}{s}").is_file() for s in ("", ".md", ".ipynb"))]
    assert not missing, f"_toc.yml lists files that do not exist: {missing}"
    # the Makefile's stdlib parser sees the same pages as YAML does
    assert [re.sub(r"\.(md|ipynb)$", "", f) for f in files] == chapters.toc_entries(ROOT / "_toc.yml")
    # the reference pages (plain pages, nothing to execute) may sit between these two
    ends = [f for f in files if f not in ("book/notation", "book/glossary")]
    assert ends[-2:] == ["book/reproducibility", "book/references"], "keep these two last"
    assert "book/datasheet" in files, "the datasheet (data/README.md) is a page of the book"
    for entry in chapters.GENERATED_PAGES:
        assert (ROOT / chapters.GENERATED_PAGES[entry][0]).is_file()


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


# ---------------------------------------------------------------------------
# tools/make_build_tree.py: cell tags, QUICK banner, generated pages, MathJax
# ---------------------------------------------------------------------------
import make_build_tree  # noqa: E402  (tools/make_build_tree.py)


def _md(source: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": source}


def _tagged(source: str, *tags: str) -> dict:
    cell = _code(source, 1)
    if tags:
        cell["metadata"]["tags"] = list(tags)
    return cell


def test_tag_policy_keeps_only_the_argument_on_the_page():
    notebook = _executed_notebook(
        [
            _md("# Title"),
            _tagged("QUICK = False", "parameters"),
            _tagged("QUICK = True\n", "injected-parameters"),
            _tagged("x = compute()"),
            _tagged("glue('x', x, display=False)", "remove-cell"),
            _tagged("model.fit()  # the lesson", "show-input"),
            _tagged("plot()", "remove-input"),
            _tagged("table()", "hide_input"),  # underscore spelling counts
            _tagged("answer()", "solution"),
            _tagged("answer(); shown()", "solution", "show-input"),
            _tagged("folded()", "hide-cell"),
            _tagged("y = 2", "remove-output"),
        ]
    )
    added = make_build_tree.apply_tag_policy(notebook)
    tags = [cell["metadata"].get("tags") for cell in notebook["cells"]]
    assert tags == [
        None,  # markdown cells untouched
        ["parameters", "remove-cell"],
        ["injected-parameters", "remove-cell"],
        ["hide-input"],
        ["remove-cell"],
        ["show-input"],
        ["remove-input"],
        ["hide_input"],
        ["solution", "hide-cell"],
        ["solution", "show-input"],
        ["hide-cell"],
        ["remove-output", "hide-input"],
    ]
    assert added == {"remove-cell": 2, "hide-cell": 1, "hide-input": 2}
    # idempotent: a second pass adds nothing
    assert make_build_tree.apply_tag_policy(notebook) == {"remove-cell": 0, "hide-cell": 0, "hide-input": 0}


def _glue_output(name: str, text: str, display: bool = False) -> dict:
    prefix = "" if display else make_build_tree.GLUE_PREFIX
    return {"output_type": "display_data", "data": {prefix + "text/plain": text},
            "metadata": {"scrapbook": {"name": name, "mime_prefix": prefix}}}


def _quick_notebook(quick, settings_output: dict | None = None) -> dict:
    notebook = _executed_notebook(
        [
            _md("(ch-x)=\n# The title\n\n:::{note}\n# not a title inside a fence\n:::\n\nIntro text.\n"),
            _tagged("QUICK = False", "parameters"),
            _code("n = 3", 1, [settings_output] if settings_output else []),
        ]
    )
    notebook["metadata"]["papermill"]["parameters"] = {"QUICK": quick}
    return notebook


def test_quick_banner_goes_right_after_the_title():
    notebook = _quick_notebook(True)
    assert make_build_tree.add_quick_banner(notebook)
    cells = notebook["cells"]
    assert cells[0]["source"] == "(ch-x)=\n# The title\n"
    banner = cells[1]["source"]
    assert banner.startswith("```{admonition} Quick build\n:class: warning quick-build\n")
    assert "This page was built with `QUICK=True`" in banner and banner.rstrip().endswith("```")
    assert "Reduced on this page" not in banner
    assert cells[2]["source"].startswith("\n:::{note}") and "Intro text." in cells[2]["source"]
    assert len(cells) == 5


def test_quick_banner_lists_glued_settings():
    glued = _glue_output("quick_settings", repr({"train/test splits": "10 (100)", "py-irt epochs": "200 (2000)"}))
    notebook = _quick_notebook(True, glued)
    make_build_tree.add_quick_banner(notebook)
    banner = notebook["cells"][1]["source"]
    assert "- train/test splits: 10 (100)\n- py-irt epochs: 200 (2000)\n" in banner
    # a JSON string works too, and so does a displayed glue
    as_json = _glue_output("quick_settings", repr(json.dumps({"sweep": "5 (40)"})), display=True)
    assert make_build_tree.quick_settings(_quick_notebook(True, as_json)) == {"sweep": "5 (40)"}
    with pytest.raises(ValueError, match="must be a dict"):
        make_build_tree.quick_settings(_quick_notebook(True, _glue_output("quick_settings", "[1, 2]")))
    with pytest.raises(ValueError, match="not a dict literal"):
        make_build_tree.quick_settings(_quick_notebook(True, _glue_output("quick_settings", "<object at 0x1>")))


@pytest.mark.parametrize("quick", [False, None, "False"])
def test_no_quick_banner_on_a_full_build(quick):
    notebook = _quick_notebook(quick)
    before = json.dumps(notebook)
    assert not make_build_tree.add_quick_banner(notebook)
    assert json.dumps(notebook) == before


def test_quick_banner_without_a_title_goes_first():
    notebook = _executed_notebook([_md("no title here"), _code("x = 1", 1)])
    notebook["metadata"]["papermill"]["parameters"] = {"QUICK": True}
    assert make_build_tree.add_quick_banner(notebook)
    assert "quick-build" in notebook["cells"][0]["source"]
    assert notebook["cells"][1]["source"] == "no title here"


def test_datasheet_page_gets_a_label_and_resolvable_links(tmp_path):
    page = make_build_tree.generated_page(ROOT / "data" / "README.md", "datasheet", "*note*")
    assert page.startswith("(datasheet)=\n# Datasheet")
    assert "](#" not in page, "in-page Markdown links must become {ref} roles"
    assert "{ref}`Real data <datasheet-real-data>`" in page
    assert "(datasheet-real-data)=\n## Real data" in page
    readme = tmp_path / "README.md"
    readme.write_text("# T\n\nSee [x](#nowhere).\n")
    with pytest.raises(ValueError, match="nowhere"):
        make_build_tree.generated_page(readme, "t", "")
    readme.write_text("# T\n\nSee [the manifest](manifest.json) and [site](https://example.org).\n"
                      "```\n[not](#a-link)\n```\n")
    page = make_build_tree.generated_page(readme, "t", "")
    assert f"the manifest (`{(tmp_path / 'manifest.json').as_posix()}`)" in page
    assert "[site](https://example.org)" in page and "[not](#a-link)" in page


def _fake_mathjax(directory: Path, version: str = make_build_tree.MATHJAX_VERSION) -> Path:
    for name in ("es5/tex-mml-chtml.js", "es5/tex-svg.js", "es5/output/chtml/fonts/woff-v2/a.woff",
                 "es5/output/svg/fonts/tex.js", "es5/input/tex/extensions/ams.js", "LICENSE"):
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text("x")
    (directory / "package.json").write_text(json.dumps({"name": "mathjax", "version": version}))
    return directory


def test_mathjax_is_found_checked_and_copied(tmp_path, monkeypatch):
    good = _fake_mathjax(tmp_path / "good")
    wrong = _fake_mathjax(tmp_path / "wrong", version="3.1.0")
    assert make_build_tree.find_mathjax(tmp_path, good) == good.resolve()
    assert make_build_tree.find_mathjax(tmp_path, wrong) is None
    assert make_build_tree.find_mathjax(tmp_path, tmp_path / "missing") is None
    monkeypatch.setenv("MATHJAX_DIR", str(good))
    assert make_build_tree.find_mathjax(tmp_path) == good.resolve()
    target = make_build_tree.copy_mathjax(good, tmp_path / "src")
    assert target == tmp_path / "src" / "_mathjax" / "_static" / "mathjax"
    copied = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    assert copied == ["LICENSE", "es5/input/tex/extensions/ams.js", "es5/output/chtml/fonts/woff-v2/a.woff",
                      "es5/tex-mml-chtml.js"]


def test_build_tree_config_points_at_the_shipped_mathjax(tmp_path):
    """The build tree of the real book: MathJax configuration, tags, the datasheet page."""
    executed = tmp_path / "executed"
    executed.mkdir()
    for entry, _, notebook in chapters.pages(ROOT / "_toc.yml", ROOT):
        if notebook:
            nb = _quick_notebook(True)
            (executed / f"{Path(entry).name}.ipynb").write_text(json.dumps(nb))
    out = tmp_path / "src"
    make_build_tree.build_tree(ROOT, executed, out, mathjax=_fake_mathjax(tmp_path / "mj"))
    config = yaml.safe_load((out / "_config.yml").read_text())
    assert config["execute"]["execute_notebooks"] == "off"
    assert config["sphinx"]["config"]["mathjax_path"] == "mathjax/es5/tex-mml-chtml.js"
    assert "_mathjax" in config["sphinx"]["config"]["html_extra_path"]
    assert (out / "_mathjax" / "_static" / "mathjax" / "es5" / "tex-mml-chtml.js").is_file()
    assert not list((out / "_static").rglob("*.js")), "jupyter-book would add every .js under _static to every page"
    assert (out / "_static" / "book.css").is_file()
    assert (out / "book" / "datasheet.md").read_text().startswith("(datasheet)=\n# ")
    intro = json.loads((out / "book" / "intro.ipynb").read_text())
    assert any("quick-build" in "".join(c["source"]) for c in intro["cells"])
    assert ["parameters", "remove-cell"] in [c["metadata"].get("tags") for c in intro["cells"]]


def test_run_chapter_passes_typed_parameters_and_keeps_papermill_metadata(tmp_path):
    """tools/run_chapter.py runs papermill in-process: the arguments mean what papermill's command makes of them."""
    source = tmp_path / "ch.md"
    source.write_text(_chapter("Ch", "print(type(QUICK).__name__, QUICK, type(SEED).__name__, SEED, LABEL)",
                               params='QUICK = False\nSEED = 0\nLABEL = "x"'))
    output = tmp_path / "executed" / "ch.ipynb"
    done = subprocess.run([sys.executable, str(TOOLS / "run_chapter.py"), str(source), str(output), "--cwd",
                           str(tmp_path), "--", "-p", "QUICK", "True", "-p", "SEED", "3", "-p", "LABEL", "abc"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    notebook = json.loads(output.read_text())
    assert notebook["metadata"]["papermill"]["parameters"] == {"QUICK": True, "SEED": 3, "LABEL": "abc"}
    assert notebook["metadata"]["papermill"]["exception"] is None
    printed = "".join("".join(o.get("text", "")) for c in notebook["cells"] if c["cell_type"] == "code"
                      for o in c["outputs"])
    assert printed == "bool True int 3 abc\n"
    assert not (tmp_path / "executing" / "ch.ipynb").exists()      # moved into place, not left behind


_FLAKY_START = """\
import sys
sys.path.insert(0, sys.argv[1])
import run_chapter
from papermill.cli import papermill as papermill_command

real, calls = papermill_command.main, []


def flaky(*args, **kwargs):                  # the first kernel dies as one whose port was taken does
    calls.append(1)
    if len(calls) == 1:
        raise RuntimeError(sys.argv[2])
    return real(*args, **kwargs)


papermill_command.main = flaky
status = run_chapter.main(sys.argv[3:])
print("attempts", len(calls))
sys.exit(status)
"""


@pytest.mark.parametrize(("error", "status", "attempts"), [
    ("Kernel died before replying to kernel_info", 0, 2),     # no cell ran: run again, and it works
    ("some cell failed", 1, 1),                               # anything else: not run again
])
def test_a_page_whose_kernel_died_before_starting_is_run_again(tmp_path, error, status, attempts):
    source = tmp_path / "ch.md"
    source.write_text(_chapter("Ch", "print('ran')"))
    output = tmp_path / "executed" / "ch.ipynb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")} | {"IRTBOOK_FORK_KERNEL": "0"}
    done = subprocess.run([sys.executable, "-c", _FLAKY_START, str(TOOLS), error, str(source), str(output),
                           "--cwd", str(tmp_path)], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == status, done.stderr
    assert f"attempts {attempts}" in done.stdout
    assert ("running the page again (1 of 2)" in done.stderr) == (attempts == 2)
    assert output.exists() == (status == 0)


def _run_chapter(tmp_path: Path, body: str) -> tuple[subprocess.CompletedProcess, dict]:
    """tools/run_chapter.py on a one-cell chapter, outside coverage's subprocess hook (as the book runs)."""
    source = tmp_path / "ch.md"
    source.write_text(_chapter("Ch", body))
    output = tmp_path / "executed" / "ch.ipynb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")}
    done = subprocess.run([sys.executable, str(TOOLS / "run_chapter.py"), str(source), str(output), "--cwd",
                           str(tmp_path)], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    return done, json.loads(output.read_text())


def _printed(notebook: dict, stream: str = "stdout") -> str:
    return "".join("".join(o.get("text", "")) for c in notebook["cells"] if c["cell_type"] == "code"
                   for o in c["outputs"] if o.get("name") == stream)


def test_run_chapter_stops_the_kernel_at_once_after_the_last_cell(tmp_path):
    """No shutdown request and teardown: the kernel's atexit hooks do not run, yet every output is kept."""
    marker = tmp_path / "atexit-ran"
    _, notebook = _run_chapter(tmp_path, f"""\
        import atexit, sys
        atexit.register(lambda: open({str(marker)!r}, "w").close())
        print("first line")
        sys.stderr.write("to stderr\\n")
        print("last line", end="")
        """)
    assert (_printed(notebook), _printed(notebook, "stderr")) == ("first line\nlast line", "to stderr\n")
    assert not marker.exists()


def test_a_kernel_with_processes_of_its_own_is_seen(tmp_path):
    """Such a kernel is shut down as before (gracefully): the runner sees its child processes, and only them."""
    sys.path.insert(0, str(TOOLS))
    try:
        import run_chapter
    finally:
        sys.path.remove(str(TOOLS))
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time\n"
                               "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                               "print(child.pid, flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    lone = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        child = int(parent.stdout.readline())
        assert run_chapter.kernel_has_children(parent.pid)
        assert not run_chapter.kernel_has_children(lone.pid)
        assert not run_chapter.kernel_has_children(None)
        os.kill(child, 9)
        os.kill(parent.pid, 9)
        parent.wait()
        assert not run_chapter.kernel_has_children(parent.pid)      # gone
    finally:
        for proc in (parent, lone):
            proc.kill()
            proc.wait()
