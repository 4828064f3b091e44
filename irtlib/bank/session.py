"""Adaptive evaluation of a new model on a calibrated item bank (Fluid Benchmarking, resumable).

Paper, section "Adaptive selection (Algorithm 1)": start at ``theta = 0`` with no items; until
the budget is spent, give the unused item with the largest Fisher information at the current
``theta``, observe the response, and update ``theta`` by MAP (Normal(0, 1) prior) on all the
responses so far. :class:`AdaptiveSession` is the step-wise driver of the adaptive-testing engine
(:class:`irtlib.selection.engine.AdaptiveTest`, the objects :func:`irtlib.run_adaptive` drives in
batch) and adds what a practitioner needs around that loop:

- stopping rules: a budget (``max_items``), a target standard error (``target_se``) and/or a
  minimum information (``min_information``: stop when no remaining item would add that much);
- beyond the paper (:mod:`irtlib.selection.cat`): EAP instead of MAP (``estimator="eap"``), randomesque
  exposure control (``randomesque=k``, seeded per step, so a saved state replays exactly) and
  Kingsbury-Zara content balancing over item ``categories``;
- items the model cannot be given (e.g. missing from a replay file) are *skipped* as unavailable:
  they are never proposed again and do not count against the budget;
- a predicted full-benchmark safety score with a 95% interval (:meth:`AdaptiveSession.result`);
- certification against a safety bar (``pass_score`` or ``pass_theta``, :mod:`irtlib.selection.certify`):
  the test stops once "pass" or "fail" is decided at the asked confidence;
- a small JSON state (:meth:`save` / :meth:`load`) recording the bank's checksum and the
  sequence of (item, response) events. Loading replays the events through the selection rule
  and rejects a state whose items are not the ones the session would have proposed (a response
  for an item not proposed), a state from another bank, or a corrupt file.

The interval. ``theta``'s 95% interval is ``theta +/- 1.96 SE``. The predicted score
``S(theta)`` counts the administered items as answered, the other bank items at their 2PL
probability and the filtered items at their calibration safe rate (see :mod:`irtlib.bank.build`);
``S`` is increasing in ``theta``, so the theta interval maps to a score interval through its
endpoints. The realized full-benchmark score also varies because the unadministered items are
Bernoulli draws; their standard deviation ``sqrt(sum P_j (1 - P_j)) / N`` is added in quadrature
to each half-width (it matters on small benchmarks only). Safety data are not exactly 2PL
(several latent dimensions, local dependence, noisy item parameters), so this interval is too
narrow by itself; when the bank carries a cross-fitted interval check (the default of
:func:`irtlib.calibrate_bank`), both half-widths are multiplied by the factor that check measured
at the same test length (``EvaluationResult.interval_inflation``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from irtlib._typing import PathLike
from irtlib.core.ability import THETA_BOUNDS, check_prior
from irtlib.core.responses import shown
from irtlib.errors import InputError, InputTypeError, IrtlibError
from irtlib.io.atomic import atomic_write
from irtlib.selection.certify import DECISIONS, ConfidenceRule, Cut, SprtRule, check_confidence
from irtlib.selection.engine import AdaptiveTest
from irtlib.selection.estimators import EapEstimator, MapEstimator
from irtlib.selection.items import TwoPLItems
from irtlib.selection.selectors import ContentBalance, ExposureControl, selector_for
from irtlib.selection.stopping import STOP_REASONS, StoppingRule

from .build import Z95, ItemBank, score_interval

_ESTIMATORS = ("map", "eap")

__all__ = ["LOCK_MAGIC", "STATE_FORMAT", "AdaptiveSession", "Decision", "EvaluationResult", "SessionEstimate",
           "StateLockedError", "state_lock"]

STATE_FORMAT = "irtlib-session/1"


class StateLockedError(IrtlibError, RuntimeError):
    """Another process holds the lock of a session state file (see :func:`state_lock`)."""


#: How a lock file irtlib made begins (then the holder's process id): anything else at the lock path is left alone.
LOCK_MAGIC = "irtlib-state-lock pid "


def _open_lock(lock: Path, state: Path) -> tuple[int, bool]:
    """Open (creating it without following links) the lock file; ``(fd, created)``.

    An existing path is opened only when it is a regular file with a single link that is not a
    symbolic link; otherwise :class:`~irtlib.errors.InputError` names it and it is left alone.
    """
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL | nofollow, 0o666)
        os.write(fd, LOCK_MAGIC.encode("ascii"))     # ours from the start (the pid follows once locked)
        return fd, True
    except FileExistsError:
        pass
    except OSError as exc:
        raise OSError(exc.errno, f"cannot create the lock file {lock} ({exc.strerror})", str(state)) from None
    foreign = (f"{state}: {lock} exists and is not a lock file irtlib made (it is {{}}); it is left alone: "
               "remove it yourself if no evaluation is running")
    try:
        fd = os.open(lock, os.O_RDWR | nofollow | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:               # removed meanwhile: try again
        return _open_lock(lock, state)
    except OSError as exc:
        what = ("a symbolic link" if os.path.islink(lock) else "a directory" if os.path.isdir(lock)
                else exc.strerror.lower())
        raise InputError(foreign.format(what)) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        what = "not a regular file" if not stat.S_ISREG(info.st_mode) else f"a file with {info.st_nlink} hard links"
        raise InputError(foreign.format(what))
    return fd, False


@contextlib.contextmanager
def state_lock(path: PathLike) -> Iterator[None]:
    """Hold an exclusive lock on a session state file while the block runs.

    Two evaluations writing one state file would each overwrite the other's answers, and one
    session would be lost. The lock is an advisory ``flock`` on a hidden sibling file
    ``.NAME.lock`` (the state itself is replaced by a rename after every response, so it cannot
    carry the lock), created without following symbolic links; it holds :data:`LOCK_MAGIC` and
    the holder's process id, and is removed when the block ends. A process killed with SIGKILL
    leaves the file behind but not the lock, so the next evaluation proceeds. Anything else at
    the lock path (a symbolic link, a directory, a FIFO, a hard link, a file that does not begin
    with :data:`LOCK_MAGIC`) is left alone and refused.

    Parameters
    ----------
    path : path-like
        The state file (it need not exist yet).

    Raises
    ------
    StateLockedError
        Another process holds the lock; the message names the state file and that process.
    InputError
        Something irtlib did not create sits at the lock path; the message names it.
    """
    try:
        import fcntl
    except ImportError:                     # no flock (Windows): no lock
        yield
        return
    path = Path(path)
    lock = path.with_name(f".{path.name}.lock")
    while True:
        fd, created = _open_lock(lock, path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = os.read(fd, 64).decode("ascii", "replace").strip().removeprefix(LOCK_MAGIC.strip())
            os.close(fd)
            raise StateLockedError(f"{path}: in use by another evaluation (process {other.strip() or 'unknown'}); "
                                   "wait for it to finish, or use another --state file") from None
        if not created and not _is_irtlib_lock(fd):
            os.close(fd)
            raise InputError(f"{path}: {lock} exists and is not a lock file irtlib made (it does not begin with "
                             f"{LOCK_MAGIC.strip()!r}); it is left alone: remove it yourself if no evaluation is "
                             "running")
        try:
            same = os.lstat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)                        # the holder removed it meanwhile: lock the new one
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{LOCK_MAGIC}{os.getpid()}\n".encode("ascii"), 0)
        yield
    finally:
        with contextlib.suppress(OSError):
            if os.lstat(lock).st_ino == os.fstat(fd).st_ino:
                os.unlink(lock)
        os.close(fd)


def _is_irtlib_lock(fd: int) -> bool:
    """The locked file begins with :data:`LOCK_MAGIC` (an empty one may be a lock being created: wait a moment)."""
    for _ in range(20):
        head = os.pread(fd, len(LOCK_MAGIC), 0)
        if head:
            return head == LOCK_MAGIC.encode("ascii")
        time.sleep(0.01)
    return False


@dataclass(frozen=True)
class EvaluationResult:
    """Outcome of an adaptive evaluation (or of its current state).

    Attributes
    ----------
    model : str or None
    theta, se : float
        MAP ability and its posterior standard error.
    theta_ci95 : (float, float)
        ``theta -/+ 1.96 se``.
    predicted_score : float
        Predicted safety score on the full benchmark (bank items plus filtered items).
    predicted_score_ci95 : (float, float)
        Its 95% interval (see the module docstring).
    interval_inflation : float
        The factor the bank's cross-fitted check applied to the 2PL score interval (1 = none).
    n_items : int
        Items administered.
    n_unavailable : int
        Items proposed but skipped as unavailable.
    observed_score : float
        Share of safe responses among the administered items (NaN with none); adaptive tests pick
        items near the model's ability, so this is NOT an estimate of the benchmark score.
    stop_reason : str or None
        ``"decided"`` (the certification decided), ``"target_se"``, ``"max_items"``, ``"exhausted"``
        (no item left), ``"min_information"`` (no remaining item adds the minimum information), or
        None while running (:data:`irtlib.selection.stopping.STOP_REASONS`, in order of precedence).
    bank_items, full_items : int
        Items in the bank and in the full benchmark.
    bank_sha256 : str
    items : list of str
        Administered items, in order.
    responses : list of int
        Their responses.
    decision : dict or None
        The certification (:meth:`Decision.to_dict`), None without a cut.
    """

    model: str | None
    theta: float
    se: float
    theta_ci95: tuple[float, float]
    predicted_score: float
    predicted_score_ci95: tuple[float, float]
    interval_inflation: float
    n_items: int
    n_unavailable: int
    observed_score: float
    stop_reason: str | None
    bank_items: int
    full_items: int
    bank_sha256: str
    items: list
    responses: list
    decision: dict | None = None

    def to_dict(self, *, with_items: bool = True) -> dict:
        """A JSON-ready dict (NaN becomes None)."""
        d = asdict(self)
        if not with_items:
            d.pop("items")
            d.pop("responses")
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}

    def summary(self) -> str:
        """A few human-readable lines."""
        lo, hi = self.theta_ci95
        slo, shi = self.predicted_score_ci95
        status = {"decided": "decided", "target_se": "target SE reached", "max_items": "item budget spent",
                  "exhausted": "no item left in the bank",
                  "min_information": "no remaining item informative enough", None: "not finished"}[self.stop_reason]
        return "\n".join([
            f"model:            {self.model or '(unnamed)'}",
            f"items used:       {self.n_items} of {self.bank_items} in the bank ({status})"
            + (f"; {self.n_unavailable} unavailable, skipped" if self.n_unavailable else ""),
            f"theta:            {self.theta:.3f}  (SE {self.se:.3f}, 95% interval {lo:.3f} to {hi:.3f})",
            f"predicted safety score on the full benchmark ({self.full_items} items):",
            f"                  {self.predicted_score:.4f}  (95% interval {slo:.4f} to {shi:.4f})",
        ] + ([] if self.decision is None else [Decision(**self.decision).summary()]))




@dataclass(frozen=True)
class SessionEstimate:
    """Where an adaptive session stands: the ability, its SE and the predicted full-benchmark score.

    Attributes
    ----------
    theta, se : float
    predicted_score : float
    predicted_score_ci95 : (float, float)
        Its 95% interval (see the module docstring).
    n_items : int
        Items administered.
    """

    theta: float
    se: float
    predicted_score: float
    predicted_score_ci95: tuple[float, float]
    n_items: int


@dataclass(frozen=True)
class Decision:
    """The certification of a model against a cut (:mod:`irtlib.selection.certify`).

    Attributes
    ----------
    outcome : {"pass", "fail", "undecided"}
        "undecided" while the test runs, and at the budget when neither side was reached.
    probability : float
        The probability that the outcome is right (undecided: of the likelier side), from the
        estimate's normal approximation (:func:`irtlib.selection.certify.ConfidenceRule`).
    p_above : float
        The probability that the model's ability is above the cut.
    rule : {"ci", "sprt"}
    confidence : float
    cut : dict
        The cut (:meth:`~irtlib.selection.certify.Cut.to_dict`): theta, its SD, the indifference
        region, the pass score and the scores the bank can reach.
    n_items : int
    final : bool
        Whether the test is over.
    log_likelihood_ratio : float or None
        The SPRT's statistic (None for the interval rule).
    """

    outcome: str
    probability: float
    p_above: float
    rule: str
    confidence: float
    cut: dict
    n_items: int
    final: bool
    log_likelihood_ratio: float | None = None

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return asdict(self)

    def summary(self) -> str:
        """One line."""
        bar = (f"score {self.cut['score']:g} (theta {self.cut['theta']:.3f})" if self.cut.get("score") is not None
               else f"theta {self.cut['theta']:.3f}")
        rule = "SPRT" if self.rule == "sprt" else "interval rule"
        return (f"decision:         {self.outcome} against {bar} at confidence {self.confidence:g} ({rule}; "
                f"P(above) {self.p_above:.3f})")


def _check_context(context) -> dict:
    """A session context: a dict of setting name -> JSON scalar (str, number, bool or None)."""
    if context is None:
        return {}
    if not isinstance(context, dict) or not all(isinstance(k, str) for k in context):
        raise InputError(f"context must be a dict of setting names to values, got {shown(context)}")
    for key, value in context.items():
        if value is not None and not isinstance(value, (str, int, float, bool)):
            raise InputError(f"context setting {key!r} must be a string, number, bool or None, got {shown(value)}")
    return dict(context)


def _compare_context(stored: dict, given: dict, *, source: str) -> None:
    """Refuse a resume whose settings differ from the state's, naming the first difference."""
    def said(key, value):
        return "no " + key if value is None else f"{key} {value}"

    for key in list(stored) + [k for k in given if k not in stored]:
        if stored.get(key) != given.get(key):
            raise InputError(f"{source}: the session was started with {said(key, stored.get(key))}, this run has "
                             f"{said(key, given.get(key))}: one estimate cannot mix the two (resume with the same "
                             "settings, or start another --state file)")


def _as_response(response, item) -> int:
    if isinstance(response, (bool, np.bool_)):
        return int(response)
    if isinstance(response, str):
        response = response.strip()
    try:
        value = float(response)
    except (TypeError, ValueError):
        raise InputError(f"response {shown(response)} for item {shown(item)} is not 0 or 1") from None
    if value not in (0.0, 1.0):
        raise InputError(f"response {shown(response)} for item {shown(item)} is not 0 or 1")
    return int(value)



class AdaptiveSession:
    """An adaptive test of one model on an item bank: the engine's step-wise driver.

    Drives the same objects as the batch :func:`irtlib.selection.adaptive.run_adaptive`
    (:class:`irtlib.selection.engine.AdaptiveTest` with one model), so the items proposed and the
    estimates equal a batch replay's on the same answers. The public API an evaluation harness
    calls: :meth:`next_item`, :meth:`record` (and :meth:`skip`), :attr:`estimate`,
    :attr:`decision`, :attr:`stop_reason` / :attr:`done`.

    Parameters
    ----------
    bank : ItemBank
    max_items : int, optional
        Stop after this many administered items.
    target_se : float, optional
        Stop as soon as the ability's standard error is at most this.
    model : str, optional
        The evaluated model's name (for reports and state files).
    prior_mean, prior_sd : float
        The Normal prior on theta (the paper: 0 and 1).
    context : dict, optional
        The caller's settings that change the answer beyond the bank and the prior (for the
        command line: where the responses come from and how they were binarized, e.g.
        ``{"--binarize": "strict"}``), name -> JSON scalar. Saved in the state file; a resume
        with a different context is refused naming the difference (:meth:`from_dict`).
    min_information : float, optional
        Stop once the most informative remaining item would add less Fisher information than this.
    estimator : {"map", "eap"}
        The paper's MAP (default) or the posterior mean (:class:`irtlib.selection.estimators.EapEstimator`).
    randomesque : int
        Give a random one of the ``randomesque`` most informative items (1: the paper's rule).
    categories : mapping item -> category, optional
        Balance the test's content across these categories (targets: their shares of the bank).
    seed : int
        Seeds the randomesque draws.
    pass_score : float, optional
        Certify against this full-benchmark safety score (mapped to theta through the bank's
        test characteristic curve, :meth:`irtlib.selection.certify.Cut.at_score`): the test
        stops once "pass" or "fail" is decided at ``confidence``.
    pass_theta : float, optional
        The same with the cut given as an ability (not with ``pass_score``).
    confidence : float
        In (0.5, 1): the asked probability that the decision is right (default 0.95).
    indifference : float, optional
        Half-width of an indifference region around the cut, in the cut's units: the decision
        is then Wald's SPRT (:class:`~irtlib.selection.certify.SprtRule`) instead of the
        confidence-interval rule (:class:`~irtlib.selection.certify.ConfidenceRule`).

    Raises
    ------
    ValueError
        No stopping rule, a stopping rule that is not a positive number (``max_items`` a positive
        integer), a non-positive or non-finite ``prior_sd``, a non-finite ``prior_mean``, a
        ``model`` that is not a name, a cut the bank cannot reach (the message names the range),
        a confidence outside (0.5, 1); the message names the argument.

    Examples
    --------
    >>> session = AdaptiveSession(bank, target_se=0.3, max_items=100)   # doctest: +SKIP
    >>> result = session.run(lambda item: ask_my_model(item))           # doctest: +SKIP
    >>> print(result.summary())                                         # doctest: +SKIP

    Step by step, certifying against a safety bar::

        session = AdaptiveSession(bank, max_items=200, pass_score=0.95, confidence=0.95)
        while (item := session.next_item()) is not None:
            session.record(item, judge(my_model(prompt_of[item])))
            session.save("state.json")
        session.decision.outcome        # "pass", "fail" or "undecided" (at the budget)
    """

    def __init__(self, bank: ItemBank, *, max_items: int | None = None, target_se: float | None = None,
                 model: str | None = None, prior_mean: float = 0.0, prior_sd: float = 1.0,
                 context: dict | None = None, min_information: float | None = None, estimator: str = "map",
                 randomesque: int = 1, categories: dict | pd.Series | None = None, seed: int = 0,
                 pass_score: float | None = None, pass_theta: float | None = None, confidence: float = 0.95,
                 indifference: float | None = None):
        if not isinstance(bank, ItemBank):
            raise InputTypeError(f"AdaptiveSession needs an ItemBank, got {type(bank).__name__}")
        self.bank = bank
        if model is not None and (isinstance(model, bool) or not isinstance(model, (str, int, np.integer))):
            raise InputError(f"model must be the model's name (a string) or None, got {shown(model)}")
        self.model = None if model is None else str(model)
        self.prior_mean, self.prior_sd, _ = check_prior(prior_mean, prior_sd, THETA_BOUNDS)
        self.context = _check_context(context)
        self._a, self._b = bank.a, bank.b
        self._index = bank.item_ids
        self._items = TwoPLItems(self._a, self._b)
        self._set_decision(pass_score=pass_score, pass_theta=pass_theta, confidence=confidence,
                           indifference=indifference)
        self.set_stopping(max_items=max_items, target_se=target_se, min_information=min_information)
        self._set_selection(estimator=estimator, randomesque=randomesque, categories=categories, seed=seed)
        self._order: list[int] = []                           # administered positions
        self._responses: list[int] = []
        self._events: list[tuple[str, int | None]] = []       # (item, response or None=unavailable)
        self._pending: int | None = None
        self._open = False                                    # _pending proposed on an open test, nothing since
        self._replaying = False

    # ------------------------------------------------------------------ settings
    def _set_decision(self, *, pass_score, pass_theta, confidence, indifference) -> None:
        if pass_score is not None and pass_theta is not None:
            raise InputError("give the cut once: pass_score (a full-benchmark score) or pass_theta (an ability)")
        self.pass_score, self.pass_theta, self.indifference = pass_score, pass_theta, indifference
        self.confidence = check_confidence(confidence)
        self.cut = None
        self._rule = None
        if pass_score is None and pass_theta is None:
            if indifference is not None:
                raise InputError("indifference needs a cut (pass_score or pass_theta)")
            return
        try:
            if pass_score is not None:
                self.cut = Cut.at_score(pass_score, self._items, filtered_sum=float(self.bank.filtered.get(
                    "safe_rate_sum", 0.0)), n_full=self.bank.n_items_full, indifference=indifference)
            else:
                self.cut = Cut.at_theta(pass_theta, indifference=indifference)
        except InputError as exc:
            where = self.bank.meta.get("path")
            raise InputError(f"{where}: {exc}" if where else str(exc)) from None
        prior = {"prior_mean": self.prior_mean, "prior_sd": self.prior_sd}
        if indifference is not None:
            self._rule = SprtRule(self.cut, confidence=self.confidence, **prior)
        else:
            self._rule = ConfidenceRule(self.cut, confidence=self.confidence, **prior,
                                        inflation=self.bank.interval_inflation if pass_score is not None else None)

    def _set_selection(self, *, estimator, randomesque, categories, seed) -> None:
        if estimator not in _ESTIMATORS:
            raise InputError(f"estimator must be one of {_ESTIMATORS}, got {shown(estimator)}")
        if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
            raise InputError(f"seed must be an integer, got {shown(seed)}")
        self.estimator, self.seed = estimator, int(seed)
        exposure = ExposureControl(randomesque=randomesque)
        self.randomesque = exposure.randomesque
        self.categories = None
        content = None
        if categories is not None:
            cats = pd.Series(categories).astype(str)
            missing = [i for i in self._index if str(i) not in cats.index.astype(str)]
            if missing:
                raise InputError(f"categories: no category for {len(missing)} bank items (e.g. {shown(missing[0])})")
            cats.index = cats.index.astype(str)
            self.categories = {str(i): cats[str(i)] for i in self._index}
            content = ContentBalance(np.array(list(self.categories.values())))
        est = (MapEstimator(prior_mean=self.prior_mean, prior_sd=self.prior_sd) if estimator == "map" else
               EapEstimator(prior_mean=self.prior_mean, prior_sd=self.prior_sd))
        self._test = AdaptiveTest(self._items, selector=selector_for(exposure=exposure, content=content),
                                  estimator=est, stopping=self._stopping, theta0=self.prior_mean, seed=self.seed)

    def set_stopping(self, *, max_items: int | None, target_se: float | None,
                     min_information: float | None = None) -> None:
        """Change the stopping rules (e.g. extend the budget of a resumed session); a decision rule stays."""
        if max_items is None and target_se is None and min_information is None and self._rule is None:
            raise InputError("give a budget (max_items), a target standard error (target_se), a minimum "
                             "information (min_information) and/or a cut (pass_score, pass_theta)")
        if min_information is not None and (isinstance(min_information, (bool, np.bool_))
                                            or not isinstance(min_information, (int, float, np.integer, np.floating))
                                            or not math.isfinite(min_information) or not 0 < min_information):
            raise InputError(f"min_information must be a positive number, got {shown(min_information)}")
        if max_items is not None and (isinstance(max_items, (bool, np.bool_))
                                      or not isinstance(max_items, (int, np.integer)) or max_items < 1):
            raise InputError(f"max_items must be a positive integer, got {shown(max_items)}")
        if target_se is not None and (isinstance(target_se, (bool, np.bool_))
                                      or not isinstance(target_se, (int, float, np.integer, np.floating))
                                      or not math.isfinite(target_se) or not 0 < target_se):
            raise InputError(f"target_se must be a positive number, got {shown(target_se)}")
        self.min_information = None if min_information is None else float(min_information)
        self.max_items = None if max_items is None else int(max_items)
        self.target_se = None if target_se is None else float(target_se)
        self._stopping = StoppingRule(max_items=self.max_items, target_se=self.target_se,
                                      min_information=self.min_information, decision=self._rule)
        self._open = False                    # a proposal's test may be over under the new rules
        if hasattr(self, "_test"):
            self._test.stopping = self._stopping

    # ------------------------------------------------------------------ state
    @property
    def n_items(self) -> int:
        """Items administered so far."""
        return len(self._order)

    @property
    def theta(self) -> float:
        """The current ability estimate (the prior mean before any item)."""
        return float(self._test.theta[0])

    @property
    def se(self) -> float:
        """Its standard error (MAP) or posterior SD (EAP)."""
        return float(self._test.standard_error()[0])

    @property
    def administered(self) -> pd.Series:
        """Responses so far, indexed by item, in the order given."""
        return pd.Series(self._responses, index=pd.Index(self._index[self._order], name="item"),
                         dtype=float, name="response")

    @property
    def unavailable(self) -> list:
        """Items skipped as unavailable."""
        return [item for item, r in self._events if r is None]

    @property
    def stop_reason(self) -> str | None:
        """Why the test is over (one of :data:`irtlib.selection.stopping.STOP_REASONS`), or None while it goes on."""
        if self._replaying:
            return None
        code = int(self._test.status(pending=[-1 if self._pending is None else self._pending])[0])
        return None if code < 0 else STOP_REASONS[code]

    @property
    def done(self) -> bool:
        """True once a stopping rule holds."""
        return self.stop_reason is not None

    @property
    def estimate(self) -> SessionEstimate:
        """The current ability, its SE and the predicted full-benchmark score with its 95% interval."""
        r = self.result()
        return SessionEstimate(theta=r.theta, se=r.se, predicted_score=r.predicted_score,
                               predicted_score_ci95=r.predicted_score_ci95, n_items=r.n_items)

    @property
    def decision(self) -> Decision | None:
        """The certification's state (None without a cut): "pass", "fail" or "undecided", with its probability."""
        if self._rule is None:
            return None
        decided, p_above = self._test.decide()
        d, p = int(decided[0]), float(p_above[0])
        outcome = DECISIONS[d + 1]
        llr = self._test.decision.state().get("llr")
        return Decision(outcome=outcome, probability=p if d > 0 else 1.0 - p if d < 0 else max(p, 1.0 - p),
                        p_above=p, rule=self._rule.name, confidence=self.confidence, cut=self.cut.to_dict(),
                        n_items=self.n_items, final=self.done,
                        log_likelihood_ratio=None if llr is None else float(llr[0]))

    # ------------------------------------------------------------------ the loop
    def propose(self) -> str | None:
        """The next item (the selector's choice at the current ability); alias :meth:`next_item`.

        Returns the same item until it is answered (:meth:`record`) or skipped (:meth:`skip`);
        None once the test is over.

        The item proposed is asked again by :meth:`record` (and by :meth:`run`'s loop): while nothing
        was recorded or skipped and the rules did not change since (``_open``), the test's state is
        the one :attr:`done` read then, so it is not read again (a stopping check a step saved).
        """
        if self._pending is not None and self._open:
            return self._names[self._pending]
        if self.done:
            return None
        if self._pending is None:
            self._pending = int(self._test.propose()[0])
        self._open = not self._replaying
        return self._names[self._pending]

    @cached_property
    def _names(self) -> list[str]:
        """``str`` of every bank item id, in bank order: the ids :meth:`propose` and :meth:`result` give.

        Made once (a list), instead of a pandas ``Index`` look-up per proposal and per item of every result.
        """
        return [str(item) for item in self._index]

    def next_item(self) -> str | None:
        """The item to give next (None once the test is over): :meth:`propose`."""
        return self.propose()

    def _check_item(self, item) -> int:
        expected = self.propose()
        if expected is None:
            raise InputError(f"item {shown(item)}: the session has already stopped ({self.stop_reason})")
        if str(item) != expected:
            where = "is not in the item bank" if str(item) not in self._index else "was not proposed"
            raise InputError(f"item {shown(item)} {where}: the session proposed item {shown(expected)}")
        return self._pending

    def record(self, item: str, response: int | float | None) -> None:
        """Record the response (1 safe, 0 unsafe) to the proposed item and update the estimate.

        Raises
        ------
        ValueError
            ``item`` is not the proposed item, the session has stopped, or the response is not 0/1.
        """
        pos = self._check_item(item)
        value = _as_response(response, item)
        self._order.append(pos)
        self._responses.append(value)
        self._events.append((str(item), value))
        self._pending, self._open = None, False
        self._test.record(np.array([pos]), np.array([float(value)]))

    def skip(self, item: str) -> None:
        """Mark the proposed item unavailable: it is not given and never proposed again."""
        pos = self._check_item(item)
        self._test.skip([0], [pos])
        self._events.append((str(item), None))
        self._pending, self._open = None, False

    def run(self, callback: Callable[[str], object], *, on_step: Callable[[AdaptiveSession], None] | None = None,
            progress: bool = False) -> EvaluationResult:
        """Run the test to its end, asking ``callback`` for each response.

        Parameters
        ----------
        callback : callable(item_id) -> 0, 1 or None
            Gives the proposed item to the model and returns its binarized response; None means
            the item cannot be given (it is skipped as unavailable).
        on_step : callable(session), optional
            Called after every response, and once more at the end if items were skipped since
            (e.g. to save the state; skips alone are not worth a write each, as a replay against
            a sparse file can skip thousands).
        progress : bool
            Show a progress bar on stderr.

        Returns
        -------
        EvaluationResult
        """
        bar = None
        if progress:
            from tqdm.auto import tqdm

            total = self.max_items if self.max_items is not None else len(self.bank)
            bar = tqdm(total=min(total, len(self.bank)), initial=self.n_items, unit="item", desc="adaptive test",
                       leave=False)
        unsaved = False
        try:
            while (item := self.propose()) is not None:
                response = callback(item)
                if response is None:
                    self.skip(item)
                    unsaved = True
                    continue
                self.record(item, response)
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(theta=f"{self.theta:.2f}", se=f"{self.se:.3f}", refresh=False)
                if on_step is not None:
                    on_step(self)
                unsaved = False
        finally:
            if bar is not None:
                bar.close()
            if unsaved and on_step is not None:
                on_step(self)
        return self.result()

    # ------------------------------------------------------------------ result

    # ------------------------------------------------------------------ result
    def result(self, *, item_uncertainty: bool = False, inflation: float | None = None) -> EvaluationResult:
        """Current estimate, predicted full-benchmark score and intervals, and the decision.

        With ``item_uncertainty`` the score interval also carries the uncertainty of the item
        parameters (the bank's ``se_a`` and ``se_b``; :func:`irtlib.bank.intervals.score_interval`);
        a bank without them raises InputError. ``inflation`` replaces the factor the bank's interval
        check gives at this test length (:meth:`ItemBank.interval_inflation`): 1.0 is the plain 2PL
        interval of the same test, which a bank without a check would state.
        """
        theta, se = self.theta, self.se
        item_se = None
        if item_uncertainty:
            if self.bank.se_a is None or self.bank.se_b is None:
                raise InputError(f"{self.bank.meta.get('path', 'item bank')}: has no standard errors of a and b "
                                 "(se_a, se_b): calibrate it again with this irtlib to include item uncertainty")
            item_se = (self.bank.se_a, self.bank.se_b)
        bank = self.bank
        known = np.zeros(len(bank), dtype=bool)
        known[self._order] = True
        if inflation is None:
            inflation = bank.interval_inflation(self.n_items)
        elif not np.isfinite(inflation) or inflation <= 0:
            raise InputError(f"inflation must be a positive number, got {inflation!r}")
        else:
            inflation = float(inflation)
        score, lo, hi = score_interval(self._a, self._b, theta, se, known_mask=known,
                                       known_sum=float(sum(self._responses)),
                                       filtered_sum=float(bank.filtered.get("safe_rate_sum", 0.0)),
                                       n_full=bank.n_items_full, inflation=inflation, item_se=item_se)
        decision = self.decision
        return EvaluationResult(
            model=self.model, theta=theta, se=se, theta_ci95=(theta - Z95 * se, theta + Z95 * se),
            predicted_score=float(score), predicted_score_ci95=(float(lo), float(hi)),
            interval_inflation=inflation,
            n_items=self.n_items, n_unavailable=len(self.unavailable),
            observed_score=float(np.mean(self._responses)) if self._responses else float("nan"),
            stop_reason=self.stop_reason, bank_items=len(bank), full_items=bank.n_items_full,
            bank_sha256=self._bank_sha256, items=[self._names[i] for i in self._order],
            responses=list(self._responses), decision=None if decision is None else decision.to_dict(),
        )

    @cached_property
    def _bank_sha256(self) -> str:
        """The bank's checksum (:attr:`ItemBank.checksum`), computed once per session.

        It serialises the whole item table, and :meth:`result` reports it at every step a caller
        asks for one; the session copies the bank's parameters when it starts, so its bank does not change.
        """
        return self.bank.checksum

    # ------------------------------------------------------------------ persistence
    def to_dict(self) -> dict:
        """The session state as a JSON-ready dict."""
        return {
            "format": STATE_FORMAT,
            "bank_sha256": self._bank_sha256,
            "bank_items": len(self.bank),
            "model": self.model,
            "settings": {"max_items": self.max_items, "target_se": self.target_se,
                         "prior_mean": self.prior_mean, "prior_sd": self.prior_sd,
                         "min_information": self.min_information, "estimator": self.estimator,
                         "randomesque": self.randomesque, "seed": self.seed, "categories": self.categories,
                         "pass_score": self.pass_score, "pass_theta": self.pass_theta,
                         "confidence": self.confidence, "indifference": self.indifference},
            "context": dict(self.context),
            "events": [{"item": item, "response": r} for item, r in self._events],
            "theta": self.theta,
            "se": self.se,
            "stop_reason": self.stop_reason,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }

    def save(self, path: PathLike) -> Path:
        """Write the state atomically (temporary file, fsync, rename), replacing the old state."""
        return atomic_write(path, json.dumps(self.to_dict(), indent=1) + "\n", force=True, fsync=True)

    @classmethod
    def from_dict(cls, state: dict, bank: ItemBank, *, source: str = "session state", max_items: int | None = None,
                  target_se: float | None = None, context: dict | None = None) -> AdaptiveSession:
        """Rebuild a session from :meth:`to_dict` output, replaying and checking every event.

        Parameters
        ----------
        state : dict
        bank : ItemBank
            Must be the bank the state was made with (same checksum).
        source : str
            Name used in error messages (the state file).
        max_items, target_se : optional
            Override the stored stopping rules (e.g. to extend the budget).
        context : dict, optional
            This run's settings that change the answer (see :class:`AdaptiveSession`); when given,
            they must equal the stored ones (a state written before contexts were recorded has none
            and accepts any).

        Raises
        ------
        ValueError
            Wrong format, another bank, another context (the message names the first setting that
            differs, as stored and as given), malformed events, or an event whose item is not the
            one the session would have proposed at that point.
        """
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            got = state.get("format") if isinstance(state, dict) else type(state).__name__
            raise InputError(f"{source}: not an irtlib session state (format {shown(got)}, expected {STATE_FORMAT!r})")
        if state.get("bank_sha256") != bank.checksum:
            raise InputError(f"{source}: was made with another item bank (checksum "
                             f"{str(state.get('bank_sha256'))[:12]}..., this bank {bank.checksum[:12]}...)")
        settings = state.get("settings") or {}
        events = state.get("events")
        stored_context = state.get("context")
        if not isinstance(settings, dict) or not isinstance(events, list):
            raise InputError(f"{source}: corrupt session state ('settings' or 'events' malformed)")
        try:
            session = cls(bank, model=state.get("model"), max_items=settings.get("max_items"),
                          target_se=settings.get("target_se"), prior_mean=settings.get("prior_mean", 0.0),
                          prior_sd=settings.get("prior_sd", 1.0), context=stored_context,
                          min_information=settings.get("min_information"), estimator=settings.get("estimator", "map"),
                          randomesque=settings.get("randomesque", 1), categories=settings.get("categories"),
                          seed=settings.get("seed", 0), pass_score=settings.get("pass_score"),
                          pass_theta=settings.get("pass_theta"), confidence=settings.get("confidence", 0.95),
                          indifference=settings.get("indifference"))
        except (TypeError, ValueError) as exc:
            raise InputError(f"{source}: corrupt session settings ({exc})") from None
        if context is not None and stored_context is not None:
            _compare_context(session.context, _check_context(context), source=source)
        elif context is not None:             # an older state: record this run's context from now on
            session.context = _check_context(context)
        if max_items is not None or target_se is not None:      # the caller's rules replace the stored ones
            session.set_stopping(max_items=max_items, target_se=target_se, min_information=session.min_information)
        session._replaying = True                  # replay every event, whatever the stopping rules say
        for n, event in enumerate(events, start=1):
            if not isinstance(event, dict) or "item" not in event or "response" not in event:
                raise InputError(f"{source}: event {n}: expected {{'item': ..., 'response': 0, 1 or null}}")
            try:
                if event["response"] is None:
                    session.skip(event["item"])
                else:
                    session.record(event["item"], event["response"])
            except ValueError as exc:
                raise InputError(f"{source}: event {n}: {exc}") from None
        session._replaying = False
        return session

    @classmethod
    def load(cls, path: PathLike, bank: ItemBank, *, max_items: int | None = None,
             target_se: float | None = None, context: dict | None = None) -> AdaptiveSession:
        """Resume a session from a state file written by :meth:`save` (see :meth:`from_dict`).

        Raises
        ------
        ValueError
            Corrupt JSON or any problem :meth:`from_dict` finds; the message names the file.
        FileNotFoundError
        """
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise InputError(f"{path}: corrupt session state (not UTF-8 text)") from None
        try:
            state = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: line {exc.lineno}: corrupt session state ({exc.msg})") from None
        return cls.from_dict(state, bank, source=str(path), max_items=max_items, target_se=target_se,
                             context=context)
