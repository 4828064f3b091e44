"""The stopping rule of the adaptive-testing engine: when a model's test ends, and why.

One rule object combines every criterion a test may stop on; it holds when any of them does.
When several hold at the same step, the reason reported is the first of :data:`STOP_REASONS`:

1. ``"decided"``: the certification rule (:mod:`irtlib.selection.certify`) decided "pass" or "fail";
2. ``"target_se"``: the ability's standard error is at most the target (after at least one item);
3. ``"max_items"``: the budget is spent;
4. ``"exhausted"``: no item is left to give;
5. ``"min_information"``: no remaining item would add the minimum Fisher information at the
   current estimate (checked before every item, the first included).

The order: a goal reached (a decision, a precision) before a resource spent (the budget, then the
bank), and the bank's lack of any item before its lack of an informative one (with no item left,
"no informative item" holds vacuously).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from irtlib.errors import InputError

from .certify import ConfidenceRule, SprtRule

__all__ = ["STOP_REASONS", "StoppingRule"]

#: Why a model's test ended, in order of precedence.
STOP_REASONS = ("decided", "target_se", "max_items", "exhausted", "min_information")


def _positive(value, name, *, integer=False):
    if value is None:
        return None
    ok = isinstance(value, (int, np.integer)) if integer else isinstance(value, (int, float, np.integer, np.floating))
    if isinstance(value, (bool, np.bool_)) or not ok or not np.isfinite(value) or value <= 0:
        kind = "a positive integer" if integer else "a positive number"
        raise InputError(f"{name} must be {kind}, got {value!r}")
    return int(value) if integer else float(value)


@dataclass(frozen=True)
class StoppingRule:
    """When an adaptive test ends: whichever criterion holds first (precedence: :data:`STOP_REASONS`).

    Parameters
    ----------
    max_items : int, optional
        The budget.
    target_se : float, optional
        Stop once the ability's standard error (MAP) or posterior SD (EAP) is at most this.
    min_information : float, optional
        Stop once the most informative remaining item would add less than this Fisher
        information at the current estimate.
    decision : ConfidenceRule or SprtRule, optional
        Stop once the model is certified above or below a cut.
    """

    max_items: int | None = None
    target_se: float | None = None
    min_information: float | None = None
    decision: ConfidenceRule | SprtRule | None = None

    def __post_init__(self):
        for name in ("max_items", "target_se", "min_information"):
            object.__setattr__(self, name, _positive(getattr(self, name), name, integer=name == "max_items"))
        if self.decision is not None and not isinstance(self.decision, (ConfidenceRule, SprtRule)):
            raise InputError(f"decision must be a ConfidenceRule or an SprtRule, got {self.decision!r}")
        if self.max_items is None and self.target_se is None and self.min_information is None \
                and self.decision is None:
            raise InputError("give at least one stopping rule: max_items, target_se, min_information or a decision")

    @property
    def needs_se(self) -> bool:
        """Whether checking the rule needs the ability's standard error."""
        return self.target_se is not None

    def reasons(self, *, n_items: np.ndarray, left: np.ndarray, se: np.ndarray | None = None,
                best_information: np.ndarray | None = None, decided: np.ndarray | None = None) -> np.ndarray:
        """Reason each model stops now (an index into :data:`STOP_REASONS`), or -1 to go on.

        Parameters
        ----------
        n_items, left : ndarray, shape (n_models,)
            Items given and items left.
        se, best_information, decided : ndarray, shape (n_models,), optional
            The current SE, the information of the best remaining item, and the decision (+1,
            -1, 0); each needed only by the criterion that reads it.
        """
        n_items = np.asarray(n_items)
        conditions = [          # None: a criterion not set, which never holds
            None if self.decision is None else np.asarray(decided) != 0,
            None if self.target_se is None else (n_items > 0) & (np.asarray(se) <= self.target_se),
            None if self.max_items is None else n_items >= self.max_items,
            np.asarray(left) == 0,
            None if self.min_information is None else np.asarray(best_information) < self.min_information,
        ]
        return _first_reason(conditions, n_items.shape)


def _first_reason(conditions: list, shape: tuple) -> np.ndarray:
    """Index of the first condition that holds per model, -1 where none does: ``np.select(conditions, range, -1)``.

    The same values, dtype and shape as ``np.select`` with the unset criteria (None) as all-False arrays of
    ``shape``, without its per-call set-up (about 15 us, twice a step of a one-model
    :class:`irtlib.AdaptiveSession`): the criteria set are applied from the last to the first
    (``np.where``, which broadcasts them as ``np.select`` does), so the first that holds wins.
    """
    out = np.full(shape, -1, dtype=_REASON_DTYPE)
    for code in range(len(conditions) - 1, -1, -1):
        if conditions[code] is not None:
            out = np.where(conditions[code], code, out)
    return out


#: The dtype ``np.select`` gives the reasons (that of ``np.arange``'s indices and the default -1).
_REASON_DTYPE = np.result_type(np.arange(len(STOP_REASONS)), -1)
