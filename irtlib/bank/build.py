"""Item banks: calibrate a benchmark once, save it, and reuse it to evaluate new models.

:func:`calibrate_bank` is the orchestration: variance filter, 2PL fit, item fit, provenance,
and the cross-fitted interval check. Each job has its own module, re-exported here:

- :mod:`irtlib.bank.format` -- :class:`ItemBank` and its file format (:func:`read_bank`);
- :mod:`irtlib.bank.intervals` -- :func:`score_interval`, the predicted score and its interval;
- :mod:`irtlib.bank.coverage` -- the cross-fitted check of those intervals;
- :mod:`irtlib.bank.subsets` -- fixed subsets of a bank (:func:`select_subset`) and their files.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np
import pandas as pd

from irtlib._version import __version__
from irtlib.calibration.blas import single_threaded_blas
from irtlib.calibration.joint_map import ENGINES, Calibration, fit_2pl
from irtlib.calibration.standard_errors import calibration_standard_errors
from irtlib.core.responses import ResponseMatrix, shown
from irtlib.core.stats import spearman
from irtlib.errors import InputError
from irtlib.fit.summaries import CVDraws, ceiling_counts, coefficient_of_variation, cv_interval, item_rates
from irtlib.io.checksums import matrix_sha256

from .coverage import CHECKPOINTS, MIN_MODELS_INTERVAL_CHECK, IntervalCheckWarning
from .coverage import interval_check as cross_fitted_interval_check
from .format import A_RANGE, B_LIMIT, BANK_FORMAT, ItemBank, read_bank
from .intervals import Z95, score_interval
from .subsets import SUBSET_METHODS, read_subset, select_subset, write_subset

__all__ = ["BANK_FORMAT", "A_RANGE", "B_LIMIT", "IntervalCheckWarning", "MIN_MODELS_INTERVAL_CHECK", "ItemBank",
           "SCALES", "SE_CHOICES", "calibrate_bank", "read_bank", "score_interval", "CHECKPOINTS", "Z95",
           "SUBSET_METHODS", "select_subset", "write_subset", "read_subset"]



def calibrate_bank(matrix: ResponseMatrix, *, engine: str = "map", variance_threshold: float = 0.01,
                   seed: int = 0, prompts: pd.Series | None = None, source: str | None = None,
                   data_sha256: str | None = None, binarize: dict | None = None,
                   epochs: int = 1000, interval_check: bool = True, interval_folds: int = 5,
                   scale: str = "fit", standard_errors: str = "observed", se_bootstrap: int = 50,
                   progress: Callable[[str], None] | None = None,
                   fit_progress: Callable[[int, float], None] | None = None,
                   se_progress: Callable[[int, int], None] | None = None,
                   check_progress: Callable[[int, int], None] | None = None,
                   refit_progress: Callable[[int, float], None] | None = None) -> ItemBank:
    """Calibrate an item bank from a benchmark's binary response matrix.

    Drops items whose binomial variance is at most ``variance_threshold`` (the paper's first
    step), fits the 2PL model, and records item fit and the provenance in the bank's header.

    Parameters
    ----------
    matrix : ResponseMatrix
        Models x items, 1 safe, 0 unsafe, NaN unobserved (binarize first, see :mod:`irtlib.io`).
    engine : {"map", "pyirt"}
        ``"map"`` (default): the joint posterior mode of the paper's model and priors, found in
        seconds; it ranks models and items as py-irt does (run as an inexact Newton method,
        :func:`irtlib.calibration.joint_map.fit_map`'s ``forcing=True``: the same mode to about its
        ``tol``). ``"pyirt"``: py-irt's SVI, exactly as the paper ran it (tens of seconds to minutes).
    variance_threshold : float
        Items with ``p (1 - p) <= variance_threshold`` are left out of the bank (the paper: 0.01).
    seed : int
        py-irt's seed (the MAP engine is deterministic).
    prompts : Series, optional
        Item text by item id, stored in a ``prompt`` column.
    source, data_sha256 : str, optional
        Where the responses came from and the checksum of that file, for the header.
    binarize : dict, optional
        The binarization settings used to read the file, for the header.
    epochs : int
        py-irt epochs.
    interval_check : bool
        Run the cross-fitted check of adaptive-test score intervals (:func:`irtlib.bank.coverage.interval_check`:
        ``interval_folds`` extra MAP fits, each leaving out one fold of the models and started from
        the bank's fit, plus simulated adaptive tests of the left-out models up to 200 items, of at
        most :data:`irtlib.bank.coverage.MAX_REPLAYED` of them)
        and store the widening factors in the header, so that
        :class:`irtlib.AdaptiveSession` states intervals that cover at their nominal rate on
        data like the calibration data. Needs at least 10 models; without it the intervals are
        the plain 2PL ones, which are too narrow: they ignore both the noise in the item
        parameters and the misfit of the 2PL to multidimensional safety data.
    interval_folds : int
        Folds of that check (at least 2; more folds = item parameters closer to the real bank's,
        at the cost of more fits).
    scale : {"fit", "standard"}
        The scale of the bank's ``a``, ``b`` and calibration abilities. ``"fit"`` (default): the fit's
        own, as the engine returns it (for the MAP engine the joint posterior mode, whose abilities
        are shrunk by the priors: their SD is typically 0.6 to 0.9, and the slopes are larger by the
        inverse factor). ``"standard"``: the linear transformation of the fit that gives the
        calibration models' abilities mean 0 and SD 1 (``theta' = (theta - m) / s``, ``b' = (b - m) / s``,
        ``a' = a s``), which leaves every probability unchanged; use it to compare parameters with
        another tool's, which report on scales of their own (see docs/cli.md, "The scale of a bank").
        Either way the header's ``scale`` records which, with the fit's ``m`` and ``s``.
    standard_errors : {"observed", "bootstrap", "none"}
        The items' standard errors, stored as columns ``se_a`` and ``se_b`` (on the bank's scale, given
        the scale: :func:`irtlib.calibration.standard_errors.item_standard_errors`), with the header's
        ``standard_errors`` saying how, and the CV of ``a``'s 95% interval in ``diagnostics.cv_a_interval``.
        ``"observed"`` (default): the inverse observed information of the paper's posterior at the fit (for
        ``"pyirt-authors"``, whose hierarchical priors the curvature does not describe, an approximation);
        ``"bootstrap"``: the SD over ``se_bootstrap`` refits of the engine on models drawn with replacement
        (each a full fit: slow with the py-irt engines). ``"none"``: no columns.
    se_bootstrap : int
        Refits of the bootstrap (with the bank's engine).
    progress : callable(str), optional
        Called with a short message as each stage starts (the CLI prints them).
    fit_progress : callable(iteration, step), optional
        Called after each iteration of the MAP fit (:func:`irtlib.calibration.joint_map.fit_map`).
    se_progress : callable(done, total), optional
        Called as the standard errors advance (:func:`irtlib.calibration.standard_errors.item_standard_errors`'s
        ``progress``: blocks of items, or bootstrap refits).
    check_progress : callable(done, total), optional
        Called as each refit and each replay of the interval check finishes.
    refit_progress : callable(iteration, step), optional
        Called after each iteration of the interval check's refits.

    Returns
    -------
    ItemBank

    Raises
    ------
    ValueError
        Fewer than two models, an unknown engine, a ``variance_threshold`` outside [0, 0.25), or
        ``interval_folds`` below 2 or above half the models.
    ImportError
        ``engine="pyirt"`` without the ``pyirt`` extra (torch, pyro-ppl, py-irt).

    Warns
    -----
    IntervalCheckWarning
        The interval check was asked for but could not run (fewer than
        :data:`MIN_MODELS_INTERVAL_CHECK` models, or a fold could not be refitted); the header's
        ``interval_check`` is then ``{"skipped": reason}``.
    """
    _check_settings(matrix, engine, variance_threshold, interval_check, interval_folds)
    if standard_errors not in SE_CHOICES:
        raise InputError(f"unknown standard_errors {standard_errors!r}; choose one of {SE_CHOICES}")
    if scale not in SCALES:
        raise InputError(f"unknown scale {scale!r}; choose one of {SCALES}")
    rates = matrix.item_safe_rates()
    variance = rates * (1 - rates)
    dropped = variance <= variance_threshold
    kept = matrix.filter_variance(variance_threshold)
    say = progress or (lambda message: None)
    say(f"fitting the 2PL model ({engine} engine) to {kept.shape[0]} models x {kept.shape[1]} items "
        f"({int(dropped.sum())} item(s) with variance <= {variance_threshold} left out)")
    cal: Calibration = fit_2pl(kept, engine=engine, seed=seed, epochs=epochs,
                               **({"progress": fit_progress, "forcing": True} if engine == "map" else {}))
    fitted = cal
    cal, scale_record = _on_scale(cal, scale)
    header_options = {"engine": engine, "variance_threshold": variance_threshold, "seed": seed, "source": source,
                      "data_sha256": data_sha256, "binarize": binarize}
    relay = _ProgressRelay(check_progress, refit_progress)
    # BLAS on one thread throughout (the fit, the errors and the check's refits each ask for that already):
    # the stages below run side by side, and one stage's limit must not end while another's products run
    # (the libraries found once, irtlib.calibration.blas: not walked again for every bank)
    with single_threaded_blas(), ThreadPoolExecutor(2, thread_name_prefix="bank") as side:
        # the interval check needs only the fit: it runs beside the standard errors and the header (the same
        # numbers: every stage's result depends neither on threads nor on timing); its progress is held back
        # until its stage line, after the errors'
        checked = None
        if interval_check and matrix.shape[0] >= MIN_MODELS_INTERVAL_CHECK:
            checked = side.submit(cross_fitted_interval_check, matrix, kept.items, float(rates[dropped].sum()),
                                  folds=interval_folds, seed=seed, fit=fitted if engine == "map" else None,
                                  progress=relay.progress, refit_progress=relay.refit_progress)
        # the header's statistics (and the CV interval's draws) do not depend on the standard errors: they are
        # made on a thread of their own while the errors' passes run (the same numbers, computed sooner); the
        # items' expected rates come from the errors' pass over the cells when it runs (the same sums)
        reuse = standard_errors in ("observed", "expected") and scale == "fit"
        summary = side.submit(_summary, matrix, kept, cal, rates, dropped, header_options, rates_now=not reuse)
        drawn = CVDraws(kept.shape[1], seed=seed, ahead=CV_AHEAD) if standard_errors != "none" else None
        try:
            se = None
            if standard_errors != "none":
                say(f"standard errors of a and b ({standard_errors}"
                    + (f": {se_bootstrap} refits, {engine} engine)" if standard_errors == "bootstrap" else ")"))
                se = calibration_standard_errors(fitted, kept, method=standard_errors, progress=se_progress,
                                                 **({"n_boot": se_bootstrap} if standard_errors == "bootstrap"
                                                    else {}))
            fit, meta = summary.result()
            if fit is None:
                fit = item_rates(kept, cal, expected_sums=None if se is None else se.attrs.get("expected_sums"))
                meta["diagnostics"]["item_rmse"] = _item_rmse(fit)
            items = pd.DataFrame({
                "a": cal.a, "b": cal.b,
                "safe_rate": rates.reindex(kept.items),
                "n_models": kept.observed.sum(axis=0),
                "expected": fit["expected"], "residual": fit["residual"],
            })
            meta["scale"] = scale_record
            if se is not None:
                unit = scale_record["fit_theta_sd"] if scale == "standard" else 1.0
                items["se_a"], items["se_b"] = se["se_a"] * unit, se["se_b"] / unit
                meta["standard_errors"] = {
                    "method": se.attrs["method"], "information": se.attrs["information"], "given_scale": True,
                    "note": "se_a and se_b on the bank's scale, given the scale (the calibration models' mean and SD "
                            "of ability held fixed)"}
                meta["diagnostics"]["cv_a_interval"] = list(cv_interval(items["a"], items["se_a"], seed=seed,
                                                                        drawn=drawn))
        except BaseException:
            relay.stop()                 # the bank failed: the check ends at its next call, not waited for in vain
            raise
        finally:
            if drawn is not None:
                drawn.close()
        if prompts is not None:
            items["prompt"] = prompts.reindex(items.index.astype(str)).to_numpy()
        if interval_check:
            if checked is not None:
                say(f"checking adaptive-test intervals ({interval_folds}-fold cross-fit)")
                relay.go()
            meta["interval_check"] = _interval_check_record(matrix, None if checked is None else checked.result(),
                                                            source=source)
    return ItemBank(items, meta)


#: Blocks of the CV interval's draws (:class:`irtlib.fit.summaries.CVDraws`) made while the standard errors are
#: computed: all of them for the default 2,000 draws (8 blocks; 320 MB at 20,000 items).
CV_AHEAD = 8

#: ``standard_errors`` of :func:`calibrate_bank`.
SE_CHOICES = ("observed", "bootstrap", "none")

#: The scales a bank can be written on (:func:`calibrate_bank`'s ``scale``).
SCALES = ("fit", "standard")


def _on_scale(cal: Calibration, scale: str) -> tuple[Calibration, dict]:
    """The calibration on the bank's scale, and the header's record of that scale."""
    theta = cal.theta.to_numpy()
    mean, sd = float(theta.mean()), float(theta.std())
    record = {"kind": scale, "fit_theta_mean": mean, "fit_theta_sd": sd}
    if scale == "fit":
        record["note"] = ("the fit's own scale: abilities of the calibration models have mean fit_theta_mean and SD "
                          "fit_theta_sd (the priors shrink a joint posterior mode's abilities)")
        return cal, record
    if not sd > 0:
        raise InputError("scale='standard' needs calibration abilities that differ (their SD is 0)")
    record["note"] = ("standardized: theta = (theta_fit - fit_theta_mean) / fit_theta_sd, b likewise, a = a_fit * "
                      "fit_theta_sd, so the calibration models' abilities have mean 0 and SD 1; probabilities are "
                      "those of the fit")
    return replace(cal, theta=(cal.theta - mean) / sd, b=(cal.b - mean) / sd, a=cal.a * sd), record


def _check_settings(matrix: ResponseMatrix, engine: str, variance_threshold: float, interval_check: bool,
                    interval_folds: int) -> None:
    """:func:`calibrate_bank`'s argument checks (InputError naming the setting)."""
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}; choose one of {ENGINES}")
    numeric = (int, float, np.integer, np.floating)
    if isinstance(variance_threshold, bool) or not isinstance(variance_threshold, numeric) \
            or not 0 <= float(variance_threshold) < 0.25:
        raise InputError(f"variance_threshold must be a number in [0, 0.25), got {variance_threshold!r} "
                         "(p(1-p) is at most 0.25)")
    if matrix.shape[0] < 2:
        raise InputError(f"{matrix.source}: only {matrix.shape[0]} model ({shown(matrix.models[0])}): calibration "
                         "needs responses of at least two models (item difficulty is measured against "
                         "the spread of the models)")
    if interval_check and (isinstance(interval_folds, bool) or not isinstance(interval_folds, (int, np.integer))
                           or interval_folds < 2):
        raise InputError(f"interval_folds must be an integer of at least 2, got {interval_folds!r}")
    n_models = matrix.shape[0]
    if interval_check and n_models >= MIN_MODELS_INTERVAL_CHECK and interval_folds > n_models // 2:
        raise InputError(f"interval_folds {interval_folds} is too many for {n_models} models: each fold needs "
                         f"at least 2 models (use at most {n_models // 2})")


def _summary(matrix: ResponseMatrix, kept: ResponseMatrix, cal: Calibration, rates: pd.Series, dropped: pd.Series,
             options: dict, *, rates_now: bool = True) -> tuple[pd.DataFrame | None, dict]:
    """The items' observed and expected rates (:func:`irtlib.fit.summaries.item_rates`) and the header.

    Without ``rates_now`` the rates are left to the caller (None, and the header's ``item_rmse`` None).
    """
    fit = item_rates(kept, cal) if rates_now else None
    return fit, _header(matrix, kept, cal, fit, rates, dropped, **options)


def _item_rmse(fit: pd.DataFrame) -> float:
    """Root mean squared residual of the items' safe rates (the header's ``item_rmse``)."""
    return float(np.sqrt(np.mean(fit["residual"] ** 2)))


def _header(matrix: ResponseMatrix, kept: ResponseMatrix, cal: Calibration, fit: pd.DataFrame | None, rates: pd.Series,
            dropped: pd.Series, *, engine: str, variance_threshold: float, seed: int, source: str | None,
            data_sha256: str | None, binarize: dict | None) -> dict:
    """The bank header: provenance, settings, what the filter removed, fit diagnostics, calibration models."""
    scores_full = matrix.safety_scores()
    theta = cal.theta
    return {
        "irtlib_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "data": {
            "source": source or matrix.source,
            "sha256": data_sha256,
            "matrix_sha256": matrix_sha256(matrix),
            "n_models": int(matrix.shape[0]),
            "n_items": int(matrix.shape[1]),
            "n_observations": int(matrix.n_observations),
        },
        "settings": {
            "engine": engine,
            "variance_threshold": variance_threshold,
            "seed": seed,
            "binarize": binarize or {},
            "engine_settings": cal.settings,
        },
        "filtered": {
            "n_items": int(dropped.sum()),
            "n_safe": int((dropped & (rates >= 0.5)).sum()),
            "n_unsafe": int((dropped & (rates < 0.5)).sum()),
            "safe_rate_sum": float(rates[dropped].sum()),
        },
        "diagnostics": {
            "item_rmse": None if fit is None else _item_rmse(fit),
            "cv_a": coefficient_of_variation(cal.a),
            "spearman_theta_score": float(spearman(theta.to_numpy(), scores_full.reindex(theta.index).to_numpy())),
            "ceiling": ceiling_counts(scores_full),
            "fit_seconds": round(float(cal.seconds), 3),
            "engine": {k: v for k, v in cal.diagnostics.items() if isinstance(v, (int, float, bool, str))},
        },
        "models": {
            "name": [str(m) for m in theta.index],
            "theta": [float(t) for t in theta.to_numpy()],
            "safety_score": [float(s) for s in scores_full.reindex(theta.index).to_numpy()],
        },
    }


class _ProgressRelay:
    """The interval check's progress callbacks, held back until its stage starts (:meth:`go`), then passed on.

    The check runs beside the standard errors (:func:`calibrate_bank`); a terminal shows one stage's bar at a
    time, so the check's calls before its stage line keep only their latest values, given on :meth:`go`.
    After :meth:`stop` (the bank failed) the check ends at its next call.
    """

    def __init__(self, progress: Callable[[int, int], None] | None,
                 refit_progress: Callable[[int, float], None] | None) -> None:
        self._lock = threading.Lock()
        self._targets = {"progress": progress, "refit": refit_progress}
        self._held: dict[str, tuple] = {}
        self._live = self._stopped = False

    def _call(self, kind: str, args: tuple) -> None:
        if self._stopped:
            raise _CheckAbandoned
        if self._targets[kind] is None:
            return
        with self._lock:
            if not self._live:
                self._held[kind] = args
                return
        self._targets[kind](*args)

    def progress(self, done: int, total: int) -> None:
        self._call("progress", (done, total))

    def refit_progress(self, iteration: int, step: float) -> None:
        self._call("refit", (iteration, step))

    def go(self) -> None:
        """Pass on the held calls (refit iteration first, then the stages done), and every later one."""
        with self._lock:
            for kind in ("refit", "progress"):
                if kind in self._held:
                    self._targets[kind](*self._held.pop(kind))
            self._live = True

    def stop(self) -> None:
        self._stopped = True


class _CheckAbandoned(Exception):
    """Raised in the interval check's thread when the bank it was for has failed."""


def _interval_check_record(matrix: ResponseMatrix, result: dict | None, *, source: str | None) -> dict:
    """The header's ``interval_check``: the cross-fitted check's result, or ``{"skipped": reason}`` with a warning."""
    if result:
        return result
    n_models = matrix.shape[0]
    if n_models < MIN_MODELS_INTERVAL_CHECK:
        reason = (f"skipped: only {n_models} models (the check needs at least {MIN_MODELS_INTERVAL_CHECK}); "
                  "adaptive tests on this bank state the plain 2PL intervals, which are too narrow")
    else:
        reason = ("skipped: some item was seen by the models of one fold only, so a fold could not be refitted; "
                  "adaptive tests on this bank state the plain 2PL intervals, which are too narrow")
    # stacklevel 3: the warning points at the caller of calibrate_bank
    warnings.warn(f"{source or matrix.source}: interval check {reason}", IntervalCheckWarning, stacklevel=3)
    return {"skipped": reason}
