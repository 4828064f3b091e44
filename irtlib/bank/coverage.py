"""The cross-fitted check of adaptive-test score intervals that :func:`irtlib.calibrate_bank` runs.

The calibration models are split into folds; each fold's models are given adaptive tests on
item parameters refitted without them, and the errors of their predicted full-benchmark scores,
in units of the 2PL interval's half-width, give the factor by which the bank's intervals are
widened (:meth:`irtlib.ItemBank.interval_inflation`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np

from irtlib.calibration.joint_map import Calibration, fit_items, fit_map, fit_map_after_items
from irtlib.core.kernels import fisher_information
from irtlib.core.responses import ResponseMatrix

from . import interval_sums, replay_kernel
from .intervals import Z95, score_interval

__all__ = ["CHECKPOINTS", "IntervalCheckWarning", "MAX_REPLAYED", "MIN_MODELS_INTERVAL_CHECK", "REFIT_ITEM_STEPS",
           "interval_check", "refit_start"]

#: Fewest calibration models for the cross-fitted interval check of :func:`calibrate_bank`.
MIN_MODELS_INTERVAL_CHECK = 10


class IntervalCheckWarning(UserWarning):
    """The cross-fitted interval check could not run: the bank's intervals are the plain 2PL ones."""


#: Test lengths at which :func:`calibrate_bank` checks the adaptive test's score intervals.
CHECKPOINTS = (1, 2, 3, 5, 10, 20, 30, 50, 100, 200)


#: Radii of the replays' candidate bounds (:class:`irtlib.selection.MaxInformation`): the choices are the
#: exact argmax whatever the radii; these wider ones redo fewer full passes over the bank on a test of
#: 200 items (1,000 x 5,000 2PL data: 0.8 of the default's CPU time, the same items and abilities).
REPLAY_RADII = (0.01, 0.03, 0.1, 0.3)


def _adaptive_replay(x, a, b, checkpoints, *, prior_sd=1.0):
    """Adaptive tests of many models at once, replayed from their response rows.

    Fluid Benchmarking (maximum information, MAP with a Normal(0, 1) prior, unobserved items
    unavailable), the rule :class:`irtlib.AdaptiveSession` follows: :mod:`irtlib.bank.replay_kernel`, or
    :func:`irtlib.selection.adaptive.run_adaptive` where the kernel cannot be built (:func:`_replay`).
    Yields ``(k, theta, se, given, known_sum)`` after ``k`` items for every ``k`` in ``checkpoints`` up to
    the longest possible test: ``given`` (n_models, k) the items given (-1: none),
    the known items of :func:`score_interval`.
    """
    n_models = x.shape[0]
    kmax = min(max(checkpoints), int((~np.isnan(x)).sum(axis=1).max()))
    items, estimate = _replay(x, a, b, kmax)
    rows = np.arange(n_models)[:, None]
    for k in checkpoints:
        if k > kmax:
            break
        theta = estimate[:, k - 1]
        given = items[:, :k]
        valid = given >= 0
        j = np.where(valid, given, 0)
        info = np.where(valid, fisher_information(theta[:, None], a[j], b[j]), 0.0).sum(axis=1)
        se = 1.0 / np.sqrt(info + 1.0 / prior_sd ** 2)
        known_sum = np.where(valid, x[rows, j], 0.0).sum(axis=1)
        yield k, theta, se, given, known_sum


def _replay(x: np.ndarray, a: np.ndarray, b: np.ndarray, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """The items given and the estimates after each step: :mod:`irtlib.bank.replay_kernel` where it loads.

    Elsewhere (no compiler, ``IRTLIB_REPLAY_KERNEL=0``) :func:`irtlib.selection.adaptive.run_adaptive`: the same
    items, estimates within about 1e-9 of the kernel's modes.
    """
    lib = replay_kernel.load()
    if lib is not None:
        return replay_kernel.fluid_replay(lib, x, a, b, budget=budget)
    from irtlib.selection.adaptive import run_adaptive
    from irtlib.selection.selectors import MaxInformation

    traj = run_adaptive(x, a, b, budget=budget, selector=MaxInformation(radii=REPLAY_RADII))
    return traj.items, traj.estimate


#: Most calibration models whose adaptive tests the check replays: beyond it, a seeded sample of this many
#: (the factors are 95th percentiles; 200 values place one to within a few percent). Every model of the
#: paper's benchmarks (at most 82) is replayed.
MAX_REPLAYED = 200

#: Stopping tolerance of the folds' refits (largest step in theta, log a, b). The refits are inexact Newton
#: (``fit_map_after_items(forcing=True)``): each step's conjugate gradients stop at a residual of the last
#: step's size, so a refit lands within about ``REFIT_TOL`` of its mode, not to the last digit; the check's
#: factors move with such changes by less than between fold assignments (benchmarks/RESULTS.md, ``chk2``).
REFIT_TOL = 1e-4


#: Item-only Newton steps (abilities held at the bank's) that move a refit's start before its joint fit.
REFIT_ITEM_STEPS = 6


def refit_start(x_train: np.ndarray, theta: np.ndarray, a: np.ndarray, b: np.ndarray) -> dict:
    """Where a fold's refit starts: the bank's fit, its items moved by :data:`REFIT_ITEM_STEPS` item-only steps.

    Leaving models out moves the items (log a by up to 0.35 on 2PL data at 1,000 x 5,000, by 2 on coin
    flips), hardly the abilities (0.02 to 0.06). An item-only step (:func:`irtlib.calibration.joint_map.fit_items`,
    the training models' abilities held at the bank's) is one pass over the matrix and a 2 x 2 solve an
    item, no conjugate gradients; a few of them take most of that way, so the joint refit that follows needs
    fewer of its costlier iterations (2PL 1,000 x 5,000: 7 -> 3; coin flips 1,000 x 20,000 with six steps
    instead of two: 14 -> 10). It still finds the same mode, to within
    :data:`REFIT_TOL`: only the start moves. :func:`interval_check` takes these steps and the joint refit
    on one set of row blocks (:func:`irtlib.calibration.joint_map.fit_map_after_items`, the same numbers).

    Parameters
    ----------
    x_train : ndarray, shape (n_train, n_items)
        The training models' responses on the bank's items.
    theta : ndarray, shape (n_train,)
        Their abilities in the bank's fit.
    a, b : ndarray, shape (n_items,)
        The bank's items.

    Returns
    -------
    dict
        ``theta``, ``a`` and ``b``: a ``start`` for :func:`irtlib.calibration.joint_map.fit_map`.
    """
    a, b, _ = fit_items(x_train, theta, start={"a": a, "b": b}, max_iter=REFIT_ITEM_STEPS)
    return {"theta": theta, "a": a, "b": b}


def interval_check(matrix: ResponseMatrix, kept_items: Sequence[str], filtered_sum: float, *, folds: int = 5,
                    seed: int = 0, checkpoints: Sequence[int] = CHECKPOINTS, fit: Calibration | None = None,
                    progress: Callable[[int, int], None] | None = None,
                    refit_progress: Callable[[int, float], None] | None = None) -> dict | None:
    """Cross-fitted check of the adaptive test's score intervals on the calibration models.

    The calibration models are split into ``folds`` groups; for each group the bank's items are
    refitted (MAP engine) on the other models, and the group's models are given adaptive tests
    from their own responses. At each test length ``k`` the errors of the predicted
    full-benchmark score, in units of the 2PL interval's half-width / 1.96 (``z``), give the factor
    ``quantile(|z|, 0.95) / 1.96`` by which the 2PL interval must be widened to cover 95% of the
    held-out models (safety data are not exactly 2PL: several latent dimensions, local
    dependence, item-parameter noise). ``sqrt(mean z^2)`` is stored too, for reference.

    Parameters
    ----------
    matrix : ResponseMatrix
        All items (the full benchmark's score is the target).
    kept_items : sequence of str
        The bank's items (after the variance filter).
    filtered_sum : float
        Sum of the calibration safe rates of the items the filter left out.
    folds, seed, checkpoints
        Folds, the seed of the models' assignment to them, and the test lengths checked.
    fit : Calibration, optional
        The bank's MAP fit on the kept items: each fold's refit starts from it (its items, moved by
        :func:`refit_start`'s item-only steps, and the abilities of the fold's training models), which
        finds the same mode in fewer iterations.
    progress : callable(done, total), optional
        Called as each of the ``2 refits`` stages ends (each refit, then the replay of its left-out models).
    refit_progress : callable(iteration, step), optional
        Called after each iteration of a refit (:func:`irtlib.calibration.joint_map.fit_map`'s ``progress``).

    Notes
    -----
    With more than :data:`MAX_REPLAYED` calibration models, only a seeded sample of that many is
    replayed, and only they need leaving out: they are split into as few groups as keep every refit's
    training set at least ``(folds - 1) / folds`` of the models, the size of a fold's training set
    (one group from ``folds x MAX_REPLAYED`` models on), and each refit leaves out one group and keeps
    every other model. Each replayed model is still held out of the item parameters its test uses, on
    a training set no smaller than a fold's, at the cost of one refit instead of ``folds`` on a
    leaderboard. Up to :data:`MAX_REPLAYED` models the groups are the folds. Each group's models are
    replayed in one adaptive run (the groups on two threads; each run in C, :mod:`irtlib.bank.replay_kernel`),
    and the score intervals of its checkpoints are computed on two threads (:mod:`irtlib.bank.interval_sums`,
    or :func:`score_interval` without it); the result does not depend on the threads.
    """
    n_models = matrix.shape[0]
    if n_models < MIN_MODELS_INTERVAL_CHECK:
        return None
    truth = matrix.safety_scores().to_numpy()
    cols = matrix.items.get_indexer(list(kept_items))
    if (cols < 0).any():
        matrix.subset(items=kept_items)          # raises, naming the unknown items
    every_item = cols.size == matrix.shape[1] and bool((cols == np.arange(cols.size)).all())
    values = matrix.values

    def rows_of(rows: np.ndarray) -> np.ndarray:
        """The kept items' responses of some models: one copy, without a matrix and its checks."""
        return values[rows] if every_item else values[np.ix_(rows, cols)]

    n_full = matrix.shape[1]
    rng = np.random.default_rng(seed)
    fold_of = rng.permutation(np.arange(n_models) % folds)
    # the models whose adaptive tests are replayed: all of them up to MAX_REPLAYED, else a seeded sample
    replayed = np.ones(n_models, dtype=bool)
    refits = folds
    if n_models > MAX_REPLAYED:
        replayed[:] = False
        replayed[np.random.default_rng([seed, 1]).choice(n_models, MAX_REPLAYED, replace=False)] = True
        # the replayed models in as few left-out groups as keep each training set at least a fold's
        refits = min(folds, -(-folds * MAX_REPLAYED // n_models))
        fold_of = np.full(n_models, -1)
        fold_of[replayed] = np.random.default_rng([seed, 2]).permutation(np.arange(MAX_REPLAYED) % refits)
    if fit is not None:            # the bank's fit on the kept models and items, every fold's start
        theta_fit, a_fit, b_fit = (fit.theta.reindex(matrix.models).to_numpy(), fit.a.reindex(kept_items).to_numpy(),
                                   fit.b.reindex(kept_items).to_numpy())
    fits = []
    for f in range(refits):
        rows = fold_of != f
        x_train = rows_of(np.flatnonzero(rows))  # the training models' rows: fitted as an array
        if not (~np.isnan(x_train)).any(axis=0).all():  # an item no training model saw: cannot refit it in this fold
            return None
        if fit is None:
            _, a, b, _ = fit_map(x_train, tol=REFIT_TOL, progress=refit_progress)
        else:                      # refit_start's item steps, then the joint refit, on one set of blocks
            _, a, b, _ = fit_map_after_items(x_train, theta_fit[rows], a_fit, b_fit, item_steps=REFIT_ITEM_STEPS,
                                             tol=REFIT_TOL, forcing=True, progress=refit_progress)
        fits.append((a, b))
        if progress is not None:
            progress(f + 1, 2 * refits)

    def replay(f: int) -> tuple[list, np.ndarray]:
        """Group ``f``'s left-out models, all in one adaptive run: each checkpoint's estimates, and their scores."""
        mine = np.flatnonzero((fold_of == f) & replayed)
        a, b = fits[f]
        return list(_adaptive_replay(rows_of(mine), a, b, checkpoints)), truth[mine]

    def errors(f: int, target: np.ndarray, point: tuple) -> tuple[int, list]:
        """The score errors of one checkpoint of group ``f``, in units of the interval's half-width / 1.96."""
        k, theta, se, given, known_sum = point
        a, b = fits[f]
        lib = interval_sums.load()    # the same intervals to about 1e-15 relative, with a vector exp
        interval = score_interval if lib is None else partial(interval_sums.interval, lib)
        score, lo, hi = interval(a, b, theta, se, known_items=given, known_sum=known_sum,
                                 filtered_sum=filtered_sum, n_full=n_full)
        err = target - score
        half = np.where(err < 0, score - lo, hi - score)
        return k, (err / np.maximum(half / Z95, 1e-12)).tolist()

    # the groups' adaptive runs on two threads, then each checkpoint's intervals (the kernel and numpy free the GIL)
    z = {k: [] for k in checkpoints}
    with ThreadPoolExecutor(2) as pool:
        tests = [pool.submit(replay, f) for f in range(refits)]
        for f, test in enumerate(tests):
            points, target = test.result()
            for k, values in pool.map(partial(errors, f, target), points):
                z[k].extend(values)
            if progress is not None:
                progress(refits + f + 1, 2 * refits)
    n_replayed = int(replayed.sum())
    ks = [k for k in checkpoints if len(z[k]) >= n_replayed // 2]
    rms = [float(np.sqrt(np.mean(np.square(z[k])))) for k in ks]
    q95 = [float(np.quantile(np.abs(z[k]), 0.95)) / Z95 for k in ks]
    return {"method": f"{folds}-fold cross-fitted adaptive replay on the calibration models (MAP engine); "
                      "inflation = 95th percentile of |error| / (2PL half-width), at least 1",
            "k": ks, "inflation": [round(max(1.0, f), 4) for f in q95],
            "rms_z": [round(f, 4) for f in rms], "n_models": int(n_models), "n_replayed": n_replayed,
            "refits": refits, "seed": seed}
