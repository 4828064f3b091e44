"""Item banks: a calibrated benchmark, saved once and reused to evaluate new models.

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

import hashlib
import io
import json
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from . import methods
from .calibrate import ENGINES, Calibration, fit_2pl
from .data import ResponseMatrix, shown
from .diagnostics import ceiling_counts, coefficient_of_variation, item_rates
from .errors import InputError
from .io import atomic_write, matrix_sha256
from .model import fisher_information, probability

__all__ = ["BANK_FORMAT", "A_RANGE", "B_LIMIT", "IntervalCheckWarning", "MIN_MODELS_INTERVAL_CHECK", "ItemBank", "calibrate_bank", "read_bank", "score_interval", "CHECKPOINTS", "Z95",
           "SUBSET_METHODS", "select_subset", "write_subset", "read_subset"]

BANK_FORMAT = "irtlib-bank/2"
_MAGIC = "# irtlib-bank "
_REQUIRED = ("a", "b")
#: Item parameters outside these ranges are rejected: no calibration of real data gets near them
#: (MAP with the paper's LogNormal(0, 1) and Normal(0, 1) priors), and beyond them the
#: information and the standard error overflow or vanish (``a = 1e200`` gives SE 0).
A_RANGE = (1e-6, 1e3)
B_LIMIT = 1e3
#: Placeholder of ``file_sha256`` while the file's checksum is computed.
_FILE_SHA_PLACEHOLDER = "0" * 64

#: Two-sided 95% normal quantile.
Z95 = 1.959963984540054

#: Fewest calibration models for the cross-fitted interval check of :func:`calibrate_bank`.
MIN_MODELS_INTERVAL_CHECK = 10


class IntervalCheckWarning(UserWarning):
    """The cross-fitted interval check could not run: the bank's intervals are the plain 2PL ones."""


#: Test lengths at which :func:`calibrate_bank` checks the adaptive test's score intervals.
CHECKPOINTS = (1, 2, 3, 5, 10, 20, 30, 50, 100, 200)


def score_interval(a, b, theta, se, *, known_mask=None, known_sum=0.0, filtered_sum: float = 0.0,
                   n_full: int | None = None, inflation=1.0, z: float = Z95):
    """Predicted full-benchmark safety score and its interval, vectorised over models.

    Parameters
    ----------
    a, b : ndarray, shape (n_items,)
        The bank's item parameters.
    theta, se : float or ndarray, shape (n_models,)
        Ability estimates and their standard errors.
    known_mask : ndarray of bool, shape (n_items,) or (n_models, n_items), optional
        Bank items whose response is already observed; they count as answered.
    known_sum : float or ndarray, shape (n_models,)
        Number of safe responses among the known items.
    filtered_sum : float
        Sum of the calibration safe rates of the items the variance filter removed.
    n_full : int, optional
        Items of the full benchmark (default: the bank's size).
    inflation : float or ndarray
        Factor applied to both half-widths (see :func:`calibrate_bank`).
    z : float
        Normal quantile of the interval (1.96 for 95%).

    Returns
    -------
    (score, lower, upper) : tuple of float or ndarray

    Notes
    -----
    ``S(theta) = (sum_known x_j + sum_unknown P_j(theta) + filtered_sum) / n_full`` increases
    with ``theta``, so ``theta -/+ z se`` maps to a score interval through its endpoints. The
    unknown items' Bernoulli spread ``z sqrt(sum_unknown P_j (1 - P_j)) / n_full`` is added in
    quadrature to each half-width; both are then multiplied by ``inflation``. The interval is
    clipped to [0, 1].
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    theta, se = np.asarray(theta, float), np.asarray(se, float)
    n_full = len(a) if n_full is None else n_full
    unknown = np.ones(theta.shape + a.shape, dtype=bool) if known_mask is None else ~np.broadcast_to(
        np.asarray(known_mask, bool), theta.shape + a.shape)

    def total(t):
        p = probability(np.asarray(t)[..., None], a, b)
        return np.where(unknown, p, 0.0).sum(axis=-1), p

    mid, p = total(theta)
    lo, _ = total(theta - z * se)
    hi, _ = total(theta + z * se)
    spread = z * np.sqrt(np.where(unknown, p * (1 - p), 0.0).sum(axis=-1))
    base = np.asarray(known_sum, float) + filtered_sum
    score = (mid + base) / n_full
    half_lo = inflation * np.hypot(mid - lo, spread) / n_full
    half_hi = inflation * np.hypot(hi - mid, spread) / n_full
    return score, np.clip(score - half_lo, 0.0, 1.0), np.clip(score + half_hi, 0.0, 1.0)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("irtlib")
    except Exception:  # pragma: no cover
        return "unknown"


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
    def expected_bank_score(self, theta) -> np.ndarray:
        """Mean over bank items of ``P(theta, a_j, b_j)``: the predicted score on the bank."""
        theta = np.asarray(theta, dtype=float)
        return probability(theta[..., None], self.a, self.b).mean(axis=-1)

    def predicted_full_score(self, theta, *, known: pd.Series | None = None) -> np.ndarray:
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

    def check_items(self, items, *, source: str, require_all: bool = False, min_overlap: int = 1) -> None:
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
        buf = io.StringIO()
        self.items.to_csv(buf, index=True, index_label="item", float_format="%.17g", lineterminator="\n")
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
        text = _MAGIC + json.dumps(meta, sort_keys=False, default=_json_default, allow_nan=False) + "\n" + body
        digest = _sha256(text)
        self.meta["file_sha256"] = digest
        return text.replace(f'"file_sha256": "{_FILE_SHA_PLACEHOLDER}"', f'"file_sha256": "{digest}"', 1)

    def write(self, path, *, force: bool = False) -> Path:
        """Write the bank atomically; refuse to overwrite an existing file unless ``force``.

        With ``force`` only an existing item bank is replaced, never another kind of file.
        """
        return atomic_write(path, self.to_csv(), force=force, magic=_MAGIC)

    @classmethod
    def read(cls, path) -> "ItemBank":
        """Read a bank file, checking its header and its checksum.

        Raises
        ------
        ValueError
            Not an irtlib bank, corrupt header, body modified after writing (checksum mismatch),
            or invalid item parameters; the message names the file (and the row).
        FileNotFoundError
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such item bank file")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise InputError(f"{path}: not an irtlib item bank (not UTF-8 text)") from None
        first, _, body = text.partition("\n")
        if not first.startswith(_MAGIC):
            raise InputError(f"{path}: not an irtlib item bank (line 1 should start with {_MAGIC.strip()!r}; "
                             "make one with `irtlib calibrate`)")
        try:
            meta = json.loads(first[len(_MAGIC):])
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
    section("diagnostics")
    models = section("models")
    if models:
        names = models.get("name")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise _header_error(path, "models.name", "a list of model names", names)
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
                    or any(b <= a for a, b in zip(ks, ks[1:])):
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


def _spearman(x, y) -> float:
    """Spearman correlation, NaN (without a warning) when either input is constant."""
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    from scipy.stats import spearmanr

    return float(spearmanr(x, y)[0])


def read_bank(path) -> ItemBank:
    """Read an item bank file (see :meth:`ItemBank.read`)."""
    return ItemBank.read(path)


def _adaptive_replay(x, a, b, checkpoints, *, prior_sd=1.0):
    """Adaptive tests of many models at once, replayed from their response rows.

    Runs :func:`irtlib.adaptive.run_adaptive` (Fluid Benchmarking: maximum information, MAP
    with a Normal(0, 1) prior, unobserved items unavailable), the rule
    :class:`irtlib.AdaptiveSession` follows. Yields ``(k, theta, se, known_mask, known_sum)``
    after ``k`` items for every ``k`` in ``checkpoints`` up to the longest possible test.
    """
    from .adaptive import run_adaptive

    n_models = x.shape[0]
    kmax = min(max(checkpoints), int((~np.isnan(x)).sum(axis=1).max()))
    traj = run_adaptive(x, a, b, budget=kmax)
    rows = np.arange(n_models)[:, None]
    for k in checkpoints:
        if k > kmax:
            break
        theta = traj.at(k)
        given = traj.items[:, :k]
        valid = given >= 0
        j = np.where(valid, given, 0)
        info = np.where(valid, fisher_information(theta[:, None], a[j], b[j]), 0.0).sum(axis=1)
        se = 1.0 / np.sqrt(info + 1.0 / prior_sd ** 2)
        known = np.zeros(x.shape, dtype=bool)
        known[np.broadcast_to(rows, j.shape)[valid], j[valid]] = True
        known_sum = np.where(valid, x[rows, j], 0.0).sum(axis=1)
        yield k, theta, se, known, known_sum


def _interval_check(matrix: ResponseMatrix, kept_items, filtered_sum: float, *, folds: int = 5, seed: int = 0,
                    checkpoints=CHECKPOINTS) -> dict | None:
    """Cross-fitted check of the adaptive test's score intervals on the calibration models.

    The calibration models are split into ``folds`` groups; for each group the bank's items are
    refitted (MAP engine) on the other models, and the group's models are given adaptive tests
    from their own responses. At each test length ``k`` the errors of the predicted
    full-benchmark score, in units of the 2PL interval's half-width / 1.96 (``z``), give the factor
    ``quantile(|z|, 0.95) / 1.96`` by which the 2PL interval must be widened to cover 95% of the
    held-out models (safety data are not exactly 2PL: several latent dimensions, local
    dependence, item-parameter noise). ``sqrt(mean z^2)`` is stored too, for reference.
    """
    n_models = matrix.shape[0]
    if n_models < MIN_MODELS_INTERVAL_CHECK:
        return None
    truth = matrix.safety_scores().to_numpy()
    x_all = matrix.subset(items=kept_items).values
    n_full = matrix.shape[1]
    rng = np.random.default_rng(seed)
    fold_of = rng.permutation(np.arange(n_models) % folds)
    z = {k: [] for k in checkpoints}
    for f in range(folds):
        train = matrix.subset(models=matrix.models[fold_of != f], items=kept_items)
        observed = train.observed.any(axis=0)
        if not observed.all():  # an item no training model saw: cannot refit it in this fold
            return None
        cal = fit_2pl(train, engine="map")
        a, b = cal.a.to_numpy(), cal.b.to_numpy()
        x = x_all[fold_of == f]
        for k, theta, se, known, known_sum in _adaptive_replay(x, a, b, checkpoints):
            score, lo, hi = score_interval(a, b, theta, se, known_mask=known, known_sum=known_sum,
                                           filtered_sum=filtered_sum, n_full=n_full)
            err = truth[fold_of == f] - score
            half = np.where(err < 0, score - lo, hi - score)
            z[k].extend((err / np.maximum(half / Z95, 1e-12)).tolist())
    ks = [k for k in checkpoints if len(z[k]) >= n_models // 2]
    rms = [float(np.sqrt(np.mean(np.square(z[k])))) for k in ks]
    q95 = [float(np.quantile(np.abs(z[k]), 0.95)) / Z95 for k in ks]
    return {"method": f"{folds}-fold cross-fitted adaptive replay on the calibration models (MAP engine); "
                      "inflation = 95th percentile of |error| / (2PL half-width), at least 1",
            "k": ks, "inflation": [round(max(1.0, f), 4) for f in q95],
            "rms_z": [round(f, 4) for f in rms], "n_models": int(n_models), "seed": seed}


def calibrate_bank(matrix: ResponseMatrix, *, engine: str = "map", variance_threshold: float = 0.01,
                   seed: int = 0, prompts: pd.Series | None = None, source: str | None = None,
                   data_sha256: str | None = None, binarize: dict | None = None,
                   epochs: int = 1000, interval_check: bool = True, interval_folds: int = 5,
                   progress: Callable[[str], None] | None = None) -> ItemBank:
    """Calibrate an item bank from a benchmark's binary response matrix.

    Drops items whose binomial variance is at most ``variance_threshold`` (the paper's first
    step), fits the 2PL model, and records item fit and the provenance in the bank's header.

    Parameters
    ----------
    matrix : ResponseMatrix
        Models x items, 1 safe, 0 unsafe, NaN unobserved (binarize first, see :mod:`irtlib.io`).
    engine : {"map", "pyirt"}
        ``"map"`` (default): the joint posterior mode of the paper's model and priors, found in
        seconds; it ranks models and items as py-irt does. ``"pyirt"``: py-irt's SVI, exactly as
        the paper ran it (tens of seconds to minutes).
    variance_threshold : float
        Items with ``p (1 - p) <= variance_threshold`` are left out of the bank (the paper: 0.01).
    seed : int
        py-irt's seed (the MAP engine is deterministic).
    prompts : Series, optional
        Item text by item id, stored in a ``prompt`` column.
    source, data_sha256 : str, optional
        Where the responses came from and the checksum of that file, for the header.
    binarize : dict, optional
        The binarization settings used to read the file, for the header.
    epochs : int
        py-irt epochs.
    interval_check : bool
        Run the cross-fitted check of adaptive-test score intervals (``_interval_check``:
        ``interval_folds`` extra MAP fits, each leaving out one fold of the models, plus simulated
        adaptive tests of the left-out models up to 200 items)
        and store the widening factors in the header, so that
        :class:`irtlib.AdaptiveSession` states intervals that cover at their nominal rate on
        data like the calibration data. Needs at least 10 models; without it the intervals are
        the plain 2PL ones, which are too narrow: they ignore both the noise in the item
        parameters and the misfit of the 2PL to multidimensional safety data.
    interval_folds : int
        Folds of that check (at least 2; more folds = item parameters closer to the real bank's,
        at the cost of more fits).
    progress : callable(str), optional
        Called with a short message as each stage starts (the CLI prints them).

    Returns
    -------
    ItemBank

    Raises
    ------
    ValueError
        Fewer than two models, an unknown engine, a ``variance_threshold`` outside [0, 0.25), or
        ``interval_folds`` below 2 or above half the models.
    ImportError
        ``engine="pyirt"`` without the ``pyirt`` extra (torch, pyro-ppl, py-irt).

    Warns
    -----
    IntervalCheckWarning
        The interval check was asked for but could not run (fewer than
        :data:`MIN_MODELS_INTERVAL_CHECK` models, or a fold could not be refitted); the header's
        ``interval_check`` is then ``{"skipped": reason}``.
    """
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}; choose one of {ENGINES}")
    if isinstance(variance_threshold, bool) or not isinstance(variance_threshold, (int, float, np.integer, np.floating)) \
            or not 0 <= float(variance_threshold) < 0.25:
        raise InputError(f"variance_threshold must be a number in [0, 0.25), got {variance_threshold!r} "
                         "(p(1-p) is at most 0.25)")
    if matrix.shape[0] < 2:
        raise InputError(f"{matrix.source}: only {matrix.shape[0]} model ({shown(matrix.models[0])}): calibration "
                         "needs responses of at least two models (item difficulty is measured against "
                         "the spread of the models)")
    if interval_check and (isinstance(interval_folds, bool) or not isinstance(interval_folds, (int, np.integer))
                           or interval_folds < 2):
        raise InputError(f"interval_folds must be an integer of at least 2, got {interval_folds!r}")
    rates = matrix.item_safe_rates()
    variance = rates * (1 - rates)
    dropped = variance <= variance_threshold
    kept = matrix.filter_variance(variance_threshold)
    say = progress or (lambda message: None)
    say(f"fitting the 2PL model ({engine} engine) to {kept.shape[0]} models x {kept.shape[1]} items "
        f"({int(dropped.sum())} item(s) with variance <= {variance_threshold} left out)")
    cal: Calibration = fit_2pl(kept, engine=engine, seed=seed, epochs=epochs)
    fit = item_rates(kept, cal)
    items = pd.DataFrame({
        "a": cal.a, "b": cal.b,
        "safe_rate": rates.reindex(kept.items),
        "n_models": kept.observed.sum(axis=0),
        "expected": fit["expected"], "residual": fit["residual"],
    })
    if prompts is not None:
        items["prompt"] = prompts.reindex(items.index.astype(str)).to_numpy()
    scores_full = matrix.safety_scores()
    theta = cal.theta
    meta = {
        "irtlib_version": _version(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "data": {
            "source": source or matrix.source,
            "sha256": data_sha256,
            "matrix_sha256": matrix_sha256(matrix),
            "n_models": int(matrix.shape[0]),
            "n_items": int(matrix.shape[1]),
            "n_observations": int(matrix.n_observations),
        },
        "settings": {
            "engine": engine,
            "variance_threshold": variance_threshold,
            "seed": seed,
            "binarize": binarize or {},
            "engine_settings": cal.settings,
        },
        "filtered": {
            "n_items": int(dropped.sum()),
            "n_safe": int((dropped & (rates >= 0.5)).sum()),
            "n_unsafe": int((dropped & (rates < 0.5)).sum()),
            "safe_rate_sum": float(rates[dropped].sum()),
        },
        "diagnostics": {
            "item_rmse": float(np.sqrt(np.mean(fit["residual"] ** 2))),
            "cv_a": coefficient_of_variation(cal.a),
            "spearman_theta_score": _spearman(theta.to_numpy(), scores_full.reindex(theta.index).to_numpy()),
            "ceiling": ceiling_counts(scores_full),
            "fit_seconds": round(float(cal.seconds), 3),
            "engine": {k: v for k, v in cal.diagnostics.items() if isinstance(v, (int, float, bool, str))},
        },
        "models": {
            "name": [str(m) for m in theta.index],
            "theta": [float(t) for t in theta.to_numpy()],
            "safety_score": [float(s) for s in scores_full.reindex(theta.index).to_numpy()],
        },
    }
    if interval_check:
        n_models = matrix.shape[0]
        if n_models < MIN_MODELS_INTERVAL_CHECK:
            reason = (f"skipped: only {n_models} models (the check needs at least {MIN_MODELS_INTERVAL_CHECK}); "
                      "adaptive tests on this bank state the plain 2PL intervals, which are too narrow")
        elif interval_folds > n_models // 2:
            raise InputError(f"interval_folds {interval_folds} is too many for {n_models} models: each fold needs "
                             f"at least 2 models (use at most {n_models // 2})")
        else:
            say(f"checking adaptive-test intervals ({interval_folds}-fold cross-fit)")
            result = _interval_check(matrix, kept.items, meta["filtered"]["safe_rate_sum"],
                                     folds=interval_folds, seed=seed)
            reason = None if result else ("skipped: some item was seen by the models of one fold only, so a fold "
                                          "could not be refitted; adaptive tests on this bank state the plain 2PL "
                                          "intervals, which are too narrow")
            meta["interval_check"] = result
        if reason is not None:
            meta["interval_check"] = {"skipped": reason}
            warnings.warn(f"{source or matrix.source}: interval check {reason}", IntervalCheckWarning, stacklevel=2)
    return ItemBank(items, meta)


# ---------------------------------------------------------------------------- static subsets
#: The static subset methods of ``irtlib subset``; ``needs_responses``: methods that need the
#: calibration response matrix, not just the bank (both from :mod:`irtlib.methods`).
SUBSET_METHODS = {
    "all": methods.subset_ids(),
    "needs_responses": tuple(m for m in methods.subset_ids() if methods.REGISTRY[m].needs_responses),
}

_SUBSET_MAGIC = "# irtlib-subset "


def select_subset(bank: ItemBank, *, method: str, k: int, responses: ResponseMatrix | None = None,
                  seed: int = 0) -> pd.DataFrame:
    """Choose a fixed ``k``-item subset of a bank with one of the paper's static methods.

    Parameters
    ----------
    bank : ItemBank
    method : {"total-fisher", "marginal-fisher", "marginal-fisher-bq", "anchor-points", "disco", "random"}
        See :mod:`irtlib.methods` and :mod:`irtlib.subsets`. The Fisher methods use the calibration
        models' abilities stored in the bank; DISCO uses the bank's item safe rates; anchor points
        needs ``responses``.
    k : int
        Number of items (at most the bank's size).
    responses : ResponseMatrix, optional
        The calibration responses (training models x items). Must contain every bank item.
    seed : int
        For ``random`` and ``anchor-points``.

    Returns
    -------
    DataFrame, indexed by item, in selection order
        Columns ``rank`` (1 = chosen first), ``weight`` (anchor points: the number of items each
        medoid represents; 1 otherwise), ``a``, ``b``.
    """
    entry = methods.REGISTRY[methods.check_methods([method], allowed=methods.subset_ids())[0]]
    if not 1 <= k <= len(bank):
        raise InputError(f"k must be between 1 and the bank's {len(bank)} items, got {k}")
    if responses is not None:
        source = responses.source
        bank.check_items(responses.items, source=source, require_all=True)
        responses = responses.subset(items=bank.item_ids)
    elif entry.needs_responses:
        raise InputError(f"subset method {method!r} needs the calibration responses")
    chosen = entry.select(_training(bank, responses, seed), [int(k)])[int(k)]
    items = pd.Index([str(i) for i in bank.item_ids[np.asarray(chosen.items, dtype=int)]], name="item")
    weights = np.ones(len(items)) if chosen.weights is None else np.asarray(chosen.weights, dtype=float)
    out = pd.DataFrame({"rank": np.arange(1, len(items) + 1), "weight": weights}, index=items)
    return out.join(bank.items[["a", "b"]])


def _training(bank: ItemBank, responses: ResponseMatrix | None, seed: int):
    """What a bank offers a selection method: its item parameters, the calibration models'
    abilities, the items' safe rates and (when given) the calibration responses of the models
    the bank was calibrated on, restricted to the bank's items."""
    theta = bank.calibration_theta
    theta_values = theta.to_numpy()
    values = None
    if responses is not None:
        if len(theta):
            common = [m for m in responses.models if m in set(theta.index)]
            if not common:
                raise InputError(f"{responses.source}: none of its models is one the bank was calibrated on")
            responses = responses.subset(models=common)
            theta_values = theta.reindex(common).to_numpy()
        values = responses.values
    rates = bank.items["safe_rate"].to_numpy(dtype=float) if "safe_rate" in bank.items else None
    return methods.Training(a=np.asarray(bank.a, float), b=np.asarray(bank.b, float), theta=np.asarray(theta_values, float),
                    values=values, safe_rates=rates, seed=seed)


def write_subset(path, chosen: pd.DataFrame, *, bank: ItemBank, method: str, k: int, seed: int = 0,
                 force: bool = False) -> Path:
    """Write a chosen subset as CSV (item, rank, weight, a, b) under a one-line JSON header.

    The header records the method, ``k``, the seed and the bank's checksum and path.
    """
    meta = {"format": "irtlib-subset/1", "method": method, "k": int(k), "seed": int(seed),
            "bank_sha256": bank.checksum, "bank": bank.meta.get("path"),
            "weights": "number of bank items each medoid represents" if method == "anchor-points" else "equal"}
    buf = io.StringIO()
    chosen.to_csv(buf, index=True, index_label="item", float_format="%.17g", lineterminator="\n")
    return atomic_write(path, _SUBSET_MAGIC + json.dumps(meta) + "\n" + buf.getvalue(), force=force)


def read_subset(path) -> tuple[pd.DataFrame, dict]:
    """Read a subset file written by :func:`write_subset`: ``(items frame, header dict)``."""
    path = Path(path)
    first, _, body = path.read_text(encoding="utf-8").partition("\n")
    if not first.startswith(_SUBSET_MAGIC):
        raise InputError(f"{path}: not an irtlib subset file (line 1 should start with {_SUBSET_MAGIC.strip()!r})")
    try:
        meta = json.loads(first[len(_SUBSET_MAGIC):])
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: line 1: corrupt subset header ({exc.msg})") from None
    frame = pd.read_csv(io.StringIO(body), dtype={"item": str}).set_index("item")
    return frame, meta
