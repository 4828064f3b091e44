#!/usr/bin/env python3
"""A page-runner server: papermill, jupytext and jupyter_client imported once, one fork per page.

``make`` runs every page of the book as its own ``tools/run_chapter.py`` process, and each of them
imported jupytext, papermill, nbclient and jupyter_client before reading its page: about 0.5 CPU s a
page, 17 times a build, while the other job slot waited for the core (``benchmarks/RESULTS.md``, issue 26
``runner``). This server imports them once (:data:`PRELOAD`) and then, for each request, forks a child
that runs ``run_chapter.main`` with the requester's arguments, environment, working directory and
standard streams, as the requester would have run it. The child imports nothing of the project
(``irtlib``, ``irtbook``: the page's kernel imports those, from the sources as they are then) and no
kernel: it asks the kernel server (``tools/kernel_forkserver.py``) for one, as any runner does.

The requester (:func:`delegate`, called first thing by ``tools/run_chapter.py``) sends its arguments and
waits for the child's exit status, which becomes its own. When no server answers it starts one in the
background (:func:`start_in_background`) and runs its page itself, so a build's first pages never wait for
the server's imports; ``make book`` starts it beside the calibration stage (``run_chapter.py
--start-kernel-server``). The server is :class:`kernel_forkserver.Server`: the same protocol (JSON lines
over an ``AF_UNIX`` socket, the standard streams passed as ``SCM_RIGHTS``), the same environment key
(a request from another environment is refused, and its requester runs the page itself), the same end (its
owner, the ``make``, has ended, or ``--idle`` seconds without a page), and a requester that dies takes
its page runner (and so the runner's kernel) along.

Switches: ``IRTBOOK_PAGE_SERVER=0`` runs every page in its own process, as before; so do coverage's
subprocess hook (each runner must start coverage itself) and platforms without ``fork``.
``IRTBOOK_PAGE_SERVER_IDLE``: seconds a server without a page waits for the next (default
:data:`IDLE_SECONDS`). Neither counts in the environment key.

Usage (started by :func:`start_in_background`, not by hand)::

    python tools/page_server.py --socket PATH --key KEY --owner PID --idle SECONDS
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import kernel_forkserver

SWITCH = "IRTBOOK_PAGE_SERVER"
#: Seconds a server without a page waits for the next one (the Makefile's early start: longer, as the
#: calibration stage runs before the first page).
IDLE_VARIABLE = "IRTBOOK_PAGE_SERVER_IDLE"
IDLE_SECONDS = 30.0

#: What every page runner imports before its page: jupytext (the page's source), papermill's command line
#: and engines, nbclient, jupyter_client's kernel manager, provisioners and kernel specs, and the runner's
#: own modules. Not the project's library, nor anything a kernel imports.
PRELOAD = (
    "jupytext", "papermill.cli", "papermill.engines", "papermill.clientwrap", "nbclient",
    "jupyter_client.manager", "jupyter_client.kernelspec", "jupyter_client.provisioning.factory",
    "jupyter_core.utils", "psutil", "fork_provisioner", "run_chapter",
)


def enabled(env: dict[str, str] | None = None) -> str | None:
    """Why pages cannot be run by the server here (a reason), or None when they can.

    :func:`kernel_forkserver.why_not_forked` with this module's :data:`SWITCH`.
    """
    return kernel_forkserver.why_not_forked(os.environ if env is None else env, SWITCH)


def server_key(env: dict[str, str], cwd: str) -> str:
    """The environment key of the pages a server runs: this interpreter, ``cwd`` and ``env``."""
    return kernel_forkserver.environment_key(sys.executable, cwd, env)


def socket_path(state_dir: Path, key: str) -> str:
    """The server's socket, ``<state_dir>/pages-<key>.sock`` (a private temporary folder when too long)."""
    return kernel_forkserver.socket_path(Path(state_dir).resolve(), f"pages-{key}")


# -- the requester's side -----------------------------------------------------------------------------

def delegate(argv: list[str], *, state_dir: Path, owner: int) -> int | None:
    """Have the server run ``run_chapter.main(argv)``; its exit status, or None to run the page here.

    None when the server is switched off (:func:`enabled`), when none answers for this environment (one is
    then started in the background for the next pages) and when it refuses; the page then runs in this
    process. Once a page runner has started, its exit status is returned, whatever it is.

    Parameters
    ----------
    argv : list of str
        ``run_chapter.py``'s arguments.
    state_dir : Path
        Where the server's socket, lock and log go (``_build/page-server``).
    owner : int
        The process whose end ends a server started from here (``make``: the requester's parent).
    """
    if enabled() is not None:
        return None
    env, cwd = dict(os.environ), os.getcwd()
    key = server_key(env, cwd)
    path = socket_path(state_dir, key)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        start_in_background(state_dir, owner=owner, env=env)
        return None
    with sock:
        request = {"op": "spawn", "key": key, "argv": list(argv), "env": env, "cwd": cwd, "owner": owner}
        socket.send_fds(sock, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
        lines = sock.makefile("rb")
        first = _answer(lines)
        if first is None or "pid" not in first:
            why = (first or {}).get("error", "it closed the connection")
            print(f"[run_chapter] the page server did not run the page ({why}); running it here",
                  file=sys.stderr, flush=True)
            return None
        last = _answer(lines)
    if last is None or "exit" not in last:
        print(f"[run_chapter] the page server ended before its page runner {first['pid']} did",
              file=sys.stderr, flush=True)
        return 1
    code = last["exit"]
    return code if code >= 0 else 128 - code   # killed by a signal: the shell's convention


def _answer(lines) -> dict | None:
    line = lines.readline()
    return json.loads(line) if line else None


def start_in_background(state_dir: Path, *, owner: int, env: dict[str, str] | None = None) -> None:
    """Start a server for the pages of environment ``env`` (this process's) and return at once.

    The server exits by itself when another one runs for that environment, or is starting.
    """
    state_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ if env is None else env)
    key = server_key(env, os.getcwd())
    with open(state_dir / f"pages-{key}.log", "ab") as log:
        subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--socket", socket_path(state_dir, key),
                          "--key", key, "--owner", str(owner), "--idle", env.get(IDLE_VARIABLE, str(IDLE_SECONDS))],
                         env=env, cwd=os.getcwd(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=log, start_new_session=True, close_fds=True)


# -- the server -----------------------------------------------------------------------------------------

class PageServer(kernel_forkserver.Server):
    """:class:`kernel_forkserver.Server` serving page runners: a request is ``run_chapter.py``'s arguments."""

    what = "page runner"

    def _refusal(self, request: dict, fds: list[int]) -> str | None:
        import threading

        argv = request.get("argv")
        if self.stopping:
            return "the server is stopping"
        if request.get("key") != self.key:
            return f"environment key {request.get('key')} is not the server's {self.key}"
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            return "the arguments are not a list of strings"
        if not isinstance(request.get("owner"), int):
            return "no owner"
        if len(fds) != 3:
            return f"expected 3 file descriptors (stdin, stdout, stderr), got {len(fds)}"
        if threading.active_count() != 1:
            return "the server runs other threads"
        return None


def preload() -> float:
    """Import :data:`PRELOAD`; the CPU seconds it took. Raises when the imports left a thread running."""
    import importlib
    import threading

    start = time.process_time()
    import run_chapter

    for module in run_chapter.REMOTE_IO_MODULES:    # papermill's remote storage: absent, as in a runner
        sys.modules.setdefault(module, None)  # type: ignore[assignment]
    for name in PRELOAD:
        importlib.import_module(name)
    _warm_up()
    if threading.active_count() != 1:
        raise RuntimeError(f"the preloaded modules started threads: {threading.enumerate()}")
    return time.process_time() - start


#: A page as small as the book's: read once by the server, so that what jupytext and nbformat build at
#: their first use (the MyST parser, the notebook schema's validator) is built once, not once a page.
WARM_UP_PAGE = """\
---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
# Page

```{code-cell} ipython3
1
```
"""


def _warm_up() -> None:
    import jupytext
    import nbformat

    notebook = jupytext.reads(WARM_UP_PAGE, fmt="md:myst")
    nbformat.validate(nbformat.reads(jupytext.writes(notebook, fmt="ipynb"), as_version=4))


def become_runner(request: dict, *, server_pid: int, lock_fd: int) -> int:
    """In the forked child: take the request's streams, environment and directory, run the page; its status."""
    conn_fd = request.pop("_conn")
    try:
        kernel_forkserver.leave_server(request, server_pid=server_pid, also_close=(lock_fd,))
        fds = request.pop("_fds")
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in set(fds) - {0, 1, 2}:
            os.close(fd)
        sys.stdout.reconfigure(line_buffering=True)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        import run_chapter

        sys.argv = [run_chapter.__file__, *request["argv"]]
        os.write(conn_fd, json.dumps({"pid": os.getpid()}).encode() + b"\n")
        os.close(conn_fd)
    except BaseException:  # noqa: BLE001 - the requester sees it on its stderr
        import traceback

        traceback.print_exc()
        os._exit(1)
    return run_chapter.main(request["argv"], owner=request["owner"], in_server=True)


def main(argv: list[str] | None = None) -> tuple[dict, int] | None:
    """Serve; None when the server has ended, or (in a forked child) the request and the lock's descriptor."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True, help="AF_UNIX socket path to listen on")
    parser.add_argument("--key", required=True, help="the environment key of the pages it runs")
    parser.add_argument("--owner", type=int, default=0, help="exit when this process has ended")
    parser.add_argument("--idle", type=float, default=IDLE_SECONDS,
                        help="exit after this many seconds without a page")
    args = parser.parse_args(argv)

    own_key = server_key(dict(os.environ), os.getcwd())
    if own_key != args.key:
        kernel_forkserver._log(f"refusing to start: this environment's key is {own_key}, not {args.key}")
        return None
    lock_fd = os.open(args.socket + ".lock", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # held for the server's life
    except BlockingIOError:
        os.close(lock_fd)
        return None   # another server of this key runs, or is starting
    seconds = preload()
    kernel_forkserver.freeze_heap()
    server = PageServer(args.socket, args.key, args.owner, args.idle)
    kernel_forkserver._log(f"serving {args.socket} (key {args.key}, owner {args.owner}, idle {args.idle:g} s); "
                           f"preloaded {len(sys.modules)} modules in {seconds:.2f} CPU s")
    request = server.run()
    return None if request is None else (request, lock_fd)


if __name__ == "__main__":
    _SERVER_PID = os.getpid()
    _FORKED = main()
    if _FORKED is not None:
        # The forked child, back at the top level, so that the runner ends as an interpreter ends.
        _REQUEST, _LOCK_FD = _FORKED
        _STATUS = become_runner(_REQUEST, server_pid=_SERVER_PID, lock_fd=_LOCK_FD)
        # Every output is written and the kernel is gone: end without the interpreter's teardown of the
        # server's 770 modules (0.1 to 0.2 s a page), as the kernels end (a SIGKILL).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_STATUS)
