"""``irtlib`` command lines run in fresh processes forked from one interpreter that has imported irtlib.

A chapter that shows the command line (book/07_own_benchmark) runs each command as a reader would
at a shell, and each ``python -m irtlib ...`` paid the start of an interpreter and the import of
irtlib, numpy, pandas and scipy again: about 1.2 CPU s of the 1.3 to 6 a command takes
(benchmarks/RESULTS.md). Here one server process is started once (:class:`CommandServer`), does
what ``python -m irtlib`` does before it reads its arguments (``import irtlib.cli``) and nothing
else, and forks a child for every command. The child sets its working directory, its arguments and
its standard streams (stdin from ``/dev/null``, stdout and stderr into one file, buffered as an
interpreter buffers them when they are not a terminal) and calls the command line's entry point
:func:`irtlib.cli.main`, then exits with its status as ``python -m irtlib`` would (``sys.exit``, the
atexit functions). So the command really runs, in its own process, from the same state a new
interpreter reaches after its imports; what it prints is what it prints at a shell
(``tests/book/test_command_server.py`` compares both, byte for byte, for every command of chapter 7).

Run as ``python -m irtbook.command_server``: it reads one JSON request a line on stdin
(``{"argv": [...], "cwd": ..., "output": ...}``) and answers each with the command's exit status on
a line of stdout; it ends at the end of its input.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["CommandServer", "serve"]


def _run_child(argv: list[str], cwd: str, output: str) -> None:  # pragma: no cover - runs in a forked child
    """In the forked child: run ``irtlib argv`` as ``python -m irtlib`` would; never returns."""
    import atexit
    import io
    import traceback

    status = 1
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        os.chdir(cwd)
        encoding = sys.stdout.encoding
        # as CPython opens them when they are not a terminal: stdout block-buffered, stderr line-buffered
        sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding=encoding)
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding=encoding)
        sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)), encoding=encoding,
                                      errors="backslashreplace", line_buffering=True)
        from irtlib import cli
        from irtlib.cli import main

        sys.argv = [str(Path(cli.__file__).parents[1] / "__main__.py"), *argv]   # as `python -m irtlib` sets it

        try:
            sys.exit(main(argv))
        except SystemExit as exc:
            code = exc.code
            if code is None:
                status = 0
            elif isinstance(code, int):
                status = code
            else:
                print(code, file=sys.stderr)
                status = 1
        except BaseException:  # noqa: BLE001 - an uncaught exception ends the interpreter so
            traceback.print_exc()
            status = 1
        atexit._run_exitfuncs()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status)


def serve() -> None:
    """The server's loop: for each request line, fork, run the command in the child, answer its status."""
    import irtlib.cli  # noqa: F401 - what `python -m irtlib` imports before it reads its arguments

    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            _run_child(request["argv"], request["cwd"], request["output"])
        _, wait_status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(wait_status), flush=True)


class CommandServer:
    """A server process for ``irtlib`` command lines (see the module's description).

    Parameters
    ----------
    env : mapping, optional
        The environment of the server and so of every command (default: this process's).
    python : str, optional
        The interpreter (default: this one, so the same installation as the notebook's).
    """

    def __init__(self, *, env: dict[str, str] | None = None, python: str | None = None) -> None:
        self._process = subprocess.Popen([python or sys.executable, "-m", "irtbook.command_server"],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                         env=dict(os.environ if env is None else env))

    def run(self, argv: list[str], *, cwd: str | os.PathLike) -> subprocess.CompletedProcess:
        """Run ``irtlib argv`` in ``cwd``; ``stdout`` of the result holds stdout and stderr interleaved."""
        import io
        import tempfile

        if self._process.poll() is not None:
            raise RuntimeError(f"the irtlib command server has exited (status {self._process.returncode})")
        fd, output = tempfile.mkstemp(prefix="irtlib-command-", suffix=".out")
        os.close(fd)
        try:
            request = {"argv": [str(a) for a in argv], "cwd": str(Path(cwd).resolve()), "output": output}
            self._process.stdin.write(json.dumps(request) + "\n")
            self._process.stdin.flush()
            answer = self._process.stdout.readline()
            if not answer:
                raise RuntimeError("the irtlib command server ended without answering")
            # decoded as subprocess.run(..., text=True) decodes a pipe: the locale's encoding, universal newlines
            text = io.TextIOWrapper(io.BytesIO(Path(output).read_bytes())).read()
        finally:
            os.unlink(output)
        return subprocess.CompletedProcess(["irtlib", *argv], int(answer), stdout=text)

    def close(self) -> None:
        """End the server (it ends by itself when this process does)."""
        if self._process.poll() is None:
            self._process.stdin.close()
            self._process.wait()
        self._process.stdout.close()

    def __enter__(self) -> CommandServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


if __name__ == "__main__":
    serve()
