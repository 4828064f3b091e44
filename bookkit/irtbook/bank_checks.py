"""The book's audit and drift on the paper's released matrices (chapter "Beyond the paper").

:func:`audit_benchmark` calibrates a benchmark's bank with the MAP engine and audits it
(:func:`irtlib.bank.audit.audit_bank`); :func:`fluid_first_reach` runs the agreement protocol for
Fluid only, with the MAP engine and few splits, with and without the flagged items, and reads Table 2's
left column (:func:`irtbook.table2.first_reach`); :func:`dated_groups` splits the models whose ids
carry a date stamp into an older and a newer half (the only time information the files hold).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from irtlib.bank.audit import audit_bank
from irtlib.bank.build import calibrate_bank
from irtlib.core.responses import ResponseMatrix
from irtlib.protocol.agreement import agreement_curves, run_protocol

from .cache import array_checksum
from .table2 import first_reach

__all__ = ["audit_benchmark", "fluid_first_reach", "dated_groups", "model_date"]

_DATE = re.compile(r"(20[12]\d)-?([01]\d)-?([0-3]\d)")


def audit_benchmark(matrix: ResponseMatrix, *, n_replications: int = 5, seed: int = 0) -> dict:
    """Calibrate a bank of ``matrix`` (MAP engine, the paper's variance filter) and audit it."""
    bank = calibrate_bank(matrix, engine="map", interval_check=False, seed=seed)
    return audit_bank(bank, matrix, n_replications=n_replications, seed=seed)


def fluid_first_reach(matrix: ResponseMatrix, *, drop=(), n_splits: int = 5, seed: int = 0,
                      threshold: float = 0.90) -> dict:
    """Fluid's first budget reaching ``threshold`` agreement (MAP engine, ``n_splits`` splits), items ``drop`` removed.

    Returns
    -------
    dict
        ``rounded``, ``unrounded`` (the first k of :func:`irtbook.table2.first_reach`), ``curve`` (k, mean),
        ``n_items`` (items left).
    """
    keep = [item for item in matrix.items if item not in set(drop)]
    m = matrix.subset(items=keep)
    # a drop that removes nothing (no item flagged) asks for the run on all items again: made once
    key = (array_checksum(m.values), tuple(m.models), tuple(m.items), int(n_splits), seed, float(threshold))
    found = _REACHED.get(key)
    if found is None:
        results = run_protocol(m, methods=["fluid"], n_splits=n_splits, seed=seed, engine="map", progress=False)
        curve = agreement_curves(results)
        curve = curve[curve["method"] == "fluid"].sort_values("k")
        reach = first_reach(curve["k"].tolist(), curve["mean"].tolist(), threshold=threshold)
        found = {**reach, "curve": curve[["k", "mean"]].reset_index(drop=True), "n_items": len(keep)}
        while _REACHED and len(_REACHED) >= _REACHED_KEPT:
            _REACHED.pop(next(iter(_REACHED)))
        if _REACHED_KEPT > 0:
            _REACHED[key] = found
    return {**found, "curve": found["curve"].copy()}


#: :func:`fluid_first_reach`'s latest results in this process, by data and settings (a run asked for twice,
#: with and without a drop that removes nothing, is made once).
_REACHED: dict = {}
_REACHED_KEPT = 16


def model_date(model_id: str) -> pd.Timestamp | None:
    """The date stamp in a model id (``claude-3-haiku-20240307``, ``gpt-4.1-2025-04-14``), or None."""
    found = _DATE.search(model_id)
    if not found:
        return None
    try:
        return pd.Timestamp(year=int(found[1]), month=int(found[2]), day=int(found[3]))
    except ValueError:
        return None


def dated_groups(models) -> pd.Series:
    """``"older"`` / ``"newer"`` for the models with a date stamp in their id (split at the median date)."""
    dates = pd.Series({m: model_date(m) for m in models}).dropna()
    order = np.argsort(dates.to_numpy(), kind="stable")
    labels = np.where(np.arange(len(dates)) < len(dates) // 2, "older", "newer")
    return pd.Series(labels, index=dates.index[order])
