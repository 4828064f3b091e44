"""The registry of selection methods: one table that every consumer reads.

Each of the paper's eight methods has one :class:`Method` entry: its identifier (as the command
line and the result tables spell it), its display name (as the figures label it), its kind
(``"adaptive"``: items chosen one at a time by the adaptive loop of :mod:`irtlib.selection.adaptive`;
``"static"``: a fixed subset chosen from training data by :mod:`irtlib.selection.static`), its scorer
(how a test model's responses on the chosen items become a score: ``"map"`` ability,
``"mean"`` safety score or anchor points' ``"weighted"`` safety score) and, for methods that
can write a fixed subset, the function that selects the items.

Every selection function has one call signature::

    select(training: Training, ks: Sequence[int]) -> dict[int, Subset]

:class:`Training` is what a method may look at (training responses, item parameters, training
abilities, item safe rates, a seed); the result holds a :class:`~irtlib.selection.static.Subset` per
requested budget. Nested methods compute their order once, to the largest budget, and slice it.
The agreement protocol (:mod:`irtlib.protocol.agreement`), ``irtlib subset`` (:func:`irtlib.bank.build.select_subset`),
the command line's defaults and the figures' labels all read this table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import numpy as np

from irtlib.errors import InputError

from . import static as subsets
from .adaptive import MapEstimator, MaxInformation, MeanScoreEstimator, RandomSelection
from .static import Subset

__all__ = ["Method", "Training", "REGISTRY", "METHOD_IDS", "get", "ids", "adaptive_ids", "static_ids",
           "subset_ids", "irt_ids", "check_methods"]


@dataclass(frozen=True)
class Training:
    """What a static method may use to choose its items (never a test model's responses).

    Attributes
    ----------
    a, b : ndarray, shape (n_items,)
        Item parameters calibrated on the training models.
    theta : ndarray, shape (n_train,)
        The training models' abilities (the paper: MAP on all items).
    values : ndarray, shape (n_train, n_items), optional
        Training responses (1 safe, 0 unsafe, NaN missing). Anchor points needs them.
    safe_rates : ndarray, shape (n_items,), optional
        Item safe rates; default the column means of ``values``. DISCO needs one or the other.
    seed : int or numpy.random.SeedSequence
        For random choices (anchor points' initialisation, Random's subset).
    prior_information : float
        Marginal Fisher's SE (see :func:`irtlib.selection.static.marginal_fisher`; 0 is the paper's).
    anchor_solver : {"auto", "fasterpam", "alternate"}
        K-medoids solver of anchor points (:func:`irtlib.selection.static.anchor_points_path`).
    bquartile_rule : {"constrained", "interleave"}
        b-quartile Marginal Fisher as the text says (a greedy constrained to the quartiles,
        :func:`irtlib.selection.static.marginal_fisher_bq`) or as the authors' code runs it (the
        unconstrained greedy order interleaved, :func:`irtlib.selection.static.marginal_fisher_bq_interleaved`).
    anchor_rule : {"path", "fresh"}
        Anchor points warm-started across budgets (:func:`irtlib.selection.static.anchor_points_path`,
        seeded by ``seed``) or the authors' fresh FasterPAM per budget with seed ``anchor_seed``
        (:func:`irtlib.selection.static.anchor_points_fresh`).
    anchor_seed : int
        The authors' FasterPAM seed (42).
    """

    a: np.ndarray
    b: np.ndarray
    theta: np.ndarray
    values: np.ndarray | None = None
    safe_rates: np.ndarray | None = None
    seed: Any = 0
    prior_information: float = 0.0
    anchor_solver: str = "auto"
    bquartile_rule: str = "constrained"
    anchor_rule: str = "path"
    anchor_seed: int = 42

    @cached_property
    def information(self) -> np.ndarray:
        """Every item's information at every training ability (:func:`irtlib.selection.static.information_matrix`).

        Total Fisher, Marginal Fisher and its b-quartile rule all read it; a split computes it once.
        """
        return subsets.information_matrix(self.a, self.b, self.theta)

    @cached_property
    def marginal_fisher_order(self) -> subsets.MarginalFisherOrder:
        """The unconstrained Marginal Fisher order of these items, shared by the methods that read it.

        Marginal Fisher and the authors' interleaved b-quartile rule both read a prefix of it, so a
        split computes one greedy run, as far as the longer of the two needs.
        """
        return subsets.MarginalFisherOrder(self.a, self.b, self.theta, prior_information=self.prior_information,
                                           info=self.information)

    @property
    def n_items(self) -> int:
        """Number of items to choose from."""
        return int(np.shape(self.a)[0])

    def rates(self) -> np.ndarray:
        """The items' safe rates (from ``safe_rates``, else from ``values``)."""
        if self.safe_rates is not None:
            return np.asarray(self.safe_rates, dtype=float)
        if self.values is None:
            raise InputError("this method needs the training responses or the items' safe rates")
        return np.nanmean(np.asarray(self.values, dtype=float), axis=0)


#: The one call signature of every selection function.
SelectFunction = Callable[[Training, Sequence[int]], dict[int, Subset]]


@dataclass(frozen=True)
class Method:
    """One selection method of the paper.

    Attributes
    ----------
    id : str
        Identifier used by the command line and in result tables (``"marginal-fisher-bq"``).
    name : str
        Display name (``"Marginal Fisher (b-quartiles)"``).
    kind : {"adaptive", "static"}
        Adaptive methods run the loop of :func:`irtlib.selection.adaptive.run_adaptive` with ``selector``
        and ``estimator``; static methods choose a fixed subset with ``select``.
    scorer : {"map", "mean", "weighted"}
        How a model's responses on the chosen items become its score
        (:func:`irtlib.selection.static.score_subset`): MAP ability, safety score, anchor points'
        weighted safety score.
    select : callable, optional
        ``select(training, ks) -> {k: Subset}``; the methods ``irtlib subset`` offers are those
        that have one (the static methods and Random).
    needs_responses : bool
        ``select`` needs the training responses, not just item parameters and safe rates.
    selector, estimator : callable, optional
        Adaptive methods: factories of the item selector and the ability estimator.
    random_items : bool
        Adaptive methods whose items are drawn at random; the protocol gives them the split's
        shared random stream (a paired comparison of Random and Random IRT).
    """

    id: str
    name: str
    kind: Literal["adaptive", "static"]
    scorer: Literal["map", "mean", "weighted"]
    select: SelectFunction | None = None
    needs_responses: bool = False
    selector: Callable[[], Any] | None = None
    estimator: Callable[[], Any] | None = None
    random_items: bool = False
    notes: str = field(default="", compare=False)


# ---------------------------------------------------------------------------- selection functions
def _nested(order: Callable[[Training, int], Subset]) -> SelectFunction:
    """A selection function from a nested method: one run to the largest budget, sliced."""

    def select(training: Training, ks: Sequence[int]) -> dict[int, Subset]:
        ks = sorted({int(k) for k in ks})
        full = order(training, ks[-1]).items
        return {k: Subset(full[:k]) for k in ks}

    select.__doc__ = order.__doc__
    select.__name__ = order.__name__
    return select


@_nested
def total_fisher(t: Training, k: int) -> Subset:
    """Total Fisher (:func:`irtlib.selection.static.total_fisher`)."""
    return subsets.total_fisher(t.a, t.b, t.theta, k, info=t.information)


@_nested
def marginal_fisher(t: Training, k: int) -> Subset:
    """Marginal Fisher (:func:`irtlib.selection.static.marginal_fisher`)."""
    return Subset(t.marginal_fisher_order.first(k))


@_nested
def marginal_fisher_bq(t: Training, k: int) -> Subset:
    """Marginal Fisher over b-quartiles (:func:`~irtlib.selection.static.marginal_fisher_bq`, or interleaved)."""
    if t.bquartile_rule == "interleave":
        return subsets.marginal_fisher_bq_interleaved(t.a, t.b, t.theta, k, prior_information=t.prior_information,
                                                      order=t.marginal_fisher_order)
    return subsets.marginal_fisher_bq(t.a, t.b, t.theta, k, prior_information=t.prior_information,
                                      info=t.information)


@_nested
def disco(t: Training, k: int) -> Subset:
    """DISCO (:func:`irtlib.selection.static.disco`), from the training responses or, without them, the safe rates.

    DISCO only looks at the items' safe rates: a one-row matrix of the rates has exactly those
    column means.
    """
    values = t.values if t.values is not None else t.rates()[None, :]
    return subsets.disco(values, k)


def anchor_points(t: Training, ks: Sequence[int]) -> dict[int, Subset]:
    """Anchor points (:func:`irtlib.selection.static.anchor_points_path`): not nested, one K-medoids run per budget."""
    if t.values is None:
        raise InputError("anchor points needs the training responses")
    if t.anchor_rule == "fresh":
        return subsets.anchor_points_fresh(t.values, ks, seed=t.anchor_seed)
    return subsets.anchor_points_path(t.values, ks, seed=t.seed, solver=t.anchor_solver)


def random_subset(t: Training, ks: Sequence[int]) -> dict[int, Subset]:
    """Random: ``k`` items drawn uniformly without replacement, a fresh draw from ``seed`` per budget."""
    return {int(k): Subset(np.random.default_rng(t.seed).choice(t.n_items, size=int(k), replace=False))
            for k in ks}


# ---------------------------------------------------------------------------- the table
#: Every method, in the order results are reported.
REGISTRY: Mapping[str, Method] = {m.id: m for m in (
    Method("fluid", "Fluid Benchmarking", "adaptive", "map", selector=MaxInformation, estimator=MapEstimator),
    Method("random", "Random", "adaptive", "mean", select=random_subset, selector=RandomSelection,
           estimator=MeanScoreEstimator, random_items=True),
    # exact Newton passes (order 0) suit estimates at a few budgets better than Taylor moments
    Method("random-irt", "Random IRT", "adaptive", "map", selector=RandomSelection,
           estimator=lambda: MapEstimator(order=0), random_items=True),
    Method("total-fisher", "Total Fisher", "static", "map", select=total_fisher),
    Method("marginal-fisher", "Marginal Fisher", "static", "map", select=marginal_fisher),
    Method("marginal-fisher-bq", "Marginal Fisher (b-quartiles)", "static", "map", select=marginal_fisher_bq),
    Method("anchor-points", "Anchor Points", "static", "weighted", select=anchor_points, needs_responses=True),
    Method("disco", "DISCO", "static", "mean", select=disco),
)}

#: Identifiers of every method, in reporting order.
METHOD_IDS: tuple[str, ...] = tuple(REGISTRY)


def get(method: str) -> Method:
    """The registry entry of ``method``, or an :class:`~irtlib.errors.InputError` listing the choices."""
    try:
        return REGISTRY[method]
    except (KeyError, TypeError):
        raise InputError(f"unknown method {method!r}; choose from {', '.join(METHOD_IDS)}") from None


def ids(*, kind: str | None = None) -> tuple[str, ...]:
    """Method identifiers in reporting order, optionally of one ``kind``."""
    return tuple(m.id for m in REGISTRY.values() if kind is None or m.kind == kind)


def adaptive_ids() -> tuple[str, ...]:
    """The adaptive-loop methods."""
    return ids(kind="adaptive")


def static_ids() -> tuple[str, ...]:
    """The static subset methods."""
    return ids(kind="static")


def subset_ids() -> tuple[str, ...]:
    """Methods that can write a fixed subset (``irtlib subset``): the static ones, then Random."""
    return static_ids() + tuple(m.id for m in REGISTRY.values() if m.kind != "static" and m.select is not None)


def irt_ids() -> tuple[str, ...]:
    """Methods that score a test model by its MAP ability."""
    return tuple(m.id for m in REGISTRY.values() if m.scorer == "map")


def check_methods(methods: Sequence[str], *, allowed: Sequence[str] | None = None) -> tuple[str, ...]:
    """``methods`` as a tuple without repeats, or an :class:`~irtlib.errors.InputError` naming the unknown one.

    ``allowed`` defaults to every method; ``None`` for ``methods`` means all of ``allowed``.
    """
    allowed = ids() if allowed is None else tuple(allowed)
    if methods is None:
        return allowed
    if isinstance(methods, str):
        methods = [methods]
    methods = tuple(dict.fromkeys(methods))
    if not methods:
        raise InputError(f"no method given; choose from {', '.join(allowed)}")
    unknown = [m for m in methods if m not in allowed]
    if unknown:
        shown = ", ".join(repr(m)[:60] for m in unknown[:3])
        raise InputError(f"unknown method{'s' * (len(unknown) > 1)} {shown}; choose from {', '.join(allowed)}")
    return methods
