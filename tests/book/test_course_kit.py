"""The course kit: student and answer notebooks (tools/student.py), papermill on the MyST
chapters (irtbook.papermill_io), and the PDF (tools/pdf.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from notebook_helpers import MYST_FRONT_MATTER

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import chapters  # noqa: E402
import pdf  # noqa: E402
import student  # noqa: E402

NOTEBOOK_PAGES = [(entry, path) for entry, path, notebook in chapters.pages(ROOT / "_toc.yml", ROOT)
                  if notebook and path.suffix == ".md"]
CHAPTERS = sorted((ROOT / "book").glob("0*.md"))
PYTHON = sys.executable
EXECUTED = ROOT / "_build" / "executed"


def _src(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    done = subprocess.run([PYTHON, str(ROOT / "tools" / "student.py"), "--out", str(out), "--root", str(ROOT)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return out


# ----------------------------------------------------------------------------- student notebooks
def test_every_chapter_has_a_student_and_an_answer_notebook(kit):
    for entry, _path in NOTEBOOK_PAGES:
        name = Path(entry).name
        for nb_path in (kit / f"{name}.ipynb", kit / "answers" / f"{name}.ipynb"):
            nb = json.loads(nb_path.read_text())
            assert nb["metadata"]["kernelspec"]["name"] == "python3"
            for cell in nb["cells"]:
                if cell["cell_type"] == "code":
                    assert cell["outputs"] == [] and cell["execution_count"] is None, f"{nb_path}: outputs left"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_each_chapter_has_a_coding_exercise_with_a_solution_cell(chapter):
    import jupytext

    nb = jupytext.read(chapter)
    solutions = [c for c in nb.cells if student.is_solution_cell(c)]
    assert solutions, f"{chapter.name}: no code cell tagged solution (a coding exercise's answer)"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_student_notebook_holds_no_solution_text(kit, chapter):
    stu = json.loads((kit / f"{chapter.stem}.ipynb").read_text())
    ans = json.loads((kit / "answers" / f"{chapter.stem}.ipynb").read_text())
    text = "\n".join(_src(c) for c in stu["cells"])
    assert "{admonition} Solution" not in text, "a solution dropdown is left"
    solutions = student.solutions_of(ans)
    assert solutions, "the answer notebook has no solution cell"
    # every line that only the solutions hold (not the chapter's other cells) is gone
    rest = "\n".join(_src(c) for c in ans["cells"] if not student.is_solution_cell(c))
    for source in solutions:
        own = [line.strip() for line in source.splitlines() if line.strip() and line.strip() not in rest]
        assert own, "a solution cell that repeats the chapter"
        for line in own:
            assert line not in text, f"solution line in the student notebook: {line!r}"
    # nor do the hidden cells that compute the written solutions survive
    exercises = text[text.index("## Exercises"):]
    assert "glue(" not in exercises.split("## The code behind")[0], "a solution-computing cell is left"
    # the dropdown's text is gone: the answers' Markdown has text the student's lacks
    answer_md = "\n".join(_src(c) for c in ans["cells"] if c["cell_type"] == "markdown")
    assert ":class: dropdown" in answer_md
    # filling the exercise cells in gives the answer notebook's code, less the hidden cells that
    # compute the written solutions
    # (the student's data check, tools/student.py's data_check_cell, is the one cell the chapter lacks)
    filled = student.fill_in(stu, solutions)
    code = [_src(c) for c in filled["cells"] if c["cell_type"] == "code"
            and student.DATA_CHECK_TAG not in (c["metadata"].get("tags") or [])]
    answer_code = [_src(c) for c in ans["cells"] if c["cell_type"] == "code"]
    assert code == [c for c in answer_code if c in code]
    dropped = [c for c in answer_code if c not in code]
    assert all("glue(" in c or "assert" in c for c in dropped), "a dropped cell that is not a hidden solution check"


def test_dropdown_stripping_keeps_everything_else():
    text = ("Before.\n\n:::{admonition} Solutions\n:class: dropdown\n\n1. answer\n\n```python\nx = 1\n```\n:::\n\n"
            "After.\n\n```{admonition} Note\nkept\n```\n")
    out, removed = student.strip_solution_dropdowns(text)
    assert removed == 1 and "answer" not in out and "x = 1" not in out
    assert "Before." in out and "After." in out and "{admonition} Note" in out
    with pytest.raises(ValueError, match="unclosed"):
        student.strip_solution_dropdowns(":::{admonition} Solution\nnever closed\n")


def _papermill(*args, env=None, timeout=600):
    return subprocess.run([PYTHON, "-m", "papermill", *args, "--cwd", str(ROOT), "--no-progress-bar",
                           "--log-level", "WARNING"], cwd=ROOT, capture_output=True, text=True, env=env,
                          timeout=timeout)


def _executed_ok(path: Path) -> dict:
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell["execution_count"] is not None, "a code cell did not run"
            assert not [o for o in cell["outputs"] if o["output_type"] == "error"]
    return nb


def _names(source: str, kind) -> set[str]:
    """The names a cell's code stores (``kind=ast.Store``) or reads (``ast.Load``)."""
    import ast

    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    tree = ast.parse("\n".join(lines))
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, kind)}
    if kind is ast.Store:
        imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
        names |= {a.asname or a.name.split(".")[0] for n in imports for a in n.names}
        names |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    return names


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_a_filled_in_student_notebook_runs_where_the_chapter_runs(kit, chapter):
    """The filled-in student notebook is the chapter less cells no later cell needs.

    Filling the exercises in gives the answer notebook's code less the hidden cells that compute the
    written solutions (:func:`test_student_notebook_holds_no_solution_text`); the answer notebook is
    the chapter the book executes (:func:`test_every_answer_notebook_is_the_chapter_the_book_executed`).
    So the filled-in notebook runs wherever the chapter does if no cell after a dropped one reads a
    name that only the dropped cells define, which is what this checks, on every chapter.
    """
    import ast

    answers = json.loads((kit / "answers" / f"{chapter.stem}.ipynb").read_text())
    stu = json.loads((kit / f"{chapter.stem}.ipynb").read_text())
    filled = student.fill_in(stu, student.solutions_of(answers))
    kept = [_src(c) for c in filled["cells"] if c["cell_type"] == "code"]
    code = [_src(c) for c in answers["cells"] if c["cell_type"] == "code"]
    defined_by_kept: set[str] = set()
    only_dropped: set[str] = set()
    for source in code:
        if source in kept:
            missing = (_names(source, ast.Load) - defined_by_kept) & only_dropped
            assert not missing, f"{chapter.name}: a student's cell reads {sorted(missing)}, set only in a hidden cell"
            defined_by_kept |= _names(source, ast.Store)
            only_dropped -= defined_by_kept
        else:
            only_dropped |= _names(source, ast.Store) - defined_by_kept


def test_the_primers_solutions_print_their_answers_in_the_executed_chapter():
    """The primer's exercise solutions (the code a student pastes in) printed their answers when the book ran."""
    executed = EXECUTED / "00_primer.ipynb"
    if not executed.is_file():
        pytest.skip(f"no {executed}: run `make book QUICK=1` (or `make book`) first")
    nb = _executed_ok(executed)
    printed = "".join("".join(o.get("text", "")) for c in nb["cells"] if student.is_solution_cell(c)
                      for o in c["outputs"])
    assert "largest difference" in printed and "Fluid:" in printed


@pytest.mark.book
@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_every_answer_notebook_is_the_chapter_the_book_executed(kit, chapter):
    """The answer notebook's code is, cell for cell, the code the book build ran without error.

    ``make book`` executes every chapter with papermill and refuses a notebook with an error output
    or a cell that did not run (tools/check_executed.py); so an answer notebook whose code cells equal
    the executed chapter's (less papermill's injected parameters) runs too, without a second run here.
    """
    executed = EXECUTED / f"{chapter.stem}.ipynb"
    if not executed.is_file():
        pytest.skip(f"no {executed}: run `make book QUICK=1` (or `make book`) first")
    ran = _executed_ok(executed)
    ran_code = [_src(c) for c in ran["cells"] if c["cell_type"] == "code"
                and "injected-parameters" not in (c["metadata"].get("tags") or [])]
    answers = json.loads((kit / "answers" / f"{chapter.stem}.ipynb").read_text())
    answer_code = [_src(c) for c in answers["cells"] if c["cell_type"] == "code"]
    assert answer_code == ran_code, f"{chapter.name}: the answer notebook's code differs from the executed chapter's"


# ----------------------------------------------------------------------------- papermill on .md
def test_pyproject_registers_the_papermill_handler():
    """The book's package registers papermill's MyST reader; the library's wheel registers nothing for papermill."""
    assert "entry-points" not in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    project = tomllib.loads((ROOT / "bookkit" / "pyproject.toml").read_text())["project"]
    target = project["entry-points"]["papermill.io"]["jupytext://"]
    module, _, name = target.partition(":")
    assert (module, name) == ("irtbook._papermill_handler", "JupytextHandler")


def test_handler_reads_myst_and_passes_json_through(tmp_path):
    from papermill.iorw import LocalHandler, PapermillIO

    from irtbook import papermill_io

    io = PapermillIO()
    io.register("local", LocalHandler())
    handler = papermill_io.install(io)
    assert io.get_handler("book/00_primer.md") is handler
    notebook = json.loads(handler.read(str(ROOT / "book" / "00_primer.md")))
    tags = [c["metadata"].get("tags", []) for c in notebook["cells"] if c["cell_type"] == "code"]
    assert tags[0] == ["parameters"]
    explicit = json.loads(handler.read(f"jupytext://{ROOT / 'book' / '00_primer.md'}"))
    assert [c["source"] for c in explicit["cells"]] == [c["source"] for c in notebook["cells"]]
    plain = tmp_path / "x.ipynb"
    plain.write_text(json.dumps(notebook))
    assert handler.read(str(plain)) == plain.read_text()
    # an output path in a jupytext format is written through jupytext, and reads back the same
    handler.write(json.dumps(notebook), str(tmp_path / "y.md"))
    assert (tmp_path / "y.md").read_text().startswith("---\njupyter")
    again = json.loads(handler.read(str(tmp_path / "y.md")))
    assert [c["source"] for c in again["cells"]] == [c["source"] for c in notebook["cells"]]


def _entry_point_path(tmp_path: Path) -> str:
    """A directory that registers the book package's papermill entry point (as `pip install` would)."""
    dist = tmp_path / "ep" / "irtlib_papermill_test-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: irtlib-papermill-test\nVersion: 0\n")
    project = tomllib.loads((ROOT / "bookkit" / "pyproject.toml").read_text())["project"]
    lines = [f"{k} = {v}" for k, v in project["entry-points"]["papermill.io"].items()]
    (dist / "entry_points.txt").write_text("[papermill.io]\n" + "\n".join(lines) + "\n")
    return str(dist.parent)


MYST_NOTEBOOK = MYST_FRONT_MATTER + """
# A two-cell chapter

```{code-cell} ipython3
:tags: [parameters]
BUDGET = 10
```

```{code-cell} ipython3
from myst_nb import glue
glue("budget", BUDGET, display=False)
```
"""


def test_papermill_runs_a_myst_chapter_directly(tmp_path):
    """`papermill chapter.md out.ipynb -p BUDGET 3`, as the README says for book/*.md.

    A two-cell MyST notebook in the chapters' format stands for a chapter: what is tested is that
    papermill, with only the pyproject's entry point registered, reads MyST, injects the
    parameters and runs it (the chapters themselves run in the book build).
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), _entry_point_path(tmp_path), env.get("PYTHONPATH", "")])
    chapter = tmp_path / "chapter.md"
    chapter.write_text(MYST_NOTEBOOK)
    out = tmp_path / "chapter.ipynb"
    done = _papermill(str(chapter), str(out), "-p", "BUDGET", "3", env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "does not end in one of" not in done.stderr
    nb = _executed_ok(out)
    assert nb["metadata"]["papermill"]["parameters"]["BUDGET"] == 3
    glued = {o["metadata"]["scrapbook"]["name"]: o["data"] for c in nb["cells"] for o in c.get("outputs", [])
             if (o.get("metadata") or {}).get("scrapbook")}
    assert glued["budget"]["application/papermill.record/text/plain"] == "3"


def test_every_reproduce_box_gives_the_papermill_command():
    for chapter in CHAPTERS:
        text = chapter.read_text()
        box = re.search(r":::\{admonition\} Reproduce this chapter\n(.*?)\n:::", text, re.S)
        assert box, chapter.name
        assert f"papermill book/{chapter.name}" in box.group(1), f"{chapter.name}: no papermill command in the box"


def test_readme_documents_papermill_student_and_pdf():
    readme = (ROOT / "README.md").read_text()
    assert "papermill book/05_selection.md" in readme
    assert "make student" in readme and "make pdf" in readme and "_build/pdf/book.pdf" in readme


# ----------------------------------------------------------------------------- PDF
def test_pdf_facts_counts_pages_and_images(tmp_path):
    if not pdf.CHROMIUM.exists():
        pytest.skip("no chromium")
    pytest.importorskip("playwright.sync_api")
    import base64
    import io

    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 2))
    fig.subplots().plot([0, 1], [1, 0])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    img = base64.b64encode(buf.getvalue()).decode()
    page = tmp_path / "index.html"
    page.write_text("<html><body>" + "".join(f"<p style='page-break-after: always'>page {i} "
                                              f"<img src='data:image/png;base64,{img}'></p>" for i in range(3))
                    + "</body></html>")
    pdf.print_pdf(page, tmp_path / "x.pdf")
    facts = pdf.pdf_facts(tmp_path / "x.pdf")
    assert facts["pages"] == 3 and facts["images"] >= 1


def test_make_pdf_output():
    """After `make pdf`: the whole book, figures and math included."""
    book = ROOT / "_build" / "pdf" / "book.pdf"
    if not book.is_file():
        pytest.skip("no _build/pdf/book.pdf: run `make pdf` (after `make book QUICK=1`)")
    facts = pdf.pdf_facts(book)
    assert facts["pages"] >= 40, facts
    assert facts["images"] >= 20, facts
    assert {"MathJax_Main-Regular", "MathJax_Math-Italic"} <= set(facts["mathjax_fonts"]), facts["fonts"]
    html = (ROOT / "_build" / "pdf" / "_build" / "singlehtml" / "_print.html").read_text(encoding="utf-8")
    for title in ("IRT and adaptive testing in one chapter", "Glossary", "Notation", "Fluid and static selection"):
        assert title in html, title


def test_makefile_has_the_course_kit_targets(tmp_path):
    """`make -n student` and `make -n pdf` name the tools and the outputs the README promises."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for target, expected in (("student", ["tools/student.py", "_build/student"]),
                             ("pdf", ["--builder singlehtml", "tools/pdf.py", "_build/pdf/book.pdf"])):
        done = subprocess.run(["make", "-n", target, "MANAGE_VENV=0", f"VENV={Path(PYTHON).parent.parent}"],
                              cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        for text in expected:
            assert text in done.stdout, (target, text)


def test_the_handler_module_imports_before_and_after_papermill():
    """With the entry point installed, `import irtbook.papermill_io` must work in a fresh
    interpreter whether or not papermill was imported first (papermill imports the handler while
    it loads its entry points)."""
    for code in ("import irtbook.papermill_io as m; assert m.JupytextHandler",
                 "import papermill, irtbook.papermill_io as m; assert m.JupytextHandler"):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 0, done.stderr[-2000:]
