#!/usr/bin/env python3
"""``jupyter-book build`` with Sphinx's parallel jobs, which Jupyter Book 1's command line does not expose.

Usage::

    python tools/jupyter_book_build.py --jobs 2 -- build --all -W -n --keep-going --path-output . _build/src

Everything after ``--`` is ``jupyter-book``'s own command line, run unchanged; only the number of
processes Sphinx reads and writes the pages with (Sphinx's ``-j``) is added, through the ``jobs``
argument of Jupyter Book's ``jupyter_book.sphinx.build_sphinx``, which its ``build`` command calls
without it. The book's ``book/_ext/parallel_reading.py`` declares the two extensions Jupyter Book
loads without a declaration safe for parallel reading; Sphinx reads serially otherwise. With
``--jobs 1``, or a Jupyter Book whose ``build_sphinx`` takes no ``jobs``, this is ``jupyter-book``
itself (the second case says so).
"""

from __future__ import annotations

import argparse
import functools
import inspect
import os
import sys


def main(argv: list[str] | None = None) -> int:
    """The command line: ``jupyter-book`` with the arguments after ``--``, Sphinx running ``--jobs`` processes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1, help="Sphinx's processes (its -j); 1: serial")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="-- then jupyter-book's arguments")
    args = parser.parse_args(argv)
    book_args = args.args[1:] if args.args[:1] == ["--"] else args.args
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, not {args.jobs}")

    from jupyter_book import sphinx as book_sphinx
    from jupyter_book.cli.main import main as command_line

    if args.jobs > 1:
        if "jobs" in inspect.signature(book_sphinx.build_sphinx).parameters:
            # the build command imports build_sphinx from this module when it runs
            book_sphinx.build_sphinx = functools.partial(book_sphinx.build_sphinx, jobs=args.jobs)
        else:
            print("jupyter_book_build: this Jupyter Book's build_sphinx takes no jobs; building serially",
                  file=sys.stderr)
    try:
        command_line(args=book_args, prog_name="jupyter-book", standalone_mode=True)
    except SystemExit as done:                       # click ends the command so, with its exit code
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return 0


def _exit_now(code: int) -> None:
    """End the process without tearing the interpreter down: the build's output is written and closed by now.

    Freeing Sphinx's environment and doctrees object by object at exit took 0.7 to 0.8 s of a book build
    (benchmarks/RESULTS.md, issue 26, the render); the streams and logging handlers are flushed first.
    """
    import logging

    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit_now(main())
