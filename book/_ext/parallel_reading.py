"""Let Sphinx read the book's pages in parallel: two of Jupyter Book's extensions are safe for it but do not say so.

Sphinx reads documents in several processes (``-j``) only when every loaded extension declares
``parallel_read_safe``; an extension that declares nothing counts as unsafe, and Sphinx then reads
serially and warns (an error under ``-W``). Jupyter Book 1 loads two such extensions:

* ``sphinx_multitoc_numbering`` replaces the toctree collector's ``assign_section_numbers``, which
  Sphinx calls once, in the main process, after every document has been read and the workers'
  environments merged; nothing of it runs while a document is read.
* ``sphinx_jupyterbook_latex`` adds transforms that change only the doctree being read (its
  toctree nodes, its code cells), a builder hook that acts for LaTeX builders only, and LaTeX
  settings; it keeps no state across documents.

So this extension declares them safe once the builder exists (Sphinx asks when reading starts).
Serial and parallel builds of this book give the same HTML, byte for byte (benchmarks/RESULTS.md,
issue 26, the render); ``tools/jupyter_book_build.py`` runs Jupyter Book with Sphinx's jobs.
"""

from __future__ import annotations

#: The extensions Jupyter Book loads that are safe to read in parallel without declaring it (see above).
SAFE_UNDECLARED = ("sphinx_multitoc_numbering", "sphinx_jupyterbook_latex")


def _declare_safe(app) -> None:
    for name in SAFE_UNDECLARED:
        extension = app.extensions.get(name)
        if extension is not None and extension.parallel_read_safe is None:
            extension.parallel_read_safe = True


def setup(app):
    """Declare :data:`SAFE_UNDECLARED` parallel-read safe when the builder is created."""
    app.connect("builder-inited", _declare_safe)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1.0"}
