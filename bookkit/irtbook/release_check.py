"""The simulated release beside the real data: what a calibrated simulation reproduces.

The simulated release (``data/``) was generated to match the fit summaries the paper reports
(Table 1's shapes, the ceiling counts, Figure 3's CVs, appendix E's RMSE), never its agreement
results. Now that the paper's own matrices are here, each simulated benchmark can be set beside
the real one it stands for: :func:`benchmark_profile` summarises one benchmark in the numbers
the chapters report, and :func:`release_vs_real` lays the two sources side by side.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from irtlib.calibration.joint_map import fit_2pl
from irtlib.datasets import paper
from irtlib.fit.summaries import coefficient_of_variation, item_rmse
from irtlib.protocol.agreement import agreement_curves, paired_difference, spearman

from .cache import cached
from .pipeline import calibrate_benchmark, default_budgets, protocol_benchmark
from .scorecard import nearest_swept

__all__ = ["QUANTITIES", "benchmark_profile", "release_vs_real", "agreement_summary"]

#: The rows of the comparison, in order (key -> how the chapter labels it).
QUANTITIES = {
    "n_models": "models",
    "n_items": "items",
    "kept_share": "share of items kept by the variance filter",
    "mean_score": "mean safety score",
    "at_ceiling": "models at or above 0.95",
    "rho_theta_score": "Spearman(theta, score)",
    "cv_a": "CV of a",
    "item_rmse": "item RMSE",
    "lead_k": "Fluid - Random near k = 20",
    "fluid_k090": "Fluid's first k at 0.90 agreement",
}


def _first_k(curve: pd.Series, threshold: float) -> float:
    hit = curve.index[curve.to_numpy() >= threshold]
    return float(hit.min()) if len(hit) else float("nan")


def benchmark_profile(bench, *, n_splits: int = 20, n_test: int = 10, seed: int = 0, k: int = 20,
                      engine: str = "map", n_jobs: int = 1, threshold: float = 0.90, protocol=None,
                      cache_dir=None) -> dict:
    """One benchmark in the numbers the chapters report (cached).

    Parameters
    ----------
    bench : irtbook.pipeline.Benchmark
    n_splits, n_test, seed, engine, n_jobs
        The agreement protocol's settings (:func:`irtlib.run_protocol` at its own budgets), Fluid and Random
        only, run through :func:`irtbook.pipeline.protocol_benchmark`: the rows are read from a stored run of
        the protocol's every split on the same data when ``cache_dir`` holds one (chapter 6's).
    k : int
        The small budget of Fluid's lead over Random (nearest swept budget).
    threshold : float
        Agreement that Fluid's mean curve must reach ("first k at 0.90", Table 2).
    protocol : str or None
        The protocol (``"paper"`` or ``"authors"``; None: ``"paper"``).

    Returns
    -------
    dict
        One value per key of :data:`QUANTITIES` (NaN where undefined, e.g. 0.90 never reached).
    """
    key = ("benchmark_profile", bench.name, bench.checksum, n_splits, n_test, seed, k, engine, threshold, protocol)

    def compute():
        full, filtered = bench.full, bench.filtered
        # the MAP engine's whole fit is the build's stage's (calibrate_benchmark: the same fit_2pl, cached)
        cal = (calibrate_benchmark(bench, engine="map", cache_dir=cache_dir) if engine == "map"
               else fit_2pl(filtered, engine=engine))
        scores = full.safety_scores()
        # run_protocol's own budgets, through the cached pipeline: a stored run of the protocol's every split
        # (chapter 6's runs under the paper's text, on the same data) holds these splits' rows already
        res = protocol_benchmark(bench, methods=["fluid", "random"], n_splits=n_splits, n_test=n_test, seed=seed,
                                 ks=default_budgets(bench, protocol=protocol), engine=engine, n_jobs=n_jobs,
                                 protocol=protocol, cache_dir=cache_dir)
        curves = agreement_curves(res).pivot(index="k", columns="method", values="mean")
        kk = nearest_swept(res, k)
        lead = paired_difference(res, k=kk, method="fluid", baseline="random")["mean"]
        return {
            "n_models": int(full.shape[0]), "n_items": int(full.shape[1]),
            "kept_share": filtered.shape[1] / full.shape[1], "mean_score": float(scores.mean()),
            "at_ceiling": int((scores.to_numpy() >= paper.CEILING_SCORE).sum()),
            "rho_theta_score": float(spearman(cal.theta.to_numpy(), scores.reindex(cal.theta.index).to_numpy())),
            "cv_a": float(coefficient_of_variation(cal.a.to_numpy())), "item_rmse": float(item_rmse(filtered, cal)),
            "lead_k": float(lead), "lead_at": int(kk), "fluid_k090": _first_k(curves["fluid"], threshold),
        }

    return cached(compute, key=key, cache_dir=cache_dir)


def release_vs_real(simulated: dict, real: dict, **options) -> pd.DataFrame:
    """The simulated release and the real data, benchmark by benchmark and quantity by quantity.

    Parameters
    ----------
    simulated, real : dict
        Benchmark id -> ``Benchmark`` from the simulated release and from the real data; only
        benchmarks present in both are compared.
    **options
        Passed to :func:`benchmark_profile`.

    Returns
    -------
    DataFrame
        One row per benchmark and quantity: ``benchmark``, ``quantity`` (a key of
        :data:`QUANTITIES`), ``simulated``, ``real``, ``difference`` (simulated - real).
    """
    rows = []
    for b in [b for b in simulated if b in real]:
        sim, obs = benchmark_profile(simulated[b], **options), benchmark_profile(real[b], **options)
        for q in QUANTITIES:
            s, r = float(sim[q]), float(obs[q])
            rows.append({"benchmark": b, "quantity": q, "simulated": s, "real": r,
                         "difference": s - r if np.isfinite(s) and np.isfinite(r) else float("nan")})
    return pd.DataFrame(rows, columns=["benchmark", "quantity", "simulated", "real", "difference"])


def agreement_summary(table: pd.DataFrame, quantities: Sequence[str], *, tolerance: dict) -> pd.DataFrame:
    """Per quantity, on how many benchmarks the simulation lies within ``tolerance[q]`` of the real data.

    Returns
    -------
    DataFrame indexed by quantity
        ``close`` (count), ``compared`` (benchmarks with both values), ``median_abs_difference``.
    """
    out = {}
    for q in quantities:
        t = table[(table["quantity"] == q) & table["difference"].notna()]
        gap = t["difference"].abs()
        out[q] = {"close": int((gap <= tolerance[q]).sum()), "compared": len(t),
                  "median_abs_difference": float(gap.median()) if len(t) else float("nan")}
    return pd.DataFrame.from_dict(out, orient="index")
