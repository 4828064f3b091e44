"""``irtlib helm-data``: HELM Safety's per-instance results: download them, or summarise a local copy.

What ``python -m irtlib.io.helm`` did, with the command line's conventions (one-line errors, exit
statuses): ``download DEST`` fetches ``run_spec.json`` and ``per_instance_stats.json`` of the safety
runs of a HELM release, ``summary ROOT`` reads the runs and prints each benchmark's response
matrix (:mod:`irtlib.io.helm`). The runs are what ``irtlib calibrate`` reads as a HELM directory.
"""

from __future__ import annotations

import argparse

from ._common import Out
from ._options import general_options

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``irtlib helm-data`` (its options and its handler) to the subcommands ``sub``."""
    p = sub.add_parser("helm-data", help="download HELM Safety's per-instance results, or summarise them",
                       description="HELM publishes each run's per-instance judgments; 'download' fetches those of "
                                   "the safety (or AIR-Bench) runs of a release into a local benchmark_output "
                                   "directory, 'summary' reads the runs and prints each benchmark's matrix.")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    d = actions.add_parser("download", help="download run_spec.json and per_instance_stats.json of the safety runs",
                           description=p.description)
    d.add_argument("dest", metavar="DEST", help="local benchmark_output directory")
    d.add_argument("--project", default="safety", choices=("safety", "air-bench"),
                   help="HELM project (default: safety)")
    d.add_argument("--release", default="v1.0.0", help="release version (default: v1.0.0)")
    d.add_argument("--scenario", action="append", metavar="NAME",
                   help="HELM scenario name to fetch, e.g. harm_bench (repeatable; default: the safety scenarios)")
    d.add_argument("-f", "--force", action="store_true", help="replace existing files whose content differs")
    s = actions.add_parser("summary", help="read the runs and print each benchmark's matrix shape",
                           description=p.description)
    s.add_argument("root", metavar="ROOT", help="a suite directory or a whole benchmark_output")
    for q in (d, s):
        general_options(q, json_flag=False)
        q.set_defaults(handler=_run)


def _run(args, out: Out) -> int:
    from irtlib.io import helm

    if args.action == "download":
        runs = helm.download_suite(args.dest, project=args.project, release=args.release, scenarios=args.scenario,
                                   overwrite=args.force, progress=not out.quiet)
        print(f"wrote {len(runs)} runs under {args.dest}/runs")
    else:
        for key, df in helm.read_runs(args.root).items():
            print(key, helm.to_matrix(df, source=key))
    return 0
