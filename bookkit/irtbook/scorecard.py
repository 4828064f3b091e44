"""The book's scorecard: every claim of the paper, the evidence we have for it, and a verdict.

A verdict is computed from the numbers by one of the rules below, never typed, and is always one
of :data:`VERDICTS`. The rules are written out on the scorecard page (:data:`RULES`), so a reader
can check every verdict against its evidence.

- :func:`value_verdict`: a number the paper prints (Table 2's agreements, CV of a, item RMSE, the
  theta span): reproduced when ours rounds to it at the printed decimals (:func:`printed_round`),
  close within two units of the last printed decimal.
- :func:`budget_verdict`: a budget k of Table 2, in steps of the authors' budget grid.
- :func:`count_verdict`: counts computed from the data (models at the ceiling), equal or not.
- :func:`bound_verdict`: a claim that a quantity stays on one side of a bound on every benchmark
  ("Spearman >= 0.97 on all six", "item RMSE <= 0.04").
- :func:`direction_verdict`: a claim that one method beats another (a paired difference with its
  confidence interval).
- :func:`match_verdict`: a claim that two methods do about equally well.
- :func:`correlation_verdict`: a claim that two quantities move together across benchmarks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

import pandas as pd

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["VERDICTS", "RULES", "Claim", "bound_verdict", "direction_verdict", "match_verdict", "budget_verdict",
           "correlation_verdict", "value_verdict", "difference_text", "count_verdict", "by_construction",
           "scorecard_frame", "nearest_swept", "EXCEPTIONS", "exception_table", "cv_advantage", "separated_share",
           "ceiling_pairs", "KINDS", "printed_round", "rounds_to", "at_ceiling", "close_band", "grid_position",
           "budget_steps", "CLOSE_UNITS"]

#: The only words a verdict may be. *close* is a single number near the paper's but not equal to it
#: at the precision the paper prints; *partly* is a claim over several benchmarks that holds on some of
#: them, or a direction that holds in the mean but not beyond the split-to-split noise.
VERDICTS = ("reproduced", "close", "partly", "not reproduced", "reversed", "not testable here")

#: What a claim's evidence rests on (see :attr:`Claim.kind`): the paper's own released matrices,
#: other real data (22 of AIR-Bench 2024's 82 models, PandaGuard), the simulated release, a mixture.
KINDS = ("paper", "real", "sim", "mixed", "")

#: Tolerance for "matches" (agreement units).
MATCH_TOLERANCE = 0.03
#: "close": within this many units of the last decimal the paper prints (0.02 at two decimals).
CLOSE_UNITS = 2
#: Binary noise below this is dropped before rounding, so 0.8949999999999999 reads as 0.895.
_SNAP = 9

#: The rules, as printed on the scorecard page (rule id -> text).
RULES = {
    "value": "A value the paper prints with d decimals: **reproduced** if ours, rounded half up to d decimals, is "
             "the paper's number (at two decimals, ours in [0.895, 0.905) reproduces 0.90); **close** if ours is "
             f"within {CLOSE_UNITS} units of the last printed decimal (0.02 at two decimals); **not reproduced** "
             "otherwise. Ours is our mean over splits, not an interval: a Monte Carlo interval says how far the "
             "mean could move with other splits of the same models, and widening it until it reaches the paper's "
             "number would call almost anything reproduced. Before rounding, binary noise below 1e-9 is dropped, "
             "so a mean stored as 0.8949999999999999 rounds as 0.895 does, to 0.90.",
    "budget": "A budget k (Table 2): both budgets are placed on the authors' budget grid (their released code's "
              "distinct round(geomspace(1, min(largest budget, items kept), 20)); every k of Table 2 lies on it, and "
              "ours is its nearest grid point on a log scale). **Reproduced** at the same grid point; **close** one "
              "grid step away; **not reproduced** further away, or when our sweep never reaches the event (a "
              "censored '> k' against a paper's exact k). A paper budget printed as '> k' (the paper's sweep ended "
              "first) is **reproduced** when ours also lies beyond k, **close** when ours is reached at k or one grid "
              "step below it, **not reproduced** further below, and **not testable here** when our sweep stopped "
              "before k without the event. Grid budgets are conservative by one step at most, so one step is "
              "*close*, never *reproduced*; several budgets off in the same direction are a systematic shift, and "
              "the chapter counts them.",
    "count": "A count of models computed from the data: **reproduced** only if every count equals the paper's; "
             "**not reproduced** otherwise (one model more or less is a different count, and the counts are exact "
             "on both sides).",
    "bound": "A bound claimed for every benchmark (compared at the precision the paper prints the bound, where it "
             "is a printed number): **reproduced** if it holds on all of them; **close** if it fails only by at "
             f"most {CLOSE_UNITS} units of the bound's last printed decimal; **partly** if it holds on at least half; "
             "**not reproduced** otherwise.",
    "direction": "'A beats B': from the split-by-split difference A - B at the budget in question, with its "
                 "95% confidence interval. **Reproduced** if the interval lies above 0; **partly** if the mean "
                 "is above 0 but the interval includes 0; **not reproduced** if the mean is at or below 0 but "
                 "the interval includes 0; **reversed** if the interval lies below 0.",
    "match": f"'A matches B': **reproduced** if the whole 95% interval of the mean difference lies within "
             f"[-{MATCH_TOLERANCE}, {MATCH_TOLERANCE}]; **close** if the mean does but the interval reaches beyond; "
             "**not reproduced** otherwise.",
    "correlation": "'Goes with' across benchmarks: Spearman's rho over the benchmarks. **Reproduced** if "
                   "rho >= 0.6; **partly** if 0 < rho < 0.6; **not reproduced** if -0.6 < rho <= 0; "
                   "**reversed** if rho <= -0.6.",
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
        that tests it (:func:`irtbook.claims.publish`).
    kind : str
        What the evidence rests on: ``"paper"`` (the authors' released matrices), ``"real"`` (other
        real data: AIR-Bench 2024's 22 models, PandaGuard), ``"sim"`` (the simulated release),
        ``"mixed"``, or ``""`` (not said).
    note : str
        Why a claim did not reproduce, where the data say it (one sentence; no typed numbers).
    difference : str
        Our number minus the paper's, signed, at the precision ours is printed
        (:func:`difference_text`); empty for claims that are not one number beside another.
    benchmarks : int
        How many benchmarks a ``bound`` claim's verdict was judged on (0: not said), so that its
        reason can say "the one benchmark tested" where there is one.
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
    difference: str = ""
    benchmarks: int = 0

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")
        if self.rule not in RULES:
            raise ValueError(f"rule {self.rule!r} is not one of {sorted(RULES)}")
        if self.kind not in KINDS:
            raise ValueError(f"kind {self.kind!r} is not one of {KINDS}")


def _finite(x) -> bool:
    if x is None:
        return False
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def printed_round(x: float, *, decimals: int) -> Decimal:
    """``x`` rounded half up to ``decimals`` places, as a table prints it.

    Binary noise below 1e-9 is dropped first, so a float that stands for a tie rounds as the tie
    does: 0.905 (stored as 0.90500000000000002665) and 0.8949999999999999 (a sum's 0.895) both round
    up, to 0.91 and 0.90. Python's own ``round`` follows the stored binary value instead
    (``round(0.865, 2)`` is 0.86, ``round(0.875, 2)`` 0.88).

    Parameters
    ----------
    x : float
    decimals : int
        Places after the decimal point (0 for whole numbers).

    Returns
    -------
    Decimal
    """
    snapped = Decimal(f"{float(x):.{_SNAP}f}")
    return snapped.quantize(Decimal(1).scaleb(-int(decimals)), rounding=ROUND_HALF_UP)


def rounds_to(ours: float, paper: float, *, decimals: int) -> bool:
    """True when ``ours`` prints as the paper's number at ``decimals`` places (:func:`printed_round`)."""
    return printed_round(ours, decimals=decimals) == printed_round(paper, decimals=decimals)


def close_band(decimals: int) -> float:
    """The largest distance called *close*: :data:`CLOSE_UNITS` units of the last printed decimal."""
    return CLOSE_UNITS * 10.0 ** -int(decimals)


def value_verdict(ours: float | None, paper: float, *, decimals: int = 2, close: float | None = None) -> str:
    """Verdict of a value the paper prints with ``decimals`` places (rule ``value``, Table 2 and Results).

    Parameters
    ----------
    ours : float or None
        Our value (the mean over splits, not an interval); None or NaN when we have none
        (e.g. a threshold never reached): "not reproduced".
    paper : float
        The paper's printed value.
    decimals : int
        Decimals the paper prints (two for agreement, CV and theta; three for the item RMSE).
    close : float, optional
        The largest distance called *close*; default :func:`close_band` of ``decimals``.

    Examples
    --------
    >>> value_verdict(0.905, 0.91), value_verdict(0.905, 0.90), value_verdict(0.88, 0.90)
    ('reproduced', 'close', 'close')
    >>> value_verdict(0.86, 0.91)
    'not reproduced'
    """
    if not _finite(ours):
        return "not reproduced"
    if rounds_to(float(ours), float(paper), decimals=decimals):
        return "reproduced"
    band = close_band(decimals) if close is None else float(close)
    return "close" if abs(float(ours) - float(paper)) <= band + 10.0 ** -_SNAP else "not reproduced"


def difference_text(ours: float | None, paper: float, *, places: int, percent: bool = False) -> str:
    """Our number minus the paper's, signed, at the ``places`` ours is printed with ("" without ours).

    Parameters
    ----------
    ours : float or None
        Our value; None or NaN gives "".
    paper : float
        The paper's printed value.
    places : int
        Decimals ours is printed with (of the percentage when ``percent``).
    percent : bool, optional
        Both are fractions printed as percentages: the difference is in percentage points.

    Examples
    --------
    >>> difference_text(0.014, 0.008, places=3), difference_text(0.8749, 0.90, places=3)
    ('+0.006', '-0.025')
    >>> difference_text(0.853, 0.80, places=1, percent=True), difference_text(None, 0.5, places=2)
    ('+5.3 percentage points', '')
    """
    if not _finite(ours):
        return ""
    if percent:
        return f"{100.0 * (float(ours) - float(paper)):+.{int(places)}f} percentage points"
    return f"{float(ours) - float(paper):+.{int(places)}f}"


def grid_position(k: float, grid) -> int:
    """Index of the point of ``grid`` nearest to ``k`` on a log scale (ties go to the smaller budget).

    Parameters
    ----------
    k : float
        A budget (at least 1).
    grid : sequence of int
        A budget grid, e.g. the authors' (:func:`irtlib.protocol.presets.authors_budget_grid`).
    """
    import numpy as np

    g = np.sort(np.asarray(list(grid), dtype=float))
    if g.size == 0:
        raise ValueError("the budget grid is empty")
    distance = np.round(np.abs(np.log(g) - np.log(float(k))), 12)      # a geometric midpoint is a tie
    return int(np.argmin(distance))


def budget_steps(ours: int, paper: int, *, grid) -> int:
    """Signed grid steps from the paper's budget to ours (positive: ours is later, i.e. larger)."""
    return grid_position(ours, grid) - grid_position(paper, grid)


def budget_verdict(ours: int | None, paper: int, *, grid, censored: bool = False,
                   paper_at_least: bool = False) -> str:
    """Verdict of a budget claim (rule ``budget``, Table 2): grid steps between our k and the paper's.

    Parameters
    ----------
    ours : int or None
        Our budget; None when there is none at all (e.g. Fluid never led Random).
    paper : int
        The paper's budget.
    grid : sequence of int
        The authors' budget grid for the benchmark.
    censored : bool
        True when ours is a lower bound ("> ours": our sweep ended at ``ours`` without the event).
    paper_at_least : bool
        True when the paper's budget is itself a lower bound ("> 3,000").

    Examples
    --------
    >>> grid = [1, 2, 3, 4, 5, 6, 8, 10, 13, 16, 20, 25, 31, 40, 50, 63, 79]
    >>> budget_verdict(20, 20, grid=grid), budget_verdict(25, 20, grid=grid), budget_verdict(31, 20, grid=grid)
    ('reproduced', 'close', 'not reproduced')
    >>> budget_verdict(79, 20, grid=grid, censored=True)
    'not reproduced'
    """
    if paper_at_least:
        if ours is None:
            return "not testable here"
        if censored:
            return "reproduced" if ours >= paper else "not testable here"
        if ours > paper:
            return "reproduced"
        below = -budget_steps(ours, paper, grid=grid)       # 0 when reached at the paper's k itself
        return "close" if below <= 1 else "not reproduced"
    if ours is None or censored:
        return "not reproduced"
    steps = abs(budget_steps(ours, paper, grid=grid))
    if steps == 0:
        return "reproduced"
    return "close" if steps == 1 else "not reproduced"


def bound_verdict(values, *, bound: float, above: bool = True, decimals: int | None = None) -> str:
    """Verdict of 'the quantity is >= bound (``above``) or <= bound on every benchmark' (rule ``bound``).

    Parameters
    ----------
    values : mapping or sequence of float
        One value per benchmark.
    bound : float
    above : bool
        True for a lower bound (">= 0.97"), False for an upper one ("<= 0.04").
    decimals : int, optional
        The decimals the paper prints the bound with: each value is compared after
        :func:`printed_round` to them, and a value that misses by at most :func:`close_band` makes the
        claim *close*. None: compared exactly, no *close* (bounds on derived quantities, e.g. "> 0").

    Examples
    --------
    >>> bound_verdict([0.99, 0.966], bound=0.97, decimals=2)     # 0.966 prints as 0.97
    'reproduced'
    >>> bound_verdict([0.99, 0.963], bound=0.97, decimals=2)
    'close'
    """
    vals = [float(v) for v in (values.values() if hasattr(values, "values") else values)]
    if not vals:
        return "not testable here"

    def shown(v):
        return float(printed_round(v, decimals=decimals)) if decimals is not None else v

    misses = [max(bound - shown(v), 0.0) if above else max(shown(v) - bound, 0.0) for v in vals]
    failed = [m for m in misses if m > 0]
    if not failed:
        return "reproduced"
    if decimals is not None and max(failed) <= close_band(decimals) + 10.0 ** -_SNAP:
        return "close"
    return "partly" if len(vals) - len(failed) >= len(vals) / 2 else "not reproduced"


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
    """Verdict of 'A matches B' from the paired difference A - B and its confidence interval (rule ``match``)."""
    if not (_finite(mean) and _finite(ci_lo) and _finite(ci_hi)):
        return "not testable here"
    if -tolerance <= ci_lo and ci_hi <= tolerance:
        return "reproduced"
    return "close" if abs(mean) <= tolerance else "not reproduced"


def correlation_verdict(rho: float) -> str:
    """Verdict of 'X goes with Y across benchmarks' from Spearman's rho."""
    if not _finite(rho):
        return "not testable here"
    if rho >= 0.6:
        return "reproduced"
    if rho > 0:
        return "partly"
    return "reversed" if rho <= -0.6 else "not reproduced"


def count_verdict(ours, reported) -> str:
    """Verdict of counts (models at the ceiling): reproduced only when every count equals the paper's.

    Parameters
    ----------
    ours, reported : sequence of int
        One count per benchmark, ours and the paper's, in the same order.
    """
    ours, reported = [int(x) for x in ours], [int(x) for x in reported]
    if not ours or len(ours) != len(reported):
        return "not testable here"
    return "reproduced" if ours == reported else "not reproduced"


def by_construction() -> str:
    """Verdict of a claim whose number the simulated release was generated to match."""
    return "not testable here"


def scorecard_frame(claims) -> pd.DataFrame:
    """Lay claims out as the scorecard table (one column per :class:`Claim` field)."""
    frame = pd.DataFrame([c.__dict__ for c in claims],
                         columns=["claim", "source", "data", "evidence", "section", "verdict", "rule", "id", "kind",
                                  "note", "difference", "benchmarks"])
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


def at_ceiling(scores, *, ceiling: float = 0.95):
    """Which models sit at the ceiling: score at or above ``ceiling`` (Ceiling separation).

    The one rule for every count, span and pair of the book: the paper's HarmBench count is of
    scores "between 0.95 and 1.00", both ends included.

    Returns
    -------
    ndarray of bool
    """
    import numpy as np

    return np.asarray(scores, dtype=float) >= ceiling


def ceiling_pairs(bench, calibration, *, ceiling: float = 0.95) -> dict:
    """How many pairs of models at the ceiling ability and score tell apart (Ceiling separation).

    Each ceiling model gets a 95% interval on theta (MAP with its posterior SD, on the items the
    calibration covers) and on its safety score (binomial, over the items it answered); a pair is
    told apart when its two intervals do not overlap.

    Parameters
    ----------
    bench : irtbook.pipeline.Benchmark
    calibration : Calibration
        Fitted to ``bench.filtered``.

    Returns
    -------
    dict
        ``n`` (ceiling models, :func:`at_ceiling`), ``theta`` and ``score`` (shares of pairs told apart) and
        ``at_bound`` (ceiling models whose MAP ability ended on the bracket's bound).
    """
    import numpy as np

    from irtlib.core.ability import map_ability

    m = bench.filtered
    est = map_ability(m.values, calibration.a.reindex(m.items).to_numpy(), calibration.b.reindex(m.items).to_numpy())
    s = bench.full.safety_scores().reindex(m.models).to_numpy()
    keep = at_ceiling(s, ceiling=ceiling)
    n_items = bench.full.observed.sum(axis=1)
    score_se = np.sqrt(np.maximum(s * (1 - s), 1e-12) / n_items)
    return {"n": int(keep.sum()), "theta": separated_share(est.theta[keep], 1.96 * est.se[keep]),
            "score": separated_share(s[keep], 1.96 * score_se[keep]), "at_bound": int(est.at_bound[keep].sum())}
