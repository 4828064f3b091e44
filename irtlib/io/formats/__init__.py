"""Readers of what evaluators write: lm-evaluation-harness per-sample logs and Inspect AI eval logs.

- :mod:`irtlib.io.formats.lm_eval`: ``samples_<task>_<date>.jsonl`` files (``lm_eval --log_samples``),
  one file, or a directory of several models' outputs.
- :mod:`irtlib.io.formats.inspect_logs`: Inspect AI ``.eval``/``.json`` logs, read with
  ``inspect_ai.log`` (the optional extra ``pip install 'irtlib[inspect]'``).
- :mod:`irtlib.io.formats.detect`: which format a path is in (:func:`detect_format`), for
  :func:`irtlib.load_responses`'s ``layout="auto"``.

Both readers give a :class:`FormatResult`: the binarized :class:`~irtlib.core.responses.ResponseMatrix`, a
sentence saying what was found (also logged on the ``irtlib.io.formats`` logger at INFO), the files
read and the item text where the logs hold it. The package depends only on
:mod:`irtlib.errors`, :mod:`irtlib._typing`, :mod:`irtlib.core.responses` and :mod:`irtlib.core.binarize`.
"""

from __future__ import annotations

from irtlib._typing import PathLike
from irtlib.errors import InputError

from ._common import POSITIVES, RULES, FormatResult, FormatWarning, MissingReaderError, check_rule, log
from .detect import DESCRIPTIONS, FORMATS, describe, detect_format
from .inspect_logs import read_inspect
from .lm_eval import read_lm_eval

__all__ = ["FORMATS", "DESCRIPTIONS", "EVALUATOR_FORMATS", "POSITIVES", "RULES", "FormatResult", "FormatWarning",
           "MissingReaderError", "check_rule", "describe", "detect_format", "log", "read_evaluator_logs",
           "read_inspect", "read_lm_eval"]

#: The formats :func:`read_evaluator_logs` reads (the others are read by :mod:`irtlib.io`).
EVALUATOR_FORMATS = ("lm-eval", "inspect")


def read_evaluator_logs(path: PathLike, *, format: str, rule: str = "auto", threshold: float = 0.5,
                        metric: str | None = None, filter_name: str | None = None,
                        positive: str | None = None) -> FormatResult:
    """Read an evaluator's logs (``format`` ``"lm-eval"`` or ``"inspect"``) into a response matrix.

    Parameters
    ----------
    path : path-like
        A log file or a directory of logs.
    format : {"lm-eval", "inspect"}
    rule, threshold
        The binarization (:mod:`irtlib.io.formats._common`).
    metric : str, optional
        The lm-eval metric (``acc``) or the Inspect scorer (``match``) to read.
    filter_name : str, optional
        lm-eval only: the filter whose lines are read (e.g. ``strict-match``).
    positive : {"safe", "unsafe"}, optional
        What a score of 1 means (``--positive``); ``"unsafe"`` binarizes ``1 - score``.

    Returns
    -------
    FormatResult
    """
    if format == "lm-eval":
        return read_lm_eval(path, rule=rule, threshold=threshold, metric=metric, filter_name=filter_name,
                            positive=positive)
    if format == "inspect":
        if filter_name is not None:
            raise InputError(f"{path}: --filter chooses an lm-evaluation-harness filter; Inspect logs have none")
        return read_inspect(path, rule=rule, threshold=threshold, metric=metric, positive=positive)
    raise InputError(f"unknown evaluator format {format!r}; choose one of {EVALUATOR_FORMATS}")
