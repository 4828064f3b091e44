"""The options the ``irtlib`` subcommands share: argument types, option groups, the response-file options.

Each type checks one option's text and says what is wrong with it (argparse prints it as a usage
error, exit status 2); each group adds the same options with the same help to every command that
takes them.
"""

from __future__ import annotations

import argparse
import contextlib
import math

from irtlib.errors import InputError

from ._common import CLIUsageError, short

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True

RESPONSES_HELP = ("long or wide CSV/Parquet file, a JSON-lines file (.jsonl), a HELM run directory, "
                  "lm-evaluation-harness per-sample logs (samples_<task>_<date>.jsonl, a file or a directory) or "
                  "Inspect AI eval logs (.eval/.json, a file or a directory); the format is recognised and named on "
                  "stderr")

ENGINE_HELP = ("2PL calibration engine (default: map). 'map' finds the posterior mode of the paper's "
               "model and priors in seconds and gives the same item and model ranking as py-irt; "
               "'pyirt' runs py-irt's variational fit exactly as the paper did (tens of seconds to minutes); "
               "'pyirt-authors' runs it as the paper's released code does (hierarchical priors, decay, best epoch)")



# ---------------------------------------------------------------------------- argument types
def number(parse, accept, requirement: str, *, name: str | None = None):
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


def int_at_least(minimum: int):
    return number(int, lambda v: v >= minimum, f" must be at least {minimum}", name=f"integer >= {minimum}")


positive_int = int_at_least(1)
#: Spearman's rho over one test model is undefined (it would be reported as agreement 0 everywhere).
n_test = number(int, lambda v: v >= 2, " is too few: Spearman's rho over the test models is undefined for fewer "
                  "than 2 (the paper: 10)", name="integer >= 2")
positive_float = number(float, lambda v: v > 0 and math.isfinite(v), " must be a positive number")
unit_float = number(float, lambda v: 0.0 <= v <= 1.0, " must be a number between 0 and 1")
variance = number(float, lambda v: 0.0 <= v < 0.25, " must be a number in [0, 0.25) (p(1-p) is at most 0.25)")
pass_score = number(float, lambda v: 0.0 < v < 1.0, " must be a safety score strictly between 0 and 1",
                    name="score in (0, 1)")
confidence = number(float, lambda v: 0.5 < v < 1.0, " must lie strictly between 0.5 and 1 (the probability that "
                    "the decision is right)", name="confidence in (0.5, 1)")
#: A test's level (``--alpha``): strictly between 0 and 1.
level = number(float, lambda v: 0.0 < v < 1.0, " must lie strictly between 0 and 1", name="level")


def test_options(parser: argparse.ArgumentParser) -> None:
    """``--alpha`` and ``--correction``: the level and multiple-testing correction of per-item tests."""
    parser.add_argument("--alpha", type=level, default=0.05, help="level of the tests (default: 0.05)")
    parser.add_argument("--correction", choices=("bh", "holm", "bonferroni", "none"), default="bh",
                        help="multiple-testing correction: Benjamini-Hochberg (default), Holm, Bonferroni or none")


finite_float = number(float, math.isfinite, " must be a finite number", name="finite number")
processes = number(int, lambda v: v >= 1 or v == -1, ": give a number of processes >= 1, or -1 for all cores")


def separator(text: str) -> str:
    value = {"\\t": "\t", "tab": "\t", "TAB": "\t"}.get(text, text)
    if len(value) != 1 or value in "\"\r\n":
        raise argparse.ArgumentTypeError(f"{text!r}: give one character, e.g. ',' ';' '|' or '\\t' (tab)")
    return value


def method_list(text: str) -> list[str]:
    from irtlib.selection.methods import ids

    known = ids()
    methods = [m for m in text.replace(" ", "").split(",") if m]
    if not methods:
        raise argparse.ArgumentTypeError(f"{text!r} names no method; choose from {', '.join(known)}")
    unknown = [m for m in methods if m not in known]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown method {short(unknown[0])}; choose from {', '.join(known)}")
    return list(dict.fromkeys(methods))


def int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give positive integers, e.g. 5,10,20,50")
    return values



# ---------------------------------------------------------------------------- option groups
def general_options(parser: argparse.ArgumentParser, *, json_flag=True, force=False, seed=False, n_jobs=False) -> None:
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
        group.add_argument("--n-jobs", type=processes, default=1, metavar="N",
                           help="parallel worker processes (default: 1; -1 = all cores)")


def input_options(parser: argparse.ArgumentParser, *, title="response file options") -> None:
    from irtlib.io import LAYOUTS, RULES

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
    group.add_argument("--threshold", type=unit_float, default=0.5,
                       help="threshold of --binarize lenient, between 0 and 1 (default 0.5)")
    group.add_argument("--sep", type=separator, metavar="C",
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


def check_engine(args) -> None:
    """``--engine pyirt`` without torch/pyro/py-irt: fail before reading any data."""
    if getattr(args, "engine", "map") == "pyirt":
        from irtlib.calibration.joint_map import load_pyirt_engine

        load_pyirt_engine()


def input_kwargs(args) -> dict:
    """The response-file options as :func:`irtlib.io.load_responses` keywords.

    Every command reads ``args.responses`` right after, so this first refuses a copy of the paper's
    authors' files (in the cache, the shared copy or ``$IRTLIB_PAPER_DATA``) whose bytes no longer
    check out (:func:`irtlib.datasets.authors.check_copy`), as ``paper-data`` and the loaders do.
    """
    from irtlib.datasets.authors import check_copy

    if getattr(args, "responses", None) is not None:
        check_copy(args.responses)
    return {"rule": args.binarize, "threshold": args.threshold, "layout": args.layout,
            "model_column": args.model_column, "item_column": args.item_column,
            "score_column": args.score_column, "key_column": args.key_column,
            "prompt_column": args.prompt_column, "benchmark": args.benchmark, "sep": args.sep,
            "metric": args.metric, "filter_name": args.filter_name, "positive": args.positive}



# ---------------------------------------------------------------------------- the agreement protocol's options
@contextlib.contextmanager
def ks_usage(args):
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


def protocol_parser(sub, name: str, handler, helptext: str, description: str) -> argparse.ArgumentParser:
    """``agreement`` and ``report``: the agreement protocol's options, shared."""
    from irtlib.calibration.joint_map import ENGINES
    from irtlib.selection.methods import ids

    methods_default = list(ids())       # all of the paper's eight, from the registry
    p = sub.add_parser(name, help=helptext, description=description)
    p.add_argument("responses", metavar="RESPONSES", help=RESPONSES_HELP)
    if name == "report":
        p.add_argument("-o", "--output", required=True, metavar="DIR", help="report directory to write")
    else:
        p.add_argument("-o", "--output", metavar="CSV", help="also write the per-split results as CSV")
    p.add_argument("--methods", type=method_list,
                   default=methods_default, metavar="M1,M2",
                   help=f"comma-separated methods (default: {','.join(methods_default)})")
    p.add_argument("--ks", type=int_list, metavar="K1,K2",
                   help="budgets (default: the protocol's log-spaced grid, up to 30%% of the items)")
    p.add_argument("--n-splits", type=positive_int if name == "agreement" else int_at_least(0),
                   default=100 if name == "agreement" else 20,
                   help=f"train/test splits (default: {100 if name == 'agreement' else 20}"
                        + ("; 0 skips the agreement section, e.g. for fewer than 12 models)"
                           if name == "report" else ")"))
    p.add_argument("--n-test", type=n_test, default=10, help="test models per split (default: 10; at least 2)")
    p.add_argument("--engine", choices=sorted(ENGINES), default="map", help=ENGINE_HELP)
    p.add_argument("--variance-threshold", type=variance, default=0.01, metavar="V",
                   help="leave out items with p(1-p) <= V (the paper: 0.01)")
    input_options(p)
    general_options(p, force=True, seed=True, n_jobs=True, json_flag=True)
    p.set_defaults(handler=handler)
    return p
