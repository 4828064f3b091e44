"""``irtlib agreement``: the paper's agreement protocol on a response file, with the Table 2 summary."""

from __future__ import annotations

import argparse

from ._common import Out as _Out
from ._common import output_path as _output_path
from ._options import check_engine as _check_engine
from ._options import input_kwargs as _input_kwargs
from ._options import ks_usage as _ks_usage
from ._options import protocol_parser as _protocol_parser

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``irtlib agreement`` (its options and its handler) to the subcommands ``sub``."""
    _add_agreement(sub)


def _add_agreement(sub) -> None:
    _protocol_parser(sub, "agreement", _cmd_agreement,
                     "run the paper's agreement protocol and print the Table 2 summary",
                     "Repeatedly split the models into training and test models, calibrate on the training models, "
                     "and measure the Spearman agreement between each method's k-item estimate and the full safety "
                     "score of the test models; print the Table 2 summary and the mean agreement curves.")

#: How ``agreement -o`` results begin: with ``--force`` only such a file is replaced.
AGREEMENT_MAGIC = "split,method,k,agreement\n"

def _cmd_agreement(args, out: _Out) -> int:
    from irtlib.io import load_responses
    from irtlib.io.atomic import atomic_write, check_writable
    from irtlib.protocol import agreement

    if args.output is not None:
        check_writable(_output_path(args.output), force=args.force, magic=AGREEMENT_MAGIC)
    _check_engine(args)
    out.progress(f"reading {args.responses}")
    data = load_responses(args.responses, **_input_kwargs(args))
    out.progress(f"found {data.found}")
    matrix = data.matrix
    out.progress(f"{matrix.shape[0]} models x {matrix.shape[1]} items; {args.n_splits} splits of "
                 f"{args.n_test} test models; methods {','.join(args.methods)}")
    with _ks_usage(args):
        results = agreement.run_agreement(matrix, methods=args.methods, ks=args.ks, n_splits=args.n_splits,
                                          n_test=args.n_test, seed=args.seed, engine=args.engine, n_jobs=args.n_jobs,
                                          variance_threshold=args.variance_threshold, progress=not out.quiet)
    curves = _within_rho_range(agreement.agreement_curves(results))
    table = agreement.summarise_table2(results) if "fluid" in args.methods else None
    if args.output is not None:
        atomic_write(args.output, results.to_csv(index=False, lineterminator="\n"), force=args.force,
                     magic=AGREEMENT_MAGIC)
    doc = {"command": "agreement", "responses": str(args.responses), "n_models": matrix.shape[0],
           "n_items": matrix.shape[1], "n_items_filtered": results.attrs.get("n_items_filtered"),
           "settings": {"methods": list(args.methods), "ks": results.attrs.get("ks"), "n_splits": args.n_splits,
                        "n_test": args.n_test, "seed": args.seed, "engine": args.engine,
                        "variance_threshold": args.variance_threshold},
           "table2": table.to_dict(orient="records") if table is not None else None,
           "curves": curves.to_dict(orient="records")}
    parts = []
    if table is not None:
        parts += ["Table 2 summary (left: smallest k where Fluid reaches 0.90; right: largest k before "
                  "Random catches up with Fluid):", _table2_text(table), ""]
    parts += ["mean agreement (Spearman rho over the test models; undefined counted as 0) by budget k:",
              curves.pivot(index="k", columns="method", values="mean")[list(dict.fromkeys(
                  m for m in args.methods if m in set(curves["method"])))].round(3).to_string()]
    out.result(doc, "\n".join(parts))
    return 0


def _within_rho_range(curves):
    """The curves' intervals and bands clipped to [-1, 1], the range of a (mean) Spearman correlation.

    ``mean +- t sd / sqrt(n)`` and ``mean +- sd`` reach beyond it when the per-split agreements sit
    near 1 with a few low ones; a correlation of 1.02 is no answer to print.
    """
    bounded = [c for c in ("lo", "hi", "ci_lo", "ci_hi", "band_lo", "band_hi") if c in curves.columns]
    return curves.assign(**{c: curves[c].clip(-1.0, 1.0) for c in bounded})



def _table2_text(table) -> str:
    """Table 2 as the paper prints it: one line per column (left/right), mean agreement per method."""
    lines = []
    for (column, k), rows in table.groupby(["column", "k"], sort=False):
        first = rows.iloc[0]
        lines.append(f"  {column}: k = {k} ({first['k_over_n']:.1%} of the items, saving {first['saving']:.1%}; "
                     f"{first['status']})")
        means = (f"{r['method']} {r['mean']:.2f} (SD {r['sd']:.2f})" for _, r in rows.iterrows())
        lines.append("    " + "  ".join(means))
    return "\n".join(lines)
