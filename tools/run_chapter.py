#!/usr/bin/env python3
"""Execute one chapter with papermill into an executed ``.ipynb``.

Usage::

    python tools/run_chapter.py SOURCE OUTPUT [--cwd DIR] [-- PAPERMILL_ARGS...]

``SOURCE`` is a jupytext MyST notebook (``book/<chapter>.md``) or an ``.ipynb``;
``OUTPUT`` is the executed notebook (``_build/executed/<chapter>.ipynb``).
Everything after ``--`` goes to the papermill command line unchanged, e.g.
``-- -p QUICK True -p N_SPLITS 20``.  Papermill injects those parameters in a
new cell right after the cell tagged ``parameters``.

Steps:

1. jupytext converts ``SOURCE`` to ``_build/executing/<chapter>.source.ipynb``;
2. papermill executes it into ``_build/executing/<chapter>.ipynb`` with the
   kernel's working directory ``--cwd`` (default: the current directory, which
   the Makefile sets to the repository root, so chapters open ``data/...`` and
   ``_build/...`` relative to the repository root);
3. on success the executed notebook is moved to ``OUTPUT`` (an atomic rename, so
   ``OUTPUT`` never holds a half-executed or failed notebook and make re-runs a
   failed chapter next time).  On failure the partial notebook stays in
   ``_build/executing/`` for inspection and the exit status is papermill's
   (non-zero).

What a chapter pays besides its own cells is kept small, since the book runs 17 of them
(``benchmarks/bench_book.py``; a one-cell notebook cost 4.1 CPU s before, see
``benchmarks/RESULTS.md``):

- papermill runs in this process (its own command line, :func:`papermill.cli.papermill`, so
  ``PAPERMILL_ARGS`` mean what they meant), not in a second interpreter that imports
  jupytext's and papermill's dependencies again;
- papermill's remote-storage handlers are not imported (:data:`REMOTE_IO_MODULES`: S3, Azure,
  GCS, HDFS through pyarrow, GitHub; about 0.7 CPU s): chapters read and write local files only,
  and the kernel is another process, which imports what the chapter asks for;
- the notebook is written once, when it ends (``--no-request-save-on-cell-execute``), not after
  every cell (two full JSON writes per cell: about 5 CPU s for the primer's 56 cells with their
  figures).  A failing cell's notebook is still written, with the error, by papermill; only a
  kernel that dies leaves no partial notebook (the command's output names the cell).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

#: Optional back ends of papermill's I/O (``papermill.iorw`` tries each at import): remote storage
#: the chapters never use. Marked absent in this process only, so papermill skips them.
REMOTE_IO_MODULES = ("boto3", "botocore", "azure", "gcsfs", "pyarrow", "github")


def run_papermill(argv: list[str]) -> int:
    """Run papermill's command line in this process; its exit status (1 when a cell failed).

    Parameters
    ----------
    argv : list of str
        The arguments of ``papermill`` (input, output, options), as on its command line.
    """
    for module in REMOTE_IO_MODULES:
        sys.modules.setdefault(module, None)  # type: ignore[assignment]  (import raises ImportError)
    from papermill.cli import papermill as papermill_command

    try:
        papermill_command.main(args=argv, prog_name="papermill", standalone_mode=False)
    except SystemExit as exc:  # papermill's own exit codes (138: the kernel died)
        return exc.code if isinstance(exc.code, int) else 1
    except Exception:  # noqa: BLE001 - a failed cell or kernel: papermill's traceback, as its command prints it
        traceback.print_exc()
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    papermill_args: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, papermill_args = argv[:split], argv[split + 1 :]

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="book/<chapter>.md (jupytext) or .ipynb")
    parser.add_argument("output", type=Path, help="executed notebook to write")
    parser.add_argument("--cwd", type=Path, default=Path.cwd(), help="kernel working directory")
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help="where partial notebooks go (default: <output dir>/../executing)",
    )
    args = parser.parse_args(argv)

    import jupytext  # imported late so --help works without the venv

    name = args.source.stem
    work_dir = args.work_dir or args.output.parent.parent / "executing"
    work_dir.mkdir(parents=True, exist_ok=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    source_ipynb = work_dir / f"{name}.source.ipynb"
    partial = work_dir / f"{name}.ipynb"
    partial.unlink(missing_ok=True)

    notebook = jupytext.read(args.source)
    jupytext.write(notebook, source_ipynb, fmt="ipynb")

    # The kernel is started by jupyter_client with this interpreter, so the
    # chapter sees the same environment (irtlib, numpy, ...) as this script.
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # silence a debugpy warning
    argv = [
        str(source_ipynb),
        str(partial),
        "--cwd",
        str(args.cwd.resolve()),
        "--no-progress-bar",
        "--no-request-save-on-cell-execute",
        "--log-level",
        "WARNING",
        *papermill_args,
    ]
    shown = " ".join(papermill_args)
    print(f"[run_chapter] {name}: executing {args.source} {shown}".rstrip(), flush=True)
    start = time.monotonic()
    status = run_papermill(argv)
    elapsed = time.monotonic() - start
    if status != 0:
        print(
            f"[run_chapter] {name}: FAILED after {elapsed:.1f} s (papermill exit {status}); "
            f"partial notebook: {partial}",
            file=sys.stderr,
            flush=True,
        )
        return status or 1
    os.replace(partial, args.output)
    source_ipynb.unlink(missing_ok=True)
    print(f"[run_chapter] {name}: done in {elapsed:.1f} s -> {args.output}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
