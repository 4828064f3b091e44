#!/usr/bin/env python3
"""Write the course kit: a student notebook and an answer notebook for every chapter.

Usage::

    python tools/student.py [--out _build/student] [--root .] [CHAPTER ...]

``CHAPTER`` is a toc entry or a path (``book/05_selection`` or ``book/05_selection.md``);
default: every notebook page of ``_toc.yml``. For each chapter ``book/<name>.md`` (a jupytext
MyST notebook) it writes

* ``<out>/<name>.ipynb``, the **student notebook**: every code cell tagged ``solution`` is
  replaced by an empty exercise cell (tagged ``solution``, holding only a comment that asks for
  the student's code), every solution dropdown (a ``{admonition}`` whose title starts with
  "Solution") is removed from the Markdown cells, and so are the hidden cells (``remove-cell``)
  of the "Exercises" section, which compute the written solutions;
* ``<out>/answers/<name>.ipynb``, the **answer notebook**: the chapter as it is, solutions
  included.

Both have no outputs (they come straight from the sources) and the chapter's kernel. The student
notebook's exercise cells are, in order, the answer notebook's solution cells: pasting them back
gives the answer notebook (:func:`fill_in` does that; the tests execute the result).

Run the notebooks with the repository root as working directory (the chapters open ``data/``
and ``_build/`` relative to it), e.g. ``papermill _build/student/answers/00_primer.ipynb out.ipynb
--cwd .``.
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chapters  # noqa: E402  (tools/chapters.py)

SOLUTION_TAG = "solution"
PLACEHOLDER = "# Exercise: write your solution here (the answer notebook has one).\n"
_OPEN = re.compile(r"^(?P<fence>:{3,}|`{3,})\{admonition\}\s*(?P<title>.*)$")


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def is_solution_cell(cell) -> bool:
    """Whether ``cell`` is an exercise's solution (a code cell tagged as one)."""
    return cell.get("cell_type") == "code" and SOLUTION_TAG in (cell.get("metadata", {}).get("tags") or [])


def strip_solution_dropdowns(text: str) -> tuple[str, int]:
    """Remove every ``{admonition}`` whose title starts with "Solution" from Markdown ``text``.

    Returns the new text and how many were removed. The block ends at the first line that is
    exactly the opening fence (nested fences must be longer, as MyST requires).
    """
    lines = text.splitlines(keepends=True)
    out, removed, i = [], 0, 0
    while i < len(lines):
        match = _OPEN.match(lines[i].rstrip("\n"))
        if match and match.group("title").strip().lower().startswith("solution"):
            fence = match.group("fence")
            j = i + 1
            while j < len(lines) and lines[j].strip() != fence:
                j += 1
            if j == len(lines):
                raise ValueError(f"unclosed solution admonition: {lines[i].strip()!r}")
            i, removed = j + 1, removed + 1
            continue
        out.append(lines[i])
        i += 1
    return "".join(out), removed


def _is_hidden(cell) -> bool:
    return cell.get("cell_type") == "code" and "remove-cell" in (cell.get("metadata", {}).get("tags") or [])


def _clear(cell) -> None:
    if cell.get("cell_type") == "code":
        cell["outputs"] = []
        cell["execution_count"] = None


DATA_CHECK_TAG = "data-check"


def data_check_cell(entry: str) -> dict:
    """The code cell a student notebook runs after its parameters: real data, or a one-line refusal.

    ``irtbook.course.require_real_data`` names the missing files and how to get them; the
    student runs on the simulated release only by asking (``-p DATA simulated``).
    """
    source = ("# Course kit: this chapter is meant for the paper's data. Without them it stops here, naming the\n"
              "# missing files and how to get them; `-p DATA simulated` (DATA = \"simulated\") runs it on the\n"
              "# simulated release instead, and every number then differs from the book's.\n"
              "from irtbook.course import require_real_data\n\n"
              f"require_real_data({entry!r}, globals())\n")
    return {"cell_type": "code", "metadata": {"tags": [DATA_CHECK_TAG]}, "source": source, "outputs": [],
            "execution_count": None}


def _needs_real_data(notebook, entry: str) -> bool:
    from irtbook import course

    params = next((_source(c) for c in notebook["cells"] if c.get("cell_type") == "code"
                   and "parameters" in (c.get("metadata", {}).get("tags") or [])), None)
    if params is None:
        return False
    return bool(course.needed_benchmarks(course.literal_assignments(params), entry=entry))


def student_and_answers(notebook, *, entry: str | None = None) -> tuple[dict, dict]:
    """The student notebook and the answer notebook of a chapter notebook (nbformat dicts).

    With ``entry`` (the chapter's toc entry), a chapter meant for real data gets the data check
    (:func:`data_check_cell`) right after its parameters cell in the student notebook.
    """
    answers = copy.deepcopy(notebook)
    for cell in answers["cells"]:
        _clear(cell)
    student = copy.deepcopy(answers)
    check = entry is not None and _needs_real_data(student, entry)
    cells = []
    in_exercises = False
    for cell in student["cells"]:
        if check and cell.get("cell_type") == "code" and "parameters" in (cell.get("metadata", {}).get("tags") or []):
            cells += [cell, data_check_cell(entry)]
            continue
        if is_solution_cell(cell):
            cell["source"] = PLACEHOLDER
        elif cell.get("cell_type") == "markdown":
            headings = re.findall(r"^## (.*)$", _source(cell), re.M)
            if headings:
                in_exercises = headings[-1].strip().lower().startswith("exercises")
            text, removed = strip_solution_dropdowns(_source(cell))
            if removed and not text.strip():
                continue
            cell["source"] = text
        elif in_exercises and _is_hidden(cell):
            continue            # computes (and glues) the written solutions: not for students
        cells.append(cell)
    student["cells"] = cells
    return student, answers


def fill_in(student, solutions: list[str]):
    """``student`` with its exercise cells filled, in order, with ``solutions`` (sources)."""
    filled = copy.deepcopy(student)
    slots = [cell for cell in filled["cells"] if is_solution_cell(cell)]
    if len(slots) != len(solutions):
        raise ValueError(f"{len(slots)} exercise cells but {len(solutions)} solutions")
    for cell, source in zip(slots, solutions, strict=True):
        cell["source"] = source
    return filled


def solutions_of(answers) -> list[str]:
    """The sources of the answer notebook's solution cells, in order."""
    return [_source(cell) for cell in answers["cells"] if is_solution_cell(cell)]


def write_kit(source: Path, out: Path) -> tuple[Path, Path]:
    """Write the student and answer notebooks of one chapter; return their paths."""
    import jupytext
    import nbformat

    notebook = jupytext.read(source)
    student, answers = student_and_answers(notebook, entry=f"book/{source.stem}")
    name = source.stem
    (out / "answers").mkdir(parents=True, exist_ok=True)
    paths = out / f"{name}.ipynb", out / "answers" / f"{name}.ipynb"
    for nb, path in zip((student, answers), paths, strict=True):
        nb = nbformat.from_dict(nb)
        nb.metadata.pop("jupytext", None)
        nbformat.validate(nb)
        nbformat.write(nb, path)
    return paths


def main(argv: list[str] | None = None) -> int:
    """The command line: write the student kit of the chapters named (default every notebook page)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="toc entries or .md paths (default: every notebook page)")
    parser.add_argument("--out", type=Path, default=Path("_build/student"))
    parser.add_argument("--root", type=Path, default=Path.cwd())
    args = parser.parse_args(argv)
    if args.chapters:
        sources = [args.root / (c if c.endswith(".md") else f"{c}.md") for c in args.chapters]
    else:
        sources = [path for _, path, notebook in chapters.pages(args.root / "_toc.yml", args.root)
                   if notebook and path.suffix == ".md"]
    for source in sources:
        if not source.is_file():
            print(f"tools/student.py: error: no chapter {source}", file=sys.stderr)
            return 2
        student, answers = write_kit(source, args.out)
        print(f"student: {student}  answers: {answers}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
