"""Fit diagnostics the paper reports: item-level RMSE, spread of discrimination, ceilings.

Paper, sections "Reported results" (fit quality, appendix E; ceiling separation; Figure 3).
The standard psychometric checks the paper does not run (item fit, Yen's Q3, residual
dimensionality) live in :mod:`irtlib.fit.checks`; the agreement ceiling, a protocol run, in
:mod:`irtlib.protocol.ceiling`.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

import numpy as np
import pandas as pd

from irtlib._typing import ArrayLike
from irtlib.calibration.joint_map import Calibration
from irtlib.core.kernels import logit_z, sigmoid
from irtlib.core.responses import ResponseMatrix
from irtlib.errors import InputError

__all__ = ["item_rmse", "item_rates", "coefficient_of_variation", "cv_interval", "CVDraws", "ceiling_counts",
           "CEILING"]

#: The safety score above which the paper calls a benchmark saturated.
CEILING = 0.95


def item_rates(matrix: ResponseMatrix, calibration: Calibration, *,
               expected_sums: np.ndarray | None = None) -> pd.DataFrame:
    """Observed against model-implied safe rate of every item.

    Parameters
    ----------
    matrix : ResponseMatrix
        The responses the calibration was fitted to (or any matrix over the same models and a
        subset of its items).
    calibration : Calibration
    expected_sums : ndarray, shape (n_items,), optional
        Each item's sum of ``P(theta_m, a_j, b_j)`` over the models that saw it, when already made (the
        standard errors' pass over the cells gives them: ``item_standard_errors(...).attrs["expected_sums"]``,
        :func:`irtlib.calibration.standard_errors.item_standard_errors`); default: computed here.

    Returns
    -------
    DataFrame, indexed by item
        ``observed``: share of safe responses among the models that saw the item;
        ``expected``: mean of ``P(theta_m, a_j, b_j)`` over the same models;
        ``residual``: observed minus expected.
    """
    theta = calibration.theta.reindex(matrix.models).to_numpy()
    if np.isnan(theta).any():
        missing = list(matrix.models[np.isnan(theta)][:3])
        raise InputError(f"calibration has no theta for model(s) {missing}")
    a = calibration.a.reindex(matrix.items).to_numpy()
    b = calibration.b.reindex(matrix.items).to_numpy()
    if np.isnan(a).any():
        missing = list(matrix.items[np.isnan(a)][:3])
        raise InputError(f"calibration has no parameters for item(s) {missing}")
    if expected_sums is None:
        expected_sums = _expected_sums(matrix.values, theta, a, b)
    elif np.shape(expected_sums) != (len(a),):
        raise InputError(f"expected_sums of shape {np.shape(expected_sums)} for {len(a)} items")
    if matrix.n_observations == matrix.values.size:      # nothing missing: plain means (the same sums as nanmean's)
        obs, exp = np.mean(matrix.values, axis=0), expected_sums / len(theta)
    else:
        seen = np.count_nonzero(matrix.observed, axis=0)
        obs, exp = np.nanmean(matrix.values, axis=0), expected_sums / seen
    return pd.DataFrame({"observed": obs, "expected": exp, "residual": obs - exp}, index=matrix.items)


#: Rows of the matrix whose probabilities :func:`item_rates` forms at a time.
RATE_ROWS = 64


def _expected_sums(values: np.ndarray, theta: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Each item's sum of ``P(theta_m, a_j, b_j)`` over the models that saw it, :data:`RATE_ROWS` rows at a time.

    ``np.sum(P, axis=0)`` (``np.nansum`` with NaN where unobserved) bit for bit: each row chunk's
    probabilities are made in a work array (no ``n_models x n_items`` temporary) and summed down its rows
    after the running sum is added to its first row, numpy's order for a column sum.
    """
    n, k = values.shape
    total = np.zeros(k)
    rows = max(1, min(RATE_ROWS, n))
    work = np.empty((rows, k))
    for r0 in range(0, n, rows):
        p = work[:min(n, r0 + rows) - r0]
        sigmoid(logit_z(theta[r0:r0 + rows, None], a, b, out=p), out=p)
        missing = np.isnan(values[r0:r0 + rows])
        if missing.any():
            p[missing] = 0.0
        if r0:
            np.add(total, p[0], out=p[0])
        np.add.reduce(p, axis=0, out=total)
    return total


def item_rmse(matrix: ResponseMatrix, calibration: Calibration) -> float:
    """Root mean squared difference between observed and model-implied item safe rates.

    Appendix E of the paper: 0.008 (Anthropic Red Team) to 0.038 (WMDP-Bio).
    """
    return float(np.sqrt(np.mean(item_rates(matrix, calibration)["residual"] ** 2)))


def coefficient_of_variation(a: ArrayLike, *, ddof: int = 1) -> float:
    """Coefficient of variation ``SD(a) / mean(a)`` of item discriminations (Figure 3).

    The paper does not say which SD it used; we use the sample SD (``ddof=1``). On 100 items
    (SimpleSafety, the smallest bank) the two differ by 0.5%.
    """
    a = np.asarray(a, dtype=float)
    return float(np.std(a, ddof=ddof) / np.mean(a))


#: Draws of :func:`cv_interval` made at a time (each block is ``CV_BLOCK x n_items`` float64).
CV_BLOCK = 250


class CVDraws:
    """The standard normal draws of :func:`cv_interval`, made on a thread of their own ahead of their use.

    ``np.random.default_rng(seed).standard_normal`` in blocks of :data:`CV_BLOCK` rows of ``n_items``, the
    stream one thread makes, so the draws (and the interval) do not depend on when they are made. The
    draws do not depend on the items' standard errors, so a caller can start them before those are known
    (:func:`irtlib.bank.build.calibrate_bank` starts them as the standard errors' passes begin) and pass the
    object to :func:`cv_interval`. At most ``ahead`` blocks wait to be used (memory: ``ahead x CV_BLOCK x
    n_items x 8`` bytes); :meth:`close` stops the thread and drops them (a :func:`cv_interval` that used
    them all has no need to).

    Parameters
    ----------
    n_items, draws, seed : int
        As :func:`cv_interval`'s ``a.size``, ``draws`` and ``seed``.
    ahead : int
        Blocks drawn before they are asked for.
    """

    def __init__(self, n_items: int, *, draws: int = 2000, seed: int = 0, ahead: int = 1):
        self.key = (int(n_items), int(draws), int(seed))
        self.sizes = [min(CV_BLOCK, draws - start) for start in range(0, draws, CV_BLOCK)]
        self._ready: queue.Queue = queue.Queue(maxsize=max(1, int(ahead)))
        self._stop = threading.Event()
        self._used = False
        self._thread = threading.Thread(target=self._draw, name="cv-draws", daemon=True)
        self._thread.start()

    def _draw(self) -> None:
        rng = np.random.default_rng(self.key[2])
        for size in self.sizes:
            try:
                block = rng.standard_normal((size, self.key[0]))   # releases the GIL
            except BaseException as error:                       # handed to the reader, raised there
                block = error
            while not self._stop.is_set():
                try:
                    self._ready.put(block, timeout=0.1)
                    break
                except queue.Full:
                    continue
            if self._stop.is_set() or isinstance(block, BaseException):
                return

    def blocks(self) -> Iterator[np.ndarray]:
        """The blocks in the stream's order (once: a second call is an error)."""
        if self._used:
            raise RuntimeError("CVDraws: the draws have been used")
        self._used = True
        for _ in self.sizes:
            block = self._ready.get()
            if isinstance(block, BaseException):
                raise block
            yield block

    def close(self) -> None:
        """Stop drawing and drop the blocks not used."""
        self._stop.set()
        while True:
            try:
                self._ready.get_nowait()
            except queue.Empty:
                break
        self._thread.join()


def cv_interval(a: ArrayLike, se_a: ArrayLike, *, level: float = 0.95, draws: int = 2000, seed: int = 0,
                ddof: int = 1, drawn: CVDraws | None = None) -> tuple[float, float]:
    """Interval of the CV of ``a`` for the uncertainty of the items' ``a`` (Figure 3 with error bars).

    Each draw replaces every ``log a_j`` by ``Normal(log a_j, se_a_j / a_j)`` (the items' standard
    errors, :func:`irtlib.calibration.standard_errors.item_standard_errors`, on the scale on which the
    posterior is close to Normal) and recomputes the CV. Estimation noise adds spread to the ``a``, so
    the CV of the estimates is biased upward by about what a draw adds again: the interval is the
    basic (reverse-percentile) bootstrap interval ``[2 cv - q_hi, 2 cv - q_lo]`` of the draws'
    quantiles, which carries that correction, floored at 0.

    Parameters
    ----------
    a, se_a : array_like, shape (n_items,)
        Discriminations and their standard errors.
    level : float
        Coverage of the interval.
    draws, seed : int
        Monte Carlo draws (in blocks of :data:`CV_BLOCK`) and their seed.
    ddof : int
        As :func:`coefficient_of_variation`.
    drawn : CVDraws, optional
        The draws, started earlier with the same ``n_items``, ``draws`` and ``seed`` (the same interval,
        sooner); by default they are made here, the next block on another thread while this block's CVs
        are computed.

    Returns
    -------
    (low, high) : tuple of float
    """
    a, se = np.asarray(a, dtype=float), np.asarray(se_a, dtype=float)
    log_a, sd = np.log(a), se / a
    own = drawn is None
    if own:
        drawn = CVDraws(a.size, draws=draws, seed=seed)
    elif drawn.key != (a.size, draws, seed):
        raise ValueError(f"cv_interval: draws made for (n_items, draws, seed) {drawn.key}, asked for "
                         f"{(a.size, draws, seed)}")
    try:
        cvs = []
        for z in drawn.blocks():
            z *= sd                                  # exp(log a + sd z), in place
            z += log_a
            cvs.append(_cv_rows(np.exp(z, out=z), ddof))
    finally:
        if own:
            drawn.close()
    cvs = np.concatenate(cvs) if cvs else np.empty(0)
    cv = coefficient_of_variation(a, ddof=ddof)
    lo, hi = np.quantile(cvs, [(1 - level) / 2, (1 + level) / 2])
    return max(0.0, float(2 * cv - hi)), float(2 * cv - lo)


def _cv_rows(a: np.ndarray, ddof: int) -> np.ndarray:
    """``np.std(a, axis=1, ddof=ddof) / np.mean(a, axis=1)`` with one sum of each row, overwriting ``a``.

    The same operations in the same order as numpy's ``std`` and ``mean`` (each sums the rows once, ``std``
    then sums the squared deviations), so the same numbers, bit for bit.
    """
    n = a.shape[1]
    mean = np.add.reduce(a, axis=1, keepdims=True)
    mean /= n
    a -= mean
    np.multiply(a, a, out=a)
    var = np.add.reduce(a, axis=1)
    var /= max(n - ddof, 0)
    return np.sqrt(var) / mean[:, 0]


def ceiling_counts(scores: ArrayLike, *, ceiling: float = CEILING) -> dict:
    """How many models score above the ceiling.

    Parameters
    ----------
    scores : Series or array_like
        Safety scores, one per model.
    ceiling : float

    Returns
    -------
    dict
        ``n_models``, ``above`` (strictly above ``ceiling``), ``at_or_above`` and ``perfect``
        (score exactly 1).
    """
    s = np.asarray(scores, dtype=float)
    return {"n_models": int(s.size), "above": int((s > ceiling).sum()),
            "at_or_above": int((s >= ceiling).sum()), "perfect": int((s == 1.0).sum())}
