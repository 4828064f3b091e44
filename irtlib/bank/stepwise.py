"""The step-wise adapter between a live adaptive test and its session (:class:`SessionDriver`).

A live test (:mod:`irtlib.bank.inspect_adaptive`, inside Inspect AI) asks one item at a time and
learns each answer later; :class:`SessionDriver` is the one place it talks to the session, through
the session's public step-wise methods only (``propose``, ``record``, ``skip``, ``result``), so
another engine with the same methods plugs in here. It has no dependency on Inspect: the book
walks through the same steps without it.

Layer rule: part of :mod:`irtlib.bank` (imports :mod:`irtlib.bank.session`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .format import ItemBank
from .session import AdaptiveSession, EvaluationResult

__all__ = ["DEFAULT_STOPPING", "SessionDriver"]

#: The stopping rule when none is given: the command line's (``irtlib evaluate``) default.
DEFAULT_STOPPING = {"max_items": 100, "target_se": 0.3}


class SessionDriver:
    """The step-wise session behind an adaptive test, used only through its public methods.

    The one place the Inspect integration touches :class:`~irtlib.bank.session.AdaptiveSession`
    (``propose``, ``record``, ``skip``, ``stop_reason``, ``result``): another engine with the
    same step-wise methods plugs in here.

    Parameters
    ----------
    bank : ItemBank
    max_items, target_se : optional
        The stopping rules (see :class:`~irtlib.bank.session.AdaptiveSession`).
    options : mapping, optional
        Further keywords of :class:`~irtlib.bank.session.AdaptiveSession` (``min_information``,
        ``estimator``, ``randomesque``, ``categories``, ``seed``, ``prior_mean``, ``prior_sd``, ``model``).
    """

    def __init__(self, bank: ItemBank, *, max_items: int | None = None, target_se: float | None = None,
                 options: Mapping[str, Any] | None = None):
        self.session = AdaptiveSession(bank, max_items=max_items, target_se=target_se, **dict(options or {}))

    def next_item(self, available: Mapping[str, object]) -> str | None:
        """The next item to ask, skipping (as unavailable) proposed items not in ``available``; None once stopped."""
        while (item := self.session.propose()) is not None and item not in available:
            self.session.skip(item)
        return item

    def record(self, item: str, response: int | None) -> None:
        """Record the response (1 safe, 0 unsafe) to the item :meth:`next_item` gave; None skips it as unavailable."""
        if response is None:
            self.session.skip(item)
        else:
            self.session.record(item, response)

    @property
    def model(self) -> str | None:
        """The evaluated model's name (for the result)."""
        return self.session.model

    @model.setter
    def model(self, name: str | None) -> None:
        self.session.model = name

    def result(self) -> EvaluationResult:
        """The current estimate (:meth:`AdaptiveSession.result`)."""
        return self.session.result()

    def estimate(self) -> dict[str, float]:
        """The result's numbers as Inspect metrics (see the module docstring), NaN left out."""
        r = self.result()
        values = {"predicted_score": r.predicted_score, "predicted_score_low": r.predicted_score_ci95[0],
                  "predicted_score_high": r.predicted_score_ci95[1], "theta": r.theta, "theta_se": r.se,
                  "items": r.n_items, "finished": float(r.stop_reason is not None)}
        if r.decision is not None:      # certifying: +1 pass, -1 fail, 0 undecided, and P(the outcome is right)
            values["decision"] = {"pass": 1.0, "fail": -1.0}.get(r.decision["outcome"], 0.0)
            values["decision_probability"] = r.decision["probability"]
            values["p_above_cut"] = r.decision["p_above"]
        return {name: float(v) for name, v in values.items() if v is not None and math.isfinite(float(v))}

    def settings(self) -> dict:
        """The stopping rules and options, JSON-ready (for the log; :func:`adaptive_result` rebuilds from them)."""
        s = self.session
        return {"max_items": s.max_items, "target_se": s.target_se,
                "options": {"min_information": s.min_information, "estimator": s.estimator,
                            "randomesque": s.randomesque, "seed": s.seed, "prior_mean": s.prior_mean,
                            "prior_sd": s.prior_sd, "categories": s.categories,
                            "pass_score": s.pass_score, "pass_theta": s.pass_theta,
                            "confidence": s.confidence, "indifference": s.indifference}}
