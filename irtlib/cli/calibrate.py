"""``irtlib calibrate``: fit the 2PL model to a response file and write an item bank."""

from __future__ import annotations

import argparse
import contextlib
import sys

import numpy as np

from ._common import PROG, CLIUsageError
from ._common import Out as _Out
from ._common import not_another_output as _not_another_output
from ._common import output_path as _output_path
from ._options import ENGINE_HELP, RESPONSES_HELP
from ._options import check_engine as _check_engine
from ._options import general_options as _common
from ._options import input_kwargs as _input_kwargs
from ._options import input_options as _input_options
from ._options import int_at_least as _int_at_least
from ._options import positive_int as _positive_int
from ._options import variance as _variance

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``irtlib calibrate`` (its options and its handler) to the subcommands ``sub``."""
    _add_calibrate(sub)


def _add_calibrate(sub) -> None:
    from irtlib.calibration.joint_map import ENGINES

    p = sub.add_parser("calibrate", help="fit the 2PL model and write an item bank",
                       description="Read a response file, binarize it, drop items with (near-)zero variance, fit "
                                   "the 2PL model and write an item bank: a CSV of item, a, b, safe rate and fit "
                                   "diagnostics, whose first line is a JSON header recording the settings, the "
                                   "data checksum and the bank checksum.")
    p.add_argument("responses", metavar="RESPONSES", help=RESPONSES_HELP)
    p.add_argument("-o", "--output", required=True, metavar="BANK", help="item bank file to write (.csv)")
    p.add_argument("--engine", choices=sorted(ENGINES), default="map", help=ENGINE_HELP)
    p.add_argument("--variance-threshold", type=_variance, default=0.01, metavar="V",
                   help="leave out items with p(1-p) <= V (the paper: 0.01)")
    p.add_argument("--epochs", type=_positive_int, default=1000, help="py-irt epochs (default 1000)")
    p.add_argument("--interval-folds", type=_int_at_least(2), default=5, metavar="F",
                   help="folds of the cross-fitted check that widens adaptive-test score intervals to the "
                        "error measured on left-out calibration models (default 5: five extra MAP fits)")
    p.add_argument("--no-interval-check", action="store_true",
                   help="skip that check: `evaluate` then states the plain 2PL intervals, which are too "
                        "narrow on real safety data")
    p.add_argument("--scale", choices=("fit", "standard"), default="fit",
                   help="scale of the bank's a, b and abilities: 'fit' (default) the fit's own; 'standard' "
                        "rescaled so the calibration models' abilities have mean 0 and SD 1 (same probabilities; "
                        "for comparing parameters with other tools). The bank's header records which")
    p.add_argument("--standard-errors", choices=("observed", "bootstrap", "none"), default="observed",
                   help="standard errors of a and b, stored as the bank's se_a and se_b columns: 'observed' (default) "
                        "the inverse observed information of the fit (for --engine pyirt-authors, whose hierarchical "
                        "priors it does not describe, an approximation); 'bootstrap' the SD over --se-bootstrap refits "
                        "on models drawn with replacement (slow with the py-irt engines); 'none' to skip")
    p.add_argument("--se-bootstrap", type=_positive_int, default=50, metavar="N",
                   help="refits of the bootstrap over models (default 50)")
    _input_options(p)
    _common(p, force=True, seed=True)
    p.set_defaults(handler=_cmd_calibrate)

def _cmd_calibrate(args, out: _Out) -> int:
    from irtlib.bank.build import MIN_MODELS_INTERVAL_CHECK, calibrate_bank
    from irtlib.bank.format import BANK_MAGIC
    from irtlib.io import load_responses
    from irtlib.io.atomic import check_writable

    _not_another_output(args.output, "an item bank", ("a subset file", "# irtlib-subset "))
    check_writable(_output_path(args.output), force=args.force, magic=BANK_MAGIC)
    _check_engine(args)
    with _calibrate_bars(out) as (say, on_read, on_iteration, on_se, on_fold, on_refit):
        say(f"reading {args.responses}")
        data = load_responses(args.responses, **_input_kwargs(args), progress=on_read)
        m = data.matrix
        say(f"found {data.found}")
        say(f"{m.shape[0]} models x {m.shape[1]} items, {m.n_observations} responses ({data.layout} layout)")
        if not args.no_interval_check and MIN_MODELS_INTERVAL_CHECK <= m.shape[0] < 2 * args.interval_folds:
            raise CLIUsageError(f"--interval-folds {args.interval_folds} is too many for {m.shape[0]} models (each "
                                f"fold needs at least 2): use at most {m.shape[0] // 2}")
        bank = calibrate_bank(m, engine=args.engine, variance_threshold=args.variance_threshold, seed=args.seed,
                              prompts=data.prompts, source=str(args.responses), data_sha256=data.sha256,
                              binarize={"rule": args.binarize, "threshold": args.threshold, "layout": data.layout,
                                        "positive": data.positive, **({"metric": args.metric} if args.metric else {})},
                              epochs=args.epochs, interval_check=not args.no_interval_check,
                              interval_folds=args.interval_folds, scale=args.scale,
                              standard_errors=args.standard_errors, se_bootstrap=args.se_bootstrap, progress=say,
                              fit_progress=on_iteration, se_progress=on_se, check_progress=on_fold,
                              refit_progress=on_refit)
    bank.write(args.output, force=args.force)
    checksum = bank.meta["bank_sha256"]          # the body's, recorded by the write (not formatted again)
    diag, filt = bank.meta["diagnostics"], bank.filtered
    doc = {"command": "calibrate", "bank": str(args.output), "bank_sha256": checksum,
           "n_models": m.shape[0], "n_items": m.shape[1], "bank_items": len(bank), "filtered": filt,
           "engine": args.engine, "diagnostics": diag, "interval_check": bank.meta.get("interval_check"),
           "standard_errors": bank.meta.get("standard_errors")}
    check = bank.meta.get("interval_check") or {}
    cv_ci = diag.get("cv_a_interval")
    se_line = [] if bank.se_a is None else [
        f"  standard errors ({bank.meta['standard_errors']['information']}): median SE of a "
        f"{float(np.median(bank.se_a)):.3f}, of b {float(np.median(bank.se_b)):.3f}"]
    text = "\n".join([
        f"wrote {args.output}: {len(bank)} items calibrated on {m.shape[0]} models ({args.engine} engine)",
        f"  left out by the variance filter: {filt['n_items']} item{'s' * (filt['n_items'] != 1)} "
        f"({filt['n_safe']} near-all-safe, "
        f"{filt['n_unsafe']} near-all-unsafe)",
        f"  item RMSE {diag['item_rmse']:.4f}, CV of a {diag['cv_a']:.2f}"
        + (f" (noise-corrected 95% interval {cv_ci[0]:.2f} to {cv_ci[1]:.2f})" if cv_ci else "") + ", "
        f"Spearman(theta, safety score) {diag['spearman_theta_score']:.3f}, "
        f"{diag['ceiling']['above']} of {diag['ceiling']['n_models']} models above 0.95",
        f"  bank checksum {checksum}",
    ] + se_line + ([f"  interval check {check['skipped']}"] if check.get("skipped") else []))
    out.result(doc, text)
    return 0


@contextlib.contextmanager
def _calibrate_bars(out: _Out):
    """Progress bars (tqdm) of the reading, the fit's iterations, the standard errors and the interval check.

    On a terminal only. Yields ``(say, on_read, on_iteration, on_se, on_fold, on_refit)``: ``on_read`` for
    :func:`irtlib.io.load_responses` (bytes of the file read), the other four for
    :func:`irtlib.bank.build.calibrate_bank` (``on_se``: blocks of items or bootstrap refits of the standard
    errors; ``on_refit`` names the interval check's refit iteration on its bar); ``say`` prints a
    stage's line after clearing the bar of the stage before. In a pipe or with ``--quiet`` the five
    callbacks are None (no bar at all).
    """
    try:
        shown_here = not out.quiet and sys.stderr.isatty()
    except (AttributeError, ValueError):
        shown_here = False
    if not shown_here:
        yield out.progress, None, None, None, None, None
        return
    from tqdm import tqdm

    bars: list = []

    def close() -> None:
        while bars:
            bars.pop().close()

    def say(message: str) -> None:
        close()
        out.progress(message)

    def on_read(done: int, total: int) -> None:
        if not bars:
            bars.append(tqdm(file=sys.stderr, leave=False, mininterval=0, total=total, unit="B", unit_scale=True,
                             desc=f"{PROG}: reading"))
        bars[0].update(done - bars[0].n)

    def on_iteration(iteration: int, step: float) -> None:
        if not bars:
            bars.append(tqdm(file=sys.stderr, leave=False, mininterval=0, bar_format="{desc} [{elapsed}]"))
        bars[0].set_description_str(f"{PROG}: fitting: iteration {iteration}, largest step {step:.1e}")

    def on_se(done: int, total: int) -> None:
        if not bars:
            bars.append(tqdm(file=sys.stderr, leave=False, mininterval=0, total=total, unit="",
                             desc=f"{PROG}: standard errors"))
        bars[0].update(done - bars[0].n)

    def fold_bar(total: int):
        if not bars:
            bars.append(tqdm(file=sys.stderr, leave=False, mininterval=0, total=total, unit="",
                             desc=f"{PROG}: interval check (refits, replays)"))
        return bars[0]

    def on_fold(done: int, total: int) -> None:
        bar = fold_bar(total)
        bar.total = total                       # the first refit's iterations may have opened it without one
        bar.update(done - bar.n)

    def on_refit(iteration: int, step: float) -> None:
        fold_bar(None).set_postfix_str(f"refit iteration {iteration}, largest step {step:.1e}")

    try:
        yield say, on_read, on_iteration, on_se, on_fold, on_refit
    finally:
        close()
