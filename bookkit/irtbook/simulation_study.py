"""The simulation study of the book's chapter "What makes random win" (issue 11).

Varies one generating factor at a time on :func:`irtlib.datasets.simulate.simulate_variant`
(SafetyBench's generator: multiple choice, guessing, seven correlated risk dimensions) and, per
setting, runs the paper's agreement protocol for Fluid Benchmarking and Random
(:func:`irtlib.protocol.agreement.run_protocol`), the agreement ceiling of the ability-scored methods
(:func:`irtlib.protocol.ceiling.agreement_ceiling`) and Spearman(theta, score) of the full fit.

The ceiling is measured on the protocol's own splits, so it needs the same per-split calibrations:
a setting computes each split's fit once (:func:`irtbook.shared_fits.shared_calibrations`) and both read it, and the
study runs its settings in parallel, each in one process (:func:`run_study`).
"""

from __future__ import annotations

import contextlib
import time

import numpy as np
import pandas as pd

from irtlib import datasets
from irtlib.calibration.joint_map import fit_2pl
from irtlib.datasets import simulate as _sim
from irtlib.fit.summaries import coefficient_of_variation
from irtlib.protocol.agreement import agreement_curves, budget_grid, paired_difference, run_protocol, spearman
from irtlib.protocol.ceiling import agreement_ceiling

from .cache import cached
from .shared_fits import shared_calibrations

__all__ = ["BASELINE", "FACTORS", "FACTOR_LABELS", "study_matrix", "setting_budgets", "run_setting",
           "study_settings", "run_study", "COMBINED"]

#: The reference setting: SafetyBench's generator (29 models = 19 training + 10 test per split,
#: the release's guessing, dimension correlation 0.7 and discrimination mixture, no shift), on
#: a smaller item bank so the study runs in minutes.
BASELINE = {"n_models": 29, "guess_scale": 1.0, "dim_correlation": 0.7, "a_cv": None, "ability_shift": 0.0}

#: One factor at a time: the knob of :func:`simulate_variant` and its levels.
FACTORS = {
    "training models": ("n_models", (29, 77, 160)),
    "guessing": ("guess_scale", (0.0, 1.0, 2.0)),
    "dimension correlation": ("dim_correlation", (1.0, 0.7, 0.5, 0.3)),
    "CV of a": ("a_cv", (0.2, 0.5, 0.9, 1.3)),
    "ability shift": ("ability_shift", (0.0, 1.0, 2.0, 3.0)),
}

#: Every factor at once at the level that moved the study toward SafetyBench's reversal
#: (few training models, doubled guessing, weakly correlated dimensions, population above the items).
COMBINED = {"n_models": 29, "guess_scale": 2.0, "dim_correlation": 0.3, "a_cv": None, "ability_shift": 3.0}

#: How a level reads in tables and figures.
FACTOR_LABELS = {
    "training models": lambda v, n_test=10: f"{int(v) - n_test} training",
    "guessing": lambda v, n_test=10: f"{v:g} x release",
    "dimension correlation": lambda v, n_test=10: f"rho = {v:g}",
    "CV of a": lambda v, n_test=10: f"CV = {v:g}",
    "ability shift": lambda v, n_test=10: f"+{v:g}",
}


def study_matrix(settings: dict, *, n_items: int, seed: int = _sim.DEFAULT_SEED):
    """The binarized matrix of one setting (SafetyBench's rule: the safe option picked = 1).

    Parameters
    ----------
    settings : dict
        Keyword arguments of :func:`simulate_variant` (``n_models``, ``guess_scale``,
        ``dim_correlation``, ``a_cv``, ``ability_shift``).
    n_items : int
        Items in the bank.
    seed : int
        Data seed.

    Returns
    -------
    ResponseMatrix, shape (n_models, n_items)
    """
    sim = _sim.simulate_variant("safetybench", seed=seed, n_items=n_items, **settings)
    return datasets.binarize_raw("safetybench", sim.responses, sim.items, models=sim.models["model"])


def setting_budgets(n_items: int, *, max_k: int, n_points: int, must=(19, 20)) -> list[int]:
    """A log grid up to ``max_k`` (at most the bank) plus the budgets in ``must``."""
    top = min(int(max_k), int(n_items))
    return sorted(set(budget_grid(n_items, max_k=top, n_points=n_points)) | {k for k in must if k <= top})


def run_setting(settings: dict, *, n_items: int = 1000, data_seed: int = _sim.DEFAULT_SEED, seed: int = 0,
                n_splits: int = 20, n_test: int = 10, max_k: int = 300, n_points: int = 12,
                engine: str = "map", n_jobs: int = 1, cache_dir=None) -> dict:
    """Everything the study measures for one setting (cached).

    With ``n_jobs=1`` the setting runs in this process and each split is calibrated once, for the
    protocol and the ceiling alike (:func:`irtbook.shared_fits.shared_calibrations`); with more, the protocol and the
    ceiling each run their splits in ``n_jobs`` worker processes and calibrate them there. The
    results are the same (a test checks it); :func:`run_study` runs settings, not splits, in parallel.

    Returns
    -------
    dict
        ``settings``; ``results`` (the protocol's rows for ``fluid`` and ``random``);
        ``ceiling`` (Series, one per split); ``spearman_theta_score`` (MAP ability of the fit on
        every model against the safety score); ``cv_a`` (of the fitted ``a``); ``mean_score``;
        ``n_items_filtered``; ``seconds``.
    """
    settings = {**BASELINE, **settings}
    key = ("simulation_study.run_setting", tuple(sorted((k, v) for k, v in settings.items())), n_items,
           data_seed, seed, n_splits, n_test, max_k, n_points, engine)

    def compute():
        t0 = time.perf_counter()
        m = study_matrix(settings, n_items=n_items, seed=data_seed)
        filtered = m.filter_variance()
        ks = setting_budgets(filtered.shape[1], max_k=max_k, n_points=n_points)
        shared = shared_calibrations(engine) if int(n_jobs) == 1 else contextlib.nullcontext()
        with shared:
            res = run_protocol(m, methods=("fluid", "random"), ks=ks, n_splits=n_splits, n_test=n_test, seed=seed,
                               engine=engine, n_jobs=n_jobs, progress=False)
            ceiling = agreement_ceiling(m, n_splits=n_splits, n_test=n_test, seed=seed, engine=engine,
                                        n_jobs=n_jobs)
        cal = fit_2pl(filtered, engine=engine)
        score = m.safety_scores().reindex(cal.theta.index).to_numpy()
        return {"settings": settings, "results": res, "ceiling": ceiling,
                "spearman_theta_score": float(spearman(cal.theta.to_numpy(), score)),
                "cv_a": coefficient_of_variation(cal.a.to_numpy()), "mean_score": float(np.nanmean(m.values)),
                "n_items_filtered": int(filtered.shape[1]), "seconds": time.perf_counter() - t0}

    return cached(compute, key=key, cache_dir=cache_dir)


def study_settings(factors=None, *, combined: bool = False) -> list[tuple[str, object, dict]]:
    """``(factor, level, settings)`` for every level of every factor, baseline elsewhere.

    ``combined=True`` appends ``("combined", "all", COMBINED)``.
    """
    factors = FACTORS if factors is None else factors
    out = [("combined", "all", dict(COMBINED))] if combined else []
    for factor, (knob, levels) in factors.items():
        for level in levels:
            out.append((factor, level, {**BASELINE, knob: level}))
    return out[1:] + out[:1] if combined else out


def _settings_key(settings: dict) -> tuple:
    return tuple(sorted(settings.items(), key=lambda kv: kv[0]))


def run_study(factors=None, *, k: int = 20, n_items: int = 1000, data_seed: int = _sim.DEFAULT_SEED, seed: int = 0,
              n_splits: int = 20, n_test: int = 10, max_k: int = 300, n_points: int = 12, engine: str = "map",
              n_jobs: int = 1, cache_dir=None, combined: bool = False) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Run every setting once (a setting shared by several factors runs once) and summarise.

    The distinct settings run in ``n_jobs`` worker processes (joblib; 1: in this one), each
    :func:`run_setting` with ``n_jobs=1``, so every split is calibrated once; the results do not
    depend on ``n_jobs``.

    Returns
    -------
    summary : DataFrame, one row per (factor, level)
        ``fluid_k``, ``random_k`` (mean agreement at ``k``), ``diff_k`` (Fluid minus Random,
        paired over splits) with ``diff_lo``, ``diff_hi`` (95% interval of the mean difference),
        ``fluid_max``, ``random_max`` (at the largest swept budget ``k_max``), ``ceiling``,
        ``ceiling_sd`` (over splits), ``spearman_theta_score``, ``cv_a`` (fitted), ``mean_score``,
        ``n_items_filtered``.
    curves : DataFrame
        :func:`agreement_curves` of every setting, with ``factor`` and ``level`` columns.
    runs : dict
        ``{(factor, level): run_setting output}`` (shared settings share one run).
    """
    rows, frames, runs, by_settings = [], [], {}, {}
    every = study_settings(factors, combined=combined)
    for _, _, settings in every:
        by_settings.setdefault(_settings_key(settings), settings)
    options = dict(n_items=n_items, data_seed=data_seed, seed=seed, n_splits=n_splits, n_test=n_test, max_k=max_k,
                   n_points=n_points, engine=engine, n_jobs=1, cache_dir=cache_dir)
    # the largest settings first, so that the workers finish together
    order = sorted(by_settings, key=lambda skey: -int({**BASELINE, **by_settings[skey]}["n_models"]))
    if int(n_jobs) == 1:
        done = [run_setting(by_settings[skey], **options) for skey in order]
    else:
        from joblib import Parallel, delayed

        done = Parallel(n_jobs=n_jobs)(delayed(run_setting)(by_settings[skey], **options) for skey in order)
    by_settings = dict(zip(order, done, strict=True))
    for factor, level, settings in every:
        run = runs[(factor, level)] = by_settings[_settings_key(settings)]
        res = run["results"]
        curves = agreement_curves(res)
        wide = curves.pivot(index="k", columns="method", values="mean")
        kk = k if k in wide.index else int(wide.index[np.argmin(np.abs(wide.index - k))])
        kmax = int(wide.index.max())
        d = paired_difference(res, k=kk, method="fluid", baseline="random")
        rows.append({"factor": factor, "level": level, "k": kk, "fluid_k": wide.loc[kk, "fluid"],
                     "random_k": wide.loc[kk, "random"], "diff_k": d["mean"], "diff_lo": d["ci_lo"],
                     "diff_hi": d["ci_hi"], "k_max": kmax, "fluid_max": wide.loc[kmax, "fluid"],
                     "random_max": wide.loc[kmax, "random"], "ceiling": float(run["ceiling"].fillna(0).mean()),
                     "ceiling_sd": float(run["ceiling"].fillna(0).std()),
                     "spearman_theta_score": run["spearman_theta_score"], "cv_a": run["cv_a"],
                     "mean_score": run["mean_score"], "n_items_filtered": run["n_items_filtered"]})
        frames.append(curves.assign(factor=factor, level=level))
    return pd.DataFrame(rows), pd.concat(frames, ignore_index=True), runs
