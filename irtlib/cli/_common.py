"""What every ``irtlib`` subcommand shares: the exit statuses, the errors, and the output helpers.

The conventions of :mod:`irtlib.cli` live here: :func:`irtlib.cli.main` turns what a command raises
into an exit status and one line on stderr (:data:`EXIT_INPUT` for bad input, :data:`EXIT_USAGE` for a
usage error, :data:`EXIT_BUG` for a bug in irtlib, ...); :class:`Out` prints progress, warnings and the
result (text or ``--json``); :func:`one_line` makes any message one line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import warnings
from pathlib import Path

from irtlib.errors import InputError, UsageError

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True

PROG = "irtlib"


#: Exit statuses: success; bad input or a failure the user can fix (an :class:`irtlib.errors.IrtlibError`,
#: an :class:`OSError`); a usage error (argparse's, or :class:`irtlib.errors.UsageError`); a bug in irtlib;
#: interrupted (Ctrl-C); terminated (SIGTERM, handled like Ctrl-C).
EXIT_OK, EXIT_INPUT, EXIT_USAGE, EXIT_BUG = 0, 1, 2, 3
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 128 + signal.SIGTERM

#: A usage problem found after parsing (reported like argparse's, exit status 2).
CLIUsageError = UsageError


class Quit(Exception):
    """The user ended an interactive evaluation."""



# ---------------------------------------------------------------------------- output helpers
class Out:
    def __init__(self, args):
        self.quiet = getattr(args, "quiet", False)
        self.json = getattr(args, "json", False)

    def progress(self, message: str) -> None:
        if not self.quiet:
            print(f"{PROG}: {message}", file=sys.stderr, flush=True)

    def warn(self, message: str) -> None:
        """A warning on stderr, shown even with --quiet."""
        print(f"{PROG}: warning: {one_line(message)}", file=sys.stderr, flush=True)

    def result(self, document: dict, text: str) -> None:
        if self.json:
            from irtlib.viz.report import jsonable

            print(json.dumps(jsonable(document), indent=2, allow_nan=False))
        else:
            print(text)


def one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}"
    else:
        text = str(exc) or type(exc).__name__
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + f"... ({len(text)} characters)"


#: Longest error message printed whole (identifiers are cut earlier; this is a last resort).
MAX_MESSAGE = 2000


def output_path(text: str, option: str = "-o") -> Path:
    """A file output path, or a usage error for an empty one or one naming a directory ('dir/')."""
    if text is None:
        return None
    if text.strip() == "":
        raise CLIUsageError(f"{option}: the output path is empty")
    if text.endswith(("/", "\\")) or text in (".", ".."):
        raise CLIUsageError(f"{option} {text}: names a directory; give a file name")
    return Path(text)



def short(text, limit: int = 60) -> str:
    text = repr(text)
    return text if len(text) <= limit + 20 else f"{text[:limit]}... ({len(text)} characters)"


def not_another_output(output: str, kind: str, *others: tuple[str, str]) -> None:
    """Refuse an output path holding another kind of irtlib output (``--force`` would not replace it anyway)."""
    path = Path(output)
    if not path.is_file() or path.is_symlink():
        return
    with open(path, "rb") as fh:
        head = fh.read(64)
    for what, magic in others:
        if head.startswith(magic.encode("utf-8")):
            raise InputError(f"{path}: is {what} irtlib wrote, not {kind}; --force replaces only {kind}: choose "
                             "another -o")



def not_an_input(output: str, *inputs: tuple[str, str]) -> None:
    """Refuse an output path that is one of the command's inputs (``(option, path)`` pairs), even with --force."""
    out = Path(output)
    for option, given in inputs:
        src = Path(given)
        same = out.exists() and src.exists() and out.resolve() == src.resolve()
        if same or out.absolute() == src.absolute():
            raise CLIUsageError(f"-o {output}: is the {option} given as input; irtlib never overwrites an input: "
                                "choose another -o")


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (exit status 2), not argparse's usage block."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")



class Terminated(KeyboardInterrupt):
    """SIGTERM (``timeout``, a cancelled CI job): unwinds like Ctrl-C, so temporary outputs are removed."""


@contextlib.contextmanager
def terminate_as_interrupt():
    """Turn SIGTERM into :class:`Terminated` while a command runs (main thread only).

    SIGTERM and SIGINT are also unblocked for the command's duration: a process started from
    a thread that had them blocked (a test runner's worker, a resource tracker's spawn) inherits
    the mask, and a blocked SIGTERM would otherwise wait, unseen, until the command had finished
    and written its output. The previous mask is restored afterwards.
    """
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGTERM, previous)


def show_library_warnings(out: Out) -> None:
    """Print irtlib's own warnings (left-out models, skipped interval check) as one ``irtlib: warning:`` line.

    Other libraries' warnings (numpy's RuntimeWarning on a tiny report, scipy's constant-input
    warning) go to stderr as usual, except with ``--quiet``, which silences them.
    """
    from irtlib.bank.build import IntervalCheckWarning
    from irtlib.io import InputWarning
    from irtlib.io.formats import FormatWarning

    ours = (InputWarning, IntervalCheckWarning, FormatWarning)
    original = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, ours):
            out.warn(str(message))
        elif not out.quiet:          # --quiet: numpy's and scipy's warnings on degenerate inputs are not shown
            original(message, category, filename, lineno, file, line)

    for category in ours:
        warnings.simplefilter("always", category)
    warnings.showwarning = show

