#!/usr/bin/env python3
"""Assemble the tree that ``jupyter-book build`` renders (``_build/src``).

The book's sources are MyST-Markdown notebooks, executed beforehand by papermill
into ``_build/executed/``.  This script builds a copy of the book in which:

* ``_config.yml`` is the repository's, with ``execute: execute_notebooks: "off"``
  (jupyter-book must not execute anything again, and no jupyter-cache), and
  MathJax served from the book itself (below);
* ``_toc.yml`` is the repository's, unchanged;
* every notebook page ``book/<name>.md`` listed in the toc is replaced by the
  executed ``book/<name>.ipynb`` (so the page's download button serves the
  executed notebook, outputs included), with the cell tags and the QUICK banner
  below;
* pages generated from files outside ``book/`` (``chapters.GENERATED_PAGES``:
  ``book/datasheet`` is ``data/README.md``, the simulated release's datasheet)
  are written with a label on their title and their in-page links rewritten;
* everything else under ``book/`` (plain MyST pages, ``references.bib``,
  images, ...) is copied as is, and so is ``_static/`` (the book's CSS, e.g. the
  class ``table2-compact`` for wide tables).  Jupytext notebooks that are not in the toc are
  left out;
* the CSV files the chapters wrote while they ran (``_build/downloads``, irtbook.downloads) go
  to ``book_downloads/``, where the chapters' ``{download}`` links point;
* each chapter's Reproduce box (tools/reproduce_box.py) moves to the end of its page, so a page
  opens with its claim.

Cell tags: only the argument on the page
----------------------------------------
Tags only change how a page renders: the executed notebook behind the download
button keeps every cell.  In each executed notebook:

* the cell tagged ``parameters`` and papermill's injected cell (tagged
  ``injected-parameters``) get ``remove-cell``: not on the page;
* a code cell tagged ``solution`` (an exercise's solution) gets ``hide-cell``:
  input and output folded behind a toggle, unless it already has one of the
  display tags below;
* every other code cell gets ``hide-input`` (code folded behind a toggle, output
  visible) unless it is tagged ``remove-cell``, ``remove-input``, ``hide-input``,
  ``show-input`` or ``hide-cell`` (or their ``_`` spellings).  ``show-input``
  marks a cell whose code is the lesson: it is shown as written.  Cells that only
  glue values for the prose should be tagged ``remove-cell`` in the chapter.

QUICK banner
------------
When a notebook was executed with ``QUICK=True`` (``metadata.papermill.
parameters.QUICK``), a markdown cell is inserted right after the page's ``# ``
title (the markdown cell holding it is split after the heading line) with an
admonition of class ``quick-build`` saying that the page was built with reduced
settings.  A chapter can say which settings were reduced by gluing a dict under
the key ``quick_settings``, name -> "quick value (full value)"::

    glue("quick_settings", {"train/test splits": f"{n_splits} (100)"}, display=False)

(the glued ``text/plain`` repr is read with ``ast.literal_eval``; a JSON string of
such a dict works too).  Plain MyST pages get no banner.

MathJax
-------
MathJax 3 (``MATHJAX_VERSION``) is copied into ``_mathjax/_static/mathjax/es5``
of the tree, which ``html_extra_path`` copies to ``_build/html/_static/mathjax``,
and ``mathjax_path`` points there: the book needs no CDN.  It is taken from, in
order, ``--mathjax DIR`` / ``$MATHJAX_DIR``, the pip package
``django-static-mathjax`` (the ``book`` extra; it installs a ``mathjax`` package
holding ``static/mathjax/es5``), or ``_build/mathjax`` (``make mathjax``, from
npm).  A directory with a ``package.json`` must hold version ``MATHJAX_VERSION``.
If none is found, one line says so and the pages load MathJax from the CDN.
(Not ``_static``: jupyter-book adds every ``.js`` under the tree's ``_static``
to every page.)

Usage::

    python tools/make_build_tree.py [--root .] [--executed _build/executed] [--out _build/src]
                                    [--mathjax DIR]

Everything the book needs must live under ``book/`` (plus the two YAML files and
the generated pages' sources).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import re
import shutil
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import book_config  # noqa: E402  (tools/book_config.py)
import chapters  # noqa: E402  (tools/chapters.py)
import dist  # noqa: E402  (tools/dist.py)
import reproduce_box  # noqa: E402  (tools/reproduce_box.py)
import wide_tables  # noqa: E402  (tools/wide_tables.py)

BOOK_DIR = "book"
STATIC_DIR = "_static"  # the book's CSS (jupyter-book adds each .css/.js in it to every page)
# irtbook.downloads: where the chapters write their CSV files, and where the book serves them
CHAPTER_DOWNLOADS_ENV, CHAPTER_DOWNLOADS = "IRTLIB_BOOK_DOWNLOADS", "_build/downloads"
CHAPTER_DOWNLOADS_SITE = "book_downloads"
IGNORED = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", "*.pyc", ".DS_Store")

# ---------------------------------------------------------------------------
# cell tags
# ---------------------------------------------------------------------------
REMOVED_TAGS = {"parameters", "injected-parameters"}
# a code cell with one of these keeps its tags as they are (no hide-input added)
DISPLAY_TAGS = {"remove-cell", "remove-input", "hide-input", "show-input", "hide-cell"}


def _tags(cell: dict) -> list[str]:
    metadata = cell.setdefault("metadata", {})
    tags = metadata.get("tags")
    if not isinstance(tags, list):
        tags = metadata["tags"] = []
    return tags


def apply_tag_policy(notebook: dict) -> dict[str, int]:
    """Tag the code cells of ``notebook`` (in place) as the module docstring says.

    Returns how many cells got each added tag.
    """
    added = {"remove-cell": 0, "hide-cell": 0, "hide-input": 0}
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        tags = _tags(cell)
        normalised = {tag.replace("_", "-") for tag in tags}
        if normalised & REMOVED_TAGS:
            new = "remove-cell"
        elif normalised & DISPLAY_TAGS:
            continue
        elif "solution" in normalised:
            new = "hide-cell"
        else:
            new = "hide-input"
        if new not in normalised:
            tags.append(new)
            added[new] += 1
    return added


# ---------------------------------------------------------------------------
# QUICK banner
# ---------------------------------------------------------------------------
QUICK_SETTINGS_KEY = "quick_settings"
QUICK_BANNER_CLASS = "quick-build"
GENERIC_QUICK_TEXT = (
    "This page was built with `QUICK=True`: fewer train/test splits, shorter py-irt runs and "
    "sweeps than the full build; its numbers are noisier than a full build's. "
    "Run `make book` for the full build."
)
GLUE_PREFIX = "application/papermill.record/"


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def was_quick(notebook: dict) -> bool:
    """True when papermill executed ``notebook`` with ``QUICK=True``."""
    parameters = (notebook.get("metadata", {}).get("papermill") or {}).get("parameters") or {}
    return parameters.get("QUICK") in (True, "True", "true", 1)


def quick_settings(notebook: dict) -> dict[str, str]:
    """The dict glued under ``quick_settings`` (name -> "quick (full)"), or {}.

    Raises ValueError when the glued value is not such a dict (a chapter bug that
    should fail the build rather than silently drop the list).
    """
    found = None
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            scrapbook = (output.get("metadata") or {}).get("scrapbook") or {}
            if scrapbook.get("name") != QUICK_SETTINGS_KEY:
                continue
            data = output.get("data", {})
            text = data.get(GLUE_PREFIX + "text/plain", data.get("text/plain"))
            if text is None:
                raise ValueError(f"glued {QUICK_SETTINGS_KEY!r} has no text/plain representation")
            found = "".join(text) if isinstance(text, list) else str(text)
    if found is None:
        return {}
    try:
        value = ast.literal_eval(found)
        if isinstance(value, str):
            value = json.loads(value)
    except (ValueError, SyntaxError) as exc:
        raise ValueError(f"glued {QUICK_SETTINGS_KEY!r} is not a dict literal or JSON: {found[:200]!r}") from exc
    if not isinstance(value, dict):
        raise ValueError(f"glued {QUICK_SETTINGS_KEY!r} must be a dict, got {type(value).__name__}")
    return {str(key): str(val) for key, val in value.items()}


def quick_banner_source(settings: dict[str, str]) -> str:
    """The QUICK banner's MyST source, listing the reduced ``settings`` (name: value)."""
    # a backtick fence, not ":::": it needs no colon_fence extension
    lines = ["```{admonition} Quick build", f":class: warning {QUICK_BANNER_CLASS}", "", GENERIC_QUICK_TEXT]
    if settings:
        lines += ["", "Reduced on this page (quick value, full value in parentheses):", ""]
        lines += [f"- {name}: {value}" for name, value in settings.items()]
    lines.append("```")
    return "\n".join(lines) + "\n"


_FENCE = re.compile(r"^\s*(`{3,}|~{3,}|:{3,})")


def _h1_line(text: str) -> int | None:
    """Index of the first ``# `` heading line of ``text`` outside fences, or None."""
    fence = None
    for index, line in enumerate(text.splitlines()):
        match = _FENCE.match(line)
        if match:
            marker = match.group(1)
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence) and line.strip() == marker:
                fence = None
            continue
        if fence is None and re.match(r"^# \S", line):
            return index
    return None


def add_quick_banner(notebook: dict) -> bool:
    """Insert the QUICK banner after the title of a QUICK-executed ``notebook`` (in place).

    Returns True when a banner was added.
    """
    if not was_quick(notebook):
        return False
    banner = {"cell_type": "markdown", "metadata": {"tags": ["quick-banner"]},
              "source": quick_banner_source(quick_settings(notebook))}
    if "nbformat_minor" in notebook and notebook.get("nbformat_minor", 0) >= 5:
        banner["id"] = "quick-build-banner"
    cells = notebook.setdefault("cells", [])
    for index, cell in enumerate(cells):
        if cell.get("cell_type") != "markdown":
            continue
        text = _source(cell)
        heading = _h1_line(text)
        if heading is None:
            continue
        lines = text.splitlines(keepends=True)
        head, rest = "".join(lines[: heading + 1]), "".join(lines[heading + 1 :])
        cell["source"] = head
        new = [banner]
        if rest.strip():
            tail = {"cell_type": "markdown", "metadata": dict(cell.get("metadata", {})), "source": rest}
            if "id" in cell:
                tail["id"] = f"{cell['id']}-after-title"[:64]
            new.append(tail)
        cells[index + 1 : index + 1] = new
        return True
    cells.insert(0, banner)
    return True


# ---------------------------------------------------------------------------
# generated pages (the datasheet)
# ---------------------------------------------------------------------------
def _slug(heading: str) -> str:
    """GitHub's anchor for a heading text."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def generated_page(source: Path, label: str, note: str) -> str:
    """A Markdown page from ``source`` (a README), fit for the book.

    The ``# `` title gets the label ``label``; in-page links ``[text](#anchor)`` become
    ``{ref}`` roles to labels put on the headings they point at; relative links to
    files (which are not part of the book) become plain text with the path; its tables are
    made to fit the text column (tools/wide_tables.py).
    """
    text = source.read_text(encoding="utf-8")
    lines = text.splitlines()
    headings = {}
    for index, line in enumerate(lines):
        match = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if match:
            headings.setdefault(_slug(match.group(2)), index)
    wanted: dict[int, str] = {}

    def link(match: re.Match) -> str:
        label_text, target = match.group(1), match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            return match.group(0)
        if target.startswith("#"):
            slug = target[1:]
            if slug not in headings:
                raise ValueError(f"{source}: link to #{slug}, which is no heading")
            wanted[headings[slug]] = f"{label}-{slug}"
            return f"{{ref}}`{label_text} <{label}-{slug}>`"
        return f"{label_text} (`{(source.parent / target).as_posix()}`)"

    in_fence = False
    out_lines = []
    for line in lines:
        if re.match(r"^\s*(```|~~~)", line):
            in_fence = not in_fence
        out_lines.append(line if in_fence else re.sub(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)", link, line))
    result = []
    title_done = False
    for index, line in enumerate(out_lines):
        if index in wanted:
            result += [f"({wanted[index]})=", ]
        if not title_done and re.match(r"^# \S", line):
            result += [f"({label})=", line, "", note]
            title_done = True
            continue
        result.append(line)
    if not title_done:
        raise ValueError(f"{source}: no '# ' title")
    return wide_tables.fit_tables("\n".join(result)) + "\n"


# ---------------------------------------------------------------------------
# MathJax
# ---------------------------------------------------------------------------
MATHJAX_VERSION = "3.2.2"
MATHJAX_ENTRY = "es5/tex-mml-chtml.js"
MATHJAX_EXTRA = "_mathjax"  # html_extra_path entry of the build tree
MATHJAX_PATH = "mathjax/" + MATHJAX_ENTRY  # mathjax_path, relative to _static
# combined components the book does not load (the SVG output, other input sets)
_MATHJAX_SKIP = re.compile(r"^(?:.*svg.*|tex-chtml.*|mml-chtml\.js|node-main\.js|latest\.js)$")


def _mathjax_ok(directory: Path) -> bool:
    if not (directory / MATHJAX_ENTRY).is_file():
        return False
    package = directory / "package.json"
    if package.is_file():
        try:
            return json.loads(package.read_text(encoding="utf-8")).get("version") == MATHJAX_VERSION
        except ValueError:
            return False
    return True


def find_mathjax(root: Path, explicit: Path | None = None) -> Path | None:
    """The MathJax directory (holding ``es5/``) to ship, or None."""
    candidates = []
    if explicit is not None:
        candidates.append(explicit)
    elif os.environ.get("MATHJAX_DIR"):
        candidates.append(Path(os.environ["MATHJAX_DIR"]))
    else:
        spec = importlib.util.find_spec("mathjax")  # django-static-mathjax
        if spec is not None and spec.origin:
            candidates.append(Path(spec.origin).parent / "static" / "mathjax")
        candidates.append(root / "_build" / "mathjax")
    return next((c.resolve() for c in candidates if _mathjax_ok(c)), None)


def copy_mathjax(mathjax: Path, out: Path) -> Path:
    """Copy MathJax's es5 build to ``out/_mathjax/_static/mathjax``; return that directory."""
    target = out / MATHJAX_EXTRA / "_static" / "mathjax"

    def ignore(directory: str, names: list[str]) -> set[str]:
        skipped = set()
        relative = Path(directory).resolve().relative_to((mathjax / "es5").resolve())
        for name in names:
            if relative == Path(".") and _MATHJAX_SKIP.match(name) and name != Path(MATHJAX_ENTRY).name:
                skipped.add(name)
            elif relative == Path("output") and name.startswith("svg"):
                skipped.add(name)
        return skipped

    shutil.copytree(mathjax / "es5", target / "es5", ignore=ignore)
    if (mathjax / "LICENSE").is_file():
        shutil.copy2(mathjax / "LICENSE", target / "LICENSE")
    return target


# ---------------------------------------------------------------------------
def build_tree(root: Path, executed: Path, out: Path, mathjax: Path | None = None, *,
               downloads: bool = False, dist_dir: Path | None = None, repository_url: str | None = None) -> list[Path]:
    """Create ``out`` from the book at ``root`` and executed notebooks in ``executed``.

    ``downloads``: put irtlib's and irtbook's wheels and the source archive into ``out/_dist`` and link them
    from every Reproduce box and the introduction; they are copied from ``dist_dir`` when given (where
    tools/dist.py built them, make's ``dist`` target), else built there (tools/dist.py). ``repository_url``: the
    repository the book links to (tools/book_config.py); None reads ``$BOOK_REPOSITORY_URL``,
    ``""`` links to none.

    Returns the executed notebooks placed in the tree.
    """
    root, executed, out = root.resolve(), executed.resolve(), out.resolve()
    if out == root or root in out.parents and out.parts[len(root.parts)] == BOOK_DIR:
        raise ValueError(f"refusing to build into {out}")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)

    # 1. configuration: execution off, MathJax from the book, everything else unchanged
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8")) or {}
    if repository_url is None:
        config = book_config.from_environment(config)
    else:
        config = book_config.with_repository(config, repository_url or None)
    if "launch_sources" in ((config.get("sphinx") or {}).get("local_extensions") or {}):
        # book/_ext/launch_sources.py points the launch buttons at these pages' .md sources
        markdown_pages = [entry for entry, source, notebook in chapters.pages(root / "_toc.yml", root)
                          if notebook and source.suffix == ".md"]
        config["sphinx"].setdefault("config", {})["launch_sources_markdown"] = markdown_pages
    config.setdefault("execute", {})
    config["execute"]["execute_notebooks"] = "off"
    found = find_mathjax(root, mathjax)
    if found is not None:
        copy_mathjax(found, out)
        sphinx_config = config.setdefault("sphinx", {}).setdefault("config", {})
        sphinx_config["mathjax_path"] = MATHJAX_PATH
        sphinx_config["html_extra_path"] = list(sphinx_config.get("html_extra_path") or []) + [MATHJAX_EXTRA]
        config["exclude_patterns"] = list(config.get("exclude_patterns") or []) + [MATHJAX_EXTRA]
        print(f"make_build_tree: MathJax {MATHJAX_VERSION} from {found} -> _static/mathjax")
    else:
        print(
            f"make_build_tree: MathJax {MATHJAX_VERSION} not found (pip install "
            f"django-static-mathjax==3.2.2.1, or make mathjax): the pages load MathJax from the CDN"
        )
    header = (
        "# GENERATED by tools/make_build_tree.py from the repository's _config.yml:\n"
        "# notebooks were executed beforehand by papermill, so execution is off.\n"
    )
    (out / "_config.yml").write_text(
        header + yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8"
    )
    shutil.copy2(root / "_toc.yml", out / "_toc.yml")
    shipped = None
    if downloads and not (root / "pyproject.toml").is_file():
        print(f"make_build_tree: {root} has no pyproject.toml: the book ships no wheel or source archive")
    elif downloads:
        if dist_dir is None:
            built = dist.build_dist(root, out / dist.DIST_DIR)
        else:
            built = dist.built_in(dist_dir)
            (out / dist.DIST_DIR).mkdir()
            for name in built.values():
                shutil.copy2(Path(dist_dir) / name, out / dist.DIST_DIR / name)
        shipped = {kind: f"{dist.DIST_DIR}/{name}" for kind, name in built.items()}
        print(f"make_build_tree: ships {shipped['wheel']}, {shipped['book_wheel']} and {shipped['source']}"
              + ("" if dist_dir is None else f" (built in {dist_dir})"))

    # 2. every file under book/ except jupytext notebooks (their executed copy goes in)
    def ignore(directory: str, names: list[str]) -> set[str]:
        skipped = set(IGNORED(directory, names))
        for name in names:
            path = Path(directory) / name
            if path.suffix == ".md" and path.is_file() and chapters.is_notebook(path):
                skipped.add(name)
        return skipped

    if (root / BOOK_DIR).is_dir():
        shutil.copytree(root / BOOK_DIR, out / BOOK_DIR, ignore=ignore)
    # the book's stylesheets: jupyter-book links every .css under the tree's _static/
    if (root / STATIC_DIR).is_dir():
        shutil.copytree(root / STATIC_DIR, out / STATIC_DIR, ignore=IGNORED)

    # the CSV files the chapters wrote while they ran (irtbook.downloads), for their {download} links
    written = Path(os.environ.get(CHAPTER_DOWNLOADS_ENV) or root / CHAPTER_DOWNLOADS)
    if written.is_dir():
        shutil.copytree(written, out / CHAPTER_DOWNLOADS_SITE, ignore=IGNORED)

    # 3. executed notebooks in place of the toc's notebook pages; generated pages
    placed = []
    for entry, source, notebook in chapters.pages(root / "_toc.yml", root):
        if entry in chapters.GENERATED_PAGES:
            label, note = chapters.GENERATED_PAGES[entry][1:]
            target = out / f"{entry}.md"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(generated_page(source, label, note), encoding="utf-8")
            continue
        if not notebook:
            continue
        relative = Path(entry).relative_to(BOOK_DIR) if entry.startswith(BOOK_DIR + "/") else None
        if relative is None:
            raise ValueError(f"notebook page {entry!r} must live under {BOOK_DIR}/")
        executed_nb = executed / relative.with_suffix(".ipynb")
        if not executed_nb.is_file():
            raise FileNotFoundError(f"{executed_nb} missing: execute {source} first (make book)")
        target = out / f"{entry}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        data = json.loads(executed_nb.read_text(encoding="utf-8"))
        apply_tag_policy(data)
        add_quick_banner(data)
        if reproduce_box.has_box(data):
            reproduce_box.fill_box(data, reproduce_box.parameters(data, where=entry), shipped)
            reproduce_box.move_box_to_end(data)
        reproduce_box.fill_downloads(data, shipped)
        target.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        shutil.copystat(executed_nb, target)
        placed.append(target)
    return placed


def main(argv: list[str] | None = None) -> int:
    """The command line: assemble the build tree (see the options)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="repository root")
    parser.add_argument("--executed", type=Path, default=Path("_build/executed"))
    parser.add_argument("--out", type=Path, default=Path("_build/src"))
    parser.add_argument("--mathjax", type=Path, default=None,
                        help="MathJax 3 directory holding es5/ (default: $MATHJAX_DIR, the mathjax pip "
                             "package, _build/mathjax)")
    parser.add_argument("--no-downloads", dest="downloads", action="store_false",
                        help="ship no wheel or source archive (tools/dist.py)")
    parser.add_argument("--dist", type=Path, default=None, dest="dist_dir",
                        help="copy the wheels and source archive from this directory (tools/dist.py built them "
                             "there) instead of building them")
    parser.add_argument("--repository-url", default=None,
                        help=f"the repository the book links to (default ${book_config.REPOSITORY_ENV}; "
                             "'' for none)")
    args = parser.parse_args(argv)
    try:
        placed = build_tree(args.root, args.executed, args.out, args.mathjax, downloads=args.downloads,
                            dist_dir=args.dist_dir, repository_url=args.repository_url)
    except (OSError, ValueError) as exc:
        print(f"make_build_tree: error: {exc}", file=sys.stderr)
        return 1
    print(f"make_build_tree: {args.out} with {len(placed)} executed notebook(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
