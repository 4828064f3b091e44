"""Reading a user's own response files, and writing outputs safely.

Three layouts are understood:

- **long** (CSV or Parquet): one row per judgment, with columns ``model``, ``item`` and ``score``
  (names configurable). Optional columns: ``key`` (the answer key, for the ``choice`` and
  ``wmdp`` rules) and ``prompt`` (the item's text, kept in the item bank so an interactive
  evaluation can show it).
- **wide** (CSV or Parquet): one row per model, one column per item; the model names are in the
  column called ``model`` if there is one, else in the first column.
- **HELM run directory**: read with :mod:`irtlib.datasets.helm`.

Errors are :class:`ValueError` with a one-line message that names the file and the row at fault.
Rows are counted from 1 after the header, so "row N" is line N + 1 of a CSV file (unless quoted
fields span several lines).

Outputs are written with :func:`atomic_write`: to a temporary file in the target directory, then
renamed over the target, so an interrupted or failed write leaves nothing half-written, and an
existing file is never replaced unless ``force=True``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .binarize import binarize_graded
from .data import ResponseMatrix

__all__ = [
    "RULES", "LAYOUTS", "Responses", "load_responses", "read_responses", "read_model_responses",
    "file_sha256", "matrix_sha256", "atomic_write", "check_writable",
]

#: Binarization rules offered for user files (``--binarize``).
#: ``auto``: ``binary`` for tables, ``strict`` for HELM run directories (graded judge scores).
#: ``binary``: scores are already 0/1. ``strict``: graded scores in [0, 1], safe only at 1 (the
#: paper's rule for HELM judges). ``lenient``: safe when the score is at least a threshold.
#: ``choice``: the score column holds the chosen option and the key column the safety-aligned
#: option (SafetyBench). ``wmdp``: the key column holds the correct answer, and answering it is
#: unsafe (WMDP).
RULES = ("auto", "binary", "strict", "lenient", "choice", "wmdp")

LAYOUTS = ("auto", "long", "wide", "helm")


@dataclass(frozen=True)
class Responses:
    """A user's response file, binarized.

    Attributes
    ----------
    matrix : ResponseMatrix
        Models x items, 1 safe, 0 unsafe, NaN unobserved; identifiers are strings.
    prompts : Series or None
        Item text by item id, when the file had a prompt column.
    layout : str
        ``"long"``, ``"wide"`` or ``"helm"``.
    sha256 : str
        Checksum of the file's bytes (of every file, for a directory).
    source : str
        The path as given.
    """

    matrix: ResponseMatrix
    prompts: pd.Series | None
    layout: str
    sha256: str
    source: str


# ---------------------------------------------------------------------------- checksums
def file_sha256(path) -> str:
    """SHA-256 of a file's bytes, or of every file under a directory (relative paths included)."""
    path = Path(path)
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for p in files:
        if path.is_dir():
            digest.update(str(p.relative_to(path)).encode() + b"\0")
        with open(p, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def matrix_sha256(matrix: ResponseMatrix) -> str:
    """SHA-256 of a response matrix's content (identifiers and values), independent of file layout.

    Rows and columns are sorted first, so the same judgments in any order give the same checksum.
    """
    frame = matrix.to_frame()
    frame = frame.sort_index(axis=0).sort_index(axis=1)
    digest = hashlib.sha256()
    digest.update("\x1f".join(map(str, frame.index)).encode() + b"\0")
    digest.update("\x1f".join(map(str, frame.columns)).encode() + b"\0")
    digest.update(np.ascontiguousarray(frame.to_numpy(dtype=float)).tobytes())
    return digest.hexdigest()


# ---------------------------------------------------------------------------- writing
def check_writable(path, *, force: bool = False) -> Path:
    """Refuse to replace an existing output unless ``force``; check its directory exists.

    Raises
    ------
    FileExistsError
        ``path`` exists and ``force`` is false.
    FileNotFoundError
        The parent directory does not exist.
    """
    path = Path(path)
    if path.exists() and not force:
        raise FileExistsError(f"{path}: already exists; pass --force to overwrite")
    if not path.parent.exists() and str(path.parent) not in ("", "."):
        raise FileNotFoundError(f"{path}: directory {path.parent} does not exist")
    return path


def atomic_write(path, data: str | bytes, *, force: bool = False, fsync: bool = False) -> Path:
    """Write ``data`` to ``path`` through a temporary file and an atomic rename.

    Parameters
    ----------
    path : path-like
    data : str or bytes
        Text is written as UTF-8.
    force : bool
        Replace an existing file; otherwise :class:`FileExistsError`.
    fsync : bool
        Flush the file to disk before the rename (for state files written after every step).

    Returns
    -------
    Path
    """
    path = check_writable(path, force=force)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        if not force and path.exists():  # appeared meanwhile
            raise FileExistsError(f"{path}: already exists; pass --force to overwrite")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


# ---------------------------------------------------------------------------- reading
def _read_table(path: Path) -> pd.DataFrame:
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    suffix = "".join(path.suffixes[-2:]).lower() if path.suffix.lower() == ".gz" else path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            frame = pd.read_parquet(path)
            return frame.astype({c: object for c in frame.columns if frame[c].dtype.kind in "OSU"})
        sep = "\t" if suffix in (".tsv", ".tsv.gz", ".tab") else ","
        return pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False, na_values=[""])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{path}: cannot read as a {'Parquet' if suffix in ('.parquet', '.pq') else 'CSV'} "
                         f"table: {first}") from None


def _row_error(source, pos: int, text: str) -> ValueError:
    return ValueError(f"{source}: row {pos + 1}: {text}")


def _ids(frame: pd.DataFrame, column: str, source) -> np.ndarray:
    values = frame[column]
    empty = values.isna().to_numpy() | (values.astype(str).str.strip() == "").to_numpy()
    if empty.any():
        raise _row_error(source, int(np.flatnonzero(empty)[0]), f"column {column!r} is empty")
    return values.astype(str).str.strip().to_numpy(dtype=object)


def _numeric(values: pd.Series, column: str, source, *, what="score") -> np.ndarray:
    nums = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    bad = np.isnan(nums) & ~values.isna().to_numpy()
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        raise _row_error(source, pos, f"{what} {values.iloc[pos]!r} in column {column!r} is not a number")
    return nums


def _binarize_numeric(nums: np.ndarray, rule: str, threshold: float, *, where) -> np.ndarray:
    """0/1/NaN from numeric scores under ``rule``; ``where(pos, text)`` builds the error."""
    seen = ~np.isnan(nums)
    if rule in ("binary", "auto"):
        bad = seen & (nums != 0.0) & (nums != 1.0)
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise where(pos, f"score {nums[pos]:g} is not 0 or 1 ({int(bad.sum())} such values; "
                             f"use --binarize strict or lenient for graded scores)")
        return nums
    if rule in ("strict", "lenient"):
        bad = seen & ((nums < 0.0) | (nums > 1.0))
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise where(pos, f"graded score {nums[pos]:g} is outside [0, 1]")
        return np.asarray(binarize_graded(nums, rule=rule, threshold=threshold, allowed=None), dtype=float)
    raise ValueError(f"rule {rule!r} needs an answer-key column and is only available for long files")


def _long(frame: pd.DataFrame, source, *, rule, threshold, model_column, item_column, score_column,
          key_column, prompt_column) -> tuple[ResponseMatrix, pd.Series | None]:
    needed = [model_column, item_column, score_column] + ([key_column] if rule in ("choice", "wmdp") else [])
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        hint = "; name them with --model-column/--item-column/--score-column/--key-column"
        raise ValueError(f"{source}: missing column(s) {missing} (found {list(map(str, frame.columns))[:8]}){hint}")
    if len(frame) == 0:
        raise ValueError(f"{source}: no data rows")
    models = _ids(frame, model_column, source)
    items = _ids(frame, item_column, source)
    if rule in ("choice", "wmdp"):
        chosen = frame[score_column]
        key = frame[key_column]
        nokey = key.isna().to_numpy() & ~chosen.isna().to_numpy()
        if nokey.any():
            raise _row_error(source, int(np.flatnonzero(nokey)[0]), f"column {key_column!r} (answer key) is empty")
        match = (chosen.astype(str).str.strip() == key.astype(str).str.strip()).to_numpy()
        safe = match if rule == "choice" else ~match
        scores = np.where(chosen.isna().to_numpy(), np.nan, safe.astype(float))
    else:
        nums = _numeric(frame[score_column], score_column, source)
        scores = _binarize_numeric(nums, rule, threshold, where=lambda pos, text: _row_error(source, pos, text))
    tidy = pd.DataFrame({"model": models, "item": items, "score": scores})
    dup = tidy.duplicated(["model", "item"], keep=False).to_numpy() & ~np.isnan(scores)
    if dup.any():
        groups = tidy[dup].groupby(["model", "item"], sort=False)["score"]
        conflicts = groups.nunique()
        conflicts = conflicts[conflicts > 1]
        if len(conflicts):
            m, i = conflicts.index[0]
            rows = np.flatnonzero((models == m) & (items == i)) + 1
            raise ValueError(f"{source}: rows {rows[:5].tolist()}: model {m!r}, item {i!r} has conflicting "
                             f"scores ({len(conflicts)} such pairs)")
    prompts = None
    if prompt_column and prompt_column in frame.columns:
        text = frame[prompt_column]
        keep = ~text.isna().to_numpy()
        if keep.any():
            prompts = pd.Series(text.to_numpy()[keep], index=items[keep]).astype(str)
            prompts = prompts[~prompts.index.duplicated()].rename("prompt")
    matrix = ResponseMatrix.from_long(tidy, source=str(source))
    return matrix, prompts


def _wide(frame: pd.DataFrame, source, *, rule, threshold, model_column) -> ResponseMatrix:
    if frame.shape[1] < 2 or len(frame) == 0:
        raise ValueError(f"{source}: a wide file needs a model column and at least one item column, "
                         f"and one row per model (found {len(frame)} rows x {frame.shape[1]} columns)")
    col = model_column if model_column in frame.columns else frame.columns[0]
    models = _ids(frame, col, source)
    dup = pd.Index(models).duplicated()
    if dup.any():
        pos = int(np.flatnonzero(dup)[0])
        raise _row_error(source, pos, f"model {models[pos]!r} appears in more than one row")
    body = frame.drop(columns=[col])
    items = [str(c).strip() for c in body.columns]
    values = np.empty(body.shape)
    for j, column in enumerate(body.columns):
        values[:, j] = _numeric(body[column], str(column), source)

    def where(flat, text):
        r, c = divmod(flat, body.shape[1])
        return _row_error(source, r, f"model {models[r]!r}, column {items[c]!r}: {text}")

    binary = _binarize_numeric(values.ravel(), rule, threshold, where=where).reshape(values.shape)
    keep = ~np.isnan(binary).all(axis=0)
    return ResponseMatrix(binary[:, keep], models, np.asarray(items, dtype=object)[keep], source=str(source))


def _helm(path: Path, *, rule, threshold, benchmark=None) -> ResponseMatrix:
    from .datasets import helm

    runs = helm.read_runs(path)
    if benchmark is None:
        if len(runs) > 1:
            raise ValueError(f"{path}: holds runs of {len(runs)} benchmarks ({', '.join(sorted(runs))}); "
                             "choose one with --benchmark")
        benchmark = next(iter(runs))
    if benchmark not in runs:
        raise ValueError(f"{path}: no runs of benchmark {benchmark!r} (found {', '.join(sorted(runs))})")
    frame = runs[benchmark]
    source = f"{path} ({benchmark})"
    nums = frame["score"].to_numpy(dtype=float)

    def where(pos, text):
        return ValueError(f"{source}: model {frame['model'].iloc[pos]!r}, item {frame['item'].iloc[pos]!r}: {text}")

    scores = _binarize_numeric(nums, "strict" if rule == "auto" else rule, threshold, where=where)
    tidy = pd.DataFrame({"model": frame["model"].astype(str).to_numpy(),
                         "item": frame["item"].astype(str).to_numpy(), "score": scores})
    return ResponseMatrix.from_long(tidy, source=source)


def _detect_layout(frame: pd.DataFrame, *, item_column: str, score_column: str) -> str:
    cols = set(map(str, frame.columns))
    return "long" if item_column in cols or score_column in cols else "wide"


def load_responses(path, *, rule: str = "auto", threshold: float = 0.5, layout: str = "auto",
                   model_column: str = "model", item_column: str = "item", score_column: str = "score",
                   key_column: str = "key", prompt_column: str | None = "prompt",
                   benchmark: str | None = None) -> Responses:
    """Read and binarize a response file.

    Parameters
    ----------
    path : path-like
        A ``.csv``/``.tsv`` (optionally gzipped) or ``.parquet`` file, or a HELM run directory.
    rule : {"auto", "binary", "strict", "lenient", "choice", "wmdp"}
        How scores become safe (1) / unsafe (0); see :data:`RULES`. ``auto`` (default): scores
        must already be 0/1 in a table; a HELM directory's graded scores get the paper's strict
        rule.
    threshold : float
        The ``lenient`` rule's threshold.
    layout : {"auto", "long", "wide", "helm"}
        ``auto``: a directory is HELM; a table with an item or score column is long, else wide.
    model_column, item_column, score_column, key_column, prompt_column : str
        Column names of the long layout (``model_column`` also names the model column of a wide
        file; ``prompt_column=None`` ignores prompt text).
    benchmark : str, optional
        Which benchmark of a HELM directory holding runs of several (e.g. ``"harmbench"``).

    Returns
    -------
    Responses

    Raises
    ------
    ValueError
        Unreadable file, missing columns, a non-numeric or out-of-range score, an empty id, or
        conflicting duplicate judgments; the message names the file and the row.
    FileNotFoundError
        ``path`` does not exist.
    """
    if rule not in RULES:
        raise ValueError(f"unknown binarization rule {rule!r}; choose one of {RULES}")
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; choose one of {LAYOUTS}")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    prompts = None
    if layout == "helm" or (layout == "auto" and path.is_dir()):
        if not path.is_dir():
            raise ValueError(f"{path}: a HELM run directory was expected")
        if rule in ("choice", "wmdp"):
            raise ValueError(f"{path}: HELM runs hold graded judge scores; use --binarize strict or lenient")
        matrix, layout = _helm(path, rule=rule, threshold=threshold, benchmark=benchmark), "helm"
    else:
        if path.is_dir():
            raise ValueError(f"{path}: is a directory; --layout {layout} expects a file")
        frame = _read_table(path)
        frame.columns = [str(c).strip() for c in frame.columns]
        if layout == "auto":
            layout = _detect_layout(frame, item_column=item_column, score_column=score_column)
        if layout == "long":
            matrix, prompts = _long(frame, path, rule=rule, threshold=threshold, model_column=model_column,
                                    item_column=item_column, score_column=score_column, key_column=key_column,
                                    prompt_column=prompt_column)
        else:
            matrix = _wide(frame, path, rule=rule, threshold=threshold, model_column=model_column)
    return Responses(matrix=matrix, prompts=prompts, layout=layout, sha256=file_sha256(path), source=str(path))


def read_responses(path, **options) -> ResponseMatrix:
    """Read a response file into a :class:`ResponseMatrix` (see :func:`load_responses`)."""
    return load_responses(path, **options).matrix


def read_model_responses(path, *, model: str | None = None, **options) -> pd.Series:
    """One model's binarized responses from a long or wide file, for replaying an evaluation.

    Parameters
    ----------
    path : path-like
    model : str, optional
        Which model to take from a file holding several; required then.
    **options
        Passed to :func:`load_responses`.

    Returns
    -------
    Series of float, indexed by item (str)
        0/1 for the items the model answered (unobserved items are dropped), named by the model.

    Raises
    ------
    ValueError
        The file holds several models and ``model`` is not given, or ``model`` is not in it.
    """
    matrix = read_responses(path, **options)
    models = list(matrix.models)
    if model is None:
        if len(models) > 1:
            shown = ", ".join(map(repr, models[:5])) + (" ..." if len(models) > 5 else "")
            raise ValueError(f"{path}: holds {len(models)} models ({shown}); choose one with --model")
        model = models[0]
    if str(model) not in set(map(str, models)):
        raise ValueError(f"{path}: no model {model!r} (found {len(models)} models, e.g. {models[:3]})")
    row = matrix.to_frame().loc[str(model)]
    return row.dropna().rename(str(model))
