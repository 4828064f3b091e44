"""``irtlib report``: a static HTML report of a benchmark's fit, ceiling, discrimination and agreement."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._common import CLIUsageError
from ._common import Out as _Out
from ._options import check_engine as _check_engine
from ._options import input_kwargs as _input_kwargs
from ._options import ks_usage as _ks_usage
from ._options import protocol_parser as _protocol_parser

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``irtlib report`` (its options and its handler) to the subcommands ``sub``."""
    _add_report(sub)


def _add_report(sub) -> None:
    _protocol_parser(sub, "report", _cmd_report, "write a small static HTML report",
                     "Write DIR/index.html with the benchmark's fit (theta against safety score, item fit), the "
                     "spread of discrimination (CV of a), the ceiling, and the agreement curves.")

def _cmd_report(args, out: _Out) -> int:
    from irtlib.io import load_responses
    from irtlib.io.atomic import check_writable

    if args.output.strip() == "":
        raise CLIUsageError("-o: the output path is empty")
    out_dir = check_writable(Path(args.output), force=args.force, directory=True)
    _check_engine(args)
    out.progress(f"reading {args.responses}")
    data = load_responses(args.responses, **_input_kwargs(args))
    out.progress(f"found {data.found}")
    if args.n_splits > 0 and args.n_test >= data.matrix.shape[0] - 1:
        raise CLIUsageError(f"{data.source}: {data.matrix.shape[0]} models are too few for --n-test {args.n_test} "
                            "(the agreement protocol needs --n-test + 2): lower --n-test, or pass --n-splits 0 to "
                            "write the report without the agreement section")
    from irtlib.viz.report import write_report

    with _ks_usage(args):
        summary = write_report(data, out_dir, engine=args.engine, n_splits=args.n_splits, ks=args.ks,
                               n_test=args.n_test, seed=args.seed, n_jobs=args.n_jobs, force=args.force,
                               methods=args.methods, progress=out.progress, show_progress=not out.quiet,
                               rule=f"{args.binarize} ({data.layout} layout)",
                               variance_threshold=args.variance_threshold)
    out.result({"command": "report", "output": str(out_dir), **summary}, f"wrote {out_dir / 'index.html'}")
    return 0
