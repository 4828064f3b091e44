"""Reading a user's own response files: long and wide tables, HELM run directories, JSON lines.

Three layouts are understood:

- **long** (CSV or Parquet): one row per judgment, with columns ``model``, ``item`` and ``score``
  (names configurable). Optional columns: ``key`` (the answer key, for the ``choice`` and
  ``wmdp`` rules) and ``prompt`` (the item's text, kept in the item bank so an interactive
  evaluation can show it).
- **wide** (CSV or Parquet): one row per model, one column per item; the model names are in the
  column called ``model`` if there is one, else in the first column.
- **HELM run directory**: read with :mod:`irtlib.io.helm`.
- **JSON lines** (the paper's authors' format, :mod:`irtlib.io.jsonl`): one object per model,
  ``{"subject_id": ..., "responses": {item: 0/1}}``; recognised by a ``.jsonl``/``.ndjson`` name or,
  under any other name, by a first byte ``{`` (the messages then say the file was read as JSON lines).
- **lm-evaluation-harness per-sample logs** and **Inspect AI eval logs**: read by
  :mod:`irtlib.io.formats`, which also recognises every format (:func:`irtlib.io.formats.detect_format`).

Errors are :class:`ValueError` with a one-line message that names the file and the row at fault.
Rows are counted from 1 after the header, so "row N" is line N + 1 of a CSV file (unless quoted
fields span several lines).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from irtlib._typing import PathLike
from irtlib.core.binarize import binarize_graded
from irtlib.core.responses import ResponseMatrix, shown
from irtlib.errors import InputError, UsageError

from .checksums import check_recorded, file_sha256
from .csv_codes import CodedColumns, read_coded
from .known import known_direction, looks_like_wmdp

__all__ = [
    "RULES", "LAYOUTS", "Responses", "load_responses", "read_responses", "read_model_responses",
    "InputWarning",
]

#: Binarization rules offered for user files (``--binarize``).
#: ``auto``: ``binary`` for tables, ``strict`` for HELM run directories (graded judge scores).
#: ``binary``: scores are already 0/1. ``strict``: graded scores in [0, 1], safe only at 1 (the
#: paper's rule for HELM judges). ``lenient``: safe when the score is at least a threshold.
#: ``choice``: the score column holds the chosen option and the key column the safety-aligned
#: option (SafetyBench). ``wmdp``: the key column holds the correct answer, and answering it is
#: unsafe (WMDP).
RULES = ("auto", "binary", "strict", "lenient", "choice", "wmdp")

LAYOUTS = ("auto", "long", "wide", "helm", "jsonl", "lm-eval", "inspect")


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
        ``"long"``, ``"wide"``, ``"helm"``, ``"jsonl"``, ``"lm-eval"`` or ``"inspect"``.
    sha256 : str
        Checksum of the file's bytes (of every file, for a directory).
    source : str
        The path as given.
    found : str
        What was recognised and read, in one sentence (the command line prints it).
    positive : str
        What a 1 in the file was read as: ``"safe"``, ``"unsafe"`` (safety is ``1 - x``), or
        ``"rule"`` when ``--binarize choice``/``wmdp`` decided it.
    """

    matrix: ResponseMatrix
    prompts: pd.Series | None
    layout: str
    sha256: str
    source: str
    found: str = ""
    positive: str = "safe"


# ---------------------------------------------------------------------------- reading
class InputWarning(UserWarning):
    """Something in a response file was left out (e.g. a model with only blank scores)."""


#: Compressed-file signatures: the compression is read from the bytes, not from the file name.
_COMPRESSION_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "xz"),
                      (b"\x28\xb5\x2f\xfd", "zstd"), (b"PK\x03\x04", "zip"))
#: Field separators recognised in a header line.
SEPARATORS = (",", "\t", ";", "|")


#: What the readers accept, for the messages about files they cannot read.
READ_FORMATS = ("CSV/TSV text (, tab ; or | separated; optionally gzip, bz2, xz, zip or zstd compressed), "
                "Parquet, or a HELM run directory")


def _not_a_table(path: Path, head: bytes) -> str | None:
    """What a file that is no table irtlib reads looks like (Excel, JSON), from its first bytes; else None."""
    if head.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
        return "an Excel workbook (.xls)"
    if head.startswith(b"PK\x03\x04"):
        import zipfile

        with contextlib.suppress(zipfile.BadZipFile, OSError):
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
            if any(n.startswith("xl/") for n in names):
                return "an Excel workbook (.xlsx)"
        return None
    if head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"["):
        return "JSON or JSON Lines (it begins with '{' or '[')"
    return None


def _sniff(path: Path) -> tuple[str, str | None]:
    """``("parquet" | "csv", compression or None)`` from the file's first bytes."""
    with open(path, "rb") as fh:
        head = fh.read(64)
    looks = _not_a_table(path, head)
    if looks is not None:
        raise InputError(f"{path}: looks like {looks}, not a table irtlib reads; irtlib reads {READ_FORMATS}: "
                         "save it as CSV first")
    if head.startswith(b"PAR1"):
        return "parquet", None
    for magic, compression in _COMPRESSION_MAGIC:
        if head.startswith(magic):
            return "csv", compression
    return "csv", None


def _first_line(path: Path, compression: str | None, limit: int) -> bytes | None:
    """The first line of a (possibly compressed) text file, at most ``limit`` bytes; None for zip and zstd."""
    import bz2
    import gzip
    import lzma

    opener = {None: open, "gzip": gzip.open, "bz2": bz2.open, "xz": lzma.open}.get(compression)
    if opener is None:                        # zip, zstd: no cheap peek; pandas reads them
        return None
    with opener(path, "rb") as fh:
        return fh.readline(limit)


def _header_line(path: Path, compression: str | None) -> str:
    """The first line of a (possibly compressed) text file, decoded leniently."""
    raw = _first_line(path, compression, 1 << 20)
    return "" if raw is None else raw.decode("utf-8", errors="replace").lstrip("\ufeff")


#: The longest header line split by :func:`_header_fields` (longer ones are read by pandas).
MAX_HEADER = 1 << 26


def _header_fields(path: Path, sep: str, compression: str | None) -> list[str] | None:
    """The header's fields as pandas reads them, for a plain header line; None for pandas to read it.

    A line without quotes, carriage returns inside, NUL bytes or leading blanks, in UTF-8, is split at
    ``sep``: the fields ``pd.read_csv(header=None, nrows=1, dtype=str, keep_default_na=False)`` gives, without
    a pandas column per field (a wide file's header has one per item). Anything else (or an empty first
    line, which pandas skips) is left to pandas.
    """
    raw = _first_line(path, compression, MAX_HEADER)
    if raw is None or (len(raw) == MAX_HEADER and not raw.endswith(b"\n")):
        return None
    line = raw.removesuffix(b"\n").removesuffix(b"\r").removeprefix(b"\xef\xbb\xbf")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text or text[0] in " \t" or any(c in text for c in '"\r\x00'):
        return None
    return text.split(sep)


def _separator(header: str, path: Path, sep: str | None) -> str:
    """The field separator: ``sep`` if given, else the most frequent of :data:`SEPARATORS` in the header."""
    if sep is not None:
        return sep
    counts = {c: header.count(c) for c in SEPARATORS}
    best = max(counts, key=counts.get)
    if counts[best] > 0:
        return best
    names = [s.lower() for s in path.suffixes]
    return "\t" if ".tsv" in names or ".tab" in names else ","


def _check_header(names, source) -> None:
    """Reject duplicate column names (also names equal once surrounding whitespace is removed)."""
    seen: dict[str, int] = {}
    for pos, name in enumerate(names, start=1):
        key = str(name).strip()
        if key in seen:
            first = names[seen[key] - 1]
            same = "" if str(first) == str(name) else f" ({shown(str(first))} and {shown(str(name))} differ " \
                                                       "only by surrounding whitespace)"
            raise InputError(f"{source}: column {shown(key)} appears twice (columns {seen[key]} and {pos}){same}; "
                             "column names must be unique")
        seen[key] = pos


def _parquet_text(table, path: Path):
    """The Parquet table with its binary columns as UTF-8 text; a value that is not UTF-8 is named (row, column)."""
    import pyarrow as pa

    for pos, field in enumerate(table.schema):
        if not (pa.types.is_binary(field.type) or pa.types.is_large_binary(field.type)):
            continue
        try:
            text = table.column(pos).cast(pa.large_string())
        except pa.ArrowInvalid:
            values = table.column(pos).to_pylist()        # the error path only: find the first bad value
            row = next(i for i, v in enumerate(values) if v is not None and not _is_utf8(v))
            raise InputError(f"{path}: row {row + 1}: column {shown(field.name)} holds {shown(values[row])}, which "
                             "is not UTF-8 text; ids and scores must be text or numbers") from None
        table = table.set_column(pos, field.name, text)
    return table


def _is_utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@dataclass(frozen=True)
class _WideCodes:
    """A wide CSV file as read by :func:`irtlib.io.csv_codes.read_coded`.

    The model column (categorical), and the item columns' codes into their distinct texts (one dictionary).
    """

    models: pd.Series
    body: CodedColumns


def _read_table(path: Path, *, sep: str | None = None, progress: Callable[[int, int], None] | None = None,
                wide_model: Callable[[list[str]], int | None] | None = None) -> pd.DataFrame | _WideCodes:
    """The table of a CSV or Parquet file, every column text (categorical when pyarrow read a CSV file).

    ``wide_model(header)`` says where a wide file's model column is (None: not a wide file); such a CSV file
    is returned as :class:`_WideCodes`, without a pandas column per item.
    """
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    kind, compression = "csv", None
    try:
        kind, compression = _sniff(path)
        if kind != "parquet" and path.suffix.lower() in (".parquet", ".pq"):
            kind = "parquet"
            raise InputError("not a Parquet file (it does not begin with PAR1)")
        if kind == "parquet":
            import pyarrow.parquet as pq

            _check_header(pq.read_schema(path).names, path)
            frame = _parquet_text(pq.read_table(path), path).to_pandas()
            return frame.astype({c: object for c in frame.columns if frame[c].dtype.kind in "OSU"})
        sep = _separator(_header_line(path, compression), path, sep)
        names = _header_fields(path, sep, compression)
        if names is None:
            header = pd.read_csv(path, sep=sep, header=None, nrows=1, dtype=str, keep_default_na=False,
                                 compression=compression)
            names = [str(v) for v in header.iloc[0].tolist()] if len(header) else []
        _check_header(names, path)
        model = None if wide_model is None else wide_model(names)
        groups = None if model is None else [[model], [i for i in range(len(names)) if i != model]]
        coded = read_coded(path, sep=sep, compression=compression, names=names, groups=groups, progress=progress)
        if coded is not None and model is not None:
            return _WideCodes(coded[0].categorical(), coded[1])
        if coded is not None:
            return pd.DataFrame({c.names[0]: c.categorical() for c in coded}, copy=False)
        with warnings.catch_warnings():
            # rows longer than the header: pandas would silently take the first column as the index
            # (shifting every column by one) or drop the extra fields; both are wrong answers
            warnings.simplefilter("error", pd.errors.ParserWarning)
            try:
                return pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False, na_values=[""],
                                   compression=compression, index_col=False)
            except pd.errors.ParserWarning:
                width = len(names)
                raise InputError(f"{path}: rows have more fields than the header's {width} columns (a separator at "
                                 "the end of each line?): every row needs exactly one field per column") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError, ImportError,
            EOFError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        what = "Parquet" if kind == "parquet" else ("CSV" if compression is None else f"{compression}-compressed CSV")
        hint = " (give the field separator with --sep if it is not , tab ; or |)" \
            if kind != "parquet" and isinstance(exc, pd.errors.ParserError) else ""
        raise InputError(f"{path}: cannot read as a {what} table: {first}{hint}") from None
    except ValueError as exc:
        if str(exc).startswith(str(path)):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        table = "Parquet" if kind == "parquet" else "CSV"
        raise InputError(f"{path}: cannot read as a {table} table: {first}") from None


def _row_error(source, pos: int, text: str) -> InputError:
    return InputError(f"{source}: row {pos + 1}: {text}")


def _codes(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """A code per row (-1 where blank) and the distinct values the codes index (in no particular order).

    A categorical column (pyarrow's CSV reader: :func:`irtlib.io.csv_codes.read_coded`) already holds both: its codes
    are taken as they are, without hashing every row again; any other column is factorized.
    """
    if isinstance(values.dtype, pd.CategoricalDtype):
        return values.cat.codes.to_numpy(), np.asarray(values.cat.categories, dtype=object)
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    return codes, np.asarray(uniques, dtype=object)


def _id_codes(frame: pd.DataFrame, column: str, source) -> tuple[np.ndarray, np.ndarray]:
    """A code per row and the ids (surrounding whitespace removed) the codes index (in no particular order).

    Every check runs on the distinct values: an empty id, or two ids that differ only by surrounding
    whitespace ("m005" and "m005 " would become one model: refused rather than merged), is named by
    the first row holding it.
    """
    codes, uniques = _codes(frame[column])
    raw = np.array([str(v) for v in uniques], dtype=object)
    stripped = np.array([v.strip() for v in raw], dtype=object)
    blank = stripped == ""
    if blank.any() or codes.min(initial=0) < 0:                  # every row's check only if some id is empty
        empty = np.append(blank, True)[codes]                     # code -1 (blank) takes the True appended last
        if empty.any():
            raise _row_error(source, int(np.flatnonzero(empty)[0]), f"column {shown(column)} is empty")
    clash = pd.Index(stripped).duplicated(keep=False)
    if clash.any():
        first = _first_rows(codes, len(stripped))
        name = stripped[clash][np.argmin(first[clash])]                 # the clash whose first row comes first
        variants = np.flatnonzero(stripped == name)
        variants = variants[np.argsort(first[variants])][:2]             # its two variants seen first
        rows = (first[variants] + 1).tolist()
        raise InputError(f"{source}: rows {rows[0]} and {rows[1]}: {column} ids {shown(raw[variants[0]])} and "
                         f"{shown(raw[variants[1]])} differ only by surrounding whitespace; make them identical "
                         "or clearly different")
    return codes, stripped


def _first_rows(codes: np.ndarray, n: int) -> np.ndarray:
    """The first row holding each of the codes ``0..n-1`` (``codes.size`` for a code no row holds)."""
    first = np.full(n, codes.size, dtype=np.intp)
    held = codes >= 0
    if held.all():
        np.minimum.at(first, codes, np.arange(codes.size))
    else:
        rows = np.flatnonzero(held)
        np.minimum.at(first, codes[rows], rows)
    return first


def _ids(frame: pd.DataFrame, column: str, source) -> np.ndarray:
    """The ids of ``column``, one a row, checked as :func:`_id_codes` does."""
    codes, names = _id_codes(frame, column, source)
    return names[codes]


def _warn_dropped(source, kind: str, names) -> None:
    names = list(names)
    if names:
        listed = ", ".join(shown(str(n)) for n in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        warnings.warn(f"{source}: left out {len(names)} {kind}{'s' * (len(names) != 1)} with only blank scores: "
                      f"{listed}", InputWarning, stacklevel=4)


def _drop_blank(values: np.ndarray, models, items, source):
    """Drop models (rows) and items (columns) without an observed score, with a warning naming them."""
    models, items = np.asarray(models, dtype=object), np.asarray(items, dtype=object)
    rows = ~np.isnan(values).all(axis=1)
    cols = ~np.isnan(values).all(axis=0)
    if not rows.any():
        raise InputError(f"{source}: every score is blank")
    if rows.all() and cols.all():
        return values, models, items
    _warn_dropped(source, "model", models[~rows])
    _warn_dropped(source, "item", items[~cols])
    return values[rows][:, cols], models[rows], items[cols]


def _numeric(values: pd.Series, column: str, source, *, what="score") -> tuple[np.ndarray, np.ndarray]:
    """A code per row (-1 where blank) and the number of each distinct value.

    A value that is not a number is named with its first row. Converted once per distinct value (a long
    file's score column holds a handful of them).
    """
    codes, uniques = _codes(values)
    converted = pd.to_numeric(pd.Series(uniques, dtype=object), errors="coerce")
    distinct = converted.to_numpy(dtype=float, na_value=np.nan)
    if np.isnan(distinct).any():
        bad = np.append(np.isnan(distinct), False)[codes]       # code -1 (blank) takes the False appended last
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise _row_error(source, pos, f"{what} {shown(values.iloc[pos])} in column {shown(column)} is not a "
                                          "number")
    return codes, distinct


class _Refused(Exception):
    """A distinct value :func:`_binarize_numeric` refuses (the error is then built from the cells)."""


def _binarized(distinct: np.ndarray, codes: np.ndarray, rule: str, threshold: float, *, where,
               positive: str | None = None) -> np.ndarray:
    """:func:`_binarize_numeric` of the cells ``distinct[codes]`` (code -1: blank), computed once per distinct value.

    If a value is refused, the cells are binarized as they are, so that the error names the first cell at fault
    and counts the cells (``where(pos, text)`` builds it; ``pos`` is a position in ``codes.ravel()``).
    """
    table = np.append(distinct, np.nan)                        # code -1 takes the NaN appended last
    try:
        table = _binarize_numeric(table, rule, threshold, where=lambda pos, text: _Refused(), positive=positive)
    except _Refused:
        _binarize_numeric(table[codes].ravel(), rule, threshold, where=where, positive=positive)
        raise AssertionError("a value refused once is refused among the cells") from None
    return table[codes]


def _binarize_numeric(nums: np.ndarray, rule: str, threshold: float, *, where,
                      positive: str | None = None) -> np.ndarray:
    """0/1/NaN from numeric scores under ``rule``; ``where(pos, text)`` builds the error.

    ``choice`` and ``wmdp`` on a file without an answer-key column read 0/1 correctness scores, as the
    lm-eval and Inspect readers do: ``choice`` keeps them, ``wmdp`` inverts them (a correct answer is
    unsafe). ``positive="unsafe"`` (a 1 means unsafe) binarizes ``1 - score``.
    """
    seen = ~np.isnan(nums)
    if rule in ("binary", "auto", "choice", "wmdp"):
        bad = seen & (nums != 0.0) & (nums != 1.0)
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise where(pos, f"score {nums[pos]:g} is not 0 or 1 ({int(bad.sum())} such values; "
                             f"use --binarize strict or lenient for graded scores)")
        return 1.0 - nums if rule == "wmdp" or positive == "unsafe" else nums
    bad = seen & ((nums < 0.0) | (nums > 1.0))
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        raise where(pos, f"graded score {nums[pos]:g} is outside [0, 1]")
    if positive == "unsafe":
        nums = 1.0 - nums
    return np.asarray(binarize_graded(nums, rule=rule, threshold=threshold, allowed=None), dtype=float)


def _long(frame: pd.DataFrame, source, *, rule, threshold, model_column, item_column, score_column,
          key_column, prompt_column, positive=None) -> tuple[ResponseMatrix, pd.Series | None]:
    needed = [model_column, item_column, score_column] + ([key_column] if rule in ("choice", "wmdp") else [])
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        hint = "; name them with --model-column/--item-column/--score-column/--key-column"
        if frame.shape[1] == 1:
            hint += " (or give the field separator with --sep if it is not , tab ; or |)"
        raise InputError(f"{source}: missing column(s) {missing} (found {list(map(str, frame.columns))[:8]}){hint}")
    if len(frame) == 0:
        raise InputError(f"{source}: no data rows")
    model_codes, model_names = _id_codes(frame, model_column, source)
    item_codes, item_names = _id_codes(frame, item_column, source)
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
        codes, distinct = _numeric(frame[score_column], score_column, source)
        scores = _binarized(distinct, codes, rule, threshold, where=lambda pos, text: _row_error(source, pos, text),
                            positive=positive)
    if np.isnan(scores).any():
        seen = np.flatnonzero(~np.isnan(scores))
        seen_models, seen_items, seen_scores = model_codes[seen], item_codes[seen], scores[seen]
    else:                                        # every score given: the rows as they are, no copies
        seen = None
        seen_models, seen_items, seen_scores = model_codes, item_codes, scores
    cell = seen_models.astype(np.int64)
    cell *= len(item_names)
    cell += seen_items
    n_cells = len(model_names) * len(item_names)
    # a file in the matrix's order (model by model, every item in one order, each cell once): no pair twice,
    # models and items in the order of their codes, the scores the matrix's rows as they are
    in_order = cell.size == n_cells and cell[0] == 0 and bool((np.diff(cell) == 1).all())
    if not in_order:
        _refuse_conflicts(cell, seen_scores, seen, model_codes, item_codes, model_names, item_names, source)
    prompts = None
    if prompt_column and prompt_column in frame.columns:
        text = frame[prompt_column]
        with_text = np.flatnonzero(~text.isna().to_numpy())
        if with_text.size:
            _, first = np.unique(item_codes[with_text], return_index=True)
            rows = with_text[np.sort(first)]                   # each item's first row with a prompt, in file order
            prompts = pd.Series([str(v) for v in text.iloc[rows]], index=item_names[item_codes[rows]],
                                dtype=object, name="prompt")
    if cell.size == 0:
        raise InputError(f"{source}: every score is blank")
    if in_order:
        matrix = ResponseMatrix.from_checked(seen_scores.reshape(len(model_names), len(item_names)), model_names,
                                             item_names, source=str(source))
        return matrix, prompts
    # models and items in order of their first observed score, as ResponseMatrix.from_long orders them
    model_order, model_at = _first_seen(seen_models, len(model_names))
    item_order, item_at = _first_seen(seen_items, len(item_names))
    for kind, at, codes, names in (("model", model_at, model_codes, model_names), ("item", item_at, item_codes,
                                                                                      item_names)):
        if (at < 0).any():                          # in order of their first row
            blank = np.flatnonzero(at < 0)
            _warn_dropped(source, kind, names[blank[np.argsort(_first_rows(codes, len(names))[blank])]])
    values = np.full((model_order.size, item_order.size), np.nan)
    if _identity(model_order, len(model_names)) and _identity(item_order, len(item_names)):
        flat = cell                              # the codes are the matrix's order: each score's place is its cell
    else:
        flat = model_at[seen_models]             # each score's place in the matrix, as a flat index
        flat *= item_order.size
        flat += item_at[seen_items]
    values.ravel()[flat] = seen_scores
    # checked here: scores 0/1/NaN, ids distinct (as text, stripped), every model and item with a score
    matrix = ResponseMatrix.from_checked(values, model_names[model_order], item_names[item_order], source=str(source))
    return matrix, prompts


def _identity(order: np.ndarray, n: int) -> bool:
    return order.size == n and bool((order == np.arange(n)).all())


def _first_seen(codes: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The codes in order of first appearance in ``codes``, and each code's position in that order (-1: absent)."""
    if codes.size and codes[0] == 0 and codes.min() >= 0:
        running = np.maximum.accumulate(codes)
        if (np.diff(running) <= 1).all():        # each new code is the next one (pyarrow's and pandas' codes are)
            order = np.arange(int(running[-1]) + 1)
            at = np.full(n, -1, dtype=np.intp)
            at[order] = order
            return order, at
    first = _first_rows(codes, n)
    present = np.flatnonzero(first < codes.size)
    order = present[np.argsort(first[present], kind="stable")]
    at = np.full(n, -1, dtype=np.intp)
    at[order] = np.arange(order.size)
    return order, at


def _refuse_conflicts(cell, scores, rows, model_codes, item_codes, model_names, item_names, source) -> None:
    """An error naming the rows of the first (model, item) pair judged twice with different scores, if any.

    ``cell`` codes the pair of each observed row (``rows``, in file order; None: every row); repeated identical
    judgments are accepted (one is kept).
    """
    n_cells = len(model_names) * len(item_names)
    if n_cells <= 4 * cell.size + (1 << 20):
        hit = np.zeros(n_cells, dtype=bool)
        hit[cell] = True
        if np.count_nonzero(hit) == cell.size:
            return                              # no pair judged twice (a mark per cell, without sorting)
    order = np.argsort(cell, kind="stable")
    sorted_cells, sorted_scores = cell[order], scores[order]
    same_cell = sorted_cells[1:] == sorted_cells[:-1]
    differ = same_cell & (sorted_scores[1:] != sorted_scores[:-1])      # scores are 0 or 1
    if not differ.any():
        return
    conflicting = np.unique(sorted_cells[1:][differ])
    rows = np.arange(cell.size) if rows is None else rows
    first_row = {}
    for c, r in zip(cell[np.isin(cell, conflicting)], rows[np.isin(cell, conflicting)], strict=True):
        first_row.setdefault(int(c), int(r))
    m, i = divmod(min(first_row, key=first_row.get), len(item_names))
    at = np.flatnonzero((model_codes == m) & (item_codes == i)) + 1
    raise InputError(f"{source}: rows {at[:5].tolist()}: model {shown(model_names[m])}, item {shown(item_names[i])} "
                     f"has conflicting scores ({conflicting.size} such pairs)")


def _wide(frame: pd.DataFrame, source, *, rule, threshold, model_column, positive=None) -> ResponseMatrix:
    if frame.shape[1] < 2 or len(frame) == 0:
        hint = (" (if its fields are separated by something other than , tab ; or |, give the separator with "
                "--sep)") if frame.shape[1] == 1 else ""
        raise InputError(f"{source}: a wide file needs a model column and at least one item column, "
                         f"and one row per model (found {len(frame)} rows x {frame.shape[1]} columns){hint}")
    col = model_column if model_column in frame.columns else frame.columns[0]
    models = _ids(frame, col, source)
    dup = pd.Index(models).duplicated()
    if dup.any():
        pos = int(np.flatnonzero(dup)[0])
        raise _row_error(source, pos, f"model {shown(models[pos])} appears in more than one row")
    body = frame.drop(columns=[col])
    items = [str(c).strip() for c in body.columns]
    # every cell in one conversion, column by column in order (so the first bad cell named is the one a
    # per-column loop would find): a leaderboard has thousands of item columns
    cells = pd.Series(body.to_numpy(dtype=object).ravel(order="F"), dtype=object)
    nums = pd.to_numeric(cells, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    bad = np.isnan(nums) & ~cells.isna().to_numpy()
    if bad.any():
        c, r = divmod(int(np.flatnonzero(bad)[0]), body.shape[0])
        raise _row_error(source, r, f"score {shown(body.iat[r, c])} in column {shown(str(body.columns[c]))} is not "
                                    "a number")
    values = nums.reshape(body.shape, order="F")

    def where(flat, text):
        r, c = divmod(flat, body.shape[1])
        return _row_error(source, r, f"model {shown(models[r])}, column {shown(items[c])}: {text}")

    binary = _binarize_numeric(values.ravel(), rule, threshold, where=where, positive=positive).reshape(values.shape)
    binary, models, items = _drop_blank(binary, models, items, source)
    return ResponseMatrix(binary, models, items, source=str(source))


def _wide_coded(table: _WideCodes, source, *, rule, threshold, positive=None) -> ResponseMatrix:
    """:func:`_wide` of a file read as codes: the same matrix, warnings and errors, each text converted once."""
    codes, texts = np.ascontiguousarray(table.body.codes), table.body.texts
    n_rows, n_items = codes.shape
    if n_rows == 0:
        raise InputError(f"{source}: a wide file needs a model column and at least one item column, "
                         f"and one row per model (found 0 rows x {n_items + 1} columns)")
    col = str(table.models.name).strip()
    models = _ids(pd.DataFrame({col: table.models}, copy=False), col, source)
    dup = pd.Index(models).duplicated()
    if dup.any():
        pos = int(np.flatnonzero(dup)[0])
        raise _row_error(source, pos, f"model {shown(models[pos])} appears in more than one row")
    items = [str(c).strip() for c in table.body.names]
    distinct = pd.to_numeric(pd.Series(texts, dtype=object), errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    if np.isnan(distinct).any():
        bad = np.append(np.isnan(distinct), False)[table.body.codes]      # blank (-1) takes the False appended last
        if bad.any():                                 # the first bad cell column by column, as _wide names it
            c, r = divmod(int(np.flatnonzero(bad.ravel(order="F"))[0]), n_rows)
            raise _row_error(source, r, f"score {shown(texts[codes[r, c]])} in column {shown(items[c])} is not a "
                                        "number")

    def where(flat, text):
        r, c = divmod(flat, n_items)
        return _row_error(source, r, f"model {shown(models[r])}, column {shown(items[c])}: {text}")

    binary = _binarized(distinct, codes, rule, threshold, where=where, positive=positive)
    binary, models, items = _drop_blank(binary, models, items, source)
    return ResponseMatrix.from_checked(np.ascontiguousarray(binary), models, items, source=str(source))


def _wide_model(names: list[str], *, layout: str, model_column: str, item_column: str, score_column: str
                ) -> int | None:
    """The position of a wide file's model column, from its header; None if the file is not wide.

    The layout is judged as :func:`load_responses` judges it (a layout error is raised once the file is read).
    """
    stripped = [str(n).strip() for n in names]
    if layout not in ("auto", "wide") or len(stripped) < 2:
        return None
    if layout == "auto" and (item_column in stripped or score_column in stripped):
        return None
    return stripped.index(model_column) if model_column in stripped else 0


def _helm(path: Path, *, rule, threshold, benchmark=None, stat=None, positive=None) -> ResponseMatrix:
    from . import helm

    runs = helm.read_runs(path, stat=stat)
    if benchmark is None:
        if len(runs) > 1:
            raise InputError(f"{path}: holds runs of {len(runs)} benchmarks ({', '.join(sorted(runs))}); "
                             "choose one with --benchmark")
        benchmark = next(iter(runs))
    if benchmark not in runs:
        raise InputError(f"{path}: no runs of benchmark {benchmark!r} (found {', '.join(sorted(runs))})")
    frame = runs[benchmark]
    if positive == "unsafe":                  # the stat measures harm: its complement is the safety score
        frame = frame.assign(score=1.0 - frame["score"].astype(float))
    source = f"{path} ({benchmark})"
    rule = "strict" if rule == "auto" else rule
    if rule in ("strict", "lenient"):
        return helm.to_matrix(frame, rule=rule, threshold=threshold, source=source, name_rule=False)
    nums = frame["score"].to_numpy(dtype=float)

    def where(pos, text):
        model, item = shown(frame["model"].iloc[pos]), shown(frame["item"].iloc[pos])
        return InputError(f"{source}: model {model}, item {item}: {text}")

    scores = _binarize_numeric(nums, rule, threshold, where=where)      # "binary": scores already 0/1
    tidy = pd.DataFrame({"model": frame["model"].astype(str).to_numpy(),
                         "item": frame["item"].astype(str).to_numpy(), "score": scores})
    return ResponseMatrix.from_long(tidy, source=source)


def _jsonl(path: Path, *, rule: str, threshold: float, sniffed: bool, positive: str | None = None) -> ResponseMatrix:
    """A JSON-lines file binarized under ``rule`` (``auto``/``binary``/``choice``/``wmdp``: values must be 0/1).

    With no answer-key column, ``wmdp`` (like ``positive="unsafe"``) reads a 1 as a correct, unsafe answer.
    """
    from .jsonl import check_binary, read_jsonl_values

    source = f"{path} (read as JSON lines: it begins with '{{')" if sniffed else str(path)
    values, models, items, lines = read_jsonl_values(path, source=source)
    if rule in ("auto", "binary", "choice", "wmdp"):
        check_binary(values, items, source=source, lines=lines,
                     hint="; use --binarize strict or lenient for graded scores")
        if rule == "wmdp" or positive == "unsafe":
            values = 1.0 - values
    else:
        def where(flat, text):
            r, c = divmod(flat, values.shape[1])
            return InputError(f"{source}: line {lines[r]}: item {shown(items[c])}: {text}")

        values = _binarize_numeric(values.ravel(), rule, threshold, where=where,
                                   positive=positive).reshape(values.shape)
    values, models, items = _drop_blank(values, models, items, source)
    return ResponseMatrix(values, models, items, source=str(path))


def _table_matrix(frame: pd.DataFrame, path: Path, *, layout: str, rule, threshold, model_column, item_column,
                  score_column, key_column, prompt_column, positive) -> tuple[ResponseMatrix, pd.Series | None, str]:
    """The matrix, prompts and layout of a table read as a frame (long, or wide from pandas or Parquet)."""
    frame.columns = [str(c).strip() for c in frame.columns]
    if layout == "auto":
        layout = _detect_layout(frame, item_column=item_column, score_column=score_column, source=path)
    if layout == "long":
        matrix, prompts = _long(frame, path, rule=rule, threshold=threshold, model_column=model_column,
                                item_column=item_column, score_column=score_column, key_column=key_column,
                                prompt_column=prompt_column, positive=positive)
        return matrix, prompts, layout
    matrix = _wide(frame, path, rule=rule, threshold=threshold, model_column=model_column, positive=positive)
    return matrix, None, layout


def _detect_layout(frame: pd.DataFrame, *, item_column: str, score_column: str, source) -> str:
    cols = set(map(str, frame.columns))
    if item_column in cols:
        return "long"
    if score_column not in cols:
        return "wide"
    raise InputError(f"{source}: has a {score_column!r} column but no {item_column!r} column: if it is a wide file "
                     f"with an item named {score_column!r}, pass --layout wide; if it is a long file, name its item "
                     "column with --item-column")


def load_responses(path: PathLike, *, rule: str = "auto", threshold: float = 0.5, layout: str = "auto",
                   model_column: str = "model", item_column: str = "item", score_column: str = "score",
                   key_column: str = "key", prompt_column: str | None = "prompt",
                   benchmark: str | None = None, sep: str | None = None, metric: str | None = None,
                   filter_name: str | None = None, positive: str | None = None,
                   progress: Callable[[int, int], None] | None = None) -> Responses:
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
    layout : {"auto", "long", "wide", "helm", "jsonl", "lm-eval", "inspect"}
        ``auto`` recognises the format (:func:`irtlib.io.formats.detect_format`): lm-evaluation-harness
        ``samples_<task>_<date>.jsonl`` logs and Inspect AI ``.eval``/``.json`` logs (files or
        directories, :mod:`irtlib.io.formats`); a directory of HELM runs; a ``.jsonl``/``.ndjson``
        file, or a file whose first byte is ``{``, is JSON lines (the authors' format,
        :mod:`irtlib.io.jsonl`); a table with an item or score column is long, else wide.
    model_column, item_column, score_column, key_column, prompt_column : str
        Column names of the long layout (``model_column`` also names the model column of a wide
        file; ``prompt_column=None`` ignores prompt text).
    benchmark : str, optional
        Which benchmark of a HELM directory holding runs of several (e.g. ``"harmbench"``).
    sep : str, optional
        Field separator of a text table. Default: the most frequent of ``,``, tab, ``;`` and
        ``|`` in the header line. Compression (gzip, bz2, xz, zip, zstd) and Parquet are
        recognised from the file's first bytes, whatever its name.
    metric : str, optional
        The score to read: an lm-eval metric (``"acc"``), an Inspect scorer (``"match"``) or a
        HELM stat (``"safety_score"``). Default: the logs' only one (HELM: the scenario's).
    filter_name : str, optional
        lm-eval only: read the lines of this filter (e.g. ``"strict-match"``).
    positive : {"safe", "unsafe"}, optional
        What a score of 1 means, in every format: ``"safe"``, or ``"unsafe"`` (a correct answer
        to a hazardous question, a harm score), which reads ``1 - score`` as the safety score.
        Default: ``"safe"``, except for a file irtlib knows (:mod:`irtlib.io.known`: the authors'
        WMDP matrix stores 1 = correct, so it is read as ``"unsafe"``, with a warning saying so);
        a file or task whose name mentions WMDP, read as ``"safe"``, gets a warning. Refused with
        ``rule="choice"`` or ``"wmdp"``, which say which way the score points.
    progress : callable(done, total), optional
        Called as a CSV table is read, with the bytes of the file read so far and its size (the
        command line's reading bar); not called for the other formats.

    Returns
    -------
    Responses

    Raises
    ------
    ValueError
        Unreadable file, missing or duplicate columns, a non-numeric or out-of-range score, an
        empty id, ids differing only by surrounding whitespace, or conflicting duplicate
        judgments; the message names the file and the row or column.
    FileNotFoundError
        ``path`` does not exist.

    Warns
    -----
    InputWarning
        Models or items with only blank scores are left out (in every layout), and named.
    """
    if rule not in RULES:
        raise InputError(f"unknown binarization rule {rule!r}; choose one of {RULES}")
    from . import formats

    formats.check_rule(rule, 0.5, positive)
    if layout not in LAYOUTS:
        raise InputError(f"unknown layout {layout!r}; choose one of {LAYOUTS}")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.integer, np.floating)) \
            or not 0.0 <= float(threshold) <= 1.0:
        raise InputError(f"threshold must be a number in [0, 1], got {threshold!r}")
    if sep is not None and (not isinstance(sep, str) or len(sep) != 1 or sep in "\"\r\n"):
        raise InputError(f"sep must be one character (e.g. ',' or '\\t' or ';'), got {sep!r}")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    if not path.is_file() and not path.is_dir():
        # a pipe, FIFO or device (`<(...)`, mkfifo): the file is read several times (format, header, table,
        # checksum), which a stream cannot give, and a FIFO would block
        raise InputError(f"{path}: is a pipe or another stream, not a regular file; irtlib reads a response file "
                         "more than once (to detect its format and record its checksum): save it to a file first")
    prompts = None
    detected = formats.detect_format(path) if layout == "auto" else layout
    if path.is_file() and detected in ("table", "long", "wide") and filter_name is None and metric is None:
        frame, failed, digest = _read_hashed(
            path, sep=sep, progress=progress,
            wide_model=lambda names: _wide_model(names, layout=layout, model_column=model_column,
                                                 item_column=item_column, score_column=score_column))
        # what needs the hash comes before the parse's own errors and the matrix, as when the file is hashed first
        check_recorded(path, digest)          # a download whose bytes changed since (the hash seen is beside it)
        if rule not in ("choice", "wmdp"):
            positive = _known_direction(path, digest, positive)
        if failed is not None:
            raise failed
        if isinstance(frame, _WideCodes):
            layout = "wide"
            matrix = _wide_coded(frame, path, rule=rule, threshold=threshold, positive=positive)
        else:
            matrix, prompts, layout = _table_matrix(frame, path, layout=layout, rule=rule, threshold=threshold,
                                                    model_column=model_column, item_column=item_column,
                                                    score_column=score_column, key_column=key_column,
                                                    prompt_column=prompt_column, positive=positive)
        return _responses(path, matrix, prompts, layout=layout, digest=digest, rule=rule, positive=positive)
    digest = file_sha256(path)
    if path.is_file():
        check_recorded(path, digest)          # a download whose bytes changed since (the hash seen is beside it)
    if detected in formats.EVALUATOR_FORMATS:
        _no_column_options(path, detected, model_column=model_column, item_column=item_column,
                           score_column=score_column, key_column=key_column)
        got = formats.read_evaluator_logs(path, format=detected, rule=rule, threshold=threshold, metric=metric,
                                          filter_name=filter_name, positive=positive)
        if positive is None and rule in ("auto", "binary"):
            wmdp = [t for t in got.metrics if looks_like_wmdp(str(t))]
            if wmdp:
                _warn_direction(f"{path}: task {shown(wmdp[0])} looks like WMDP, whose {got.metrics[wmdp[0]]} is 1 "
                                "for a correct answer, which is unsafe; it was read as 1 = safe: give --binarize "
                                "wmdp (or --positive unsafe) if a 1 is a correct answer, --positive safe if not")
        return Responses(matrix=got.matrix, prompts=got.prompts, layout=got.format, sha256=digest,
                         source=str(path), found=got.found, positive=_applied(rule, positive))
    if path.is_file() and rule not in ("choice", "wmdp"):
        positive = _known_direction(path, digest, positive)
    if detected not in ("table", "long", "wide"):
        _no_column_options(path, detected, model_column=model_column, item_column=item_column,
                           score_column=score_column, key_column=key_column)
    if filter_name is not None:
        raise InputError(f"{path}: --filter chooses an lm-evaluation-harness filter; this is "
                         f"{formats.DESCRIPTIONS.get(detected, 'a table')}")
    if metric is not None and detected != "helm":
        raise InputError(f"{path}: --metric names an lm-eval metric, an Inspect scorer or a HELM stat; this is "
                         f"{formats.DESCRIPTIONS.get(detected, 'a table')}: name its score column with --score-column")
    if detected == "helm":
        if not path.is_dir():
            raise InputError(f"{path}: a HELM run directory was expected")
        if rule in ("choice", "wmdp"):
            raise InputError(f"{path}: HELM runs hold graded judge scores; use --binarize strict or lenient")
        matrix = _helm(path, rule=rule, threshold=threshold, benchmark=benchmark, stat=metric, positive=positive)
        layout = "helm"
    elif detected == "jsonl":
        if path.is_dir():
            raise InputError(f"{path}: is a directory; --layout jsonl expects a file")
        from .jsonl import SUFFIXES

        stem = Path(path.stem) if path.suffix.lower() in (".gz", ".bz2", ".xz") else path     # r.jsonl.gz
        sniffed = layout == "auto" and stem.suffix.lower() not in SUFFIXES
        matrix = _jsonl(path, rule=rule, threshold=threshold, sniffed=sniffed, positive=positive)
        layout = "jsonl"
    else:                                      # a table: a file is read above
        raise InputError(f"{path}: is a directory; --layout {layout} expects a file")
    return _responses(path, matrix, prompts, layout=layout, digest=digest, rule=rule, positive=positive)


def _read_hashed(path: Path, **options: Any) -> tuple[pd.DataFrame | _WideCodes | None, Exception | None, str]:
    """:func:`_read_table` of a file, its SHA-256 computed on a thread meanwhile: (table, its error or None, hash).

    The parse's error is returned rather than raised, for the caller to raise after the checks that need the
    hash (the hash recorded beside a download, a known file's direction): the same errors and warnings, in the
    same order, as when the file is hashed first.
    """
    from concurrent.futures import ThreadPoolExecutor

    frame, failed = None, None
    with ThreadPoolExecutor(1) as pool:                           # hashlib releases the GIL on large updates
        hashing = pool.submit(file_sha256, path)
        try:
            frame = _read_table(path, **options)
        except Exception as exc:
            failed = exc
        return frame, failed, hashing.result()


def _responses(path: Path, matrix: ResponseMatrix, prompts: pd.Series | None, *, layout: str, digest: str,
               rule: str, positive: str | None) -> Responses:
    """The :class:`Responses` of a file read (its one-sentence description logged)."""
    from . import formats

    found = formats.describe(layout, n_models=matrix.shape[0], n_items=matrix.shape[1])
    if positive == "unsafe":
        found += "; a 1 in it means unsafe, so the safety read is 1 - x"
    formats.log.info("%s: %s", path, found)
    return Responses(matrix=matrix, prompts=prompts, layout=layout, sha256=digest, source=str(path),
                     found=found, positive=_applied(rule, positive))


#: The column options and their defaults: a format without columns refuses any other value.
_COLUMN_DEFAULTS = {"model_column": "model", "item_column": "item", "score_column": "score", "key_column": "key"}


def _no_column_options(path: Path, detected: str, **given) -> None:
    """Refuse a column option (``--score-column x``) on a format that has no columns, rather than ignore it."""
    from . import formats

    for name, value in given.items():
        if value != _COLUMN_DEFAULTS[name]:
            option = "--" + name.replace("_", "-")
            hint = ("--metric names the score of lm-eval and Inspect logs" if detected in formats.EVALUATOR_FORMATS
                    else "its scores are the values of 'responses'")
            raise UsageError(f"{path}: {option} {value!r} names a column of a table, but this is "
                             f"{formats.DESCRIPTIONS.get(detected, detected)}, which has none ({hint}); "
                             f"drop {option}")


def _applied(rule: str, positive: str | None) -> str:
    """What a 1 was read as, for :attr:`Responses.positive`."""
    return "rule" if rule in ("choice", "wmdp") else (positive or "safe")


def _warn_direction(message: str) -> None:
    warnings.warn(message, InputWarning, stacklevel=4)


def _known_direction(path: Path, digest: str, positive: str | None) -> str | None:
    """``positive`` for a file: the user's choice, else the known file's direction (with a warning).

    A file irtlib knows by its checksum gets its direction; one known by its name only gets it too,
    with a warning that its bytes differ; a file whose name mentions WMDP, read as 1 = safe, gets
    a warning saying how to read it the other way.
    """
    found = known_direction(path, digest)
    if found is None:
        if positive is None and looks_like_wmdp(path.name):
            _warn_direction(f"{path}: the name says WMDP, where a 1 usually means a correct answer, which is unsafe; "
                            "it is read as 1 = safe: give --positive unsafe if a 1 is a correct answer, --positive "
                            "safe if not")
        return positive
    known, how = found
    by = "by its checksum" if how == "checksum" else "by its name only (its bytes differ from the released file)"
    if positive is None:
        if known.positive == "unsafe":
            _warn_direction(f"{path}: recognised {by} as {known.what}: a 1 in it means {known.meaning}, so the "
                            "safety read is 1 - x (--positive unsafe); give --positive safe to read it as stored")
        return known.positive
    if positive != known.positive:
        _warn_direction(f"{path}: recognised {by} as {known.what}, where a 1 means {known.meaning}; read with "
                        f"--positive {positive} as asked")
    return positive


def read_responses(path: PathLike, **options: Any) -> ResponseMatrix:
    """Read a response file into a :class:`ResponseMatrix` (see :func:`load_responses`)."""
    return load_responses(path, **options).matrix


def read_model_responses(path: PathLike, *, model: str | None = None, **options: Any) -> pd.Series:
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
            listed = ", ".join(map(shown, models[:5])) + (" ..." if len(models) > 5 else "")
            raise InputError(f"{path}: holds {len(models)} models ({listed}); choose one with --model")
        model = models[0]
    if str(model) not in set(map(str, models)):
        raise InputError(f"{path}: no model {shown(model)} (found {len(models)} models, "
                         f"e.g. {', '.join(shown(m) for m in models[:3])})")
    row = matrix.to_frame().loc[str(model)]
    return row.dropna().rename(str(model))
