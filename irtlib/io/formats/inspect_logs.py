"""Reading Inspect AI eval logs (``.eval`` and ``.json``) through ``inspect_ai.log``.

The logs are read with Inspect's own reader, :func:`inspect_ai.log.read_eval_log`, an OPTIONAL
dependency (``pip install 'irtlib[inspect]'``); without it, reading a log is one
:class:`~irtlib.io.formats.MissingReaderError` saying how to install it. What is read of a log:

- the model: ``log.eval.model`` (e.g. ``"openai/gpt-4o"``); the task: ``log.eval.task``;
- one judgment per sample: item ``<task>/<sample.id>``, score ``sample.scores[<scorer>].value``.
  The scorer is the one named by ``metric`` (``--metric``), or the log's only scorer.
- Score values become numbers as Inspect's ``value_to_float`` does: ``"C"`` (correct) 1,
  ``"I"`` (incorrect) 0, ``"P"`` (partial) 0.5, ``"N"`` (no answer) 0, ``yes``/``true`` 1,
  ``no``/``false`` 0, numbers and numeric strings as they are; unlike Inspect, any other value (a
  list, a dict, other text) is an error naming the file and the sample, not a silent 0.
- **Epochs.** A task run with ``epochs=n`` has ``n`` samples per id. Their values are averaged
  (Inspect's default epoch reducer, ``mean``) and the mean is binarized by the rule: under
  ``binary`` (the default) the epochs must agree (all 1 or all 0), else the message points to
  ``--binarize strict`` (safe only when every epoch was) or ``lenient`` with ``--threshold``
  (safe when at least that share of epochs was).
- A sample Inspect marks invalid (``sample.invalidation``, set by ``inspect_ai.log.invalidate_samples``)
  is left out, and a :class:`FormatWarning` says how many; a log whose samples are all invalid is
  left out whole.
- Two logs of one task scored by different scorers are refused (``--metric`` chooses one), as are
  sample ids that differ only in type (``7`` and ``"7"``).
- A sample without a value for the scorer (an errored sample, or one left unscored) is
  unobserved; they are counted in :attr:`FormatResult.found` and a :class:`FormatWarning` names
  the file. A log whose status is not ``success`` is read too, with a warning.
- A directory is searched (any depth) for ``*.eval`` files and for ``*.json`` files that begin as
  Inspect writes a log (:func:`looks_like_inspect_json`); several logs give a models x items
  matrix (one model and task in two logs is an error naming both).
"""

from __future__ import annotations

import math
import re
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from irtlib._typing import PathLike
from irtlib.core.responses import shown
from irtlib.errors import InputError

from ._common import (
    FormatResult,
    FormatWarning,
    MissingReaderError,
    binarize_scores,
    build_matrix,
    check_one_metric,
    check_rule,
    listed,
    log,
    plain_number,
)

__all__ = ["INSTALL_HINT", "looks_like_inspect_json", "looks_like_inspect_eval", "inspect_files", "read_inspect",
           "score_to_float"]

INSTALL_HINT = "pip install 'irtlib[inspect]'"
#: How Inspect begins a JSON log: an object whose first keys are ``version`` and ``status``.
_JSON_HEAD = re.compile(rb'^\s*\{\s*"version"\s*:\s*\d+\s*,\s*"status"\s*:')
#: Inspect's letter values and the text it reads as booleans (``inspect_ai.scorer.value_to_float``).
_LETTERS = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
_WORDS = {"yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}


def looks_like_inspect_json(path: PathLike) -> bool:
    """True when a file begins as Inspect writes a JSON log (``{"version": 2, "status": ...``)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return _JSON_HEAD.match(head.lstrip(b"\xef\xbb\xbf")) is not None


def looks_like_inspect_eval(path: PathLike) -> bool:
    """True for an ``.eval`` file, or a zip archive holding Inspect's ``header.json`` or ``_journal/``."""
    path = Path(path)
    if path.suffix.lower() == ".eval":
        return True
    try:
        with open(path, "rb") as fh:
            if fh.read(4) != b"PK\x03\x04":
                return False
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile):
        return False
    return "header.json" in names or any(n.startswith("_journal/") for n in names)


def inspect_files(root: PathLike) -> list[Path]:
    """Every Inspect log under ``root`` (``*.eval``, and ``*.json`` beginning as a log), sorted by path."""
    root = Path(root)
    found = [p for p in root.rglob("*.eval") if p.is_file()]
    found += [p for p in root.rglob("*.json") if p.is_file() and looks_like_inspect_json(p)]
    return sorted(found)


def _log_module(path: Path):
    try:
        from inspect_ai import log as inspect_log
    except ImportError:
        raise MissingReaderError(f"{path}: is an Inspect AI eval log; reading it needs the optional inspect_ai "
                                 f"package: {INSTALL_HINT}") from None
    return inspect_log


def score_to_float(value: object, *, where: Callable[[str], Exception]) -> float:
    """A score value as a number (see the module docstring); ``where(text)`` builds the error."""
    number = plain_number(value)
    if number is not None:
        return number
    if isinstance(value, str):
        text = value.strip()
        if text in _LETTERS:
            return _LETTERS[text]
        if text.lower() in _WORDS:
            return _WORDS[text.lower()]
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if math.isfinite(number):
            return number
        raise where(f"score {shown(value)} is not C, I, P, N, yes/no, true/false or a number")
    kind = "a list" if isinstance(value, list) else ("a dict with keys " + listed(value) if isinstance(value, dict)
                                                    else f"a {type(value).__name__}")
    raise where(f"score is {kind}, not one value per sample; irtlib reads scorers that give each sample one "
                "value (C/I, a number)")


def _read_one(path: Path, module):
    # Inspect picks the format by the name; an .eval renamed (e.g. to .zip) is still a zip archive
    form = "eval" if path.suffix.lower() != ".json" and looks_like_inspect_eval(path) else "auto"
    try:
        return module.read_eval_log(str(path), format=form)
    except (KeyboardInterrupt, SystemExit, MemoryError):
        raise
    except Exception as exc:  # noqa: BLE001 -- pydantic, zip, JSON and I/O errors all mean "not a readable log"
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"{path}: cannot read it as an Inspect AI eval log ({type(exc).__name__}: {first}); "
                         "expected a .eval or .json log written by Inspect") from None


def _choose_scorer(path: Path, samples, metric: str | None) -> str:
    names = list(dict.fromkeys(k for s in samples for k in (s.scores or {})))
    if metric is not None:
        if metric not in names:
            raise InputError(f"{path}: no scorer {metric!r} (its scorers: {listed(names) or 'none'}); name one with "
                             "--metric")
        return metric
    if not names:
        raise InputError(f"{path}: no sample has a score (was the task run with a scorer? `inspect score` adds one)")
    if len(names) > 1:
        raise InputError(f"{path}: holds several scorers ({listed(names)}); choose one with --metric")
    return names[0]


def _check_id_types(file: Path, samples) -> None:
    """Refuse two sample ids that differ in Inspect (``7`` and ``"7"``) but would be one item here."""
    kinds: dict[str, set] = {}
    for sample in samples:
        kinds.setdefault(str(sample.id), set()).add(type(sample.id).__name__)
    clash = next((k for k, v in kinds.items() if len(v) > 1), None)
    if clash is not None:
        raise InputError(f"{file}: sample ids {clash} (a number) and {clash!r} (text) are different samples in "
                         "Inspect but the same item id here; give the samples distinct ids")


def read_inspect(path: PathLike, *, rule: str = "auto", threshold: float = 0.5,
                 metric: str | None = None, positive: str | None = None) -> FormatResult:
    """Read Inspect AI eval logs into a response matrix.

    Parameters
    ----------
    path : path-like
        A ``.eval`` or ``.json`` log, or a directory of logs (any depth; Inspect's ``logs/``).
    rule : {"auto", "binary", "strict", "lenient", "choice", "wmdp"}
        How a sample's value (the mean over epochs) becomes safe (1) / unsafe (0); ``auto`` is
        ``binary`` (:mod:`irtlib.io.formats._common`).
    threshold : float
        ``lenient``'s threshold.
    metric : str, optional
        The scorer to read (a key of ``sample.scores``, e.g. ``"match"`` or
        ``"model_graded_qa"``). Default: the log's only scorer.
    positive : {"safe", "unsafe"}, optional
        What a value of 1 means (``--positive``); ``"unsafe"`` binarizes ``1 - value``.

    Returns
    -------
    FormatResult
        Models in the order of the sorted log paths, items (``<task>/<sample id>``) in order of
        first appearance; ``prompts`` from the samples' text inputs.

    Raises
    ------
    MissingReaderError
        ``inspect_ai`` is not installed.
    InputError
        A file Inspect cannot read, no samples or no scorer, a value that is not one number,
        a value that is not 0/1 under ``binary``, one model and task in two logs; every message
        names the file (and the sample).
    """
    check_rule(rule, threshold, positive)
    path = Path(path)
    if path.is_dir():
        files = inspect_files(path)
        if not files:
            raise InputError(f"{path}: holds no Inspect AI eval log (*.eval, or *.json written by Inspect)")
    else:
        files = [path]
    module = _log_module(files[0])
    frames, runs, scorers, prompts = [], {}, {}, {}
    scored_by: dict[str, dict[str, list[Path]]] = {}
    epochs_seen, unscored, invalid, n_samples = set(), 0, 0, 0
    for file in files:
        result = _read_one(file, module)
        model, task = str(result.eval.model), str(result.eval.task)
        if (model, task) in runs:
            raise InputError(f"{file}: model {shown(model)}, task {shown(task)} is also in {runs[model, task]}; "
                             "expected one log per model and task (two runs of one model, or two models with the "
                             "same name: keep one, or move it out of the directory)")
        runs[model, task] = file
        samples = list(result.samples or [])
        if not samples:
            raise InputError(f"{file}: holds no samples (a log written with --no-log-samples, or a run that "
                             "stopped before any sample finished)")
        n_samples += len(samples)
        valid = [s for s in samples if getattr(s, "invalidation", None) is None]
        if len(valid) < len(samples):
            invalid += len(samples) - len(valid)
            what = "all" if not valid else f"{len(samples) - len(valid)} of"
            warnings.warn(f"{file}: {what} {len(samples)} samples are marked invalid by Inspect (invalidate_samples); "
                          "they are left out" + (", and so is the log" if not valid else ""), FormatWarning,
                          stacklevel=2)
        if not valid:
            continue
        samples = valid
        if result.status != "success":
            warnings.warn(f"{file}: the run's status is {result.status!r}, not 'success'; reading the "
                          f"{len(samples)} samples it holds", FormatWarning, stacklevel=2)
        scorer = _choose_scorer(file, samples, metric)
        scorers[task] = scorer
        scored_by.setdefault(task, {}).setdefault(scorer, []).append(file)
        _check_id_types(file, samples)
        ids, values = [], []
        for sample in samples:
            where = lambda text, s=sample, f=file: InputError(  # noqa: E731
                f"{f}: sample {shown(s.id)} (epoch {s.epoch}): {text}")
            score = (sample.scores or {}).get(scorer)
            values.append(math.nan if score is None else score_to_float(score.value, where=where))
            ids.append(str(sample.id))
            epochs_seen.add(sample.epoch)
            if isinstance(sample.input, str):
                prompts.setdefault(f"{task}/{sample.id}", sample.input)
        raw = pd.DataFrame({"id": ids, "value": values})
        n_missing = int(raw["value"].isna().sum())
        if n_missing:
            unscored += n_missing
            warnings.warn(f"{file}: {n_missing} of {len(raw)} samples have no {scorer!r} score (errored or "
                          "unscored); they are left unobserved", FormatWarning, stacklevel=2)
        means = raw.groupby("id", sort=False)["value"].mean()        # over epochs; NaN only when none scored
        spread = raw.groupby("id", sort=False)["value"].agg(lambda v: v.max() - v.min())
        keys = means.index.to_numpy(dtype=object)

        def where(pos, text, f=file, k=keys, d=spread):
            note = (" (the mean over epochs that disagree)" if d.iloc[pos] > 0 else "")
            return InputError(f"{f}: sample {shown(k[pos])}: {text}{note}")

        scores = binarize_scores(means.to_numpy(dtype=float), rule=rule, threshold=threshold, where=where,
                                 positive=positive)
        frames.append(pd.DataFrame({"model": model, "item": [f"{task}/{k}" for k in keys], "score": scores,
                                    "file": str(file)}))
    if not frames:
        raise InputError(f"{path}: every one of its {n_samples} samples is marked invalid by Inspect; there is "
                         "nothing to read")
    check_one_metric(path, scored_by, what="scorer")
    frame = pd.concat(frames, ignore_index=True)
    matrix = build_matrix(frame, source=str(path), what="sample")
    models = list(matrix.models)
    epochs = max(epochs_seen) if epochs_seen else 1
    found = (f"Inspect AI eval logs: {len(files)} log{'s' * (len(files) != 1)}, {len(models)} "
             f"model{'s' * (len(models) != 1)} ({listed(models, 4)}), {len(scorers)} task{'s' * (len(scorers) != 1)} ("
             + ", ".join(f"{t}: scorer {s}" for t, s in scorers.items()) + f"), {matrix.shape[1]} items"
             + (f", up to {epochs} epochs per sample averaged" if epochs > 1 else "")
             + (f", {unscored} unscored samples left unobserved" if unscored else "")
             + (f", {invalid} samples marked invalid by Inspect left out" if invalid else ""))
    log.info("%s: %s", path, found)
    prompt_series = pd.Series(prompts, dtype=object, name="prompt") if prompts else None
    if prompt_series is not None:
        prompt_series = prompt_series[prompt_series.index.isin(matrix.items)]
    return FormatResult(matrix=matrix, format="inspect", found=found, files=tuple(files), prompts=prompt_series,
                        metrics=scorers)

