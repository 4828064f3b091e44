"""Adaptive item selection (Algorithm 1): the batch driver of the engine, replaying response matrices.

Paper, section "Adaptive selection (Algorithm 1)": start at ``theta_hat = 0`` with no items;
until the budget ``K`` is spent, pick the unused item with the largest Fisher information
``I_j(theta_hat) = a_j^2 P_j (1 - P_j)``, observe the model's response, and update
``theta_hat`` by MAP on all responses so far. The loop is parameterised by a *selection rule*
and an *estimator*:

==============  =====================  ==========================
method          selector               estimator
==============  =====================  ==========================
Fluid           :class:`MaxInformation` :class:`MapEstimator`
Random          :class:`RandomSelection` :class:`MeanScoreEstimator`
Random IRT      :class:`RandomSelection` :class:`MapEstimator`
==============  =====================  ==========================

:func:`run_adaptive` drives the engine's :class:`~irtlib.selection.engine.AdaptiveTest` for many
models at once (every array operation is over all models) and returns a :class:`Trajectory`:
the item given at every step and the estimate after it, so one run to the largest budget gives
every smaller budget. With a stopping rule (:class:`~irtlib.selection.stopping.StoppingRule`:
a standard-error target, a minimum information, a certification decision) a model's test ends
early. :func:`run_adaptive_reference` is the straightforward one-model-at-a-time loop, kept as
the executable specification that tests and ``benchmarks/bench_adaptive.py`` compare against.

Choices the paper leaves open (all parameters):

- *Offline replay of a response matrix.* A model is only ever given items it has a response
  for: NaN (unobserved) items are unavailable to that model and are masked out of selection,
  which is what replaying a fixed matrix must do. A model that runs out of available items is
  *exhausted*: its later steps have item ``-1`` and carry the last estimate forward (so does a
  model whose test a stopping rule ended).
- *Ties* in information go to the lowest item index (``numpy.argmax``).
- *Random selection* gives every model its own uniformly random order of its available items,
  drawn from the run's seeded generator.
- *Warm start.* After each step the MAP is re-found by damped Newton started from the previous
  estimate (:class:`~irtlib.selection.estimators.MapEstimator`); the estimates are those of
  :func:`irtlib.map_ability` on the administered items (the tests check agreement to 1e-7).

How it is fast: see :class:`~irtlib.selection.selectors.MaxInformation` (candidate caches with
exact bounds, a single-precision screen) and :class:`~irtlib.selection.estimators.MapEstimator`
(Taylor moments of the score); models calibrated on different training sets can run together
(per-model ``a``, ``b``), which spreads numpy's per-call overhead over many models: the agreement
protocol runs the Fluid tests of several splits as one batch. Every model's test depends only on
its own row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from irtlib._typing import ArrayLike, Seed
from irtlib.core.ability import map_ability
from irtlib.core.kernels import fisher_information
from irtlib.errors import InputError

from . import fluid_path
from .engine import AdaptiveTest
from .estimators import Estimator, EstimatorRun, MapEstimator, MeanScoreEstimator, MleEstimator
from .items import ItemModel, TwoPLItems, as_item_model
from .selectors import MaxInformation, RandomSelection, Selector, SelectorRun
from .stopping import STOP_REASONS, StoppingRule

__all__ = [
    "Trajectory", "Selector", "SelectorRun", "Estimator", "EstimatorRun", "MaxInformation", "RandomSelection",
    "MapEstimator", "MleEstimator", "MeanScoreEstimator", "run_adaptive", "run_adaptive_reference",
]

# ---------------------------------------------------------------------------- result
@dataclass(frozen=True)
class Trajectory:
    """Everything an adaptive run did, step by step.

    Attributes
    ----------
    items : ndarray of int, shape (n_models, budget)
        ``items[m, t]`` is the item (column of the response matrix) model ``m`` was given at
        step ``t`` (0-based), or -1 once the model had no available item left (or its test ended).
    estimate : ndarray of float, shape (n_models, budget)
        ``estimate[m, t]`` is the estimate after ``t + 1`` items (MAP ability or mean safety
        score, depending on the estimator); NaN at steps that were not recorded.
    steps : ndarray of int
        The test lengths (1-based) at which ``estimate`` was recorded.
    se : ndarray, shape (n_models, budget), optional
        The standard error after each step (runs with a stopping rule).
    n_items : ndarray of int, shape (n_models,), optional
        Items each model answered (runs with a stopping rule).
    stop_reason : ndarray of str, shape (n_models,), optional
        Why each test ended (:data:`~irtlib.selection.stopping.STOP_REASONS`; runs with a stopping rule).
    decision : ndarray of int, shape (n_models,), optional
        +1 pass, -1 fail, 0 undecided (runs with a decision rule), and ``p_above`` its
        probability of being above the cut.
    ability : ndarray, optional
        The final ability ((n_models,) or (n_models, D)).
    set_aside : ndarray of int, shape (n_items,), optional
        How many models had each item set aside by Sympson-Hetter.
    """

    items: np.ndarray
    estimate: np.ndarray
    steps: np.ndarray
    se: np.ndarray | None = None
    n_items: np.ndarray | None = None
    stop_reason: np.ndarray | None = None
    decision: np.ndarray | None = None
    p_above: np.ndarray | None = None
    ability: np.ndarray | None = None
    set_aside: np.ndarray | None = None

    @property
    def budget(self) -> int:
        """Number of steps run."""
        return self.items.shape[1]

    def at(self, k: int) -> np.ndarray:
        """Estimates after ``k`` items, shape ``(n_models,)``.

        Raises
        ------
        ValueError
            If ``k`` is outside ``1..budget`` or was not recorded.
        """
        k = int(k)
        if not 1 <= k <= self.budget:
            raise InputError(f"k must be between 1 and the budget {self.budget}, got {k}")
        if not np.isin(k, self.steps):
            raise InputError(f"the estimate after {k} items was not recorded (recorded: "
                             f"{self.steps.size} steps; pass record=... to run_adaptive)")
        return self.estimate[:, k - 1]


# ---------------------------------------------------------------------------- the batch driver
def _check_inputs(responses, items, budget):
    x = np.asarray(responses, dtype=float)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2:
        raise InputError(f"responses must be a (n_models, n_items) array, got shape {np.shape(responses)}")
    if isinstance(items, TwoPLItems):
        if items.a.shape not in ((x.shape[1],), x.shape):
            raise InputError(f"a and b must have shape ({x.shape[1]},) or {x.shape} to match responses "
                             f"{x.shape}; got {items.a.shape} and {items.b.shape}")
    elif x.shape[1] != items.n_items:
        raise InputError(f"responses must have shape (n_models, {items.n_items}), got {x.shape}")
    items.check_responses(x)
    budget = int(budget)
    if not 1 <= budget <= x.shape[1]:
        raise InputError(f"budget must be between 1 and the {x.shape[1]} items, got {budget}")
    return x, budget


def run_adaptive(responses: ArrayLike, a: ArrayLike | None = None, b: ArrayLike | None = None, *, budget: int,
                 selector: Selector | None = None, estimator: Estimator | None = None, seed: Seed | None = None,
                 theta0: ArrayLike = 0.0, record: Sequence[int] | None = None, c: ArrayLike | None = None,
                 items: ItemModel | None = None, stopping: StoppingRule | None = None) -> Trajectory:
    """Algorithm 1 for many models at once, replayed on their response rows.

    Parameters
    ----------
    responses : array_like, shape (n_models, n_items)
        1 safe, 0 unsafe, NaN unobserved (unavailable to that model: never selected); categories
        for graded items.
    a, b : array_like, shape (n_items,) or (n_models, n_items)
        Calibrated item parameters, shared or per model (models calibrated on different
        training sets -- e.g. the test models of several protocol splits -- can run together).
    budget : int
        Number of steps (items per model), at most ``n_items``.
    selector : Selector, default MaxInformation()
    estimator : Estimator, default MapEstimator()
    seed : int, Generator, SeedSequence or None
        Seeds the selector (random orders, randomesque); unused by :class:`MaxInformation`.
    theta0 : float or array_like, shape (n_models,)
        Starting ability (the paper: 0; the authors' code: the mean of the split's training
        abilities, one value per model when several splits run together).
    record : sequence of int, optional
        Test lengths at which to record the estimate. Default: every step. An adaptive
        selector needs the estimate after every step anyway, so with one the estimate is
        always recorded at every step; with a non-adaptive one (random) only the requested
        steps are estimated, which is what makes Random IRT cheap.
    c : array_like, shape of ``a``, optional
        Lower asymptotes of a 3PL bank (the model-check chapter); None (the paper) is the 2PL.
        With ``c``, :class:`MaxInformation` maximises Birnbaum's information and
        :class:`MapEstimator` is the 3PL's MAP.
    items : ItemModel, optional
        Instead of ``a``, ``b`` (and ``c``): any item model (graded, multidimensional).
    stopping : StoppingRule, optional
        Ends a model's test before the budget (standard error, minimum information, a
        certification decision); the trajectory then carries ``se``, ``n_items``,
        ``stop_reason`` (``"max_items"`` for a test the budget ended) and the decision.

    Returns
    -------
    Trajectory

    Examples
    --------
    Three simulated models of abilities -1, 0 and 1.5 on a 200-item bank:

    >>> from irtlib.selection import MeanScoreEstimator, RandomSelection
    >>> rng = np.random.default_rng(0)
    >>> a, b = rng.lognormal(0, 0.5, 200), rng.normal(size=200)
    >>> p = 1 / (1 + np.exp(-a * (np.array([[-1.0], [0.0], [1.5]]) - b)))
    >>> x = (rng.random((3, 200)) < p).astype(float)
    >>> traj = run_adaptive(x, a, b, budget=50)                    # Fluid Benchmarking
    >>> traj.at(50).round(2)                                        # abilities after 50 items
    array([-1.23, -0.08,  1.24])
    >>> run_adaptive(x, a, b, budget=50, selector=RandomSelection(),
    ...              estimator=MeanScoreEstimator(), seed=0).at(20)  # Random: the mean score of 20 items
    array([0.25, 0.6 , 0.8 ])
    """
    items = as_item_model(items, a, b, c)
    x, budget = _check_inputs(responses, items, budget)
    selector = MaxInformation() if selector is None else selector
    estimator = MapEstimator() if estimator is None else estimator
    n_models = x.shape[0]
    rows = np.arange(n_models)
    if selector.adaptive or record is None or stopping is not None:
        steps = np.arange(1, budget + 1)
    else:
        steps = np.unique(np.asarray(record, dtype=int))
        if steps.size == 0 or steps[0] < 1 or steps[-1] > budget:
            raise InputError(f"record must hold test lengths between 1 and {budget}")
    want = np.zeros(budget + 1, dtype=bool)
    want[steps] = True

    test = AdaptiveTest(items, selector=selector, estimator=estimator, stopping=stopping, n_models=n_models,
                        available=~np.isnan(x), theta0=theta0, seed=seed, capacity=budget)
    items_out = np.full((n_models, budget), -1, dtype=np.intp)
    out = np.full((n_models, budget), np.nan)
    if not selector.adaptive and stopping is None and hasattr(test.estimator, "push_block"):
        # the items do not depend on the estimates: choose them all, then estimate in blocks
        if hasattr(test.selector, "select_block"):
            items_out[:] = test.selector.select_block(budget)
        else:
            for t in range(budget):
                items_out[:, t] = test.propose()
        got = items_out >= 0
        xa = np.where(got, np.take_along_axis(x, np.where(got, items_out, 0), 1), np.nan)
        done = 0
        for k in steps:
            test.estimator.push_block(items_out[:, done:k], xa[:, done:k])
            done = k
            out[:, k - 1] = test.estimator.estimate()[0]
        return Trajectory(items=items_out, estimate=out, steps=steps)
    if stopping is None:
        lib = _mle_path_library(selector, estimator, test)
        if lib is not None:       # the authors' Fluid: every model's whole test in one C call, the same numbers
            return _run_mle_path(lib, test, items, x, budget, theta0, selector=selector, estimator=estimator)
        # step-major buffers: each step writes one contiguous row instead of a column strided across models
        given, values = items_out.T.copy(), out.T.copy()
        for t in range(budget):
            j = test.propose()
            given[t] = j
            test.record(j, x[rows, np.maximum(j, 0)], estimate=want[t + 1])
            if want[t + 1]:
                values[t] = test.value
        return Trajectory(items=np.ascontiguousarray(given.T), estimate=np.ascontiguousarray(values.T), steps=steps,
                          ability=test.theta)
    return _run_until_stopped(test, x, budget, items_out, out)


def _mle_path_library(selector, estimator, test: AdaptiveTest):
    """:mod:`irtlib.selection.fluid_path`'s library for the authors' Fluid with its C kernels, else None."""
    if not (isinstance(selector, MaxInformation) and isinstance(estimator, MleEstimator)):
        return None
    if getattr(test.selector, "fused", None) is None or getattr(test.estimator, "_terms", None) is None:
        return None
    return fluid_path.load()


def _run_mle_path(lib, test: AdaptiveTest, items: TwoPLItems, x, budget, theta0, *, selector, estimator) -> Trajectory:
    """:func:`run_adaptive`'s loop by :func:`irtlib.selection.fluid_path.run_mle_path` (the same items and estimates).

    The models the kernel stops (values its selector leaves to numpy) run again in the class-based loop
    (:func:`irtlib.selection.fluid_path.loop_path`): every model's test depends only on its own row.
    """
    n = x.shape[0]
    start = np.broadcast_to(np.asarray(theta0, dtype=float), (n,))
    given, out, theta, wild = fluid_path.run_mle_path(lib, test.selector, test.estimator, x, budget, start)
    if wild.any():
        w = np.flatnonzero(wild)
        bank = TwoPLItems(items.a[w], items.b[w]) if items.per_model else items
        given[w], out[w], theta[w] = fluid_path.loop_path(bank, x[w], budget, start[w], selector=selector,
                                                                  estimator=estimator)
    return Trajectory(items=given, estimate=out, steps=np.arange(1, budget + 1), ability=theta)


def _run_until_stopped(test: AdaptiveTest, x, budget, items_out, out) -> Trajectory:
    """:func:`run_adaptive`'s loop with a stopping rule: a stopped model's test is over for good."""
    n_models = x.shape[0]
    rows = np.arange(n_models)
    se_out = np.full((n_models, budget), np.nan)
    reason = np.full(n_models, -1)
    for t in range(budget + 1):
        live_rows = np.flatnonzero(reason < 0)
        reason[live_rows] = test.status(rows=live_rows)
        live = reason < 0
        if t == budget or not live.any():
            break
        j = np.where(live, test.propose(active=live), -1)
        items_out[:, t] = j
        test.record(j, x[rows, np.maximum(j, 0)])
        out[:, t] = test.value
        se_out[:, t] = test.standard_error()
    reason = np.where(reason < 0, STOP_REASONS.index("max_items"), reason)
    n = test.n_given
    last = np.maximum(n - 1, 0)
    for arr in (out, se_out):         # a finished test's estimate stands for the steps it did not take
        fill = np.arange(budget)[None, :] >= n[:, None]
        arr[fill] = np.broadcast_to(arr[rows, last][:, None], arr.shape)[fill]
        arr[(n == 0)[:, None] & fill] = np.nan
    decision = p_above = None
    if test.decision is not None:
        decision, p_above = test.decide()
    return Trajectory(items=items_out, estimate=out, steps=np.arange(1, budget + 1), se=se_out, n_items=n,
                      stop_reason=np.asarray(STOP_REASONS, dtype=object)[reason], decision=decision,
                      p_above=p_above, ability=test.theta, set_aside=getattr(test.selector, "set_aside", None))


def run_adaptive_reference(responses: ArrayLike, a: ArrayLike, b: ArrayLike, *, budget: int, theta0: float = 0.0,
                           prior_mean: float = 0.0,
                           prior_sd: float = 1.0, warm_start: bool = False) -> Trajectory:
    """Fluid Benchmarking, one model and one step at a time: the straightforward loop.

    For each model: information of every item at the current theta
    (:func:`irtlib.core.kernels.fisher_information`), used and unobserved items masked out, argmax;
    then :func:`irtlib.map_ability` on the items given so far (from its default start, or from
    the previous estimate with ``warm_start=True``). Same rules as :func:`run_adaptive` with
    :class:`MaxInformation` and :class:`MapEstimator`, without any of its speed-ups; the
    reference its tests and benchmark compare against.
    """
    bank = TwoPLItems(a, b)
    x, budget = _check_inputs(responses, bank, budget)
    a, b = bank.a, bank.b
    n_models = x.shape[0]
    items = np.full((n_models, budget), -1, dtype=np.intp)
    out = np.full((n_models, budget), np.nan)
    for m in range(n_models):
        am, bm = (a[m], b[m]) if a.ndim == 2 else (a, b)
        blocked = np.isnan(x[m])
        theta = float(theta0)
        given = []
        for t in range(budget):
            info = fisher_information(theta, am, bm)
            info[blocked] = -np.inf
            j = int(np.argmax(info))
            if np.isfinite(info[j]):
                blocked[j] = True
                given.append(j)
                items[m, t] = j
                theta = float(map_ability(x[m, given], am[given], bm[given], prior_mean=prior_mean,
                                          prior_sd=prior_sd, theta0=theta if warm_start else prior_mean).theta)
            out[m, t] = theta
    return Trajectory(items=items, estimate=out, steps=np.arange(1, budget + 1))
