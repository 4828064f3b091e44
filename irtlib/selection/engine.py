"""The adaptive-testing engine: one loop over an item model, a selector, an estimator and a stopping rule.

In catsim's spirit, each stage is a small object with one job (:mod:`~irtlib.selection.items`,
:mod:`~irtlib.selection.selectors`, :mod:`~irtlib.selection.estimators`,
:mod:`~irtlib.selection.stopping` with :mod:`~irtlib.selection.certify`), and one class,
:class:`AdaptiveTest`, holds a test's state for many models at once and drives them, one step at
a time::

    status -> propose (selector, at the current ability) -> record the responses
           -> estimate (estimator) -> status ...

Two drivers run it: :func:`irtlib.selection.adaptive.run_adaptive` replays response matrices
(every step is one vectorised operation over all models: the paper's protocol), and
:class:`irtlib.bank.session.AdaptiveSession` asks one model, one item at a time (``irtlib
evaluate``). Given the same inputs they give the same items and estimates (tested).

The paper's methods are configurations (section "Adaptive selection (Algorithm 1)"):

=====================  ===================  ====================================
method                 selector             estimator
=====================  ===================  ====================================
Fluid Benchmarking     MaxInformation       MapEstimator
the authors' Fluid     MaxInformation       MleEstimator, from the training mean
Random                 RandomSelection      MeanScoreEstimator
Random IRT             RandomSelection      MapEstimator
=====================  ===================  ====================================
"""

from __future__ import annotations

import numpy as np

from irtlib._typing import ArrayLike, Seed
from irtlib.errors import InputError

from .certify import DECISIONS
from .estimators import Estimator, MapEstimator
from .items import ItemModel
from .selectors import MaxInformation, Selector, Streams
from .stopping import STOP_REASONS, StoppingRule

__all__ = ["AdaptiveTest", "STOP_REASONS", "DECISIONS"]


class AdaptiveTest:
    """The state of adaptive tests of ``n_models`` models on one item bank, advanced step by step.

    Parameters
    ----------
    items : ItemModel
        :class:`~irtlib.selection.items.TwoPLItems`, :class:`irtlib.extended.grm.GradedItems`, ...
    selector : Selector, default MaxInformation()
    estimator : Estimator, default MapEstimator()
    stopping : StoppingRule, optional
        Read by :meth:`status`; None: the driver decides when to stop (a fixed budget).
    n_models : int
    available : array_like of bool, shape (n_models, n_items), optional
        The items each model may be given (default: all).
    theta0 : float or array_like, shape (n_models,)
        The ability the first item is chosen at.
    seed : int, SeedSequence, Generator or None
        Seeds the selector's draws (random orders, randomesque, Sympson-Hetter).
    capacity : int, optional
        The estimator's initial room for items (default: the budget, else the bank's size; it
        grows when exceeded).

    Attributes
    ----------
    theta : ndarray or None
        The current ability, what the next item is chosen at ((n_models,) or (n_models, D)).
    value : ndarray, shape (n_models,)
        The current estimate (the ability, or the estimator's score).
    n_given : ndarray of int, shape (n_models,)
        Items answered so far.
    """

    def __init__(self, items: ItemModel, *, selector: Selector | None = None, estimator: Estimator | None = None,
                 stopping: StoppingRule | None = None, n_models: int = 1, available: ArrayLike | None = None,
                 theta0: ArrayLike = 0.0, seed: Seed | None = None, capacity: int | None = None):
        selector = MaxInformation() if selector is None else selector
        estimator = MapEstimator() if estimator is None else estimator
        if selector.adaptive and not estimator.provides_ability:
            raise InputError(f"{selector!r} needs an ability estimate; {estimator!r} gives none")
        if stopping is not None and not isinstance(stopping, StoppingRule):
            raise InputError("stopping must be a StoppingRule")
        if stopping is not None and stopping.min_information is not None and getattr(items, "dims", 1) != 1:
            raise InputError("the minimum-information rule needs a unidimensional item model")
        if stopping is not None and stopping.needs_se and not estimator.provides_ability:
            raise InputError(f"{estimator!r} gives no standard error: a target SE needs an ability estimator")
        self.items, self.stopping, self.n_models = items, stopping, int(n_models)
        avail = np.ones((self.n_models, items.n_items), dtype=bool) if available is None else \
            np.asarray(available, dtype=bool)
        if capacity is None:
            capacity = stopping.max_items if stopping is not None and stopping.max_items else items.n_items
        self.adaptive = selector.adaptive
        self.random = Streams(seed)
        self.selector = selector.begin(items, avail, self.random)
        self.estimator = estimator.begin(items, self.n_models, min(int(capacity), items.n_items), theta0)
        self.decision = None
        if stopping is not None and stopping.decision is not None:
            self.decision = stopping.decision.begin(items, self.n_models)
        self.theta = self.estimator.start()
        self.value = np.full(self.n_models, np.nan)
        self.n_given = np.zeros(self.n_models, dtype=int)

    # ------------------------------------------------------------------ one step
    def propose(self, active: np.ndarray | None = None) -> np.ndarray:
        """The next item of every ``active`` model (default all), -1 where it has none; marked used.

        Returns
        -------
        ndarray of int, shape (n_models,)
        """
        return self.selector.select(self.theta if self.adaptive else None, self.estimator, active)

    def record(self, j: ArrayLike, x: ArrayLike, *, estimate: bool = True) -> None:
        """Each model's response ``x`` (NaN: none) to its item ``j`` (-1: none); then re-estimate.

        ``estimate=False`` defers the estimate (a non-adaptive selector needs none until the
        driver records one; :meth:`update` makes it).
        """
        j = np.asarray(j, dtype=np.intp)
        x = np.where(j >= 0, np.asarray(x, dtype=float), np.nan)
        self.estimator.push(j, x)
        if self.decision is not None:
            self.decision.push(j, x)
        self.n_given += (j >= 0) & ~np.isnan(x)
        if estimate:
            self.update()

    def update(self) -> None:
        """Estimate from every response recorded so far."""
        value, ability = self.estimator.estimate()
        self.value = value
        if ability is not None:
            self.theta = ability

    def skip(self, rows: ArrayLike, j: ArrayLike) -> None:
        """The proposed items ``j`` of models ``rows`` were not given (unavailable): never proposed again."""
        skipped = getattr(self.selector, "skipped", None)
        if skipped is not None:
            skipped(np.asarray(rows, dtype=np.intp), np.asarray(j, dtype=np.intp))

    # ------------------------------------------------------------------ state
    @property
    def left(self) -> np.ndarray:
        """Items each model may still be given, shape (n_models,)."""
        return self.selector.unused.sum(axis=1)

    def standard_error(self) -> np.ndarray:
        """The ability's standard error (MAP) or posterior SD (EAP), shape (n_models,)."""
        return self.estimator.standard_error()

    def best_information(self) -> np.ndarray:
        """Fisher information of each model's most informative remaining item at its ability (-inf: none)."""
        info = self.items.information(self.theta)
        return np.where(self.selector.unused, info, -np.inf).max(axis=1)

    def decide(self, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(decision, p_above)`` per model (of ``rows``, default all): +1 pass, -1 fail, 0 undecided, ``P(above)``.

        Raises
        ------
        InputError
            The stopping rule has no decision rule.
        """
        if self.decision is None:
            raise InputError("this test has no decision rule (no cut)")
        return self.decision.evaluate(self.n_given, rows)

    def status(self, pending: ArrayLike | None = None, rows: np.ndarray | None = None) -> np.ndarray:
        """Why each model's test ends now (an index into :data:`STOP_REASONS`), or -1 while it goes on.

        A pure function of the state: a resumed test with a larger budget goes on. ``pending``
        (one item per model, -1 for none): items proposed but neither answered nor skipped yet,
        counted as still available (a session between proposing and recording). ``rows``: only
        these models (a batch skips the finished ones).
        """
        if pending is not None and (np.asarray(pending) >= 0).any():
            pending = np.asarray(pending, dtype=np.intp)
            rows = np.flatnonzero(pending >= 0)
            unused = self.selector.unused
            unused[rows, pending[rows]] = True
            try:
                return self.status()
            finally:
                unused[rows, pending[rows]] = False
        s = self.stopping
        pick = slice(None) if rows is None else rows
        # only whether a model has an item left is read (``left == 0``): 1 or 0 from ``any``, not the counts
        # (a sum over every model's row of the bank at every step)
        left = self.selector.unused.any(axis=1)[pick].astype(np.int64)
        if s is None:
            return np.where(left == 0, STOP_REASONS.index("exhausted"), -1)
        se = self.standard_error()[pick] if s.target_se is not None else None
        best = self.best_information()[pick] if s.min_information is not None else None
        decided = self.decision.decisions(self.n_given, rows) if self.decision is not None else None
        return s.reasons(n_items=self.n_given[pick], left=left, se=se, best_information=best, decided=decided)
