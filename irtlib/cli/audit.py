"""``irtlib audit``: which items of a bank are bad, and why (an HTML report and a JSON summary for CI)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._common import CLIUsageError
from ._common import Out as _Out
from ._options import general_options as _common
from ._options import input_kwargs as _input_kwargs
from ._options import input_options as _input_options
from ._options import int_at_least as _int_at_least
from ._options import positive_float as _positive_float
from ._options import test_options as _test_options

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["add_parser"]

def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``irtlib audit`` (its options and its handler) to the subcommands ``sub``."""
    p = sub.add_parser("audit", help="audit a bank's items: an HTML report and a JSON summary for CI",
                       description="Check every item of BANK against RESPONSES (the responses it was calibrated "
                                   "on): near-zero discrimination, answers against the ability trend (possible "
                                   "label errors), items every model passes or fails, misfit (S-X2), locally "
                                   "dependent pairs (Q3), dimensionality (parallel analysis), and the test "
                                   "information over the models' abilities. Writes DIR/index.html and "
                                   "DIR/audit.json. Exit status 0, or with --check 1 when anything is flagged.")
    p.add_argument("bank", metavar="BANK", help="item bank written by `irtlib calibrate`")
    p.add_argument("responses", metavar="RESPONSES", help="the responses the bank was calibrated on")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="report directory to write")
    _test_options(p)
    p.add_argument("--a-min", type=_positive_float, default=0.3,
                   help="flag items whose a times the SD of the models' abilities is below this (default: 0.3)")
    p.add_argument("--replications", type=_int_at_least(1), default=10, metavar="N",
                   help="matrices simulated from the fitted model for the Q3 cut and parallel analysis "
                        "(default: 10)")
    p.add_argument("--check", action="store_true",
                   help="exit with status 1 when any item (or a second dimension) is flagged, for CI")
    _input_options(p)
    _common(p, force=True, seed=True)
    p.set_defaults(handler=_cmd_audit)


def _cmd_audit(args, out: _Out) -> int:
    from irtlib.bank.audit import audit_bank
    from irtlib.bank.format import read_bank
    from irtlib.io import load_responses
    from irtlib.io.atomic import check_writable
    from irtlib.viz.audit_report import write_audit

    if args.output.strip() == "":
        raise CLIUsageError("-o: the output path is empty")
    out_dir = check_writable(Path(args.output), force=args.force, directory=True)
    bank = read_bank(args.bank)
    out.progress(f"reading {args.responses}")
    data = load_responses(args.responses, **_input_kwargs(args))
    out.progress(f"found {data.found}; auditing {len(bank)} items")
    result = audit_bank(bank, data.matrix, alpha=args.alpha, correction=args.correction, a_min=args.a_min,
                        n_replications=args.replications, seed=args.seed, bank_name=args.bank,
                        responses_name=str(args.responses))
    document = write_audit(result, out_dir, force=args.force, title=f"irtlib audit: {Path(args.bank).name}",
                           bank=str(args.bank), source=data.source, sha=data.sha256)
    counts = result["summary"]["counts"]
    text = (f"wrote {out_dir / 'index.html'}: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items())
            + f"; {result['summary']['n_flagged_items']} item(s) flagged")
    out.result({"output": str(out_dir), **document}, text)
    if args.check and not result["summary"]["ok"]:
        out.warn(f"audit flagged {result['summary']['n_flagged_items']} item(s) "
                 f"(dimensions above parallel analysis: {counts['dimensionality']}); see {out_dir / 'index.html'}")
        return 1
    return 0
