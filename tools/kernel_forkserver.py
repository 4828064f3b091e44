#!/usr/bin/env python3
"""A kernel fork server: the kernel's and the pages' third-party modules imported once, one fork per page.

Every executed page of the book starts an IPython kernel (``python -m ipykernel_launcher -f CONN``) that
imports ipykernel and IPython, then, in the page's first cell, numpy, scipy, pandas and matplotlib: about
2 CPU s a page before the page's own work (``benchmarks/RESULTS.md``, issue 26 ``kern``). This server
imports those modules once (:data:`PRELOAD`) and then, for each request, forks a child that becomes the
requested kernel: it takes the requester's environment, working directory, standard output and error
(passed over the socket), starts a new session like ``launch_kernel``'s ``start_new_session``, and runs
what ``ipykernel_launcher`` runs. The child imports nothing of the project itself (``irtlib``,
``irtbook``): those are imported by the page's cells in the child, from the sources as they are then.

The client side (who starts the server, the kernel handle, jupyter_client's provisioner) is
``tools/fork_provisioner.py``; ``tools/run_chapter.py`` installs it.

Protocol (one ``AF_UNIX`` stream connection per kernel; JSON lines):

- request ``{"op": "spawn", "key": KEY, "argv": [...], "env": {...}, "cwd": DIR}`` with two file
  descriptors (the kernel's standard output and error) as ``SCM_RIGHTS``;
- the child answers ``{"pid": PID}`` once it leads its own session (so its process group can be
  signalled), the server ``{"error": WHY}`` when it refuses (the client then starts an ordinary kernel);
- the server writes ``{"exit": CODE}`` (:class:`subprocess.Popen`'s ``returncode`` convention) when it has
  reaped the kernel, then closes the connection; a client that closes the connection first (its
  process died) has its kernel's process group killed;
- ``{"op": "ping"}`` answers ``{"pid": SERVER_PID, "key": KEY, "kernels": N}``; ``{"op": "stop"}`` makes
  the server exit as soon as it has no kernel.

The server exits when it has no kernel and either nothing asked for one for ``--idle`` seconds or the
process ``--owner`` (the ``make`` that runs the pages) has ended, on ``stop`` and on SIGTERM. It refuses
(and the client falls back to an ordinary kernel) a request whose environment key differs from its own
(:func:`environment_key`: the interpreter, the working directory and every environment variable but the
per-kernel ones, :data:`PER_KERNEL_VARIABLES`), a command other than ``PYTHON -m ipykernel_launcher ...``
with its own interpreter, and any request while it runs a thread besides the main one (a fork would
copy the other threads' locks but not the threads).

Why forking is safe for these modules (checked by ``tests/book/test_kernel_forkserver.py``):

- OpenBLAS (numpy's and scipy's) stops its thread pool before ``fork`` (``pthread_atfork``) and starts it
  again in the child at the first BLAS call, with the same thread count; nothing here starts an OpenMP
  team before forking (scikit-learn and torch are imported, not run: torch's intra- and inter-op pools
  start in the kernel, at its first parallel operation);
- the random state: Python's :mod:`random` reseeds itself in a forked child; numpy's global legacy
  generator does not, so the child reseeds it from the operating system, as a fresh interpreter seeds
  it (chapters seed their own generators anyway). Only the string hash seed is shared by every kernel of
  one server (as with one ``PYTHONHASHSEED`` for the build; set it to fix it);
- the child restores the signal dispositions of a fresh interpreter, gets a new session, takes the
  requester's descriptors 1 and 2 (``/dev/null`` as 0, as ``launch_kernel``'s closed pipe), replaces the
  environment (``os.environ``, hence ``putenv``), ``sys.argv``, ``sys.path`` and the working directory, and
  dies with the server (``PR_SET_PDEATHSIG``), so no kernel outlives it;
- matplotlib is imported with ``MPLBACKEND`` set as ipykernel sets it before any cell runs (the inline
  back end), and ``matplotlib_inline`` itself is not imported: it hooks into the IPython shell at its
  import, which must happen in the kernel. pandas asks at import whether it runs in a kernel (its
  tables' plain text shows 20 columns there, as many as fit a terminal elsewhere): the imports see a
  stand-in shell with a kernel (:func:`preload`), and any other module that asks stops the server;
- variables the imports set (``PYDEVD_USE_FRAME_EVAL``, scikit-learn's ``KMP_*``) are set in each kernel
  on top of its requested environment, as its own imports would have set them.

Usage (started by ``tools/fork_provisioner.py``, not by hand)::

    python tools/kernel_forkserver.py --socket PATH --key KEY --owner PID --idle SECONDS
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

#: Variables jupyter_client (or the provisioner) sets for one kernel, and this server's own switches:
#: left out of the environment key; the child gets them from its request.
PER_KERNEL_VARIABLES = frozenset({"JPY_PARENT_PID", "JPY_SESSION_NAME", "JPY_INTERRUPT_EVENT",
                                  "IPY_INTERRUPT_EVENT"})
#: The switches of this server and of the page server (``tools/page_server.py``): left out of the key too.
SWITCH_PREFIXES = ("IRTBOOK_FORK_KERNEL", "IRTBOOK_PAGE_SERVER")

#: The inline back end, as ipykernel sets it (``IPKernelApp.init_gui_pylab``) before the first cell.
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"

#: Imported once by the server. The kernel's own start (ipykernel, IPython, the debugger it imports
#: because debugpy is installed) and the third-party modules the pages import directly or through
#: irtlib and irtbook: numpy, scipy (``scipy.special`` through ``irtlib.core.kernels``, ``scipy.stats``),
#: pandas with its Styler (which imports pyplot and jinja2), matplotlib's figure and Agg canvas,
#: seaborn, scikit-learn's base (through ``kmedoids``), myst_nb's ``glue``, and torch, which the batched
#: py-irt fit (``irtlib.calibration.pyirt_batch``) imports in the two pages that fit with it in a full
#: build (02's fits beyond the stage's, 04b's item-fit null): about 1.2 CPU s each, paid once here
#: beside the stage (``benchmarks/RESULTS.md``, issue 26 ``c04b``); its import starts no thread and no
#: OpenMP team (its thread pools start at a page's first parallel operation, in the kernel). Not the
#: project's modules, not pyro (its import costs a twentieth of torch's), not
#: ``matplotlib_inline``. A module that is not installed is skipped.
PRELOAD = (
    "ipykernel.kernelapp", "ipykernel.ipkernel", "ipykernel.zmqshell", "ipykernel.debugger",
    "IPython.core.debugger", "IPython.core.completerlib", "IPython.extensions.storemagic",
    "IPython.display", "psutil",
    "numpy", "scipy.special", "scipy.stats", "scipy.optimize", "scipy.linalg",
    "pandas", "pandas.io.formats.style", "jinja2",
    "matplotlib", "matplotlib.figure", "matplotlib.pyplot", "matplotlib.backends.backend_agg",
    "seaborn", "sklearn.base", "kmedoids", "myst_nb", "torch",
)

#: Modules that must not be imported before the kernel's shell exists (they hook into it at import).
NOT_BEFORE_SHELL = ("matplotlib_inline.backend_inline",)

KERNEL_MODULE = "ipykernel_launcher"


#: Environment variables that start coverage in every Python process: each must start it itself.
COVERAGE_HOOKS = ("COVERAGE_PROCESS_START", "COVERAGE_PROCESS_CONFIG")


def why_not_forked(env: dict[str, str], switch: str) -> str | None:
    """Why a fork server cannot be used here (a reason), or None when it can.

    The switch ``switch`` set to 0 (or ``false``, ``no``, ``off``), coverage's subprocess hook
    (:data:`COVERAGE_HOOKS`), and platforms other than Linux (macOS' system libraries are not safe to
    use after ``fork`` without ``exec``) or without ``fork`` and descriptor passing.
    """
    if env.get(switch, "1").strip().lower() in {"0", "false", "no", "off"}:
        return f"{switch}={env[switch]}"
    if any(env.get(var) for var in COVERAGE_HOOKS):
        return "coverage's subprocess hook is set"
    if not sys.platform.startswith("linux") or not hasattr(os, "fork") or not hasattr(socket, "send_fds"):
        return f"no fork server on {sys.platform}"
    return None


def environment_key(executable: str, cwd: str, env: dict[str, str]) -> str:
    """The key of a kernel environment: interpreter, working directory and the variables that matter.

    Two kernels with equal keys would import the same modules the same way (matplotlib reads its
    ``matplotlibrc`` from the working directory and ``MPLBACKEND``, OpenBLAS its thread count, Python
    its ``PYTHON*`` flags, at import). Every variable counts but :data:`PER_KERNEL_VARIABLES` and
    the servers' switches (:data:`SWITCH_PREFIXES`: ``IRTBOOK_FORK_KERNEL*``, ``IRTBOOK_PAGE_SERVER*``).
    """
    kept = sorted((k, v) for k, v in env.items()
                  if k not in PER_KERNEL_VARIABLES and not k.startswith(SWITCH_PREFIXES))
    blob = json.dumps([os.path.abspath(executable), os.path.abspath(cwd), kept], separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _log(message: str) -> None:
    """One line to the server's log (its standard error, a file)."""
    os.write(2, f"{time.strftime('%H:%M:%S')} [{os.getpid()}] {message}\n".encode())


#: Modules allowed to ask for the IPython shell while they are imported (:func:`preload`), with what they
#: make of it: pandas chooses ``display.max_columns`` (20 in a kernel, 0 in a terminal).
SHELL_QUERIES_ALLOWED = ("pandas.core.config_init",)


def freeze_heap() -> None:
    """Collect the imports' garbage, then keep the garbage collector off what is left (``gc.freeze``).

    A forked child shares the server's memory until it writes to it, and a collection writes to the
    header of every object it visits: without this, the child's first full collections copy the pages
    of every preloaded module's objects. Frozen objects are never collected, which changes nothing for
    modules that stay imported.
    """
    import gc

    gc.collect()
    gc.freeze()


class _KernelShellStandIn:
    """What :func:`preload`'s imports get from ``get_ipython()``: a shell that has a kernel.

    In a kernel, the page's imports run in an IPython shell with a kernel (``get_ipython().kernel``); here
    they run before the shell exists. pandas asks at import whether it runs in a kernel (and then
    shows at most 20 columns in a table's plain text); this answers as the kernel would.
    """

    kernel = None


def preload() -> tuple[float, dict[str, str]]:
    """Import :data:`PRELOAD`; the CPU seconds it took and the environment variables the imports set.

    The imports see a shell with a kernel as ``get_ipython()``, as the page's imports do (only the
    modules of :data:`SHELL_QUERIES_ALLOWED` may ask). Some modules set variables when imported (ipykernel's
    debugger ``PYDEVD_USE_FRAME_EVAL``, scikit-learn ``KMP_DUPLICATE_LIB_OK``; and the inline back end's
    ``MPLBACKEND`` is set here as ipykernel sets it): a kernel gets them on top of its own environment,
    as if it had imported the modules itself. Raises when the imports left a thread running, imported a
    module that hooks into the shell, or asked for the shell from elsewhere.
    """
    import builtins
    import importlib
    import threading

    start = time.process_time()
    before = dict(os.environ)
    os.environ.setdefault("MPLBACKEND", INLINE_BACKEND)
    askers: list[str] = []

    def get_ipython() -> _KernelShellStandIn:
        askers.append(sys._getframe(1).f_globals.get("__name__", "?"))
        return _KernelShellStandIn()

    builtins.get_ipython = get_ipython
    try:
        for name in PRELOAD:
            try:
                importlib.import_module(name)
            except ImportError:
                _log(f"preload: {name} is not installed, skipped")
    finally:
        del builtins.get_ipython
    unexpected = sorted(set(askers) - set(SHELL_QUERIES_ALLOWED))
    if unexpected:
        raise RuntimeError(f"modules asked for the IPython shell while imported: {unexpected}")
    if threading.active_count() != 1:
        raise RuntimeError(f"the preloaded modules started threads: {threading.enumerate()}")
    early = [name for name in NOT_BEFORE_SHELL if name in sys.modules]
    if early:
        raise RuntimeError(f"imported before the kernel's shell: {early}")
    added = {k: v for k, v in os.environ.items() if before.get(k) != v}
    return time.process_time() - start, added


def socket_path(state_dir: Path, name: str) -> str:
    """A server's socket, ``<state_dir>/<name>.sock``, or in a private temporary folder when that is too long."""
    path = str(Path(state_dir) / f"{name}.sock")
    if len(os.fsencode(path)) < 100:  # sun_path holds 108 bytes on Linux
        return path
    import tempfile

    short = Path(tempfile.gettempdir()) / f"irtbook-kernels-{os.getuid()}"
    short.mkdir(mode=0o700, exist_ok=True)
    return str(short / (hashlib.sha256(path.encode()).hexdigest()[:16] + ".sock"))


class Server:
    """The server's state: its socket, its children (pid -> connection), when it last had work.

    Its children are kernels here; ``tools/page_server.py`` serves page runners with it (:attr:`what`
    names them in the log, :meth:`_refusal` says which requests it serves).
    """

    what = "kernel"

    def __init__(self, path: str, key: str, owner: int, idle: float):
        import selectors

        self.path, self.key, self.owner, self.idle = path, key, owner, idle
        self.pid = os.getpid()
        self.kernels: dict[int, socket.socket] = {}
        self.env_added: dict[str, str] = {}
        self.last_work = time.monotonic()
        self.stopping = False
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            os.unlink(path)  # a stale socket of a server that died (the client holds the start lock)
        except FileNotFoundError:
            pass
        self.listener.bind(path)
        self.inode = os.stat(path).st_ino
        self.listener.listen(16)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select() through the wakeup fd
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGHUP, self._on_term)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, "accept")
        self.selector.register(self.wake_r, selectors.EVENT_READ, "wake")

    def _on_term(self, signum, frame) -> None:
        self.stopping = True
        for pid in self.kernels:
            _kill_group(pid)

    # -- the loop --------------------------------------------------------------------------------

    def run(self) -> dict | None:
        """Serve until it is time to exit (None), or, in a forked child, return its request."""
        while True:
            for selected, _ in self.selector.select(timeout=0.5):
                what = selected.data
                if what == "accept":
                    request = self._accept()
                    if request is not None:
                        return request  # the child
                elif what == "wake":
                    try:
                        while os.read(self.wake_r, 512):
                            pass
                    except BlockingIOError:
                        pass
                else:
                    self._client_readable(selected.fileobj, what)
            self._reap()
            if self.kernels:
                self.last_work = time.monotonic()
                continue
            reason = self._exit_reason()
            if reason:
                self._close(reason)
                return None

    def _exit_reason(self) -> str | None:
        if self.stopping:
            return "stopped"
        if not _alive(self.owner):
            return f"its owner {self.owner} ended"
        if time.monotonic() - self.last_work > self.idle:
            return f"idle for {self.idle:g} s"
        return None

    def _close(self, reason: str) -> None:
        try:
            if os.stat(self.path).st_ino == self.inode:
                os.unlink(self.path)
        except FileNotFoundError:
            pass
        self.listener.close()
        import resource

        usage = resource.getrusage(resource.RUSAGE_SELF)
        _log(f"exit: {reason}; server cpu {usage.ru_utime + usage.ru_stime:.2f} s")

    # -- requests --------------------------------------------------------------------------------

    def _accept(self) -> dict | None:
        conn, _ = self.listener.accept()
        conn.settimeout(10)
        fds: list[int] = []
        try:
            if hasattr(socket, "SO_PEERCRED"):
                import struct

                _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                                struct.calcsize("3i")))
                if uid != os.getuid():
                    raise ValueError(f"a request from user {uid}")
            request, fds = _read_request(conn)
            op = request.get("op") if request else None
            if request is None:
                pass  # a client that only checked the server is there
            elif op == "ping":
                _send(conn, {"pid": self.pid, "key": self.key, "kernels": len(self.kernels)})
            elif op == "stop":
                self.stopping = True
                _send(conn, {"pid": self.pid})
            elif op == "spawn":
                refusal = self._refusal(request, fds)
                if refusal:
                    _log(f"refused: {refusal}")
                    _send(conn, {"error": refusal})
                else:
                    return self._fork(conn, request, fds)
            else:
                _send(conn, {"error": f"unknown op {op!r}"})
        except Exception as exc:  # noqa: BLE001 - a bad request must not end the server
            _log(f"bad request: {exc!r}")
            try:
                _send(conn, {"error": repr(exc)})
            except OSError:
                pass
        for fd in fds:
            os.close(fd)
        conn.close()
        self.last_work = time.monotonic()
        return None

    def _refusal(self, request: dict, fds: list[int]) -> str | None:
        import threading

        argv = request.get("argv") or []
        if self.stopping:
            return "the server is stopping"
        if request.get("key") != self.key:
            return f"environment key {request.get('key')} is not the server's {self.key}"
        if argv[:3] != [sys.executable, "-m", KERNEL_MODULE]:
            return f"not a kernel of this interpreter: {argv[:3]}"
        if len(fds) != 2:
            return f"expected 2 file descriptors (stdout, stderr), got {len(fds)}"
        if threading.active_count() != 1:
            return "the server runs other threads"
        return None

    def _fork(self, conn: socket.socket, request: dict, fds: list[int]) -> dict | None:
        import selectors

        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            request["_fds"] = fds
            request["_env_added"] = self.env_added
            request["_conn"] = conn.detach()
            request["_server_fds"] = [self.listener.detach(), self.wake_r, self.wake_w,
                                      *(c.detach() for c in self.kernels.values())]
            try:
                self.selector.close()
            except OSError:
                pass
            return request
        for fd in fds:
            os.close(fd)
        conn.settimeout(None)
        self.kernels[pid] = conn
        self.selector.register(conn, selectors.EVENT_READ, pid)
        _log(f"forked {self.what} {pid} (cwd {request['cwd']})")
        return None

    def _client_readable(self, conn: socket.socket, pid: int) -> None:
        try:
            data = conn.recv(4096)
        except OSError:
            data = b""
        if not data and pid in self.kernels:  # the client went away: its kernel goes too
            _log(f"client of {self.what} {pid} closed its connection: killing the {self.what}")
            self.selector.unregister(conn)
            _kill_group(pid)

    def _reap(self) -> None:
        while self.kernels:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.kernels.pop(pid, None)
            code = os.waitstatus_to_exitcode(status)
            # the kernels' CPU time is counted here, not in the requester's children (benchmarks/bench_book.py)
            _log(f"{self.what} {pid} exited with {code}; cpu {usage.ru_utime + usage.ru_stime:.2f} s; "
                 f"{usage.ru_minflt} minor page faults")
            if conn is not None:
                try:
                    self.selector.unregister(conn)
                except (KeyError, ValueError):
                    pass
                try:
                    _send(conn, {"exit": code})
                except OSError:
                    pass
                conn.close()
            self.last_work = time.monotonic()


def _read_request(conn: socket.socket) -> tuple[dict | None, list[int]]:
    """One JSON line and the descriptors sent with it; None when the client sent nothing."""
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 4)
    if not data:
        return None, list(fds)
    chunks = [data]
    while not chunks[-1].endswith(b"\n"):
        more = conn.recv(1 << 16)
        if not more:
            break
        chunks.append(more)
    return json.loads(b"".join(chunks)), list(fds)


def _send(conn: socket.socket, message: dict) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, ended but not yet reaped, does not)."""
    if pid <= 1:
        return True  # no owner: only the idle timeout ends the server
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when the server (its parent) ends."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def leave_server(request: dict, *, server_pid: int, also_close: tuple[int, ...] = ()) -> None:
    """In a forked child: leave the server's session, signals and descriptors behind.

    The child leads a new session, dies with the server, has a fresh interpreter's signal dispositions,
    and closes the server's descriptors (its socket, wake-up pipe, other children's connections, and
    ``also_close``).
    """
    os.setsid()   # its own process group, which the server kills when the requester goes away
    _die_with_parent()
    if os.getppid() != server_pid:
        os._exit(1)  # the server ended before the child knew
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.set_wakeup_fd(-1)
    for fd in [*request.pop("_server_fds"), *also_close]:
        try:
            os.close(fd)
        except OSError:
            pass


def become_kernel(request: dict, *, server_pid: int, kernel_path: list[str], env_added: dict[str, str]) -> None:
    """In the forked child: turn into the kernel the request describes, then run it (returns when it ends)."""
    conn_fd = request.pop("_conn")
    try:
        leave_server(request, server_pid=server_pid)
        out, err = request.pop("_fds")
        stdin, stdin_w = os.pipe()  # launch_kernel's stdin: a pipe whose other end is closed
        os.close(stdin_w)
        os.dup2(stdin, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        for fd in {stdin, out, err} - {0, 1, 2}:
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ.update(env_added)
        os.chdir(request["cwd"])
        argv = request["argv"]
        import ipykernel_launcher

        sys.argv = [ipykernel_launcher.__file__, *argv[3:]]
        sys.orig_argv = list(argv)
        sys.path[:] = kernel_path
        if "numpy.random" in sys.modules:
            sys.modules["numpy.random"].seed()  # from the OS, as a fresh interpreter seeds it
        os.write(conn_fd, json.dumps({"pid": os.getpid()}).encode() + b"\n")
        os.close(conn_fd)
    except BaseException:  # noqa: BLE001 - the requester sees it on its stderr
        import traceback

        traceback.print_exc()
        os._exit(1)
    from ipykernel import kernelapp

    # Two defaults of IPKernelApp are read from the environment when ipykernel is imported (in the
    # server, without them): given here as a fresh kernel reads them (else it would take itself for a
    # kernel without a parent and print its connection banner).
    kernelapp.IPKernelApp.launch_instance(parent_handle=int(os.environ.get("JPY_PARENT_PID") or 0),
                                          interrupt=int(os.environ.get("JPY_INTERRUPT_EVENT") or 0))


def main(argv: list[str] | None = None) -> dict | None:
    """Start the server; None when it has ended, or (in a forked child) the kernel request to run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True, help="AF_UNIX socket path to listen on")
    parser.add_argument("--key", required=True, help="the environment key of the kernels it serves")
    parser.add_argument("--owner", type=int, default=0, help="exit when this process has ended")
    parser.add_argument("--idle", type=float, default=30.0, help="exit after this many seconds without a kernel")
    args = parser.parse_args(argv)

    own_key = environment_key(sys.executable, os.getcwd(), dict(os.environ))
    if own_key != args.key:
        _log(f"refusing to start: this environment's key is {own_key}, not {args.key}")
        return None
    seconds, added = preload()
    freeze_heap()
    server = Server(args.socket, args.key, args.owner, args.idle)
    server.env_added = added
    _log(f"serving {args.socket} (key {args.key}, owner {args.owner}, idle {args.idle:g} s); "
         f"preloaded {len(sys.modules)} modules in {seconds:.2f} CPU s; they set {sorted(added)}")
    os.write(1, b"ready\n")  # the starter waits for this line, then the log takes the descriptor
    os.dup2(2, 1)
    return server.run()


if __name__ == "__main__":
    _SERVER_PID = os.getpid()
    _KERNEL_PATH = sys.path[1:]  # sys.path of `python -m ipykernel_launcher` once it has removed its cwd
    _REQUEST = main()
    if _REQUEST is not None:
        # The forked child, back at the top level, so that the kernel ends as an interpreter ends
        # (atexit hooks, threads joined, streams flushed) when it is shut down gracefully.
        become_kernel(_REQUEST, server_pid=_SERVER_PID, kernel_path=_KERNEL_PATH,
                      env_added=_REQUEST.pop("_env_added"))
