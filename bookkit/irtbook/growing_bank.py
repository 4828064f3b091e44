"""The own-benchmark chapter's growing bank: calibrate part, add items, link another bank, against joint refits.

:func:`grow_cycle` splits a benchmark's models into two groups and its items into old and new,
then runs the cycle a bank lives through (:mod:`irtlib.bank.grow`): a bank of the first group on the
old items; the new items added by fixed-parameter calibration; a bank calibrated apart on the second
group, linked onto the first's scale through the common items. Each step is compared with a joint
refit of everything it stands for, put on the bank's scale by the same linking over the bank's own
items (a refit has a scale of its own). Every fit is the fast MAP engine.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from irtlib.bank.build import calibrate_bank
from irtlib.bank.grow import add_items, link_banks
from irtlib.core.responses import ResponseMatrix

__all__ = ["grow_cycle", "GrowCycle"]


class GrowCycle(dict):
    """What :func:`grow_cycle` returns: ``steps`` and ``constants`` (DataFrames), ``sizes`` (dict), ``n_boot``."""


def _bank(matrix: ResponseMatrix, seed: int):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return calibrate_bank(matrix, engine="map", interval_check=False, seed=seed)


def _against(bank, refit, items, *, base) -> dict:
    """Items of ``bank`` against the joint ``refit`` put on ``base``'s scale through ``base``'s items."""
    on_scale = link_banks(base, refit, method="stocking-lord", n_boot=0).linked
    mine, theirs = bank.items.loc[items], on_scale.items.loc[items]
    return {"items": len(items), "r(a)": float(np.corrcoef(mine["a"], theirs["a"])[0, 1]),
            "r(b)": float(np.corrcoef(mine["b"], theirs["b"])[0, 1]),
            "RMSE(a)": float(np.sqrt(np.mean((mine["a"] - theirs["a"]) ** 2))),
            "RMSE(b)": float(np.sqrt(np.mean((mine["b"] - theirs["b"]) ** 2))),
            "median SE(a)": float(np.median(mine["se_a"])), "median SE(b)": float(np.median(mine["se_b"]))}


def grow_cycle(matrix: ResponseMatrix, *, seed: int = 0, old_share: float = 0.7, n_boot: int = 100) -> GrowCycle:
    """Run the growing-bank cycle on a benchmark and compare each step with a joint refit.

    Parameters
    ----------
    matrix : ResponseMatrix
        All models x all items, binary.
    seed : int
        Seeds the split of models (two halves) and items, and the links' bootstraps.
    old_share : float
        Share of the items in the first bank (the rest are added).
    n_boot : int
        Bootstrap resamples of the common items in each link.

    Returns
    -------
    GrowCycle
        ``steps``: one row per step (the first bank's items, the added items, the linked bank's items)
        with ``r(a)``, ``r(b)``, ``RMSE(a)``, ``RMSE(b)`` against the joint refit and the median SEs;
        ``constants``: the link's constants by method with their errors; ``sizes``: the split; ``n_boot``.
    """
    rng = np.random.default_rng(seed)
    models, items = rng.permutation(matrix.models), rng.permutation(matrix.items)
    half, cut = len(models) // 2, int(round(old_share * len(items)))
    group_a, group_b = list(models[:half]), list(models[half:])
    old, new = list(items[:cut]), list(items[cut:])
    first = _bank(matrix.subset(models=group_a, items=old), seed)
    grown = add_items(first, matrix.subset(models=group_a))
    apart = _bank(matrix.subset(models=group_b), seed)
    link = link_banks(grown, apart, method="stocking-lord", n_boot=n_boot, seed=seed)
    everything = _bank(matrix, seed)
    refit_a = _bank(matrix.subset(models=group_a), seed)
    kept_old = list(first.item_ids)
    added = [i for i in grown.item_ids if i not in set(kept_old)]
    common = list(link.common)
    steps = pd.DataFrame({
        "first bank (group A, old items) vs joint refit of everything":
            _against(first, everything, kept_old, base=first),
        "added items (fixed-parameter, group A) vs joint refit of group A":
            _against(grown, refit_a, added, base=first),
        "added items vs joint refit of everything":
            _against(grown, everything, added, base=first),
        "group B's bank, linked (Stocking-Lord) vs joint refit of everything":
            _against(link.linked, everything, common, base=grown),
    }).T
    sizes = {"models_a": len(group_a), "models_b": len(group_b), "old_items": len(old), "new_items": len(new),
             "bank_items": len(first), "added_items": len(added), "common_items": len(common),
             "filtered_new": grown.meta["added_items"][-1]["n_new_filtered"],
             "fixed_models": grown.meta["added_items"][-1]["n_models"]}
    return GrowCycle(steps=steps, constants=link.constants, sizes=sizes, n_boot=n_boot)
