"""A CSV table read by pyarrow's multi-threaded parser, each column as integer codes into its distinct texts.

The readers of :mod:`irtlib.io.tables` need, of a response file's columns, only the distinct texts
(ids, scores) and which of them each row holds. pyarrow parses the file into plain text columns on
every core; each column, or a group of columns sharing one dictionary (the item columns of a wide
file), is then dictionary-encoded in one pass (one hash table over all its blocks, so the codes of
every block index the same texts), or without hashing every cell when the column allows it: texts of
one or two bytes (0/1 scores, a wide file's cells) by a table over their bytes, runs of one value (the
model column of a long file written model by model) by each run's first value, one sequence repeated
(the item column of that file) by its first period. UTF-8 is checked on the distinct texts, which
every cell holds one of, rather than by the parse on every cell. A leaderboard's long file of tens of
millions of rows, or a wide file of tens of thousands of columns, costs a few seconds; no Python
object is made per cell, nor a pandas object per column of a wide file.

Anything this reader does not accept as pandas would (rows of another width, quoted line breaks,
text that is not UTF-8, ...) returns None, and :mod:`irtlib.io.tables` reads the file with pandas,
whose messages name the row at fault.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["ARROW_COMPRESSION", "CodedColumns", "read_coded"]

#: Compressions pyarrow's CSV reader opens itself; the others (xz, zip) go through pandas.
ARROW_COMPRESSION = {None: None, "gzip": "gzip", "bz2": "bz2", "zstd": "zstd"}
#: Bytes of text a block of the parse holds at least, and at most (pyarrow's default is 1 MB).
MIN_BLOCK, MAX_BLOCK = 1 << 20, 64 << 20
#: Bytes a block holds per column at least: a block costs a fixed overhead per column, which dominates
#: a wide file's parse with 1 MB blocks (20,000 columns: a block of 50 rows).
BLOCK_PER_COLUMN = 4 << 10


@dataclass(frozen=True)
class CodedColumns:
    """Columns of a table as codes into one array of distinct texts.

    Attributes
    ----------
    names : list of str
        The columns, in file order.
    codes : ndarray of int32, shape (n_rows, len(names))
        The code of each cell (``texts[code]`` is its text), -1 for a blank cell. Fortran-ordered
        (a column's codes are contiguous).
    texts : ndarray of object (str)
        The distinct texts, each once, in order of first appearance.
    """

    names: list[str]
    codes: np.ndarray
    texts: np.ndarray

    def categorical(self, position: int = 0) -> pd.Series:
        """Column ``position`` as a pandas categorical Series (the texts as categories, blank as NaN)."""
        dtype = pd.CategoricalDtype(pd.Index(self.texts, dtype=object))
        values = pd.Categorical.from_codes(self.codes[:, position], dtype=dtype, validate=False)
        return pd.Series(values, name=self.names[position], copy=False)


def _block_size(path: Path, n_columns: int) -> int:
    """The parse's block size: an eighth of the file, at least :data:`BLOCK_PER_COLUMN` a column, within bounds."""
    wanted = max(path.stat().st_size // 8, BLOCK_PER_COLUMN * n_columns)
    return int(min(MAX_BLOCK, max(MIN_BLOCK, wanted)))


def read_coded(path: Path, *, sep: str, compression: str | None, names: list[str],
               groups: Sequence[Sequence[int]] | None = None,
               progress: Callable[[int, int], None] | None = None) -> list[CodedColumns] | None:
    """The CSV file's columns as :class:`CodedColumns`, one per group of column positions; None if pyarrow cannot.

    Parameters
    ----------
    path : Path
        The file (its first line, the header, is skipped: ``names`` are its fields).
    sep : str
        The field separator.
    compression : str or None
        As sniffed from the file's bytes; one pyarrow does not open (:data:`ARROW_COMPRESSION`) returns None.
    names : list of str
        The header's fields (unique, none empty: else None, so that pandas names the fault).
    groups : sequence of sequences of int, optional
        Column positions sharing one dictionary of texts (default: each column its own).
    progress : callable(done, total), optional
        Called with the bytes of the file read so far (compressed bytes for a compressed file).

    Returns
    -------
    list of CodedColumns, one per group, or None
    """
    if compression not in ARROW_COMPRESSION or not names or "" in names:     # pandas names an empty header
        return None
    import pyarrow as pa
    import pyarrow.csv as pcsv

    groups = [[i] for i in range(len(names))] if groups is None else [list(g) for g in groups]
    try:
        with _counted_stream(path, ARROW_COMPRESSION[compression], progress) as stream:
            table = pcsv.read_csv(
                stream,
                read_options=pcsv.ReadOptions(column_names=names, skip_rows=1,
                                              block_size=_block_size(path, len(names))),
                parse_options=pcsv.ParseOptions(delimiter=sep),
                # UTF-8 is checked on the distinct texts only (every cell holds one of them): _NotText
                convert_options=pcsv.ConvertOptions(column_types={n: pa.string() for n in names}, null_values=[""],
                                                    strings_can_be_null=True, quoted_strings_can_be_null=True,
                                                    check_utf8=False))
    except (pa.ArrowException, OSError, ValueError):
        return None
    columns = [[chunk for i in group for chunk in table.column(i).chunks] for group in groups]
    try:
        with ThreadPoolExecutor(min(len(groups), os.cpu_count() or 1)) as pool:      # pyarrow releases the GIL
            coded = list(pool.map(_encode, columns))
    except _NotText:
        return None
    return [CodedColumns([names[i] for i in group], codes.reshape((table.num_rows, len(group)), order="F"), texts)
            for group, (codes, texts) in zip(groups, coded, strict=True)]


class _NotText(Exception):
    """A cell's bytes are not UTF-8 (pandas then reads the file, and its error names the byte)."""


def _encode(chunks: list) -> tuple[np.ndarray, np.ndarray]:
    """One code a value of ``chunks`` (text arrays, in order; -1 where null) and the distinct texts they index.

    The texts are in order of first appearance. Three shapes of column are coded without hashing every value:
    texts of at most two bytes (a score column, a wide file's cells) from their bytes; a column of long runs
    of one value (the model column of a long file written model by model) by the first value of each run; a
    column repeating one sequence of values (the item column of that file, every model with the same items
    in the same order) by its first period.
    """
    import pyarrow as pa

    column = pa.chunked_array(chunks, type=pa.string())
    if len(column) == 0:
        return np.empty(0, dtype=np.int32), np.empty(0, dtype=object)
    if column.num_chunks > MAX_CHUNKS:                        # the item columns of a wide file: one array
        with contextlib.suppress(pa.ArrowInvalid, pa.ArrowCapacityError):     # unless its text exceeds 2 GB
            column = pa.chunked_array([column.combine_chunks()])
    short = _short_texts(column)
    if short is not None:
        return short
    heads = _run_heads(column)
    if heads is not None:
        codes, texts = _dictionary(_take(column, heads))
        return np.repeat(codes, np.diff(np.append(heads, len(column)))), texts
    period = _period(column)
    if period is not None:
        codes, texts = _dictionary(column.slice(0, period))
        return np.tile(codes, -(-len(column) // period))[:len(column)], texts
    return _dictionary(column)


#: Columns of more chunks than this are joined into one array before their texts are read as bytes.
MAX_CHUNKS = 64
#: Texts of at most this many bytes are coded from their bytes (:func:`_short_texts`).
SHORT = 2


def _short_texts(column) -> tuple[np.ndarray, np.ndarray] | None:
    """Codes and texts of a column whose every text has at most :data:`SHORT` bytes, by a table over their bytes.

    A text of ``k`` bytes is the number ``k * 65536 + byte1 * 256 + byte0``; one lookup table over these numbers
    gives the codes. None if a text is longer (or the column's text does not fit one array).
    """
    one_byte = _one_byte_texts(column)
    if one_byte is not None:
        return one_byte
    keys = []
    for chunk in column.chunks:
        key = _short_keys(chunk)
        if key is None:
            return None
        keys.append(key)
    key = keys[0] if len(keys) == 1 else np.concatenate(keys)
    null = 3 << 16                                           # the number of a null (above every text's)
    counts = np.bincount(key, minlength=null + 1)
    present = np.flatnonzero(counts[:null])
    order = _by_first_appearance(key, present)
    lookup = np.full(null + 1, -1, dtype=np.int32)
    lookup[order] = np.arange(order.size, dtype=np.int32)
    texts = []
    for k in order.tolist():
        size = k >> 16
        try:
            texts.append(bytes([k & 255, (k >> 8) & 255][:size]).decode("utf-8"))
        except UnicodeDecodeError:
            raise _NotText from None
    return lookup[key], np.array(texts, dtype=object)


def _one_byte_texts(column) -> tuple[np.ndarray, np.ndarray] | None:
    """Codes and texts of a column of one-byte texts without a null (0/1 scores), by a byte translation table."""
    parts = []
    for chunk in column.chunks:
        n = len(chunk)
        if n == 0:
            continue
        _, offsets, data = chunk.buffers()
        offsets = np.frombuffer(offsets, dtype=np.int32, count=n + 1, offset=chunk.offset * 4)
        if chunk.null_count or offsets[-1] - offsets[0] != n or not (np.diff(offsets) == 1).all():
            return None
        parts.append(data[int(offsets[0]):int(offsets[-1])].to_pybytes())
    text = b"".join(parts)
    seen = set(text[:4096])
    seen |= set(text.translate(None, bytes(sorted(seen))))     # the bytes the first rows do not hold, if any
    order = sorted(seen, key=lambda byte: text.find(bytes([byte])))      # by first appearance
    table = bytearray(256)
    for code, byte in enumerate(order):
        table[byte] = code
    try:
        texts = np.array([bytes([byte]).decode("utf-8") for byte in order], dtype=object)
    except UnicodeDecodeError:
        raise _NotText from None
    return np.frombuffer(text.translate(table), dtype=np.uint8).astype(np.int32), texts


def _short_keys(chunk) -> np.ndarray | None:
    """The number of each text of ``chunk`` (:func:`_short_texts`; ``3 << 16`` for a null), None if one is longer."""
    n = len(chunk)
    if n == 0:
        return np.empty(0, dtype=np.int32)
    _, offsets, data = chunk.buffers()
    offsets = np.frombuffer(offsets, dtype=np.int32, count=n + 1, offset=chunk.offset * 4)
    if offsets[-1] - offsets[0] > SHORT * n:
        return None
    sizes = np.diff(offsets)
    starts = offsets[:-1]
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, dtype=np.uint8)
    if chunk.null_count == 0 and offsets[-1] - offsets[0] == n and (sizes == 1).all():
        key = data[offsets[0]:offsets[-1]].astype(np.int32)   # one byte each (0/1 scores): the byte and its size
        key += 1 << 16
        return key
    if sizes.max() > SHORT:
        return None
    if data.size == 0:
        data = np.zeros(1, dtype=np.uint8)
    last = data.size - 1
    key = data[np.minimum(starts, last)].astype(np.int32)
    key[sizes == 0] = 0
    two = sizes == 2
    key[two] += data[np.minimum(starts[two] + 1, last)].astype(np.int32) << 8
    key += sizes << 16
    if chunk.null_count:
        key[~chunk.is_valid().to_numpy(zero_copy_only=False)] = 3 << 16
    return key


def _by_first_appearance(key: np.ndarray, present: np.ndarray) -> np.ndarray:
    """``present`` (the distinct values of ``key`` but the null's, sorted) in order of first appearance in ``key``."""
    first = np.full(present.size, key.size, dtype=np.intp)
    size = 1 << 12
    while True:
        head, where = np.unique(key[:size], return_index=True)
        at = np.searchsorted(head, present)
        found = (at < head.size) & (head[np.minimum(at, head.size - 1)] == present)
        first[found] = where[at[found]]
        missing = np.flatnonzero(~found)
        if missing.size <= 16 or size >= key.size:
            break
        size <<= 4
    for i in missing.tolist():                               # a value seen late: found by one pass each
        first[i] = int(np.argmax(key == present[i]))
    return present[np.argsort(first, kind="stable")]


def _run_heads(column) -> np.ndarray | None:
    """Where each run of equal values begins (a null is a run of its own), if runs average 8 values or more."""
    import pyarrow.compute as pc

    n = len(column)
    if n < 64:
        return None
    for stop in (min(n, 1 << 16), n):                        # a cheap look at the start, then the whole column
        differ = pc.fill_null(pc.not_equal(column.slice(1, stop - 1), column.slice(0, stop - 1)), True)
        if pc.sum(differ).as_py() >= stop // 8:
            return None
    heads = np.asarray(pc.indices_nonzero(differ), dtype=np.int64)
    return np.concatenate([np.zeros(1, dtype=np.int64), heads + 1])


def _take(column, rows: np.ndarray):
    """``column.take(rows)`` for increasing ``rows``, chunk by chunk (pyarrow joins the chunks first)."""
    import pyarrow as pa

    bounds = np.cumsum([0] + [len(chunk) for chunk in column.chunks])
    cuts = np.searchsorted(rows, bounds)
    return pa.chunked_array([chunk.take(pa.array(rows[a:b] - start)) for chunk, start, a, b
                             in zip(column.chunks, bounds[:-1], cuts[:-1], cuts[1:], strict=True) if b > a],
                            type=column.type)


def _period(column) -> int | None:
    """The period of a column repeating one sequence of values at least twice (no null in it); else None."""
    import pyarrow.compute as pc

    n = len(column)
    if n < 64 or not column[0].is_valid:
        return None
    period = pc.index(column, column[0], start=1).as_py()
    if period <= 0 or period > n // 2:
        return None
    for stop in (min(n, period + 4096), n):                  # a cheap look at the start, then the whole column
        same = pc.equal(column.slice(period, stop - period), column.slice(0, stop - period))
        if same.null_count or not pc.all(same).as_py():
            return None
    return period


def _dictionary(column) -> tuple[np.ndarray, np.ndarray]:
    """Codes (-1 where null) and distinct texts of a text column, by one hash table over all its chunks."""
    import pyarrow as pa
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(column)
    dictionary = encoded.chunk(encoded.num_chunks - 1).dictionary
    if not all(chunk.dictionary.equals(dictionary) for chunk in encoded.chunks):
        encoded = encoded.unify_dictionaries()                     # one memo table gives one dictionary: not needed
        dictionary = encoded.chunk(0).dictionary
    indices = pa.chunked_array([chunk.indices for chunk in encoded.chunks], type=pa.int32())
    if indices.null_count:
        indices = pc.fill_null(indices, -1)
    codes = np.concatenate([chunk.to_numpy() for chunk in indices.chunks]).astype(np.int32, copy=False)
    try:
        dictionary.validate(full=True)                           # UTF-8, not checked by the parse
    except pa.ArrowInvalid:
        raise _NotText from None
    return codes, np.asarray(dictionary.to_pylist(), dtype=object)


class _CountingFile(io.RawIOBase):
    """A binary file that reports the bytes read so far to ``progress(done, total)``."""

    def __init__(self, path: Path, progress: Callable[[int, int], None]):
        self._file, self._progress = open(path, "rb"), progress  # noqa: SIM115  (closed with this object)
        self._total, self._done = path.stat().st_size, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self._file.readinto(buffer)
        self._done += n or 0
        self._progress(self._done, self._total)
        return n

    def close(self) -> None:
        self._file.close()
        super().close()


def _counted_stream(path: Path, compression: str | None, progress: Callable[[int, int], None] | None):
    """Pyarrow's input stream of ``path`` (decompressed), reporting the file's bytes read when ``progress`` is given."""
    import pyarrow as pa

    if progress is None:
        return pa.input_stream(str(path), compression=compression)
    raw = pa.PythonFile(io.BufferedReader(_CountingFile(path, progress), buffer_size=1 << 20), mode="r")
    return raw if compression is None else pa.CompressedInputStream(raw, compression)
