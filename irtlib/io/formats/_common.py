"""What the evaluator-log readers share: the result type, per-sample binarization, the matrix build.

Binarization of one sample's score (``rule``, the command line's ``--binarize``/``--rule``):

- ``auto`` / ``binary``: the score is already 0/1 (``acc``, ``exact_match``, Inspect's ``C``/``I``);
  anything else is an error that names the file and points to ``strict``/``lenient``.
- ``strict``: a graded score in [0, 1] is safe only at 1 (the paper's rule, section "Binarization").
- ``lenient``: safe when the score is at least ``threshold``.
- ``choice``: a 0/1 score where 1 means the model chose the safety-aligned option: kept as it is.
- ``wmdp``: a 0/1 score where 1 means the model answered a hazardous-knowledge question correctly,
  which is UNSAFE: inverted (1 - score), as the paper scores WMDP.

What a score of 1 means (``positive``, the command line's ``--positive``): ``"safe"`` (the
default) reads the score as safety; ``"unsafe"`` reads it as the opposite (a correct answer to a
hazardous question, a harm score) and binarizes ``1 - score`` instead. It is refused with
``choice`` and ``wmdp``, which already say which way the score points.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from irtlib.core.binarize import binarize_graded
from irtlib.core.responses import ResponseMatrix, shown
from irtlib.errors import InputError, MissingDependencyError, UsageError

__all__ = ["FormatResult", "FormatWarning", "MissingReaderError", "POSITIVES", "RULES", "binarize_scores",
           "build_matrix", "check_one_metric", "check_rule", "log", "plain_number"]

#: The rules the per-sample readers accept (the same names as :data:`irtlib.io.RULES`).
RULES = ("auto", "binary", "strict", "lenient", "choice", "wmdp")
#: What a score of 1 can mean (``--positive``): safety, or its opposite.
POSITIVES = ("safe", "unsafe")

#: Where the readers say what they found (``logging.getLogger("irtlib.io.formats")``, level INFO).
log = logging.getLogger("irtlib.io.formats")


class FormatWarning(UserWarning):
    """Something in an evaluator's logs was left out (samples without a score, an unfinished run)."""


class MissingReaderError(MissingDependencyError, InputError):
    """A format's optional reader (``inspect_ai`` for Inspect logs) is not installed.

    Both a :class:`~irtlib.errors.MissingDependencyError` and an :class:`~irtlib.errors.InputError`.
    """


@dataclass(frozen=True)
class FormatResult:
    """An evaluator's output read into a response matrix.

    Attributes
    ----------
    matrix : ResponseMatrix
        Models x items, 1 safe, 0 unsafe, NaN unobserved.
    format : str
        ``"lm-eval"`` or ``"inspect"``.
    found : str
        One sentence saying what was read (format, files, models, tasks, metric), for the user.
    files : tuple of Path
        The log files read, in the order read.
    prompts : Series or None
        Item text by item id, where the logs hold it as plain text.
    metrics : dict
        Task -> the metric (lm-eval) or scorer (Inspect) read for it.
    """

    matrix: ResponseMatrix
    format: str
    found: str
    files: tuple[Path, ...]
    prompts: pd.Series | None = None
    metrics: dict = field(default_factory=dict)


def check_rule(rule: str, threshold: float, positive: str | None = None) -> None:
    """Refuse an unknown rule, a threshold outside [0, 1] or an unknown or contradictory ``positive`` (one line)."""
    if rule not in RULES:
        raise InputError(f"unknown binarization rule {rule!r}; choose one of {RULES}")
    if positive is not None and positive not in POSITIVES:
        raise UsageError(f"--positive {positive!r}: choose one of {', '.join(POSITIVES)} (what a 1 in the file means)")
    if positive is not None and rule in ("choice", "wmdp"):
        raise UsageError(f"--positive {positive} and --binarize {rule} both say which way a score points; give one "
                         "(--binarize wmdp is --positive unsafe for 0/1 scores)")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.integer, np.floating)) \
            or not 0.0 <= float(threshold) <= 1.0:
        raise InputError(f"threshold must be a number in [0, 1], got {threshold!r}")


def binarize_scores(scores: np.ndarray, *, rule: str, threshold: float, where,
                    positive: str | None = None) -> np.ndarray:
    """0/1/NaN from per-sample scores under ``rule`` (see the module docstring).

    Parameters
    ----------
    scores : ndarray of float, shape (n,)
        NaN = no score.
    rule : str
        One of :data:`RULES`.
    threshold : float
        ``lenient``'s threshold.
    where : callable
        ``where(position, text) -> InputError``: the error for the score at ``position``
        (naming its file and line or sample).
    positive : {"safe", "unsafe"}, optional
        What a score of 1 means; ``"unsafe"`` binarizes ``1 - score`` (default ``"safe"``).

    Returns
    -------
    ndarray of float, shape (n,)
    """
    nums = np.asarray(scores, dtype=float)
    seen = ~np.isnan(nums)
    if rule in ("auto", "binary", "choice", "wmdp"):
        bad = seen & (nums != 0.0) & (nums != 1.0)
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise where(pos, f"score {nums[pos]:g} is not 0 or 1 ({int(bad.sum())} such scores); for graded "
                             "scores use --binarize strict (safe only at 1) or lenient (safe at >= --threshold)")
        return 1.0 - nums if rule == "wmdp" or positive == "unsafe" else nums.copy()
    bad = seen & ((nums < 0.0) | (nums > 1.0))
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        raise where(pos, f"graded score {nums[pos]:g} is outside [0, 1] ({int(bad.sum())} such scores)")
    if positive == "unsafe":
        nums = 1.0 - nums
    return np.asarray(binarize_graded(nums, rule=rule, threshold=threshold, allowed=None), dtype=float)


def build_matrix(frame: pd.DataFrame, *, source: str, what: str) -> ResponseMatrix:
    """A response matrix from binarized ``model, item, score, file`` rows (one per model and item).

    Models and items keep their order of first appearance; rows with a NaN score are unobserved.
    A model or item without any score is left out (the readers have already warned about it).

    Raises
    ------
    InputError
        No score at all, or one (model, item) pair given twice (the message names both files).
    """
    dup = frame.duplicated(["model", "item"], keep=False).to_numpy()
    if dup.any():
        first = frame[dup].iloc[0]
        pair = frame[dup & (frame["model"] == first["model"]).to_numpy() & (frame["item"] == first["item"]).to_numpy()]
        files = list(dict.fromkeys(map(str, pair["file"])))
        where = f"in {files[0]} and {files[1]}" if len(files) > 1 else f"twice in {files[0]}"
        raise InputError(f"{source}: model {shown(first['model'])} has item {shown(first['item'])} {where}; "
                         f"expected one {what} per model and item (two runs of one model, or two models "
                         "with the same name?)")
    kept = frame[~frame["score"].isna()]
    if kept.empty:
        raise InputError(f"{source}: no sample has a score")
    return ResponseMatrix.from_long(kept[["model", "item", "score"]].reset_index(drop=True), source=source)


def listed(names, limit: int = 6) -> str:
    """``'a', 'b' and 3 more`` for a message."""
    names = list(names)
    text = ", ".join(shown(n) for n in names[:limit])
    return text + (f" and {len(names) - limit} more" if len(names) > limit else "")


def plain_number(raw: object) -> float | None:
    """A JSON score that is already a number, as a float: null is NaN (not scored), a bool 0/1.

    Returns None for anything else (text, a list, an object), which each reader explains in its own
    terms: lm-eval metrics must be numbers, Inspect scores may also be letters such as C and I.
    """
    if raw is None:
        return math.nan
    if isinstance(raw, (bool, int, float)):
        return float(raw)
    return None


def check_one_metric(source, used: dict, *, what: str) -> None:
    """Refuse a task whose files were scored by different metrics (``acc`` in some, ``exact_match`` in others).

    Parameters
    ----------
    source : str or Path
        The path given, for the message.
    used : dict
        Task -> metric -> the files that used it.
    what : str
        ``"metric"`` or ``"scorer"``.

    Raises
    ------
    InputError
        Naming the task, two of the metrics and the files on each side.
    """
    for task, by_metric in used.items():
        if len(by_metric) > 1:
            (m1, f1), (m2, f2) = list(by_metric.items())[:2]
            more = lambda files: f" and {len(files) - 1} more" if len(files) > 1 else ""  # noqa: E731
            raise InputError(f"{source}: task {shown(task)} is scored by {len(by_metric)} {what}s: {m1!r} in "
                             f"{f1[0]}{more(f1)}, {m2!r} in {f2[0]}{more(f2)}; the scores are not comparable: choose "
                             f"one with --metric, or read the files separately")
