"""Kernels forked from a kernel server: jupyter_client's side (the provisioner, the kernel handle).

``tools/run_chapter.py`` calls :func:`install`: from then on jupyter_client creates this module's
:class:`ForkingProvisioner` for every kernel (it is made the kernel provisioner factory's default). Its
``launch_kernel`` asks the kernel server (``tools/kernel_forkserver.py``) of the kernel's environment for
a forked kernel, starting that server first when none runs (under a file lock, so two pages of
``make -j2`` start one); whenever that fails (no fork on this platform, the switch off, a server that
refuses or does not start) it launches the kernel as jupyter_client's own ``LocalProvisioner`` does.

Why a provisioner: jupyter_client drives a kernel through its provisioner only (``poll``, ``wait``,
``send_signal``, ``kill``, ``terminate``), and ``LocalProvisioner`` does all of that through a
:class:`subprocess.Popen`-like ``process`` and the kernel's process group. A forked kernel is the
server's child, not ours, so :class:`ForkedKernel` stands in for the ``Popen``: it signals the kernel's
process group itself (the kernel leads its own session, as ``launch_kernel``'s ``start_new_session``
makes it) and learns the exit status from the server, which reaps it. Nothing else in jupyter_client,
nbclient or papermill changes, and the kernelspec stays ipykernel's. (A kernelspec whose command is a
relay client would cost an interpreter start per page and need the relay to forward signals.)

Switches:

- ``IRTBOOK_FORK_KERNEL=0`` (or ``false``, ``no``, ``off``): ordinary kernels;
- coverage's subprocess hook (``COVERAGE_PROCESS_START`` or ``COVERAGE_PROCESS_CONFIG`` set): ordinary
  kernels, so that coverage starts in each of them as in any Python process;
- platforms other than Linux (macOS' system libraries are not safe to use after ``fork`` without
  ``exec``): ordinary kernels;
- ``IRTBOOK_FORK_KERNEL_IDLE``: seconds a server without kernels waits for the next request (default
  :data:`IDLE_SECONDS`).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import kernel_forkserver
from jupyter_client.provisioning import LocalProvisioner

NAME = "irtbook-forked-kernel"
SWITCH = "IRTBOOK_FORK_KERNEL"
IDLE_VARIABLE = "IRTBOOK_FORK_KERNEL_IDLE"
IDLE_SECONDS = 30.0
COVERAGE_HOOKS = kernel_forkserver.COVERAGE_HOOKS
SERVER_SCRIPT = Path(kernel_forkserver.__file__).resolve()
START_TIMEOUT = 120.0  #: seconds a new server may take to import its modules (a loaded machine)

#: Set by :func:`install`: where the servers' sockets, locks and logs go, and who owns the servers.
_settings: dict = {}

#: How the last kernel of this process was started: ``"forked"`` or ``"ordinary (<why>)"``.
last_launch = "ordinary (not installed)"


def enabled(env: dict[str, str] | None = None) -> str | None:
    """Why kernels cannot be forked here (a reason), or None when they can.

    :func:`kernel_forkserver.why_not_forked` with this module's :data:`SWITCH`.
    """
    return kernel_forkserver.why_not_forked(os.environ if env is None else env, SWITCH)


def install(state_dir: Path, *, owner: int) -> str | None:
    """Make jupyter_client fork this process's kernels from a server; None, or why it does not.

    Parameters
    ----------
    state_dir : Path
        Where the servers' sockets (when the path is short enough), locks and logs go
        (``_build/kernel-server``).
    owner : int
        The process whose end ends a server started from here (``make``: the runner's parent).
    """
    reason = enabled()
    if reason:
        return reason
    from importlib.metadata import EntryPoint

    from jupyter_client.provisioning.factory import KernelProvisionerFactory

    _settings.update(state_dir=Path(state_dir).resolve(), owner=owner)
    KernelProvisionerFactory.provisioners[NAME] = EntryPoint(
        NAME, f"{__name__}:ForkingProvisioner", KernelProvisionerFactory.GROUP_NAME)
    KernelProvisionerFactory.instance().default_provisioner_name = NAME
    return None


def socket_path(state_dir: Path, key: str) -> str:
    """The kernel server's socket: in ``state_dir``, or in a private temporary folder when that path is too long."""
    return kernel_forkserver.socket_path(state_dir, key)


def _connect(path: str) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    return sock


class LineReader:
    """JSON lines from a socket, buffered (a line may arrive in pieces, two lines in one piece)."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buffer = bytearray()

    def read(self, timeout: float | None) -> dict | None:
        """The next line; None at the end of the connection; ``TimeoutError`` when none came in time."""
        self.sock.settimeout(timeout)
        while b"\n" not in self.buffer:
            try:
                data = self.sock.recv(4096)
            except BlockingIOError as exc:  # timeout 0: nothing yet
                raise TimeoutError from exc
            if not data:
                return None
            self.buffer += data
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        return json.loads(line)


def request(path: str, message: dict, *, fds: tuple[int, ...] = (),
            timeout: float = 10.0) -> tuple[LineReader, dict]:
    """Send one request to the server at ``path``; the connection's reader and the first answer."""
    sock = _connect(path)
    if sock is None:
        raise ConnectionError(f"no kernel server at {path}")
    sock.settimeout(timeout)
    payload = json.dumps(message).encode() + b"\n"
    if fds:
        socket.send_fds(sock, [payload], list(fds))
    else:
        sock.sendall(payload)
    reader = LineReader(sock)
    answer = reader.read(timeout)
    if answer is None:
        sock.close()
        raise ConnectionError(f"the kernel server at {path} closed the connection")
    return reader, answer


def ensure_server(executable: str, cwd: str, env: dict[str, str], key: str) -> str:
    """The socket of a running server for ``key``, started now when none answers; raises when it cannot be."""
    state_dir: Path = _settings["state_dir"]
    state_dir.mkdir(parents=True, exist_ok=True)
    path = socket_path(state_dir, key)
    sock = _connect(path)
    if sock is not None:
        sock.close()
        return path
    with open(state_dir / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one starter; the others wait here, then connect
        sock = _connect(path)
        if sock is not None:
            sock.close()
            return path
        failed = state_dir / f"{key}.failed"  # holds the owner: a server fails to start once per build
        if failed.exists() and failed.read_text() == str(_settings["owner"]):
            raise RuntimeError(f"a kernel server for this environment failed to start before ({failed})")
        idle = os.environ.get(IDLE_VARIABLE, str(IDLE_SECONDS))
        server_env = {k: v for k, v in env.items() if k not in kernel_forkserver.PER_KERNEL_VARIABLES}
        with open(state_dir / f"{key}.log", "ab") as log:
            server = subprocess.Popen(
                [executable, str(SERVER_SCRIPT), "--socket", path, "--key", key,
                 "--owner", str(_settings["owner"]), "--idle", idle],
                env=server_env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
                start_new_session=True, close_fds=True)
        ready = _wait_ready(server, START_TIMEOUT)
        if not ready:
            server.kill()
            server.wait()
            failed.write_text(str(_settings["owner"]))
            raise RuntimeError(f"the kernel server did not start (log: {state_dir / f'{key}.log'})")
        return path


def _wait_ready(server: subprocess.Popen, timeout: float) -> bool:
    """Whether ``server`` printed its ready line within ``timeout`` seconds."""
    import selectors

    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(server.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if selector.select(timeout=max(0.0, deadline - time.monotonic())):
                line = server.stdout.readline()
                server.stdout.close()
                return line == b"ready\n"
    server.stdout.close()
    return False


class ForkedKernel:
    """A :class:`subprocess.Popen` stand-in for a kernel forked by the server (what jupyter_client uses of it).

    The exit status comes from the server, on the connection the kernel was requested on; signals go to
    the kernel directly (same user). A connection that closes without a status means the server ended,
    and with it the kernel (it dies with its parent).
    """

    stdin = stdout = stderr = None

    def __init__(self, pid: int, reader: LineReader):
        self.pid = pid
        self.args = ["<forked kernel>"]
        self.returncode: int | None = None
        self._reader = reader

    def _read_exit(self, timeout: float | None) -> None:
        if self.returncode is not None:
            return
        try:
            answer = self._reader.read(timeout)
        except TimeoutError:
            return
        except OSError:
            answer = None
        self.returncode = answer["exit"] if answer and "exit" in answer else -signal.SIGKILL
        self._reader.sock.close()

    def poll(self) -> int | None:
        """The exit status when the server has reported it, else None (the kernel runs)."""
        self._read_exit(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """The exit status, waited for up to ``timeout`` seconds (``subprocess.TimeoutExpired`` after)."""
        self._read_exit(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        """Signal the kernel, unless it has ended."""
        if self.poll() is None:  # not to a reused pid once the kernel is reaped
            os.kill(self.pid, signum)

    def kill(self) -> None:
        """SIGKILL the kernel."""
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        """SIGTERM the kernel."""
        self.send_signal(signal.SIGTERM)


def _kernel_executable(cmd: list[str], env: dict[str, str]) -> str:
    executable = cmd[0] if os.path.isabs(cmd[0]) else shutil.which(cmd[0], path=env.get("PATH"))
    if not executable:
        raise RuntimeError(f"{cmd[0]} is not on the kernel's PATH")
    return os.path.abspath(executable)


def prestart(kernel_name: str, *, cwd: str) -> None:
    """Start the server the kernel ``kernel_name`` will ask for, in a thread, while the runner goes on.

    The kernel's environment is this process's (jupyter_client adds only per-kernel variables), so its
    key is known before papermill starts it; the server's imports then overlap the runner's own
    (jupytext, papermill), and :func:`fork_kernel` finds the server ready or waits on the start lock.
    Nothing happens when :func:`install` did not install the provisioner.
    """
    if not _settings or enabled():
        return
    import threading

    def start() -> None:
        try:
            start_server(kernel_name, cwd=cwd)
        except Exception as exc:  # noqa: BLE001 - the launch tries again, and falls back
            _settings["prestart_error"] = str(exc)

    _settings["prestart"] = thread = threading.Thread(target=start, name="kernel-server-start", daemon=True)
    thread.start()


def start_server(kernel_name: str, *, cwd: str) -> str:
    """Start (or find) the server the kernel ``kernel_name`` of this process's environment will ask for.

    Returns its socket once it is ready; raises when it cannot start. :func:`install` must have run.
    ``tools/run_chapter.py --start-kernel-server`` calls it while the calibration stage runs, so that the
    first pages find the server's imports done.
    """
    from jupyter_client.kernelspec import KernelSpecManager

    argv = KernelSpecManager().get_kernel_spec(kernel_name).argv
    env = dict(os.environ)
    executable = _kernel_executable(argv, env)
    return ensure_server(executable, cwd, env, kernel_forkserver.environment_key(executable, cwd, env))


def fork_kernel(cmd: list[str], *, env: dict[str, str], cwd: str) -> ForkedKernel:
    """A kernel running ``cmd`` forked by the server of its environment; raises when there is none to be had."""
    if _settings.get("prestart") is not None:
        _settings.pop("prestart").join()
    executable = _kernel_executable(cmd, env)
    env = dict(env)
    env["JPY_PARENT_PID"] = str(os.getpid())  # as jupyter_client's launch_kernel sets it
    key = kernel_forkserver.environment_key(executable, cwd, env)
    message = {"op": "spawn", "key": key, "argv": [executable, *cmd[1:]], "env": env, "cwd": cwd}
    for attempt in (1, 2):
        try:
            path = ensure_server(executable, cwd, env, key)
        except RuntimeError as exc:  # the early start's own failure says more than its marker
            raise RuntimeError(_settings.pop("prestart_error", None) or str(exc)) from exc
        try:  # the kernel's stdout and stderr: ours
            reader, answer = request(path, message, fds=(1, 2), timeout=60)
            break
        except ConnectionError:
            if attempt == 2:  # a server that ended (idle) just as we came: start one again, once
                raise
    if "pid" not in answer:
        reader.sock.close()
        raise RuntimeError(f"the kernel server refused: {answer.get('error', answer)}")
    return ForkedKernel(int(answer["pid"]), reader)


class ForkingProvisioner(LocalProvisioner):
    """jupyter_client's local provisioner, with kernels forked from the kernel server when it can."""

    async def launch_kernel(self, cmd: list[str], **kwargs):
        """A forked kernel when the server gives one; else ``LocalProvisioner``'s (the reason kept)."""
        global last_launch
        extra = {k for k, v in kwargs.items() if v is not None} - {"env", "cwd", "kernel_id", "extra_arguments"}
        env = kwargs.get("env") or dict(os.environ)
        cwd = str(kwargs.get("cwd") or os.getcwd())
        reason = enabled(env) or (f"launch options {sorted(extra)}" if extra else None)
        if reason is None:
            try:
                kernel = fork_kernel(cmd, env=env, cwd=cwd)
            except Exception as exc:  # noqa: BLE001 - any failure: an ordinary kernel instead
                reason = str(exc)
            else:
                self.process = kernel
                self.pid = self.pgid = kernel.pid
                self.cwd = cwd
                last_launch = "forked"
                return self.connection_info
        last_launch = f"ordinary ({reason})"
        return await super().launch_kernel(cmd, **kwargs)

    async def send_signal(self, signum: int) -> None:
        """The kernel's process group, as ``LocalProvisioner`` signals it; nothing once it is reaped."""
        if isinstance(self.process, ForkedKernel) and self.process.poll() is not None:
            return  # reaped: its pid may be another process's now
        await super().send_signal(signum)

    async def kill(self, restart: bool = False) -> None:
        """SIGKILL to the process group; a forked kernel's status waited for (it comes within milliseconds)."""
        await super().kill(restart=restart)
        if isinstance(self.process, ForkedKernel):
            try:  # SIGKILL is certain: wait for the status, so the caller's first poll sees the end
                self.process.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                pass

    async def wait(self) -> int | None:
        """Wait for the kernel's end (polled every 20 ms for a forked kernel, whose server reports it)."""
        if isinstance(self.process, ForkedKernel):
            import asyncio

            while self.process.poll() is None:
                await asyncio.sleep(0.02)
        return await super().wait()
