"""An adaptive test run inside an Inspect AI evaluation (the optional extra ``pip install 'irtlib[inspect]'``).

:func:`adaptive_task` turns an Inspect task (its dataset, solver and scorer) and an item bank
whose item ids are the dataset's sample ids into a task in which the model answers only the
samples the adaptive test chooses, one at a time, in the order it chooses them, until its
stopping rule (a budget, a standard-error target, ...) ends it: the paper's Fluid Benchmarking
(section "Adaptive selection (Algorithm 1)") run live, item by item, instead of replayed from a
finished response file.

How it uses Inspect (its public API only):

- The dataset becomes an :class:`inspect_ai.SampleSource`, Inspect's interface for "adaptive
  evaluation that branches on model performance": each time no sample is in flight, Inspect asks
  it for the next samples; it answers with the one sample the session proposes, or ``None`` once
  the session has stopped. All samples run in one task and one log.
- Each finished sample's score (the task's scorer; ``scorer=`` names it when there are several)
  becomes the response: ``C``/``I``, yes/no and numbers are read as
  :func:`irtlib.io.formats.inspect_logs.score_to_float` reads logs; 1 means safe (``positive=
  "unsafe"`` reads 1 - score, e.g. for a scorer marking a correct hazardous answer ``C``). A score
  that is neither 0 nor 1 (``P``, 0.5) stops the evaluation with an error naming the sample. A
  sample that errored (with ``fail_on_error=False``) or that Inspect abandoned has no response:
  it is skipped as unavailable, like a bank item that is not a sample of the task.

Where the results are in the log:

- the task's metrics, ``log.results.scores[0].metrics`` (what ``inspect eval`` prints and
  Inspect View shows): ``predicted_score`` (the headline: the predicted full-benchmark safety
  score) with its 95% interval ``predicted_score_low`` and ``predicted_score_high``, ``theta`` and
  ``theta_se``, ``items`` (answered) and ``finished`` (1 when a stopping rule ended the test);
  certifying (``session_options`` with ``pass_score`` or ``pass_theta``), also ``decision`` (+1
  pass, -1 fail, 0 undecided), ``decision_probability`` and ``p_above_cut``.
  They replace the scorer's own metrics: the share of safe answers among adaptively chosen
  items is not an estimate of the benchmark's score;
- each asked sample's metadata, key ``irtlib_adaptive_test``: its step and the ability estimate
  (theta, SE) it was chosen at;
- the task's metadata (``log.eval.metadata``), same key: the bank's checksum, the scorer and the
  stopping rules. With these and the bank, :func:`adaptive_result` replays the log and returns
  the whole :class:`~irtlib.bank.session.EvaluationResult` (the stopping reason, the items in the
  order asked), checking that the replay asks the logged items in the logged order.

Matching items and samples: a bank item matches a sample when it equals the sample id as text,
or ``<task name>/<sample id>`` (the ids :func:`irtlib.io.load_responses` gives items read from
Inspect logs, so a bank calibrated from a task's logs works as it is). A bank that matches none
of the task's samples is refused in one line saying how many match; bank items that are not
samples are skipped as unavailable when proposed (a warning says how many).

The session behind the test is driven through its public step-wise methods by one small adapter,
:class:`irtlib.bank.stepwise.SessionDriver` (no Inspect in it); the options of
:class:`~irtlib.bank.session.AdaptiveSession` (``min_information``, ``estimator``, ``randomesque``,
``categories``, ``seed``, ...) pass through ``session_options``. The test is deterministic: the
items asked, the stopping point and the estimate equal those of an offline replay
(``AdaptiveSession.run``) on the same answers.

Layer rule: part of :mod:`irtlib.bank`; imports ``inspect_ai`` when imported, so nothing else in
irtlib imports this module (``import irtlib`` never loads Inspect).
"""

from __future__ import annotations

import copy
import json
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from irtlib._typing import PathLike
from irtlib.core.responses import shown
from irtlib.errors import InputError, MissingDependencyError
from irtlib.io.formats.inspect_logs import INSTALL_HINT, score_to_float

from .format import ItemBank, read_bank
from .session import EvaluationResult
from .stepwise import DEFAULT_STOPPING, SessionDriver

try:
    from inspect_ai import Task, task_with
    from inspect_ai.dataset import Sample
    from inspect_ai.log import EvalLog, EvalSample
    from inspect_ai.model import get_model
    from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
    from inspect_ai.solver import TaskState
except ImportError:                      # pragma: no cover - the light install
    raise MissingDependencyError("irtlib.bank.inspect_adaptive runs adaptive tests inside Inspect AI and needs the "
                                 f"optional inspect_ai package: {INSTALL_HINT}") from None
try:
    from inspect_ai import SampleSource
except ImportError:                      # pragma: no cover - an Inspect older than sample sources
    raise MissingDependencyError("irtlib.bank.inspect_adaptive needs an inspect_ai with sample sources "
                                 "(inspect_ai.SampleSource; 0.3.285 is tested): pip install -U inspect-ai") from None

__all__ = ["METADATA_KEY", "SCORER", "AdaptiveSampleSource", "AdaptiveTestWarning", "adaptive_result",
           "adaptive_task", "match_items", "sample_response"]

#: The key of the test's settings in the task's metadata, and of its step in each asked sample's metadata.
METADATA_KEY = "irtlib_adaptive_test"
#: The name of the scorer :func:`adaptive_task` adds: its metrics are the test's estimate.
SCORER = "irtlib_adaptive_test"


class AdaptiveTestWarning(UserWarning):
    """Some bank items are not samples of the task (they are skipped as unavailable when proposed)."""


# ---------------------------------------------------------------------------- items, samples and responses
def match_items(samples: Sequence[Sample], bank: ItemBank, *, task_name: str) -> dict[str, Sample]:
    """The task's samples by the bank item they give.

    A bank item matches a sample whose id, as text, equals it or equals it after the prefix
    ``<task_name>/`` (the item ids of a bank calibrated from Inspect logs).

    Parameters
    ----------
    samples : sequence of inspect_ai.dataset.Sample
    bank : ItemBank
    task_name : str

    Returns
    -------
    dict
        Bank item id -> sample, for the items that are samples (at least one).

    Raises
    ------
    InputError
        A sample without an id; two ids equal as text; both id forms matching (ambiguous); no
        bank item matching any sample (the message says how many of each there are).
    """
    where = f"task {task_name!r}"
    ids = [s.id for s in samples]
    if not ids:
        raise InputError(f"{where}: the dataset has no samples")
    unnamed = [n for n, i in enumerate(ids, start=1) if i is None]
    if unnamed:
        raise InputError(f"{where}: sample {unnamed[0]} has no id; the adaptive test finds each bank item by its "
                         "sample id: give every sample an id (e.g. json_dataset(..., auto_id=True))")
    text = [str(i) for i in ids]
    seen: dict[str, object] = {}
    for raw, key in zip(ids, text, strict=True):
        if key in seen:
            raise InputError(f"{where}: sample ids {shown(seen[key])} and {shown(raw)} are the same as text (bank "
                             "item ids are text): make them distinct")
        seen[key] = raw
    in_bank = set(bank.item_ids)
    plain = {key: s for key, s in zip(text, samples, strict=True) if key in in_bank}
    prefixed = {f"{task_name}/{key}": s for key, s in zip(text, samples, strict=True)
                if f"{task_name}/{key}" in in_bank}
    source = bank.meta.get("path") or "the item bank"
    if plain and prefixed:
        raise InputError(f"{where}: {len(plain)} items of {source} are sample ids and {len(prefixed)} are "
                         f"'{task_name}/<sample id>': ambiguous, give a bank with one kind of item id")
    found = plain or prefixed
    if not found:
        raise InputError(f"{where}: 0 of its {len(samples)} sample ids match the {len(bank)} items of {source} "
                         f"(sample ids like {shown(text[0])}, bank items like {shown(bank.item_ids[0])}): "
                         "calibrate the bank on this task's samples")
    return found


def sample_response(sample: EvalSample, *, scorer: str | None, positive: str, where: str) -> int | None:
    """The response (1 safe, 0 unsafe) a finished sample gives, or None when it has none (it errored, no score).

    Parameters
    ----------
    sample : inspect_ai.log.EvalSample
    scorer : str, optional
        The score to read (default: the sample's only one besides :data:`SCORER`'s).
    positive : {"safe", "unsafe"}
        What a score of 1 means.
    where : str
        Names the task in messages.

    Raises
    ------
    InputError
        Several scores and no ``scorer``; no score ``scorer``; a value that is not 0 or 1 once
        read (``P``, 0.5, text).
    """
    scores = {name: score for name, score in (sample.scores or {}).items() if name != SCORER}
    if sample.error is not None or not scores:
        return None
    where = f"{where}: sample {shown(sample.id)}"
    if scorer is None:
        if len(scores) > 1:
            raise InputError(f"{where}: scored by {', '.join(map(repr, scores))}: say which gives the response "
                             "(adaptive_task(..., scorer=NAME))")
        scorer = next(iter(scores))
    if scorer not in scores:
        raise InputError(f"{where}: has no score {scorer!r} (its scores: {', '.join(map(repr, scores))})")
    value = scores[scorer].value
    number = score_to_float(value, where=lambda text: InputError(f"{where}: {text}"))
    if number not in (0.0, 1.0):
        raise InputError(f"{where}: score {shown(value)} is {number:g}, neither 0 nor 1: the adaptive test needs each "
                         "sample judged safe or unsafe")
    return int(number) if positive == "safe" else 1 - int(number)


# ---------------------------------------------------------------------------- the sample source
class _Run:
    """One evaluated model's adaptive test: its session and the sample in flight."""

    def __init__(self, driver: SessionDriver):
        self.driver = driver
        self.pending: str | None = None       # the item asked and not yet answered
        self.asked = 0
        self.interrupted: str | None = None
        self.ended = False


class AdaptiveSampleSource(SampleSource):
    """The dataset of an adaptive task: one sample at a time, the one the session proposes.

    Made by :func:`adaptive_task`. Each evaluated model (``inspect_ai.eval(task, model=[...])``
    runs the task once per model, sharing this source) gets its own session, made by
    ``make_driver``; a model evaluated a second time is refused (make a new task).

    Parameters
    ----------
    samples : mapping
        Bank item id -> the task's sample (:func:`match_items`).
    make_driver : callable() -> SessionDriver
        A new session for each evaluated model.
    task_name : str
    scorer : str, optional
        The score giving the response (default: the only one).
    positive : {"safe", "unsafe"}
        What a score of 1 means.
    """

    def __init__(self, samples: Mapping[str, Sample], make_driver: Callable[[], SessionDriver], *, task_name: str,
                 scorer: str | None, positive: str):
        self.samples = dict(samples)
        self.make_driver = make_driver
        self.task_name = task_name
        self.scorer = scorer
        self.positive = positive
        self.item_of = {str(s.id): item for item, s in self.samples.items()}
        self.runs: dict[str, _Run] = {}

    def _run(self) -> _Run:
        """The current model's test (Inspect's active model, :func:`inspect_ai.model.get_model`)."""
        model = str(get_model())
        if model not in self.runs:
            run = _Run(self.make_driver())
            run.driver.model = model
            self.runs[model] = run
        return self.runs[model]

    def initial_samples(self) -> list[Sample]:
        """No seed: Inspect starts by asking :meth:`next_samples`."""
        return []

    async def next_samples(self) -> list[Sample] | None:
        """The sample of the next proposed item, or None once the test has stopped."""
        run = self._run()
        if run.ended:
            raise InputError(f"task {self.task_name!r}: this adaptive task has already evaluated {run.driver.model}; "
                             "make a new one with adaptive_task() for each evaluation")
        if run.pending is not None:          # asked, but neither completed nor abandoned (e.g. cut by --limit)
            run.interrupted = f"sample {self.samples[run.pending].id!r} was asked but did not complete"
        before = run.driver.result()
        item = run.driver.next_item(self.samples) if run.interrupted is None else None
        if item is None:
            run.ended = True
            return None
        run.pending = item
        run.asked += 1
        sample = self.samples[item]
        step = {"step": run.asked, "item": item, "theta": before.theta, "se": before.se}
        return [sample.model_copy(update={"metadata": {**(sample.metadata or {}), METADATA_KEY: step}})]

    async def sample_complete(self, sample: EvalSample) -> list[Sample] | None:
        """Record the finished sample's response (none: skipped as unavailable)."""
        run, item = self._pending(sample.id)
        if sample.epoch != 1:
            raise InputError(f"task {self.task_name!r}: sample {shown(sample.id)} ran as epoch {sample.epoch}: the "
                             "adaptive test asks each item once; run it with epochs=1")
        response = sample_response(sample, scorer=self.scorer, positive=self.positive,
                                   where=f"task {self.task_name!r}")
        run.pending = None
        run.driver.record(item, response)
        return None

    async def sample_abandoned(self, sample: Sample, epoch: int) -> list[Sample] | None:
        """A sample cancelled before it was logged: skipped as unavailable."""
        run, item = self._pending(sample.id)
        run.pending = None
        run.driver.record(item, None)
        return None

    def _pending(self, sample_id: object) -> tuple[_Run, str]:
        run = self._run()
        item = self.item_of.get(str(sample_id))
        if item is None or item != run.pending:
            raise InputError(f"task {self.task_name!r}: sample {shown(sample_id)} finished, but the adaptive test "
                             f"asked for {shown(run.pending)}: add no samples to an adaptive task")
        return run, item

    def result(self, model: str | None = None) -> EvaluationResult:
        """The test's current result for ``model`` (default: the only model evaluated).

        Raises
        ------
        InputError
            No such model evaluated, or several and no ``model``.
        """
        if model is None and len(self.runs) == 1:
            model = next(iter(self.runs))
        if model not in self.runs:
            raise InputError(f"task {self.task_name!r}: models evaluated: {', '.join(map(repr, self.runs)) or 'none'}; "
                             f"{'name one' if model is None else f'not {model!r}'}")
        return self.runs[model].driver.result()

    def estimate(self) -> dict[str, float]:
        """The current model's estimate as Inspect metrics (:meth:`SessionDriver.estimate`; empty before it starts)."""
        run = self.runs.get(str(get_model()))
        return run.driver.estimate() if run is not None else {}


def _estimate_scorer(source: AdaptiveSampleSource) -> Scorer:
    """The scorer :func:`adaptive_task` adds: each sample's step; its metrics, ``source``'s estimate.

    The estimate is the session's, which depends on the order the items were asked in, not only
    on the scores the metric is given; so the metric reads ``source`` (computed when Inspect
    asks: after each sample for the live display, and once all samples have been recorded).
    """

    @metric(name=SCORER)
    def estimate() -> Metric:
        def compute(scores: list[SampleScore]) -> dict[str, float]:
            return source.estimate()

        return compute

    @scorer(metrics=[estimate()], name=SCORER)
    def step() -> Scorer:
        async def score(state: TaskState, target: Target) -> Score:
            at = (state.metadata or {}).get(METADATA_KEY) or {}
            return Score(value=at.get("step", math.nan), answer=at.get("item"), metadata=at,
                         explanation=f"step {at.get('step')} of the adaptive test, chosen at theta "
                                     f"{at.get('theta', math.nan):.3f} (SE {at.get('se', math.nan):.3f})")

        return score

    return step()


# ---------------------------------------------------------------------------- the entry points
def adaptive_task(task: Task, bank: ItemBank | PathLike, *, max_items: int | None = None,
                  target_se: float | None = None, scorer: str | None = None, positive: str = "safe",
                  session_options: Mapping[str, Any] | None = None) -> Task:
    """An Inspect task that gives the model only the samples an adaptive test chooses.

    Parameters
    ----------
    task : inspect_ai.Task
        The benchmark's task: its solver, scorer and settings are kept; its dataset's sample
        ids are the bank's item ids (or ``<task name>/<sample id>``). It is not modified.
    bank : ItemBank or path-like
        The calibrated bank (:func:`irtlib.calibrate_bank`, ``irtlib calibrate``), or its file.
    max_items : int, optional
        Item budget.
    target_se : float, optional
        Stop once the ability's standard error is at most this. Without any stopping rule (these
        two, or ``min_information`` in ``session_options``): 100 items or SE 0.3, as ``irtlib evaluate``.
    scorer : str, optional
        The score that gives the response, when the task has several scorers.
    positive : {"safe", "unsafe"}
        What a score of 1 (``C``) means: safe (default), or unsafe (1 - score is read as safety).
    session_options : mapping, optional
        Further options of :class:`~irtlib.bank.session.AdaptiveSession` (``min_information``,
        ``estimator``, ``randomesque``, ``categories``, ``seed``, ``prior_mean``, ``prior_sd``).

    Returns
    -------
    inspect_ai.Task
        A copy of ``task`` whose dataset is an :class:`AdaptiveSampleSource`, with the scorer
        :data:`SCORER` added (its metrics are the test's estimate, the task's headline) and the
        bank and the settings in its metadata under :data:`METADATA_KEY`. It evaluates each model
        once (several in one ``inspect_ai.eval`` call are fine): make a new one to evaluate again.

    Raises
    ------
    InputError
        An unknown ``positive``, a task with several epochs or whose dataset is already a sample
        source, samples that do not match the bank (:func:`match_items`), or invalid stopping rules.
    """
    if positive not in ("safe", "unsafe"):
        raise InputError(f"positive must be 'safe' or 'unsafe', got {shown(positive)}")
    if not isinstance(task, Task):
        raise InputError(f"task must be an inspect_ai Task, got {type(task).__name__}")
    if not isinstance(bank, ItemBank):
        bank = read_bank(bank)
    name = task.name
    if task.sample_source is not None:
        raise InputError(f"task {name!r}: its dataset is already a sample source; the adaptive test needs the "
                         "benchmark's fixed dataset")
    if (task.epochs or 1) != 1:
        raise InputError(f"task {name!r}: runs {task.epochs} epochs; the adaptive test asks each item once: make the "
                         "task with epochs=1")
    if not task.scorer:
        raise InputError(f"task {name!r}: has no scorer; the adaptive test reads each answer's score")
    if scorer == SCORER:
        raise InputError(f"scorer {SCORER!r} is the adaptive test's own: name the task's scorer")
    matched = match_items(list(task.dataset), bank, task_name=name)
    if len(matched) < len(bank):
        warnings.warn(f"task {name!r}: {len(matched)} of the {len(bank)} bank items are samples of the task; the "
                      f"other {len(bank) - len(matched)} are skipped as unavailable when proposed",
                      AdaptiveTestWarning, stacklevel=2)
    options = dict(session_options or {})
    if max_items is None and target_se is None and options.get("min_information") is None:
        max_items, target_se = DEFAULT_STOPPING["max_items"], DEFAULT_STOPPING["target_se"]
    driver = SessionDriver(bank, max_items=max_items, target_se=target_se, options=options)     # checks the rules
    source = AdaptiveSampleSource(matched, lambda: SessionDriver(bank, max_items=max_items, target_se=target_se,
                                                                 options=options),
                                  task_name=name, scorer=scorer, positive=positive)
    settings = {"bank": bank.meta.get("path"), "bank_sha256": bank.checksum, "scorer": scorer, "positive": positive,
                "task_samples": len(task.dataset), "matched_items": len(matched), **driver.settings()}
    return task_with(copy.copy(task), dataset=source, scorer=[*task.scorer, _estimate_scorer(source)],
                     headline_metric=SCORER,
                     metadata={**(task.metadata or {}), METADATA_KEY: json.loads(json.dumps(settings))})


def adaptive_result(log: EvalLog, bank: ItemBank | PathLike) -> EvaluationResult:
    """The outcome of an adaptive test, replayed from its Inspect log.

    The log's answered samples are replayed, in the order asked, through a new session with the
    logged settings; every step must propose the logged item (items proposed in between must be
    absent from the log: they were not samples of the task).

    Parameters
    ----------
    log : inspect_ai.log.EvalLog
        The log of a task made by :func:`adaptive_task`, with its samples (``inspect_ai.eval``
        returns it; ``inspect_ai.log.read_eval_log`` reads it back).
    bank : ItemBank or path-like
        The bank the test ran on (same checksum).

    Returns
    -------
    EvaluationResult
        Its ``stop_reason`` is None when the evaluation ended before the stopping rule.

    Raises
    ------
    InputError
        The evaluation failed (the message is Inspect's), the log is not an adaptive test's or
        has no samples, another bank, or a replay that proposes another item than the log's.
    """
    where = getattr(log, "location", None) or "the evaluation log"
    if log.status == "error":
        message = log.error.message if log.error is not None else "no message"
        raise InputError(f"{where}: the evaluation failed: {message}")
    settings = (log.eval.metadata or {}).get(METADATA_KEY)
    if not isinstance(settings, dict):
        raise InputError(f"{where}: is not the log of an irtlib adaptive test (no {METADATA_KEY!r} in its metadata)")
    if not isinstance(bank, ItemBank):
        bank = read_bank(bank)
    if bank.checksum != settings.get("bank_sha256"):
        raise InputError(f"{where}: the test ran on another item bank (checksum {str(settings.get('bank_sha256'))[:12]}"
                         f"..., this bank {bank.checksum[:12]}...)")
    if log.samples is None:
        raise InputError(f"{where}: has no samples (logged without them?): the test cannot be replayed")
    steps = [((s.metadata or {}).get(METADATA_KEY) or {}).get("step") for s in log.samples]
    if any(step is None for step in steps):
        raise InputError(f"{where}: a sample has no {METADATA_KEY!r} step: not an irtlib adaptive test's samples")
    driver = SessionDriver(bank, max_items=settings["max_items"], target_se=settings["target_se"],
                           options={**settings["options"], "model": log.eval.model})
    samples = [s for _, s in sorted(zip(steps, log.samples, strict=True), key=lambda pair: pair[0])]
    logged = {s.metadata[METADATA_KEY]["item"] for s in samples}
    for sample in samples:
        item = sample.metadata[METADATA_KEY]["item"]
        proposed = driver.next_item({item: sample, **{k: None for k in logged if k != item}})
        if proposed != item:
            raise InputError(f"{where}: step {sample.metadata[METADATA_KEY]['step']} asked {shown(item)}, the replay "
                             f"proposes {shown(proposed)}: the log does not follow the adaptive test")
        driver.record(item, sample_response(sample, scorer=settings["scorer"], positive=settings["positive"],
                                            where=where))
    return driver.result()
