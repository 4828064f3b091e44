"""Our calibrations against the authors' own per-split fits (SimpleSafetyTests, 100 splits).

The paper's authors released, for each of their 100 SimpleSafetyTests splits, the 2PL item parameters
py-irt fitted on that split's 67 training models (``authors_fits/...items.csv``: ``item_id, a, b,
fold``; their released code, :data:`irtlib.protocol.presets.CODE`). :func:`compare_with_authors_fits` fits
the same training models with our engines and compares, split by split:

* ``"pyirt-authors"``: one py-irt fit per split with the authors' settings
  (:func:`irtlib.fit_2pl`, ``engine="pyirt-authors"``; about 10 s a split);
* ``"batched"``: all splits in one batched fit (:func:`irtlib.calibration.pyirt_batch.fit_2pl_splits`),
  or read from a split cache where an earlier fit of the same training block with the same settings
  left its result (:func:`irtlib.calibration.split_cache.fit_2pl_splits_cached`: the same numbers, since
  a split's fit does not depend on the rest of its batch);
* ``"map"``: the fast posterior-mode engine with the paper's fixed priors (``engine="map"``), a
  different estimator of a different model, so close but not equal.

For each split and engine: Pearson r and RMSE of a and of b against the authors' fit of the same
split, the largest absolute differences, and which of the authors' folds our fit is closest to (it
should be its own index: a check that split i here is their split i).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from irtlib.calibration.joint_map import fit_2pl
from irtlib.core.responses import ResponseMatrix
from irtlib.errors import InputError

__all__ = ["COMPARISON_ENGINES", "authors_train_rows", "compare_with_authors_fits", "read_authors_fits",
           "summarise_authors_comparison"]

#: Engines :func:`compare_with_authors_fits` can run.
COMPARISON_ENGINES = ("pyirt-authors", "batched", "map")

#: The authors' split rule (their released code): test models of split i = ``default_rng((SPLIT_SEED, i))``.
SPLIT_SEED = 42


def authors_train_rows(n_models: int, n_splits: int, *, n_test: int = 10) -> list[np.ndarray]:
    """Training rows of the authors' splits 0..n_splits-1.

    Parameters
    ----------
    n_models : int
        Rows of the response matrix, in the authors' file order.
    n_splits : int
    n_test : int
        Test models per split (10 for the HELM sets, 6 for SafetyBench and WMDP).

    Returns
    -------
    list of ndarray of int
        Split i's training rows: those not drawn by ``numpy.random.default_rng((42, i)).choice(
        n_models, size=n_test, replace=False)``, in file order (the authors'
        released code, :func:`irtlib.protocol.presets.authors_split`).
    """
    if not 0 < n_test < n_models:
        raise InputError(f"n_test must be between 1 and n_models - 1 = {n_models - 1}, got {n_test}")
    out = []
    for i in range(int(n_splits)):
        test = np.random.default_rng((SPLIT_SEED, i)).choice(n_models, size=n_test, replace=False)
        out.append(np.setdiff1d(np.arange(n_models), test))
    return out


def read_authors_fits(path: str | Path) -> pd.DataFrame:
    """The authors' per-split item parameters: columns ``fold, item_id, a, b`` (one row per split and item).

    Parameters
    ----------
    path : str or Path
        Their ``..._items.csv`` (it also holds the static methods' ranks; only the four columns are kept).
    """
    path = Path(path)
    try:
        frame = pd.read_csv(path, dtype={"item_id": str})
    except (OSError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the authors' fits ({exc})") from exc
    missing = [c for c in ("fold", "item_id", "a", "b") if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: the authors' fits need columns fold, item_id, a, b; missing {missing}")
    frame = frame[["fold", "item_id", "a", "b"]]
    bad = frame[["fold", "a", "b"]].isna().any(axis=1) | ~np.isfinite(frame[["a", "b"]].to_numpy()).all(axis=1)
    if bad.any():
        raise InputError(f"{path}: row {int(np.flatnonzero(bad)[0]) + 2} has no finite fold, a or b")
    if frame.duplicated(["fold", "item_id"]).any():
        row = int(np.flatnonzero(frame.duplicated(["fold", "item_id"]))[0]) + 2
        raise InputError(f"{path}: row {row} repeats a (fold, item_id) pair")
    return frame


def _authors_arrays(fits: pd.DataFrame, items: pd.Index, splits: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """The authors' a and b as (n_folds, n_items) arrays in ``items`` order, for every fold in the file."""
    folds = np.sort(fits["fold"].unique())
    wide_a = fits.pivot(index="fold", columns="item_id", values="a")
    wide_b = fits.pivot(index="fold", columns="item_id", values="b")
    if set(wide_a.columns) != set(items):
        extra, lacking = sorted(set(wide_a.columns) - set(items)), sorted(set(items) - set(wide_a.columns))
        raise InputError(f"the authors' fits and the matrix's kept items differ: only in the fits {extra[:5]}, "
                         f"only in the matrix {lacking[:5]}")
    absent = sorted(set(splits) - set(folds.tolist()))
    if absent:
        raise InputError(f"split(s) {absent[:5]} are not in the authors' fits (folds {folds.min()}..{folds.max()})")
    if wide_a.isna().any().any():
        raise InputError("the authors' fits do not give every item in every fold")
    return wide_a.loc[folds, list(items)].to_numpy(), wide_b.loc[folds, list(items)].to_numpy()


def _pearson_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r between matching rows of two (k, n) arrays."""
    xc, yc = x - x.mean(axis=1, keepdims=True), y - y.mean(axis=1, keepdims=True)
    return (xc * yc).sum(1) / np.sqrt((xc**2).sum(1) * (yc**2).sum(1))


def compare_with_authors_fits(matrix: ResponseMatrix, fits: pd.DataFrame | str | Path, *,
                              engines: Sequence[str] = ("batched", "map"), splits: Sequence[int] | None = None,
                              n_test: int = 10, seed: int = 0, epochs: int = 1000,
                              variance_threshold: float = 0.01, split_cache_dir: str | Path | None = None
                              ) -> pd.DataFrame:
    """Per split, our calibrations of the authors' training models against the authors' own fit.

    Parameters
    ----------
    matrix : ResponseMatrix
        The authors' response matrix, models in their file order (SimpleSafetyTests: 77 x 100).
    fits : DataFrame or path
        The authors' per-split fits (:func:`read_authors_fits`).
    engines : sequence of {"pyirt-authors", "batched", "map"}
        Which calibrations to run (see the module docstring). ``"pyirt-authors"`` takes about 10 s
        a split; ``"batched"`` fits all the splits asked for in one go.
    splits : sequence of int, optional
        Split indices to compare (default: every fold in ``fits``).
    n_test : int
        Test models per split (the authors': 10 on SimpleSafetyTests).
    seed, epochs
        py-irt seed and epochs (the authors': 0 and 1,000).
    variance_threshold : float
        Items with ``p (1 - p)`` below it over all models are dropped before any split, as the
        authors do; the kept items must be exactly the fits' items.
    split_cache_dir : path-like, optional
        A split cache (:func:`irtlib.calibration.split_cache.fit_2pl_splits_cached`): the ``"batched"``
        engine reads each split's fit from it where one is there (the book's calibration stage fits
        these very splits for the authors' protocol) and fits, and stores, the others. The numbers are
        those of one batched fit; ``seconds`` is then the time of the read (and of any fit) per split.

    Returns
    -------
    DataFrame
        One row per (split, engine): ``split, engine, r_a, rmse_a, max_abs_a, r_b, rmse_b, max_abs_b,
        matched_split`` (the authors' fold closest to our fit, by the RMSE over a and b together),
        ``matched_own`` (``matched_split == split``), ``seconds`` (the engine's wall time for the
        split; for ``"batched"``, the batch's time divided by the number of splits). With ``"batched"``,
        ``attrs["batched_fitted"]`` is how many of the splits were fitted by this call (the others were
        read from ``split_cache_dir``).

    Notes
    -----
    The calibration and the split rule are the authors' released code's (:data:`irtlib.protocol.presets.CODE`).
    """
    unknown = [e for e in engines if e not in COMPARISON_ENGINES]
    if unknown or not engines:
        raise InputError(f"engines must be a non-empty selection of {COMPARISON_ENGINES}, got {list(engines)}")
    if not isinstance(fits, pd.DataFrame):
        fits = read_authors_fits(fits)
    p = np.nanmean(matrix.values, axis=0)
    keep = p * (1 - p) >= variance_threshold
    values = matrix.values[:, keep]
    items = matrix.items[keep]
    splits = sorted(int(s) for s in fits["fold"].unique()) if splits is None else [int(s) for s in splits]
    their_a, their_b = _authors_arrays(fits, items, splits)
    rows = authors_train_rows(matrix.shape[0], max(splits) + 1, n_test=n_test)

    ours: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for engine in engines:
        a = np.empty((len(splits), len(items)))
        b = np.empty_like(a)
        seconds = np.empty(len(splits))
        if engine == "batched":
            from irtlib.calibration.split_cache import fit_2pl_splits_cached, missing_splits

            train = [rows[s] for s in splits]
            fitted_here = len(splits) if split_cache_dir is None else \
                missing_splits(values, train, cache_dir=split_cache_dir, epochs=epochs, seed=seed)
            start = time.perf_counter()
            fitted = fit_2pl_splits_cached(values, train, cache_dir=split_cache_dir, epochs=epochs, seed=seed)
            seconds[:] = (time.perf_counter() - start) / len(splits)
            for k, (a_k, b_k) in enumerate(fitted):
                a[k], b[k] = a_k, b_k
        else:
            for k, s in enumerate(splits):
                train = ResponseMatrix(values[rows[s]], matrix.models[rows[s]], items, source=matrix.source)
                cal = fit_2pl(train, engine=engine, seed=seed, epochs=epochs)
                a[k], b[k], seconds[k] = cal.a.to_numpy(), cal.b.to_numpy(), cal.seconds
        ours[engine] = (a, b, seconds)

    folds = np.sort(fits["fold"].unique())
    position = {int(f): i for i, f in enumerate(folds)}
    own = np.array([position[s] for s in splits])
    records = []
    for engine, (a, b, seconds) in ours.items():
        da, db = a - their_a[own], b - their_b[own]
        # distance of each of our fits to every authors' fold: RMSE over log a and b together
        log_a, their_log_a = np.log(a), np.log(their_a)
        dist = np.sqrt((((log_a[:, None, :] - their_log_a[None]) ** 2).sum(-1)
                        + ((b[:, None, :] - their_b[None]) ** 2).sum(-1)) / (2 * len(items)))
        matched = folds[dist.argmin(axis=1)]
        frame = pd.DataFrame({
            "split": splits, "engine": engine,
            "r_a": _pearson_rows(a, their_a[own]), "rmse_a": np.sqrt((da**2).mean(1)), "max_abs_a": np.abs(da).max(1),
            "r_b": _pearson_rows(b, their_b[own]), "rmse_b": np.sqrt((db**2).mean(1)), "max_abs_b": np.abs(db).max(1),
            "matched_split": matched.astype(int), "matched_own": matched == np.array(splits), "seconds": seconds,
        })
        records.append(frame)
    out = pd.concat(records, ignore_index=True)
    if "batched" in ours:
        out.attrs["batched_fitted"] = int(fitted_here)
    return out


def summarise_authors_comparison(comparison: pd.DataFrame) -> pd.DataFrame:
    """Per engine: median and minimum r of a and of b, median RMSEs, largest differences, own-index matches.

    Also the number of splits compared and the mean seconds per split.

    Parameters
    ----------
    comparison : DataFrame
        The result of :func:`compare_with_authors_fits`.

    Returns
    -------
    DataFrame, indexed by engine
    """
    grouped = comparison.groupby("engine", sort=False)
    return pd.DataFrame({
        "splits": grouped.size(),
        "median_r_a": grouped["r_a"].median(), "min_r_a": grouped["r_a"].min(),
        "median_r_b": grouped["r_b"].median(), "min_r_b": grouped["r_b"].min(),
        "median_rmse_a": grouped["rmse_a"].median(), "median_rmse_b": grouped["rmse_b"].median(),
        "max_abs_a": grouped["max_abs_a"].max(), "max_abs_b": grouped["max_abs_b"].max(),
        "matched_own": grouped["matched_own"].sum(), "seconds_per_split": grouped["seconds"].mean(),
    })
