"""Reading response matrices in the paper's authors' JSON-lines format.

One JSON object per line and per model (the format of the authors' released data,
:data:`irtlib.datasets.authors.REPOSITORY`)::

    {"subject_id": "model-a", "responses": {"item1": 1, "item2": 0, ...}}
    {"subject_id": "model-b", "responses": {"item1": 0, "item2": 1, ...}}

Rows are the models in file order, columns the items in the order of the first line. Every line
must list the same items (``null`` marks an item a model did not answer). Blank lines are skipped;
other keys of a line are ignored. Every problem is one :class:`~irtlib.errors.InputError` naming
the file and the line (counted from 1, as an editor shows them).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np

from irtlib._typing import PathLike
from irtlib.core.responses import ResponseMatrix, shown
from irtlib.errors import InputError

from .compressed import decompressed

__all__ = ["SUFFIXES", "looks_like_jsonl", "read_jsonl_values", "parse_jsonl", "read_jsonl", "check_binary"]

#: File name endings read as JSON lines whatever their first byte.
SUFFIXES = (".jsonl", ".ndjson")


def looks_like_jsonl(path: PathLike) -> bool:
    """True when ``path`` ends in ``.jsonl``/``.ndjson`` or its first non-blank byte is ``{``.

    A table (CSV, TSV) never begins with ``{``; a compressed or Parquet file never does either.
    """
    path = Path(path)
    if path.suffix.lower() in SUFFIXES:
        return True
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{")


class _DuplicateKey(Exception):
    def __init__(self, key):
        super().__init__(key)
        self.key = key


def _pairs(pairs):
    """``object_pairs_hook`` for :func:`json.loads`: refuse a key given twice in one object."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return out


def _parse_line(text: str, where: str) -> tuple[str, dict]:
    try:
        obj = json.loads(text, object_pairs_hook=_pairs)
    except _DuplicateKey as exc:
        raise InputError(f"{where}: key {shown(exc.key)} appears twice in one object") from None
    except json.JSONDecodeError as exc:
        hint = ""
        if text.strip() in ("{", "[") or text.strip().startswith("["):
            hint = ("; a JSON-lines file holds one complete object per line (a pretty-printed JSON "
                    "document or a JSON array is not JSON lines)")
        raise InputError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno}){hint}") from None
    if not isinstance(obj, dict):
        raise InputError(f"{where}: expected a JSON object {{\"subject_id\": ..., \"responses\": {{...}}}}, "
                         f"found a JSON {type(obj).__name__}")
    missing = [k for k in ("subject_id", "responses") if k not in obj]
    if missing:
        found = ", ".join(shown(k) for k in list(obj)[:5]) or "none"
        raise InputError(f"{where}: missing key(s) {', '.join(map(repr, missing))} (found keys: {found})")
    subject = obj["subject_id"]
    if isinstance(subject, bool) or not isinstance(subject, (str, int)) or str(subject).strip() == "":
        raise InputError(f"{where}: 'subject_id' must be a non-empty string, got {shown(subject)}")
    responses = obj["responses"]
    if not isinstance(responses, dict):
        raise InputError(f"{where}: 'responses' must be an object {{item: 0 or 1}}, "
                         f"found a JSON {type(responses).__name__}")
    return str(subject), responses


def _row(responses: dict, items: list, index: dict, where: str, first: str) -> list:
    """One line's values in the first line's item order; a missing or extra item is an error."""
    if len(responses) == len(items) and list(responses) == items:
        return list(responses.values())                       # the usual case: same items, same order
    extra = [k for k in responses if k not in index]
    if extra:
        raise InputError(f"{where}: item {shown(extra[0])} is not on {first}"
                         f"{f' ({len(extra)} such items)' if len(extra) > 1 else ''}; every line must list "
                         "the same items (ragged file)")
    absent = [k for k in items if k not in responses]
    if absent:
        raise InputError(f"{where}: item {shown(absent[0])} of {first} is missing"
                         f"{f' ({len(absent)} such items)' if len(absent) > 1 else ''}; every line must list "
                         "the same items (write null for an item a model did not answer)")
    return [responses[k] for k in items]


def _numbers(cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Object array of JSON values -> (float array with NaN for null and non-numbers, is-a-number mask)."""
    is_number = np.frompyfunc(lambda v: v is None or type(v) in (int, float), 1, 1)(cells).astype(bool)
    return np.where(is_number, cells, np.nan).astype(float), is_number


def read_jsonl_values(path: PathLike, *, source: str | None = None) -> tuple[np.ndarray, list, list, list]:
    """The raw values of a JSON-lines response file, validated for shape but not for range.

    Parameters
    ----------
    path : path-like
    source : str, optional
        Name used in messages (default: the path).

    Returns
    -------
    values : ndarray of float, shape (n_models, n_items)
        The file's numbers, NaN for ``null``.
    models : list of str, length n_models
        ``subject_id`` of each line, in file order.
    items : list of str, length n_items
        Item ids, in the order of the first line.
    lines : list of int, length n_models
        The line (from 1) each model was read from, for messages.

    Raises
    ------
    InputError
        An empty file, a line that is not valid JSON or not an object, a missing ``subject_id`` or
        ``responses``, a line whose items differ from the first line's (naming the item), a value
        that is not a number or null (naming line, item and value), a subject id on two lines.
    """
    path = Path(path)
    source = str(path) if source is None else source
    return parse_jsonl(decompressed(path.read_bytes(), source=source), source=source)


def parse_jsonl(data: bytes, *, source: str) -> tuple[np.ndarray, list, list, list]:
    """:func:`read_jsonl_values` on a file's bytes (e.g. a download not yet written); ``source`` names it."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{source}: not UTF-8 text (byte {exc.start}); a JSON-lines file is UTF-8") from None
    lines = text.split("\n")              # not splitlines(): U+2028 may stand raw inside a JSON string
    numbered = [(n, line) for n, line in enumerate(lines, start=1) if line.strip()]
    if not numbered:
        raise InputError(f"{source}: empty file (a JSON-lines file needs one line per model)")
    models, rows, line_of = [], [], {}
    items: list = []
    index: dict = {}
    first = "line 1"
    for n, line in numbered:
        where = f"{source}: line {n}"
        subject, responses = _parse_line(line, where)
        if not rows:
            items = list(responses)
            if not items:
                raise InputError(f"{where}: 'responses' is empty (no items)")
            index = dict.fromkeys(items)
            first = f"line {n}"
        elif subject in line_of:
            raise InputError(f"{where}: subject_id {shown(subject)} already appears on line {line_of[subject]}; "
                             "each model must have one line")
        line_of[subject] = n
        models.append(subject)
        rows.append(_row(responses, items, index, where, first))
    flat = itertools.chain.from_iterable(rows)      # nested values (lists, objects) stay single cells
    cells = np.fromiter(flat, dtype=object, count=len(rows) * len(items)).reshape(len(rows), len(items))
    values, is_number = _numbers(cells)
    if not is_number.all():
        r, c = np.argwhere(~is_number)[0]
        raise InputError(f"{source}: line {numbered[r][0]}: item {shown(items[c])}: value {shown(cells[r, c])} "
                         f"is not a number ({int((~is_number).sum())} such values); responses must be 0 or 1")
    nan = np.isnan(values) & np.not_equal(cells, None)
    if nan.any():                        # NaN is not JSON (Python writes it): say so rather than drop it quietly
        import warnings

        from .formats import FormatWarning

        r, c = np.argwhere(nan)[0]
        warnings.warn(f"{source}: line {numbered[r][0]}: item {shown(items[c])}: value NaN ({int(nan.sum())} such "
                      "values: NaN is not JSON; null marks an unanswered item); they are left unobserved",
                      FormatWarning, stacklevel=3)
    lines = [n for n, _ in numbered]
    models = _stripped(models, "subject", source, where=lambda i: f"lines {lines[i[0]]} and {lines[i[1]]}")
    items = _stripped(items, "item", source, where=lambda i: f"line {lines[0]}")
    return values, models, items, lines


def _stripped(ids: list, what: str, source: str, *, where) -> list:
    """Ids without surrounding whitespace, as the table reader keeps them; two that differ only so are refused."""
    out = [i.strip() if isinstance(i, str) else i for i in ids]
    if out == ids:
        return out
    first: dict = {}
    for pos, key in enumerate(out):
        if key in first:
            a, b = ids[first[key]], ids[pos]
            raise InputError(f"{source}: {where((first[key], pos))}: {what} ids {shown(a)} and {shown(b)} differ only "
                             "by surrounding whitespace; make them identical or clearly different")
        first[key] = pos
    return out


def read_jsonl(path: PathLike, *, source: str | None = None) -> ResponseMatrix:
    """A binary JSON-lines response file (values 0, 1 or null) as a :class:`ResponseMatrix`.

    Parameters
    ----------
    path : path-like
    source : str, optional
        The matrix's ``source`` and the name used in messages (default: the path).

    Returns
    -------
    ResponseMatrix
        ``(n_models, n_items)``: models in file order, items in the first line's order, values as
        stored (1 = safe in the paper's convention; the WMDP file stores 1 = correct).

    Raises
    ------
    InputError
        As :func:`read_jsonl_values`, and a value other than 0, 1 or null (naming line, item, value).
    """
    source = str(path) if source is None else source
    values, models, items, lines = read_jsonl_values(path, source=source)
    check_binary(values, items, source=source, lines=lines)
    return ResponseMatrix(values, models, items, source=source)


def check_binary(values: np.ndarray, items: list, *, source: str, lines: list, hint: str = "") -> None:
    """Raise naming the line, item and value of the first cell of ``values`` that is not 0, 1 or NaN.

    ``values`` is (n_models, n_items); ``lines[r]`` is the file line of row ``r``.
    """
    bad = ~(np.isnan(values) | (values == 0.0) | (values == 1.0))
    if bad.any():
        r, c = np.argwhere(bad)[0]
        line = lines[r]
        raise InputError(f"{source}: line {line}: item {shown(items[c])}: value {values[r, c]:g} is not 0 or 1 "
                         f"({int(bad.sum())} such values){hint}")
