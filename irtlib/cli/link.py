"""``irtlib link``: put a bank calibrated apart onto a base bank's scale through their common items."""

from __future__ import annotations

import argparse

from ._common import Out as _Out
from ._common import not_an_input as _not_an_input
from ._common import not_another_output as _not_another_output
from ._common import output_path as _output_path
from ._options import general_options as _common
from ._options import int_at_least as _int_at_least
from ._options import positive_int as _positive_int

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``irtlib link`` (its options and its handler) to the subcommands ``sub``."""
    from irtlib.calibration.linking import LINK_METHODS

    p = sub.add_parser("link", help="link a bank calibrated apart onto a base bank's scale",
                       description="Estimate the linear map from NEW's scale to BASE's through their common items "
                                   "(mean/sigma, mean/mean and Stocking-Lord, each with its bootstrap error over "
                                   "the common items), and write NEW's items on BASE's scale "
                                   "(theta_base = A theta + B, b_base = A b + B, a_base = a / A). Refuses banks "
                                   "from different engines or scales and too few common items. Neither input is "
                                   "modified.")
    p.add_argument("base", metavar="BASE", help="the bank whose scale is kept")
    p.add_argument("new", metavar="NEW", help="the bank to put on BASE's scale")
    p.add_argument("-o", "--output", required=True, metavar="LINKED", help="NEW on BASE's scale, a bank (.csv)")
    p.add_argument("--method", choices=LINK_METHODS, default="stocking-lord",
                   help="the constants that transform NEW (default stocking-lord; all three are reported)")
    p.add_argument("--min-common", type=_int_at_least(2), default=5, metavar="N",
                   help="refuse a link through fewer common items (default 5)")
    p.add_argument("--n-boot", type=_positive_int, default=100, metavar="N",
                   help="bootstrap resamples of the common items for the constants' errors (default 100)")
    _common(p, force=True, seed=True)
    p.set_defaults(handler=_cmd_link)


def _cmd_link(args, out: _Out) -> int:
    from irtlib.bank.format import BANK_MAGIC, read_bank
    from irtlib.bank.grow import link_banks
    from irtlib.io.atomic import check_writable

    _not_an_input(args.output, ("BASE", args.base), ("NEW", args.new))
    _not_another_output(args.output, "an item bank", ("a subset file", "# irtlib-subset "))
    check_writable(_output_path(args.output), force=args.force, magic=BANK_MAGIC)
    base, new = read_bank(args.base), read_bank(args.new)
    result = link_banks(base, new, method=args.method, n_boot=args.n_boot, seed=args.seed,
                        min_common=args.min_common)
    result.linked.write(args.output, force=args.force)
    c = result.constants
    doc = {"command": "link", "base": str(args.base), "new": str(args.new), "output": str(args.output),
           "method": args.method, "n_common": len(result.common), "bank_sha256": result.linked.checksum,
           "constants": c.reset_index().to_dict(orient="records")}
    lines = [f"wrote {args.output}: {len(new)} items of {args.new} on the scale of {args.base} "
             f"({args.method}, through {len(result.common)} common items)",
             f"  {'method':<14} {'A':>8} {'(SE)':>8} {'B':>8} {'(SE)':>8}"]
    lines += [f"  {m:<14} {r.A:8.4f} {r.se_A:8.4f} {r.B:8.4f} {r.se_B:8.4f}" for m, r in c.iterrows()]
    lines.append(f"  bank checksum {result.linked.checksum}")
    out.result(doc, "\n".join(lines))
    return 0
