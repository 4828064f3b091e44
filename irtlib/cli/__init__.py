"""The ``irtlib`` command line: calibrate, subset and adaptively evaluate a safety benchmark.

Thin by design: each subcommand parses its options, calls the Python API (:mod:`irtlib.io`,
:mod:`irtlib.bank.build`, :mod:`irtlib.bank.session`, :mod:`irtlib.selection.static`,
:mod:`irtlib.protocol.agreement`, :mod:`irtlib.datasets`) and prints. One module per subcommand,
its parser and its handler together (``irtlib.cli.calibrate``, ``add_items``, ``link``, ``subset``,
``evaluate``, ``agreement``, ``report``, ``audit``, ``drift``, ``paper_data``, ``airbench_data``,
``helm_data``); what they share is in
``irtlib.cli._common`` (exit statuses, errors, output helpers) and ``irtlib.cli._options``
(argument types and option groups). The modules moved from the single ``irtlib/cli.py`` keep the
names and the text their handlers and parsers had there (the shared helpers are imported under
their old private names), so that a change made to ``cli.py`` applies to them as it is. Conventions:

- exit status 0 on success, 2 on a usage error (argparse, or :class:`irtlib.errors.UsageError`),
  1 on bad input (:class:`irtlib.errors.IrtlibError`) or a file-system error (:class:`OSError`),
  3 on an internal error (any other exception: a bug in irtlib, traceback with ``--debug``),
  130 when interrupted, 143 on SIGTERM (handled like Ctrl-C);
- errors are one line, ``irtlib: error: <file>: row N: ...``, with no traceback (``--debug``
  shows it); irtlib's warnings are ``irtlib: warning: ...`` lines;
- outputs are written atomically (:func:`irtlib.io.atomic_write`, :func:`irtlib.io.atomic_directory`)
  with the umask's permissions; the destination is checked before any work is done; an
  existing output is replaced only with ``--force``, and only when irtlib wrote it;
- ``--json`` prints one JSON document on stdout; progress and prompts go to stderr; ``--quiet``
  silences progress.

Layer rule (the table :data:`irtlib._layers.MAY_IMPORT`, checked by ``tests/test_layers.py``): imports
:mod:`irtlib.datasets`, :mod:`irtlib.viz` and below.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
import warnings
from collections.abc import Sequence

from irtlib.errors import IrtlibError

from . import (
    add_items,
    agreement,
    airbench_data,
    audit,
    calibrate,
    drift,
    evaluate,
    helm_data,
    link,
    paper_data,
    report,
    subset,
)
from ._common import (
    EXIT_BUG,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    EXIT_USAGE,
    PROG,
    CLIUsageError,
    Out,
    Parser,
    Terminated,
    one_line,
    show_library_warnings,
    terminate_as_interrupt,
)

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["COMMANDS", "CLIUsageError", "build_parser", "main"]

#: The subcommands' modules, in the order ``irtlib --help`` lists them: each adds its parser and handler.
COMMANDS = (calibrate, add_items, link, subset, evaluate, agreement, report, audit, drift, paper_data, airbench_data,
            helm_data)


def __getattr__(name: str):
    """``write_report`` and ``run_agreement``: in :mod:`irtlib.viz.report`, :mod:`irtlib.protocol.agreement`."""
    if name == "write_report":
        from irtlib.viz.report import write_report

        return write_report
    if name == "run_agreement":
        from irtlib.protocol.agreement import run_agreement

        return run_agreement
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def build_parser() -> argparse.ArgumentParser:
    """The ``irtlib`` argument parser with its subcommands (:data:`COMMANDS`)."""
    from irtlib._version import __version__

    parser = Parser(
        prog=PROG,
        description="Calibrate, subset and adaptively evaluate a safety benchmark with 2PL item response "
                    "theory (Fluid Benchmarking). Run `irtlib COMMAND --help` for each command.",
        epilog="Exit status: 0 ok, 1 bad input or failure, 2 usage error, 3 internal error (a bug; see --debug).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``irtlib`` command line; returns the exit status.

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name (default: ``sys.argv[1:]``).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    out = Out(args)
    with warnings.catch_warnings(), terminate_as_interrupt():
        show_library_warnings(out)
        try:
            return args.handler(args, out)
        except CLIUsageError as exc:
            sub = f"{PROG} {args.command}"
            print(f"usage: {sub} --help\n{sub}: error: {one_line(exc)}", file=sys.stderr)
            return EXIT_USAGE
        except Terminated:
            print(f"{PROG}: terminated", file=sys.stderr)
            return EXIT_TERMINATED
        except KeyboardInterrupt:
            print(f"{PROG}: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        except BrokenPipeError:               # e.g. `irtlib ... --json | head`: the reader went away
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_INPUT
        except (IrtlibError, OSError) as exc:     # bad input, a missing file, a full disk: the user can fix it
            if args.debug:
                traceback.print_exc()
            print(f"{PROG}: error: {one_line(exc)}", file=sys.stderr)
            return EXIT_INPUT
        except Exception as exc:  # noqa: BLE001 - anything else is a bug in irtlib
            if args.debug:
                traceback.print_exc()
            print(f"{PROG}: internal error: {type(exc).__name__}: {one_line(exc)}", file=sys.stderr)
            if not args.debug:
                print(f"{PROG}: this is a bug in irtlib, not a problem with the input: please report it with "
                      "the traceback that --debug shows", file=sys.stderr)
            return EXIT_BUG

