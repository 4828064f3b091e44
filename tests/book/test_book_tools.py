"""The build tree's generated parts: the Reproduce boxes' parameter tables, the repository links.

tools/reproduce_box.py reads each chapter's ``parameters`` cell and writes its table into the
chapter's "Reproduce this chapter" box; tools/book_config.py turns one setting
(``BOOK_REPOSITORY_URL``) into the repository, issue and launch buttons. Both are tested on
hand-made input, then on every chapter of the book and on the build tree make_build_tree writes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import book_config  # noqa: E402  (tools/book_config.py)
import chapters  # noqa: E402  (tools/chapters.py)
import make_build_tree  # noqa: E402  (tools/make_build_tree.py)
import reproduce_box  # noqa: E402  (tools/reproduce_box.py)

jupytext = pytest.importorskip("jupytext", reason="jupytext comes with the book extra: make venv")

NOTEBOOK_PAGES = [entry for entry, _, notebook in chapters.pages(ROOT / "_toc.yml", ROOT) if notebook]
BOXED = [entry for entry in NOTEBOOK_PAGES if "{admonition} Reproduce this" in (ROOT / f"{entry}.md").read_text()]


def _notebook(entry: str) -> dict:
    return json.loads(jupytext.writes(jupytext.read(ROOT / f"{entry}.md"), fmt="ipynb"))


# ---------------------------------------------------------------------------
# the parameters cell
# ---------------------------------------------------------------------------
def test_parameters_are_read_with_defaults_and_comments():
    source = ('QUICK = False  # a fast preview\nBENCHMARKS = ["a", "b"]  # which ones\n'
              'PAIRS = [\n    (1, 2),\n]  # spans lines: the comment ends the statement\n'
              'TEXT = "# not a comment"  # x\n')
    params = reproduce_box.parse_parameters(source)
    assert params == [
        reproduce_box.Parameter("QUICK", "False", "a fast preview"),
        reproduce_box.Parameter("BENCHMARKS", '["a", "b"]', "which ones"),
        reproduce_box.Parameter("PAIRS", "[\n    (1, 2),\n]", "spans lines: the comment ends the statement"),
        reproduce_box.Parameter("TEXT", '"# not a comment"', "x"),
    ]


@pytest.mark.parametrize("source, message", [
    ("QUICK = False\n", "line 1: QUICK has no one-line `# comment`"),
    ("A = 1  # ok\nB = f()  # computed\n", "line 2: B is not a literal"),
    ("A = B = 1  # two names\n", "line 1: not a `NAME = value` assignment"),
    ("import os  # no\n", "line 1: not a `NAME = value` assignment"),
])
def test_parameters_cell_rejects(source, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        reproduce_box.parse_parameters(source)


@pytest.mark.parametrize("entry", NOTEBOOK_PAGES)
def test_every_parameter_of_every_page_has_a_comment(entry):
    params = reproduce_box.parameters(_notebook(entry), where=entry)
    assert params, f"{entry} has no parameters cell"
    assert params[0].name == "QUICK", f"{entry}: QUICK comes first (make book QUICK=1 sets it)"
    for p in params:
        assert len(p.comment) >= 10 and "\n" not in p.comment, f"{entry}: {p.name}'s comment is {p.comment!r}"


# ---------------------------------------------------------------------------
# the Reproduce box
# ---------------------------------------------------------------------------
BOX_CELL = ("# Title\n\n:::{admonition} Reproduce this chapter\n:class: tip\n`make chapter CH=x`.\n:::\n\n"
            "Text after the box.\n")


def _listed(markdown: str) -> list[tuple[str, str, str]]:
    """(name, default, comment) rows of the list-table of class reproduce-parameters in ``markdown``."""
    block = re.search(r"```\{list-table\}\n:header-rows: 1\n:class: reproduce-parameters\n\n(.*?)\n```",
                      markdown, re.S)
    assert block, "no parameter table"
    rows = re.findall(r"^\* - (.*)\n  - (.*)\n  - (.*)$", block.group(1), re.M)
    assert rows[0] == ("parameter", "default", "what it sets")
    return [(re.sub(r"^`+ ?| ?`+$", "", n), re.sub(r"^`+ ?| ?`+$", "", d), c) for n, d, c in rows[1:]]


def test_box_gets_the_table_before_its_closing_fence():
    notebook = {"cells": [{"cell_type": "markdown", "source": BOX_CELL}]}
    params = reproduce_box.parse_parameters('QUICK = False  # fast\nNAME = "a`b"  # backtick inside\n')
    assert reproduce_box.fill_box(notebook, params)
    text = notebook["cells"][0]["source"]
    assert _listed(text) == [("QUICK", "False", "fast"), ("NAME", '"a`b"', "backtick inside")]
    assert "``\"a`b\"``" in text  # a longer fence around a value holding a backtick
    box = text[text.index(":::{admonition}"):]
    assert box.index("list-table") < box.index("\n:::\n") and text.endswith(":::\n\nText after the box.\n")
    assert "download" not in text  # no downloads shipped, no link


def test_box_moves_to_the_end_of_the_page_and_the_page_opens_with_its_text():
    notebook = {"cells": [{"cell_type": "markdown", "source": BOX_CELL},
                          {"cell_type": "code", "source": "x = 1", "outputs": []},
                          {"cell_type": "markdown", "source": "## Exercises\n\n1. One.\n"}]}
    reproduce_box.fill_box(notebook, reproduce_box.parse_parameters("QUICK = False  # fast\n"))
    assert reproduce_box.move_box_to_end(notebook)
    first, last = notebook["cells"][0]["source"], notebook["cells"][-1]["source"]
    assert first == "# Title\n\n\nText after the box.\n"
    assert last.startswith(reproduce_box.END_HEADING + "\n\n:::{admonition} Reproduce this chapter")
    assert _listed(last) == [("QUICK", "False", "fast")] and last.rstrip().endswith(":::")
    assert [c["cell_type"] for c in notebook["cells"]] == ["markdown", "code", "markdown", "markdown"]
    alone = {"cells": [{"cell_type": "markdown", "source": ":::{admonition} Reproduce this page\nx\n:::"},
                       {"cell_type": "markdown", "source": "# T\n"}]}
    assert reproduce_box.move_box_to_end(alone) and len(alone["cells"]) == 2   # the emptied cell is dropped
    assert alone["cells"][0]["source"] == "# T\n"
    assert not reproduce_box.move_box_to_end({"cells": [{"cell_type": "markdown", "source": "# T\n"}]})


def test_box_links_the_downloads_when_shipped():
    notebook = {"cells": [{"cell_type": "markdown", "source": BOX_CELL}]}
    shipped = {"wheel": "_dist/irtlib-0.1.0-py3-none-any.whl", "book_wheel": "_dist/irtbook-0.1.0-py3-none-any.whl",
               "source": "_dist/safety-irt-0.1.0-src.tar.gz"}
    reproduce_box.fill_box(notebook, [], shipped)
    text = notebook["cells"][0]["source"]
    assert "{download}`irtlib-0.1.0-py3-none-any.whl </_dist/irtlib-0.1.0-py3-none-any.whl>`" in text
    assert "{download}`safety-irt-0.1.0-src.tar.gz </_dist/safety-irt-0.1.0-src.tar.gz>`" in text
    assert "{download}`irtbook-0.1.0-py3-none-any.whl </_dist/irtbook-0.1.0-py3-none-any.whl>`" in text
    assert 'pip install "./irtlib-0.1.0-py3-none-any.whl[book]" ./irtbook-0.1.0-py3-none-any.whl' in text
    intro = {"cells": [{"cell_type": "markdown", "source": f"## Get it\n\n{reproduce_box.DOWNLOADS_MARKER}\n"}]}
    assert reproduce_box.fill_downloads(intro, shipped) == 1
    assert "tar xzf safety-irt-0.1.0-src.tar.gz" in intro["cells"][0]["source"]
    assert "IRTLIB_SIM_DATA=$PWD/safety-irt-0.1.0-src/data" in intro["cells"][0]["source"]
    assert reproduce_box.DOWNLOADS_MARKER not in intro["cells"][0]["source"]


def test_unclosed_box_is_an_error():
    notebook = {"cells": [{"cell_type": "markdown", "source": ":::{admonition} Reproduce this page\ntext\n"}]}
    with pytest.raises(ValueError, match="never closed"):
        reproduce_box.fill_box(notebook, [])


@pytest.mark.parametrize("entry", BOXED)
def test_every_box_lists_exactly_its_parameters(entry):
    notebook = _notebook(entry)
    params = reproduce_box.parameters(notebook, where=entry)
    assert reproduce_box.fill_box(notebook, params)
    boxes = [c["source"] for c in notebook["cells"] if "reproduce-parameters" in "".join(c["source"])]
    assert len(boxes) == 1
    assert _listed(boxes[0]) == [(p.name, p.default, p.comment) for p in params]


def test_chapters_have_a_box():
    """Every numbered chapter (and the scorecard) opens with a Reproduce box."""
    numbered = {e for e in NOTEBOOK_PAGES if Path(e).name[:2].isdigit()}
    assert numbered <= set(BOXED) and "book/scorecard" in BOXED


# ---------------------------------------------------------------------------
# the repository links
# ---------------------------------------------------------------------------
def _config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text())


def _urls(value) -> list[str]:
    text = json.dumps(value)
    return re.findall(r"https?://[^\s\"']+", text)


def test_no_setting_means_no_links_and_no_url():
    config = book_config.with_repository(_config(), None)
    assert config["repository"]["url"] == ""
    assert not config["html"]["use_repository_button"] and not config["html"]["use_issues_button"]
    assert config["launch_buttons"]["binderhub_url"] == "" and config["launch_buttons"]["colab_url"] == ""
    assert _urls(config) == [], "a configuration without the setting names no URL"
    assert "example" not in (ROOT / "_config.yml").read_text(), "no placeholder URL in the repository's _config.yml"


def test_setting_gives_repository_issue_and_launch_links():
    raw = _config()
    config = book_config.with_repository(raw, "https://github.com/someorg/safety-irt", branch="book")
    assert config["repository"] == {"url": "https://github.com/someorg/safety-irt", "path_to_book": "",
                                     "branch": "book"}
    assert config["html"]["use_repository_button"] and config["html"]["use_issues_button"]
    assert config["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    assert config["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert raw == _config(), "the parsed configuration is not modified"


@pytest.mark.parametrize("env, expected", [
    ({}, None), ({"BOOK_REPOSITORY_URL": "  "}, None),
    ({"BOOK_REPOSITORY_URL": "https://github.com/o/r.git"}, "https://github.com/o/r"),
    ({"BOOK_REPOSITORY_URL": "https://gitlab.com/o/r/"}, "https://gitlab.com/o/r"),
])
def test_repository_url_from_the_environment(env, expected):
    assert book_config.repository_url(env) == expected


def test_a_malformed_url_is_refused():
    with pytest.raises(ValueError, match="BOOK_REPOSITORY_URL='github.com/o/r' is not a repository URL"):
        book_config.repository_url({"BOOK_REPOSITORY_URL": "github.com/o/r"})


def _fake_executed(directory: Path) -> None:
    directory.mkdir()
    for entry in NOTEBOOK_PAGES:
        nb = _notebook(entry)
        nb.setdefault("metadata", {})["papermill"] = {"parameters": {"QUICK": True}}
        (directory / f"{Path(entry).name}.ipynb").write_text(json.dumps(nb))


@pytest.mark.parametrize("url", [None, "https://github.com/someorg/safety-irt"])
def test_build_tree_writes_the_links_of_the_setting(tmp_path, monkeypatch, url):
    """make_build_tree reads BOOK_REPOSITORY_URL; the tree's boxes carry the parameter tables."""
    if url is None:
        monkeypatch.delenv("BOOK_REPOSITORY_URL", raising=False)
    else:
        monkeypatch.setenv("BOOK_REPOSITORY_URL", url)
    _fake_executed(tmp_path / "executed")
    make_build_tree.build_tree(ROOT, tmp_path / "executed", tmp_path / "src", mathjax=None)
    config = yaml.safe_load((tmp_path / "src" / "_config.yml").read_text())
    assert config["repository"]["url"] == (url or "")
    assert config["html"]["use_repository_button"] is (url is not None)
    assert bool(config["launch_buttons"]["binderhub_url"]) is (url is not None)
    assert "book/05_selection" in config["sphinx"]["config"]["launch_sources_markdown"]
    assert "launch_sources" in config["sphinx"]["local_extensions"]
    chapter = json.loads((tmp_path / "src" / "book" / "01_data.ipynb").read_text())
    box = next("".join(c["source"]) for c in chapter["cells"] if "reproduce-parameters" in "".join(c["source"]))
    assert [row[0] for row in _listed(box)] == [p.name for p in reproduce_box.parameters(_notebook("book/01_data"))]


@pytest.mark.parametrize("entry", NOTEBOOK_PAGES)
def test_parameters_agree_with_papermills_own_reading(entry):
    """papermill reads the same names, defaults and help texts (`papermill --help-notebook`)."""
    translators = pytest.importorskip("papermill.translators")
    cell = next(c for c in jupytext.read(ROOT / f"{entry}.md").cells if "parameters" in c.metadata.get("tags", []))
    theirs = [(p.name, p.default, p.help) for p in translators.PythonTranslator.inspect(cell)]
    assert theirs == [(p.name, p.default, p.comment) for p in reproduce_box.parse_parameters(cell.source)]


def _one_page_book(tmp_path: Path, url: str | None) -> str:
    """Build a one-page book (a notebook page) with the links of ``url``; its page's HTML."""
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    if not jupyter_book.exists():
        pytest.skip("jupyter-book is not installed: make venv")
    src = tmp_path / "src"
    (src / "book").mkdir(parents=True)
    config = {"title": "One page", "only_build_toc_files": True, "execute": {"execute_notebooks": "off"},
              "sphinx": {"local_extensions": {"launch_sources": str(ROOT / "book" / "_ext")},
                         "config": {"launch_sources_markdown": ["book/page"]}}}
    config = book_config.with_repository(config, url)
    (src / "_config.yml").write_text(yaml.safe_dump(config))
    (src / "_toc.yml").write_text("format: jb-book\nroot: book/page\n")
    notebook = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": "# A page\n\nText.\n"},
                          {"cell_type": "code", "metadata": {}, "execution_count": 1, "outputs": [],
                           "source": "1 + 1"}],
                "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
                "nbformat": 4, "nbformat_minor": 5}
    (src / "book" / "page.ipynb").write_text(json.dumps(notebook))
    # the page runs no code of irtlib's: no coverage in Sphinx (it would trace all of it, about half again the time)
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")}
    done = subprocess.run([str(jupyter_book), "build", "--all", "-W", "-n", "--path-output", str(tmp_path), str(src)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return (tmp_path / "_build" / "html" / "book" / "page.html").read_text()


@pytest.mark.book
def test_one_page_book_shows_the_links_only_with_the_setting(tmp_path):
    url = "https://github.com/someorg/safety-irt"
    html = _one_page_book(tmp_path / "with", url)
    assert f'href="{url}"' in html, "the repository button"
    assert f"{url}/issues/new" in html, "the issues button"
    # Binder opens the chapter's MyST source, which the repository holds (book/_ext/launch_sources.py)
    assert "https://mybinder.org/v2/gh/someorg/safety-irt/main?urlpath=tree/book/page.md" in html
    assert "https://colab.research.google.com/github/someorg/safety-irt/blob/main/book/page.ipynb" in html
    bare = _one_page_book(tmp_path / "without", None)
    assert "mybinder" not in bare and "colab" not in bare
    assert not re.findall(r"https?://github\.com/[\w.-]+/[\w.-]+", bare), "no repository URL without the setting"


# ---------------------------------------------------------------------------
# the course: exercises counted from the sources (irtbook.course)
# ---------------------------------------------------------------------------
CHAPTER_MD = """# A chapter

Text.

## Exercises

1. First question. It goes on.
2. Second one, over
   two lines? Yes.
3. Write code.

```{code-cell} ipython3
:tags: [remove-cell]

# Solution 1, computed: a comment at the start of a line is no heading
x = 1
```

```{code-cell} ipython3
:tags: [solution]

print(x)
```

:::{admonition} Solutions
:class: dropdown

1. An answer numbered like an exercise.
:::

## After the exercises

1. Not an exercise.
"""


def test_course_counts_exercises_and_coding_solutions():
    from irtbook import course

    assert course.title(CHAPTER_MD) == "A chapter"
    found, coding = course.exercises(CHAPTER_MD)
    assert found == ("First question.", "Second one, over two lines?", "Write code.")
    assert coding == 1
    assert course.exercises("# No exercises\n\ntext\n") == ((), 0)


def test_course_reads_the_books_chapters_in_toc_order():
    from irtbook import course

    kit = course.chapters(ROOT)
    toc = course.toc_entries(ROOT / "_toc.yml")
    assert [c.entry for c in kit] == [e for e in toc if e in {c.entry for c in kit}]
    assert {c.entry for c in kit} >= {"book/00_primer", "book/05_selection", "book/10_beyond"}
    for c in kit:       # every chapter ends with exercises, one at least with a coding solution
        assert c.n_exercises >= 3 and c.coding >= 1, (c.entry, c.n_exercises, c.coding)
