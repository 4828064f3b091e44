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
