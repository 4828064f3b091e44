"""The agreement protocol as the paper's text describes it, and as the authors' released code runs it.

The authors' released code (repository ``fabiospagliardi/efficient_llm_safety_benchmarking`` at
commit c6813d1, :data:`CODE`) does several things other than the paper's text says. A
:class:`Protocol` names every one of those settings, so
:func:`irtlib.protocol.agreement.run_protocol` can follow either:

- ``"paper"``: what irtlib has always run (the text, with irtlib's choices where the text is
  silent). Its results are exactly those of ``run_protocol`` without a protocol.
- ``"authors"``: the released code's rules, with its split counts, test sizes and largest budget
  per benchmark (:data:`AUTHORS_SIZES`).

:func:`get` looks an instance up; :data:`DIFFERENCES` gives, per setting, one line saying what
the text and the code do (each citing :data:`CODE`), for the book's "which protocol" tables.
:func:`compare_static_rankings` sets our implementation of the authors' static-method rules beside
the ranks in their released per-split fits (``authors_fits/*.csv``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from irtlib.core.stats import spearman
from irtlib.errors import InputError

__all__ = ["Protocol", "PAPER", "AUTHORS_SIZES", "DIFFERENCES", "CODE", "NAMES", "get", "resolve",
           "authors_budget_grid", "authors_split", "shared_random_order", "compare_static_rankings"]

#: Where the authors' rules come from: their released code, at the commit read.
CODE = "the authors' released code, fabiospagliardi/efficient_llm_safety_benchmarking at c6813d1"


@dataclass(frozen=True)
class Protocol:
    """Every setting of the agreement protocol on which the paper's text and the authors' code differ.

    Attributes
    ----------
    name : str
        ``"paper"`` or ``"authors"`` (or a user's own name for a :func:`dataclasses.replace` copy).
    benchmark : str or None
        The benchmark the sizes are for (None: the same for every benchmark).
    n_splits, n_test : int
        Train/test splits, and test models per split.
    split_rule : {"stream", "authors"}
        ``"stream"``: split ``i`` draws from ``SeedSequence(seed, spawn_key=(i, 0))``;
        ``"authors"``: ``default_rng((seed, i)).choice(n_models, n_test, replace=False)`` over the
        rows in file order (see :func:`authors_split`).
    seed : int
        The protocol's seed (the authors': 42, which enters their split rule only).
    variance_rule : {"at-most", "below"}
        Items dropped by the variance filter: ``p (1 - p) <= threshold`` (the text) or ``< threshold``.
    variance_threshold : float
    budget_rule : {"irtlib", "authors"}
        ``"irtlib"``: :func:`irtlib.protocol.agreement.budget_grid`'s default; ``"authors"``: the distinct
        ``round(geomspace(1, min(max_budget, items kept), 20))`` (:func:`authors_budget_grid`).
    max_budget : int or None
        The largest budget swept (``"authors"`` rule only).
    reference : {"full", "filtered"}
        Agreement is measured against the safety score on every item, or on the items kept.
    nan_policy : {"zero", "omit"}
        An undefined rho counts as 0 in the summaries, or is dropped (nanmean).
    band : {"sd", "se"}
        The figures' band: +-1 SD over splits, or +-1 standard error of the mean over valid splits.
    fluid_estimator : {"map", "mle"}
        Fluid's ability along its path: MAP with the Normal(0, 1) prior, or the MLE bounded to
        [-8, 8] (:class:`irtlib.selection.adaptive.MleEstimator`).
    fluid_start : {"zero", "training-mean"}
        Where Fluid starts: 0, or the mean of the split's training models' MAP abilities.
    random_order : {"per-model", "shared"}
        Random and Random IRT: every test model its own random order, or one order per split
        (:func:`shared_random_order`), the same first ``k`` items for every test model.
    bquartile_rule : {"constrained", "interleave"}
        b-quartile Marginal Fisher: the greedy constrained to cycle over the quartiles, or the
        unconstrained greedy order cut into quantile bins of b and interleaved.
    anchor_rule : {"path", "fresh"}
        Anchor points: irtlib's K-medoids path warm-started across budgets, or a fresh FasterPAM
        (random initialisation, seed ``anchor_seed``) per budget on the authors' distance matrix.
    anchor_seed : int
    calibration_seed : {"stream", "zero"}
        The seed each split's calibration gets: its own stream, or 0 for every split.
    engine : str
        How every split's 2PL is calibrated on its training models: ``"map"``, the posterior mode
        of the text's model and priors (irtlib's fast engine); ``"pyirt"``, py-irt with the
        text's fixed priors; ``"pyirt-authors"``, py-irt's hierarchical priors with learning-rate
        decay and the best epoch, as the authors' code calibrates (batched over splits by
        :func:`irtlib.calibration.pyirt_batch.fit_2pl_splits`); or a name given to
        :func:`irtlib.protocol.agreement.register_calibration_engine`.
    """

    name: str
    benchmark: str | None = None
    n_splits: int = 100
    n_test: int = 10
    split_rule: str = "stream"
    seed: int = 0
    variance_rule: str = "at-most"
    variance_threshold: float = 0.01
    budget_rule: str = "irtlib"
    max_budget: int | None = None
    reference: str = "full"
    nan_policy: str = "zero"
    band: str = "sd"
    fluid_estimator: str = "map"
    fluid_start: str = "zero"
    random_order: str = "per-model"
    bquartile_rule: str = "constrained"
    anchor_rule: str = "path"
    anchor_seed: int = 42
    calibration_seed: str = "stream"
    engine: str = "map"

    def __post_init__(self):
        choices = {"split_rule": ("stream", "authors"), "variance_rule": ("at-most", "below"),
                   "budget_rule": ("irtlib", "authors"), "reference": ("full", "filtered"),
                   "nan_policy": ("zero", "omit"), "band": ("sd", "se"), "fluid_estimator": ("map", "mle"),
                   "fluid_start": ("zero", "training-mean"), "random_order": ("per-model", "shared"),
                   "bquartile_rule": ("constrained", "interleave"), "anchor_rule": ("path", "fresh"),
                   "calibration_seed": ("stream", "zero")}
        for field, allowed in choices.items():
            if getattr(self, field) not in allowed:
                raise InputError(f"protocol {self.name!r}: {field} must be one of {list(allowed)}, "
                                 f"got {getattr(self, field)!r}")
        if not isinstance(self.engine, str) or not self.engine:
            raise InputError(f"protocol {self.name!r}: engine must be an engine name, got {self.engine!r}")
        if self.budget_rule == "authors" and self.max_budget is None:
            raise InputError(f"protocol {self.name!r}: the authors' budget rule needs max_budget")

    def settings(self) -> dict:
        """Every field as a plain dict (what ``run_protocol`` records in ``df.attrs["protocol"]``)."""
        return asdict(self)


#: The paper's text as irtlib runs it: exactly today's defaults of :func:`irtlib.protocol.agreement.run_protocol`.
PAPER = Protocol("paper")

#: The authors' code per benchmark: (splits, test models per split, largest budget swept) (:data:`CODE`).
AUTHORS_SIZES: Mapping[str, tuple[int, int, int]] = MappingProxyType({
    "airbench2024": (70, 10, 1000), "anthropic-red-team": (100, 10, 500), "harmbench": (100, 10, 400),
    "simplesafetytests": (100, 10, 100), "safetybench": (70, 6, 3000), "wmdp-bio": (70, 6, 1000),
})

_AUTHORS_RULES = dict(split_rule="authors", seed=42, variance_rule="below", budget_rule="authors",
                      reference="filtered", nan_policy="omit", band="se", fluid_estimator="mle",
                      fluid_start="training-mean", random_order="shared", bquartile_rule="interleave",
                      anchor_rule="fresh", anchor_seed=42, calibration_seed="zero",
                      engine="pyirt-authors")

#: One line per setting: the text against the authors' code, each citing :data:`CODE`.
DIFFERENCES: Mapping[str, str] = MappingProxyType({
    "n_splits": f"text: 70 to 100 splits, which benchmark got which unreported; code: 70 for AIR-Bench and "
                f"SafetyBench and WMDP, 100 for the three others ({CODE})",
    "n_test": f"text: 10 test models per split; code: 6 for SafetyBench and WMDP ({CODE})",
    "split_rule": f"code: split i tests the rows default_rng((42, i)).choice(n_models, n_test, replace=False), "
                  f"trains on the others in file order ({CODE})",
    "variance_rule": f"text: items with p(1-p) at most 0.01 dropped; code: below 0.01 dropped, >= 0.01 kept "
                     f"({CODE})",
    "budget_rule": f"text: k swept on a log scale; code: distinct round(geomspace(1, min(largest budget, items "
                   f"kept), 20)) ({CODE})",
    "reference": f"text: R is the full safety score; code: the mean over the items kept ({CODE})",
    "nan_policy": f"code: an undefined rho is dropped from the mean over splits (nanmean), not counted as 0 "
                  f"({CODE})",
    "band": f"text: shading = 1 SD over splits; code: +-1 SE = nanstd(ddof=1) / sqrt(valid splits) "
            f"({CODE})",
    "fluid_estimator": f"text: MAP after every item; code: MLE (no prior) in [-8, 8], so one item puts a model "
                       f"at +8 or -8 ({CODE})",
    "fluid_start": f"text: start at theta = 0; code: at the mean of the training models' MAP abilities "
                   f"({CODE})",
    "random_order": f"code: ONE random order per split (default_rng(split index) shuffle), the same first k items "
                    f"for every test model, for Random and Random IRT ({CODE})",
    "bquartile_rule": f"text: greedy round-robin across b-quartile bins; code: the unconstrained greedy order cut "
                      f"into quantile bins of b and interleaved, lowest-b bin first ({CODE})",
    "anchor_rule": f"code: a fresh FasterPAM (random init, seed 42) per budget, distance 1 - r with undefined "
                   f"r = 0, weight = cluster size / items ({CODE})",
    "calibration_seed": f"code: py-irt seed 0 for every split ({CODE})",
    "engine": f"text: py-irt with theta ~ N(0, 1), b ~ N(0, 1), a ~ LogNormal(0, 1), 1,000 epochs of Adam at 0.1 "
              f"(irtlib's \"paper\" protocol fits that model by its posterior mode, engine \"map\"); code: py-irt's "
              f"hierarchical priors, learning rate decayed by 0.01% per epoch, the parameters of the epoch with the "
              f"lowest loss (engine \"pyirt-authors\") ({CODE})",
})

#: The named protocols.
NAMES = ("paper", "authors")


def get(name: str, *, benchmark: str | None = None) -> Protocol:
    """The named protocol, for one benchmark.

    Parameters
    ----------
    name : {"paper", "authors"}
    benchmark : str, optional
        A benchmark id of :data:`AUTHORS_SIZES` (``"simplesafetytests"``, ...). Needed by
        ``"authors"``, whose split counts, test sizes and largest budget depend on it; ``"paper"``
        is the same for every benchmark (the benchmark is only recorded).

    Returns
    -------
    Protocol
    """
    if name == "paper":
        return PAPER if benchmark is None else replace(PAPER, benchmark=str(benchmark))
    if name == "authors":
        if benchmark not in AUTHORS_SIZES:
            raise InputError(f"the authors' protocol depends on the benchmark: pass benchmark= one of "
                             f"{list(AUTHORS_SIZES)} (got {benchmark!r})")
        n_splits, n_test, max_budget = AUTHORS_SIZES[benchmark]
        return Protocol("authors", benchmark=benchmark, n_splits=n_splits, n_test=n_test, max_budget=max_budget,
                        **_AUTHORS_RULES)
    raise InputError(f"unknown protocol {name!r}; choose one of {list(NAMES)} or pass a Protocol")


def resolve(protocol: str | Protocol | None, *, benchmark: str | None = None) -> Protocol:
    """A :class:`Protocol` from what ``run_protocol`` was given (None: ``"paper"``)."""
    if protocol is None:
        return get("paper", benchmark=benchmark)
    if isinstance(protocol, Protocol):
        return protocol
    if isinstance(protocol, str):
        return get(protocol, benchmark=benchmark)
    raise InputError(f"protocol must be None, a name ({', '.join(NAMES)}) or a Protocol, got {type(protocol).__name__}")


# ---------------------------------------------------------------------------- the authors' rules
#: ``variance_threshold``'s default in :func:`irtlib.run_protocol` and
#: :func:`irtlib.protocol.ceiling.agreement_ceiling`: the protocol's (None already means "no filter").
FROM_PROTOCOL = "protocol"


def settle(protocol: str | Protocol | None, *, benchmark: str | None = None, n_splits: int | None = None,
           n_test: int | None = None, seed: int | None = None, reference: str | None = None,
           variance_threshold: float | None | str = FROM_PROTOCOL) -> tuple[Protocol, dict]:
    """A protocol and the run's settings: each explicit argument overrides the protocol's value.

    Returns
    -------
    protocol : Protocol
    settings : dict
        ``n_splits``, ``n_test``, ``seed``, ``reference``, ``variance_threshold``, checked.

    Raises
    ------
    InputError
        On a bad ``variance_threshold``, ``reference`` or ``n_splits``.
    """
    proto = resolve(protocol, benchmark=benchmark)
    if isinstance(variance_threshold, str):
        if variance_threshold != FROM_PROTOCOL:
            raise InputError(f"variance_threshold must be a number or None, got {variance_threshold!r}")
        variance_threshold = proto.variance_threshold
    settings = {"n_splits": proto.n_splits if n_splits is None else n_splits,
                "n_test": proto.n_test if n_test is None else n_test,
                "seed": proto.seed if seed is None else seed,
                "reference": proto.reference if reference is None else reference,
                "variance_threshold": variance_threshold}
    if settings["reference"] not in ("full", "filtered"):
        raise InputError(f"reference must be 'full' or 'filtered', got {settings['reference']!r}")
    if int(settings["n_splits"]) < 1:
        raise InputError(f"n_splits must be at least 1, got {settings['n_splits']}")
    return proto, settings


def authors_budget_grid(n_items: int, *, max_budget: int, n_points: int = 20) -> list[int]:
    """The authors' budgets: the distinct ``round(geomspace(1, min(max_budget, n_items), n_points))``.

    SimpleSafetyTests (79 items kept, largest budget 100): 1 2 3 4 5 6 8 10 13 16 20 25 31 40 50
    63 79 (:data:`CODE`). ``round`` is numpy's (half to even, like Python's).
    """
    top = min(int(max_budget), int(n_items))
    if top < 1:
        raise InputError(f"the budget grid needs at least one item, got n_items={n_items}, max_budget={max_budget}")
    return [int(k) for k in np.unique(np.round(np.geomspace(1, top, int(n_points))).astype(int))]


def authors_split(n_models: int, n_test: int, split: int, *, seed: int = 42) -> tuple[np.ndarray, np.ndarray]:
    """Training and test rows of the authors' split ``split`` (both sorted).

    The test rows are ``numpy.random.default_rng((seed, split)).choice(n_models, size=n_test,
    replace=False)`` over the models in file order; training is every other row, in file order
    (:data:`CODE`). Split ``i`` here is the authors' split ``i``.
    """
    if not 1 <= int(n_test) < int(n_models) - 1:
        raise InputError(f"n_test must be between 1 and n_models - 2 ({n_models - 2}), got {n_test}")
    test = np.sort(np.random.default_rng((int(seed), int(split))).choice(int(n_models), size=int(n_test),
                                                                         replace=False))
    return np.setdiff1d(np.arange(int(n_models)), test), test


def shared_random_order(n_items: int, split: int) -> np.ndarray:
    """The authors' random item order of split ``split``: ``default_rng(split).shuffle`` of ``0..n_items-1``.

    Random and Random IRT both take its first ``k`` items, for every test model (:data:`CODE`).
    Shape ``(n_items,)``.
    """
    order = list(range(int(n_items)))
    np.random.default_rng(int(split)).shuffle(order)
    return np.asarray(order, dtype=np.intp)


# ---------------------------------------------------------------------------- against the authors' fits
def _ranks_from_order(order: np.ndarray, n: int) -> np.ndarray:
    """1-based rank of every item from a best-first order of positions."""
    rank = np.zeros(n, dtype=int)
    rank[np.asarray(order)] = np.arange(1, len(order) + 1)
    return rank




def compare_static_rankings(fits: pd.DataFrame, matrix: Any, *, n_test: int = 10, seed: int = 42,
                            top: int = 10, splits: Any = None) -> pd.DataFrame:
    """Our implementation of the authors' static rules against the ranks in their released fits.

    For each split of ``fits`` the authors' own ``a`` and ``b`` are taken as given, the split's
    training rows come from the authors' split rule (:func:`authors_split`), the training
    abilities are MAP with Normal(0, 1) on all items (:func:`irtlib.map_ability`), and every
    static method's order is recomputed under the authors' rules (``protocol="authors"``):
    Random (:func:`shared_random_order`), Total Fisher, Marginal Fisher, b-quartile Marginal
    Fisher (interleaved), DISCO and, per budget, Anchor Points (fresh FasterPAM, seed 42).

    Parameters
    ----------
    fits : DataFrame
        The authors' fits file (``authors_fits/*_items.csv``): one row per (fold, item) with
        ``item_id``, ``a``, ``b``, the ``*_rank`` columns and ``anchor_B_<k>``.
    matrix : ResponseMatrix
        The benchmark's responses (every model, in file order); its items must include the fits'
        items, which are taken in the fits' order (the items kept by the authors' filter).
    n_test, seed : int
        The authors' split rule (10 test models, seed 42 for SimpleSafetyTests).
    top : int
        Size of the top-``k`` overlap reported for the ranked methods.
    splits : sequence of int, optional
        Folds to compare (default: every fold in ``fits``).

    Returns
    -------
    DataFrame, one row per (split, method[, k])
        Columns ``split``, ``method`` (``random``, ``total-fisher``, ``marginal-fisher``,
        ``marginal-fisher-bq``, ``disco``, ``anchor-points``), ``k`` (anchor points: the budget;
        else the ``top`` of the overlap), ``exact`` (our order, or our anchor set, equals theirs),
        ``exact_up_to_ties`` (the method's own key -- entropy, total information, summed SE,
        random position -- takes the same value at every rank of both orders, so the orders differ
        only within ties; anchor points: our medoids' k-medoids loss equals theirs to 1e-9),
        ``spearman`` (of our ranks against theirs; NaN for anchor points), ``overlap`` (share of
        their top ``k`` items in ours; anchor points: share of their anchors among ours),
        ``first_difference`` (1-based rank of the first disagreement, 0 if none; -1 for a differing
        anchor set) and, for anchor points, ``loss_ours`` and ``loss_theirs`` (summed distance of
        every item to its nearest medoid, on the authors' distance matrix).

    Notes
    -----
    Where the orders differ only within ties (DISCO: items with the same training safe rate have
    the same entropy), the authors' order is the one their pandas ``sort_values`` (an unstable
    quicksort) happened to produce; ours keeps ties in file order. Anchor sets differ where
    FasterPAM ends in another local optimum or among equal-loss medoid sets, which depends on the
    ``kmedoids`` version's random initialisation and on the last bits of the distances.
    """
    from irtlib.core.ability import map_ability
    from irtlib.selection.methods import REGISTRY, Training
    from irtlib.selection.static import correlation_distances

    need = {"fold", "item_id", "a", "b"}
    missing = need - set(fits.columns)
    if missing:
        raise InputError(f"the fits table lacks the column(s) {sorted(missing)}")
    ranked = {"random": "random_rank", "total-fisher": "total_fisher_rank", "marginal-fisher": "marginal_fisher_rank",
              "marginal-fisher-bq": "marginal_fisher_bquant_rank", "disco": "disco_rank"}
    anchor_cols = sorted((int(c.split("_")[-1]), c) for c in fits.columns if c.startswith("anchor_B_"))
    folds = sorted(fits["fold"].unique()) if splits is None else [int(s) for s in splits]
    rows = []
    for fold in folds:
        f = fits[fits["fold"] == fold]
        if f.empty:
            raise InputError(f"the fits table has no fold {fold}")
        items = f["item_id"].astype(str).tolist()
        x = matrix.subset(items=items).values
        n = len(items)
        train, _ = authors_split(x.shape[0], n_test, int(fold), seed=seed)
        a, b = f["a"].to_numpy(float), f["b"].to_numpy(float)
        x_train = x[train]
        theta = np.asarray(map_ability(x_train, a, b).theta)
        t = Training(a=a, b=b, theta=theta, values=x_train, bquartile_rule="interleave", anchor_rule="fresh",
                     seed=42)
        ours = {"random": shared_random_order(n, int(fold))}
        for m in ("total-fisher", "marginal-fisher", "marginal-fisher-bq", "disco"):
            ours[m] = REGISTRY[m].select(t, [n])[n].items
        keys = _tie_keys(t, x_train, n)
        for m, col in ranked.items():
            if col not in f.columns:
                continue
            theirs = np.argsort(f[col].to_numpy(int), kind="stable")
            mine = np.asarray(ours[m])
            diff = np.flatnonzero(mine != theirs)
            key = keys.get(m)
            ties = bool(diff.size == 0) if key is None else bool(np.array_equal(key[mine], key[theirs]))
            rows.append({"split": int(fold), "method": m, "k": int(top), "exact": bool(diff.size == 0),
                         "exact_up_to_ties": ties,
                         "spearman": float(spearman(_ranks_from_order(mine, n), f[col].to_numpy(float))),
                         "overlap": len(set(mine[:top]) & set(theirs[:top])) / min(top, n),
                         "first_difference": int(diff[0] + 1) if diff.size else 0})
        if anchor_cols:
            ks = [k for k, _ in anchor_cols]
            sets = REGISTRY["anchor-points"].select(t, ks)
            diss = correlation_distances(x_train)
            for k, col in anchor_cols:
                theirs = np.flatnonzero(f[col].to_numpy(int) == 1)
                mine = np.asarray(sets[k].items)
                loss_mine, loss_theirs = (float(diss[:, s].min(axis=1).sum()) if len(s) else np.nan
                                          for s in (mine, theirs))
                same = set(mine.tolist()) == set(theirs.tolist())
                rows.append({"split": int(fold), "method": "anchor-points", "k": k, "exact": same,
                             "exact_up_to_ties": same or abs(loss_mine - loss_theirs) <= 1e-9,
                             "spearman": np.nan,
                             "overlap": len(set(mine.tolist()) & set(theirs.tolist())) / max(len(theirs), 1),
                             "first_difference": 0 if same else -1, "loss_ours": loss_mine,
                             "loss_theirs": loss_theirs})
    return pd.DataFrame(rows, columns=["split", "method", "k", "exact", "exact_up_to_ties", "spearman", "overlap",
                                       "first_difference", "loss_ours", "loss_theirs"])


def _tie_keys(t, x_train: np.ndarray, n: int) -> dict:
    """Per ranked method, the value it sorts on (orders with equal keys at every rank differ only in ties)."""
    from irtlib.core.kernels import fisher_information

    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.clip(np.nanmean(x_train, axis=0), 1e-12, 1 - 1e-12)
        entropy = -p * np.log(p) - (1 - p) * np.log(1 - p)
    total = fisher_information(t.theta[:, None], t.a, t.b).sum(axis=0)
    return {"disco": entropy, "total-fisher": total}
