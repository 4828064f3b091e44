#!/usr/bin/env python3
"""Execute one chapter with papermill into an executed ``.ipynb``.

Usage::

    python tools/run_chapter.py SOURCE OUTPUT [--cwd DIR] [-- PAPERMILL_ARGS...]
    python tools/run_chapter.py --start-kernel-server --owner PID [--work-dir DIR] [--cwd DIR]

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
- and this process is itself, when a page server runs for its environment (``tools/page_server.py``),
  a child forked from that server, which imported jupytext, papermill and jupyter_client once for every
  page (about 0.45 CPU s a page): the process ``make`` started only hands its arguments, environment and
  standard streams over and waits for the child's exit status. When none answers it starts one in the
  background and runs its page itself; ``IRTBOOK_PAGE_SERVER=0`` turns it off, as does coverage's
  subprocess hook. A page run so ends its line with "(runner forked from the page server)";
- papermill's remote-storage handlers are not imported (:data:`REMOTE_IO_MODULES`: S3, Azure,
  GCS, HDFS through pyarrow, GitHub; about 0.7 CPU s): chapters read and write local files only,
  and the kernel is another process, which imports what the chapter asks for;
- the notebook is written once, when it ends (``--no-request-save-on-cell-execute``), not after
  every cell (two full JSON writes per cell: about 5 CPU s for the primer's 56 cells with their
  figures).  A failing cell's notebook is still written, with the error, by papermill; only a
  kernel that dies leaves no partial notebook (the command's output names the cell);
- the kernel is stopped at once when the last cell has answered (:func:`install_engine`:
  nbclient's ``shutdown_kernel="immediate"``, a SIGKILL to the kernel's process group), not asked
  to shut down and waited for: every output has arrived by then, and a graceful shutdown spends
  0.6 s a page (0.4 CPU s) tearing down the interpreter's modules (numpy, pandas, matplotlib,
  scipy). Under coverage's subprocess hook (:data:`COVERAGE_HOOKS`) the kernel still shuts down
  gracefully, so that it writes its coverage data;
- the kernel is forked from a kernel server (:func:`install_kernel_server`;
  ``tools/kernel_forkserver.py`` and ``tools/fork_provisioner.py``) that has imported ipykernel, IPython
  and the pages' third-party modules (numpy, scipy, pandas with its Styler, matplotlib, seaborn, ...)
  once, instead of a new interpreter importing them again for every page (about 2 CPU s a page,
  ``benchmarks/RESULTS.md``). Never the project's own modules: ``irtlib`` and ``irtbook`` are imported by
  the page, from the sources as they are. The first page of a build starts the server (in
  ``_build/kernel-server/``, one per kernel environment, under a file lock; it starts while this
  process imports papermill); it ends when the ``make`` that started it ends (this process's parent)
  or after 30 s without a kernel (``IRTBOOK_FORK_KERNEL_IDLE``). ``IRTBOOK_FORK_KERNEL=0`` turns it
  off; so do coverage's subprocess hook (coverage starts in ordinary kernels) and platforms other than
  Linux. Whatever goes wrong with it (a server that refuses or does not start) gives an ordinary
  kernel; the last line says which kind ran the page (``done in 2.1 s (forked kernel)``).
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

#: Environment variables that start coverage in every Python process (pytest-cov's subprocess
#: measurement, ``make test-all``): a kernel measured so must exit normally to write its data.
COVERAGE_HOOKS = ("COVERAGE_PROCESS_START", "COVERAGE_PROCESS_CONFIG")


def kernel_has_children(pid: int | None) -> bool:
    """Whether the process ``pid`` has child processes (a chapter's worker pool); False when it is gone."""
    if pid is None:
        return False
    try:
        import psutil  # ipykernel's own dependency

        return bool(psutil.Process(pid).children())
    except Exception:  # noqa: BLE001 - no such process, or no psutil: nothing to wait for that we can see
        return False


def install_engine() -> str:
    """Make papermill's default engine stop the kernel at once after the last cell; the shutdown used.

    papermill's own engine (nbclient) with ``shutdown_kernel="immediate"``: jupyter_client kills the
    kernel's process group once the last cell and the closing ``kernel_info`` request have answered,
    instead of a shutdown request followed by the interpreter's teardown. Every output has arrived
    by then (the kernel reports idle only after flushing its streams). A kernel that has started
    processes of its own (:func:`kernel_has_children`: a chapter's py-irt worker pool) is shut down
    as before (a shutdown request, then the wait for its exit), so that whatever such a pool does
    when its kernel ends is as it was. Registered as the default engine
    (name ``None``) and as ``nbclient``, so the notebook's metadata and papermill's ``--engine``
    option are as before. Nothing is installed (``"graceful"``) when coverage's subprocess hook is
    set (:data:`COVERAGE_HOOKS`): the kernel must exit normally to write its coverage data.
    """
    if any(os.environ.get(var) for var in COVERAGE_HOOKS):
        return "graceful"
    from jupyter_core.utils import run_sync
    from papermill.clientwrap import PapermillNotebookClient
    from papermill.engines import NBClientEngine, papermill_engines
    from papermill.log import logger

    class ImmediateShutdownClient(PapermillNotebookClient):
        async def _async_cleanup_kernel(self) -> None:
            provisioner = getattr(self.km, "provisioner", None)
            if kernel_has_children(getattr(provisioner, "pid", None)):
                self.shutdown_kernel = "graceful"
            await super()._async_cleanup_kernel()

        _cleanup_kernel = run_sync(_async_cleanup_kernel)

    class ImmediateShutdownEngine(NBClientEngine):
        @classmethod
        def execute_managed_notebook(cls, nb_man, kernel_name, log_output=False, stdout_file=None,
                                     stderr_file=None, start_timeout=60, execution_timeout=None, **kwargs):
            # papermill's NBClientEngine.execute_managed_notebook (2.x), with this client and shutdown
            kwargs.pop("input_path", None)
            timeout = execution_timeout or kwargs.pop("timeout", None)
            kwargs.pop("startup_timeout", None)
            kwargs.setdefault("shutdown_kernel", "immediate")
            client = ImmediateShutdownClient(nb_man, timeout=timeout, startup_timeout=start_timeout,
                                             kernel_name=kernel_name, log=logger, log_output=log_output,
                                             stdout_file=stdout_file, stderr_file=stderr_file, **kwargs)
            return client.execute()

    papermill_engines.register(None, ImmediateShutdownEngine)
    papermill_engines.register("nbclient", ImmediateShutdownEngine)
    return "immediate"


def install_kernel_server(state_dir: Path, *, owner: int | None = None) -> str:
    """Have this process's kernel forked from a kernel server (``tools/fork_provisioner.py``); how it starts.

    ``"forked"`` when jupyter_client will ask the server (started now if none runs for this environment,
    owned by ``owner``, by default this process's parent, normally ``make``), else
    ``"ordinary (<why not>)"``: the switch ``IRTBOOK_FORK_KERNEL=0``, coverage's subprocess hook, or a
    platform without the server.
    """
    import fork_provisioner

    reason = fork_provisioner.install(state_dir, owner=os.getppid() if owner is None else owner)
    return f"ordinary ({reason})" if reason else "forked"


#: run_papermill's status for a kernel that died before it answered (no cell ran): e.g. a port it was
#: given was taken by another process between jupyter_client choosing it and the kernel binding it.
KERNEL_NOT_STARTED = 75
#: How often a page whose kernel did not start is run again.
START_RETRIES = 2


def start_kernel_server(args: argparse.Namespace, *, env: dict[str, str]) -> int:
    """Start the kernel server the pages run by this make will ask for, and return once it is ready.

    The page server (``tools/page_server.py``) for the pages' runners, whose environment is ``env``
    (this process's as it started), is started first, in the background.

    The Makefile runs this beside the calibration stage (``make book``): the server's imports (about 3
    CPU s on one core) then overlap the stage instead of delaying the first two pages, which would
    otherwise wait for them with both job slots idle. The server's key is the environment the pages'
    runners will have (this process's, with the same changes :func:`main` makes), so they find it;
    a server that does not start here is started by the first page as before. Exit status 0 whether
    or not a server runs (the pages fall back on their own).
    """
    build_dir = (args.work_dir or Path("_build") / "executing").parent
    import page_server

    if page_server.enabled(env) is None:
        page_server.start_in_background(build_dir / "page-server", owner=args.owner, env=env)
    state_dir = build_dir / "kernel-server"
    launch = install_kernel_server(state_dir, owner=args.owner)
    if launch != "forked":
        print(f"[run_chapter] no kernel server: {launch}", flush=True)
        return 0
    import fork_provisioner

    try:
        fork_provisioner.start_server("python3", cwd=str(args.cwd.resolve()))
    except Exception as exc:  # noqa: BLE001 - the first page starts one (or an ordinary kernel)
        print(f"[run_chapter] the kernel server did not start early ({exc})", flush=True)
    return 0


def run_papermill(argv: list[str]) -> int:
    """Run papermill's command line in this process; its exit status (1 when a cell failed).

    :data:`KERNEL_NOT_STARTED` when the kernel died before replying to its first request, so no
    cell ran and the page can simply be run again.

    Parameters
    ----------
    argv : list of str
        The arguments of ``papermill`` (input, output, options), as on its command line.
    """
    for module in REMOTE_IO_MODULES:
        sys.modules.setdefault(module, None)  # type: ignore[assignment]  (import raises ImportError)
    from papermill.cli import papermill as papermill_command

    install_engine()
    try:
        papermill_command.main(args=argv, prog_name="papermill", standalone_mode=False)
    except SystemExit as exc:  # papermill's own exit codes (138: the kernel died)
        return exc.code if isinstance(exc.code, int) else 1
    except Exception as exc:  # noqa: BLE001 - a failed cell or kernel: papermill's traceback, as its command prints it
        traceback.print_exc()
        return KERNEL_NOT_STARTED if "Kernel died before replying to kernel_info" in str(exc) else 1
    return 0


def _work_dir(args: argparse.Namespace) -> Path:
    """Where partial notebooks go: ``--work-dir``, else ``<output dir>/../executing``."""
    return args.work_dir or args.output.parent.parent / "executing"


def main(argv: list[str] | None = None, *, owner: int | None = None, in_server: bool = False) -> int:
    """Run the page ``argv`` names (or start the servers); the exit status.

    ``owner`` is the process whose end ends a kernel server started by this page (by default this
    process's parent, ``make``); ``in_server`` is set by the page server (``tools/page_server.py``) in the
    page runner it forked, which runs the page itself.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    given = list(argv)
    papermill_args: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, papermill_args = argv[:split], argv[split + 1 :]

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, nargs="?", help="book/<chapter>.md (jupytext) or .ipynb")
    parser.add_argument("output", type=Path, nargs="?", help="executed notebook to write")
    parser.add_argument("--cwd", type=Path, default=Path.cwd(), help="kernel working directory")
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help="where partial notebooks go (default: <output dir>/../executing)",
    )
    parser.add_argument("--start-kernel-server", action="store_true",
                        help="only start the pages' kernel server (in --work-dir/../kernel-server) and exit "
                             "once it is ready: the Makefile does so while the calibration stage runs")
    parser.add_argument("--owner", type=int, default=None,
                        help="with --start-kernel-server: the process whose end ends the server (make)")
    args = parser.parse_args(argv)
    original_env = dict(os.environ)
    if not in_server and not args.start_kernel_server and args.source is not None and args.output is not None:
        # The page server runs the page in a process forked from it, which has imported what follows
        # (jupytext, papermill, jupyter_client) once for every page; None: it runs here.
        import page_server

        status = page_server.delegate(given, state_dir=_work_dir(args).parent / "page-server", owner=os.getppid())
        if status is not None:
            return status
    # The kernel is started by jupyter_client with this interpreter, so the
    # chapter sees the same environment (irtlib, numpy, ...) as this script.
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # silence a debugpy warning
    if args.start_kernel_server:
        return start_kernel_server(args, env=original_env)
    if args.source is None or args.output is None:
        parser.error("SOURCE and OUTPUT are required (unless --start-kernel-server)")
    name = args.source.stem
    work_dir = _work_dir(args)
    work_dir.mkdir(parents=True, exist_ok=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    # The kernel server, when one is needed, starts while this process reads the page and imports papermill
    # (the book's pages all run the python3 kernel).
    launch = install_kernel_server(work_dir.parent / "kernel-server", owner=owner)
    if launch == "forked":
        import fork_provisioner

        fork_provisioner.prestart("python3", cwd=str(args.cwd.resolve()))

    import jupytext  # imported late so --help works without the venv

    source_ipynb = work_dir / f"{name}.source.ipynb"
    partial = work_dir / f"{name}.ipynb"
    partial.unlink(missing_ok=True)

    notebook = jupytext.read(args.source)
    jupytext.write(notebook, source_ipynb, fmt="ipynb")

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
    for attempt in range(1, START_RETRIES + 1):
        if status != KERNEL_NOT_STARTED:
            break
        print(f"[run_chapter] {name}: the kernel died before it started (no cell ran); "
              f"running the page again ({attempt} of {START_RETRIES})", file=sys.stderr, flush=True)
        partial.unlink(missing_ok=True)
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
    if launch == "forked":
        import fork_provisioner

        launch = fork_provisioner.last_launch
    runner = " (runner forked from the page server)" if in_server else ""
    print(f"[run_chapter] {name}: done in {elapsed:.1f} s ({launch} kernel) -> {args.output}{runner}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
