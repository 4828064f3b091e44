"""The paper's claims, tested: one function per chapter, each returning scorecard rows with ids.

Each function takes what its chapter has already computed (benchmarks, fits, protocol runs) and
returns :class:`~irtbook.scorecard.Claim` rows whose verdicts come from the rules of
:mod:`irtbook.scorecard`. The chapter publishes them (:func:`irtbook.claims.publish`) and
the scorecard collects them, so every claim is tested once, in the chapter that shows its
evidence.

Claims about "all six benchmarks" are tested separately on the paper's own released matrices, on
other real data (AIR-Bench 2024's 22 real models) and on the simulated release (``_paper``,
``_real`` and ``_sim`` ids), so that a verdict on the paper's data is never diluted by other data,
nor the reverse. Every number the paper prints gets its own claim (one per benchmark, method and
column of Table 2), judged by the value, budget or count rule of :mod:`irtbook.scorecard`.
Where a claim does not reproduce and the data say why (a subset of the paper's models, an
unreleased benchmark, another calibration engine), its ``note`` says so.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from irtlib.datasets import paper

from . import provenance
from . import scorecard as sc
from .words import ENGINE_SHORT, names_phrase, number_word

__all__ = ["by_kind", "kind_of", "why_note", "fit_claims", "random_meets_k", "ceiling_counts", "ceiling_pair",
           "ceiling_claims", "discrimination_claims", "exception_claims", "airbench_claims", "table2_claims",
           "savings_claims", "model_choice_claims"]

Claim = sc.Claim


#: A benchmark's data kind (:attr:`irtlib.datasets.DataSource.kind`) -> the claim kind it gives.
_CLAIM_KIND = {"paper": "paper", "real-subset": "real", "real": "real", "simulated": "sim"}


def by_kind(benches: Mapping) -> dict[str, dict]:
    """Split benchmarks by what their data are: the paper's, other real data, simulated.

    ``"paper"``: the authors' released matrices; ``"real"``: other real data (AIR-Bench 2024's
    real subset); ``"sim"``: the simulated release.

    Returns
    -------
    dict
        ``{"paper": {id: Benchmark}, "real": {...}, "sim": {...}}``, empty groups left out, in the
        order of ``benches``.
    """
    groups: dict[str, dict] = {"paper": {}, "real": {}, "sim": {}}
    for b, bench in benches.items():
        groups[_CLAIM_KIND.get(bench.data.kind, "real")][b] = bench
    return {k: v for k, v in groups.items() if v}


def kind_of(benches: Mapping) -> str:
    """``"paper"``, ``"real"``, ``"sim"`` or ``"mixed"``: what a claim over ``benches`` rests on."""
    kinds = set(by_kind(benches))
    return kinds.pop() if len(kinds) == 1 else "mixed"


_kind_of = kind_of


def why_note(verdict: str, benches: Mapping, *, engine: str | None = None) -> str:
    """Why a claim over ``benches`` may not reproduce, from the data themselves ("" when it did).

    Parameters
    ----------
    verdict : str
    benches : mapping
        The benchmarks the claim rests on.
    engine : str, optional
        The calibration engine the evidence used, named when the claim rests on a fit.
    """
    if verdict in ("reproduced", "not testable here"):
        return ""
    reasons = []
    for bench in benches.values():
        kind = bench.data.kind
        if kind == "real-subset":
            reasons.append(f"it rests on {bench.data.label}, not on the paper's matrix")
        elif kind == "simulated":
            reasons.append(f"{bench.display_name}'s responses were never released, so it rests on the simulated "
                           "release")
    if engine and engine.startswith(ENGINE_SHORT["pyirt-authors"]):
        reasons.append("the released code calibrates on each split's training models only, so the fit of every "
                       "model behind this number is not in it; ours is the authors' calibration applied to every "
                       "model")
    elif engine:
        reasons.append(f"our calibration engine is {engine}, not the authors' calibration")
    return ("Possible reasons the data give: " + "; ".join(dict.fromkeys(reasons)) + ".") if reasons else ""


def _names(benches: Mapping) -> dict:
    return {b: bench.display_name for b, bench in benches.items()}


def fit_claims(benches: Mapping, fits: Mapping, *, engine: str = "py-irt") -> list[Claim]:
    """Figure 2 and appendix E: Spearman(theta, score), the RMSE bound, each benchmark's item RMSE.

    Spearman(theta, score) between 0.97 and 1.00 and item RMSE <= 0.04 on every benchmark (bound
    rule at two decimals), and each benchmark's item RMSE as printed (value rule, three decimals).

    Parameters
    ----------
    benches : mapping
        Benchmark id -> ``Benchmark``.
    fits : mapping
        Benchmark id -> ``Calibration`` fitted to ``benches[b].filtered``.
    engine : str
        The engine's name, for the evidence and the note.
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
        v = sc.bound_verdict(rho, bound=rho_min, decimals=2)
        out.append(Claim(f"Spearman(theta, score) between {rho_min:.2f} and 1.00 on every benchmark", "Figure 2",
                         provenance.describe(group), _extreme("lowest", f"rho {rho[low]:.3f}", name[low], len(rho)),
                         "{ref}`ch-fit`", v, "bound", id=f"fit_rho_{kind}", kind=kind, benchmarks=len(rho),
                         note=why_note(v, group, engine=engine)))
        rmse = {b: float(item_rmse(group[b].filtered, fits[b])) for b in group}
        high = max(rmse, key=rmse.get)
        v = sc.bound_verdict(rmse, bound=rmse_max, above=False, decimals=2)
        out.append(Claim(f"Item RMSE <= {rmse_max} on every benchmark", "Appendix E", provenance.describe(group),
                         _extreme("largest", f"{rmse[high]:.3f}", f"{name[high]}, {engine}", len(rmse)),
                         "{ref}`ch-fit`", v, "bound", id=f"fit_rmse_{kind}", kind=kind, benchmarks=len(rmse),
                         note=why_note(v, group, engine=engine)))
        for b in group:
            ref = f"ITEM_RMSE[{b}]"
            d = paper.printed_decimals(ref)
            v = sc.value_verdict(rmse[b], paper.ITEM_RMSE[b], decimals=d)
            out.append(Claim(f"{name[b]}: item RMSE {paper.ITEM_RMSE[b]:.{d}f}", "Appendix E",
                             provenance.describe({b: group[b]}), f"ours {rmse[b]:.{min(d + 1, 3)}f} ({engine})",
                             "{ref}`ch-fit`", v, "value", id=f"rmse_{_ident(b)}", kind=kind,
                             note=why_note(v, {b: group[b]}, engine=engine),
                             difference=sc.difference_text(rmse[b], paper.ITEM_RMSE[b], places=min(d + 1, 3))))
    return out


def _ident(b: str) -> str:
    return b.replace("-", "_")


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
                         sc.bound_verdict(g, bound=1e-12), "bound", id=f"model_2pl_1pl_{kind}", kind=kind,
                         benchmarks=len(g)))
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


def _extreme(word: str, value: str, where: str, n: int) -> str:
    """The extreme of ``n`` benchmarks' values in words (one benchmark: just its value).

    >>> _extreme("lowest", "rho 0.972", "SimpleSafetyTests", 4), _extreme("lowest", "rho 0.998", "HarmBench", 1)
    ('lowest of 4 benchmarks: rho 0.972 (SimpleSafetyTests)', 'rho 0.998 (HarmBench)')
    """
    return f"{value} ({where})" if n == 1 else f"{word} of {n} benchmarks: {value} ({where})"


def _paper_count(b: str) -> int | None:
    """The paper's count of models at the ceiling (HarmBench's is "between 0.95 and 1.00")."""
    r = paper.CEILING.get(b, {}) if b in paper.CEILING else {}
    n = r.get("above", r.get("in_095_100"))
    return None if n is None else int(n)


def _paper_ceiling_counts() -> str:
    """The paper's counts at the ceiling in words, from :data:`irtlib.datasets.paper.CEILING`.

    >>> _paper_ceiling_counts()
    '67 of 77 on Anthropic Red Team, 19 on HarmBench, none on AIR-Bench 2024, SafetyBench and WMDP (Bio)'
    """
    counts = {b: n for b in paper.CEILING if (n := _paper_count(b)) is not None}
    some = [f"{n} on {paper.DISPLAY_NAMES[b]}" for b, n in counts.items() if n]
    first = next((b for b, n in counts.items() if n), None)
    if first is not None:                      # the first count with its total: "67 of 77 on ..."
        some[0] = some[0].replace(" on ", f" of {paper.CEILING[first]['n_models']} on ", 1)
    none = sorted(paper.DISPLAY_NAMES[b] for b, n in counts.items() if not n)
    if none:
        some.append("none on " + names_phrase(none))
    return ", ".join(some)


def ceiling_claims(benches: Mapping, fits: Mapping, *, engine: str = "py-irt") -> list[Claim]:
    """Ceiling separation: the counts, the theta span, the five-SD pair, theta separating the ceiling.

    The counts at the ceiling, the theta span and the five-SD pair on Anthropic Red Team, and
    theta separating what the score lumps together.

    A model is at the ceiling when its score is at or above 0.95 (:func:`irtbook.scorecard.at_ceiling`),
    for every count, span and pair alike: the paper's HarmBench count is of scores "between 0.95
    and 1.00", both ends included.
    """
    out = []
    c = paper.CEILING_SCORE
    ceil = ["anthropic-red-team", "harmbench", "simplesafetytests"]
    for kind, group in by_kind(benches).items():
        name = _names(group)
        here = [b for b in ceil if b in group]
        if here:
            pairs = {b: sc.ceiling_pairs(group[b], fits[b]) for b in here}
            gap = {b: pairs[b]["theta"] - pairs[b]["score"] for b in here}     # share of pairs, theta minus score
            v = sc.bound_verdict(gap, bound=1e-9)
            out.append(Claim(
                "Ability separates the ceiling models the score lumps together", "Ceiling separation (Results)",
                provenance.describe({b: group[b] for b in here}),
                f"theta separates more ceiling pairs than the score on "
                f"{sum(g >= 1e-9 for g in gap.values())} of {len(here)}; "
                + "; ".join(f"{name[b]}: {pairs[b]['theta']:.0%} of pairs by theta, {pairs[b]['score']:.0%} by score"
                            for b in here),
                "{ref}`ch-ceiling`", v, "bound", id=f"ceiling_separation_{kind}", kind=kind, benchmarks=len(here),
                note=why_note(v, {b: group[b] for b in here}, engine=engine)))
        art = "anthropic-red-team"
        if art in group and kind != "sim":
            out += _anthropic_ceiling_claims(group[art], fits[art], kind=kind, engine=engine)
        counted = {b: ceiling_counts(group[b]) for b in group if _paper_count(b) is not None}
        if not counted:
            continue
        if kind == "sim":
            out.append(Claim(f"Counts of models above {c}", "Ceiling separation (Results)",
                             provenance.describe({b: group[b] for b in counted}),
                             "ceiling counts were generation targets", "{ref}`ch-ceiling`",
                             sc.by_construction(), "construction", id="ceiling_counts_sim", kind="sim"))
            continue
        same = sum(counted[b]["at_least"] == _paper_count(b) for b in counted)
        counts = "count equal" if len(counted) == 1 else "counts equal"
        evidence = f"{same} of {len(counted)} {counts} to the paper's; " + "; ".join(
            f"{name[b]}: {counted[b]['at_least']} of {counted[b]['n_models']} at or above {c} "
            f"(paper {_paper_count(b)}; {counted[b]['above']} strictly above)" for b in counted)
        v = sc.count_verdict([counted[b]["at_least"] for b in counted], [_paper_count(b) for b in counted])
        out.append(Claim(f"Models at or above {c}: {_paper_ceiling_counts()}", "Ceiling separation (Results)",
                         provenance.describe({b: group[b] for b in counted}), evidence, "{ref}`ch-ceiling`",
                         v, "count", id=f"ceiling_counts_{kind}", kind=kind,
                         note=why_note(v, {b: group[b] for b in counted})))
    return out


def _anthropic_ceiling_claims(bench, calibration, *, kind: str, engine: str) -> list[Claim]:
    """Anthropic Red Team's theta span at the ceiling (1.19 to 6.06) and the five-SD pair."""
    art = "anthropic-red-team"
    data, where, source = provenance.describe({art: bench}), "{ref}`ch-ceiling`", "Ceiling separation (Results)"
    theta = calibration.theta
    scores = bench.full.safety_scores().reindex(theta.index)
    top = theta[sc.at_ceiling(scores.to_numpy())]
    out = []
    for end, ours, ref in (("lowest", float(top.min()), f"CEILING[{art}].theta_range_above.0"),
                           ("highest", float(top.max()), f"CEILING[{art}].theta_range_above.1")):
        p = paper.numbers()[ref]
        v = sc.value_verdict(ours, p, decimals=paper.printed_decimals(ref))
        out.append(Claim(f"Anthropic Red Team: the {end} theta at the ceiling is {p:.2f}", source, data,
                         f"ours {ours:.2f} ({engine}, {len(top)} ceiling models)", where, v, "value",
                         id=f"ceiling_theta_{end}", kind=kind, note=why_note(v, {art: bench}, engine=engine),
                         difference=sc.difference_text(ours, p, places=2)))
    pair = ceiling_pair(bench, calibration)
    ref = f"CEILING[{art}].example_pair_theta_gap"
    v = sc.value_verdict(pair["gap_max_sd"], paper.numbers()[ref], decimals=paper.printed_decimals(ref),
                         close=paper.close_band(ref))
    out.append(Claim(
        "Two Anthropic Red Team models scoring {:.3f} and {:.3f} differ by almost {} SD units of theta".format(
            *paper.CEILING[art]["example_pair_scores"], number_word(int(paper.numbers()[ref]))),
        source, data,
        f"models scoring {pair['low_score']:.3f} and {pair['high_score']:.3f}: {pair['gap_max_sd']:.2f} SD of "
        f"theta ({pair['gap_max']:.2f} units of theta; largest gap over tied candidates)", where, v, "value",
        id="ceiling_gap", kind=kind, note=why_note(v, {art: bench}, engine=engine),
        difference=sc.difference_text(pair["gap_max_sd"], paper.numbers()[ref], places=2)))
    return out


def discrimination_claims(benches: Mapping, fits: Mapping, *, engine: str = "py-irt") -> list[Claim]:
    """Figure 3: each benchmark's CV of a as printed, and the order it puts the benchmarks in."""
    from irtlib.fit.summaries import coefficient_of_variation

    out = []
    for kind, group in by_kind(benches).items():
        cv = {b: float(coefficient_of_variation(fits[b].a.to_numpy())) for b in group}
        if kind == "sim":
            out.append(Claim("CV of a per benchmark", "Figure 3", provenance.describe(group),
                             "CVs were generation targets", "{ref}`ch-discrimination`", sc.by_construction(),
                             "construction", id="cv_values_sim", kind="sim"))
            continue
        for b in group:
            v = sc.value_verdict(cv[b], paper.FIGURE3_CV[b], decimals=paper.printed_decimals(f"FIGURE3_CV[{b}]"))
            out.append(Claim(f"{group[b].display_name}: CV of a {paper.FIGURE3_CV[b]:.2f}", "Figure 3",
                             provenance.describe({b: group[b]}), f"ours {cv[b]:.3f} ({engine})",
                             "{ref}`ch-discrimination`", v, "value", id=f"cv_{_ident(b)}", kind=kind,
                             note=why_note(v, {b: group[b]}, engine=engine),
                             difference=sc.difference_text(cv[b], paper.FIGURE3_CV[b], places=3)))
        if len(group) >= 3:
            from irtlib.protocol.agreement import spearman

            rho = float(spearman(np.array([cv[b] for b in group]), np.array([paper.FIGURE3_CV[b] for b in group])))
            v = sc.correlation_verdict(rho)
            out.append(Claim("CV of a orders the benchmarks as in Figure 3", "Figure 3", provenance.describe(group),
                             f"Spearman of our CVs with the paper's over {len(group)} benchmarks: {rho:.2f}",
                             "{ref}`ch-discrimination`", v, "correlation", id=f"cv_order_{kind}", kind=kind,
                             note=why_note(v, group, engine=engine)))
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
                             kind=kind, note=why_note(r.verdict, {bench: group[bench]})))
    real = {b: x for b, x in benches.items() if x.data.kind != "simulated"}
    every = {b: runs[b] for b in benches if b in runs}
    if len(every) >= 3:
        adv = sc.cv_advantage(every, {b: cv[b] for b in every}, k=k)
        rho = float(spearman(adv["cv"].to_numpy(), adv["lead"].to_numpy()))
        out.append(Claim("A high CV of a leaves adaptive selection more room", "Discrimination spread (Results)",
                         provenance.describe({b: benches[b] for b in every}),
                         f"Spearman(CV, Fluid - Random at k near {k}) = {rho:.2f} over {len(every)} benchmarks "
                         f"({len(real)} on real data, the paper's or other)", "{ref}`sec-exceptions`",
                         sc.correlation_verdict(rho),
                         "correlation", id="cv_room", kind=_kind_of({b: benches[b] for b in every})))
    return out


#: The static methods of the paper (the "others" Random meets in Figure 4).
_STATIC = ("total-fisher", "marginal-fisher", "marginal-fisher-bq", "anchor-points", "disco")


def random_meets_k(run: pd.DataFrame, *, within: float = 0.01) -> int | None:
    """The first swept k > 1 at which Random's mean agreement comes within ``within`` of the best other method.

    Figure 4's "random meets the others near k = 50": the others are Fluid and the static methods
    (not Random IRT, which scores Random's own items). k = 1 is skipped, where every method is
    nearly blind.

    Returns
    -------
    int or None
        None when Random never meets them within the sweep.
    """
    from irtlib.protocol.agreement import agreement_curves

    c = agreement_curves(run)
    mean = c.pivot_table(index="k", columns="method", values="mean").sort_index()
    others = [m for m in ("fluid", *_STATIC) if m in mean.columns]
    met = mean.index[(mean["random"] >= mean[others].max(axis=1) - within) & (mean.index > 1)]
    return int(met.min()) if len(met) else None


def _worst_direction(verdicts) -> str:
    order = ("reversed", "not reproduced", "not testable here", "partly", "reproduced")
    return min(verdicts, key=order.index)


def airbench_claims(bench, run: pd.DataFrame, *, grid=None) -> list[Claim]:
    """Figure 4 on AIR-Bench 2024: its three statements, one claim each.

    Adaptive leads at small k; Random meets the others near k = 50; Random and Random IRT are
    nearly indistinguishable.

    "Small k" is the paper's own: Table 2's left budget for AIR-Bench 2024 (k = 6). Fluid leads when
    its paired difference to every other method is above 0 (direction rule; the claim's verdict is
    the least favourable over the methods). "Near k = 50" is judged by the budget rule on the
    authors' grid (:func:`random_meets_k`). Random and Random IRT are compared at Table 2's right
    budget (k = 38) by the match rule.

    Parameters
    ----------
    bench : Benchmark
    run : DataFrame
        AIR-Bench 2024's protocol results.
    grid : sequence of int, optional
        The authors' budget grid (default :func:`irtbook.table2.authors_grid`).
    """
    from irtlib.protocol.agreement import paired_difference

    from .table2 import authors_grid

    air = {"airbench2024": bench}
    data, kind, where = provenance.describe(air), kind_of(air), "{ref}`ch-selection`"
    grid = authors_grid(bench) if grid is None else grid
    policy = _nan_policy(run)
    out = []
    k_small = sc.nearest_swept(run, paper.TABLE2_LEFT["airbench2024"].k)
    others = [m for m in ("random", "random-irt", *_STATIC) if m in set(run["method"])]
    diffs = {m: paired_difference(run, k=k_small, method="fluid", baseline=m, nan_policy=policy) for m in others}
    v = _worst_direction([sc.direction_verdict(d["mean"], d["ci_lo"], d["ci_hi"]) for d in diffs.values()])
    closest = min(diffs, key=lambda m: diffs[m]["mean"])
    d = diffs[closest]
    out.append(Claim("Adaptive selection leads at small k (AIR-Bench 2024)", "Figure 4", data,
                     f"at k = {k_small}, Fluid minus the closest other method ({closest}): {d['mean']:+.3f} "
                     f"[{d['ci_lo']:+.3f}, {d['ci_hi']:+.3f}]", where, v, "direction", id="air_adaptive_leads",
                     kind=kind, note=why_note(v, air)))
    k_meet = random_meets_k(run)
    v = sc.budget_verdict(k_meet, 50, grid=grid, censored=k_meet is None)
    out.append(Claim("Random meets the other methods near k = 50 (AIR-Bench 2024)", "Figure 4", data,
                     "Random never comes within 0.01 of the best other method" if k_meet is None else
                     f"Random first comes within 0.01 of the best other method at k = {k_meet} "
                     f"({sc.budget_steps(k_meet, 50, grid=grid):+d} grid steps from 50)", where, v, "budget",
                     id="air_random_meets", kind=kind, note=why_note(v, air)))
    k = sc.nearest_swept(run, paper.TABLE2_RIGHT["airbench2024"].k)
    d = paired_difference(run, k=k, method="random", baseline="random-irt", nan_policy=policy)
    v = sc.match_verdict(d["mean"], d["ci_lo"], d["ci_hi"])
    out.append(Claim("Random and Random IRT are nearly indistinguishable (AIR-Bench 2024)", "Figure 4", data,
                     f"Random - Random IRT at k = {k}: {d['mean']:+.3f} [{d['ci_lo']:+.3f}, {d['ci_hi']:+.3f}]",
                     where, v, "match", id="air_random_randomirt", kind=kind, note=why_note(v, air)))
    return out


def _nan_policy(run: pd.DataFrame) -> str:
    return run.attrs.get("nan_policy", "zero")


def table2_claims(benches: Mapping, summary: pd.DataFrame, long: pd.DataFrame, *, grids: Mapping | None = None,
                  reach: pd.DataFrame | None = None, boots: Mapping | None = None) -> list[Claim]:
    """Every number of Table 2: both budgets per benchmark, and every printed agreement value.

    Budgets are judged by the budget rule on the authors' grid, values by the value rule at two
    decimals on our mean over splits (:mod:`irtbook.scorecard`).

    Parameters
    ----------
    summary : DataFrame
        :func:`irtlib.protocol.agreement.summarise_table2` over the benchmarks.
    long : DataFrame
        :func:`irtbook.table2.at_paper_budgets` (our mean at the paper's k, with its verdict).
    grids : mapping, optional
        Benchmark -> the authors' budget grid (default :func:`irtbook.table2.authors_grid`).
    reach : DataFrame, optional
        :func:`irtbook.table2.first_reach_table`: both readings of "first reaches 0.90", shown
        in the left budget's evidence (the verdict is the unrounded reading's, ``summary``'s).
    boots : mapping, optional
        ``(benchmark, column)`` -> :func:`irtbook.table2.bootstrap_budget`, shown in the evidence.

    Returns
    -------
    list of Claim
        Ids ``left_k_<bench>``, ``right_k_<bench>`` and ``t2_<column>_<method>_<bench>``.
    """
    from irtlib.selection import methods

    from .table2 import DECIMALS, authors_grid

    out = []
    for b, bench in benches.items():
        if b not in paper.TABLE2_LEFT:
            continue
        grid = grids[b] if grids is not None and b in grids else authors_grid(bench)
        for column in ("left", "right"):
            out.append(_budget_claim(b, bench, column, summary, grid=grid, reach=reach, boots=boots))
        for r in long[long["benchmark"] == b].itertuples():
            v = sc.value_verdict(float(r.mean), float(r.paper), decimals=DECIMALS)
            assert v == r.verdict, "at_paper_budgets and the claim judge by the same rule"
            side = "left" if r.column == "left" else "right"
            label = methods.get(r.method).name
            out.append(Claim(f"{bench.display_name}: {label}'s agreement at k = {int(r.k_paper)} is {r.paper:.2f}",
                             f"Table 2, {side} column", provenance.describe({b: bench}),
                             f"ours {r.mean:.3f} (95% Monte Carlo interval over splits [{r.ci_lo:.2f}, {r.ci_hi:.2f}])"
                             + ("" if int(r.k) == int(r.k_paper) else f", at the nearest swept k = {int(r.k)}"),
                             "{ref}`ch-table2`", v, "value",
                             id=f"t2_{side}_{_ident(r.method)}_{_ident(b)}", kind=kind_of({b: bench}),
                             note=why_note(v, {b: bench}),
                             difference=sc.difference_text(float(r.mean), float(r.paper), places=3)))
    return out


_BUDGET_WORDS = {"left": "Fluid first reaches 0.90 at k = {k}",
                 "right": "Random catches up with Fluid after k = {k}"}


def _budget_claim(b, bench, column, summary, *, grid, reach, boots) -> Claim:
    """One budget of Table 2 (left or right column) as a claim."""
    from .table2 import format_budget

    p = paper.TABLE2_LEFT[b] if column == "left" else paper.TABLE2_RIGHT[b]
    at_least = bool(getattr(p, "k_at_least", False))
    tb = summary[(summary["benchmark"] == b) & (summary["column"] == column)]
    k, cens = (None, False) if tb.empty else (int(tb["k"].iloc[0]), bool(tb["censored"].iloc[0]))
    v = sc.budget_verdict(k, p.k, grid=grid, censored=cens, paper_at_least=at_least)
    if k is None:
        evidence = "Fluid never leads Random" if column == "right" else "never within the sweep"
    else:
        evidence = f"our k: {format_budget(k, at_least=cens)}"
        if not (cens or at_least):
            evidence += f" ({sc.budget_steps(k, p.k, grid=grid):+d} grid steps)"
    if column == "left" and reach is not None and b in reach.index:
        r = reach.loc[b]
        shown = {x: "not within the sweep" if r[x] is None or pd.isna(r[x]) else f"k = {int(r[x])}"
                 for x in ("unrounded", "rounded")}
        evidence += f"; the unrounded mean reaches 0.90 at {shown['unrounded']}, the rounded at {shown['rounded']}"
    if boots is not None and (b, column) in boots:
        bt = boots[(b, column)]
        hi = "beyond the sweep" if np.isinf(bt["hi"]) else f"{int(bt['hi'])}"
        evidence += (f"; bootstrap over splits: 95% of resampled budgets in [{int(bt['lo'])}, {hi}]"
                     if np.isfinite(bt["lo"]) else "; bootstrap over splits: no budget in any resample")
    return Claim(f"{bench.display_name}: " + _BUDGET_WORDS[column].format(k=format_budget(p.k, at_least=at_least)),
                 f"Table 2, {column} column", provenance.describe({b: bench}), evidence, "{ref}`ch-table2`", v,
                 "budget", id=f"{column}_k_{_ident(b)}", kind=kind_of({b: bench}), note=why_note(v, {b: bench}))


def _range_verdict(values: Mapping, lo: float, hi: float, *, lo_decimals: int, hi_decimals: int) -> str:
    """Bound rule on both ends of a range the paper prints ("80 to 95%"): the less favourable end's verdict."""
    order = ("not testable here", "not reproduced", "partly", "close", "reproduced")
    ends = [sc.bound_verdict(values, bound=lo, decimals=lo_decimals),
            sc.bound_verdict(values, bound=hi, above=False, decimals=hi_decimals)]
    return min(ends, key=order.index)


def savings_claims(benches: Mapping, savings: pd.DataFrame) -> list[Claim]:
    """The savings of the abstract and of the body (Results, savings), one claim per statement and data kind.

    - Abstract: adaptive saves at least 80% wherever 0.90 is reachable (bound); static subsets save
      80 to 99.8% (every benchmark's best static saving inside that range: bound on both ends).
    - Body: on the benchmarks other than AIR-Bench 2024 and HarmBench that reach 0.90, adaptive
      saves 80 to 95% and Marginal Fisher 80 to 92% (both ends); on AIR-Bench 2024, adaptive saves
      99.9% and static 99.8% (values, three decimals).

    Savings are read off our first crossings (:func:`irtlib.protocol.savings.savings_table`), so
    they inherit the budgets' verdicts; kinds are kept apart (a simulated benchmark never supplies
    a saving to a claim on the paper's data).
    """
    nums = paper.numbers()
    out = []
    for kind, group in by_kind(benches).items():
        tab = savings.reindex([b for b in group if b in savings.index])
        out += _abstract_savings(kind, group, tab, nums)
        body = tab.drop(index=[b for b in ("airbench2024", "harmbench") if b in tab.index])
        for col, key, label in (("adaptive", "body_adaptive_range_excl_harmbench", "adaptive testing"),
                                ("marginal-fisher", "body_marginal_fisher_range_excl_harmbench", "Marginal Fisher")):
            lo, hi = nums[f"SAVINGS[{key}].0"], nums[f"SAVINGS[{key}].1"]
            reached = body[col].dropna()
            v = (_range_verdict(reached.to_dict(), lo, hi, lo_decimals=paper.printed_decimals(f"SAVINGS[{key}].0"),
                                hi_decimals=paper.printed_decimals(f"SAVINGS[{key}].1")) if len(reached)
                 else "not testable here")
            out.append(Claim(f"Where 0.90 is reachable (not AIR-Bench 2024, not HarmBench), {label} saves "
                             f"{lo:.0%} to {hi:.0%}", "Results, savings (body)", provenance.describe(group),
                             _savings_range(reached) if len(reached) else "no such benchmark reaches 0.90 here",
                             "{ref}`ch-table2`", v, "bound", id=f"save_body_{_ident(col)}_{kind}", kind=kind,
                             note=why_note(v, group), benchmarks=len(reached)))
    if "airbench2024" in benches and "airbench2024" in savings.index:
        air = {"airbench2024": benches["airbench2024"]}
        for col, key, label in (("adaptive", "airbench2024_adaptive_at_090", "adaptive testing"),
                                ("best static", "airbench2024_static_at_090", "the best static subset")):
            p, ours = nums[f"SAVINGS[{key}]"], savings.loc["airbench2024", col]
            d = paper.printed_decimals(f"SAVINGS[{key}]")
            v = sc.value_verdict(None if pd.isna(ours) else float(ours), p, decimals=d)
            out.append(Claim(f"On AIR-Bench 2024 {label} saves {p:.{d - 2}%} at 0.90 agreement",
                             "Results, savings (body)", provenance.describe(air),
                             "not reached" if pd.isna(ours) else f"{ours:.{d - 1}%}", "{ref}`ch-table2`", v, "value",
                             id="save_airbench" if col == "adaptive" else "save_airbench_static", kind=kind_of(air),
                             note=why_note(v, air),
                             difference=sc.difference_text(None if pd.isna(ours) else float(ours), p, places=d - 1,
                                                           percent=True)))
    return out


def _savings_range(saved: pd.Series) -> str:
    """The savings of the benchmarks that reach 0.90, as a range, or the one saving.

    >>> _savings_range(pd.Series([0.8, 0.95])), _savings_range(pd.Series([0.968]))
    ('80.0% to 95.0% on 2 benchmarks', '96.8% on the one benchmark')
    """
    if len(saved) == 1:
        return f"{saved.iloc[0]:.1%} on the one benchmark"
    return f"{saved.min():.1%} to {saved.max():.1%} on {len(saved)} benchmarks"


def _abstract_savings(kind: str, group: Mapping, tab: pd.DataFrame, nums: Mapping) -> list[Claim]:
    """The abstract's two savings statements on one kind of data."""
    save_min = nums["SAVINGS[abstract_min_where_090_reachable]"]
    lo, hi = nums["SAVINGS[abstract_static_range].0"], nums["SAVINGS[abstract_static_range].1"]
    reached = tab["adaptive"].dropna()
    v = (sc.bound_verdict(reached.to_dict(), bound=save_min,
                          decimals=paper.printed_decimals("SAVINGS[abstract_min_where_090_reachable]"))
         if len(reached) else "not reproduced")
    out = [Claim(f"Adaptive testing saves at least {save_min:.0%} wherever 0.90 is reachable", "Abstract",
                 provenance.describe(group),
                 (f"smallest saving {reached.min():.1%}, {len(reached)} of {len(tab)} "
                  f"{'benchmark reaches' if len(tab) == 1 else 'benchmarks reach'} 0.90" if len(reached)
                  else "0.90 never reached"),
                 "{ref}`ch-table2`", v, "bound",
                 id=f"save_adaptive_{kind}", kind=kind, note=why_note(v, group), benchmarks=len(reached))]
    static = tab["best static"].dropna()
    v = (_range_verdict(static.to_dict(), lo, hi,
                        lo_decimals=paper.printed_decimals("SAVINGS[abstract_static_range].0"),
                        hi_decimals=paper.printed_decimals("SAVINGS[abstract_static_range].1"))
         if len(static) else "not reproduced")
    out.append(Claim(f"Static subsets save {lo:.0%} to {hi:.1%}", "Abstract", provenance.describe(group),
                     _savings_range(static) if len(static) else "0.90 never reached", "{ref}`ch-table2`", v,
                     "bound", id=f"save_static_{kind}", kind=kind, note=why_note(v, group), benchmarks=len(static)))
    return out
