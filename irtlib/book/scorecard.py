"""The book's scorecard: every claim of the paper, the evidence we have for it, and a verdict.

A verdict is computed from the numbers by one of the rules below, never typed, and is always one
of :data:`VERDICTS`. The rules are written out on the scorecard page (:data:`RULES`), so a reader
can check every verdict against its evidence.

- :func:`bound_verdict`: a claim that a quantity stays on one side of a bound on every benchmark
  ("Spearman >= 0.97 on all six", "item RMSE <= 0.04").
- :func:`direction_verdict`: a claim that one method beats another (a paired difference with its
  confidence interval).
- :func:`match_verdict`: a claim that two methods do about equally well.
- :func:`budget_verdict`: a claim about the budget k at which something happens.
- :func:`correlation_verdict`: a claim that two quantities move together across benchmarks.
- :func:`value_verdict`: a reported value against ours with a confidence interval and a tolerance.
- :func:`count_verdict`: counts computed from the data (models at the ceiling) against the paper's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

#: Presentation only: a change here cannot change a computed number (irtlib.book.cache leaves it out).
__presentation__ = True
__all__ = ["VERDICTS", "RULES", "Claim", "bound_verdict", "direction_verdict", "match_verdict",
           "budget_verdict", "correlation_verdict", "value_verdict", "count_verdict", "by_construction",
           "scorecard_frame", "nearest_swept", "EXCEPTIONS", "exception_table", "cv_advantage", "separated_share",
           "ceiling_pairs", "KINDS"]

#: The only words a verdict may be.
VERDICTS = ("reproduced", "partly", "not reproduced", "reversed", "not testable here")

#: What a claim's evidence may rest on (see :attr:`Claim.kind`).
KINDS = ("real", "sim", "mixed", "")

#: Tolerance for "matches" (agreement units) and the budget ratios used by the rules.
MATCH_TOLERANCE = 0.03
BUDGET_FACTOR = 2.0

#: The rules, as printed on the scorecard page (rule id -> text).
RULES = {
    "bound": "A bound claimed for every benchmark: **reproduced** if it holds on all of them, "
             "**partly** if on at least half, **not reproduced** otherwise.",
    "direction": "'A beats B': from the split-by-split difference A - B at the budget in question, with its "
                 "95% confidence interval. **Reproduced** if the interval lies above 0; **partly** if the mean "
                 "is above 0 but the interval includes 0; **not reproduced** if the mean is at or below 0 but "
                 "the interval includes 0; **reversed** if the interval lies below 0.",
    "match": f"'A matches B': **reproduced** if the mean difference is within {MATCH_TOLERANCE} of 0; "
             f"**partly** if its 95% interval reaches into [-{MATCH_TOLERANCE}, {MATCH_TOLERANCE}]; "
             "**not reproduced** otherwise.",
    "budget": f"A budget k: **reproduced** if ours is within a factor of {BUDGET_FACTOR:g} of the paper's; "
              f"**partly** if within a factor of {BUDGET_FACTOR ** 2:g}; **not reproduced** otherwise or when "
              "our sweep never reaches the event (a censored budget is compared as '> k').",
    "correlation": "'Goes with' across benchmarks: Spearman's rho over the benchmarks. **Reproduced** if "
                   "rho >= 0.6; **partly** if 0 < rho < 0.6; **not reproduced** if -0.6 < rho <= 0; "
                   "**reversed** if rho <= -0.6.",
    "value": "A reported value: **reproduced** if the paper's value lies in our 95% interval widened by the "
             "stated tolerance; **partly** if within twice that; **not reproduced** otherwise.",
    "count": "A count of models computed from the data: **reproduced** if every count equals the paper's; "
             "**partly** if each is within 2 models of it; **not reproduced** otherwise.",
    "construction": "**Not testable here**: the simulated release was generated to match this number "
                    "(`data/README.md`), so agreement would prove nothing; the real data test it where present.",
}


@dataclass(frozen=True)
class Claim:
    """One row of the scorecard.

    Attributes
    ----------
    claim : str
        The paper's claim, in words.
    source : str
        Where the paper makes it ("Figure 2", "Table 2, left column", ...).
    data : str
        The data it was tested on ("simulated release", "real AIR-Bench 2024", ...).
    evidence : str
        Our numbers, formatted (already computed).
    section : str
        A MyST cross-reference to where the book shows the evidence, e.g. ``{ref}`ch-fit```.
    verdict : str
        One of :data:`VERDICTS`.
    rule : str
        The key of :data:`RULES` that produced the verdict.
    id : str
        A stable identifier (letters, digits, ``_``), needed to publish the claim from the chapter
        that tests it (:func:`irtlib.book.claims.publish`).
    kind : str
        What the evidence rests on: ``"real"`` (the paper's data or another real set), ``"sim"``
        (the simulated release), ``"mixed"``, or ``""`` (not said).
    note : str
        Why a claim did not reproduce, where the chapter knows (one sentence; no typed numbers).
    """

    claim: str
    source: str
    data: str
    evidence: str
    section: str
    verdict: str
    rule: str
    id: str = ""
    kind: str = ""
    note: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")
        if self.rule not in RULES:
            raise ValueError(f"rule {self.rule!r} is not one of {sorted(RULES)}")
        if self.kind not in KINDS:
            raise ValueError(f"kind {self.kind!r} is not one of {KINDS}")


def _finite(x) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def bound_verdict(values, *, bound: float, above: bool = True) -> str:
    """Verdict of 'the quantity is >= bound (``above``) or <= bound on every benchmark'.

    Parameters
    ----------
    values : mapping or sequence of float
        One value per benchmark.
    """
    vals = list(values.values()) if hasattr(values, "values") else list(values)
    if not vals:
        return "not testable here"
    held = sum((v >= bound) if above else (v <= bound) for v in vals)
    if held == len(vals):
        return "reproduced"
    return "partly" if held >= len(vals) / 2 else "not reproduced"


def direction_verdict(mean: float, ci_lo: float, ci_hi: float) -> str:
    """Verdict of 'A beats B' from the paired difference A - B and its confidence interval."""
    if not (_finite(mean) and _finite(ci_lo) and _finite(ci_hi)):
        return "not testable here"
    if ci_lo > 0:
        return "reproduced"
    if ci_hi < 0:
        return "reversed"
    return "partly" if mean > 0 else "not reproduced"


def match_verdict(mean: float, ci_lo: float, ci_hi: float, *, tolerance: float = MATCH_TOLERANCE) -> str:
    """Verdict of 'A matches B' from the paired difference A - B and its confidence interval."""
    if not (_finite(mean) and _finite(ci_lo) and _finite(ci_hi)):
        return "not testable here"
    if abs(mean) <= tolerance:
        return "reproduced"
    return "partly" if ci_lo <= tolerance and ci_hi >= -tolerance else "not reproduced"


def budget_verdict(ours: int | None, paper: int, *, censored: bool = False, factor: float = BUDGET_FACTOR,
                   paper_at_least: bool = False) -> str:
    """Verdict of a budget claim: our k against the paper's, compared on a ratio scale.

    Parameters
    ----------
    ours : int or None
        Our budget; None when the event never happens.
    paper : int
        The paper's budget.
    censored : bool
        True when ours is a lower bound ("> ours": the sweep ended first).
    paper_at_least : bool
        True when the paper's budget is itself a lower bound ("> 3,000").
    """
    if ours is None:
        return "not reproduced"
    if paper_at_least:
        # the paper says "beyond k": ours agrees if it is also beyond (or near) it
        if censored or ours >= paper / factor:
            return "reproduced"
        return "partly" if ours >= paper / factor ** 2 else "not reproduced"
    if censored:
        return "partly" if ours <= paper * factor else "not reproduced"
    ratio = max(ours / paper, paper / ours)
    if ratio <= factor:
        return "reproduced"
    return "partly" if ratio <= factor ** 2 else "not reproduced"


def correlation_verdict(rho: float) -> str:
    """Verdict of 'X goes with Y across benchmarks' from Spearman's rho."""
    if not _finite(rho):
        return "not testable here"
    if rho >= 0.6:
        return "reproduced"
    if rho > 0:
        return "partly"
    return "reversed" if rho <= -0.6 else "not reproduced"


def value_verdict(paper: float, ci_lo: float, ci_hi: float, *, tolerance: float) -> str:
    """Verdict of a reported value: is it inside our interval widened by ``tolerance``?"""
    if not (_finite(ci_lo) and _finite(ci_hi)):
        return "not testable here"
    gap = max(ci_lo - paper, paper - ci_hi, 0.0)
    if gap <= tolerance:
        return "reproduced"
    return "partly" if gap <= 2 * tolerance else "not reproduced"


def count_verdict(ours, reported, *, slack: int = 2) -> str:
    """Verdict of counts (models at the ceiling): exact, within ``slack`` models, or neither.

    Parameters
    ----------
    ours, reported : sequence of int
        One count per benchmark, ours and the paper's, in the same order.
    """
    ours, reported = [int(x) for x in ours], [int(x) for x in reported]
    if not ours or len(ours) != len(reported):
        return "not testable here"
    gaps = [abs(o - r) for o, r in zip(ours, reported, strict=True)]
    if max(gaps) == 0:
        return "reproduced"
    return "partly" if max(gaps) <= slack else "not reproduced"


def by_construction() -> str:
    """Verdict of a claim whose number the simulated release was generated to match."""
    return "not testable here"


def scorecard_frame(claims) -> pd.DataFrame:
    """Lay claims out as the scorecard table (one column per :class:`Claim` field)."""
    frame = pd.DataFrame([c.__dict__ for c in claims],
                         columns=["claim", "source", "data", "evidence", "section", "verdict", "rule", "id", "kind",
                                  "note"])
    return frame


def nearest_swept(results: pd.DataFrame, k: int) -> int:
    """The swept budget closest to ``k`` on a log scale (ties go to the smaller budget)."""
    import numpy as np

    swept = np.sort(results["k"].unique())
    return int(swept[np.argmin(np.abs(np.log(swept) - np.log(k)))])


#: The paper's three benchmark-specific claims about IRT against random selection ("Discrimination
#: spread" and appendix F): benchmark, the claim, the budget the paper reports it at, the rule.
EXCEPTIONS = (
    ("simplesafetytests", "IRT (Fluid) beats Random despite the lowest CV of a", "TABLE2_LEFT", "direction"),
    ("harmbench", "Random matches IRT (Fluid) despite a medium CV of a", "TABLE2_LEFT", "match"),
    ("safetybench", "Random beats IRT (Fluid)", "SAFETYBENCH_RANDOM_090", "direction-reversed"),
)


def exception_table(results: dict, *, display_names: dict | None = None) -> pd.DataFrame:
    """The paper's benchmark-specific claims about Fluid against Random, tested split by split.

    Parameters
    ----------
    results : dict
        Benchmark -> its :func:`irtlib.run_protocol` results.
    display_names : dict, optional
        Benchmark -> name to show.

    Returns
    -------
    DataFrame, one row per claim of :data:`EXCEPTIONS` whose benchmark is in ``results``
        ``benchmark``, ``claim``, ``k`` (the paper's budget; the nearest swept one if it was not
        swept), ``difference`` (Fluid - Random, mean over splits), ``ci_lo``, ``ci_hi``,
        ``share_fluid_ahead``, ``verdict``, ``rule``.
    """
    from irtlib.datasets import paper
    from irtlib.protocol.agreement import paired_difference

    rows = []
    for bench, claim, where, rule in EXCEPTIONS:
        if bench not in results:
            continue
        k_paper = (paper.SAFETYBENCH_APPENDIX_F["random_reaches_090_at_k"] if where == "SAFETYBENCH_RANDOM_090"
                   else paper.TABLE2_LEFT[bench].k)
        k = nearest_swept(results[bench], k_paper)
        d = paired_difference(results[bench], k=k, method="fluid", baseline="random")
        if rule == "direction":
            verdict = direction_verdict(d["mean"], d["ci_lo"], d["ci_hi"])
        elif rule == "match":
            verdict = match_verdict(d["mean"], d["ci_lo"], d["ci_hi"])
        else:   # Random beats Fluid: the direction rule on Random - Fluid
            verdict = direction_verdict(-d["mean"], -d["ci_hi"], -d["ci_lo"])
        rows.append({"benchmark": (display_names or {}).get(bench, bench), "claim": claim, "k": k,
                     "difference": d["mean"], "ci_lo": d["ci_lo"], "ci_hi": d["ci_hi"],
                     "share_fluid_ahead": d["share_ahead"], "verdict": verdict,
                     "rule": "match" if rule == "match" else "direction"})
    return pd.DataFrame(rows)


def cv_advantage(results: dict, cv: dict, *, k: int = 20) -> pd.DataFrame:
    """Fluid's lead over Random at (about) budget ``k`` beside each benchmark's CV of a.

    Returns
    -------
    DataFrame indexed by benchmark
        ``cv``, ``k`` (the swept budget nearest ``k``), ``lead`` (Fluid - Random, mean over
        splits), ``ci_lo``, ``ci_hi``. Spearman's rho of ``lead`` on ``cv`` across benchmarks tests
        the paper's reading that a high CV leaves adaptive selection more room.
    """
    from irtlib.protocol.agreement import paired_difference

    rows = {}
    for bench, res in results.items():
        kk = nearest_swept(res, k)
        d = paired_difference(res, k=kk, method="fluid", baseline="random")
        rows[bench] = {"cv": float(cv[bench]), "k": kk, "lead": d["mean"], "ci_lo": d["ci_lo"], "ci_hi": d["ci_hi"]}
    return pd.DataFrame.from_dict(rows, orient="index")


def separated_share(center, half_width) -> float:
    """Share of pairs whose intervals ``center +- half_width`` do not overlap (NaN below two)."""
    import numpy as np

    center, half_width = np.asarray(center, float), np.asarray(half_width, float)
    lo, hi = center - half_width, center + half_width
    apart = (lo[:, None] > hi[None, :]) | (lo[None, :] > hi[:, None])
    n = center.size
    return float(apart[np.triu_indices(n, 1)].mean()) if n > 1 else float("nan")


def ceiling_pairs(bench, calibration, *, ceiling: float = 0.95) -> dict:
    """How many pairs of models above ``ceiling`` ability and score tell apart (Ceiling separation).

    Each ceiling model gets a 95% interval on theta (MAP with its posterior SD, on the items the
    calibration covers) and on its safety score (binomial, over the items it answered); a pair is
    told apart when its two intervals do not overlap.

    Parameters
    ----------
    bench : irtlib.book.pipeline.Benchmark
    calibration : Calibration
        Fitted to ``bench.filtered``.

    Returns
    -------
    dict
        ``n`` (ceiling models), ``theta`` and ``score`` (shares of pairs told apart) and
        ``at_bound`` (ceiling models whose MAP ability ended on the bracket's bound).
    """
    import numpy as np

    from irtlib.core.ability import map_ability

    m = bench.filtered
    est = map_ability(m.values, calibration.a.reindex(m.items).to_numpy(), calibration.b.reindex(m.items).to_numpy())
    s = bench.full.safety_scores().reindex(m.models).to_numpy()
    keep = s > ceiling
    n_items = bench.full.observed.sum(axis=1)
    score_se = np.sqrt(np.maximum(s * (1 - s), 1e-12) / n_items)
    return {"n": int(keep.sum()), "theta": separated_share(est.theta[keep], 1.96 * est.se[keep]),
            "score": separated_share(s[keep], 1.96 * score_se[keep]), "at_bound": int(est.at_bound[keep].sum())}
