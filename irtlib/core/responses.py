"""Binary response matrices: models x items, 1 = safe, 0 = unsafe, NaN = not observed.

Paper, section "Binarization": ``X`` has one row per model and one column per item, and a
model's safety score is its share of safe responses.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from irtlib.errors import InputError

__all__ = ["ResponseMatrix", "shown"]


#: Longest identifier echoed whole in an error message; longer ones are cut (see :func:`shown`).
ID_LIMIT = 60


def shown(value: object, *, limit: int = ID_LIMIT) -> str:
    """``repr(value)`` for a message, cut to about ``limit`` characters (a 1 MB id stays short).

    Parameters
    ----------
    value : object
        Usually an identifier (model or item name) taken from a user's file.
    limit : int
        Characters of the repr kept before it is cut.

    Returns
    -------
    str
        The repr, or its first ``limit`` characters followed by ``...`` and the full length.
    """
    text = repr(value)
    if len(text) <= limit + 20:
        return text
    return f"{text[:limit]}... ({len(str(value))} characters)"


def _describe(index: pd.Index, positions: np.ndarray, limit: int = 3) -> str:
    names = [shown(index[i]) for i in positions[:limit]]
    more = f" and {len(positions) - limit} more" if len(positions) > limit else ""
    return ", ".join(names) + more


def _numeric_cells(df: pd.DataFrame) -> np.ndarray:
    """The frame's cells as floats, NaN where a cell is missing or not a number.

    Numeric columns are taken as one block; the others are converted together, in one call of
    :func:`pandas.to_numeric` over all their cells (not one call per column: a leaderboard has
    thousands of item columns).
    """
    values = np.empty(df.shape)
    numeric = np.array([pd.api.types.is_numeric_dtype(t) and not pd.api.types.is_bool_dtype(t) for t in df.dtypes],
                       dtype=bool)
    if numeric.any():
        values[:, numeric] = df.iloc[:, np.flatnonzero(numeric)].to_numpy(dtype=float, na_value=np.nan)
    if not numeric.all():
        rest = df.iloc[:, np.flatnonzero(~numeric)].to_numpy(dtype=object)
        flat = pd.to_numeric(pd.Series(rest.ravel(), dtype=object), errors="coerce")
        values[:, ~numeric] = flat.to_numpy(dtype=float, na_value=np.nan).reshape(rest.shape)
    return values


def _checked_ids(arr: np.ndarray, models: Sequence, items: Sequence, source: str) -> tuple[pd.Index, pd.Index]:
    """The identifiers as indexes, checked against the values' shape and for duplicates (also as text)."""
    if arr.ndim != 2:
        raise InputError(f"{source}: expected a 2-D models x items array, got shape {arr.shape}")
    models = pd.Index(models, name="model")
    items = pd.Index(items, name="item")
    if arr.shape != (len(models), len(items)):
        raise InputError(
            f"{source}: values have shape {arr.shape} but there are {len(models)} models "
            f"and {len(items)} items"
        )
    if arr.size == 0:
        raise InputError(f"{source}: the response matrix is empty ({arr.shape[0]} models x {arr.shape[1]} items)")
    for kind, index in (("model", models), ("item", items)):
        dup = index[index.duplicated()].unique()
        if len(dup):
            raise InputError(f"{source}: duplicate {kind} identifiers: {', '.join(shown(d) for d in dup[:3])}")
        text = index.map(str)
        clash = text.duplicated(keep=False)
        if clash.any():
            pair = index[clash][text[clash] == text[clash][0]]
            raise InputError(f"{source}: {kind} identifiers {shown(pair[0])} and {shown(pair[1])} are the same "
                             "when written as text (ids are compared as text: make them distinct)")
    return models, items


def _everything(selection, n: int) -> bool:
    """Whether a row or column selection (a slice, a boolean mask or positions) keeps all ``n`` in order."""
    if isinstance(selection, slice):
        return selection == slice(None)
    selection = np.asarray(selection)
    if selection.dtype == bool:
        return selection.size == n and bool(selection.all())
    return selection.size == n and bool((selection == np.arange(n)).all())


class ResponseMatrix:
    """A validated models x items matrix of binary safety judgments.

    Parameters
    ----------
    values : array_like, shape (n_models, n_items)
        1.0 for a safe response, 0.0 for an unsafe one, NaN where the model did not see the item.
    models : sequence, length n_models
        Model identifiers (unique).
    items : sequence, length n_items
        Item identifiers (unique).
    source : str, optional
        Where the data came from; used in error messages.

    Raises
    ------
    ValueError
        On an empty matrix, values other than 0, 1 or NaN, duplicate identifiers, or a model or
        item without a single observed response. The message names the offender.

    Notes
    -----
    The matrix is immutable by convention: methods return new matrices (the same one when they would
    keep every model and item in order) and ``values`` is a read-only copy of the input.
    """

    def __init__(self, values, models: Sequence, items: Sequence, *, source: str = "response matrix"):
        arr = np.array(values, dtype=float, copy=True)
        models, items = _checked_ids(arr, models, items, source)
        bad = ~(np.isnan(arr) | (arr == 0.0) | (arr == 1.0))
        if bad.any():
            r, c = np.argwhere(bad)[0]
            raise InputError(
                f"{source}: scores must be 0, 1 or missing; model {shown(models[r])}, item {shown(items[c])} "
                f"has {float(arr[r, c])!r} ({int(bad.sum())} such cells)"
            )
        observed = ~np.isnan(arr)
        for axis, kind, index in ((1, "model", models), (0, "item", items)):
            empty = np.flatnonzero(~observed.any(axis=axis))
            if len(empty):
                raise InputError(f"{source}: {kind} {_describe(index, empty)} has no observed response")
        arr.setflags(write=False)
        self._values = arr
        self._models = models
        self._items = items
        self.source = source

    def __setstate__(self, state: dict) -> None:
        """Unpickled as it was pickled, values read-only again (a pickle does not keep numpy's write flag)."""
        self.__dict__.update(state)
        values = state.get("_values")
        if isinstance(values, np.ndarray):
            values.setflags(write=False)

    @classmethod
    def from_checked(cls, values: np.ndarray, models: Sequence, items: Sequence, *,
                     source: str = "response matrix") -> ResponseMatrix:
        """A matrix from values a reader has already checked, taken as they are (no copy, no pass over the cells).

        For readers that built ``values`` themselves (:mod:`irtlib.io`): a C-contiguous float array of
        0, 1 and NaN in which every model (row) and item (column) has an observed response. The
        identifiers are checked as by the constructor; the array becomes read-only.
        """
        if not (isinstance(values, np.ndarray) and values.dtype == np.float64 and values.flags.c_contiguous):
            return cls(values, models, items, source=source)
        models, items = _checked_ids(values, models, items, source)
        values.setflags(write=False)
        self = cls.__new__(cls)
        self._values, self._models, self._items, self.source = values, models, items, source
        return self

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_long(cls, df: pd.DataFrame, *, model: str = "model", item: str = "item",
                  score: str = "score", source: str = "long responses") -> ResponseMatrix:
        """Build a matrix from a long table with one row per (model, item) judgment.

        Parameters
        ----------
        df : DataFrame
            Must hold the columns named by ``model``, ``item`` and ``score``; ``score`` must be
            0 or 1 (binarize graded or multiple-choice data first, see :mod:`irtlib.core.binarize`).
            Rows with a missing score are treated as unobserved. The frame is not modified.
        model, item, score : str
            Column names.
        source : str
            Name used in error messages (e.g. the file name).

        Raises
        ------
        ValueError
            Missing columns, non-numeric scores, scores outside {0, 1}, or one (model, item)
            pair with conflicting scores; the message names the row at fault, 1-based
            as a spreadsheet numbers the data rows (the first row of ``df`` is row 1), like
            :mod:`irtlib.io`'s messages.
        """
        missing = [c for c in (model, item, score) if c not in df.columns]
        if missing:
            raise InputError(f"{source}: missing column(s) {missing}; found {list(df.columns)}")
        if len(df) == 0:
            raise InputError(f"{source}: the response table is empty")
        scores = pd.to_numeric(df[score], errors="coerce").to_numpy(dtype=float)
        raw = df[score].to_numpy()
        nonnum = np.isnan(scores) & ~pd.isna(raw)
        if nonnum.any():
            row = int(np.flatnonzero(nonnum)[0])
            raise InputError(f"{source}: row {row + 1}: score {shown(raw[row])} in column {score!r} is not numeric")
        bad = ~np.isnan(scores) & (scores != 0.0) & (scores != 1.0)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise InputError(
                f"{source}: row {row + 1}: score {float(scores[row])!r} in column {score!r} is not 0 or 1 "
                f"({int(bad.sum())} such rows; binarize graded scores first)"
            )
        for col in (model, item):
            nulls = df[col].isna().to_numpy()
            if nulls.any():
                raise InputError(f"{source}: row {int(np.flatnonzero(nulls)[0]) + 1}: column {col!r} is empty")
        tidy = pd.DataFrame({"model": df[model].to_numpy(), "item": df[item].to_numpy(), "score": scores})
        tidy = tidy[~np.isnan(scores)]
        dup = tidy.duplicated(["model", "item"], keep=False)
        if dup.any():
            spread = tidy[dup].groupby(["model", "item"], sort=False)["score"].nunique()
            conflicts = spread[spread > 1]
            if len(conflicts):
                m, i = conflicts.index[0]
                rows = [r + 1 for r in tidy.index[(tidy["model"] == m) & (tidy["item"] == i)].tolist()]
                raise InputError(
                    f"{source}: rows {rows[:5]}: model {shown(m)}, item {shown(i)} has conflicting scores "
                    f"({len(conflicts)} such pairs)"
                )
            tidy = tidy.drop_duplicates(["model", "item"])
        models = pd.Index(pd.unique(tidy["model"]))
        items = pd.Index(pd.unique(tidy["item"]))
        values = np.full((len(models), len(items)), np.nan)
        values[models.get_indexer(tidy["model"]), items.get_indexer(tidy["item"])] = tidy["score"].to_numpy()
        return cls(values, models, items, source=source)

    @classmethod
    def from_wide(cls, df: pd.DataFrame, *, model: str | None = None,
                  source: str = "wide responses") -> ResponseMatrix:
        """Build a matrix from a wide table: one row per model, one column per item.

        Parameters
        ----------
        df : DataFrame
            Scores 0, 1 or missing. The row index holds the model names unless ``model`` names
            a column that does. The frame is not modified.
        model : str, optional
            Column holding the model names.
        source : str
            Name used in error messages.
        """
        if model is not None:
            if model not in df.columns:
                raise InputError(f"{source}: missing model column {model!r}")
            df = df.set_index(model)
        if df.shape[0] == 0 or df.shape[1] == 0:
            raise InputError(f"{source}: the response table is empty ({df.shape[0]} rows x {df.shape[1]} columns)")
        values = _numeric_cells(df)
        nonnum = np.isnan(values) & ~df.isna().to_numpy()
        if nonnum.any():
            r, c = np.argwhere(nonnum)[0]
            raise InputError(
                f"{source}: row {r + 1} (model {shown(df.index[r])}), column {shown(df.columns[c])}: "
                f"{shown(df.iat[r, c])} is not numeric"
            )
        return cls(values, df.index, df.columns, source=source)

    # ------------------------------------------------------------------ accessors
    @property
    def values(self) -> np.ndarray:
        """Read-only ``(n_models, n_items)`` float array of 0, 1 and NaN."""
        return self._values

    @property
    def models(self) -> pd.Index:
        """Model identifiers, length ``n_models``."""
        return self._models

    @property
    def items(self) -> pd.Index:
        """Item identifiers, length ``n_items``."""
        return self._items

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_models, n_items)``."""
        return self._values.shape

    @property
    def observed(self) -> np.ndarray:
        """Boolean ``(n_models, n_items)`` mask of observed cells."""
        return ~np.isnan(self._values)

    @property
    def n_observations(self) -> int:
        """Number of observed judgments (the benchmark's cost in responses)."""
        if getattr(self, "_n_observed", None) is None:       # the values never change: counted once
            self._n_observed = int(np.count_nonzero(self.observed))
        return self._n_observed

    def _share_safe(self, axis: int) -> np.ndarray:
        """The mean of the observed values along ``axis``: ``np.nanmean``, or a plain mean when nothing is missing.

        The same sums in the same order (the same numbers), without the copy that replaces NaN.
        """
        if self.n_observations == self._values.size:
            return np.mean(self._values, axis=axis)
        return np.nanmean(self._values, axis=axis)

    def __repr__(self) -> str:
        missing = self._values.size - self.n_observations
        return (f"ResponseMatrix({self.shape[0]} models x {self.shape[1]} items, "
                f"{missing} missing, source={self.source!r})")

    def __eq__(self, other) -> bool:
        return (isinstance(other, ResponseMatrix) and self.models.equals(other.models)
                and self.items.equals(other.items)
                and np.array_equal(self.values, other.values, equal_nan=True))

    # ------------------------------------------------------------------ summaries
    def safety_scores(self) -> pd.Series:
        """Each model's share of safe responses over the items it saw, indexed by model."""
        return pd.Series(self._share_safe(1), index=self._models, name="safety_score")

    def item_safe_rates(self) -> pd.Series:
        """Each item's share of safe responses over the models that saw it, indexed by item."""
        return pd.Series(self._share_safe(0), index=self._items, name="safe_rate")

    def item_variance(self) -> pd.Series:
        """Binomial variance ``p (1 - p)`` of each item's safe rate ``p``."""
        p = self.item_safe_rates()
        return (p * (1.0 - p)).rename("variance")

    def filter_variance(self, threshold: float = 0.01) -> ResponseMatrix:
        """Drop items whose binomial variance ``p (1 - p)`` is at most ``threshold``.

        Paper, section "Binarization": items with response variance at most 0.01 across models
        are dropped before anything else (``p (1 - p) <= 0.01`` means ``p <= 0.0101`` or
        ``p >= 0.9899``).

        Raises
        ------
        ValueError
            If no item survives.
        """
        keep = (self.item_variance() > threshold).to_numpy()
        if not keep.any():
            raise InputError(f"{self.source}: no item has variance above {threshold}")
        return self._take(slice(None), keep)

    def subset(self, *, models: Sequence[str] | None = None, items: Sequence[str] | None = None) -> ResponseMatrix:
        """Restrict to some models and/or items, in the order given.

        Parameters
        ----------
        models, items : sequence of identifiers, optional
            ``None`` keeps all. Unknown identifiers raise ``ValueError`` naming them.
        """
        rows = slice(None) if models is None else self._positions(self._models, models, "model")
        cols = slice(None) if items is None else self._positions(self._items, items, "item")
        return self._take(rows, cols)

    def to_long(self) -> pd.DataFrame:
        """Observed cells as a long table with columns ``model``, ``item``, ``score``."""
        r, c = np.nonzero(self.observed)
        return pd.DataFrame({"model": self._models[r], "item": self._items[c], "score": self._values[r, c]})

    def to_frame(self) -> pd.DataFrame:
        """The matrix as a wide DataFrame (a copy)."""
        return pd.DataFrame(self._values.copy(), index=self._models, columns=self._items)

    # ------------------------------------------------------------------ helpers
    def _positions(self, index: pd.Index, labels, kind: str) -> np.ndarray:
        labels = pd.Index(labels)
        pos = index.get_indexer(labels)
        if (pos < 0).any():
            unknown = list(labels[pos < 0][:3])
            raise InputError(f"{self.source}: unknown {kind}(s) {unknown}")
        return pos

    def _take(self, rows, cols) -> ResponseMatrix:
        if _everything(rows, len(self._models)) and _everything(cols, len(self._items)):
            return self               # immutable: the same matrix, without a copy and its checks
        return ResponseMatrix(self._values[rows][:, cols], self._models[rows], self._items[cols], source=self.source)
