"""``irtlib paper-data``: download the paper's authors' released files, or list where they are."""

from __future__ import annotations

import argparse

from ._common import Out as _Out
from ._options import general_options as _common

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``irtlib paper-data`` (its options and its handler) to the subcommands ``sub``."""
    _add_paper_data(sub)


def _add_paper_data(sub) -> None:
    """``paper-data``: the authors' released files (:mod:`irtlib.datasets.authors`; imported only when run)."""
    p = sub.add_parser("paper-data", help="download the paper's own response matrices, or list where they are",
                       description="The paper's authors released four of their six response matrices (Anthropic "
                                   "Red Team, HarmBench, SimpleSafetyTests, WMDP-Bio) and their SimpleSafetyTests "
                                   "fits. 'download' fetches them from the pinned commit of their repository, "
                                   "verifies the SHA-256 and writes them atomically into the per-user cache "
                                   "(~/.cache/irtlib/paper, or $XDG_CACHE_HOME/irtlib/paper) or --dest; 'list' "
                                   "says where each file is found ($IRTLIB_PAPER_DATA, ../shared/realdata/paper "
                                   "beside the checkout, the cache).")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    d = actions.add_parser("download", help="fetch the files (pinned commit, verified SHA-256)",
                           description=p.description)
    d.add_argument("names", nargs="*", metavar="NAME",
                   help="files to download (default: the four matrices and the fits; airbench2024 and "
                        "safetybench need --with-unverified)")
    d.add_argument("--dest", metavar="DIR", help="target directory (default: the per-user cache)")
    d.add_argument("--with-unverified", action="store_true",
                   help="also fetch airbench2024 and safetybench, whose checksums are not known here: the "
                        "hash seen is recorded beside the file, marked 'observed, not verified'")
    d.add_argument("--base-url", metavar="URL",
                   help="a mirror replacing https://raw.githubusercontent.com/<repository>/<commit>")
    d.add_argument("--missing", action="store_true",
                   help="skip files already found ($IRTLIB_PAPER_DATA, the shared copy, the cache): fetch only "
                        "the missing ones")
    listing = actions.add_parser("list", help="where each file is found, and whether its checksum is pinned")
    for q in (d, listing):
        _common(q, json_flag=False)
        q.set_defaults(handler=_cmd_paper_data)


def _cmd_paper_data(args, out: _Out) -> int:
    from irtlib.datasets import authors

    if args.action == "list":
        print("\n".join(authors.status_lines()))
        return 0
    names = args.names or (list(authors.DEFAULT_DOWNLOAD) + list(authors.UNVERIFIED) if args.with_unverified
                           else None)
    authors.download(names, dest=args.dest, with_unverified=args.with_unverified, base_url=args.base_url,
                     progress=print, missing_only=args.missing, announce=out.progress)
    return 0
