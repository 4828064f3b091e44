"""Item models of the adaptive-testing engine: what the selector, the estimator and the stopping rule ask of a bank.

The engine (:mod:`irtlib.selection.engine`) never writes an item response formula: it asks the
item model. An item model has ``n_items`` and ``dims`` (1 for a unidimensional model) and answers,
for every model being tested at once:

- ``information(theta)``: Fisher information of every item at each model's ability, shape
  ``(n_models, n_items)`` (the maximum-information selectors and the minimum-information rule);
- ``trace_information(theta, cov)``: ``tr(cov I_j(theta))``, the first-order gain in the log
  determinant of the posterior information from item ``j`` (the D-optimal selector);
- ``log_likelihood(j, x, theta)``: the log-probability of each model's response ``x`` to its item
  ``j`` at ``theta``, shape ``(n_models,)`` (the sequential probability ratio test);
- ``grid_log_likelihood(j, x, points)``: the same on a grid of abilities, ``(n_models, n_points)``
  (the grid estimators: EAP, the grid mode);
- ``ability_grid(prior_mean, prior_sd, n_points)``: the grid and the log prior on it;
- ``check_responses(x)``: refuse responses the model cannot have.

:class:`TwoPLItems` is the paper's 2PL (and the 3PL with lower asymptotes ``c``), with every
formula from :mod:`irtlib.core.kernels`; its parameters may differ per model (the protocol runs
the test models of several calibrations together). The graded response model
(:class:`irtlib.extended.grm.GradedItems`) and the multidimensional 2PL
(:class:`irtlib.extended.mirt.MirtItems`) implement the same methods with their own formulas.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from irtlib._typing import ArrayLike
from irtlib.core.kernels import fisher_information, log_likelihood, probability, probability_slope
from irtlib.core.quadrature import uniform_grid
from irtlib.errors import InputError

__all__ = ["ItemModel", "TwoPLItems", "as_item_model"]


class ItemModel(Protocol):
    """What the engine needs of an item response model (see the module docstring)."""

    n_items: int
    dims: int

    def information(self, theta: np.ndarray) -> np.ndarray:
        """Fisher information of every item at each model's ability, shape (n_models, n_items)."""

    def grid_log_likelihood(self, j: np.ndarray, x: np.ndarray, points: np.ndarray,
                            rows: np.ndarray | None = None) -> np.ndarray:
        """Log-likelihood of each model's response ``x`` to item ``j`` at every grid point."""

    def ability_grid(self, prior_mean: float, prior_sd: float, n_points: int) -> tuple[np.ndarray, np.ndarray]:
        """Grid points (``(n_points,)`` or ``(n_points, dims)``) and the log prior at each."""


class TwoPLItems:
    """The 2PL (with ``c``: the 3PL) as the engine's item model; formulas from :mod:`irtlib.core.kernels`.

    Parameters
    ----------
    a, b : array_like, shape (n_items,) or (n_models, n_items)
        Discriminations and difficulties, shared by every model or one row per model.
    c : array_like, shape of ``a``, optional
        Lower asymptotes in [0, 1) (3PL); None is the 2PL (the paper).

    Raises
    ------
    InputError
        Non-finite parameters, shapes that differ, asymptotes outside [0, 1).
    """

    dims = 1

    def __init__(self, a: ArrayLike, b: ArrayLike, c: ArrayLike | None = None):
        self.a, self.b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        if self.a.ndim not in (1, 2) or self.a.shape != self.b.shape:
            raise InputError(f"a and b must be arrays of one shape (n_items,) or (n_models, n_items); got "
                             f"{self.a.shape} and {self.b.shape}")
        if not (np.isfinite(self.a).all() and np.isfinite(self.b).all()):
            raise InputError("a and b must be finite")
        if c is not None:
            c = np.asarray(c, dtype=float)
            if c.shape != self.a.shape:
                raise InputError(f"c must have the shape of a {self.a.shape}, got {c.shape}")
            if not (np.isfinite(c).all() and (c >= 0).all() and (c < 1).all()):
                raise InputError("c (the lower asymptotes) must lie in [0, 1)")
        self.c = c
        self.n_items = self.a.shape[-1]
        self.per_model = self.a.ndim == 2

    def __repr__(self) -> str:
        kind = "3PL" if self.c is not None else "2PL"
        return f"TwoPLItems({kind}, {self.n_items} items{', per model' if self.per_model else ''})"

    # -- parameters --------------------------------------------------------------------------
    def rows(self, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``(a, b, c)`` of the given models (all: None), broadcastable against ``(len(rows), n_items)``."""
        if not self.per_model or rows is None:
            return self.a, self.b, self.c
        return self.a[rows], self.b[rows], None if self.c is None else self.c[rows]

    def at(self, j: np.ndarray, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``(a, b, c)`` of each model's item(s) ``j`` (-1 gives item 0's, to be masked).

        ``j`` has one row per model (``rows`` of them, default all), shape ``(n,)`` or ``(n, m)``.
        """
        jj = np.maximum(np.asarray(j), 0)
        if not self.per_model:
            return self.a[jj], self.b[jj], None if self.c is None else self.c[jj]
        r = np.arange(jj.shape[0]) if rows is None else np.asarray(rows)
        r = r[:, None] if jj.ndim == 2 else r
        return self.a[r, jj], self.b[r, jj], None if self.c is None else self.c[r, jj]

    # -- what the engine asks --------------------------------------------------------------
    def information(self, theta: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Fisher information (Birnbaum's for the 3PL) of every item at each model's theta, (n_models, n_items)."""
        a, b, c = self.rows(rows)
        return fisher_information(np.asarray(theta, dtype=float)[:, None], a, b, c)

    def trace_information(self, theta: np.ndarray, cov: np.ndarray) -> np.ndarray:
        """``cov I_j(theta)``: one dimension, so the information scaled by the posterior variance."""
        return self.information(theta) * np.asarray(cov, dtype=float).reshape(-1, 1)

    def log_likelihood(self, j: np.ndarray, x: np.ndarray, theta: ArrayLike) -> np.ndarray:
        """``log P(x | theta)`` of each model's response ``x`` to its item ``j`` (0 where ``j`` is -1)."""
        a, b, c = self.at(j)
        ok = (j >= 0) & ~np.isnan(x)
        ll = log_likelihood(np.where(ok, x, 0.0), theta, a, b, c)
        return np.where(ok, ll, 0.0)

    def grid_log_likelihood(self, j: np.ndarray, x: np.ndarray, points: np.ndarray,
                            rows: np.ndarray | None = None) -> np.ndarray:
        """Bernoulli log-likelihood of each model's response to its item ``j`` at every grid point.

        ``rows``: which models ``j`` and ``x`` belong to (default all), for per-model parameters.
        """
        a, b, c = self.at(j, rows)
        return log_likelihood(np.asarray(x, float)[:, None], points[None, :], a[:, None], b[:, None],
                              None if c is None else c[:, None])

    def ability_grid(self, prior_mean: float, prior_sd: float, n_points: int) -> tuple[np.ndarray, np.ndarray]:
        """The equally spaced grid over [-8, 8] of :func:`irtlib.core.quadrature.uniform_grid`."""
        return uniform_grid(n_points=n_points, prior_mean=prior_mean, prior_sd=prior_sd)

    def score_at(self, points: np.ndarray) -> np.ndarray:
        """The expected score on the bank, ``mean_j P_j(theta)``, at each grid point (shared parameters)."""
        return self.total_probability(points) / self.n_items

    def check_responses(self, x: np.ndarray) -> None:
        """Refuse a response other than 0, 1 or NaN (naming the first)."""
        bad = ~np.isnan(x) & (x != 0) & (x != 1)
        if bad.any():
            raise InputError(f"responses must be 0, 1 or NaN; found {x[bad][0]!r}")

    # -- the test characteristic curve (certification against a score) ----------------------
    def total_probability(self, theta: ArrayLike) -> np.ndarray:
        """``sum_j P_j(theta)`` over the bank (shared parameters), shape of ``theta``."""
        theta = np.asarray(theta, dtype=float)
        return probability(theta[..., None], self.a, self.b, self.c).sum(axis=-1)

    def total_slope_and_variance(self, theta: float) -> tuple[float, float]:
        """``sum_j dP_j / dtheta`` and ``sum_j P_j (1 - P_j)`` at ``theta`` (the curve's slope and spread)."""
        p = probability(float(theta), self.a, self.b, self.c)
        return float(probability_slope(float(theta), self.a, self.b, self.c).sum()), float((p * (1.0 - p)).sum())


def as_item_model(items: ItemModel | None = None, a: ArrayLike | None = None, b: ArrayLike | None = None,
                  c: ArrayLike | None = None) -> ItemModel:
    """An item model from either ``items`` or the 2PL/3PL parameters ``a``, ``b`` (and ``c``)."""
    if items is not None:
        if a is not None or b is not None or c is not None:
            raise InputError("give either items or a and b, not both")
        return items
    if a is None or b is None:
        raise InputError("give the item parameters a and b (or an item model, items=...)")
    return TwoPLItems(a, b, c)
