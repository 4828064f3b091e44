r"""Reading lm-evaluation-harness per-sample logs (``lm_eval ... --output_path OUT --log_samples``).

What this reader relies on, read from lm-evaluation-harness 0.4's source
(``lm_eval/loggers/evaluation_tracker.py``: ``save_results_aggregated``, ``save_results_samples``;
``lm_eval/evaluator.py``: the logged sample; ``lm_eval/utils.py``: ``get_file_task_name``,
``sanitize_model_name``):

- **Layout.** ``OUT/<model_name_sanitized>/results_<date>.json`` (the aggregated results) and, per
  task, ``OUT/<model_name_sanitized>/samples_<task>_<date>.jsonl``. ``<date>`` is the run's
  ``datetime.now().isoformat()`` with ``:`` written ``-`` (so it has no ``_``), the same in the
  results file and the samples files of one run. The task is what lies between the first and
  the last ``_`` of the file name (lm-eval's own ``get_file_task_name``). When ``--output_path``
  names a ``.json`` file the files are written beside it and the results file is
  ``<stem>_<date>.json``. ``model_name_sanitized`` is the model name with runs of ``"<>:/|\?*[]``
  written ``__``.
- **A samples line** is one JSON object per document (and per filter, for a task with several
  filters, like gsm8k's ``strict-match`` and ``flexible-extract``): ``doc_id``, ``doc``,
  ``target``, ``arguments`` (``{"gen_args_0": {"arg_0": <prompt>, ...}, ...}``), ``resps``,
  ``filtered_resps``, ``filter``, ``metrics`` (the list of metric names), ``doc_hash``,
  ``prompt_hash``, ``target_hash``, and one field per metric holding that document's value
  (``"acc": 1.0``, ``"exact_match": 0.0``).
- **The model's name** is the results file's ``model_name`` (written since lm-eval 0.4.3), else the
  ``peft=``/``delta=``/``pretrained=``/``model=``/``path=``/``engine=`` value of its
  ``config.model_args`` (lm-eval's own order), else the directory's name (the sanitized name).

What was NOT verified: lm-eval itself was not run (it is heavy and needs models); the tests read
files hand-made to the layout above. Older lines without ``metrics`` or ``filter`` are accepted
(the metric is then the one numeric field outside the bookkeeping ones).

Each line becomes one judgment: model = the run's model, item = ``<task>/<doc_id>`` (and
``/<filter>`` when a file holds several filters and none was chosen), score = the named metric
binarized by the rule (:mod:`irtlib.io.formats._common`).
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from irtlib._typing import PathLike
from irtlib.core.responses import shown
from irtlib.errors import InputError

from ._common import (
    FormatResult,
    FormatWarning,
    binarize_scores,
    build_matrix,
    check_one_metric,
    check_rule,
    listed,
    log,
    plain_number,
)

__all__ = ["SAMPLES_GLOB", "is_samples_name", "samples_files", "parse_samples_name", "model_name_of",
           "read_lm_eval"]

#: The name lm-eval gives a per-sample log.
SAMPLES_GLOB = "samples_*.jsonl"
_NAME = re.compile(r"^samples_(?P<task>.+)_(?P<date>[^_]+)\.jsonl$")
#: Fields of a logged sample that are not metrics.
BOOKKEEPING = frozenset({"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics",
                         "doc_hash", "prompt_hash", "target_hash"})
#: ``config.model_args`` keys naming the model, in lm-eval's order (peft and delta come with pretrained).
MODEL_KEYS = ("peft", "delta", "pretrained", "model", "path", "engine")


def is_samples_name(path: PathLike) -> bool:
    """True when the file is named as lm-eval names a per-sample log (``samples_<task>_<date>.jsonl``)."""
    return _NAME.match(Path(path).name) is not None


def samples_files(root: PathLike) -> list[Path]:
    """Every ``samples_<task>_<date>.jsonl`` under ``root`` (any depth), sorted by path."""
    return sorted(p for p in Path(root).rglob(SAMPLES_GLOB) if p.is_file() and is_samples_name(p))


def parse_samples_name(path: PathLike) -> tuple[str, str]:
    """``(task, date)`` from a samples file's name.

    Raises
    ------
    InputError
        The name is not ``samples_<task>_<date>.jsonl``.
    """
    match = _NAME.match(Path(path).name)
    if match is None:
        raise InputError(f"{path}: not named as lm-evaluation-harness names a per-sample log "
                         "(samples_<task>_<date>.jsonl): the task is read from the file name; rename it so")
    return match["task"], match["date"]


def _from_model_args(args) -> str | None:
    if isinstance(args, str):
        pairs = dict(part.split("=", 1) for part in args.split(",") if "=" in part)
    elif isinstance(args, dict):
        pairs = args
    else:
        return None
    for key in MODEL_KEYS:
        value = pairs.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _load_results(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: cannot read the lm-evaluation-harness results file ({exc})") from None
    if not isinstance(doc, dict):
        raise InputError(f"{path}: an lm-evaluation-harness results file holds a JSON object, found a "
                         f"{type(doc).__name__}")
    return doc


def model_name_of(samples: PathLike) -> tuple[str, str]:
    """The model a samples file belongs to, and where the name was read.

    Parameters
    ----------
    samples : path-like
        A ``samples_<task>_<date>.jsonl`` file.

    Returns
    -------
    (str, str)
        The name, and ``"results_<date>.json: model_name"``, ``"...: config.model_args"`` or
        ``"the directory name"``.
    """
    samples = Path(samples)
    _, date = parse_samples_name(samples)
    folder = samples.parent
    candidates = [folder / f"results_{date}.json"] + sorted(p for p in folder.glob(f"*_{date}.json")
                                                             if p.name != f"results_{date}.json")
    for results in candidates:
        if not results.is_file():
            continue
        doc = _load_results(results)
        name = doc.get("model_name")
        if isinstance(name, str) and name.strip():
            return name.strip(), f"{results.name}: model_name"
        name = _from_model_args((doc.get("config") or {}).get("model_args")
                                if isinstance(doc.get("config"), dict) else None)
        if name:
            return name, f"{results.name}: config.model_args"
        break
    name = folder.resolve().name
    if not name:
        raise InputError(f"{samples}: no results_{date}.json beside it and no directory name to take the model's "
                         "name from (lm-eval writes OUT/<model>/samples_<task>_<date>.jsonl)")
    return name, "the directory name"


def _metric_names(obj: dict) -> list[str]:
    names = obj.get("metrics")
    if isinstance(names, list) and all(isinstance(n, str) for n in names):
        return names
    return [k for k, v in obj.items() if k not in BOOKKEEPING and isinstance(v, (int, float))]  # bool too


def _value(raw, *, metric: str, where) -> float:
    number = plain_number(raw)
    if number is not None:
        return number
    if isinstance(raw, (list, dict)):
        raise where(f"metric {metric!r} holds a JSON {'array' if isinstance(raw, list) else 'object'}, not one "
                    "number per sample (corpus-level metrics such as bleu are not per-sample scores); choose "
                    "a per-sample metric with --metric")
    raise where(f"metric {metric!r} holds {shown(raw)}, not a number")


def _prompt(obj: dict) -> str | None:
    args = obj.get("arguments")
    if isinstance(args, dict):
        first = args.get("gen_args_0")
        if isinstance(first, dict) and isinstance(first.get("arg_0"), str):
            return first["arg_0"]
    elif isinstance(args, list) and args and isinstance(args[0], list) and args[0] and isinstance(args[0][0], str):
        return args[0][0]
    return None


def _read_samples(path: Path, *, metric: str | None, filter_name: str | None):
    """The lines of one samples file: (rows [(doc_id, filter, value, line, prompt)], metric, filters)."""
    rows, chosen, names_seen = [], metric, None
    try:
        fh = open(path, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    with fh:
        try:
            for number, text in enumerate(fh, start=1):
                if not text.strip():
                    continue
                where = lambda msg, n=number: InputError(f"{path}: line {n}: {msg}")  # noqa: E731
                try:
                    obj = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise where(f"not valid JSON ({exc.msg} at column {exc.colno}); an lm-evaluation-harness "
                                "samples file holds one JSON object per line") from None
                if not isinstance(obj, dict):
                    raise where(f"expected a JSON object (a logged sample), found a JSON {type(obj).__name__}")
                if "doc_id" not in obj:
                    raise where("no doc_id: expected an lm-evaluation-harness logged sample (doc_id, doc, target, "
                                "arguments, resps, filtered_resps, filter, metrics and a field per metric)")
                if not isinstance(obj["doc_id"], (int, str)) or isinstance(obj["doc_id"], bool):
                    raise where(f"doc_id {shown(obj['doc_id'])} is not an integer or a string")
                if names_seen is None:
                    names_seen = _metric_names(obj)
                    if chosen is None:
                        if not names_seen:
                            raise where("no metric field (expected a 'metrics' list and a field per metric, "
                                        "e.g. \"acc\": 1.0)")
                        if len(names_seen) > 1:
                            raise InputError(f"{path}: holds several metrics ({listed(names_seen)}); choose one "
                                             "with --metric")
                        chosen = names_seen[0]
                line_filter = obj.get("filter")
                if filter_name is not None and line_filter != filter_name:
                    continue
                if chosen not in obj:
                    raise where(f"no metric {chosen!r} (this file's metrics: {listed(_metric_names(obj)) or 'none'});"
                                " choose one with --metric")
                rows.append((str(obj["doc_id"]), line_filter, _value(obj[chosen], metric=chosen, where=where),
                             number, _prompt(obj)))
        except UnicodeDecodeError:
            raise InputError(f"{path}: is not UTF-8 text; an lm-evaluation-harness samples file is JSON lines") \
                from None
    if names_seen is None:
        raise InputError(f"{path}: is empty; expected one logged sample per line")
    if not rows:
        raise InputError(f"{path}: no line with filter {filter_name!r} (its filters: "
                         f"{listed(sorted({str(f) for f in _filters_of(path)}))})")
    return rows, chosen


def _filters_of(path: Path) -> set:
    found = set()
    with open(path, encoding="utf-8") as fh:
        for text in fh:
            if text.strip():
                with_filter = json.loads(text)
                if isinstance(with_filter, dict):
                    found.add(with_filter.get("filter"))
    return found


def read_lm_eval(path: PathLike, *, rule: str = "auto", threshold: float = 0.5, metric: str | None = None,
                 filter_name: str | None = None, positive: str | None = None) -> FormatResult:
    """Read lm-evaluation-harness per-sample logs into a response matrix.

    Parameters
    ----------
    path : path-like
        One ``samples_<task>_<date>.jsonl`` file, or a directory: every samples file under it (any
        depth; lm-eval's ``--output_path``, holding a directory per model) is read, and together
        they give a models x items matrix.
    rule : {"auto", "binary", "strict", "lenient", "choice", "wmdp"}
        How a metric value becomes safe (1) / unsafe (0) (:mod:`irtlib.io.formats._common`); ``auto``
        is ``binary``: the metric must be 0/1.
    threshold : float
        ``lenient``'s threshold.
    metric : str, optional
        The metric to read (``"acc"``, ``"exact_match"``). Default: a file's only metric; a file
        with several (``acc`` and ``acc_norm``) needs it named.
    filter_name : str, optional
        Read only the lines of this filter (e.g. ``"strict-match"``). Default: every line; when a
        file holds several filters the item id ends with ``/<filter>``.
    positive : {"safe", "unsafe"}, optional
        What a value of 1 means (``--positive``); ``"unsafe"`` binarizes ``1 - value``.

    Returns
    -------
    FormatResult
        ``matrix`` (models in the order of the sorted file paths, items in order of first
        appearance), ``found`` (what was read), ``prompts`` (from ``arguments``).

    Raises
    ------
    InputError
        A file that is not a samples log, a line without ``doc_id`` or the metric, a value that is
        not a number or not 0/1 under ``binary``, one model and task in two files (two runs, or two
        models with the same name); every message names the file (and the line).
    """
    check_rule(rule, threshold, positive)
    path = Path(path)
    if path.is_dir():
        files = samples_files(path)
        if not files:
            raise InputError(f"{path}: holds no lm-evaluation-harness per-sample log (samples_<task>_<date>.jsonl, "
                             "written by lm_eval --log_samples --output_path)")
    else:
        files = [path]
    frames, runs, sources, metrics, prompts = [], {}, {}, {}, {}
    used_by: dict[str, dict[str, list[Path]]] = {}
    for file in files:
        task, _ = parse_samples_name(file)
        model, how = model_name_of(file)
        if (model, task) in runs:
            raise InputError(f"{file}: model {shown(model)}, task {shown(task)} is also in {runs[model, task]}; "
                             "expected one samples file per model and task (two runs of one model, or two models "
                             "with the same name: keep one, or move it out of the directory)")
        runs[model, task] = file
        sources.setdefault("the results files" if ":" in how else "the directory names", None)
        rows, used = _read_samples(file, metric=metric, filter_name=filter_name)
        metrics[task] = used
        used_by.setdefault(task, {}).setdefault(used, []).append(file)
        ids = [r[0] for r in rows]
        filters = [r[1] for r in rows]
        several = len(set(filters)) > 1
        items = [f"{task}/{d}/{f}" if several else f"{task}/{d}" for d, f in zip(ids, filters, strict=True)]
        lines = [r[3] for r in rows]
        seen: dict[str, int] = {}
        for item, line in zip(items, lines, strict=True):
            if item in seen:
                raise InputError(f"{file}: lines {seen[item]} and {line}: document {shown(item)} appears twice "
                                 "(one line per document and filter expected)")
            seen[item] = line
        values = np.array([r[2] for r in rows], dtype=float)
        blank = np.isnan(values)
        if blank.any():
            n_blank = int(blank.sum())
            warnings.warn(f"{file}: line {lines[int(np.flatnonzero(blank)[0])]}: {n_blank} of {len(values)} lines have "
                          f"a null or NaN {used!r}; they are left unobserved", FormatWarning, stacklevel=2)
        scores = binarize_scores(values, rule=rule, threshold=threshold, positive=positive,
                                 where=lambda pos, text, f=file, ls=lines: InputError(f"{f}: line {ls[pos]}: {text}"))
        frames.append(pd.DataFrame({"model": model, "item": items, "score": scores, "file": str(file)}))
        for item, row in zip(items, rows, strict=True):
            if row[4] is not None:
                prompts.setdefault(item, row[4])
    check_one_metric(path, used_by, what="metric")
    frame = pd.concat(frames, ignore_index=True)
    _warn_short_files(frame)
    _warn_unscored(frame, path)
    matrix = build_matrix(frame, source=str(path), what="samples line")
    models = list(matrix.models)
    named = "; model names from " + ", ".join(sorted(sources))
    found = (f"lm-evaluation-harness per-sample logs: {len(files)} samples file{'s' * (len(files) != 1)}, "
             f"{len(models)} model{'s' * (len(models) != 1)} ({listed(models, 4)}), {len(metrics)} "
             f"task{'s' * (len(metrics) != 1)} (" + ", ".join(f"{t}: {m}" for t, m in metrics.items())
             + f"), {matrix.shape[1]} items{named}")
    log.info("%s: %s", path, found)
    prompt_series = pd.Series(prompts, dtype=object, name="prompt") if prompts else None
    if prompt_series is not None:
        prompt_series = prompt_series[prompt_series.index.isin(matrix.items)]
    return FormatResult(matrix=matrix, format="lm-eval", found=found, files=tuple(files), prompts=prompt_series,
                        metrics=metrics)


def _warn_short_files(frame: pd.DataFrame) -> None:
    """Warn about a samples file that stops early: its documents are the first ones of a longer file of its task.

    What a run that crashed leaves behind; a model given other documents is not warned about (the
    missing cells are unobserved either way, and named when a model or item has none).
    """
    task = frame["item"].str.split("/", n=1).str[0]
    for _, rows in frame.assign(task=task).groupby("task", sort=False):
        per_file = {f: list(g["item"]) for f, g in rows.groupby("file", sort=False)}
        longest = max(per_file.values(), key=len)
        short = {f: items for f, items in per_file.items() if len(items) < len(longest) and
                 items == longest[:len(items)]}
        if short:
            file, items = next(iter(short.items()))
            missing = sum(len(longest) - len(v) for v in short.values())
            warnings.warn(f"{file}: stops after {len(items)} documents where another file of its task has "
                          f"{len(longest)} (a run cut short?); {missing} cells in {len(short)} "
                          f"file{'s' * (len(short) != 1)} like it are left unobserved", FormatWarning, stacklevel=3)


def _warn_unscored(frame: pd.DataFrame, source) -> None:
    """Warn about models and items without a single score (they are left out)."""
    scored = ~frame["score"].isna()
    for kind in ("model", "item"):
        names = pd.Index(pd.unique(frame[kind])).difference(pd.Index(pd.unique(frame.loc[scored, kind])), sort=False)
        if len(names):
            warnings.warn(f"{source}: left out {len(names)} {kind}{'s' * (len(names) != 1)} without a score: "
                          f"{listed(names, 5)}", FormatWarning, stacklevel=3)
