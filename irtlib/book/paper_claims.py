"""The paper's claims, tested: one function per chapter, each returning scorecard rows with ids.

Each function takes what its chapter has already computed (benchmarks, fits, protocol runs) and
returns :class:`~irtlib.book.scorecard.Claim` rows whose verdicts come from the rules of
:mod:`irtlib.book.scorecard`. The chapter publishes them (:func:`irtlib.book.claims.publish`) and
the scorecard collects them, so every claim is tested once, in the chapter that shows its
evidence.

Claims about "all six benchmarks" are tested separately on the benchmarks with real data and on
those that rest on the simulated release (``_real`` and ``_sim`` ids), so that a verdict on real
data is never diluted by a simulated one, nor the reverse.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from irtlib.datasets import paper

from . import provenance
from . import scorecard as sc

__all__ = ["by_kind", "fit_claims", "ceiling_counts", "ceiling_pair", "ceiling_claims", "discrimination_claims",
           "exception_claims", "airbench_claims", "table2_claims", "savings_claims", "model_choice_claims"]

Claim = sc.Claim


def by_kind(benches: Mapping) -> dict[str, dict]:
    """Split benchmarks into ``"real"`` (the paper's data or another real set) and ``"sim"``.

    Returns
    -------
    dict
        ``{"real": {id: Benchmark}, "sim": {id: Benchmark}}``, empty groups left out, in the
        order of ``benches``.
    """
    groups: dict[str, dict] = {"real": {}, "sim": {}}
    for b, bench in benches.items():
        groups["sim" if bench.data.kind == "simulated" else "real"][b] = bench
    return {k: v for k, v in groups.items() if v}


def _kind_of(benches: Mapping) -> str:
    """``"real"``, ``"sim"`` or ``"mixed"``: what a claim over ``benches`` rests on."""
    kinds = set(by_kind(benches))
    return kinds.pop() if len(kinds) == 1 else "mixed"


def _names(benches: Mapping) -> dict:
    return {b: bench.display_name for b, bench in benches.items()}


def fit_claims(benches: Mapping, fits: Mapping, *, engine: str = "py-irt") -> list[Claim]:
    """Figure 2 and appendix E: Spearman(theta, score) >= 0.97 and item RMSE <= 0.04 everywhere.

    Parameters
    ----------
    benches : mapping
        Benchmark id -> ``Benchmark``.
    fits : mapping
        Benchmark id -> ``Calibration`` fitted to ``benches[b].filtered``.
    """
    from irtlib.fit.summaries import item_rmse
    from irtlib.protocol.agreement import spearman

    rho_min, rmse_max = paper.numbers()["SPEARMAN_THETA_SCORE[min]"], paper.ITEM_RMSE_BOUND
    out = []
    for kind, group in by_kind(benches).items():
        name = _names(group)
        rho = {b: float(spearman(fits[b].theta.to_numpy(),
                                 group[b].full.safety_scores().reindex(fits[b].theta.index).to_numpy()))
               for b in group}
        low = min(rho, key=rho.get)
        out.append(Claim(f"Spearman(theta, score) >= {rho_min} on every benchmark", "Figure 2",
                         provenance.describe(group), f"lowest rho {rho[low]:.3f} ({name[low]}) of {len(rho)}",
                         "{ref}`ch-fit`", sc.bound_verdict(rho, bound=rho_min), "bound",
                         id=f"fit_rho_{kind}", kind=kind))
        rmse = {b: float(item_rmse(group[b].filtered, fits[b])) for b in group}
        high = max(rmse, key=rmse.get)
        out.append(Claim(f"Item RMSE <= {rmse_max} on every benchmark", "Appendix E", provenance.describe(group),
                         f"largest {rmse[high]:.3f} ({name[high]}, {engine}) of {len(rmse)}", "{ref}`ch-fit`",
                         sc.bound_verdict(rmse, bound=rmse_max, above=False), "bound",
                         id=f"fit_rmse_{kind}", kind=kind))
    return out


def model_choice_claims(benches: Mapping, gains: Mapping[str, float]) -> list[Claim]:
    """The paper's reason for the 2PL: the 1PL (equal discriminations) fits safety items worse.

    Tested on held-out responses (:func:`irtlib.calibration.models.compare_models`): the claim holds
    on a benchmark when the 2PL's held-out log-likelihood per response exceeds the 1PL's.

    Parameters
    ----------
    benches : mapping
        Benchmark id -> ``Benchmark``.
    gains : mapping
        Benchmark id -> held-out log-likelihood per response, 2PL minus 1PL (nats).

    Returns
    -------
    list of Claim
        One per kind of data (ids ``model_2pl_1pl_real``, ``model_2pl_1pl_sim``), rule ``bound``.
    """
    out = []
    for kind, group in by_kind({b: benches[b] for b in benches if b in gains}).items():
        g = {b: float(gains[b]) for b in group}
        low = min(g, key=g.get)
        out.append(Claim("The 2PL fits better than the 1PL (safety items differ in discrimination)",
                         "Model: 2PL (1PL rejected)", provenance.describe(group),
                         f"2PL - 1PL held-out log-likelihood per response > 0 on {sum(v > 0 for v in g.values())} "
                         f"of {len(g)}; smallest {g[low]:+.3f} ({group[low].display_name})", "{ref}`ch-model-fit`",
                         sc.bound_verdict(g, bound=1e-12), "bound", id=f"model_2pl_1pl_{kind}", kind=kind))
    return out


def ceiling_counts(bench, *, ceiling: float | None = None) -> dict:
    """Models at the ceiling, counted both ways: ``above`` (score > c) and ``at_least`` (score >= c).

    The counts are :func:`irtlib.fit.summaries.ceiling_counts` of the full-benchmark safety scores;
    ``at_one`` is the number of perfect scores and ``max`` the highest score.
    """
    from irtlib.fit.summaries import ceiling_counts as counts

    c = paper.CEILING_SCORE if ceiling is None else ceiling
    s = bench.full.safety_scores().to_numpy()
    n = counts(s, ceiling=c)
    return {"n_models": n["n_models"], "above": n["above"], "at_least": n["at_or_above"], "at_one": n["perfect"],
            "max": float(s.max())}


def ceiling_pair(bench, calibration, *, scores: tuple[float, float] | None = None,
                 ceiling: float | None = None) -> dict:
    """The paper's example pair: the ceiling models scoring (nearest to) 0.957 and 0.999, and their theta gap.

    Ceiling models are those scoring at least ``ceiling`` (as the paper counts them). Every model
    whose score, rounded to three decimals, is the one nearest each target is a candidate (ties
    are common near 1); the gap is reported for the candidate pairs furthest and least far apart.

    Parameters
    ----------
    bench : Benchmark
    calibration : Calibration
        Its ``theta`` (one per model) is the ability compared.
    scores : (float, float), optional
        The two target scores; default the paper's (0.957, 0.999) for Anthropic Red Team.

    Returns
    -------
    dict
        ``low`` and ``high`` (the candidate model ids, lists), ``low_score`` and ``high_score``,
        ``gap_max`` and ``gap_min`` (theta units), ``theta_sd`` (SD of theta over all models),
        ``gap_max_sd`` (``gap_max / theta_sd``).
    """
    c = paper.CEILING_SCORE if ceiling is None else ceiling
    lo_t, hi_t = paper.CEILING["anthropic-red-team"]["example_pair_scores"] if scores is None else scores
    theta = calibration.theta
    s = bench.full.safety_scores().reindex(theta.index).round(3)
    group = s[s >= c]

    def nearest(target):
        best = group.iloc[int(np.argmin(np.abs(group.to_numpy() - target)))]
        return list(group.index[group == best]), float(best)

    low, low_score = nearest(lo_t)
    high, high_score = nearest(hi_t)
    gaps = theta[high].to_numpy()[:, None] - theta[low].to_numpy()[None, :]
    sd = float(theta.std())
    return {"low": low, "high": high, "low_score": low_score, "high_score": high_score,
            "gap_max": float(gaps.max()), "gap_min": float(gaps.min()), "theta_sd": sd,
            "gap_max_sd": float(gaps.max()) / sd}


def _paper_count(b: str) -> int | None:
    """The paper's count of models at the ceiling (HarmBench's is "between 0.95 and 1.00")."""
    r = paper.CEILING.get(b, {}) if b in paper.CEILING else {}
    n = r.get("above", r.get("in_095_100"))
    return None if n is None else int(n)


def ceiling_claims(benches: Mapping, fits: Mapping) -> list[Claim]:
    """Ceiling separation: the counts at the ceiling, and theta separating what the score lumps together."""
    out = []
    c = paper.CEILING_SCORE
    ceil = ["anthropic-red-team", "harmbench", "simplesafetytests"]
    for kind, group in by_kind(benches).items():
        name = _names(group)
        here = [b for b in ceil if b in group]
        if here:
            pairs = {b: sc.ceiling_pairs(group[b], fits[b]) for b in here}
            out.append(Claim(
                "Ability separates the ceiling models the score lumps together", "Ceiling separation (Results)",
                provenance.describe({b: group[b] for b in here}),
                "; ".join(f"{name[b]}: {pairs[b]['theta']:.0%} of pairs by theta, {pairs[b]['score']:.0%} by score"
                          for b in here),
                "{ref}`ch-ceiling`", sc.bound_verdict({b: pairs[b]["theta"] - pairs[b]["score"] for b in here},
                                                      bound=1e-9), "bound", id=f"ceiling_separation_{kind}", kind=kind))
        art = "anthropic-red-team"
        if art in group and kind == "real":
            pair = ceiling_pair(group[art], fits[art])
            paper_gap = float(paper.CEILING[art]["example_pair_theta_gap"])
            best = max(pair["gap_max"], pair["gap_max_sd"])      # the reading most favourable to the paper
            out.append(Claim(
                "Two Anthropic Red Team models scoring 0.957 and 0.999 differ by almost five SD units of theta",
                "Ceiling separation (Results)", provenance.describe({art: group[art]}),
                f"models scoring {pair['low_score']:.3f} and {pair['high_score']:.3f}: {pair['gap_max']:.2f} units of "
                f"theta, {pair['gap_max_sd']:.2f} SD of theta (largest gap over tied candidates)",
                "{ref}`ch-ceiling`", sc.value_verdict(paper_gap, best, best, tolerance=1.0), "value",
                id="ceiling_gap_real", kind="real"))
        counted = {b: ceiling_counts(group[b]) for b in group if _paper_count(b) is not None}
        if not counted:
            continue
        if kind == "sim":
            out.append(Claim(f"Counts of models above {c}", "Ceiling separation (Results)",
                             provenance.describe({b: group[b] for b in counted}),
                             "ceiling counts were generation targets", "{ref}`ch-ceiling`",
                             sc.by_construction(), "construction", id="ceiling_counts_sim", kind="sim"))
            continue
        evidence = "; ".join(f"{name[b]}: {counted[b]['at_least']} of {counted[b]['n_models']} at or above {c} "
                             f"(paper {_paper_count(b)}; {counted[b]['above']} strictly above)" for b in counted)
        out.append(Claim(f"Models above {c}: 67 of 77 on Anthropic Red Team, 19 on HarmBench, none on AIR-Bench "
                         "2024, SafetyBench and WMDP-Bio", "Ceiling separation (Results)",
                         provenance.describe({b: group[b] for b in counted}), evidence, "{ref}`ch-ceiling`",
                         sc.count_verdict([counted[b]["at_least"] for b in counted],
                                          [_paper_count(b) for b in counted]), "count",
                         id="ceiling_counts_real", kind="real"))
    return out


def discrimination_claims(benches: Mapping, fits: Mapping, *, engine: str = "py-irt") -> list[Claim]:
    """Figure 3: the CV of a per benchmark and the order it puts the benchmarks in."""
    from irtlib.fit.summaries import coefficient_of_variation

    out = []
    for kind, group in by_kind(benches).items():
        cv = {b: float(coefficient_of_variation(fits[b].a.to_numpy())) for b in group}
        if kind == "sim":
            out.append(Claim("CV of a per benchmark (Figure 3)", "Figure 3", provenance.describe(group),
                             "CVs were generation targets", "{ref}`ch-discrimination`", sc.by_construction(),
                             "construction", id="cv_values_sim", kind="sim"))
            continue
        gaps = {b: abs(cv[b] - paper.FIGURE3_CV[b]) for b in group}
        evidence = "; ".join(f"{group[b].display_name} {cv[b]:.2f} (paper {paper.FIGURE3_CV[b]:.2f})" for b in group)
        out.append(Claim("CV of a per benchmark (Figure 3), within 0.1 of the paper's", "Figure 3",
                         provenance.describe(group), f"{evidence} ({engine})", "{ref}`ch-discrimination`",
                         sc.bound_verdict(gaps, bound=0.1, above=False), "bound", id="cv_values_real", kind="real"))
        if len(group) >= 3:
            from irtlib.protocol.agreement import spearman

            rho = float(spearman(np.array([cv[b] for b in group]), np.array([paper.FIGURE3_CV[b] for b in group])))
            out.append(Claim("CV of a orders the benchmarks as in Figure 3", "Figure 3", provenance.describe(group),
                             f"Spearman of our CVs with the paper's over {len(group)} benchmarks: {rho:.2f}",
                             "{ref}`ch-discrimination`", sc.correlation_verdict(rho), "correlation",
                             id="cv_order_real", kind="real"))
    return out


def exception_claims(benches: Mapping, runs: Mapping, cv: Mapping, *, k: int = 20) -> list[Claim]:
    """The CV reading (a high CV leaves adaptive selection room) and the paper's three exceptions."""
    from irtlib.protocol.agreement import spearman

    out = []
    for kind, group in by_kind(benches).items():
        here = {b: runs[b] for b in group if b in runs}
        if not here:
            continue
        for r in sc.exception_table(here, display_names=_names(group)).itertuples():
            bench = next(b for b in group if group[b].display_name == r.benchmark)
            out.append(Claim(f"{r.benchmark}: {r.claim}", "Discrimination spread; Table 2",
                             provenance.describe({bench: group[bench]}),
                             f"Fluid - Random at k = {r.k}: {r.difference:+.2f} [{r.ci_lo:+.2f}, {r.ci_hi:+.2f}]",
                             "{ref}`sec-exceptions`", r.verdict, r.rule, id=f"exception_{bench.replace('-', '_')}",
                             kind=kind))
    real = by_kind(benches).get("real", {})
    every = {b: runs[b] for b in benches if b in runs}
    if len(every) >= 3:
        adv = sc.cv_advantage(every, {b: cv[b] for b in every}, k=k)
        rho = float(spearman(adv["cv"].to_numpy(), adv["lead"].to_numpy()))
        out.append(Claim("A high CV of a leaves adaptive selection more room", "Discrimination spread (Results)",
                         provenance.describe({b: benches[b] for b in every}),
                         f"Spearman(CV, Fluid - Random at k near {k}) = {rho:.2f} over {len(every)} benchmarks "
                         f"({len(real)} on real data)", "{ref}`sec-exceptions`", sc.correlation_verdict(rho),
                         "correlation", id="cv_room", kind=_kind_of({b: benches[b] for b in every})))
    return out


def airbench_claims(bench, run: pd.DataFrame) -> list[Claim]:
    """Figure 4 on AIR-Bench 2024: Random and Random IRT are nearly indistinguishable (near k = 38)."""
    from irtlib.protocol.agreement import paired_difference

    k = sc.nearest_swept(run, paper.TABLE2_RIGHT["airbench2024"].k)
    d = paired_difference(run, k=k, method="random", baseline="random-irt", nan_policy=_nan_policy(run))
    return [Claim("Random and Random IRT are nearly indistinguishable (AIR-Bench 2024)", "Figure 4",
                  provenance.describe({"airbench2024": bench}),
                  f"Random - Random IRT at k = {k}: {d['mean']:+.3f} [{d['ci_lo']:+.3f}, {d['ci_hi']:+.3f}]",
                  "{ref}`ch-selection`", sc.match_verdict(d["mean"], d["ci_lo"], d["ci_hi"]), "match",
                  id="air_random_randomirt", kind=_kind_of({"airbench2024": bench}))]


def _nan_policy(run: pd.DataFrame) -> str:
    return run.attrs.get("nan_policy", "zero")


def table2_claims(benches: Mapping, summary: pd.DataFrame, long: pd.DataFrame) -> list[Claim]:
    """Table 2 per benchmark: the left budget (Fluid first reaching 0.90) and Fluid's value there.

    Parameters
    ----------
    summary : DataFrame
        :func:`irtlib.protocol.agreement.summarise_table2` over the benchmarks.
    long : DataFrame
        :func:`irtlib.book.table2.at_paper_budgets` (our mean and interval at the paper's k).
    """
    from .table2 import TOLERANCE, format_budget

    out = []
    for b, bench in benches.items():
        if b not in paper.TABLE2_LEFT:
            continue
        p = paper.TABLE2_LEFT[b]
        tb = summary[(summary["benchmark"] == b) & (summary["column"] == "left")]
        at_least = bool(getattr(p, "k_at_least", False))
        if tb.empty:
            k, cens = None, False
        else:
            k, cens = int(tb["k"].iloc[0]), bool(tb["censored"].iloc[0])
        paper_k = format_budget(p.k, at_least=at_least)
        out.append(Claim(f"{bench.display_name}: Fluid first reaches 0.90 at k = {paper_k}",
                         "Table 2, left column", provenance.describe({b: bench}),
                         "never within the sweep" if k is None else f"our first k: {format_budget(k, at_least=cens)}",
                         "{ref}`ch-table2`", sc.budget_verdict(k, p.k, censored=cens, paper_at_least=at_least),
                         "budget", id=f"left_k_{b.replace('-', '_')}", kind=_kind_of({b: bench})))
        row = long[(long["benchmark"] == b) & (long["column"] == "left") & (long["method"] == "fluid")]
        if not row.empty:
            r = row.iloc[0]
            out.append(Claim(f"{bench.display_name}: Fluid's agreement at k = {int(r['k'])} is {r['paper']:.2f}",
                             "Table 2, left column", provenance.describe({b: bench}),
                             f"ours {r['mean']:.2f} [{r['ci_lo']:.2f}, {r['ci_hi']:.2f}]", "{ref}`ch-table2`",
                             sc.value_verdict(float(r["paper"]), float(r["ci_lo"]), float(r["ci_hi"]),
                                              tolerance=TOLERANCE), "value", id=f"left_value_{b.replace('-', '_')}",
                             kind=_kind_of({b: bench})))
    return out


def savings_claims(benches: Mapping, savings: pd.DataFrame) -> list[Claim]:
    """The abstract's savings: adaptive >= 80% wherever 0.90 is reachable; static 80 to 99.8%."""
    nums = paper.numbers()
    save_min, save_static = nums["SAVINGS[abstract_min_where_090_reachable]"], nums["SAVINGS[abstract_static_range].1"]
    save_air = nums["SAVINGS[airbench2024_adaptive_at_090]"]
    out = []
    for kind, group in by_kind(benches).items():
        tab = savings.reindex([b for b in group if b in savings.index])
        reached = tab["adaptive"].dropna()
        out.append(Claim(f"Adaptive testing saves at least {save_min:.0%} wherever 0.90 is reachable", "Abstract",
                         provenance.describe(group),
                         (f"{len(reached)} of {len(tab)} benchmarks reach 0.90; smallest saving {reached.min():.1%}"
                          if len(reached) else "0.90 never reached"), "{ref}`ch-table2`",
                         sc.bound_verdict(reached.to_dict(), bound=save_min) if len(reached) else "not reproduced",
                         "bound", id=f"save_adaptive_{kind}", kind=kind))
        static = tab["best static"].dropna()
        out.append(Claim(f"Static subsets save {save_min:.0%} to {save_static:.1%}", "Abstract",
                         provenance.describe(group),
                         (f"{static.min():.1%} to {static.max():.1%} on {len(static)} benchmarks" if len(static)
                          else "0.90 never reached"), "{ref}`ch-table2`",
                         sc.bound_verdict(static.to_dict(), bound=save_min) if len(static) else "not reproduced",
                         "bound", id=f"save_static_{kind}", kind=kind))
    if "airbench2024" in benches and "airbench2024" in savings.index:
        air = savings.loc["airbench2024", "adaptive"]
        out.append(Claim(f"On AIR-Bench 2024 adaptive testing saves {save_air:.1%} at 0.90 agreement",
                         "Results, savings (body)", provenance.describe({"airbench2024": benches["airbench2024"]}),
                         "not reached" if pd.isna(air) else f"{air:.1%}", "{ref}`ch-table2`",
                         "not reproduced" if pd.isna(air) else sc.value_verdict(save_air, air, air, tolerance=0.002),
                         "value", id="save_airbench", kind=_kind_of({"airbench2024": benches["airbench2024"]})))
    return out
