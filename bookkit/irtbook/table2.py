"""Table 2 like for like: our agreement at the paper's own budgets, budgets compared as budgets.

The paper's Table 2 reports, per benchmark, two budgets (left: Fluid first reaches 0.90; right:
the largest swept k before Random catches up) and several methods' mean agreement there. Our own
crossing budgets differ from the paper's, so comparing "agreement at our crossing" with "agreement
at the paper's crossing" mixes two questions. This module answers each separately:

- :func:`at_paper_budgets`: every reported agreement value of Table 2, set beside our mean
  agreement *at the paper's k*, with the 95% confidence interval of the mean over splits;
- :func:`budget_comparison`: the paper's budgets beside ours, censored budgets shown as "> k",
  each with its verdict by the budget rule (grid steps on :func:`authors_grid`);
- :func:`first_reach` and :func:`reading_fit`: the paper's "first reaches 0.90" under its two readings
  (the mean printed to two decimals reaches 0.90, or the unrounded mean does);
- :func:`bootstrap_budget`: a budget's uncertainty, from resampling the splits (Evaluation: the splits
  are random, so the first k that reaches 0.90 is too).

Every interval of a mean over splits here is a *Monte Carlo* interval (:data:`INTERVAL_WORDS`): the
splits reuse the same few dozen models, so it says how far the mean could move with other random
splits of those models, not how the method would do on new models.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from irtlib.datasets import paper
from irtlib.errors import InputError
from irtlib.protocol.agreement import agreement_at, agreement_curves

from .scorecard import budget_steps, budget_verdict, nearest_swept, printed_round, value_verdict

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = ["DECIMALS", "INTERVAL_WORDS", "paper_values", "at_paper_budgets", "compact", "budget_comparison",
           "format_budget", "authors_grid", "first_reach", "first_reach_table", "reading_fit", "bootstrap_budget",
           "budget_shift"]

#: Decimals Table 2 prints its agreement values with.
DECIMALS = 2

#: What the interval of a mean over splits is, in words, for captions and prose.
INTERVAL_WORDS = ("95% Monte Carlo interval of the mean over splits (Student's t): how far the mean could move "
                  "with other random splits of the same models; the splits overlap and reuse those models, so it "
                  "is not a statement about new models")

_FIELDS = {"fluid": "fluid", "random": "random", "random-irt": "random_irt"}


def paper_values(bench: str) -> list[dict]:
    """Every agreement value Table 2 reports for ``bench``: column, k, method, value, ref."""
    out = []
    left, right = paper.TABLE2_LEFT[bench], paper.TABLE2_RIGHT[bench]
    for method, field in _FIELDS.items():
        out.append({"column": "left", "k_paper": left.k, "method": method, "paper": getattr(left, field),
                    "ref": f"TABLE2_LEFT[{bench}].{field}"})
    for method, value in left.others.items():
        out.append({"column": "left", "k_paper": left.k, "method": method, "paper": value,
                    "ref": f"TABLE2_LEFT[{bench}].others.{method}"})
    for method, value in right.values.items():
        out.append({"column": "right", "k_paper": right.k, "method": method, "paper": value,
                    "ref": f"TABLE2_RIGHT[{bench}].values.{method}"})
    return out


def at_paper_budgets(results: dict, *, level: float = 0.95) -> pd.DataFrame:
    """Our agreement at the budgets where the paper reports its Table 2 values.

    Parameters
    ----------
    results : dict
        Benchmark -> :func:`irtlib.run_protocol` results (the paper's budgets should be among the
        swept ``k``; where one is not, the nearest swept budget on a log scale is used and
        ``k`` differs from ``k_paper``).
    level : float
        Coverage of the Monte Carlo interval of the mean (:data:`INTERVAL_WORDS`).

    Returns
    -------
    DataFrame, one row per reported value
        ``benchmark``, ``column``, ``method``, ``k_paper``, ``k``, ``paper``, ``mean``, ``ci_lo``,
        ``ci_hi``, ``sd``, ``lo``, ``hi`` (spread of single splits), ``n_splits``,
        ``n_undefined``, ``verdict`` (the value rule of :func:`irtbook.scorecard.value_verdict` on
        our mean at :data:`DECIMALS`) and ``ref`` (the paper number's key).
    """
    rows = []
    for bench, res in results.items():
        curves = None                      # the benchmark's curves, computed once for all its reported values
        for v in paper_values(bench):
            k = nearest_swept(res, v["k_paper"])
            if curves is None:
                curves = agreement_curves(res)
            at = agreement_at(res, k, methods=[v["method"]], curves=curves) if "benchmark" not in res.columns else \
                agreement_at(res, {bench: k}, methods=[v["method"]], curves=curves)
            if at.empty:
                continue
            r = at.iloc[0]
            rows.append({"benchmark": bench, "column": v["column"], "method": v["method"], "k_paper": v["k_paper"],
                         "k": k, "paper": v["paper"], **{c: r[c] for c in ("mean", "ci_lo", "ci_hi", "sd", "lo", "hi",
                                                                          "n_splits", "n_undefined")},
                         "verdict": value_verdict(float(r["mean"]), float(v["paper"]), decimals=DECIMALS),
                         "ref": v["ref"]})
    return pd.DataFrame(rows)


def compact(long: pd.DataFrame, *, column: str, methods, names: dict | None = None, labels: dict | None = None,
            layout: str = "wide") -> pd.DataFrame:
    """One column of Table 2 as a compact table, the paper's value beside ours.

    Parameters
    ----------
    long : DataFrame
        :func:`at_paper_budgets`.
    column : {"left", "right"}
    methods : sequence of str
        Methods to show, in order.
    names, labels : dict, optional
        Display names of benchmarks and of methods.
    layout : {"wide", "long"}
        ``wide``: one row per benchmark, two columns (paper, ours) per method (Table 2's left
        column: three methods everywhere). ``long``: one row per reported value, columns
        benchmark, k, method, paper, ours (the right column, where each benchmark reports other
        methods).

    Returns
    -------
    DataFrame
        ``wide``: indexed by benchmark, columns ``("", "k")`` then ``(method, "paper")`` and
        ``(method, "ours")``. ``long``: a plain frame.
    """
    t = long[long["column"] == column]
    labels = labels or {}
    if layout == "long":
        t = t[t["method"].isin(list(methods))].copy()
        t["order"] = t["method"].map({m: i for i, m in enumerate(methods)})
        t = t.sort_values(["order"], kind="stable").sort_values("benchmark", key=lambda b: b.map(
            {bb: i for i, bb in enumerate(dict.fromkeys(long["benchmark"]))}), kind="stable")
        return pd.DataFrame({"benchmark": t["benchmark"].map(lambda b: (names or {}).get(b, b)),
                             "k": [format_budget(int(k)) for k in t["k_paper"]],
                             "method": t["method"].map(lambda m: labels.get(m, m)),
                             "paper": t["paper"].to_numpy(), "ours": t["mean"].to_numpy()}).reset_index(drop=True)
    if layout != "wide":
        raise InputError(f"layout must be 'wide' or 'long', got {layout!r}")
    frame = {}
    for bench, tb in t.groupby("benchmark", sort=False):
        tb = tb.set_index("method")
        rec = {("", "k"): format_budget(int(tb["k_paper"].iloc[0]),
                                        at_least=bench == "safetybench" and column == "left")}
        for m in methods:
            if m in tb.index:
                rec[(labels.get(m, m), "paper")] = float(tb.loc[m, "paper"])
                rec[(labels.get(m, m), "ours")] = float(tb.loc[m, "mean"])
        frame[(names or {}).get(bench, bench)] = rec
    out = pd.DataFrame.from_dict(frame, orient="index")
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    return out


def format_budget(k: int | None, *, at_least: bool = False) -> str:
    """A budget as the table prints it: "17", "3,000", "> 3,431" for a censored one, "-" for none."""
    if k is None or (isinstance(k, float) and np.isnan(k)):
        return "-"
    return ("> " if at_least else "") + f"{int(k):,}"


def authors_grid(bench) -> list[int]:
    """The authors' budget grid for a loaded benchmark: every budget k of Table 2 lies on it.

    The distinct ``round(geomspace(1, min(largest budget, items kept), 20))`` with the authors'
    largest budget and variance filter (:func:`irtlib.protocol.presets.authors_budget_grid`).

    Parameters
    ----------
    bench : irtbook.pipeline.Benchmark
    """
    from irtlib.protocol import presets

    from .pipeline import kept_items

    proto = presets.get("authors", benchmark=bench.name)
    return presets.authors_budget_grid(kept_items(bench, protocol=proto), max_budget=proto.max_budget)


def budget_comparison(summary: pd.DataFrame, *, grids: dict, names: dict | None = None) -> pd.DataFrame:
    """The paper's Table 2 budgets beside ours, with the budget rule's verdict and the grid steps.

    Parameters
    ----------
    summary : DataFrame
        :func:`irtlib.protocol.agreement.summarise_table2` over several benchmarks.
    grids : dict
        Benchmark -> the authors' budget grid (:func:`authors_grid`).
    names : dict, optional
        Display names.

    Returns
    -------
    DataFrame indexed by benchmark display name
        ``left k (paper)``, ``left k (ours)``, ``left steps`` (signed grid steps, ours minus the
        paper's; empty when either is censored), ``left verdict``, and the same for ``right``;
        censored budgets print as "> k".
    """
    out = {}
    for bench, tb in summary.groupby("benchmark", sort=False):
        rec = {}
        for column, p in (("left", paper.TABLE2_LEFT[bench]), ("right", paper.TABLE2_RIGHT[bench])):
            ours = tb[tb["column"] == column]
            at_least = bool(getattr(p, "k_at_least", False))
            rec[f"{column} k (paper)"] = format_budget(p.k, at_least=at_least)
            if ours.empty:
                rec[f"{column} k (ours)"] = "never led" if column == "right" else "-"
                rec[f"{column} steps"] = ""
                rec[f"{column} verdict"] = budget_verdict(None, p.k, grid=grids[bench], paper_at_least=at_least)
                continue
            k, censored = int(ours["k"].iloc[0]), bool(ours["censored"].iloc[0])
            rec[f"{column} k (ours)"] = format_budget(k, at_least=censored)
            rec[f"{column} steps"] = ("" if censored or at_least else
                                      f"{budget_steps(k, p.k, grid=grids[bench]):+d}")
            rec[f"{column} verdict"] = budget_verdict(k, p.k, grid=grids[bench], censored=censored,
                                                      paper_at_least=at_least)
        out[(names or {}).get(bench, bench)] = rec
    return pd.DataFrame.from_dict(out, orient="index")


def budget_shift(steps) -> dict:
    """Whether budgets off the paper's are off in one direction (a systematic shift, not noise).

    Parameters
    ----------
    steps : iterable of int
        Signed grid steps, ours minus the paper's (:func:`irtbook.scorecard.budget_steps`).

    Returns
    -------
    dict
        ``n`` (budgets compared), ``later``, ``earlier``, ``same`` (counts), and ``one_sided``:
        True when at least two budgets are off and all of them in the same direction. ``p_sign``:
        the two-sided sign-test probability of so one-sided a split among the budgets that are off,
        were each equally likely early or late.
    """
    from scipy import stats

    s = [int(x) for x in steps]
    later, earlier = sum(x > 0 for x in s), sum(x < 0 for x in s)
    off = later + earlier
    p = float(stats.binomtest(later, off, 0.5).pvalue) if off else 1.0
    return {"n": len(s), "later": later, "earlier": earlier, "same": len(s) - off,
            "one_sided": off >= 2 and (later == 0 or earlier == 0), "p_sign": p}


def first_reach(ks, means, *, threshold: float = 0.90, decimals: int = DECIMALS) -> dict:
    """The first swept k whose mean agreement reaches ``threshold``, under the paper's two readings.

    Table 2's left column is "the smallest k at which Fluid first reaches 90% agreement". The paper
    prints agreement to two decimals, so "reaches 0.90" may mean the printed (rounded) mean reaches
    it, i.e. the mean is at least 0.895, or the unrounded mean does.

    Parameters
    ----------
    ks : sequence of int
        Swept budgets, ascending.
    means : sequence of float
        The mean agreement at each (NaN never reaches).
    threshold : float
    decimals : int
        The decimals the mean is printed with (the *rounded* reading).

    Returns
    -------
    dict
        ``rounded`` and ``unrounded``: the first k, or None when no swept k reaches it.

    Examples
    --------
    >>> first_reach([5, 6, 8], [0.85, 0.897, 0.91])
    {'rounded': 6, 'unrounded': 8}
    """
    def first(hit):
        return next((int(k) for k, h in zip(ks, hit, strict=True) if h), None)

    finite = [m is not None and np.isfinite(m) for m in means]
    unrounded = [f and m >= threshold for f, m in zip(finite, means, strict=True)]
    target = printed_round(threshold, decimals=decimals)
    rounded = [f and printed_round(m, decimals=decimals) >= target for f, m in zip(finite, means, strict=True)]
    return {"rounded": first(rounded), "unrounded": first(unrounded)}


def first_reach_table(curves: pd.DataFrame, *, method: str = "fluid", threshold: float = 0.90) -> pd.DataFrame:
    """:func:`first_reach` per benchmark from :func:`irtlib.protocol.agreement.agreement_curves`.

    Returns
    -------
    DataFrame indexed by benchmark
        ``rounded``, ``unrounded`` (the first k, or None) and ``k_max`` (the largest swept k).
    """
    rows = {}
    for bench, curve in curves[curves["method"] == method].groupby("benchmark", sort=False):
        curve = curve.sort_values("k")
        rows[bench] = {**first_reach(curve["k"].tolist(), curve["mean"].tolist(), threshold=threshold),
                       "k_max": int(curve["k"].max())}
    return pd.DataFrame.from_dict(rows, orient="index").astype(object)


def reading_fit(reach: pd.DataFrame, *, grids: dict) -> dict:
    """Which reading of "first reaches 0.90" the paper's left-column budgets fit better.

    Parameters
    ----------
    reach : DataFrame
        :func:`first_reach_table` (benchmarks of Table 2 only are used; the paper's "> k" is skipped).
    grids : dict
        Benchmark -> the authors' budget grid.

    Returns
    -------
    dict
        ``rounded`` and ``unrounded``: how many of the compared budgets each reading puts on the
        paper's grid point; ``n``: budgets compared; ``fits``: "rounded", "unrounded" or "both
        equally".
    """
    hits = {"rounded": 0, "unrounded": 0}
    n = 0
    for bench, r in reach.iterrows():
        p = paper.TABLE2_LEFT.get(bench) if bench in paper.TABLE2_LEFT else None
        if p is None or p.k_at_least:
            continue
        n += 1
        for reading in hits:
            k = r[reading]
            hits[reading] += int(k is not None and not pd.isna(k) and budget_steps(int(k), p.k, grid=grids[bench]) == 0)
    fits = ("both equally" if hits["rounded"] == hits["unrounded"] else
            max(hits, key=hits.get))
    return {**hits, "n": n, "fits": fits}


def _split_cube(results: pd.DataFrame, methods, nan_policy: str):
    """(ks, array [split, method, k]) of agreements; NaN kept under "omit", 0 under "zero"."""
    wide = results[results["method"].isin(list(methods))].pivot_table(
        index="split", columns=["method", "k"], values="agreement", dropna=False)
    ks = sorted({int(k) for k in results["k"].unique()})
    cube = np.stack([wide[m].reindex(columns=ks).to_numpy(float) for m in methods], axis=1)
    if nan_policy == "zero":
        cube = np.nan_to_num(cube, nan=0.0)
    return np.asarray(ks), cube


def _left(ks, fluid, threshold):
    hit = np.flatnonzero(fluid >= threshold)
    return (int(ks[hit[0]]), False) if hit.size else (int(ks[-1]), True)


def _right(ks, fluid, random):
    lead = fluid - random
    first = np.flatnonzero(lead > 0)
    if not first.size:
        return None, False
    caught = np.flatnonzero(lead[first[0]:] <= 0)
    if caught.size:
        return int(ks[first[0] + caught[0] - 1]), False
    return int(ks[-1]), True


def _bootstrap_budgets(ks: np.ndarray, cube: np.ndarray, draws: np.ndarray, *, column: str, threshold: float,
                       policy: str) -> np.ndarray:
    """Each bootstrap sample's budget (NaN: none; inf: censored), all samples at once.

    ``ks`` shape (K,), ``cube`` shape (n_splits, n_methods, K) from :func:`_split_cube`, ``draws`` shape
    (n_boot, n_splits) the splits drawn. Every sample's mean curves come from one (n)``nanmean`` over the
    drawn splits' axis of ``cube[draws]``; the splits are added one after another, element by element, as
    ``cube[idx].mean(axis=0)`` adds them for one sample, so each mean is that sample's to the bit. The
    budgets are read by :func:`_left` and :func:`_right`'s rules on every row at once;
    :func:`_bootstrap_budgets_loop` (one sample at a time through those two) is the reference of the tests.
    """
    drawn = cube[draws]
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        # a sample whose drawn splits are all undefined at some k has no mean there (NaN: not reached there)
        warnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)
        mean = np.nanmean(drawn, axis=1) if policy == "omit" else drawn.mean(axis=1)
    kf = ks.astype(float)
    if column == "left":
        hit = np.nan_to_num(mean[:, 0], nan=-np.inf) >= threshold
        reached = hit.any(axis=1)
        return np.where(reached, kf[hit.argmax(axis=1)], np.inf)
    with np.errstate(invalid="ignore"):
        lead = mean[:, 0] - mean[:, 1]
    ahead = lead > 0
    led = ahead.any(axis=1)
    first = ahead.argmax(axis=1)
    after = (lead <= 0) & (np.arange(ks.size) >= first[:, None])
    caught = after.any(axis=1)
    last = np.where(caught, after.argmax(axis=1) - 1, ks.size - 1)
    return np.where(~led, np.nan, np.where(caught, kf[last], np.inf))


def _bootstrap_budgets_loop(ks: np.ndarray, cube: np.ndarray, draws: np.ndarray, *, column: str,
                            threshold: float, policy: str) -> np.ndarray:
    """:func:`_bootstrap_budgets` one sample at a time (the reference of its tests)."""
    budgets = []
    with np.errstate(invalid="ignore"):
        for idx in draws:
            mean = np.nanmean(cube[idx], axis=0) if policy == "omit" else cube[idx].mean(axis=0)
            if column == "left":
                k, cens = _left(ks, np.nan_to_num(mean[0], nan=-np.inf), threshold)
            else:
                k, cens = _right(ks, mean[0], mean[1])
            budgets.append(np.nan if k is None else (np.inf if cens else float(k)))
    return np.asarray(budgets)


def bootstrap_budget(results: pd.DataFrame, *, column: str = "left", threshold: float = 0.90,
                     n_boot: int = 1000, seed: int = 0, level: float = 0.95,
                     nan_policy: str | None = None) -> dict:
    """A Table 2 budget's uncertainty: resample the splits with replacement, recompute the budget.

    Each bootstrap sample draws as many splits as were run, with replacement, averages the
    agreement over them per method and k, and reads the budget off those mean curves by Table 2's
    rule (Evaluation; :func:`irtlib.protocol.agreement.summarise_table2`): ``left``, the first k at
    which Fluid's mean reaches ``threshold``; ``right``, the last k before Random's mean catches up
    with Fluid's, counted from Fluid's first lead.

    Parameters
    ----------
    results : DataFrame
        One benchmark's :func:`irtlib.run_protocol` results (columns split, method, k, agreement).
    column : {"left", "right"}
    threshold : float
    n_boot : int
        Bootstrap samples.
    seed : int
        Seed of :func:`numpy.random.default_rng` (the samples are reproducible).
    level : float
        Coverage of the interval (empirical quantiles of the bootstrapped budgets, which are grid points).
    nan_policy : {"zero", "omit"}, optional
        Undefined agreements count as 0 or are left out of the means; default the results' own.

    Returns
    -------
    dict
        ``lo``, ``hi`` (the interval; ``hi`` is ``inf`` when more than the upper tail never reaches
        the event within the sweep), ``share_censored`` (samples without the event within the
        sweep), ``share_none`` (right column: samples in which Fluid never leads) and ``counts``
        (budget -> share of samples, censored samples under ``inf``).
    """
    if column not in ("left", "right"):
        raise InputError(f"column must be 'left' or 'right', got {column!r}")
    policy = nan_policy or results.attrs.get("nan_policy", "zero")
    methods = ["fluid"] if column == "left" else ["fluid", "random"]
    ks, cube = _split_cube(results, methods, policy)
    rng = np.random.default_rng(seed)
    n = cube.shape[0]
    draws = rng.integers(0, n, size=(int(n_boot), n))
    b = _bootstrap_budgets(ks, cube, draws, column=column, threshold=threshold, policy=policy)
    defined = b[~np.isnan(b)]
    q = (1.0 - level) / 2.0
    lo, hi = ((float(np.quantile(defined, q, method="inverted_cdf")),
               float(np.quantile(defined, 1 - q, method="inverted_cdf"))) if defined.size else (np.nan, np.nan))
    values, counts = np.unique(defined, return_counts=True)
    return {"lo": lo, "hi": hi, "share_censored": float(np.isinf(b).mean()), "share_none": float(np.isnan(b).mean()),
            "counts": pd.Series(counts / b.size, index=values)}
