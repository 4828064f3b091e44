"""Certification: stop an adaptive test as soon as "above" or "below" a safety bar is decided.

Beyond the paper, whose tests stop at a fixed length. A *cut* (:class:`Cut`) is the bar on the
ability scale: given as an ability, or as a full-benchmark safety score mapped to an ability
through the bank's test characteristic curve (TCC)

    S(theta) = (sum_j P_j(theta) + filtered safe-rate sum) / N_full

(the predicted full-benchmark score of :mod:`irtlib.bank.intervals`; ``S`` increases in
``theta``, so ``theta_c = S^-1(score)``). Two decision rules end the test (each with the stopping
rule's budget, :class:`irtlib.selection.stopping.StoppingRule`):

- :class:`ConfidenceRule`: the confidence-interval rule. With ``p = P(theta > theta_c)`` from
  the estimate's normal approximation, ``p = Phi((theta_hat - theta_c) / sd)``, decide "pass"
  once ``p >= confidence`` and "fail" once ``p <= 1 - confidence``. ``sd`` combines the
  estimate's standard error and the cut's own uncertainty, ``sd = f(k) sqrt(SE^2 + sigma_c^2)``:
  ``sigma_c`` is the spread of the full-benchmark score of a model sitting exactly at the cut
  (its unanswered items are Bernoulli draws), ``sqrt(sum_j P_j (1 - P_j)) / N_full``, divided by
  the TCC's slope ``S'(theta_c)`` to bring it to the ability scale (0 for a cut given as an
  ability); ``f(k)`` is an optional widening after ``k`` items (a bank's cross-fitted interval
  factor, :meth:`irtlib.ItemBank.interval_inflation`; default 1). It is catsim's
  confidence-interval stopper with the mapping's uncertainty added.
- :class:`SprtRule`: Wald's sequential probability ratio test of ``theta = theta_lo`` against
  ``theta = theta_hi``, the ends of an *indifference region* around the cut (for a score cut, the
  abilities of ``score -/+ indifference``). The log-likelihood ratio of the responses so far,
  ``sum_j log P(x_j | theta_hi) - log P(x_j | theta_lo)``, is compared with Wald's bounds
  ``log(confidence / (1 - confidence))`` and its negative (both error rates ``alpha = beta =
  1 - confidence``): "pass" above, "fail" below. Outside the region the error rate is at most
  about ``1 - confidence``; inside it, either decision is acceptable by construction.

Both report, per model, the decision (``+1`` pass, ``-1`` fail, ``0`` undecided: "undecided at
the budget" is a result) and ``p_above`` (the normal approximation above, for the report; the
SPRT decides on its ratio alone). The prior of a MAP or EAP estimate is the calibration models'
population, so ``p_above`` is a posterior probability for a model drawn from it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.special import ndtr

from irtlib.core.ability import THETA_BOUNDS
from irtlib.core.responses import shown
from irtlib.errors import InputError

from .items import ItemModel, TwoPLItems

__all__ = ["Cut", "ConfidenceRule", "SprtRule", "DECISIONS", "check_confidence"]

#: Decision labels, indexed by ``decision + 1`` (-1 fail, 0 undecided, +1 pass).
DECISIONS = ("fail", "undecided", "pass")


def _number(value, name: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InputError(f"{name} must be a number, got {shown(value)}")
    value = float(value)
    if not math.isfinite(value):
        raise InputError(f"{name} must be finite, got {shown(value)}")
    return value


def check_confidence(confidence) -> float:
    """``confidence`` as a float strictly between 0.5 and 1, or a one-line :class:`InputError`.

    A decision needs ``confidence > 0.5`` (below it "pass" and "fail" would both be decided at
    once); 0 and 1 are refused like any value outside (0, 1).
    """
    value = _number(confidence, "confidence")
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
        return self.high > self.low

    @classmethod
    def at_theta(cls, theta: float, *, indifference: float | None = None,
                 bounds: tuple[float, float] = THETA_BOUNDS) -> Cut:
        """A cut given as an ability (with an optional indifference half-width, in ability units).

        Raises
        ------
        InputError
            A cut or region outside ``bounds`` (the estimators' range), a negative half-width.
        """
        theta = _number(theta, "the cut (theta)")
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
        score = _number(score, "the pass score")
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
    d = _number(indifference, "the indifference half-width")
    if d <= 0:
        raise InputError(f"the indifference half-width must be positive, got {shown(indifference)}")
    return d


def _p_above(cut: Cut, theta, se, n_items, inflation) -> np.ndarray:
    """``Phi((theta - theta_c) / (f(k) sqrt(se^2 + sigma_c^2)))`` per model."""
    theta, se = np.asarray(theta, float), np.asarray(se, float)
    f = np.ones_like(theta) if inflation is None else np.array([inflation(int(k)) for k in np.atleast_1d(n_items)])
    sd = f * np.sqrt(se * se + cut.sd ** 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        return ndtr((theta - cut.theta) / sd)


class ConfidenceRule:
    """Decide once the ability's interval at ``confidence`` leaves the cut (see the module docstring).

    Parameters
    ----------
    cut : Cut
    confidence : float
        In (0.5, 1): the asked probability that the decision is right.
    inflation : callable(k) -> float, optional
        Widening of the interval after ``k`` items (a bank's :meth:`~irtlib.ItemBank.interval_inflation`).
    """

    name = "ci"

    def __init__(self, cut: Cut, *, confidence: float = 0.95, inflation: Callable[[int], float] | None = None):
        if not isinstance(cut, Cut):
            raise InputError(f"cut must be a Cut, got {shown(cut)}")
        self.cut, self.confidence, self.inflation = cut, check_confidence(confidence), inflation

    def begin(self, items: ItemModel, n_models: int) -> _ConfidenceRun:
        """Start deciding for ``n_models`` models."""
        return _ConfidenceRun(self)

    def __repr__(self) -> str:
        return f"ConfidenceRule(theta_c={self.cut.theta:.4g}, confidence={self.confidence})"


class _ConfidenceRun:
    def __init__(self, rule):
        self.rule = rule

    def push(self, j, x):
        """The interval rule reads the estimate only."""

    def evaluate(self, theta, se, n_items):
        """``(decision, p_above)`` per model: +1 pass, -1 fail, 0 undecided (no decision before an item)."""
        r = self.rule
        p = _p_above(r.cut, theta, se, n_items, r.inflation)
        decided = np.where(p >= r.confidence, 1, np.where(p <= 1.0 - r.confidence, -1, 0))
        return np.where(np.asarray(n_items) > 0, decided, 0), p

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
    """

    name = "sprt"

    def __init__(self, cut: Cut, *, confidence: float = 0.95):
        if not isinstance(cut, Cut):
            raise InputError(f"cut must be a Cut, got {shown(cut)}")
        if not cut.has_region:
            raise InputError("the SPRT needs an indifference region around the cut (a positive half-width)")
        self.cut, self.confidence = cut, check_confidence(confidence)
        self.upper = math.log(self.confidence / (1.0 - self.confidence))     # Wald: log((1 - beta) / alpha)
        self.lower = -self.upper                                             # log(beta / (1 - alpha))

    def begin(self, items: ItemModel, n_models: int) -> _SprtRun:
        """Start the log-likelihood ratios of ``n_models`` models at 0."""
        if getattr(items, "dims", 1) != 1:
            raise InputError("the SPRT compares two abilities: it needs a unidimensional item model")
        return _SprtRun(self, items, n_models)

    def __repr__(self) -> str:
        return f"SprtRule(theta {self.cut.low:.4g} vs {self.cut.high:.4g}, confidence={self.confidence})"


class _SprtRun:
    def __init__(self, rule, items, n_models):
        self.rule, self.items = rule, items
        self.llr = np.zeros(n_models)

    def push(self, j, x):
        """Add each model's response to its item ``j`` (-1: none) to its log-likelihood ratio."""
        cut = self.rule.cut
        self.llr += self.items.log_likelihood(j, x, cut.high) - self.items.log_likelihood(j, x, cut.low)

    def evaluate(self, theta, se, n_items):
        r = self.rule
        decided = np.where(self.llr >= r.upper, 1, np.where(self.llr <= r.lower, -1, 0))
        return decided, _p_above(r.cut, theta, se, n_items, None)

    def state(self) -> dict:
        return {"llr": self.llr.copy(), "bounds": (self.rule.lower, self.rule.upper)}
