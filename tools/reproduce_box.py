"""What a chapter's "Reproduce this chapter" box lists: its parameters and the downloads.

Every chapter's first code cell is tagged ``parameters`` (papermill's convention) and holds one
assignment a line, each with a one-line comment::

    RULE = "strict"  # binarization of graded judgments: strict (the paper's) or lenient

:func:`parameters` reads that cell (with ``ast`` for the names and defaults and ``tokenize``
for the comments) and fails on an assignment without a comment, so that a chapter cannot add
a parameter the page does not explain. ``tools/make_build_tree.py`` puts, into the markdown
cell holding the page's ``Reproduce this chapter`` (or ``page``) admonition, just before the
admonition's closing fence:

* a table of the parameters, their defaults and their comments (:func:`parameter_table`);
* when the build ships the code (``tools/dist.py``), one line linking the library's wheel
  and the repository's source archive, with the install command (:func:`downloads_line`).

A markdown cell holding the line ``<!-- book-downloads -->`` (the introduction) gets the
downloads paragraph of :func:`downloads_block` in its place.

Standard library only.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass

BOX = re.compile(r"^(:{3,})\{admonition\}\s+Reproduce this (?:chapter|page)\s*$")
DOWNLOADS_MARKER = "<!-- book-downloads -->"
TABLE_CLASS = "reproduce-parameters"


@dataclass(frozen=True)
class Parameter:
    """One parameter of a chapter: its name, its default as written, its one-line comment."""

    name: str
    default: str
    comment: str


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _tags(cell: dict) -> list:
    return list((cell.get("metadata") or {}).get("tags") or [])


def parameters_cell(notebook: dict) -> dict | None:
    """The code cell tagged ``parameters`` of ``notebook`` (papermill's), or None."""
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "code" and "parameters" in _tags(cell):
            return cell
    return None


def parse_parameters(source: str, *, where: str = "parameters cell") -> list[Parameter]:
    """The parameters assigned in ``source``, in order.

    Raises
    ------
    ValueError
        A statement that is not ``NAME = literal``, or an assignment without a trailing
        ``# comment`` on its last line; the message names ``where`` and the line.
    """
    tree = ast.parse(source)
    comments: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string.lstrip("#").strip()
    out = []
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            raise ValueError(f"{where}, line {node.lineno}: not a `NAME = value` assignment")
        name = node.targets[0].id
        try:
            ast.literal_eval(node.value)
        except ValueError as exc:
            raise ValueError(f"{where}, line {node.lineno}: {name} is not a literal") from exc
        comment = comments.get(node.end_lineno, "")
        if not comment:
            raise ValueError(f"{where}, line {node.end_lineno}: {name} has no one-line `# comment`")
        out.append(Parameter(name, ast.get_source_segment(source, node.value), comment))
    return out


def parameters(notebook: dict, *, where: str = "notebook") -> list[Parameter]:
    """The parameters of ``notebook``'s ``parameters`` cell ([] without one)."""
    cell = parameters_cell(notebook)
    return [] if cell is None else parse_parameters(_source(cell), where=f"{where}: parameters cell")


def _code(text: str) -> str:
    """``text`` as inline code (a fence longer than any backtick run inside)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def parameter_table(params: list[Parameter]) -> str:
    """A MyST ``list-table`` of ``params``: name, default, what it does."""
    lines = [
        "```{list-table}",
        ":header-rows: 1",
        f":class: {TABLE_CLASS}",
        "",
        "* - parameter",
        "  - default",
        "  - what it sets",
    ]
    for p in params:
        comment = p.comment.replace("\n", " ")
        lines += [f"* - {_code(p.name)}", f"  - {_code(p.default)}", f"  - {comment}"]
    lines.append("```")
    return "\n".join(lines)


def downloads_line(downloads: dict | None) -> str:
    """One sentence linking the shipped wheel and source archive ("" when none is shipped).

    ``downloads`` maps ``"wheel"``, ``"book_wheel"`` and ``"source"`` to paths below the build
    tree's root (see tools/dist.py).
    """
    if not downloads:
        return ""
    wheel, book, source = downloads["wheel"], downloads["book_wheel"], downloads["source"]
    wheel_name, book_name, source_name = (p.rsplit("/", 1)[-1] for p in (wheel, book, source))
    return (
        f"Without a clone: download this page's notebook (the download button above), the library "
        f"{{download}}`{wheel_name} </{wheel}>`, the book's helpers {{download}}`{book_name} </{book}>` "
        f"and the source {{download}}`{source_name} </{source}>` "
        f"(its `data/` holds the simulated release), then "
        f"`pip install \"./{wheel_name}[book]\" ./{book_name}` and run the notebook with papermill "
        f"({{ref}}`how <sec-intro-code>`)."
    )


def downloads_block(downloads: dict | None) -> str:
    """The introduction's paragraph on getting the code without a clone."""
    if not downloads:
        return ("This build ships no wheel or source archive (`make book` adds them); clone the "
                "repository instead.")
    wheel, book, source = downloads["wheel"], downloads["book_wheel"], downloads["source"]
    wheel_name, book_name, source_name = (p.rsplit("/", 1)[-1] for p in (wheel, book, source))
    top = source_name.removesuffix(".tar.gz")
    return "\n".join([
        "This book carries its code. The library is the wheel "
        f"{{download}}`{wheel_name} </{wheel}>`, the chapters' own helpers are the wheel "
        f"{{download}}`{book_name} </{book}>` (`pip install irtlib` alone gets the library without "
        f"them), and the repository's source, the simulated release "
        f"`data/` included, is {{download}}`{source_name} </{source}>`. With them and a page's "
        "notebook (each chapter's download button), on Python 3.11:",
        "",
        "```bash",
        "python3.11 -m venv irt && . irt/bin/activate",
        f"pip install \"./{wheel_name}[book]\" ./{book_name}   # irtlib, the book's helpers, papermill, py-irt",
        f"tar xzf {source_name}                           # the source: data/, book/, tests/",
        f"export IRTLIB_SIM_DATA=$PWD/{top}/data          # the simulated release",
        "irtlib paper-data download                  # the paper's four matrices (checksummed)",
        "papermill 01_data.ipynb out.ipynb -p QUICK True",
        "```",
        "",
        "Every chapter's box lists the parameters `-p NAME VALUE` can change. From the source "
        f"archive, `cd {top} && make book` rebuilds this whole book.",
    ])


def has_box(notebook: dict) -> bool:
    """True when a markdown cell of ``notebook`` opens a Reproduce box."""
    return any(BOX.match(line) for cell in notebook.get("cells", []) if cell.get("cell_type") == "markdown"
               for line in _source(cell).split("\n"))


def find_box(notebook: dict) -> tuple[int, list[str], int, int] | None:
    """Where the Reproduce box is: ``(cell index, the cell's lines, first line, closing line)``, or None.

    Raises ValueError when the box is never closed.
    """
    for index, cell in enumerate(notebook.get("cells", [])):
        if cell.get("cell_type") != "markdown":
            continue
        lines = _source(cell).split("\n")
        for start, line in enumerate(lines):
            match = BOX.match(line)
            if not match:
                continue
            fence = match.group(1)
            end = next((i for i in range(start + 1, len(lines)) if lines[i].strip() == fence), None)
            if end is None:
                raise ValueError(f"the Reproduce box opened by {line!r} is never closed")
            return index, lines, start, end
    return None


def fill_box(notebook: dict, params: list[Parameter], downloads: dict | None = None) -> bool:
    """Put the parameter table (and the downloads line) into ``notebook``'s Reproduce box, in place.

    Returns True when a box was found. The table goes just before the box's closing fence.
    """
    found = find_box(notebook)
    if found is None:
        return False
    index, lines, _, end = found
    added = []
    if params:
        added += ["", "Its parameters (the first code cell; `-p NAME VALUE` changes one):", "", parameter_table(params)]
    link = downloads_line(downloads)
    if link:
        added += ["", link]
    notebook["cells"][index]["source"] = "\n".join(lines[:end] + added + lines[end:])
    return True


def fill_downloads(notebook: dict, downloads: dict | None) -> int:
    """Replace every ``<!-- book-downloads -->`` line of ``notebook``'s markdown cells; the count."""
    count = 0
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "markdown":
            continue
        text = _source(cell)
        if DOWNLOADS_MARKER in text:
            count += text.count(DOWNLOADS_MARKER)
            cell["source"] = text.replace(DOWNLOADS_MARKER, downloads_block(downloads))
    return count


END_HEADING = "## Reproduce this page"


def move_box_to_end(notebook: dict) -> bool:
    """Move the Reproduce box (filled or not) from where the source has it to the end of the page, in place.

    A chapter opens with its claim; the box (the command, the parameters, the downloads) becomes the
    page's last section, under :data:`END_HEADING`. A markdown cell left empty by the move is dropped.
    Returns True when a box was moved.
    """
    found = find_box(notebook)
    if found is None:
        return False
    index, lines, start, end = found
    cells = notebook["cells"]
    box, rest = lines[start:end + 1], lines[:start] + lines[end + 1:]
    if "\n".join(rest).strip():
        cells[index]["source"] = "\n".join(rest)
    else:
        del cells[index]
    moved = {"cell_type": "markdown", "metadata": {"tags": ["reproduce-box"]},
             "source": "\n".join([END_HEADING, "", *box]) + "\n"}
    if notebook.get("nbformat_minor", 0) >= 5:
        moved["id"] = "reproduce-box"
    cells.append(moved)
    return True
