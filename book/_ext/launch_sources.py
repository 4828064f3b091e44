"""Launch buttons that open the chapter the repository holds.

The build tree renders executed notebooks (``book/<name>.ipynb``), so sphinx-book-theme's launch
links name ``book/<name>.ipynb``; the repository holds the chapter as the MyST notebook
``book/<name>.md``, which Jupyter opens as a notebook through jupytext (installed by the
repository's environment). This extension rewrites the Binder and JupyterHub links of every page to
the ``.md`` source when that is what the repository holds. Colab opens ``.ipynb`` files only; its
link is left as the theme makes it (see tools/book_config.py). Without launch buttons
(no ``BOOK_REPOSITORY_URL``) it does nothing.
"""

from __future__ import annotations

REWRITTEN = ("Binder", "JupyterHub")


def _rewrite(buttons, pagename: str) -> int:
    changed = 0
    for button in buttons or []:
        if isinstance(button, dict) and button.get("type") == "group":
            changed += _rewrite(button.get("buttons"), pagename)
        elif isinstance(button, dict) and button.get("text") in REWRITTEN and button.get("url"):
            old = f"{pagename}.ipynb"
            if old in button["url"]:
                button["url"] = button["url"].replace(old, f"{pagename}.md")
                changed += 1
    return changed


def _page_context(app, pagename, templatename, context, doctree):
    if not app.config.launch_sources_markdown:
        return
    markdown = set(app.config.launch_sources_markdown)
    if pagename in markdown:
        _rewrite(context.get("header_buttons"), pagename)


def setup(app):
    """Register the hook and its setting (the toc entries whose source is ``.md``)."""
    # the toc entries whose repository source is a MyST notebook (written by tools/make_build_tree.py)
    app.add_config_value("launch_sources_markdown", [], "html")
    app.connect("html-page-context", _page_context, priority=502)   # after the theme's launch buttons (501)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1.0"}
