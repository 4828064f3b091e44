#!/usr/bin/env python3
"""Reject executed notebooks that hide a failure.

``jupyter-book build`` with execution off renders whatever outputs a notebook
holds, and can exit 0 with a traceback on the page.  Papermill exits non-zero
when a cell raises, but an executed notebook can still reach the build tree with
an error in it (copied or edited by hand, produced by another tool or papermill
version, a cell that never ran).  So after papermill and before rendering, every
executed notebook must satisfy:

* no output of type ``error`` in any cell;
* every non-empty code cell has an ``execution_count`` (it actually ran);
* ``metadata.papermill.exception`` is not true.

Usage::

    python tools/check_executed.py _build/executed/*.ipynb

Prints one line per problem and exits 1 if there is any (2 on bad usage).
Standard library only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def problems(path: Path) -> list[str]:
    """Return human-readable problems found in the executed notebook ``path``."""
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return ["missing (not executed?)"]
    except (OSError, ValueError) as exc:
        return [f"unreadable notebook: {exc}"]

    found = []
    papermill = notebook.get("metadata", {}).get("papermill", {})
    if papermill.get("exception"):
        found.append("papermill recorded an exception (metadata.papermill.exception)")

    code_cells = [cell for cell in notebook.get("cells", []) if cell.get("cell_type") == "code"]
    for number, cell in enumerate(code_cells, 1):
        first_line = next((line for line in _source(cell).splitlines() if line.strip()), "")
        where = f"code cell {number} ({first_line.strip()[:60]!r})"
        if _source(cell).strip() and cell.get("execution_count") is None:
            found.append(f"{where} has no execution count (was not executed)")
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                ename, evalue = output.get("ename", "?"), output.get("evalue", "")
                found.append(f"{where} has an error output: {ename}: {evalue}")
    if not code_cells:
        found.append("no code cells (is this really an executed notebook?)")
    return found


def main(argv: list[str] | None = None) -> int:
    """The command line: check each executed notebook named; 1 if any fails."""
    paths = [Path(arg) for arg in (sys.argv[1:] if argv is None else argv)]
    if not paths:
        print("usage: check_executed.py NOTEBOOK.ipynb [...]", file=sys.stderr)
        return 2
    bad = 0
    for path in paths:
        found = problems(path)
        for problem in found:
            print(f"{path}: {problem}", file=sys.stderr)
        bad += bool(found)
    if bad:
        print(f"check_executed: {bad} of {len(paths)} notebook(s) failed the check", file=sys.stderr)
        return 1
    print(f"check_executed: {len(paths)} executed notebook(s) OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
