"""Fixed subsets of an item bank (``irtlib subset``): choose them with a registry method, write and read them.

A subset file is a CSV (item, rank, weight, a, b) under a one-line JSON header recording the
method, ``k``, the seed and the bank's checksum.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd

from irtlib._typing import PathLike
from irtlib.core.responses import ResponseMatrix
from irtlib.errors import InputError
from irtlib.io.atomic import atomic_write
from irtlib.selection import methods

from .format import ItemBank

__all__ = ["SUBSET_MAGIC", "SUBSET_METHODS", "select_subset", "write_subset", "read_subset"]

#: The static subset methods of ``irtlib subset``; ``needs_responses``: methods that need the
#: calibration response matrix, not just the bank (both from :mod:`irtlib.selection.methods`).
SUBSET_METHODS = {
    "all": methods.subset_ids(),
    "needs_responses": tuple(m for m in methods.subset_ids() if methods.REGISTRY[m].needs_responses),
}

#: The first line of every subset file starts with this (then the JSON header).
SUBSET_MAGIC = "# irtlib-subset "


def select_subset(bank: ItemBank, *, method: str, k: int, responses: ResponseMatrix | None = None,
                  seed: int = 0) -> pd.DataFrame:
    """Choose a fixed ``k``-item subset of a bank with one of the paper's static methods.

    Parameters
    ----------
    bank : ItemBank
    method : {"total-fisher", "marginal-fisher", "marginal-fisher-bq", "anchor-points", "disco", "random"}
        See :mod:`irtlib.selection.methods` and :mod:`irtlib.selection.static`. The Fisher methods use the calibration
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
    """What a bank offers a selection method (:class:`irtlib.selection.methods.Training`).

    Its item parameters, the calibration models' abilities, the items' safe rates and (when
    given) the calibration responses of the models
    the bank was calibrated on, restricted to the bank's items.
    """
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
    return methods.Training(a=np.asarray(bank.a, float), b=np.asarray(bank.b, float),
                            theta=np.asarray(theta_values, float),
                    values=values, safe_rates=rates, seed=seed)


def write_subset(path: PathLike, chosen: pd.DataFrame, *, bank: ItemBank, method: str, k: int, seed: int = 0,
                 force: bool = False) -> Path:
    """Write a chosen subset as CSV (item, rank, weight, a, b) under a one-line JSON header.

    The header records the method, ``k``, the seed and the bank's checksum and path.
    """
    meta = {"format": "irtlib-subset/1", "method": method, "k": int(k), "seed": int(seed),
            "bank_sha256": bank.checksum, "bank": bank.meta.get("path"),
            "weights": "number of bank items each medoid represents" if method == "anchor-points" else "equal"}
    buf = io.StringIO()
    chosen.to_csv(buf, index=True, index_label="item", float_format="%.17g", lineterminator="\n")
    return atomic_write(path, SUBSET_MAGIC + json.dumps(meta) + "\n" + buf.getvalue(), force=force)


def read_subset(path: PathLike) -> tuple[pd.DataFrame, dict]:
    """Read a subset file written by :func:`write_subset`: ``(items frame, header dict)``."""
    path = Path(path)
    first, _, body = path.read_text(encoding="utf-8").partition("\n")
    if not first.startswith(SUBSET_MAGIC):
        raise InputError(f"{path}: not an irtlib subset file (line 1 should start with {SUBSET_MAGIC.strip()!r})")
    try:
        meta = json.loads(first[len(SUBSET_MAGIC):])
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: line 1: corrupt subset header ({exc.msg})") from None
    frame = pd.read_csv(io.StringIO(body), dtype={"item": str}).set_index("item")
    return frame, meta
