"""A bank that grows: new items on the bank's scale, and a bank calibrated apart linked onto it.

:func:`add_items` calibrates items added to an existing bank with the bank's items held fixed
(fixed-parameter calibration, :func:`irtlib.calibration.fixed.fit_fixed`), from the models that
answered both, so scores already reported on the bank keep their meaning. :func:`link_banks` puts
a bank calibrated on other models onto a base bank's scale through their common items
(:mod:`irtlib.calibration.linking`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from irtlib._version import __version__
from irtlib.calibration.fixed import fit_fixed
from irtlib.calibration.linking import LINK_METHODS, MIN_COMMON, link_constants_with_errors
from irtlib.calibration.standard_errors import PAPER_PRIORS, item_standard_errors
from irtlib.core.kernels import probability
from irtlib.core.responses import ResponseMatrix, shown
from irtlib.errors import InputError

from .format import ItemBank

__all__ = ["add_items", "bank_priors", "link_banks", "LinkResult", "MIN_COMMON", "LINK_METHODS"]


def _name(bank: ItemBank) -> str:
    return str(bank.meta.get("path") or "item bank")


def add_items(bank: ItemBank, matrix: ResponseMatrix, *, min_common: int = MIN_COMMON,
              source: str | None = None) -> ItemBank:
    """The bank with the items of ``matrix`` it lacks calibrated on its scale, its own items unchanged.

    Parameters
    ----------
    bank : ItemBank
    matrix : ResponseMatrix
        Binary responses of models to some of the bank's items and to new items.
    min_common : int
        Fewest bank items the responses must hold (they carry the scale).
    source : str, optional
        The responses' file, for messages and the header.

    Returns
    -------
    ItemBank
        The bank's items as they were, then the new items (``a``, ``b``, ``se_a``, ``se_b`` given the
        fixed items, ``safe_rate``, ``n_models``, ``expected``, ``residual``); new items with
        ``p (1 - p)`` at most the bank's variance threshold join its filtered items instead. The
        header's ``added_items`` records each addition.

    Raises
    ------
    InputError
        Fewer than ``min_common`` bank items in the responses, no new item, no model that answered
        both a bank item and a new item.
    """
    source = source or matrix.source
    ids = pd.Index(matrix.items.astype(str))
    old = ids.isin(bank.item_ids)
    n_old = int(old.sum())
    if n_old < min_common:
        raise InputError(f"{source}: only {n_old} of its {len(ids)} items are in the bank {_name(bank)} "
                         f"(fixed-parameter calibration needs at least {min_common} of them to carry the scale)")
    if old.all():
        raise InputError(f"{source}: every item is already in the bank {_name(bank)}: no new item to add")
    x = matrix.values
    seen = ~np.isnan(x)
    both = seen[:, old].any(axis=1) & seen[:, ~old].any(axis=1)
    if not both.any():
        raise InputError(f"{source}: no model answered both a bank item and a new item")
    threshold = float(bank.meta.get("settings", {}).get("variance_threshold", 0.01))
    new_ids = ids[~old]
    rates = pd.Series(np.nanmean(np.where(seen[both][:, ~old], x[both][:, ~old], np.nan), axis=0), index=new_ids)
    dropped = (rates * (1 - rates) <= threshold) | rates.isna()
    keep_new = new_ids[~dropped.to_numpy()]
    if len(keep_new) == 0:
        raise InputError(f"{source}: every new item has p(1-p) <= {threshold} over the models that answered both "
                         "(nothing to calibrate)")
    old_ids = ids[old]
    cols = np.r_[ids.get_indexer(old_ids), ids.get_indexer(keep_new)]
    values = x[both][:, cols]
    a_old, b_old = bank.items.loc[old_ids, "a"].to_numpy(float), bank.items.loc[old_ids, "b"].to_numpy(float)
    priors = bank_priors(bank)
    theta, a_new, b_new, info = fit_fixed(values, a_old, b_old, priors=priors)
    fixed = np.r_[np.ones(len(old_ids), bool), np.zeros(len(keep_new), bool)]
    se = item_standard_errors(values, np.r_[a_old, a_new], np.r_[b_old, b_new], theta, fixed=fixed, priors=priors)
    new_x = values[:, len(old_ids):]
    expected = np.where(np.isnan(new_x), np.nan, probability(theta[:, None], a_new, b_new))
    observed_rate = np.nanmean(new_x, axis=0)
    added = pd.DataFrame({"a": a_new, "b": b_new, "safe_rate": observed_rate,
                          "n_models": (~np.isnan(new_x)).sum(axis=0), "expected": np.nanmean(expected, axis=0),
                          "residual": observed_rate - np.nanmean(expected, axis=0),
                          "se_a": se["se_a"].to_numpy()[~fixed], "se_b": se["se_b"].to_numpy()[~fixed]},
                         index=pd.Index(keep_new, name="item"))
    items = pd.concat([bank.items, added.reindex(columns=bank.items.columns)])
    if "se_a" not in bank.items.columns:
        items["se_a"], items["se_b"] = added["se_a"].reindex(items.index), added["se_b"].reindex(items.index)
    meta = {k: v for k, v in bank.meta.items() if k not in ("path", "bank_sha256", "file_sha256")}
    gone = rates[dropped.to_numpy()]
    filtered = bank.filtered
    filtered = {"n_items": filtered["n_items"] + len(gone),
                "n_safe": filtered["n_safe"] + int((gone >= 0.5).sum()),
                "n_unsafe": filtered["n_unsafe"] + int((gone < 0.5).sum()),
                "safe_rate_sum": float(filtered["safe_rate_sum"] + gone.fillna(0).sum())}
    meta["filtered"] = filtered
    meta["data"] = {**meta.get("data", {}), "n_items": len(items) + filtered["n_items"]}
    meta["added_items"] = list(meta.get("added_items") or []) + [{
        "irtlib_version": __version__, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "method": "fixed-parameter calibration (bank items held fixed, joint MAP of the new items and abilities)",
        "source": str(source), "from_bank_sha256": bank.checksum, "n_new_items": len(keep_new),
        "n_new_filtered": len(gone), "n_fixed_items": len(old_ids), "n_models": int(both.sum()),
        "iterations": info["iterations"], "converged": info["converged"]}]
    return ItemBank(items, meta)


def bank_priors(bank: ItemBank) -> tuple:
    """The paper's priors on the bank's scale (theta, log a, b): what its fit assumed, where its items now are.

    On the fit's scale they are ``Normal(0, 1)`` each; on the standard scale (``theta' = (theta - m) / s``,
    ``a' = a s``) they are ``theta' ~ Normal(-m / s, 1 / s)``, ``log a' ~ Normal(log s, 1)``,
    ``b' ~ Normal(-m / s, 1 / s)``, so a fixed-parameter calibration on either gives the same probabilities.
    """
    scale = bank.meta.get("scale") or {}
    if scale.get("kind") != "standard":
        return PAPER_PRIORS
    m, s = float(scale["fit_theta_mean"]), float(scale["fit_theta_sd"])
    return (-m / s, 1 / s), (float(np.log(s)), 1.0), (-m / s, 1 / s)


@dataclass(frozen=True)
class LinkResult:
    """A link of a bank onto a base bank's scale.

    Attributes
    ----------
    constants : DataFrame indexed by method
        ``A``, ``B``, ``se_A``, ``se_B``, ``n_common`` (:func:`irtlib.calibration.linking.link_constants_with_errors`).
    method : str
        The method whose constants transformed the bank.
    linked : ItemBank
        The new bank's items on the base scale (``a / A``, ``A b + B``, errors likewise).
    common : list of str
        The common items.
    """

    constants: pd.DataFrame
    method: str
    linked: ItemBank
    common: list


def _setting(bank: ItemBank, *path):
    value = bank.meta
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def link_banks(base: ItemBank, new: ItemBank, *, method: str = "stocking-lord", n_boot: int = 100, seed: int = 0,
               min_common: int = MIN_COMMON) -> LinkResult:
    """Put ``new`` on ``base``'s scale through their common items.

    Parameters
    ----------
    base, new : ItemBank
        Banks of the same benchmark calibrated apart (other models), with the same engine and scale kind.
    method : {"mean/sigma", "mean/mean", "stocking-lord"}
        Which constants transform the new bank (all three are reported).
    n_boot, seed : int
        Bootstrap of the common items for the constants' errors.
    min_common : int
        Refuse a link through fewer common items.

    Returns
    -------
    LinkResult

    Raises
    ------
    InputError
        Banks from different engines or scale kinds, fewer than ``min_common`` common items (the
        message says how many there are), an unknown method.
    """
    if method not in LINK_METHODS:
        raise InputError(f"unknown linking method {method!r}; choose one of {LINK_METHODS}")
    for what, path in (("engine", ("settings", "engine")), ("scale", ("scale", "kind"))):
        mine, theirs = _setting(base, *path), _setting(new, *path)
        if mine is not None and theirs is not None and mine != theirs:
            raise InputError(f"{_name(new)}: {what} {shown(theirs)} differs from the base bank {_name(base)}'s "
                             f"{shown(mine)}: link banks calibrated the same way")
    common = base.item_ids.intersection(new.item_ids)
    theta = base.calibration_theta
    theta_mean, theta_sd = (float(theta.mean()), float(theta.std(ddof=0))) if len(theta) > 1 else (0.0, 1.0)
    constants = link_constants_with_errors(
        new.items.loc[common, "a"], new.items.loc[common, "b"], base.items.loc[common, "a"],
        base.items.loc[common, "b"], theta_mean=theta_mean, theta_sd=theta_sd, n_boot=n_boot, seed=seed,
        min_common=min_common, source=f"{_name(new)} and {_name(base)}")
    slope, shift = constants.loc[method, ["A", "B"]]
    items = new.items.copy()
    items["a"], items["b"] = items["a"] / slope, slope * items["b"] + shift
    if "se_a" in items.columns:
        items["se_a"], items["se_b"] = items["se_a"] / slope, slope * items["se_b"]
    meta = {k: v for k, v in new.meta.items() if k not in ("path", "bank_sha256", "file_sha256")}
    models = dict(meta.get("models") or {})
    if models.get("theta"):
        models["theta"] = [slope * t + shift for t in models["theta"]]
        meta["models"] = models
    meta["linked"] = {"irtlib_version": __version__, "base_bank_sha256": base.checksum,
                      "from_bank_sha256": new.checksum, "method": method, "A": slope, "B": shift,
                      "n_common": len(common), "constants": constants.reset_index().to_dict(orient="records"),
                      "note": "theta_base = A theta + B, b_base = A b + B, a_base = a / A"}
    return LinkResult(constants=constants, method=method, linked=ItemBank(items, meta), common=list(common))
