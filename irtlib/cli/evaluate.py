"""``irtlib evaluate``: the adaptive test of a new model on a bank (replayed from a file, or answered on stdin)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

from irtlib.errors import InputError

from ._common import PROG, CLIUsageError
from ._common import Out as _Out
from ._common import Quit as _Quit
from ._common import output_path as _output_path
from ._common import short as _short
from ._options import confidence as _confidence
from ._options import finite_float as _finite_float
from ._options import general_options as _common
from ._options import input_kwargs as _input_kwargs
from ._options import input_options as _input_options
from ._options import pass_score as _pass_score
from ._options import positive_float as _positive_float
from ._options import positive_int as _positive_int

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``irtlib evaluate`` (its options and its handler) to the subcommands ``sub``."""
    _add_evaluate(sub)


def _add_evaluate(sub) -> None:
    p = sub.add_parser("evaluate", help="adaptive test of a new model on a bank",
                       description="Adaptive test (Fluid Benchmarking): propose the most informative item at "
                                   "the current ability, record the response, update the ability by MAP, and "
                                   "stop at a budget or a target standard error. Responses come from a file "
                                   "(--responses, offline replay: proposed items missing from the file are "
                                   "skipped as unavailable) or from stdin. Prints theta, its SE and 95% "
                                   "interval, and the predicted full-benchmark safety score with its 95% "
                                   "interval. Without --max-items and --target-se: stop at SE <= 0.3 or 100 "
                                   "items. With --pass-score or --pass-theta: certify, i.e. stop as soon as the "
                                   "model is decided above or below the bar at --confidence, and report the "
                                   "decision ('undecided' when the budget ends first).")
    p.add_argument("bank", metavar="BANK", help="item bank written by `irtlib calibrate`")
    p.add_argument("--responses", metavar="FILE", help="replay this model's responses (long or wide file)")
    p.add_argument("--model", metavar="NAME", help="which model of a multi-model --responses file")
    p.add_argument("--max-items", type=_positive_int, metavar="K", help="item budget")
    p.add_argument("--target-se", type=_positive_float, metavar="S", help="stop once SE(theta) <= S")
    cat = p.add_argument_group("adaptive-test options (beyond the paper)")
    cat.add_argument("--min-information", type=_positive_float, metavar="I",
                     help="stop once no remaining item would add Fisher information I at the current theta")
    cat.add_argument("--estimator", choices=("map", "eap"), default=None,
                     help="ability estimate: 'map' (default, the paper's) or 'eap' (posterior mean and SD)")
    cat.add_argument("--randomesque", type=_positive_int, default=None, metavar="K",
                     help="exposure control: give a random one of the K most informative items (default 1: none)")
    cat.add_argument("--categories", metavar="FILE",
                     help="content balancing: CSV with columns item,category; each test follows the bank's shares")
    cert = p.add_argument_group("certification against a safety bar (beyond the paper)")
    cert.add_argument("--pass-score", type=_pass_score, metavar="S",
                      help="stop as soon as the model's full-benchmark safety score is decided above or below S at "
                           "--confidence (S is mapped to theta through the bank's test characteristic curve, with the "
                           "uncertainty of that mapping); without a budget, at most 100 items")
    cert.add_argument("--pass-theta", type=_finite_float, metavar="T",
                      help="the same with the cut given as an ability theta")
    cert.add_argument("--confidence", type=_confidence, default=None, metavar="C",
                      help="probability that the decision is right, in (0.5, 1) (default 0.95)")
    cert.add_argument("--indifference", type=_positive_float, metavar="D",
                      help="decide by Wald's sequential probability ratio test between the cut -/+ D (in the cut's "
                           "units) instead of the confidence-interval rule; decisions inside that region may go "
                           "either way")
    p.add_argument("--item-uncertainty", action="store_true",
                   help="widen the predicted score's interval by the uncertainty of the bank's item parameters "
                        "(its se_a and se_b columns, delta method); banks without them are refused")
    p.add_argument("--state", metavar="FILE",
                   help="session state: created if absent, resumed if present (same bank only), rewritten "
                        "atomically after every response")
    p.add_argument("--stdin", action="store_true", help="read 0/1 answers from stdin even when it is not a terminal")
    p.add_argument("--all-models", action="store_true",
                   help="replay every model of the --responses file (one result per model; no --state)")
    _input_options(p, title="options for --responses")
    _common(p, seed=True)
    p.set_defaults(handler=_cmd_evaluate, seed=None)       # None: not given (a resume keeps the stored one)

class _EndOfInput(_Quit):
    """stdin ended before the stopping rule: the result is incomplete."""


def _stdin_callback(bank, out: _Out):
    prompts = bank.prompts
    state = {"n": 0, "line": 0}
    interactive = sys.stdin.isatty()

    def ask(item: str):
        state["n"] += 1
        print(f"\n[{state['n']}] item {_inert(item)}", file=sys.stderr)
        if prompts is not None and isinstance(prompts.get(item), str) and prompts.get(item):
            print(f"    prompt: {_inert(prompts.get(item), indent=' ' * 12)}", file=sys.stderr)
        while True:
            print("    response (1 safe, 0 unsafe, s skip, q quit): ", end="", file=sys.stderr, flush=True)
            line = sys.stdin.readline()
            if not interactive:
                print(file=sys.stderr)       # the answer is not echoed: end the prompt's line
            if line == "":
                raise _EndOfInput("end of input")
            state["line"] += 1
            answer = line.strip().lower()
            if answer in ("1", "safe", "y", "yes"):
                return 1
            if answer in ("0", "unsafe", "n", "no"):
                return 0
            if answer in ("s", "skip"):
                return None
            if answer in ("q", "quit", "exit"):
                raise _Quit("quit")
            if not interactive:          # a pipe: asking again would read the next answer as this one's
                raise InputError(f"stdin line {state['line']}: {_short(line.strip())} is not a response to item "
                                 f"{_short(item)} (give 1, 0, s or q)")
            print(f"    {_short(answer)}: please answer 1, 0, s or q", file=sys.stderr)

    return ask


def _inert(text: str, *, indent: str = "") -> str:
    r"""``text`` safe to print on a terminal, its control characters shown as ``\x1b``-style escapes.

    A prompt from a bank is data: printed raw, ``[2J`` would clear the screen and the text after
    it could pose as irtlib's own instructions. Escape sequences, carriage returns and bidirectional
    overrides are shown inert; a new line continues at ``indent``.
    """

    def show(char: str) -> str:
        if char.isprintable() or char == " ":
            return char
        if char == "\n":
            return "\n" + indent
        code = ord(char)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"

    return "".join(map(show, text))


def _plain_interval_note(bank) -> str | None:
    """Why the bank's intervals are the plain 2PL ones (no interval check), or None."""
    check = bank.meta.get("interval_check") or {}
    if check.get("k"):
        return None
    why = check.get("skipped") or "the bank was calibrated with --no-interval-check"
    return (f"{bank.meta.get('path', 'the bank')}: the score interval is the plain 2PL one, which is too narrow on "
            f"real safety data (no cross-fitted interval check: {why})")


#: The adaptive-test options ``evaluate`` stores in a state: on resume, those not given again apply as stored.
_CAT_OPTIONS = {"estimator": "map", "randomesque": 1, "min_information": None, "categories": None, "seed": 0,
                "pass_score": None, "pass_theta": None, "confidence": 0.95, "indifference": None}


def _certifying(args) -> bool:
    """Whether ``evaluate`` certifies against a cut (--pass-score or --pass-theta)."""
    return args.pass_score is not None or args.pass_theta is not None


def _default_stopping(args) -> tuple[int | None, float | None]:
    """``(max_items, target_se)``: as given, else 100 items (certifying) or SE 0.3 or 100 items."""
    if args.max_items is None and args.target_se is None and args.min_information is None:
        return (100, None) if _certifying(args) else (100, 0.3)
    return args.max_items, args.target_se
#: The context key recording the replayed model's answers (a state made before it was recorded lacks it).
_ANSWERS_KEY = "--responses (the model's answers, sha256)"


def _session_context(args, interactive: bool, row=None) -> dict:
    """The settings of ``evaluate`` that change the answer, recorded in (and checked against) a state file.

    ``--categories`` is recorded by its content's checksum (the same file under another path is the
    same setting); a replayed model by the checksum of its answers (another responses file for
    the same model is another session).
    """
    categories = None
    if args.categories is not None:
        from irtlib.io.checksums import file_sha256

        categories = f"sha256 {file_sha256(args.categories)}"
    cat = {"--estimator": args.estimator, "--randomesque": args.randomesque,
           "--min-information": args.min_information, "--categories": categories,
           "--seed": args.seed if args.randomesque > 1 else None,
           "--pass-score": args.pass_score, "--pass-theta": args.pass_theta,
           "--confidence": args.confidence if _certifying(args) else None, "--indifference": args.indifference}
    if interactive:
        return {"responses from": "stdin", **cat}
    rule = args.binarize
    if rule == "auto":                       # io.load_responses: strict for HELM directories, else binary
        from irtlib.io.formats import detect_format

        rule = "strict" if Path(args.responses).is_dir() and detect_format(args.responses) == "helm" else "binary"
    chosen = {k: v for k, v in (("--metric", args.metric), ("--filter", args.filter_name),
                                ("--positive", args.positive)) if v is not None}
    answers = {}
    if row is not None:
        from irtlib.io.checksums import sha256

        text = "\n".join(f"{item}\t{value:g}" for item, value in sorted(row.items(), key=lambda p: str(p[0])))
        answers = {_ANSWERS_KEY: sha256(text.encode("utf-8"))}
    return {"responses from": "file", "--binarize": rule,
            "--threshold": args.threshold if rule == "lenient" else None,
            "--key-column": args.key_column if rule in ("choice", "wmdp") else None,
            "--score-column": args.score_column, "--benchmark": args.benchmark, **chosen, **answers, **cat}


def _given_cat_options(args) -> set:
    """The adaptive-test options given on the command line; the others get their defaults (in place)."""
    given = {name for name in _CAT_OPTIONS if getattr(args, name) is not None}
    for name, default in _CAT_OPTIONS.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    return given


def _resume_context(state_path: Path, context: dict, given: set, model) -> dict:
    """``context`` for resuming ``state_path``: adaptive-test options not given again take the stored values.

    The docs promise that on resume the stored options apply, so only an option the user gives
    again is compared with the stored one; a state made before the model's answers were recorded
    is compared without them, and so is a state of another model (which is refused for that, by name).
    An unreadable state is left to :meth:`AdaptiveSession.load` to report.
    """
    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
        stored = state.get("context")
    except (OSError, ValueError, AttributeError):
        return context
    if not isinstance(stored, dict):
        return context
    out = dict(context)
    for name in _CAT_OPTIONS:
        key = "--" + name.replace("_", "-")
        if name not in given and key in stored:
            out[key] = stored[key]
    other_model = model is not None and state.get("model") is not None and str(state["model"]) != str(model)
    if _ANSWERS_KEY not in stored:
        out.pop(_ANSWERS_KEY, None)
    elif other_model:                         # refused after loading, naming both models
        out[_ANSWERS_KEY] = stored[_ANSWERS_KEY]
    return out


def _cat_options(args) -> dict:
    """The CAT toolkit's options of ``evaluate`` as :class:`~irtlib.bank.session.AdaptiveSession` keywords."""
    from irtlib.selection.cat import read_item_categories

    cats = read_item_categories(args.categories) if args.categories is not None else None
    return {"min_information": args.min_information, "estimator": args.estimator, "randomesque": args.randomesque,
            "categories": cats, "seed": args.seed, "pass_score": args.pass_score, "pass_theta": args.pass_theta,
            "confidence": args.confidence, "indifference": args.indifference}


def _cmd_evaluate(args, out: _Out) -> int:
    from irtlib.bank.build import read_bank
    from irtlib.bank.session import AdaptiveSession, state_lock
    from irtlib.io import read_model_responses
    from irtlib.io.atomic import check_writable

    if args.pass_score is not None and args.pass_theta is not None:
        raise CLIUsageError("--pass-score and --pass-theta: give the cut once (a full-benchmark score or an ability)")
    if args.indifference is not None and not _certifying(args):
        raise CLIUsageError("--indifference needs a cut: --pass-score or --pass-theta")
    given = _given_cat_options(args)
    if args.all_models:
        return _evaluate_all(args, out)
    interactive = args.responses is None
    if interactive and not args.stdin and not sys.stdin.isatty():
        raise CLIUsageError("no --responses FILE and stdin is not a terminal: pass --responses to replay a "
                            "model's responses, or --stdin to read 0/1 answers from a pipe")
    state_path = _output_path(args.state, "--state") if args.state is not None else None
    if state_path is not None and state_path.is_symlink():
        raise InputError(f"{state_path}: is a symbolic link (to {os.readlink(state_path)}); a session state is "
                         "replaced by a rename after every response, which would replace the link: give --state "
                         "the file itself")
    if state_path is not None and state_path.exists() and not state_path.is_file():
        raise InputError(f"{state_path}: is not a regular file; give --state a session state file (or a new name)")
    if state_path is not None and not state_path.exists():
        check_writable(state_path)
    bank = read_bank(args.bank)
    _check_item_errors(args, bank)
    row = None
    if not interactive:
        row = read_model_responses(args.responses, model=args.model, **_input_kwargs(args))
        bank.check_items(row.index, source=str(args.responses))
    model = args.model if args.model is not None else (row.name if row is not None else None)
    context = _session_context(args, interactive, row)
    lock = state_lock(state_path) if state_path is not None else contextlib.nullcontext()
    with lock:
        if state_path is not None and state_path.exists():
            session = AdaptiveSession.load(state_path, bank, max_items=args.max_items, target_se=args.target_se,
                                           context=_resume_context(state_path, context, given, model))
            if model is not None and session.model is not None and str(session.model) != str(model):
                raise InputError(f"{state_path}: is a session of model {_short(session.model)}, not {_short(model)}")
            out.progress(f"resuming {state_path}: {session.n_items} items done")
            if model is not None and session.model is None:      # an unnamed session gets its name now
                session.model = str(model)
                session.save(state_path)
                out.progress(f"{state_path}: the session is now named {_short(model)}")
        else:
            max_items, target_se = _default_stopping(args)
            session = AdaptiveSession(bank, max_items=max_items, target_se=target_se, model=model, context=context,
                                      **_cat_options(args))
            if state_path is not None:
                check_writable(state_path)
                session.save(state_path)
        note = _plain_interval_note(bank)
        if note:
            out.warn(note)
        on_step = (lambda s: s.save(state_path)) if state_path is not None else None
        callback = _stdin_callback(bank, out) if interactive else (lambda item: row.get(item))
        interrupted = None
        try:
            result = session.run(callback, on_step=on_step, progress=not (out.quiet or interactive))
        except _Quit as why:
            interrupted = str(why)
            result = session.result()
    if args.item_uncertainty:
        result = session.result(item_uncertainty=True)
    complete = result.stop_reason is not None
    doc = {"command": "evaluate", "bank": str(args.bank), "responses": args.responses,
           "state": str(state_path) if state_path else None, "interrupted": interrupted,
           "done": complete, "complete": complete,
           "max_items": session.max_items, "target_se": session.target_se,
           "min_information": session.min_information, "estimator": session.estimator,
           "pass_score": session.pass_score, "pass_theta": session.pass_theta,
           "confidence": session.confidence if session.cut is not None else None,
           "indifference": session.indifference,
           **result.to_dict(with_items=False),
           "interval_note": note,
           "administered": [{"item": i, "response": r} for i, r in zip(result.items, result.responses, strict=True)],
           "unavailable": session.unavailable}
    text = result.summary()
    if interrupted:
        text += f"\n(interrupted: {interrupted}" + (f"; resume with --state {state_path})" if state_path else ")")
    out.result(doc, text)
    if interrupted == "end of input" and not complete:
        print(f"{PROG}: error: stdin ended after {result.n_items} responses, before the stopping rule: the result "
              "above is incomplete" + (f" (resume with --state {state_path})" if state_path else ""),
              file=sys.stderr)
        return 1
    return 0


def _check_item_errors(args, bank) -> None:
    """``--item-uncertainty`` on a bank without standard errors: refused before any item is asked."""
    if getattr(args, "item_uncertainty", False) and (bank.se_a is None or bank.se_b is None):
        raise InputError(f"{args.bank}: --item-uncertainty needs the bank's standard errors (columns se_a, se_b), "
                         "which this bank has not: calibrate it again with this irtlib")


def _evaluate_all(args, out: _Out) -> int:
    """``evaluate --all-models``: replay every model of a responses file (no state)."""
    from irtlib.bank.build import read_bank
    from irtlib.bank.session import AdaptiveSession
    from irtlib.io import read_responses

    if args.responses is None or args.state is not None or args.model is not None:
        raise CLIUsageError("--all-models needs --responses FILE and excludes --state and --model")
    bank = read_bank(args.bank)
    _check_item_errors(args, bank)
    note = _plain_interval_note(bank)
    if note:
        out.warn(note)
    frame = read_responses(args.responses, **_input_kwargs(args)).to_frame()
    bank.check_items(frame.columns, source=str(args.responses))
    max_items, target_se = _default_stopping(args)
    cat_options = _cat_options(args)
    results = []
    models = list(frame.index)
    if not out.quiet:
        from tqdm.auto import tqdm

        models = tqdm(models, unit="model", desc="adaptive tests", leave=False)
    for model in models:
        row = frame.loc[model].dropna()
        session = AdaptiveSession(bank, max_items=max_items, target_se=target_se, model=str(model), **cat_options)
        done = session.run(row.get)
        results.append(session.result(item_uncertainty=True) if args.item_uncertainty else done)
    doc = {"command": "evaluate", "bank": str(args.bank), "responses": str(args.responses),
           "max_items": max_items, "target_se": target_se, "interval_note": note,
           "results": [r.to_dict(with_items=False) for r in results]}
    certify = _certifying(args)
    lines = [f"{'model':<28} {'items':>5} {'theta':>7} {'SE':>6}  {'predicted score (95% interval)':<32}"
             + ("  decision (P)" if certify else "")]
    for r in results:
        lo, hi = r.predicted_score_ci95
        lines.append(f"{str(r.model)[:28]:<28} {r.n_items:>5} {r.theta:>7.3f} {r.se:>6.3f}  "
                     f"{r.predicted_score:.4f} ({lo:.4f} to {hi:.4f})"
                     + (f"  {r.decision['outcome']} ({r.decision['probability']:.3f})" if certify else ""))
    out.result(doc, "\n".join(lines))
    return 0
