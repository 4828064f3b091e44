"""The book as a course: its chapters in reading order, their titles and their exercises.

The introduction and the teachers' page (``book/teaching.md``) count exercises with these
functions rather than typing the counts: a chapter's exercises are the top-level numbered items
of its ``## Exercises`` section (``1. ...``, ``2. ...``); its *coding* exercises are those
whose solution is a code cell tagged ``solution`` (``tools/student.py`` empties these cells
in the student notebooks).

Everything is read from the MyST sources (``book/<name>.md``) and ``_toc.yml``, relative to
the repository root the chapters run in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__presentation__ = True     # counts exercises in the sources: no computed number depends on it

_ENTRY = re.compile(r"^\s*(?:-\s+)?(?:root|file)\s*:\s*(\S+)")
_FENCE = re.compile(r"^(`{3,}|:{3,})")
_SOLUTION_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n:tags:\s*\[[^\]]*\bsolution\b", re.M)


@dataclass(frozen=True)
class Chapter:
    """One notebook chapter: its toc entry, title, exercises (first sentences) and coding solutions."""

    entry: str
    title: str
    exercises: tuple[str, ...]
    coding: int

    @property
    def n_exercises(self) -> int:
        """How many exercises the chapter ends with."""
        return len(self.exercises)


def toc_entries(toc: str | Path = "_toc.yml") -> list[str]:
    """The ``root`` and ``file`` entries of a jb-book ``_toc.yml``, in reading order."""
    entries = []
    for line in Path(toc).read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("#"):
            continue
        match = _ENTRY.match(line)
        if match and match.group(1) not in entries:
            entries.append(re.sub(r"\.(md|ipynb)$", "", match.group(1)))
    return entries


def title(text: str) -> str:
    """The first ``# `` heading of a MyST page (outside code fences)."""
    fence = None
    for line in text.splitlines():
        match = _FENCE.match(line)
        if match:
            fence = None if fence and line.strip() == fence else (fence or match.group(1))
            continue
        if fence is None and line.startswith("# "):
            return line[2:].strip()
    raise ValueError("no '# ' title")


def _first_sentence(item: str) -> str:
    text = " ".join(item.split())
    match = re.search(r"^(.+?[.?!])(?:\s|$)", text)
    return match.group(1) if match else text


def exercises(text: str) -> tuple[tuple[str, ...], int]:
    """``(first sentences of the exercises, number of solution code cells)`` of a MyST chapter."""
    start = re.search(r"^## Exercises\s*$", text, re.M)
    if start is None:
        return (), 0
    section, fence = [], None
    for line in text[start.end():].splitlines():
        match = _FENCE.match(line)
        if match:
            fence = None if fence and line.strip() == fence else (fence or match.group(1))
        elif fence is None and re.match(r"^#{1,2} ", line):
            break                      # the next section (headings inside code cells do not count)
        section.append(line)
    section = "\n".join(section)
    coding = len(_SOLUTION_CELL.findall(section))
    # the numbered list before the first code cell or admonition (the written solutions repeat the numbers)
    body = re.split(r"^(?:```|:::)", section, maxsplit=1, flags=re.M)[0]
    items = re.split(r"^\d+\.\s+", body, flags=re.M)[1:]
    return tuple(_first_sentence(item) for item in items), coding


def chapters(root: str | Path = ".", *, toc: str = "_toc.yml") -> list[Chapter]:
    """Every toc page with an ``## Exercises`` section, in reading order."""
    root = Path(root)
    out = []
    for entry in toc_entries(root / toc):
        path = root / f"{entry}.md"
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        found, coding = exercises(text)
        if found:
            out.append(Chapter(entry, title(text), found, coding))
    return out


# --------------------------------------------------------------------------- what data a chapter needs
#: Chapters that read real data without naming a benchmark in their parameters: the benchmarks they need.
CHAPTER_DATA = {"book/10_beyond": ("airbench2024",)}


def parameter_values(text: str) -> dict:
    """The literal values of a MyST chapter's ``parameters`` cell (name -> value)."""
    match = re.search(r"^```\{code-cell\}[^\n]*\n:tags:\s*\[[^\]]*\bparameters\b[^\]]*\]\n(.*?)^```", text, re.M | re.S)
    return {} if match is None else literal_assignments(match.group(1))


def literal_assignments(code: str) -> dict:
    """``NAME = literal`` assignments of a parameters cell's code (name -> value; others skipped)."""
    import ast

    values = {}
    for node in ast.parse(code).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return values


def needed_benchmarks(params: dict, *, entry: str = "") -> list[str]:
    """The benchmarks with real data a chapter reads, from its parameters (``[]``: it needs none).

    A chapter needs real data when it has a ``DATA`` parameter: its benchmarks are its ``BENCHMARKS``
    list and every ``*BENCHMARK`` string, else :data:`CHAPTER_DATA`'s, else the paper's six; only those
    that have real data in principle count (:data:`irtbook.provenance.HAS_REAL`).
    """
    from irtlib.datasets import paper

    from .provenance import HAS_REAL

    if "DATA" not in params:
        return []
    names = list(params.get("BENCHMARKS") or [])
    names += [v for k, v in params.items() if k.endswith("BENCHMARK") and isinstance(v, str)]
    names = names or list(CHAPTER_DATA.get(entry, paper.BENCHMARKS))
    return [b for b in dict.fromkeys(names) if b in HAS_REAL]


class MissingData(RuntimeError):
    """A chapter meant for real data would run on the simulated release: shown as one line in Jupyter."""

    def _render_traceback_(self):     # IPython shows this instead of a traceback
        return [f"{type(self).__name__}: {self}"]


def require_real_data(entry: str, params: dict) -> list[str]:
    """Refuse to run a chapter meant for real data on the simulated release, unless asked to.

    The student notebooks of the course kit (``tools/student.py``) call this right after their
    parameters. It passes when every benchmark the chapter reads (:func:`needed_benchmarks`) has
    its real data, or when the student asked for the simulated release (``DATA = "simulated"``,
    papermill's ``-p DATA simulated``).

    Parameters
    ----------
    entry : str
        The chapter's toc entry (``"book/02_fit"``), for the message.
    params : dict
        The chapter's parameters as the notebook set them (``globals()``).

    Returns
    -------
    list of str
        The benchmarks checked.

    Raises
    ------
    MissingData
        In one line: the missing files, how to get them, and the flag that runs on the simulation.
    """
    from irtlib.datasets import authors, resolve
    from irtlib.datasets.sources import source_setting

    names = needed_benchmarks(params, entry=entry)
    source = params.get("DATA")
    if not names or source_setting(source) == "simulated":
        return names
    data_dir = params.get("DATA_DIR")
    missing = [b for b in names if resolve(b, source=source, data_dir=data_dir).kind == "simulated"]
    if missing:
        files = ", ".join(authors.FILES[b].filename for b in missing)
        unverified = [b for b in missing if b in authors.UNVERIFIED]
        how = "`irtlib paper-data download" + (f" --with-unverified {' '.join(unverified)}`" if unverified else "`")
        raise MissingData(f"{entry} is meant for the paper's data, but {files} "
                          f"{'is' if len(missing) == 1 else 'are'} missing (looked in ${authors.DATA_ENV}, "
                          f"../shared/realdata/paper and {authors.cache_directory()}): get "
                          f"{'it' if len(missing) == 1 else 'them'} with {how}, or run the notebook with "
                          "`-p DATA simulated` to use the simulated release (every number then differs from the "
                          "book's)")
    return names
