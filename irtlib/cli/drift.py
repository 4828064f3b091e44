"""``irtlib drift``: whether items moved between two calibrations (two groups of models, windows or judges)."""

from __future__ import annotations

import argparse

from ._common import CLIUsageError
from ._common import Out as _Out
from ._common import output_path as _output_path
from ._options import general_options as _common
from ._options import input_kwargs as _input_kwargs
from ._options import input_options as _input_options
from ._options import int_at_least as _int_at_least
from ._options import test_options as _test_options

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["add_parser"]

def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``irtlib drift`` (its options and its handler) to the subcommands ``sub``."""
    p = sub.add_parser("drift", help="item drift and DIF between two groups of models or two response files",
                       description="Calibrate the items twice (MAP engine), once per group, link the second "
                                   "calibration to the first by mean/sigma on the difficulties (purified), and "
                                   "test each item with Lord's chi-square; and the Mantel-Haenszel DIF test on "
                                   "score-matched strata. Either one RESPONSES file and --groups, or two files "
                                   "(e.g. two time windows or two judges; the groups are the files).")
    p.add_argument("responses", metavar="RESPONSES", nargs="+", help="one response file with --groups, or two")
    p.add_argument("--groups", metavar="CSV", help="CSV with columns model,group (exactly two groups)")
    p.add_argument("--reference", metavar="GROUP", help="the reference group (default: first in sorted order)")
    p.add_argument("-o", "--output", metavar="CSV", help="write the per-item table as CSV")
    _test_options(p)
    p.add_argument("--strata", type=_int_at_least(1), default=5, help="score strata of Mantel-Haenszel (default: 5)")
    _input_options(p)
    _common(p, force=True)
    p.set_defaults(handler=_cmd_drift)


def _read_groups(path: str):
    import pandas as pd

    from irtlib.errors import InputError

    frame = pd.read_csv(path, dtype=str)
    for column in ("model", "group"):
        if column not in frame.columns:
            raise InputError(f"{path}: no column {column!r} (columns: {list(frame.columns)[:5]})")
    dup = frame["model"][frame["model"].duplicated()]
    if len(dup):
        raise InputError(f"{path}: model {dup.iloc[0]!r} appears more than once")
    return pd.Series(frame["group"].to_numpy(), index=frame["model"])


def _stacked(matrices, names):
    """Two response matrices as one, the models renamed ``<file>:<model>``, and their groups."""
    import numpy as np
    import pandas as pd

    from irtlib.core.responses import ResponseMatrix
    from irtlib.errors import InputError

    common = matrices[0].items.intersection(matrices[1].items, sort=False)
    if common.size < 2:
        raise InputError(f"{names[1]}: shares {common.size} item id(s) with {names[0]}; drift needs at least 2")
    parts = [m.subset(items=list(common)) for m in matrices]
    labels = [f"{i + 1}:{n}" for i, n in enumerate(names)]
    models = [f"{lab}:{m}" for lab, part in zip(labels, parts, strict=True) for m in part.models]
    values = np.vstack([part.values for part in parts])
    groups = pd.Series(np.repeat(labels, [p.shape[0] for p in parts]), index=models)
    return ResponseMatrix(values, models, list(common), source=" + ".join(names)), groups


def _cmd_drift(args, out: _Out) -> int:
    from irtlib.fit.drift import drift_by_group, mantel_haenszel
    from irtlib.io import load_responses
    from irtlib.io.atomic import atomic_write, check_writable

    if len(args.responses) > 2:
        raise CLIUsageError(f"give one RESPONSES file with --groups, or two files; got {len(args.responses)}")
    if (len(args.responses) == 1) == (args.groups is None):
        raise CLIUsageError("one RESPONSES file needs --groups CSV; two files are the groups themselves (no --groups)")
    output = _output_path(args.output)
    if output is not None:
        check_writable(output, force=args.force)
    matrices = []
    for path in args.responses:
        args_responses = args.responses
        args.responses = path                         # input_kwargs checks the file it is given
        kwargs = _input_kwargs(args)
        args.responses = args_responses
        out.progress(f"reading {path}")
        matrices.append(load_responses(path, **kwargs).matrix)
    if len(matrices) == 1:
        matrix, groups = matrices[0], _read_groups(args.groups)
    else:
        matrix, groups = _stacked(matrices, args.responses)
    lord = drift_by_group(matrix, groups, reference=args.reference, alpha=args.alpha, correction=args.correction)
    mh = mantel_haenszel(matrix, groups, reference=args.reference, n_strata=args.strata, alpha=args.alpha,
                         correction=args.correction)
    table = lord.join(mh.add_prefix("mh_"), how="outer")
    if output is not None:
        atomic_write(output, table.to_csv(index_label="item"), force=args.force)
    doc = {"command": "drift", "reference": lord.attrs["reference"], "focal": lord.attrs["focal"],
           "n_reference": lord.attrs["n_reference"], "n_focal": lord.attrs["n_focal"], "link_A": lord.attrs["A"],
           "link_B": lord.attrs["B"], "n_tested": len(lord), "not_tested": lord.attrs["not_tested"],
           "lord_flagged": list(lord.index[lord["flagged"]]), "mh_flagged": list(mh.index[mh["flagged"]]),
           "alpha": args.alpha, "correction": args.correction}
    out.result(doc, f"{lord.attrs['reference']} ({lord.attrs['n_reference']} models) against {lord.attrs['focal']} "
                    f"({lord.attrs['n_focal']}): {len(lord)} items tested; Lord's chi-square flags "
                    f"{len(doc['lord_flagged'])}, Mantel-Haenszel flags {len(doc['mh_flagged'])} of {len(mh)}"
                    + (f"; wrote {output}" if output is not None else ""))
    return 0
