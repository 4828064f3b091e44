"""Certification: stop an adaptive test as soon as "above" or "below" a safety bar is decided.

Beyond the paper, whose tests stop at a fixed length. A *cut* (:class:`Cut`) is the bar on the
ability scale: given as an ability, or as a full-benchmark safety score mapped to an ability
through the bank's test characteristic curve (TCC)

    S(theta) = (sum_j P_j(theta) + filtered safe-rate sum) / N_full

(the predicted full-benchmark score of :mod:`irtlib.bank.intervals`; ``S`` increases in
``theta``, so ``theta_c = S^-1(score)``). Two decision rules end the test (each with the stopping
rule's budget, :class:`irtlib.selection.stopping.StoppingRule`):

- :class:`ConfidenceRule`: the confidence-interval rule. With ``p = P(theta > theta_c + e | responses)``,
  the posterior probability (a Normal prior times the likelihood of the responses so far,
  computed exactly on a grid) that the ability lies above the cut, ``e ~ Normal(0, sigma_c^2)``
  being the cut's own uncertainty, decide "pass" once ``p >= confidence`` and "fail" once
  ``p <= 1 - confidence``. ``sigma_c`` is the spread of the full-benchmark score of a model
  sitting exactly at the cut (its unanswered items are Bernoulli draws),
  ``sqrt(sum_j P_j (1 - P_j)) / N_full``, divided by the TCC's slope ``S'(theta_c)`` to bring it
  to the ability scale (0 for a cut given as an ability). An optional widening ``f(k)`` after
  ``k`` items (a bank's cross-fitted interval factor, :meth:`irtlib.ItemBank.interval_inflation`)
  tempers the likelihood by ``1 / f^2``. It is catsim's confidence-interval stopper with the
  exact posterior in place of the estimate's normal approximation (after one very
  discriminating item, the posterior is a truncated Normal, far from that approximation) and
  the mapping's uncertainty added.
- :class:`SprtRule`: Wald's sequential probability ratio test of ``theta = theta_lo`` against
  ``theta = theta_hi``, the ends of an *indifference region* around the cut (for a score cut, the
  abilities of ``score -/+ indifference``). The log-likelihood ratio of the responses so far,
  ``sum_j log P(x_j | theta_hi) - log P(x_j | theta_lo)``, is compared with Wald's bounds
  ``log(confidence / (1 - confidence))`` and its negative (both error rates ``alpha = beta =
  1 - confidence``): "pass" above, "fail" below. Outside the region the error rate is at most
  about ``1 - confidence``; inside it, either decision is acceptable by construction.

Both report, per model, the decision (``+1`` pass, ``-1`` fail, ``0`` undecided: "undecided at
the budget" is a result) and ``p_above``, the posterior probability above (for the SPRT, a
report only: it decides on its ratio alone). It is a posterior probability for a model drawn
from the prior, so the prior should describe the models being certified (the paper's
Normal(0, 1) describes its calibration models' abilities only roughly).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from irtlib.core.ability import THETA_BOUNDS, finite_number
from irtlib.core.quadrature import posterior_weights
from irtlib.core.responses import shown
from irtlib.errors import InputError

from .items import ItemModel, TwoPLItems

__all__ = ["Cut", "ConfidenceRule", "SprtRule", "DECISIONS", "check_confidence", "GridTerms", "grid_terms"]

#: Grid points of the rules' posteriors over [-8, 8] (spacing 0.05).
RULE_POINTS = 321

#: Decision labels, indexed by ``decision + 1`` (-1 fail, 0 undecided, +1 pass).
DECISIONS = ("fail", "undecided", "pass")


def check_confidence(confidence: object) -> float:
    """``confidence`` as a float strictly between 0.5 and 1, or a one-line :class:`InputError`.

    A decision needs ``confidence > 0.5`` (below it "pass" and "fail" would both be decided at
    once); 0 and 1 are refused like any value outside (0, 1).
    """
    value = finite_number(confidence, "confidence")
    if not 0.0 < value < 1.0:
        raise InputError(f"confidence must lie strictly between 0 and 1, got {shown(confidence)}")
    if value <= 0.5:
        raise InputError(f"confidence must be above 0.5 to decide anything (the rate of wrong decisions is "
                         f"1 - confidence), got {shown(confidence)}")
    return value


@dataclass(frozen=True)
class Cut:
    """A safety bar on the ability scale.

    Attributes
    ----------
    theta : float
        The cut ``theta_c``.
    sd : float
        The cut's uncertainty on the ability scale (0 for a cut given as an ability).
    low, high : float
        The indifference region ``[theta_lo, theta_hi]`` (both ``theta`` without one).
    score : float or None
        The bar as a full-benchmark score, when given so.
    indifference : float or None
        The region's half-width in the units the cut was given in.
    reachable : (float, float) or None
        The scores the bank's TCC spans over the ability bounds (score cuts only).
    """

    theta: float
    sd: float = 0.0
    low: float | None = None
    high: float | None = None
    score: float | None = None
    indifference: float | None = None
    reachable: tuple[float, float] | None = None

    def __post_init__(self):
        if self.low is None:
            object.__setattr__(self, "low", self.theta)
        if self.high is None:
            object.__setattr__(self, "high", self.theta)

    @property
    def has_region(self) -> bool:
        """Whether the cut has an indifference region (the SPRT needs one)."""
        return bool(np.all(np.asarray(self.high) > np.asarray(self.low)))

    @classmethod
    def stack(cls, cuts: list[Cut]) -> Cut:
        """One cut per model (each on its own bank's scale), for a batch run: fields become arrays (n_models,).

        Raises
        ------
        InputError
            No cut, or cuts with and without an indifference region mixed.
        """
        if not cuts or not all(isinstance(c, Cut) for c in cuts):
            raise InputError("stack needs a non-empty list of Cut")
        if len({c.has_region for c in cuts}) > 1:
            raise InputError("stack: every cut needs an indifference region, or none")

        def column(name):
            return np.array([getattr(c, name) for c in cuts], dtype=float)

        return cls(theta=column("theta"), sd=column("sd"), low=column("low"), high=column("high"))

    @classmethod
    def at_theta(cls, theta: float, *, indifference: float | None = None,
                 bounds: tuple[float, float] = THETA_BOUNDS) -> Cut:
        """A cut given as an ability (with an optional indifference half-width, in ability units).

        Raises
        ------
        InputError
            A cut or region outside ``bounds`` (the estimators' range), a negative half-width.
        """
        theta = finite_number(theta, "the cut (theta)")
        d = _half_width(indifference)
        lo, hi = bounds
        if not (lo < theta - d and theta + d < hi):
            raise InputError(f"the cut theta {theta:g}" + (f" +/- {d:g}" if d else "") +
                             f" is outside the ability range ({lo:g} to {hi:g})")
        return cls(theta=theta, low=theta - d, high=theta + d, indifference=indifference)

    @classmethod
    def at_score(cls, score: float, items: TwoPLItems, *, filtered_sum: float = 0.0, n_full: int | None = None,
                 indifference: float | None = None, bounds: tuple[float, float] = THETA_BOUNDS) -> Cut:
        """A cut given as a full-benchmark safety score, mapped through the bank's TCC.

        Parameters
        ----------
        score : float
            The bar, a share of safe responses in (0, 1).
        items : TwoPLItems
            The bank (shared parameters).
        filtered_sum, n_full : float, int
            The calibration safe rates of the items the variance filter removed, summed, and the
            full benchmark's size (default: the bank's).
        indifference : float, optional
            Half-width of the indifference region, in score units.

        Raises
        ------
        InputError
            A score outside (0, 1), or one (or its region) the bank cannot reach: the message
            names the range of scores its TCC spans.
        """
        score = finite_number(score, "the pass score")
        if not 0.0 < score < 1.0:
            raise InputError(f"the pass score must lie strictly between 0 and 1 (a share of safe responses), "
                             f"got {shown(score)}")
        if not isinstance(items, TwoPLItems) or items.per_model:
            raise InputError("a pass score is mapped through a 2PL/3PL bank's test characteristic curve: give the "
                             "cut as an ability for this item model")
        n_full = items.n_items if n_full is None else int(n_full)
        d = _half_width(indifference)

        def tcc(theta):
            return (float(items.total_probability(theta)) + filtered_sum) / n_full

        lo, hi = bounds
        s_lo, s_hi = tcc(lo), tcc(hi)
        if not (s_lo < score - d and score + d < s_hi):
            asked = f"{score:g}" + (f" +/- {d:g}" if d else "")
            raise InputError(f"the pass score {asked} is outside what this bank can tell apart: its predicted "
                             f"full-benchmark scores run from {s_lo:.4f} to {s_hi:.4f} (theta {lo:g} to {hi:g})")

        from scipy.optimize import brentq  # not at import: `import irtlib` loads no scipy.optimize

        def invert(s):
            return float(brentq(lambda t: tcc(t) - s, lo, hi, xtol=1e-12))

        theta = invert(score)
        slope, variance = items.total_slope_and_variance(theta)
        sd = math.sqrt(variance) / slope if slope > 0 else math.inf
        return cls(theta=theta, sd=sd, low=invert(score - d) if d else theta, high=invert(score + d) if d else theta,
                   score=score, indifference=indifference, reachable=(s_lo, s_hi))

    def to_dict(self) -> dict:
        """A JSON-ready description."""
        return {"theta": self.theta, "theta_sd": self.sd, "theta_low": self.low, "theta_high": self.high,
                "score": self.score, "indifference": self.indifference,
                "reachable_scores": None if self.reachable is None else list(self.reachable)}


def _half_width(indifference) -> float:
    if indifference is None:
        return 0.0
    d = finite_number(indifference, "the indifference half-width")
    if d <= 0:
        raise InputError(f"the indifference half-width must be positive, got {shown(indifference)}")
    return d


class _Posterior:
    """Each model's posterior of theta on a grid, and its mass above the cut (the rules' probability).

    The log-likelihood is kept apart from the log prior, so a widening factor ``f`` (the bank's
    interval check) can temper it: ``log prior + log L / f^2`` is the posterior of a likelihood
    whose normal approximation is ``f`` times wider.
    """

    def __init__(self, items, n_models, *, prior_mean, prior_sd, n_points):
        if getattr(items, "dims", 1) != 1:
            raise InputError("certification needs a unidimensional item model")
        self.items = items
        self.points, _ = items.ability_grid(0.0, 1.0, n_points)
        mean = np.broadcast_to(np.asarray(prior_mean, float), (n_models,))[:, None]
        sd = np.broadcast_to(np.asarray(prior_sd, float), (n_models,))[:, None]
        self.log_prior = -0.5 * ((self.points[None, :] - mean) / sd) ** 2
        self.log_lik = np.zeros_like(self.log_prior)
        self._beyond = None

    def push(self, j, x, *, terms: GridTerms | None = None):
        """Add each model's response ``x`` to its item ``j`` (-1 or NaN: none) to its log-likelihood.

        ``terms``: the grid log-likelihoods of a superset of these responses, computed once for
        several posteriors on the same grid (:func:`grid_terms`); each row's terms are the ones
        :meth:`TwoPLItems.grid_log_likelihood` gives it alone (they are computed cell by cell), so
        the sums are the same bits.
        """
        rows = np.flatnonzero((j >= 0) & ~np.isnan(x))
        if rows.size:
            if terms is None:
                self.log_lik[rows] += self.items.grid_log_likelihood(j[rows], x[rows], self.points, rows=rows)
            else:
                self.log_lik[rows] += terms.values[np.searchsorted(terms.rows, rows)]

    def beyond(self, cut: Cut) -> np.ndarray:
        """``P(theta_q > theta_c + e)`` at each grid point, shape (1 or n_models, n_points): the same every step.

        Computed once per cut (the last cut asked for is kept) and read by row in :meth:`p_above`.
        """
        if self._beyond is None or self._beyond[0] is not cut:
            theta_c = np.asarray(cut.theta, float).reshape(-1, 1)
            sd = np.asarray(cut.sd, float).reshape(-1, 1)
            with np.errstate(divide="ignore", invalid="ignore"):
                table = np.where(sd > 0, ndtr((self.points[None, :] - theta_c) / np.where(sd > 0, sd, 1.0)),
                                 (self.points[None, :] > theta_c) + 0.5 * (self.points[None, :] == theta_c))
            self._beyond = (cut, table)
        return self._beyond[1]

    def p_above(self, cut: Cut, widen: np.ndarray | None = None, rows: np.ndarray | None = None) -> np.ndarray:
        """``P(theta > theta_c + e)`` per model (of ``rows``), ``e ~ Normal(0, sigma_c^2)`` the cut's spread."""
        rows = slice(None) if rows is None else rows
        log_lik = self.log_lik[rows]
        if widen is not None:
            log_lik = log_lik / np.asarray(widen, float)[:, None] ** 2
        w, _ = posterior_weights(log_lik + self.log_prior[rows], np.zeros(self.points.size))
        beyond = self.beyond(cut)
        if beyond.shape[0] > 1:
            beyond = beyond[rows]
        return np.clip((w * beyond).sum(axis=1), 0.0, 1.0)


@dataclass(frozen=True)
class GridTerms:
    """Grid log-likelihoods of one step's responses, shared by the posteriors of several rules.

    Attributes
    ----------
    rows : ndarray of int, increasing
        The models that answered an item this step.
    values : ndarray, shape (rows.size, n_points)
        Each one's log-likelihood of its response at every grid point.
    points : ndarray
        The grid.
    """

    rows: np.ndarray
    values: np.ndarray
    points: np.ndarray


def grid_terms(items: ItemModel, j: np.ndarray, x: np.ndarray, points: np.ndarray) -> GridTerms:
    """Each model's log-likelihood of its response ``x`` to item ``j`` (-1 or NaN: none) on ``points``, once.

    The rules' posteriors (:class:`ConfidenceRule`, :class:`SprtRule`) on the same grid add these
    terms for the models they are still testing (their ``push(..., terms=...)``) instead of each
    evaluating the likelihood again.
    """
    rows = np.flatnonzero((j >= 0) & ~np.isnan(x))
    values = items.grid_log_likelihood(j[rows], x[rows], points, rows=rows) if rows.size else \
        np.zeros((0, np.asarray(points).shape[0]))
    return GridTerms(rows=rows, values=values, points=points)


class ConfidenceRule:
    """Decide once the posterior probability of being above the cut reaches ``confidence`` or ``1 - confidence``.

    The probability is computed on a grid (the exact posterior of a Normal prior times the 2PL
    likelihood of the responses so far, not a normal approximation around a point estimate, which
    after one very discriminating item can be badly off), with the cut's own uncertainty
    ``sigma_c`` smoothed in (see the module docstring).

    Parameters
    ----------
    cut : Cut
    confidence : float
        In (0.5, 1): the asked probability that the decision is right.
    prior_mean, prior_sd : float or array_like, shape (n_models,)
        The Normal prior of the posterior (the paper's: 0 and 1; one per model allowed).
    inflation : callable(k) -> float, optional
        Widening of the posterior after ``k`` items (a bank's :meth:`~irtlib.ItemBank.interval_inflation`):
        the likelihood is tempered by ``1 / f(k)^2``.
    n_points : int
        Grid points over [-8, 8] (default 321: spacing 0.05, ample for posteriors with SD above 0.05).
    """

    name = "ci"

    def __init__(self, cut: Cut, *, confidence: float = 0.95, prior_mean=0.0, prior_sd=1.0,
                 inflation: Callable[[int], float] | None = None, n_points: int = RULE_POINTS):
        if not isinstance(cut, Cut):
            raise InputError(f"cut must be a Cut, got {shown(cut)}")
        self.cut, self.confidence, self.inflation = cut, check_confidence(confidence), inflation
        self.prior_mean, self.prior_sd, self.n_points = prior_mean, prior_sd, int(n_points)
        if np.any(~np.isfinite(np.asarray(prior_sd, float))) or np.any(np.asarray(prior_sd, float) <= 0):
            raise InputError(f"prior_sd must be positive and finite, got {shown(prior_sd)}")

    def begin(self, items: ItemModel, n_models: int) -> _ConfidenceRun:
        """Start the posteriors of ``n_models`` models at the prior."""
        return _ConfidenceRun(self, _Posterior(items, n_models, prior_mean=self.prior_mean,
                                               prior_sd=self.prior_sd, n_points=self.n_points))

    def __repr__(self) -> str:
        return f"ConfidenceRule(confidence={self.confidence})"


class _ConfidenceRun:
    def __init__(self, rule, posterior):
        self.rule, self.posterior = rule, posterior

    def push(self, j, x, *, terms: GridTerms | None = None):
        """Add each model's response to its posterior (``terms``: its grid log-likelihoods, :func:`grid_terms`)."""
        self.posterior.push(j, x, terms=terms)

    def evaluate(self, n_items, rows=None):
        """``(decision, p_above)`` per model (of ``rows``): +1 pass, -1 fail, 0 undecided (none before an item)."""
        r = self.rule
        n_items = np.asarray(n_items) if rows is None else np.asarray(n_items)[rows]
        widen = None if r.inflation is None else np.array([r.inflation(int(k)) for k in n_items], float)
        p = self.posterior.p_above(r.cut, widen, rows)
        decided = np.where(p >= r.confidence, 1, np.where(p <= 1.0 - r.confidence, -1, 0))
        return np.where(n_items > 0, decided, 0), p

    def decisions(self, n_items, rows=None):
        """+1 pass, -1 fail, 0 undecided per model (of ``rows``)."""
        return self.evaluate(n_items, rows)[0]

    def state(self) -> dict:
        return {}


class SprtRule:
    """Wald's sequential probability ratio test across the cut's indifference region.

    Parameters
    ----------
    cut : Cut
        With an indifference region (``Cut.at_score(..., indifference=...)``).
    confidence : float
        In (0.5, 1); both error rates are ``1 - confidence`` at the region's ends.
    prior_mean, prior_sd : float or array_like
        The prior of the reported ``p_above`` (the test itself has no prior).
    """

    name = "sprt"

    def __init__(self, cut: Cut, *, confidence: float = 0.95, prior_mean=0.0, prior_sd=1.0,
                 n_points: int = RULE_POINTS):
        if not isinstance(cut, Cut):
            raise InputError(f"cut must be a Cut, got {shown(cut)}")
        if not cut.has_region:
            raise InputError("the SPRT needs an indifference region around the cut (a positive half-width)")
        self.cut, self.confidence = cut, check_confidence(confidence)
        self.prior_mean, self.prior_sd, self.n_points = prior_mean, prior_sd, int(n_points)
        self.upper = math.log(self.confidence / (1.0 - self.confidence))     # Wald: log((1 - beta) / alpha)
        self.lower = -self.upper                                             # log(beta / (1 - alpha))

    def begin(self, items: ItemModel, n_models: int) -> _SprtRun:
        """Start the log-likelihood ratios of ``n_models`` models at 0."""
        return _SprtRun(self, items, n_models)

    def __repr__(self) -> str:
        return f"SprtRule(confidence={self.confidence})"


class _SprtRun:
    def __init__(self, rule, items, n_models):
        self.rule, self.items = rule, items
        self.posterior = _Posterior(items, n_models, prior_mean=rule.prior_mean, prior_sd=rule.prior_sd,
                                    n_points=rule.n_points)
        self.llr = np.zeros(n_models)

    def push(self, j, x, *, terms: GridTerms | None = None):
        """Add each model's response to its item ``j`` (-1: none) to its log-likelihood ratio and posterior.

        ``terms``: the responses' grid log-likelihoods for the posterior (:func:`grid_terms`).
        """
        cut = self.rule.cut
        self.llr += self.items.log_likelihood(j, x, cut.high) - self.items.log_likelihood(j, x, cut.low)
        self.posterior.push(j, x, terms=terms)

    def decisions(self, n_items, rows=None):
        """+1 pass, -1 fail, 0 undecided per model (of ``rows``): the ratio against Wald's bounds."""
        r = self.rule
        llr = self.llr if rows is None else self.llr[rows]
        return np.where(llr >= r.upper, 1, np.where(llr <= r.lower, -1, 0))

    def evaluate(self, n_items, rows=None):
        """``(decision, p_above)`` per model (of ``rows``)."""
        return self.decisions(n_items, rows), self.posterior.p_above(self.rule.cut, None, rows)

    def state(self) -> dict:
        return {"llr": self.llr.copy(), "bounds": (self.rule.lower, self.rule.upper)}
