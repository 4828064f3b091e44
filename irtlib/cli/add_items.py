"""``irtlib add-items``: calibrate new items onto an existing bank, its items held fixed."""

from __future__ import annotations

import argparse

import numpy as np

from ._common import Out as _Out
from ._common import not_an_input as _not_an_input
from ._common import not_another_output as _not_another_output
from ._common import output_path as _output_path
from ._options import general_options as _common
from ._options import input_kwargs as _input_kwargs
from ._options import input_options as _input_options
from ._options import int_at_least as _int_at_least

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``irtlib add-items`` (its options and its handler) to the subcommands ``sub``."""
    p = sub.add_parser("add-items", help="calibrate new items onto an existing bank (fixed-parameter calibration)",
                       description="Calibrate the items of RESPONSES that BANK lacks on BANK's scale: the bank's "
                                   "items are held fixed and the new items and the abilities of the models that "
                                   "answered both are fitted (joint MAP, the paper's priors). The bank's own items "
                                   "and every score already reported on it are unchanged; the new items get "
                                   "standard errors, and those with p(1-p) at most the bank's variance threshold "
                                   "join its filtered items. Writes a new bank; BANK is never modified.")
    p.add_argument("bank", metavar="BANK", help="item bank written by `irtlib calibrate`")
    p.add_argument("responses", metavar="RESPONSES",
                   help="responses of models to some of the bank's items and to the new items")
    p.add_argument("-o", "--output", required=True, metavar="NEW_BANK", help="the grown item bank to write (.csv)")
    p.add_argument("--min-common", type=_int_at_least(1), default=5, metavar="N",
                   help="fewest bank items the responses must hold (they carry the scale; default 5)")
    _input_options(p)
    _common(p, force=True)
    p.set_defaults(handler=_cmd_add_items)


def _cmd_add_items(args, out: _Out) -> int:
    from irtlib.bank.format import BANK_MAGIC, read_bank
    from irtlib.bank.grow import add_items
    from irtlib.io import load_responses
    from irtlib.io.atomic import check_writable

    _not_an_input(args.output, ("BANK", args.bank), ("RESPONSES", args.responses))
    _not_another_output(args.output, "an item bank", ("a subset file", "# irtlib-subset "))
    check_writable(_output_path(args.output), force=args.force, magic=BANK_MAGIC)
    bank = read_bank(args.bank)
    out.progress(f"reading {args.responses}")
    data = load_responses(args.responses, **_input_kwargs(args))
    out.progress(f"found {data.found}")
    grown = add_items(bank, data.matrix, min_common=args.min_common, source=str(args.responses))
    grown.write(args.output, force=args.force)
    added = grown.meta["added_items"][-1]
    new = grown.items.iloc[len(bank):]
    doc = {"command": "add-items", "bank": str(args.bank), "output": str(args.output),
           "bank_sha256": grown.checksum, "added": added,
           "new_items": {"a_median": float(new["a"].median()), "se_a_median": float(new["se_a"].median()),
                         "b_median": float(new["b"].median()), "se_b_median": float(new["se_b"].median())}}
    text = "\n".join([
        f"wrote {args.output}: {len(bank)} bank items (unchanged) + {added['n_new_items']} new item"
        f"{'s' * (added['n_new_items'] != 1)} calibrated on {added['n_models']} models that answered both "
        f"({added['n_fixed_items']} bank items held fixed)",
        f"  new items: median a {np.median(new['a']):.3f} (SE {np.median(new['se_a']):.3f}), median b "
        f"{np.median(new['b']):.3f} (SE {np.median(new['se_b']):.3f})"
        + (f"; {added['n_new_filtered']} more left out by the variance filter" if added["n_new_filtered"] else ""),
        f"  bank checksum {grown.checksum}",
    ])
    out.result(doc, text)
    return 0
