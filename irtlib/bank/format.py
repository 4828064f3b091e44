"""The item bank and its file format: a calibrated benchmark, saved once and reused.

An item bank is a CSV file whose first line is a comment holding a JSON header::

    # irtlib-bank {"format": "irtlib-bank/1", "bank_sha256": "...", "settings": {...}, ...}
    item,a,b,safe_rate,n_models,expected,residual[,prompt]
    q001,1.2345,-0.678,0.91,82,0.905,0.005
    ...

The header records how the bank was made (engine, binarization rule, variance threshold, seed),
the input's checksums, fit diagnostics, the calibration models' abilities (which the Fisher
subset methods need), and what the variance filter removed. ``bank_sha256`` is the SHA-256 of
the CSV body (everything after the first line): reading a bank whose body no longer matches it
fails, and adaptive-session state files record it so a state is never resumed against another
bank.

Predicted full-benchmark score. The bank holds only the items that survived the variance
filter, but a model's safety score on the full benchmark also counts the filtered, near-constant
items. The header stores how many items were filtered and the sum of their safe rates over the
calibration models; :meth:`ItemBank.predicted_full_score` adds that sum (each filtered item is
predicted at its calibration safe rate, which is at most 0.0101 from 0 or 1) to the bank items'
model-implied probabilities and divides by the full item count.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from irtlib._typing import ArrayLike, PathLike
from irtlib.calibration.joint_map import ENGINES
from irtlib.core.kernels import probability
from irtlib.core.responses import shown
from irtlib.errors import InputError
from irtlib.io.atomic import atomic_write

__all__ = ["BANK_FORMAT", "BANK_MAGIC", "SE_COLUMNS", "A_RANGE", "B_LIMIT", "ItemBank", "read_bank"]

BANK_FORMAT = "irtlib-bank/2"
#: The first line of every bank file starts with this (then the JSON header): what ``--force``
#: recognises as a file irtlib wrote.
BANK_MAGIC = "# irtlib-bank "
_REQUIRED = ("a", "b")
#: Optional columns: the standard errors of ``a`` and ``b`` (:mod:`irtlib.calibration.standard_errors`);
#: banks written before them read back without.
SE_COLUMNS = ("se_a", "se_b")
#: Item parameters outside these ranges are rejected: no calibration of real data gets near them
#: (MAP with the paper's LogNormal(0, 1) and Normal(0, 1) priors), and beyond them the
#: information and the standard error overflow or vanish (``a = 1e200`` gives SE 0).
A_RANGE = (1e-6, 1e3)
B_LIMIT = 1e3
#: How the body writes a float: 17 significant digits, which read back to the same double.
FLOAT_FORMAT = "%.17g"


def _formatted(items: pd.DataFrame) -> pd.DataFrame:
    """``items`` with its float columns as the text ``to_csv(float_format=FLOAT_FORMAT)`` writes for them.

    The same text (``FLOAT_FORMAT % x``, NaN as the empty field) made in one pass over each column's values
    instead of pandas' per-value formatter (about a third of the body's cost); anything else is left to pandas.
    """
    floats = [c for c, kind in items.dtypes.items() if kind == np.float64]
    if not floats or items.columns.duplicated().any():
        return items
    out = items.copy(deep=False)
    for column in floats:
        out[column] = np.array(["" if v != v else FLOAT_FORMAT % v for v in items[column].to_numpy().tolist()],
                               dtype=object)
    return out


def _plain_labels(items: pd.DataFrame) -> tuple[list, list] | None:
    """The table's row labels and column names when all are str and the names distinct, else None.

    The tables :func:`_csv_body` writes itself and :func:`_body_key` keys; pandas writes any other.
    """
    labels = items.index.tolist()
    names = list(items.columns)
    if not all(type(v) is str for v in labels) or not all(type(c) is str for c in names) \
            or len(set(names)) != len(names):
        return None
    return labels, names


def _csv_body(items: pd.DataFrame) -> str | None:
    r"""The body ``_formatted(items).to_csv(...)`` writes, made with the csv writer pandas itself calls; None elsewhere.

    For the tables a bank holds (a str index and str column names; float64, int64 and text columns) the rows are
    the fields pandas hands its writer: each float as ``FLOAT_FORMAT % x`` (NaN the empty field, as
    :func:`_formatted`), each int64 as ``str`` (numpy's ``astype(str)``), text as it is (None or NaN the empty
    field), and the same writer (``csv.writer``, QUOTE_MINIMAL, ``"\n"`` line ends) quotes them. The same text
    (tests/bank/test_bank.py compares both on hand-made and random banks) at about a quarter of the cost: pandas
    spends most of a bank's checksum setting the formatted columns and driving its formatter. Any other table
    (another dtype, a label that is not a str, duplicate columns) gives None: pandas writes it.
    """
    plain = _plain_labels(items)
    if plain is None:
        return None
    labels, names = plain
    fields = []
    for name in names:
        column = items[name]
        kind = column.dtype
        values = column.to_numpy().tolist()
        if kind == np.float64:
            fields.append(["" if v != v else FLOAT_FORMAT % v for v in values])
        elif kind == np.int64:
            fields.append([str(v) for v in values])
        elif isinstance(kind, np.dtype) and kind.kind == "O":     # numpy objects (not an extension dtype)
            if not all(type(v) is str or v is None or (isinstance(v, float) and v != v) for v in values):
                return None
            fields.append(values if all(type(v) is str for v in values) else
                          [v if type(v) is str else "" for v in values])
        else:
            return None
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["item", *names])
    writer.writerows(zip(labels, *fields, strict=True))
    return buf.getvalue()


def _body_key(items: pd.DataFrame) -> tuple | None:
    """Everything :func:`_csv_body`'s text depends on, compared exactly; None for a table it does not take.

    The labels and column names (all str), each column's dtype with its values' bytes (float64, int64) or its
    objects (a tuple: str, None or NaN). Equal keys give the same body text (a float is compared by its bytes,
    so -0.0 and 0.0, or two NaNs, differ and the body is made again: never a stale text).
    """
    plain = _plain_labels(items)
    if plain is None:
        return None
    labels, names = plain
    parts = []
    for _, column in items.items():
        kind = column.dtype
        if kind == np.float64 or kind == np.int64:
            parts.append((kind.str, column.to_numpy().tobytes()))
        elif isinstance(kind, np.dtype) and kind.kind == "O":
            parts.append(("O", tuple(column.to_numpy().tolist())))
        else:
            return None
    return tuple(labels), tuple(names), tuple(parts)


#: Placeholder of ``file_sha256`` while the file's checksum is computed.
_FILE_SHA_PLACEHOLDER = "0" * 64


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()



@dataclass
class ItemBank:
    """Calibrated 2PL item parameters plus the provenance of the calibration.

    Parameters
    ----------
    items : DataFrame, indexed by item id (str)
        Columns ``a`` and ``b`` (required), and usually ``safe_rate``, ``n_models``, ``expected``,
        ``residual`` (item fit) and ``prompt`` (item text).
    meta : dict
        The header (see the module docstring). ``bank_sha256`` is filled in by :meth:`to_csv`.

    Raises
    ------
    ValueError
        Missing ``a``/``b``, non-finite parameters, non-positive ``a``, duplicate item ids.
    """

    items: pd.DataFrame
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        items = self.items.copy()
        source = self.meta.get("path", "item bank")
        text = pd.Index(items.index).map(str)
        if text.duplicated().any():
            name = text[text.duplicated()][0]
            same = list(pd.Index(items.index)[text == name][:2])
            raise InputError(f"{source}: item {shown(same[0])} appears twice" if repr(same[0]) == repr(same[1]) else
                             f"{source}: items {shown(same[0])} and {shown(same[1])} are the same when written "
                             "as text (item ids are text: make them distinct)")
        items.index = pd.Index(text, name="item")
        for col in _REQUIRED:
            if col not in items.columns:
                raise InputError(f"{source}: item bank has no column {col!r}")
            items[col] = pd.to_numeric(items[col], errors="coerce")
            bad = ~np.isfinite(items[col].to_numpy(dtype=float))
            if bad.any():
                raise InputError(f"{source}: row {int(np.flatnonzero(bad)[0]) + 1}: {col} is not a finite number")
        if (items["a"] <= 0).any():
            raise InputError(f"{source}: row {int(np.flatnonzero(items['a'].to_numpy() <= 0)[0]) + 1}: "
                             "discrimination a must be positive")
        a, b = items["a"].to_numpy(dtype=float), items["b"].to_numpy(dtype=float)
        bad = (a < A_RANGE[0]) | (a > A_RANGE[1])
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise InputError(f"{source}: row {pos + 1}: item {shown(items.index[pos])}: discrimination a = {a[pos]:g} "
                             f"is out of range [{A_RANGE[0]:g}, {A_RANGE[1]:g}]")
        bad = np.abs(b) > B_LIMIT
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise InputError(f"{source}: row {pos + 1}: item {shown(items.index[pos])}: difficulty b = {b[pos]:g} "
                             f"is out of range [{-B_LIMIT:g}, {B_LIMIT:g}]")
        if len(items) == 0:
            raise InputError(f"{source}: the item bank is empty")
        for col in SE_COLUMNS:
            if col in items.columns:
                items[col] = pd.to_numeric(items[col], errors="coerce")
                value = items[col].to_numpy(dtype=float)
                bad = ~(np.isfinite(value) & (value >= 0))
                if bad.any():
                    pos = int(np.flatnonzero(bad)[0])
                    raise InputError(f"{source}: row {pos + 1}: item {shown(items.index[pos])}: {col} = "
                                     f"{items[col].iloc[pos]!r} is not a standard error (a finite number >= 0)")
        self.items = items

    # ------------------------------------------------------------------ accessors
    @property
    def item_ids(self) -> pd.Index:
        """Item identifiers in bank order."""
        return self.items.index

    @property
    def a(self) -> np.ndarray:
        """Discriminations, in bank order."""
        return self.items["a"].to_numpy(dtype=float)

    @property
    def b(self) -> np.ndarray:
        """Difficulties, in bank order."""
        return self.items["b"].to_numpy(dtype=float)

    @property
    def se_a(self) -> np.ndarray | None:
        """Standard errors of ``a`` in bank order, or None for a bank without them."""
        return self.items["se_a"].to_numpy(dtype=float) if "se_a" in self.items.columns else None

    @property
    def se_b(self) -> np.ndarray | None:
        """Standard errors of ``b`` in bank order, or None for a bank without them."""
        return self.items["se_b"].to_numpy(dtype=float) if "se_b" in self.items.columns else None

    def __len__(self) -> int:
        return len(self.items)

    @property
    def checksum(self) -> str:
        """SHA-256 of the bank's CSV body: the bank's identity."""
        return _sha256(self._body())

    @property
    def calibration_theta(self) -> pd.Series:
        """Abilities of the calibration models (empty when the header has none)."""
        models = self.meta.get("models") or {}
        return pd.Series(models.get("theta", []), index=pd.Index(models.get("name", []), name="model"),
                         name="theta", dtype=float)

    @property
    def prompts(self) -> pd.Series | None:
        """Item text by item id, if the bank has it."""
        return self.items["prompt"] if "prompt" in self.items.columns else None

    @property
    def filtered(self) -> dict:
        """What the variance filter removed: ``n_items``, ``n_safe``, ``n_unsafe``, ``safe_rate_sum``."""
        return dict(self.meta.get("filtered") or {"n_items": 0, "n_safe": 0, "n_unsafe": 0, "safe_rate_sum": 0.0})

    @property
    def n_items_full(self) -> int:
        """Items of the full benchmark: the bank plus the filtered ones."""
        return len(self) + int(self.filtered.get("n_items", 0))

    def __repr__(self) -> str:
        return (f"ItemBank({len(self)} items, {self.filtered.get('n_items', 0)} filtered, "
                f"sha256={self.checksum[:12]}...)")

    # ------------------------------------------------------------------ predictions
    def expected_bank_score(self, theta: ArrayLike) -> np.ndarray:
        """Mean over bank items of ``P(theta, a_j, b_j)``: the predicted score on the bank."""
        theta = np.asarray(theta, dtype=float)
        return probability(theta[..., None], self.a, self.b).mean(axis=-1)

    def predicted_full_score(self, theta: ArrayLike, *, known: pd.Series | None = None) -> np.ndarray:
        """Predicted safety score on the full benchmark (bank items plus filtered items).

        Parameters
        ----------
        theta : float or array_like
        known : Series of 0/1 indexed by item id, optional
            Responses already observed (e.g. the items of an adaptive test); they count as they
            are instead of by their model-implied probability.

        Returns
        -------
        float or ndarray
            ``(sum_j P_j(theta) + filtered safe-rate sum) / n_items_full`` with known items'
            ``P_j`` replaced by the observed response.
        """
        theta = np.asarray(theta, dtype=float)
        p = probability(theta[..., None], self.a, self.b)
        total = p.sum(axis=-1)
        if known is not None and len(known):
            pos = self.item_ids.get_indexer(pd.Index(known.index.astype(str)))
            ok = pos >= 0
            total = total - p[..., pos[ok]].sum(axis=-1) + np.asarray(known.to_numpy(dtype=float)[ok]).sum()
        return (total + float(self.filtered.get("safe_rate_sum", 0.0))) / self.n_items_full

    def interval_inflation(self, n_items: int) -> float:
        """Factor widening the 2PL score interval after ``n_items`` adaptive items.

        Interpolated (in log test length) from the cross-fitted check :func:`calibrate_bank` ran
        and stored in the header; 1.0 when the bank has no such check. Never below 1.
        """
        check = self.meta.get("interval_check") or {}
        ks, factors = check.get("k"), check.get("inflation")
        if not ks or not factors or n_items < 1:
            return 1.0
        value = float(np.interp(np.log(n_items), np.log(np.asarray(ks, float)), np.asarray(factors, float)))
        return max(1.0, value)

    def check_items(self, items: Sequence[str], *, source: str, require_all: bool = False,
                    min_overlap: int = 1) -> None:
        """Check that response data belong to this bank's benchmark.

        Raises
        ------
        ValueError
            Fewer than ``min_overlap`` of the bank's items appear in ``items`` ("a bank from
            another benchmark?"), or, with ``require_all``, some bank item is missing.
        """
        items = pd.Index(pd.Index(items).astype(str))
        present = self.item_ids.isin(items)
        if present.sum() < min_overlap:
            raise InputError(f"{source}: only {int(present.sum())} of its {len(items)} items are in the item bank "
                             f"{self.meta.get('path', '')!s} ({len(self)} items): responses from another benchmark?")
        if require_all and not present.all():
            missing = list(self.item_ids[~present][:3])
            raise InputError(f"{source}: {int((~present).sum())} bank items are missing from the responses, "
                             f"e.g. {missing}: responses from another benchmark?")

    # ------------------------------------------------------------------ file format
    def _body(self) -> str:
        """The CSV body (the checksum's text, the file's lines after the header).

        Kept with its :func:`_body_key`: a bank asked again (a session per model on one bank, its file
        written after its checksum) gives the kept text while its table is the same, value for value; a table
        edited in place since gets a new key and a new text.
        """
        key = _body_key(self.items)
        kept = self.__dict__.get("_body_kept")
        if key is not None and kept is not None and kept[0] == key:
            return kept[1]
        fast = _csv_body(self.items)
        body = fast if fast is not None else self._pandas_body()
        if key is not None:
            self.__dict__["_body_kept"] = (key, body)
        return body

    def __getstate__(self) -> dict:
        """The bank's fields for pickle and copy, without the kept body (made again when asked)."""
        return {k: v for k, v in self.__dict__.items() if k != "_body_kept"}

    def _pandas_body(self) -> str:
        """The body as pandas writes it (every table; :func:`_csv_body`'s reference)."""
        buf = io.StringIO()
        _formatted(self.items).to_csv(buf, index=True, index_label="item", float_format=FLOAT_FORMAT,
                                      lineterminator="\n")
        return buf.getvalue()

    def to_csv(self) -> str:
        """The bank file's text: the JSON header line, then the CSV body.

        The header ends with ``bank_sha256`` (the SHA-256 of the body: the bank's identity) and
        ``file_sha256`` (the SHA-256 of the whole file with this field's value set to 64 zeros),
        so that an edit anywhere, header included, is detected on reading.
        """
        body = self._body()
        meta = {k: v for k, v in self.meta.items() if k not in ("path", "format", "bank_sha256", "file_sha256")}
        meta = {"format": BANK_FORMAT, **_finite_or_none(meta), "bank_sha256": _sha256(body),
                "file_sha256": _FILE_SHA_PLACEHOLDER}
        self.meta["bank_sha256"] = meta["bank_sha256"]
        text = BANK_MAGIC + json.dumps(meta, sort_keys=False, default=_json_default, allow_nan=False) + "\n" + body
        digest = _sha256(text)
        self.meta["file_sha256"] = digest
        return text.replace(f'"file_sha256": "{_FILE_SHA_PLACEHOLDER}"', f'"file_sha256": "{digest}"', 1)

    def write(self, path: PathLike, *, force: bool = False) -> Path:
        """Write the bank atomically; refuse to overwrite an existing file unless ``force``.

        With ``force`` only an existing item bank is replaced, never another kind of file.
        """
        return atomic_write(path, self.to_csv(), force=force, magic=BANK_MAGIC)

    @classmethod
    def read(cls, path: PathLike) -> ItemBank:
        """Read a bank file, checking its header and its checksum.

        Raises
        ------
        ValueError
            Not an irtlib bank, corrupt header, body modified after writing (checksum mismatch),
            or invalid item parameters; the message names the file (and the row).
        FileNotFoundError
        """
        path = Path(path)
        if path.is_dir():
            raise IsADirectoryError(f"{path}: is a directory, not an item bank file; give the bank file that "
                                    "`irtlib calibrate -o` wrote")
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such item bank file")
        try:
            with open(path, "rb") as fh:         # read once: a pipe (`<(cat bank.csv)`) works too
                raw = fh.read()
            text = raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")   # as read_text's newlines
        except UnicodeDecodeError:
            raise InputError(f"{path}: not an irtlib item bank (not UTF-8 text)") from None
        if text.startswith("\ufeff"):
            raise InputError(f"{path}: begins with a byte-order mark (an editor re-saved it?); irtlib writes banks "
                             "without one and checks their bytes: remove the first 3 bytes, or recalibrate")
        first, _, body = text.partition("\n")
        if not first.startswith(BANK_MAGIC):
            raise InputError(f"{path}: not an irtlib item bank (line 1 should start with {BANK_MAGIC.strip()!r}; "
                             "make one with `irtlib calibrate`)")
        try:
            meta = json.loads(first[len(BANK_MAGIC):])
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: line 1: corrupt bank header ({exc.msg} at column {exc.colno})") from None
        if not isinstance(meta, dict) or meta.get("format") != BANK_FORMAT:
            got = meta.get("format") if isinstance(meta, dict) else meta
            older = " (written by an older irtlib whose header had no checksum: run `irtlib calibrate` again)" \
                if got == "irtlib-bank/1" else ""
            raise InputError(f"{path}: line 1: unsupported bank format {shown(got)} (expected {BANK_FORMAT}){older}")
        if meta.get("bank_sha256") != _sha256(body):
            raise InputError(f"{path}: the item table does not match the checksum in its header "
                             "(edited or truncated after it was written)")
        stored = meta.get("file_sha256")
        blank = f'"file_sha256": "{stored}"' if isinstance(stored, str) else None
        if blank is None or first.count(blank) != 1 or _sha256(
                text.replace(blank, f'"file_sha256": "{_FILE_SHA_PLACEHOLDER}"', 1).partition("\n")[0] + "\n" + body
                ) != stored:
            raise InputError(f"{path}: line 1: the header does not match the file's checksum (file_sha256): "
                             "edited after it was written")

        try:
            items = pd.read_csv(io.StringIO(body), dtype={"item": str, "prompt": str}, keep_default_na=False,
                                na_values=[""], float_precision="round_trip")
        except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
            raise InputError(f"{path}: cannot parse the item table: {str(exc).splitlines()[0]}") from None
        if "item" not in items.columns:
            raise InputError(f"{path}: the item table has no 'item' column")
        meta["path"] = str(path)
        bank = cls(items.set_index("item"), meta)
        _check_header(meta, path, n_bank=len(bank))
        return bank


def _header_error(path, field: str, expected: str, value) -> InputError:
    return InputError(f"{path}: line 1: header field {field}: expected {expected}, got {shown(value)}")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_filtered_rates(filtered: dict, threshold: float, path) -> None:
    """The filtered safe-rate sum must be one the variance filter can leave.

    An item left out by the filter has ``p (1 - p) <= threshold``, so a near-all-safe one has a
    safe rate of at least ``(1 + sqrt(1 - 4 threshold)) / 2`` and a near-all-unsafe one at most
    ``(1 - sqrt(1 - 4 threshold)) / 2``: the sum lies between ``n_safe`` times the first and
    ``n_safe`` plus ``n_unsafe`` times the second.
    """
    if not filtered:
        return
    n_safe, n_unsafe = filtered.get("n_safe", 0), filtered.get("n_unsafe", 0)
    root = math.sqrt(max(0.0, 1.0 - 4.0 * threshold))
    low, high = n_safe * (1 + root) / 2, n_safe + n_unsafe * (1 - root) / 2
    slack = 1e-9 * max(1, n_safe + n_unsafe)          # the sum was rounded to a float
    total = filtered.get("safe_rate_sum", 0.0)
    if not low - slack <= total <= high + slack:
        raise _header_error(path, "filtered.safe_rate_sum",
                            f"a number in [{low:.6g}, {high:.6g}] for {n_safe} near-all-safe and {n_unsafe} "
                            f"near-all-unsafe filtered items (variance threshold {threshold})", total)


def _check_header(meta: dict, path, *, n_bank: int) -> None:
    """Validate the type and range of every header field the toolkit uses (ValueError naming it)."""
    def section(name):
        value = meta.get(name)
        if value is not None and not isinstance(value, dict):
            raise _header_error(path, name, "an object", value)
        return value or {}

    filtered = section("filtered")
    for key in ("n_items", "n_safe", "n_unsafe"):
        value = filtered.get(key, 0)
        if not _is_int(value) or value < 0:
            raise _header_error(path, f"filtered.{key}", "an integer >= 0", value)
    if filtered and filtered.get("n_safe", 0) + filtered.get("n_unsafe", 0) != filtered.get("n_items", 0):
        raise _header_error(path, "filtered.n_items", f"n_safe + n_unsafe = "
                            f"{filtered.get('n_safe', 0) + filtered.get('n_unsafe', 0)}", filtered.get("n_items"))
    total = filtered.get("safe_rate_sum", 0.0)
    if not _is_number(total) or not 0 <= total <= filtered.get("n_items", 0):
        raise _header_error(path, "filtered.safe_rate_sum", f"a number in [0, filtered.n_items = "
                            f"{filtered.get('n_items', 0)}]", total)
    data = section("data")
    for key in ("n_models", "n_items", "n_observations"):
        if key in data and (not _is_int(data[key]) or data[key] < 1):
            raise _header_error(path, f"data.{key}", "an integer >= 1", data[key])
    if "n_items" in data and data["n_items"] != n_bank + filtered.get("n_items", 0):
        raise _header_error(path, "data.n_items", f"the bank's {n_bank} items + filtered.n_items "
                            f"{filtered.get('n_items', 0)} = {n_bank + filtered.get('n_items', 0)}", data["n_items"])
    settings = section("settings")
    if "engine" in settings and settings["engine"] not in ENGINES:
        raise _header_error(path, "settings.engine", f"one of {ENGINES}", settings["engine"])
    if "variance_threshold" in settings and (not _is_number(settings["variance_threshold"])
                                             or not 0 <= settings["variance_threshold"] <= 0.25):
        raise _header_error(path, "settings.variance_threshold", "a number in [0, 0.25]",
                            settings["variance_threshold"])
    _check_filtered_rates(filtered, settings.get("variance_threshold", 0.25), path)
    section("diagnostics")
    models = section("models")
    if models:
        names = models.get("name")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise _header_error(path, "models.name", "a list of model names", names)
        if len(set(names)) != len(names):
            twice = next(n for n in names if names.count(n) > 1)
            raise _header_error(path, "models.name", f"distinct model names ({shown(twice)} appears twice)", twice)
        for key, lo, hi in (("theta", -1e3, 1e3), ("safety_score", 0.0, 1.0)):
            values = models.get(key)
            if key == "safety_score" and values is None:
                continue
            if not isinstance(values, list) or len(values) != len(names):
                raise _header_error(path, f"models.{key}", f"a list of {len(names)} numbers (one per model)", values)
            for i, v in enumerate(values):
                if not (_is_number(v) and lo <= v <= hi) and not (key == "safety_score" and v is None):
                    raise _header_error(path, f"models.{key}[{i}]", f"a number in [{lo:g}, {hi:g}]", v)
    check = meta.get("interval_check")
    if check is not None:
        if not isinstance(check, dict):
            raise _header_error(path, "interval_check", "an object or null", check)
        ks, factors = check.get("k"), check.get("inflation")
        if ks is not None or factors is not None:
            if not isinstance(ks, list) or not ks or not all(_is_int(k) and k >= 1 for k in ks) \
                    or any(b <= a for a, b in zip(ks, ks[1:], strict=False)):
                raise _header_error(path, "interval_check.k", "an increasing list of test lengths >= 1", ks)
            if not isinstance(factors, list) or len(factors) != len(ks):
                raise _header_error(path, "interval_check.inflation", f"a list of {len(ks)} factors (one per k)",
                                    factors)
            for i, f in enumerate(factors):
                if not _is_number(f) or not 1.0 <= f <= 1e3:
                    raise _header_error(path, f"interval_check.inflation[{i}]", "a number in [1, 1000]", f)


def _finite_or_none(obj):
    """A copy of a JSON-ready structure with NaN and infinities replaced by None (strict JSON)."""
    if isinstance(obj, dict):
        return {k: _finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite_or_none(v) for v in obj]
    if isinstance(obj, (float, np.floating)) and not math.isfinite(float(obj)):
        return None
    return obj


def _json_default(obj):
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    return str(obj)


def read_bank(path: PathLike) -> ItemBank:
    """Read an item bank file (see :meth:`ItemBank.read`)."""
    return ItemBank.read(path)
