"""The paper's pipeline on real jailbreak data (PandaGuard / JailbreakBench), and its scorecard rows.

:func:`run` does everything the chapter "A second real data set: jailbreak attacks" shows, cached:
the 2PL fit, Spearman(theta, score), the CV of a, the agreement protocol of all eight methods
with the agreement ceiling, once with the paper's random splits of configurations and once with
whole base models held out. :func:`claims` turns the result into rows of the book's scorecard
(:class:`irtbook.scorecard.Claim`), each verdict computed by one of the scorecard's rules.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from irtlib import datasets
from irtlib.calibration.joint_map import fit_2pl
from irtlib.fit.summaries import coefficient_of_variation
from irtlib.protocol.agreement import (
    agreement_curves,
    budget_grid,
    paired_difference,
    run_protocol,
    spearman,
    summarise_table2,
)
from irtlib.protocol.ceiling import agreement_ceiling

from . import scorecard
from .cache import array_checksum, cached
from .shared_fits import shared_calibrations

__all__ = ["PROTOCOLS", "run", "headline", "claims"]

#: The two protocols: the paper's (random configurations) and held-out base models.
PROTOCOLS = {"random": "random configurations", "grouped": "held-out base models"}


def _protocol_and_ceiling(matrix, *, ks, kw: dict) -> dict:
    """One protocol's agreement runs and ceiling in this process, each split calibrated once for both."""
    kw = {**kw, "n_jobs": 1}
    with shared_calibrations(kw["engine"]):
        return {"results": run_protocol(matrix, ks=ks, progress=False, **kw), "ceiling": agreement_ceiling(matrix, **kw)}


def run(*, data_dir=None, rule: str = "binary", n_splits: int = 100, n_test: int = 10, n_test_groups: int = 2,
        seed: int = 0, engine: str = "map", ks=None, n_jobs: int = 1, cache_dir=None) -> dict:
    """The paper's pipeline on the PandaGuard matrix (cached).

    Parameters
    ----------
    data_dir : path-like, optional
        Default ``$IRTLIB_PANDAGUARD_DATA``.
    rule : {"binary", "strict", "lenient"}
        See :func:`irtlib.datasets.pandaguard.load_pandaguard`.
    n_splits, n_test, seed, engine, ks
        As in :func:`irtlib.run_protocol` (``ks`` default: :func:`budget_grid` of the filtered items).
    n_jobs : int
        Worker processes: the two protocols run side by side (one each; 1: both here), each
        calibrating a split once for its agreement runs and its ceiling
        (:func:`irtbook.shared_fits.shared_calibrations`). The results do not depend on it.
    n_test_groups : int
        Base models held out per split in the grouped protocol (their ``n_test`` test
        configurations are drawn from these base models; none of their configurations trains).

    Returns
    -------
    dict
        ``matrix`` (ResponseMatrix, unfiltered), ``models`` (configuration table), ``calibration``
        (2PL on all configurations), ``spearman_theta_score``, ``cv_a``, ``n_items``,
        ``n_items_filtered``, and per protocol (``"random"``, ``"grouped"``) ``results``
        (:func:`run_protocol` output) and ``ceiling`` (:func:`agreement_ceiling`, same splits).

    Raises
    ------
    FileNotFoundError, ValueError
        Data absent or not matching the pinned checksums.
    """
    m = datasets.load("pandaguard-jbb", rule=rule, data_dir=data_dir)
    models = datasets.load_models("pandaguard-jbb", data_dir=data_dir).set_index("model").reindex(m.models)
    groups = models["target"].to_numpy()
    filtered = m.filter_variance()
    ks = budget_grid(filtered.shape[1]) if ks is None else sorted({int(k) for k in ks})
    key = ("pandaguard_claims.run", rule, array_checksum(m.values), n_splits, n_test, n_test_groups, seed, engine,
           tuple(ks))

    def compute():
        cal = fit_2pl(filtered, engine=engine)
        score = m.safety_scores().reindex(cal.theta.index).to_numpy()
        out = {"calibration": cal, "spearman_theta_score": float(spearman(cal.theta.to_numpy(), score)),
               "cv_a": coefficient_of_variation(cal.a.to_numpy()), "n_items": int(m.shape[1]),
               "n_items_filtered": int(filtered.shape[1]), "ks": ks}
        tasks = {}
        for name, g in (("random", None), ("grouped", groups)):
            kw = dict(n_splits=n_splits, n_test=n_test, seed=seed, engine=engine)
            if g is not None:
                kw.update(groups=g, n_test_groups=n_test_groups)
            tasks[name] = kw
        if int(n_jobs) == 1:
            done = [_protocol_and_ceiling(m, ks=ks, kw=kw) for kw in tasks.values()]
        else:
            from joblib import Parallel, delayed

            done = Parallel(n_jobs=min(int(n_jobs), len(tasks)) if int(n_jobs) > 0 else n_jobs)(
                delayed(_protocol_and_ceiling)(m, ks=ks, kw=kw) for kw in tasks.values())
        out.update(zip(tasks, done, strict=True))
        return out

    out = cached(compute, key=key, cache_dir=cache_dir)
    return {"matrix": m, "models": models.reset_index(), **out}


def headline(result: dict, *, k: int = 20, threshold: float = 0.90) -> pd.DataFrame:
    """The chapter's headline numbers, one row per protocol.

    Columns: ``protocol``, ``fluid_k``, ``random_k`` (mean agreement at ``k``), ``diff_k`` with
    ``diff_lo``, ``diff_hi`` (paired Fluid - Random), ``random_irt_diff`` (Random - Random IRT at
    ``k``, with ``rirt_lo``, ``rirt_hi``), ``ceiling``, ``ceiling_sd``, ``fluid_max`` (at the
    largest budget), ``k_fluid_090`` and ``saving_fluid`` (Fluid's first ``k`` at ``threshold``
    and ``1 - k / N``; NaN when never reached), ``k_random_090``, ``saving_random``.
    """
    rows = []
    for name, label in PROTOCOLS.items():
        res = result[name]["results"]
        curves = agreement_curves(res).pivot(index="k", columns="method", values="mean")
        kk = int(curves.index[np.argmin(np.abs(np.log(curves.index) - np.log(k)))])
        d = paired_difference(res, k=kk, method="fluid", baseline="random")
        r = paired_difference(res, k=kk, method="random", baseline="random-irt")
        n = result["n_items"]
        first = {}
        for method in ("fluid", "random"):
            hit = curves.index[curves[method] >= threshold]
            first[method] = int(hit.min()) if len(hit) else None
        ceiling = result[name]["ceiling"].fillna(0.0)
        rows.append({"protocol": label, "k": kk, "fluid_k": curves.loc[kk, "fluid"],
                     "random_k": curves.loc[kk, "random"], "diff_k": d["mean"], "diff_lo": d["ci_lo"],
                     "diff_hi": d["ci_hi"], "random_irt_diff": r["mean"], "rirt_lo": r["ci_lo"], "rirt_hi": r["ci_hi"],
                     "ceiling": float(ceiling.mean()), "ceiling_sd": float(ceiling.std()),
                     "fluid_max": curves["fluid"].iloc[-1], "random_max": curves["random"].iloc[-1],
                     "k_fluid_090": first["fluid"], "saving_fluid": 1 - first["fluid"] / n if first["fluid"] else np.nan,
                     "k_random_090": first["random"],
                     "saving_random": 1 - first["random"] / n if first["random"] else np.nan})
    return pd.DataFrame(rows)


def claims(result: dict | None, *, k: int = 20, section: str = "{ref}`ch-pandaguard`") -> list:
    """Scorecard rows: the paper's claims tested on the PandaGuard data, both protocols.

    Parameters
    ----------
    result : dict or None
        From :func:`run`; None (data absent) gives the same claims with verdict
        "not testable here" and evidence "n/a".
    k : int
        The small budget of the direction and match claims (nearest swept).

    Returns
    -------
    list of :class:`irtbook.scorecard.Claim`
    """
    Claim = scorecard.Claim
    data = "real PandaGuard JailbreakBench (704 configurations, {})"
    na = "not testable here"
    rows = []
    if result is None:
        rows.append(Claim("Spearman(theta, safety score) is between 0.97 and 1.00", "Figure 2",
                          data.format("all"), "n/a", section, na, "bound", id="pg_rho", kind="real", benchmarks=1))
        for key, label in PROTOCOLS.items():
            rows += [Claim(f"Fluid beats Random at a small budget (k = {k})", "Figure 4, Table 2", data.format(label),
                           "n/a", section, na, "direction", id=f"pg_fluid_random_{key}", kind="real"),
                     Claim("Random and Random IRT are nearly indistinguishable", "Figure 4", data.format(label),
                           "n/a", section, na, "match", id=f"pg_random_randomirt_{key}", kind="real"),
                     Claim("Fluid reaches 0.90 agreement saving at least 80% of the items", "Abstract",
                           data.format(label), "n/a", section, na, "bound", id=f"pg_saving_{key}", kind="real", benchmarks=1)]
        return rows
    rho = result["spearman_theta_score"]
    rows.append(Claim("Spearman(theta, safety score) is between 0.97 and 1.00", "Figure 2", data.format("all"),
                      f"rho = {rho:.3f}", section, scorecard.bound_verdict([rho], bound=0.97, decimals=2), "bound",
                      id="pg_rho", kind="real", benchmarks=1))
    head = headline(result, k=k)
    keys = {label: key for key, label in PROTOCOLS.items()}
    why = ("PandaGuard is not one of the paper's benchmarks: its respondents are attacked configurations that share "
           "a few base models, so they are not independent models, and its items are jailbreak behaviours.")
    for _, h in head.iterrows():
        label = h["protocol"]
        key = keys[label]
        rows.append(Claim(f"Fluid beats Random at a small budget (k = {int(h['k'])})", "Figure 4, Table 2",
                          data.format(label),
                          f"Fluid - Random = {h['diff_k']:.3f} [{h['diff_lo']:.3f}, {h['diff_hi']:.3f}]", section,
                          scorecard.direction_verdict(h["diff_k"], h["diff_lo"], h["diff_hi"]), "direction",
                          id=f"pg_fluid_random_{key}", kind="real"))
        rows.append(Claim("Random and Random IRT are nearly indistinguishable", "Figure 4", data.format(label),
                          f"Random - Random IRT at k = {int(h['k'])}: {h['random_irt_diff']:.3f} "
                          f"[{h['rirt_lo']:.3f}, {h['rirt_hi']:.3f}]", section,
                          scorecard.match_verdict(h["random_irt_diff"], h["rirt_lo"], h["rirt_hi"]), "match",
                          id=f"pg_random_randomirt_{key}", kind="real"))
        saving = h["saving_fluid"]
        ev = (f"Fluid first reaches 0.90 at k = {int(h['k_fluid_090'])} of {result['n_items']}: saves {saving:.0%}"
              if np.isfinite(saving) else "Fluid never reaches 0.90 within the sweep")
        rows.append(Claim("Fluid reaches 0.90 agreement saving at least 80% of the items", "Abstract",
                          data.format(label), ev, section,
                          scorecard.bound_verdict([saving if np.isfinite(saving) else -1.0], bound=0.80, decimals=2),
                          "bound", id=f"pg_saving_{key}", kind="real", benchmarks=1))
    return [dataclasses.replace(c, note=why) if c.verdict not in ("reproduced", "not testable here") else c
            for c in rows]
