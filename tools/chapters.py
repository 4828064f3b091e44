#!/usr/bin/env python3
"""List the book's pages from ``_toc.yml``: which ones are notebooks to execute.

Standard library only, so the Makefile can call it with the system ``python3``
before ``.venv/`` exists.  It understands the subset of the ``jb-book`` table of
contents format the project uses: a ``root:`` entry and ``file:`` entries (in
``chapters:``/``sections:`` lists, possibly inside ``parts:``).  ``glob:`` entries
are rejected: list every chapter explicitly.

A page is a *notebook* (executed by papermill before the HTML build) when it is a
``.ipynb`` file or a ``.md`` file whose YAML front matter has a top-level
``jupytext:`` or ``kernelspec:`` key.  Other ``.md`` pages are plain MyST pages.

Usage::

    python3 tools/chapters.py              # every page, in toc order
    python3 tools/chapters.py --notebooks  # only notebook pages
    python3 tools/chapters.py --plain      # only plain MyST pages

Each line is a toc entry without suffix, relative to the repository root, for
example ``book/intro``.

A few pages are *generated*: their source lives outside ``book/`` and
tools/make_build_tree.py writes the page into the build tree
(``GENERATED_PAGES``: ``book/datasheet`` is ``data/README.md``).  They are plain
pages.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SUFFIXES = (".md", ".ipynb")

# toc entry -> (source file relative to the root, label of the page's title, note under the title)
GENERATED_PAGES = {
    "book/datasheet": (
        "data/README.md",
        "datasheet",
        "*This page is `data/README.md`, the datasheet shipped with the simulated release in `data/`.*",
    ),
}

_ENTRY = re.compile(r"^\s*(?:-\s+)?(root|file|glob)\s*:\s*(.*?)\s*$")


def _unquote(value: str) -> str:
    value = re.sub(r"\s+#.*$", "", value).strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return value


def toc_entries(toc: Path) -> list[str]:
    """Return the ``root`` and ``file`` entries of a jb-book toc, in order."""
    entries: list[str] = []
    for lineno, line in enumerate(toc.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        match = _ENTRY.match(line)
        if not match:
            continue
        key, value = match.group(1), _unquote(match.group(2))
        if key == "glob":
            raise ValueError(f"{toc}:{lineno}: glob entries are not supported; list files explicitly")
        if not value:
            raise ValueError(f"{toc}:{lineno}: empty {key}: entry")
        value = re.sub(r"\.(md|ipynb)$", "", value)
        if value not in entries:
            entries.append(value)
    if not entries:
        raise ValueError(f"{toc}: no root/file entries found")
    return entries


def page_path(entry: str, root: Path = REPO_ROOT) -> Path:
    """Return the source file of a toc entry (``.md`` preferred over ``.ipynb``)."""
    if entry in GENERATED_PAGES:
        candidate = root / GENERATED_PAGES[entry][0]
        if candidate.is_file():
            return candidate
        raise FileNotFoundError(f"toc entry {entry!r} is generated from {candidate}, which is missing")
    for suffix in SUFFIXES:
        candidate = root / f"{entry}{suffix}"
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"toc entry {entry!r} has no {' or '.join(SUFFIXES)} file under {root}")


def front_matter(path: Path) -> str:
    """Return the YAML front matter of a Markdown file ('' when it has none)."""
    text = path.read_text(encoding="utf-8")
    match = re.match(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(\r?\n|\Z)", text, re.S)
    return match.group(1) if match else ""


def is_notebook(path: Path) -> bool:
    """True when ``path`` is a notebook: ``.ipynb`` or a jupytext MyST ``.md`` file."""
    if path.suffix == ".ipynb":
        return True
    return bool(re.search(r"^(jupytext|kernelspec)\s*:", front_matter(path), re.M))


def pages(toc: Path | None = None, root: Path = REPO_ROOT) -> list[tuple[str, Path, bool]]:
    """Return ``(entry, source path, is_notebook)`` for every toc page, in toc order."""
    toc = toc or root / "_toc.yml"
    result = []
    for entry in toc_entries(toc):
        path = page_path(entry, root)
        result.append((entry, path, is_notebook(path)))
    return result


def main(argv: list[str] | None = None) -> int:
    """The command line: the toc's pages, one per line (see the options)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--notebooks", action="store_true", help="only notebook pages")
    group.add_argument("--plain", action="store_true", help="only plain MyST pages")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="book root (default: cwd)")
    args = parser.parse_args(argv)
    try:
        found = pages(args.root / "_toc.yml", args.root)
    except (OSError, ValueError) as exc:
        print(f"tools/chapters.py: error: {exc}", file=sys.stderr)
        return 1
    for entry, _path, notebook in found:
        if (args.notebooks and not notebook) or (args.plain and notebook):
            continue
        print(entry)
    return 0


if __name__ == "__main__":
    sys.exit(main())
