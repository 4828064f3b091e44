"""The book's chapters follow the house rules, and together they compare every paper number."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from irtlib.datasets import paper

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "book").glob("0*.md"))
EXECUTED = ROOT / "_build" / "executed"


def code_cells(text: str):
    return re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_structure(chapter):
    text = chapter.read_text()
    cells = code_cells(text)
    assert cells, "a chapter is a notebook with code cells"
    first = cells[0]
    # the parameters cell (the one check of it): tagged, literals only -- papermill injects its values
    # after this cell, so a value derived here from another parameter (`N = 3 if QUICK else 100`)
    # would silently ignore the injected one -- and it defines QUICK (make book QUICK=1)
    assert re.match(r":tags: \[parameters[,\]]", first.lstrip()), "the first code cell is tagged parameters"
    body = first.split("\n", 2)[2]
    for node in ast.parse(body).body:
        assert isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets), ast.dump(node)
        ast.literal_eval(node.value)
    assert "QUICK" in body
    assert "Reproduce this chapter" in text and f"CH={chapter.stem}" in text
    assert "## Exercises" in text and ":class: dropdown" in text
    assert "## Comparison with the paper" in text and "comparison_table(" in text


def _comparison_refs(notebook: Path) -> set[str]:
    refs = set()
    nb = json.loads(notebook.read_text())
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            for mime, data in out.get("data", {}).items():
                if mime.endswith(("text/html", "text/plain")):
                    text = "".join(data) if isinstance(data, list) else str(data)
                    refs.update(re.findall(r"[A-Z0-9_]+\[[^\]]+\][\w.\-]*", text))
    return refs


def test_every_paper_number_is_compared_in_some_chapter():
    notebooks = sorted(EXECUTED.glob("0*.ipynb"))
    if len(notebooks) < len(CHAPTERS):
        pytest.skip("the executed chapters are missing: run `make book QUICK=1` first")
    seen = set().union(*(_comparison_refs(nb) for nb in notebooks))
    missing = sorted(set(paper.numbers()) - seen)
    assert not missing, f"paper numbers never set beside ours: {missing}"
