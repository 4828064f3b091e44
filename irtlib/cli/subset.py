"""``irtlib subset``: choose a fixed item subset from a bank with one of the paper's static methods."""

from __future__ import annotations

import argparse

from ._common import CLIUsageError
from ._common import Out as _Out
from ._common import not_another_output as _not_another_output
from ._common import output_path as _output_path
from ._options import general_options as _common
from ._options import input_kwargs as _input_kwargs
from ._options import input_options as _input_options
from ._options import positive_int as _positive_int

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``irtlib subset`` (its options and its handler) to the subcommands ``sub``."""
    _add_subset(sub)


def _add_subset(sub) -> None:
    from irtlib.selection.methods import subset_ids

    p = sub.add_parser("subset", help="choose a fixed item subset from a bank",
                       description="Choose k items from an item bank with one of the paper's static subset "
                                   "methods, and write them (with weights where the method has them). "
                                   "anchor-points needs the training responses (--responses); the Fisher "
                                   "methods use the calibration abilities stored in the bank.")
    p.add_argument("bank", metavar="BANK", help="item bank written by `irtlib calibrate`")
    p.add_argument("--method", required=True, choices=subset_ids(), help="selection method")
    p.add_argument("-k", type=_positive_int, required=True, help="number of items")
    p.add_argument("-o", "--output", required=True, metavar="ITEMS", help="CSV of chosen items to write")
    p.add_argument("--responses", metavar="FILE", help="the calibration responses (needed by anchor-points)")
    _input_options(p, title="options for --responses")
    _common(p, force=True, seed=True)
    p.set_defaults(handler=_cmd_subset)

def _cmd_subset(args, out: _Out) -> int:
    from irtlib.bank.build import read_bank, select_subset, write_subset
    from irtlib.bank.subsets import SUBSET_MAGIC
    from irtlib.io import load_responses
    from irtlib.io.atomic import check_writable
    from irtlib.selection.methods import REGISTRY

    _not_another_output(args.output, "a subset file", ("an item bank", "# irtlib-bank "))
    check_writable(_output_path(args.output), force=args.force, magic=SUBSET_MAGIC)
    bank = read_bank(args.bank)
    matrix = None
    if args.responses is not None:
        out.progress(f"reading {args.responses}")
        data = load_responses(args.responses, **_input_kwargs(args))
        out.progress(f"found {data.found}")
        matrix = data.matrix
    elif REGISTRY[args.method].needs_responses:
        raise CLIUsageError(f"--method {args.method} needs the training responses: pass --responses FILE")
    if args.k > len(bank):
        raise CLIUsageError(f"-k {args.k} is larger than the bank ({len(bank)} items)")
    chosen = select_subset(bank, method=args.method, k=args.k, responses=matrix, seed=args.seed)
    write_subset(args.output, chosen, bank=bank, method=args.method, k=args.k, seed=args.seed, force=args.force)
    doc = {"command": "subset", "bank": str(args.bank), "method": args.method, "k": args.k,
           "output": str(args.output), "items": chosen.reset_index().to_dict(orient="records")}
    weights = "with weights" if "weight" in chosen.columns and chosen["weight"].nunique() > 1 else "unweighted"
    out.result(doc, f"wrote {args.output}: {len(chosen)} items chosen by {args.method} ({weights}) "
                    f"from {len(bank)} in {args.bank}")
    return 0
