"""The ``irtlib`` command line: calibrate, subset and adaptively evaluate a safety benchmark.

Thin by design: each subcommand parses its options, calls the Python API (:mod:`irtlib.io`,
:mod:`irtlib.bank.build`, :mod:`irtlib.bank.session`, :mod:`irtlib.selection.static`,
:mod:`irtlib.protocol.agreement`) and prints. Conventions:

- exit status 0 on success, 2 on a usage error (argparse, or :class:`irtlib.errors.UsageError`),
  1 on bad input (:class:`irtlib.errors.IrtlibError`) or a file-system error (:class:`OSError`),
  3 on an internal error (any other exception: a bug in irtlib, traceback with ``--debug``),
  130 when interrupted, 143 on SIGTERM (handled like Ctrl-C);
- errors are one line, ``irtlib: error: <file>: row N: ...``, with no traceback (``--debug``
  shows it); irtlib's warnings are ``irtlib: warning: ...`` lines;
- outputs are written atomically (:func:`irtlib.io.atomic_write`, :func:`irtlib.io.atomic_directory`)
  with the umask's permissions; the destination is checked before any work is done; an
  existing output is replaced only with ``--force``, and only when irtlib wrote it;
- ``--json`` prints one JSON document on stdout; progress and prompts go to stderr; ``--quiet``
  silences progress.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sys
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path

from .errors import InputError, IrtlibError, UsageError

#: Presentation only: a change here cannot change a computed number (irtlib.book.cache leaves it out).
__presentation__ = True
__all__ = ["main", "build_parser"]


def __getattr__(name: str):
    """``write_report`` and ``run_agreement``: in :mod:`irtlib.viz.report`, :mod:`irtlib.protocol.agreement`."""
    if name == "write_report":
        from irtlib.viz.report import write_report

        return write_report
    if name == "run_agreement":
        from irtlib.protocol.agreement import run_agreement

        return run_agreement
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

PROG = "irtlib"
RESPONSES_HELP = ("long or wide CSV/Parquet file, a JSON-lines file (.jsonl), a HELM run directory, "
                  "lm-evaluation-harness per-sample logs (samples_<task>_<date>.jsonl, a file or a directory) or "
                  "Inspect AI eval logs (.eval/.json, a file or a directory); the format is recognised and named on "
                  "stderr")

ENGINE_HELP = ("2PL calibration engine (default: map). 'map' finds the posterior mode of the paper's "
               "model and priors in seconds and gives the same item and model ranking as py-irt; "
               "'pyirt' runs py-irt's variational fit exactly as the paper did (tens of seconds to minutes); "
               "'pyirt-authors' runs it as the paper's released code does (hierarchical priors, decay, best epoch)")




#: A usage problem found after parsing (reported like argparse's, exit status 2).
CLIUsageError = UsageError


class _Quit(Exception):
    """The user ended an interactive evaluation."""


# ---------------------------------------------------------------------------- output helpers
class _Out:
    def __init__(self, args):
        self.quiet = getattr(args, "quiet", False)
        self.json = getattr(args, "json", False)

    def progress(self, message: str) -> None:
        if not self.quiet:
            print(f"{PROG}: {message}", file=sys.stderr, flush=True)

    def warn(self, message: str) -> None:
        """A warning on stderr, shown even with --quiet."""
        print(f"{PROG}: warning: {_one_line(message)}", file=sys.stderr, flush=True)

    def result(self, document: dict, text: str) -> None:
        if self.json:
            from irtlib.viz.report import jsonable

            print(json.dumps(jsonable(document), indent=2, allow_nan=False))
        else:
            print(text)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.filename and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}"
    else:
        text = str(exc) or type(exc).__name__
    text = " ".join(text.split())
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + f"... ({len(text)} characters)"


#: Longest error message printed whole (identifiers are cut earlier; this is a last resort).
_MAX_MESSAGE = 2000


def _output_path(text: str, option: str = "-o") -> Path:
    """A file output path, or a usage error for an empty one or one naming a directory ('dir/')."""
    if text is None:
        return None
    if text.strip() == "":
        raise CLIUsageError(f"{option}: the output path is empty")
    if text.endswith(("/", "\\")) or text in (".", ".."):
        raise CLIUsageError(f"{option} {text}: names a directory; give a file name")
    return Path(text)


# ---------------------------------------------------------------------------- argument types
def _number(parse, accept, requirement: str, *, name: str | None = None):
    """An argparse type: ``parse`` the text (int or float), then require ``accept(value)``.

    ``requirement`` follows the quoted text in the error: "'0' must be at least 1", "'x' is not a number".
    """
    kind = "an integer" if parse is int else "a number"

    def convert(text: str):
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind}") from None
        if not accept(value):                # NaN fails every comparison, so it is rejected too
            raise argparse.ArgumentTypeError(f"{text!r}{requirement}")
        return value

    convert.__name__ = name or requirement.strip(" :")
    return convert


def _int_at_least(minimum: int):
    return _number(int, lambda v: v >= minimum, f" must be at least {minimum}", name=f"integer >= {minimum}")


_positive_int = _int_at_least(1)
#: Spearman's rho over one test model is undefined (it would be reported as agreement 0 everywhere).
_n_test = _number(int, lambda v: v >= 2, " is too few: Spearman's rho over the test models is undefined for fewer "
                  "than 2 (the paper: 10)", name="integer >= 2")
_positive_float = _number(float, lambda v: v > 0 and math.isfinite(v), " must be a positive number")
_unit_float = _number(float, lambda v: 0.0 <= v <= 1.0, " must be a number between 0 and 1")
_variance = _number(float, lambda v: 0.0 <= v < 0.25, " must be a number in [0, 0.25) (p(1-p) is at most 0.25)")
_n_jobs = _number(int, lambda v: v >= 1 or v == -1, ": give a number of processes >= 1, or -1 for all cores")


def _separator(text: str) -> str:
    value = {"\\t": "\t", "tab": "\t", "TAB": "\t"}.get(text, text)
    if len(value) != 1 or value in "\"\r\n":
        raise argparse.ArgumentTypeError(f"{text!r}: give one character, e.g. ',' ';' '|' or '\\t' (tab)")
    return value


def _method_list(text: str) -> list[str]:
    from irtlib.selection.methods import ids

    known = ids()
    methods = [m for m in text.replace(" ", "").split(",") if m]
    if not methods:
        raise argparse.ArgumentTypeError(f"{text!r} names no method; choose from {', '.join(known)}")
    unknown = [m for m in methods if m not in known]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown method {_short(unknown[0])}; choose from {', '.join(known)}")
    return list(dict.fromkeys(methods))


def _short(text, limit: int = 60) -> str:
    text = repr(text)
    return text if len(text) <= limit + 20 else f"{text[:limit]}... ({len(text)} characters)"


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give positive integers, e.g. 5,10,20,50")
    return values


# ---------------------------------------------------------------------------- option groups
def _common(parser: argparse.ArgumentParser, *, json_flag=True, force=False, seed=False, n_jobs=False) -> None:
    group = parser.add_argument_group("general options")
    if json_flag:
        group.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    group.add_argument("-q", "--quiet", action="store_true", help="no progress messages or bars on stderr")
    group.add_argument("--debug", action="store_true", help="show a traceback on errors")
    if force:
        group.add_argument("-f", "--force", action="store_true", help="overwrite existing output")
    if seed:
        group.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    if n_jobs:
        group.add_argument("--n-jobs", type=_n_jobs, default=1, metavar="N",
                           help="parallel worker processes (default: 1; -1 = all cores)")


def _input_options(parser: argparse.ArgumentParser, *, title="response file options") -> None:
    from .io import LAYOUTS, RULES

    group = parser.add_argument_group(title)
    group.add_argument("--binarize", "--rule", dest="binarize", choices=RULES, default="auto",
                       help="how scores become safe (1) / unsafe (0): 'auto' (default) is 'binary' for "
                            "files and 'strict' for HELM directories; 'binary' scores are already 0/1; "
                            "'strict' graded scores in [0, 1] are safe only at 1 (the paper's "
                            "rule for HELM judges); 'lenient' safe when score >= --threshold; 'choice' "
                            "safe when the chosen option (score column) equals the key column; 'wmdp' "
                            "safe when it does NOT (a correct answer to a hazardous-knowledge question "
                            "is unsafe). For lm-eval and Inspect logs, whose metric is already 0/1 "
                            "correct, 'choice' keeps it and 'wmdp' inverts it")
    group.add_argument("--positive", choices=("safe", "unsafe"),
                       help="what a 1 (a score of 1) in the file means, in every format: 'safe', or 'unsafe' (a "
                            "correct answer to a hazardous-knowledge question, a harm score), which reads 1 - score "
                            "as safety. Default: safe, except for files irtlib knows: the paper's authors' "
                            "wmdp_irt_data.jsonl stores 1 = correct and is read as unsafe (a warning says so); "
                            "a file or task named like WMDP read as safe gets a warning")
    group.add_argument("--threshold", type=_unit_float, default=0.5,
                       help="threshold of --binarize lenient, between 0 and 1 (default 0.5)")
    group.add_argument("--sep", type=_separator, metavar="C",
                       help="field separator of a text file (default: detected from the header line among , "
                            "tab ; and |; write tab as '\\t'); gzip, bz2, xz, zip and zstd compression and Parquet "
                            "are recognised from the file's bytes, whatever its name")
    group.add_argument("--layout", choices=LAYOUTS, default="auto",
                       help="long (model,item,score rows), wide (a row per model, a column per item), "
                            "helm (a HELM run directory), jsonl (one JSON object per model: subject_id and "
                            "responses, the paper's authors' format), lm-eval (lm-evaluation-harness "
                            "samples_<task>_<date>.jsonl logs), inspect (Inspect AI .eval/.json logs; needs "
                            "pip install 'irtlib[inspect]'); auto recognises the format from names and first "
                            "bytes (default)")
    group.add_argument("--metric", metavar="NAME",
                       help="the score to read: an lm-eval metric (acc, exact_match), an Inspect scorer (match) "
                            "or a HELM stat (default: the logs' only one; HELM: the scenario's)")
    group.add_argument("--filter", dest="filter_name", metavar="NAME",
                       help="lm-eval only: read the lines of this filter (e.g. strict-match; default: every "
                            "filter, each its own item)")
    group.add_argument("--model-column", default="model", metavar="NAME", help="default: model")
    group.add_argument("--item-column", default="item", metavar="NAME", help="default: item")
    group.add_argument("--score-column", default="score", metavar="NAME", help="default: score")
    group.add_argument("--key-column", default="key", metavar="NAME",
                       help="answer key column for --binarize choice/wmdp (default: key)")
    group.add_argument("--prompt-column", default="prompt", metavar="NAME",
                       help="optional item text column, kept in the bank (default: prompt)")
    group.add_argument("--benchmark", metavar="NAME",
                       help="which benchmark of a HELM directory holding several (e.g. harmbench)")


def _check_engine(args) -> None:
    """``--engine pyirt`` without torch/pyro/py-irt: fail before reading any data."""
    if getattr(args, "engine", "map") == "pyirt":
        from irtlib.calibration.joint_map import load_pyirt_engine

        load_pyirt_engine()


def _input_kwargs(args) -> dict:
    """The response-file options as :func:`irtlib.io.load_responses` keywords.

    Every command reads ``args.responses`` right after, so this first refuses a copy of the paper's
    authors' files (in the cache, the shared copy or ``$IRTLIB_PAPER_DATA``) whose bytes no longer
    check out (:func:`irtlib.datasets.authors.check_copy`), as ``paper-data`` and the loaders do.
    """
    from .datasets.authors import check_copy

    if getattr(args, "responses", None) is not None:
        check_copy(args.responses)
    return {"rule": args.binarize, "threshold": args.threshold, "layout": args.layout,
            "model_column": args.model_column, "item_column": args.item_column,
            "score_column": args.score_column, "key_column": args.key_column,
            "prompt_column": args.prompt_column, "benchmark": args.benchmark, "sep": args.sep,
            "metric": args.metric, "filter_name": args.filter_name, "positive": args.positive}


# ---------------------------------------------------------------------------- calibrate
def _cmd_calibrate(args, out: _Out) -> int:
    from irtlib.bank.build import MIN_MODELS_INTERVAL_CHECK, calibrate_bank
    from irtlib.bank.format import BANK_MAGIC
    from irtlib.io import load_responses
    from irtlib.io.atomic import check_writable

    _not_another_output(args.output, "an item bank", ("a subset file", "# irtlib-subset "))
    check_writable(_output_path(args.output), force=args.force, magic=BANK_MAGIC)
    _check_engine(args)
    out.progress(f"reading {args.responses}")
    data = load_responses(args.responses, **_input_kwargs(args))
    m = data.matrix
    out.progress(f"found {data.found}")
    out.progress(f"{m.shape[0]} models x {m.shape[1]} items, {m.n_observations} responses ({data.layout} layout)")
    if not args.no_interval_check and MIN_MODELS_INTERVAL_CHECK <= m.shape[0] < 2 * args.interval_folds:
        raise CLIUsageError(f"--interval-folds {args.interval_folds} is too many for {m.shape[0]} models (each fold "
                            f"needs at least 2): use at most {m.shape[0] // 2}")
    with _calibrate_bars(out) as (say, on_iteration, on_fold):
        bank = calibrate_bank(m, engine=args.engine, variance_threshold=args.variance_threshold, seed=args.seed,
                              prompts=data.prompts, source=str(args.responses), data_sha256=data.sha256,
                              binarize={"rule": args.binarize, "threshold": args.threshold, "layout": data.layout,
                                        "positive": data.positive, **({"metric": args.metric} if args.metric else {})},
                              epochs=args.epochs, interval_check=not args.no_interval_check,
                              interval_folds=args.interval_folds, scale=args.scale, progress=say,
                              fit_progress=on_iteration, check_progress=on_fold)
    bank.write(args.output, force=args.force)
    diag, filt = bank.meta["diagnostics"], bank.filtered
    doc = {"command": "calibrate", "bank": str(args.output), "bank_sha256": bank.checksum,
           "n_models": m.shape[0], "n_items": m.shape[1], "bank_items": len(bank), "filtered": filt,
           "engine": args.engine, "diagnostics": diag, "interval_check": bank.meta.get("interval_check")}
    check = bank.meta.get("interval_check") or {}
    text = "\n".join([
        f"wrote {args.output}: {len(bank)} items calibrated on {m.shape[0]} models ({args.engine} engine)",
        f"  left out by the variance filter: {filt['n_items']} item{'s' * (filt['n_items'] != 1)} "
        f"({filt['n_safe']} near-all-safe, "
        f"{filt['n_unsafe']} near-all-unsafe)",
        f"  item RMSE {diag['item_rmse']:.4f}, CV of a {diag['cv_a']:.2f}, "
        f"Spearman(theta, safety score) {diag['spearman_theta_score']:.3f}, "
        f"{diag['ceiling']['above']} of {diag['ceiling']['n_models']} models above 0.95",
        f"  bank checksum {bank.checksum}",
    ] + ([f"  interval check {check['skipped']}"] if check.get("skipped") else []))
    out.result(doc, text)
    return 0


@contextlib.contextmanager
def _calibrate_bars(out: _Out):
    """Progress bars (tqdm) of the fit's iterations and the interval check's folds: on a terminal only.

    Yields ``(say, on_iteration, on_fold)`` for :func:`irtlib.bank.build.calibrate_bank`: ``say`` prints a
    stage's line after clearing the bar of the stage before; in a pipe or with ``--quiet`` the two
    callbacks are None (no bar at all).
    """
    try:
        shown_here = not out.quiet and sys.stderr.isatty()
    except (AttributeError, ValueError):
        shown_here = False
    if not shown_here:
        yield out.progress, None, None
        return
    from tqdm import tqdm

    bars: list = []

    def close() -> None:
        while bars:
            bars.pop().close()

    def say(message: str) -> None:
        close()
        out.progress(message)

    def on_iteration(iteration: int, step: float) -> None:
        if not bars:
            bars.append(tqdm(file=sys.stderr, leave=False, mininterval=0, bar_format="{desc} [{elapsed}]"))
        bars[0].set_description_str(f"{PROG}: fitting: iteration {iteration}, largest step {step:.1e}")

    def on_fold(done: int, total: int) -> None:
        if not bars:
            bars.append(tqdm(file=sys.stderr, leave=False, mininterval=0, total=total, unit="",
                             desc=f"{PROG}: interval check (refits, replays)"))
        bars[0].update(done - bars[0].n)

    try:
        yield say, on_iteration, on_fold
    finally:
        close()


# ---------------------------------------------------------------------------- subset
def _not_another_output(output: str, kind: str, *others: tuple[str, str]) -> None:
    """Refuse an output path holding another kind of irtlib output (``--force`` would not replace it anyway)."""
    path = Path(output)
    if not path.is_file() or path.is_symlink():
        return
    with open(path, "rb") as fh:
        head = fh.read(64)
    for what, magic in others:
        if head.startswith(magic.encode("utf-8")):
            raise InputError(f"{path}: is {what} irtlib wrote, not {kind}; --force replaces only {kind}: choose "
                             "another -o")


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


# ---------------------------------------------------------------------------- evaluate
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
_CAT_OPTIONS = {"estimator": "map", "randomesque": 1, "min_information": None, "categories": None, "seed": 0}
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
           "--seed": args.seed if args.randomesque > 1 else None}
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
            "categories": cats, "seed": args.seed}


def _cmd_evaluate(args, out: _Out) -> int:
    from irtlib.bank.build import read_bank
    from irtlib.bank.session import AdaptiveSession, state_lock
    from irtlib.io import read_model_responses
    from irtlib.io.atomic import check_writable

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
            max_items, target_se = args.max_items, args.target_se
            if max_items is None and target_se is None and args.min_information is None:
                max_items, target_se = 100, 0.3
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
    complete = result.stop_reason is not None
    doc = {"command": "evaluate", "bank": str(args.bank), "responses": args.responses,
           "state": str(state_path) if state_path else None, "interrupted": interrupted,
           "done": complete, "complete": complete,
           "max_items": session.max_items, "target_se": session.target_se,
           "min_information": session.min_information, "estimator": session.estimator,
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


def _evaluate_all(args, out: _Out) -> int:
    """``evaluate --all-models``: replay every model of a responses file (no state)."""
    from irtlib.bank.build import read_bank
    from irtlib.bank.session import AdaptiveSession

    from .io import read_responses

    if args.responses is None or args.state is not None or args.model is not None:
        raise CLIUsageError("--all-models needs --responses FILE and excludes --state and --model")
    bank = read_bank(args.bank)
    note = _plain_interval_note(bank)
    if note:
        out.warn(note)
    frame = read_responses(args.responses, **_input_kwargs(args)).to_frame()
    bank.check_items(frame.columns, source=str(args.responses))
    max_items, target_se = args.max_items, args.target_se
    if max_items is None and target_se is None and args.min_information is None:
        max_items, target_se = 100, 0.3
    cat_options = _cat_options(args)
    results = []
    models = list(frame.index)
    if not out.quiet:
        from tqdm.auto import tqdm

        models = tqdm(models, unit="model", desc="adaptive tests", leave=False)
    for model in models:
        row = frame.loc[model].dropna()
        session = AdaptiveSession(bank, max_items=max_items, target_se=target_se, model=str(model), **cat_options)
        results.append(session.run(row.get))
    doc = {"command": "evaluate", "bank": str(args.bank), "responses": str(args.responses),
           "max_items": max_items, "target_se": target_se, "interval_note": note,
           "results": [r.to_dict(with_items=False) for r in results]}
    lines = [f"{'model':<28} {'items':>5} {'theta':>7} {'SE':>6}  {'predicted score (95% interval)':<32}"]
    for r in results:
        lo, hi = r.predicted_score_ci95
        lines.append(f"{str(r.model)[:28]:<28} {r.n_items:>5} {r.theta:>7.3f} {r.se:>6.3f}  "
                     f"{r.predicted_score:.4f} ({lo:.4f} to {hi:.4f})")
    out.result(doc, "\n".join(lines))
    return 0


# ---------------------------------------------------------------------------- agreement
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


@contextlib.contextmanager
def _ks_usage(args):
    """A ``--ks`` budget beyond the items the variance filter leaves is a usage error naming the option and file.

    The protocol finds it (it alone knows how many items its filter keeps) and says so without
    naming the option; here it becomes ``--ks 5,500: ...`` (exit 2).
    """
    try:
        yield
    except InputError as exc:
        if args.ks is not None and str(exc).startswith("budgets must lie between"):
            raise CLIUsageError(f"--ks {','.join(map(str, args.ks))}: {exc} of {args.responses} (variance threshold "
                                f"{args.variance_threshold})") from None
        raise


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


# ---------------------------------------------------------------------------- report
def _cmd_report(args, out: _Out) -> int:
    from irtlib.io import load_responses
    from irtlib.io.atomic import check_writable

    if args.output.strip() == "":
        raise CLIUsageError("-o: the output path is empty")
    out_dir = check_writable(Path(args.output), force=args.force, directory=True)
    _check_engine(args)
    out.progress(f"reading {args.responses}")
    data = load_responses(args.responses, **_input_kwargs(args))
    out.progress(f"found {data.found}")
    if args.n_splits > 0 and args.n_test >= data.matrix.shape[0] - 1:
        raise CLIUsageError(f"{data.source}: {data.matrix.shape[0]} models are too few for --n-test {args.n_test} "
                            "(the agreement protocol needs --n-test + 2): lower --n-test, or pass --n-splits 0 to "
                            "write the report without the agreement section")
    from irtlib.viz.report import write_report

    with _ks_usage(args):
        summary = write_report(data, out_dir, engine=args.engine, n_splits=args.n_splits, ks=args.ks,
                               n_test=args.n_test, seed=args.seed, n_jobs=args.n_jobs, force=args.force,
                               methods=args.methods, progress=out.progress, show_progress=not out.quiet,
                               rule=f"{args.binarize} ({data.layout} layout)",
                               variance_threshold=args.variance_threshold)
    out.result({"command": "report", "output": str(out_dir), **summary}, f"wrote {out_dir / 'index.html'}")
    return 0


# ---------------------------------------------------------------------------- parser
class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (exit status 2), not argparse's usage block."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``irtlib`` argument parser with its five subcommands."""
    from ._version import __version__

    parser = _Parser(
        prog=PROG,
        description="Calibrate, subset and adaptively evaluate a safety benchmark with 2PL item response "
                    "theory (Fluid Benchmarking). Run `irtlib COMMAND --help` for each command.",
        epilog="Exit status: 0 ok, 1 bad input or failure, 2 usage error, 3 internal error (a bug; see --debug).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    _add_calibrate(sub)
    _add_subset(sub)
    _add_evaluate(sub)
    _add_protocol_commands(sub)
    _add_paper_data(sub)
    return parser


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
    _input_options(p)
    _common(p, force=True, seed=True)
    p.set_defaults(handler=_cmd_calibrate)


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


def _add_evaluate(sub) -> None:
    p = sub.add_parser("evaluate", help="adaptive test of a new model on a bank",
                       description="Adaptive test (Fluid Benchmarking): propose the most informative item at "
                                   "the current ability, record the response, update the ability by MAP, and "
                                   "stop at a budget or a target standard error. Responses come from a file "
                                   "(--responses, offline replay: proposed items missing from the file are "
                                   "skipped as unavailable) or from stdin. Prints theta, its SE and 95% "
                                   "interval, and the predicted full-benchmark safety score with its 95% "
                                   "interval. Without --max-items and --target-se: stop at SE <= 0.3 or 100 "
                                   "items.")
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
    p.add_argument("--state", metavar="FILE",
                   help="session state: created if absent, resumed if present (same bank only), rewritten "
                        "atomically after every response")
    p.add_argument("--stdin", action="store_true", help="read 0/1 answers from stdin even when it is not a terminal")
    p.add_argument("--all-models", action="store_true",
                   help="replay every model of the --responses file (one result per model; no --state)")
    _input_options(p, title="options for --responses")
    _common(p, seed=True)
    p.set_defaults(handler=_cmd_evaluate, seed=None)       # None: not given (a resume keeps the stored one)


def _add_protocol_commands(sub) -> None:
    """``agreement`` and ``report``: the agreement protocol's options, shared."""
    from irtlib.calibration.joint_map import ENGINES
    from irtlib.selection.methods import ids

    methods_default = list(ids())       # all of the paper's eight, from the registry
    for name, handler, helptext, description in (
        ("agreement", _cmd_agreement, "run the paper's agreement protocol and print the Table 2 summary",
         "Repeatedly split the models into training and test models, calibrate on the training models, "
         "and measure the Spearman agreement between each method's k-item estimate and the full safety "
         "score of the test models; print the Table 2 summary and the mean agreement curves."),
        ("report", _cmd_report, "write a small static HTML report",
         "Write DIR/index.html with the benchmark's fit (theta against safety score, item fit), the "
         "spread of discrimination (CV of a), the ceiling, and the agreement curves."),
    ):
        p = sub.add_parser(name, help=helptext, description=description)
        p.add_argument("responses", metavar="RESPONSES", help=RESPONSES_HELP)
        if name == "report":
            p.add_argument("-o", "--output", required=True, metavar="DIR", help="report directory to write")
        else:
            p.add_argument("-o", "--output", metavar="CSV", help="also write the per-split results as CSV")
        p.add_argument("--methods", type=_method_list,
                       default=methods_default, metavar="M1,M2",
                       help=f"comma-separated methods (default: {','.join(methods_default)})")
        p.add_argument("--ks", type=_int_list, metavar="K1,K2",
                       help="budgets (default: the protocol's log-spaced grid, up to 30%% of the items)")
        p.add_argument("--n-splits", type=_positive_int if name == "agreement" else _int_at_least(0),
                       default=100 if name == "agreement" else 20,
                       help=f"train/test splits (default: {100 if name == 'agreement' else 20}"
                            + ("; 0 skips the agreement section, e.g. for fewer than 12 models)"
                               if name == "report" else ")"))
        p.add_argument("--n-test", type=_n_test, default=10, help="test models per split (default: 10; at least 2)")
        p.add_argument("--engine", choices=sorted(ENGINES), default="map", help=ENGINE_HELP)
        p.add_argument("--variance-threshold", type=_variance, default=0.01, metavar="V",
                       help="leave out items with p(1-p) <= V (the paper: 0.01)")
        _input_options(p)
        _common(p, force=True, seed=True, n_jobs=True, json_flag=True)
        p.set_defaults(handler=handler)


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
    from .datasets import authors

    if args.action == "list":
        print("\n".join(authors.status_lines()))
        return 0
    names = args.names or (list(authors.DEFAULT_DOWNLOAD) + list(authors.UNVERIFIED) if args.with_unverified
                           else None)
    authors.download(names, dest=args.dest, with_unverified=args.with_unverified, base_url=args.base_url,
                     progress=print, missing_only=args.missing, announce=out.progress)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``irtlib`` command line; returns the exit status.

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name (default: ``sys.argv[1:]``).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    out = _Out(args)
    with warnings.catch_warnings(), _terminate_as_interrupt():
        _show_library_warnings(out)
        try:
            return args.handler(args, out)
        except CLIUsageError as exc:
            sub = f"{PROG} {args.command}"
            print(f"usage: {sub} --help\n{sub}: error: {_one_line(exc)}", file=sys.stderr)
            return 2
        except _Terminated:
            print(f"{PROG}: terminated", file=sys.stderr)
            return 128 + signal.SIGTERM
        except KeyboardInterrupt:
            print(f"{PROG}: interrupted", file=sys.stderr)
            return 130
        except BrokenPipeError:               # e.g. `irtlib ... --json | head`: the reader went away
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
        except (IrtlibError, OSError) as exc:     # bad input, a missing file, a full disk: the user can fix it
            if args.debug:
                traceback.print_exc()
            print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
            return 1
        except Exception as exc:  # noqa: BLE001 - anything else is a bug in irtlib
            if args.debug:
                traceback.print_exc()
            print(f"{PROG}: internal error: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
            if not args.debug:
                print(f"{PROG}: this is a bug in irtlib, not a problem with the input: please report it with "
                      "the traceback that --debug shows", file=sys.stderr)
            return 3


class _Terminated(KeyboardInterrupt):
    """SIGTERM (``timeout``, a cancelled CI job): unwinds like Ctrl-C, so temporary outputs are removed."""


@contextlib.contextmanager
def _terminate_as_interrupt():
    """Turn SIGTERM into :class:`_Terminated` while a command runs (main thread only)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise _Terminated()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _show_library_warnings(out: _Out) -> None:
    """Print irtlib's own warnings (left-out models, skipped interval check) as one ``irtlib: warning:`` line.

    Other libraries' warnings (numpy's RuntimeWarning on a tiny report, scipy's constant-input
    warning) go to stderr as usual, except with ``--quiet``, which silences them.
    """
    from irtlib.bank.build import IntervalCheckWarning
    from irtlib.io.formats import FormatWarning

    from .io import InputWarning

    ours = (InputWarning, IntervalCheckWarning, FormatWarning)
    original = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, ours):
            out.warn(str(message))
        elif not out.quiet:          # --quiet: numpy's and scipy's warnings on degenerate inputs are not shown
            original(message, category, filename, lineno, file, line)

    for category in ours:
        warnings.simplefilter("always", category)
    warnings.showwarning = show


if __name__ == "__main__":
    sys.exit(main())
