"""``irtlib airbench-data``: the real AIR-Bench 2024 judgments of 22 models: download, convert or verify.

What ``python -m irtlib.datasets.real`` did, with the command line's conventions (one-line errors,
exit statuses): ``download DEST`` fetches the 66 source CSVs of the pinned commit and converts them
to the three tidy files, ``convert SOURCE_DIR DEST`` converts a local checkout of the repository,
``verify [DATA_DIR]`` checks the tidy files' checksums (:mod:`irtlib.datasets.real`).
"""

from __future__ import annotations

import argparse

from ._common import Out
from ._options import general_options

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``irtlib airbench-data`` (its options and its handler) to the subcommands ``sub``."""
    p = sub.add_parser("airbench-data", help="download, convert or verify the real AIR-Bench 2024 judgments",
                       description="The per-item judge scores of the 22 models of the AIR-Bench 2024 paper, "
                                   "from the public repository at a pinned commit, converted to three tidy files "
                                   "(responses_graded.csv, items.csv, models.csv) checked against pinned SHA-256 "
                                   "checksums. Point IRTLIB_REAL_DATA at the directory to use them; keep it outside "
                                   "any repository (never commit the files).")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    d = actions.add_parser("download", help="download the 66 source CSVs and convert them",
                           description=p.description)
    d.add_argument("dest", metavar="DEST", help="directory to write the tidy files to")
    d.add_argument("--commit", metavar="SHA",
                   help="repository commit (default: the pinned one, irtlib.datasets.real.PINNED_COMMIT)")
    d.add_argument("-f", "--force", action="store_true", help="replace existing tidy files whose content differs")
    c = actions.add_parser("convert", help="convert a local checkout of the repository", description=p.description)
    c.add_argument("source_dir", metavar="SOURCE_DIR", help="the repository's root (with clean_data/)")
    c.add_argument("dest", metavar="DEST", help="directory to write the tidy files to")
    c.add_argument("-f", "--force", action="store_true", help="replace existing tidy files whose content differs")
    v = actions.add_parser("verify", help="check the tidy files' checksums", description=p.description)
    v.add_argument("data_dir", nargs="?", metavar="DATA_DIR", help="the tidy files' directory (default: "
                                                                   "$IRTLIB_REAL_DATA)")
    for q in (d, c, v):
        general_options(q, json_flag=False)
        q.set_defaults(handler=_run)


def _run(args, out: Out) -> int:
    from irtlib.datasets import real

    if args.action == "download":
        real.download_airbench(args.dest, commit=args.commit or real.PINNED_COMMIT, overwrite=args.force,
                               progress=not out.quiet)
    elif args.action == "convert":
        real.convert_airbench(args.source_dir, args.dest, overwrite=args.force)
    else:
        for fname, digest in real.verify_airbench(args.data_dir).items():
            print(f"OK {digest}  {fname}")
        return 0
    print(f"wrote {', '.join(real.FILES)} and {real.CHECKSUM_FILE} to {args.dest}")
    return 0
