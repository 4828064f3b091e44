"""Book-only code of the chapter "Your own benchmark, start to finish".

The chapter takes a reader from the response files they have to an item bank, a fixed subset,
an adaptive evaluation of a model the bank has never seen (its predicted full-benchmark score
and 95% interval, paper section "Adaptive selection (Algorithm 1)"), and a report, once by the
command line and once from Python. This module holds what the chapter needs around that:

- :func:`choose_held_out` -- a typical model to hold out, by a seeded rule;
- :func:`split_jsonl`, :func:`split_long` -- hold one model out of a response file, writing a
  calibration file and a new-model file in the same format;
- :func:`subset_responses` -- a new model's responses to a fixed subset only;
- :func:`run_command` -- run an ``irtlib ...`` command line as a reader would type it;
- :func:`command_json` -- the JSON document of an ``irtlib ... --json`` command, run in this process;
- :func:`held_out_coverage` -- every model held out in turn (by groups), evaluated adaptively
  on a bank calibrated without it: how often its true full-benchmark score lies inside the
  stated interval, against a random subset of the same size;
- :func:`calibration_size` -- how many calibration models a bank needs;
- :func:`scores_by_rule` -- what the binarization rule of a graded judge does to the scores;
- :func:`break_even_models` -- after how many new models a calibration bought for the purpose
  pays for itself (the paper's caveat, section "Limits the authors name");
- :func:`live_test_steps` -- the adaptive test step by step as it runs inside an Inspect AI
  evaluation (:mod:`irtlib.bank.inspect_adaptive`), offline: the same adapter, the held-out
  model's answers in place of the judged samples.

Only irtlib's top-level API is used (:func:`irtlib.calibrate_bank`, :class:`irtlib.AdaptiveSession`,
:func:`irtlib.run_adaptive`, :class:`irtlib.ItemBank`).
"""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from irtlib._typing import PathLike
from irtlib.core.kernels import probability
from irtlib.errors import InputError

__all__ = ["HeldOutFiles", "choose_held_out", "split_jsonl", "split_long", "subset_responses", "run_command",
           "command_json",
           "held_out_coverage", "coverage_summary", "calibration_size", "scores_by_rule",
           "break_even_models", "live_test_steps"]


@dataclass(frozen=True)
class HeldOutFiles:
    """The two files a held-out evaluation needs.

    Attributes
    ----------
    calibration : Path
        Every model but the held-out one: what ``irtlib calibrate`` reads.
    new_model : Path
        The held-out model's responses only: what ``irtlib evaluate --responses`` replays.
    model : str
        The held-out model's name.
    options : str
        Command-line options the files need (``""`` for 0/1 files, ``" --binarize strict"`` for
        graded scores), to append to ``calibrate``, ``evaluate`` and ``report``.
    rule : str
        The same as the ``rule`` of :func:`irtlib.read_model_responses` (``"auto"`` or ``"strict"``).
    """

    calibration: Path
    new_model: Path
    model: str
    options: str
    rule: str


def choose_held_out(scores: pd.Series, *, seed: int = 0, held_out: str | None = None,
                    band: tuple[float, float] = (0.25, 0.75)) -> str:
    """The model to hold out: ``held_out`` if given, else a typical model drawn at random.

    Parameters
    ----------
    scores : Series, indexed by model
        Full-benchmark safety scores.
    seed : int
        Seeds the draw.
    held_out : str, optional
        A model name; it must be in ``scores``.
    band : (float, float)
        The draw is among the models whose score lies between these quantiles of ``scores``
        (default the interquartile range: a model neither at the ceiling nor at the floor).

    Returns
    -------
    str

    Raises
    ------
    InputError
        ``held_out`` is not one of the models.
    """
    models = pd.Index(scores.index.astype(str))
    if held_out is not None:
        if str(held_out) not in models:
            raise InputError(f"HELD_OUT={held_out!r} is not a model of this benchmark "
                             f"(e.g. {', '.join(repr(m) for m in models[:3])})")
        return str(held_out)
    lo, hi = np.quantile(scores.to_numpy(dtype=float), band)
    typical = sorted(models[(scores.to_numpy() >= lo) & (scores.to_numpy() <= hi)])
    return str(np.random.default_rng(seed).choice(typical))


def _dest(dest: PathLike, name: str) -> Path:
    path = Path(dest) / name
    if path.exists():
        raise InputError(f"{path}: exists; choose an empty directory")
    return path


def split_jsonl(path: PathLike, model: str, dest: PathLike, *, stem: str) -> HeldOutFiles:
    """Hold one model out of a JSON-lines response file (the authors' format), line for line.

    Parameters
    ----------
    path : path-like
        One ``{"subject_id": ..., "responses": {...}}`` object per line.
    model : str
        The ``subject_id`` to hold out.
    dest : path-like
        Directory for ``<stem>_calibration.jsonl`` (every other line, unchanged and in order) and
        ``new_model.jsonl`` (the held-out line).
    stem : str
        Name of the benchmark for the calibration file.

    Returns
    -------
    HeldOutFiles

    Raises
    ------
    InputError
        No line, or more than one, has ``subject_id == model``; a line that is not JSON.
    """
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    keep, held = [], []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            subject = json.loads(line).get("subject_id")
        except (json.JSONDecodeError, AttributeError):
            raise InputError(f"{path}: line {n}: not a JSON object") from None
        (held if str(subject) == str(model) else keep).append(line)
    if len(held) != 1:
        raise InputError(f"{path}: {len(held)} lines have subject_id {model!r} (expected exactly one)")
    calibration, new = _dest(dest, f"{stem}_calibration.jsonl"), _dest(dest, "new_model.jsonl")
    calibration.write_text("\n".join(keep) + "\n", encoding="utf-8")
    new.write_text(held[0] + "\n", encoding="utf-8")
    return HeldOutFiles(calibration, new, str(model), "", "auto")


def split_long(raw: pd.DataFrame, model: str, dest: PathLike, *, stem: str, rule: str = "strict") -> HeldOutFiles:
    """Hold one model out of a long table of graded judgments, written as two CSV files.

    Parameters
    ----------
    raw : DataFrame
        Columns ``model, item, score`` (graded scores in [0, 1], one row per judgment).
    model : str
    dest : path-like
        Directory for ``<stem>_calibration.csv`` and ``new_model.csv``.
    stem : str
    rule : {"strict", "lenient"}
        The binarization rule the commands will name (``--binarize``).

    Returns
    -------
    HeldOutFiles

    Raises
    ------
    InputError
        A missing column, or ``model`` has no row.
    """
    missing = [c for c in ("model", "item", "score") if c not in raw.columns]
    if missing:
        raise InputError(f"raw responses: missing column(s) {missing}")
    mine = raw["model"].astype(str) == str(model)
    if not mine.any():
        raise InputError(f"raw responses: no row of model {model!r}")
    calibration, new = _dest(dest, f"{stem}_calibration.csv"), _dest(dest, "new_model.csv")
    raw.loc[~mine, ["model", "item", "score"]].to_csv(calibration, index=False)
    raw.loc[mine, ["model", "item", "score"]].to_csv(new, index=False)
    return HeldOutFiles(calibration, new, str(model), f" --binarize {rule}", rule)


def subset_responses(path: PathLike, items: Sequence[str], dest: PathLike) -> Path:
    """A copy of one model's response file holding only the responses to ``items``.

    What a colleague who ran only a fixed subset's items would have: ``irtlib evaluate`` replays
    it, skipping every other bank item as unavailable, and so scores the model on the subset.

    Parameters
    ----------
    path : path-like
        A one-model file written by :func:`split_jsonl` (``.jsonl``) or :func:`split_long` (``.csv``).
    items : sequence of str
        The subset's items.
    dest : path-like
        The file to write (same format; it must not exist).

    Returns
    -------
    Path

    Raises
    ------
    InputError
        ``dest`` exists, the file holds more than one model, or an item has no response in it.
    """
    path, dest = Path(path), Path(dest)
    if dest.exists():
        raise InputError(f"{dest}: exists; choose another name")
    wanted = [str(i) for i in items]
    if path.suffix == ".jsonl":
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        if len(lines) != 1:
            raise InputError(f"{path}: holds {len(lines)} models (expected one)")
        record = json.loads(lines[0])
        missing = [i for i in wanted if i not in record["responses"]]
        if missing:
            raise InputError(f"{path}: no response to item {missing[0]!r}")
        record["responses"] = {i: record["responses"][i] for i in wanted}
        dest.write_text(json.dumps(record) + "\n", encoding="utf-8")
        return dest
    table = pd.read_csv(path, dtype={"model": str, "item": str})
    if table["model"].nunique() != 1:
        raise InputError(f"{path}: holds {table['model'].nunique()} models (expected one)")
    missing = sorted(set(wanted) - set(table["item"]))
    if missing:
        raise InputError(f"{path}: no response to item {missing[0]!r}")
    table[table["item"].isin(wanted)].to_csv(dest, index=False)
    return dest


def run_command(command: str, *, cwd: PathLike, echo: bool = True, check: bool = True,
                server=None) -> subprocess.CompletedProcess:
    """Run a command line as a reader would type it, in ``cwd``; print it and what it printed.

    ``irtlib ...`` runs as ``python -m irtlib ...`` with this interpreter (the same installation
    as the notebook's, whatever is on ``PATH``); progress bars are off (``TQDM_DISABLE``), so the
    output is what a log file would hold: stderr's messages and stdout, in order.

    Parameters
    ----------
    command : str
        A shell-like command line (split with :func:`shlex.split`; no pipes or redirections).
    cwd : path-like
        Working directory.
    echo : bool
        Print ``$ command`` and the output.
    check : bool
        Raise ``RuntimeError`` (with the output) when the exit status is not 0.
    server : irtbook.command_server.CommandServer, optional
        Run an ``irtlib ...`` command in a process forked from this started interpreter instead of
        a new one (the same output, byte for byte, without paying the start again; chapter 7).

    Returns
    -------
    CompletedProcess
        ``stdout`` holds stdout and stderr interleaved.
    """
    argv = shlex.split(command)
    if server is not None:
        if not argv or argv[0] != "irtlib":
            raise ValueError(f"run_command: {command!r} is not an `irtlib ...` command line")
        done = server.run(argv[1:], cwd=cwd)
    else:
        if argv and argv[0] == "irtlib":
            argv = [sys.executable, "-m", "irtlib", *argv[1:]]
        env = {**os.environ, "TQDM_DISABLE": "1"}
        done = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=env)
    if echo:
        print(f"$ {command}")
        print(done.stdout.rstrip())
    if check and done.returncode != 0:
        raise RuntimeError(f"{command!r} exited with status {done.returncode}:\n{done.stdout}")
    return done


def command_json(command: str, *, cwd: PathLike) -> dict:
    """The JSON document an ``irtlib ... --json`` command line prints, run in this process.

    The same command line as :func:`run_command` runs in a new interpreter, executed by the command
    line's own entry point (:func:`irtlib.cli.main`) in ``cwd``, with its standard output captured:
    for the numbers a chapter reads from a command it has already shown, without paying the start of
    another interpreter and the import of irtlib again (about 2 CPU s a command). The command's
    warnings, signal handlers and working directory are restored when it returns.

    Parameters
    ----------
    command : str
        ``irtlib ...`` with ``--json`` (split with :func:`shlex.split`).
    cwd : path-like
        Working directory of the command (its relative paths are read from there).

    Returns
    -------
    dict
        The parsed document.

    Raises
    ------
    ValueError
        ``command`` is not an ``irtlib`` command with ``--json``.
    RuntimeError
        The command exited with a non-zero status (with what it printed on stderr).
    """
    import contextlib
    import io

    from irtlib.cli import main

    argv = shlex.split(command)
    if not argv or argv[0] != "irtlib" or "--json" not in argv:
        raise ValueError(f"command_json: {command!r} is not an `irtlib ... --json` command line")
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        status = main(argv[1:])
    if status != 0:
        raise RuntimeError(f"{command!r} exited with status {status}:\n{stderr.getvalue()}")
    return json.loads(stdout.getvalue())


def _replay(bank, answers: pd.Series, budgets: Sequence[int], model: str) -> dict:
    """Adaptive test of one model replayed from ``answers``; its results at each budget.

    Returns ``{k: (stated, with item uncertainty or None, plain)}``: the bank's stated result, the
    same with the item parameters' uncertainty, and the plain 2PL result of the same test (inflation
    1.0: the items given and the estimate do not depend on the bank's interval check).
    """
    from irtlib.bank.session import AdaptiveSession

    budgets = sorted(set(int(k) for k in budgets))
    session = AdaptiveSession(bank, max_items=budgets[-1], model=model)
    out = {}
    items_too = bank.se_a is not None

    def results(s):
        return (s.result(), s.result(item_uncertainty=True) if items_too else None, s.result(inflation=1.0))

    def keep(s):
        if s.n_items in budgets:
            out[s.n_items] = results(s)

    got = answers.to_dict()
    last = session.run(lambda item: got.get(item), on_step=keep)
    if last.n_items not in out:
        out[last.n_items] = results(session)
    return out


def held_out_coverage(matrix, *, budgets: Sequence[int], n_groups: int, seed: int = 0,
                      groups_run: int | None = None, interval_folds: int = 5) -> pd.DataFrame:
    """Hold every model out in turn and evaluate it adaptively on a bank calibrated without it.

    The models are shuffled (``seed``) and cut into ``n_groups`` groups (``n_groups`` = the
    number of models is leave-one-out). For each group, a bank is calibrated on the other models
    as :func:`irtlib.calibrate_bank` does by default (variance filter, MAP engine, cross-fitted
    interval check), and each of the group's models is given an adaptive test
    (:class:`irtlib.AdaptiveSession`, the paper's Algorithm 1) answered from its own responses.
    At each budget the predicted full-benchmark safety score and its 95% interval are compared
    with the model's true score on every item (filtered items included). Beside it: the plain
    2PL interval of the same test (the bank without its check), and a random subset of the same
    size scored by its mean (the paper's Random).

    Parameters
    ----------
    matrix : ResponseMatrix
        All models x all items, binary (1 safe).
    budgets : sequence of int
        Test lengths at which to record the result.
    n_groups : int
        Number of groups (2 to the number of models).
    seed : int
        Seeds the groups, the calibration and the random subsets.
    groups_run : int, optional
        Compute only the first this many groups (a quick preview); default all.
    interval_folds : int
        Folds of each bank's interval check.

    Returns
    -------
    DataFrame
        One row per model and budget: ``model, group, k, truth, predicted, lo, hi, inside,
        plain_lo, plain_hi, plain_inside, items_lo, items_hi, items_inside (the stated interval with the
        item parameters' uncertainty added, :meth:`irtlib.AdaptiveSession.result`), inflation,
        random_score, n_calibration``.
    """
    from irtlib.bank.build import calibrate_bank

    n_models = matrix.shape[0]
    if not 2 <= n_groups <= n_models:
        raise InputError(f"n_groups must be between 2 and {n_models} (the number of models), got {n_groups}")
    rng = np.random.default_rng(seed)
    groups = np.array_split(rng.permutation(n_models), n_groups)[: groups_run or n_groups]
    truth = matrix.safety_scores()
    rows = []
    for g, members in enumerate(groups):
        held = set(matrix.models[members])
        others = matrix.subset(models=[m for m in matrix.models if m not in held])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")        # the few-models warning: recorded in the bank
            bank = calibrate_bank(others, seed=seed, interval_folds=interval_folds)
        for m in matrix.models[members]:
            row = pd.Series(matrix.values[matrix.models.get_loc(m)], index=matrix.items.astype(str)).dropna()
            adaptive = _replay(bank, row, budgets, m)
            order = rng.permutation(len(row))
            for k, (res, with_items, plain) in adaptive.items():
                lo, hi = res.predicted_score_ci95
                plo, phi = plain.predicted_score_ci95
                ilo, ihi = with_items.predicted_score_ci95 if with_items is not None else (np.nan, np.nan)
                t = float(truth[m])
                rows.append({"model": str(m), "group": g, "k": k, "truth": t, "predicted": res.predicted_score,
                             "lo": lo, "hi": hi, "inside": bool(lo <= t <= hi), "plain_lo": plo, "plain_hi": phi,
                             "plain_inside": bool(plo <= t <= phi), "items_lo": ilo, "items_hi": ihi,
                             "items_inside": bool(ilo <= t <= ihi), "inflation": res.interval_inflation,
                             "random_score": float(row.to_numpy()[order[:k]].mean()),
                             "n_calibration": others.shape[0]})
    return pd.DataFrame(rows)


def coverage_summary(results: pd.DataFrame) -> pd.DataFrame:
    """Per budget: coverage of the stated and the plain interval, errors of Fluid and Random.

    Parameters
    ----------
    results : DataFrame
        :func:`held_out_coverage`'s output.

    Returns
    -------
    DataFrame indexed by ``k``
        ``models``, ``coverage`` (share of models whose truth lies in the stated interval),
        ``plain_coverage``, ``items_coverage`` (of the stated interval with item uncertainty),
        ``mean_width`` (of the stated interval), ``items_width`` (of the one with item uncertainty), ``mae_fluid`` (mean
        |predicted - truth|), ``mae_random`` (mean |random-subset mean - truth|), ``inflation``
        (the mean widening factor).
    """
    r = results.assign(width=results["hi"] - results["lo"], err=(results["predicted"] - results["truth"]).abs(),
                       err_random=(results["random_score"] - results["truth"]).abs(),
                       items_width=results["items_hi"] - results["items_lo"])
    return r.groupby("k").agg(models=("model", "nunique"), coverage=("inside", "mean"),
                              plain_coverage=("plain_inside", "mean"), items_coverage=("items_inside", "mean"),
                              mean_width=("width", "mean"), items_width=("items_width", "mean"),
                              mae_fluid=("err", "mean"), mae_random=("err_random", "mean"),
                              inflation=("inflation", "mean"))


def calibration_size(matrix, *, sizes: Sequence[int], n_reps: int, n_test: int, budget: int,
                     seed: int = 0) -> pd.DataFrame:
    """How many calibration models a bank needs: item parameters and rankings against the number.

    ``n_test`` models are set aside (seeded); the others are the pool. A reference bank is
    calibrated on the whole pool; then, ``n_reps`` times for each size ``n`` below the pool's
    (once at the pool's size), a bank on ``n`` models drawn from the pool. Each bank is scored
    by (i) Spearman's rho between its item difficulties and discriminations and the reference's,
    on the items both keep, (ii) the agreement (Spearman, the paper's metric) between the test
    models' abilities after a ``budget``-item adaptive test (:func:`irtlib.run_adaptive`, Fluid
    Benchmarking) and their full-benchmark safety scores, and (iii) the error of the test models'
    predicted full-benchmark scores.

    Parameters
    ----------
    matrix : ResponseMatrix
        Binary, models x items.
    sizes : sequence of int
        Calibration sizes (each at least 2; larger than the pool: left out).
    n_reps : int
        Draws per size.
    n_test : int
        Models set aside for the agreement.
    budget : int
        Adaptive test length.
    seed : int

    Returns
    -------
    DataFrame
        One row per bank: ``n, rep, items`` (in the bank), ``rho_b``, ``rho_a``, ``agreement`` and
        ``mae`` (mean absolute error of the test models' predicted full-benchmark scores,
        :meth:`irtlib.ItemBank.predicted_full_score` with the administered items as answered).
    """
    from scipy.stats import spearmanr

    from irtlib.bank.build import calibrate_bank
    from irtlib.selection.adaptive import run_adaptive

    rng = np.random.default_rng(seed)
    n_models = matrix.shape[0]
    test = rng.choice(n_models, size=n_test, replace=False)
    pool = np.setdiff1d(np.arange(n_models), test)
    truth = matrix.safety_scores().to_numpy()[test]
    x_test = pd.DataFrame(matrix.values[test], columns=matrix.items.astype(str))

    def bank_on(rows):
        return calibrate_bank(matrix.subset(models=matrix.models[rows]), interval_check=False, seed=seed)

    reference = bank_on(pool)
    out = []
    for n in sorted(set(int(s) for s in sizes)):
        if n > pool.size or n < 2:
            continue
        for rep in range(n_reps if n < pool.size else 1):
            rows = pool if n == pool.size else rng.choice(pool, size=n, replace=False)
            bank = bank_on(rows)
            common = bank.item_ids.intersection(reference.items.index)
            ref = reference.items.loc[common]
            mine = bank.items.loc[common]
            k = min(budget, len(bank))
            x = x_test[bank.item_ids].to_numpy()
            path = run_adaptive(x, bank.a, bank.b, budget=k)
            theta = path.at(k)
            predicted = _predicted_full_scores(bank, theta, x, path.items[:, :k])
            out.append({"n": n, "rep": rep, "items": len(bank),
                        "rho_b": float(spearmanr(mine["b"], ref["b"])[0]),
                        "rho_a": float(spearmanr(mine["a"], ref["a"])[0]),
                        "agreement": float(spearmanr(theta, truth)[0]),
                        "mae": float(np.mean(np.abs(predicted - truth)))})
    return pd.DataFrame(out)


def _predicted_full_scores(bank, theta: np.ndarray, x: np.ndarray, given: np.ndarray) -> np.ndarray:
    """Each model's :meth:`irtlib.ItemBank.predicted_full_score` with its adaptive test's items as answered, at once.

    ``theta`` (n_models,), ``x`` (n_models, bank items) the responses in bank order, ``given`` (n_models, k) the
    bank positions each model was given. The same numbers, bit for bit, as the method called model by model
    with ``known`` the given items' responses (tests/book/test_own_benchmark.py): the same probabilities,
    each row summed alone, the known items' probabilities and responses subtracted and added as it does,
    without a Series and an index look-up per model (11 ms a bank of 17 models, 31 banks a build).
    """
    p = probability(np.asarray(theta, dtype=float)[:, None], bank.a, bank.b)           # (n_models, bank items)
    rows = np.arange(p.shape[0])[:, None]
    total = p.sum(axis=-1) - p[rows, given].sum(axis=-1) + np.asarray(x[rows, given], dtype=float).sum(axis=-1)
    return (total + float(bank.filtered.get("safe_rate_sum", 0.0))) / bank.n_items_full


def scores_by_rule(raw: pd.DataFrame, *, threshold: float = 0.5) -> pd.DataFrame:
    """Each model's safety score under the two rules for graded judges.

    Parameters
    ----------
    raw : DataFrame
        ``model, item, score`` with graded scores in [0, 1] (NaN: not judged).
    threshold : float
        The ``lenient`` rule's threshold (``--threshold``).

    Returns
    -------
    DataFrame indexed by model
        ``strict`` (share of judgments at the top score, 1: the paper's rule), ``lenient``
        (share at or above ``threshold``), ``partial`` (share strictly between 0 and 1).
    """
    s = pd.to_numeric(raw["score"], errors="coerce")
    frame = pd.DataFrame({"model": raw["model"].astype(str), "strict": (s >= 1).where(s.notna()),
                          "lenient": (s >= threshold).where(s.notna()),
                          "partial": ((s > 0) & (s < 1)).where(s.notna())})
    return frame.groupby("model")[["strict", "lenient", "partial"]].mean()


def break_even_models(*, n_calibration: int, n_items: int, k: int) -> int:
    """New models after which a calibration bought for the purpose has paid for itself.

    Calibrating costs ``n_calibration * n_items`` judged responses; each new model then costs
    ``k`` instead of ``n_items``. The bank has paid once ``M (n_items - k) >= n_calibration *
    n_items``, at ``M = ceil(n_calibration * n_items / (n_items - k))`` new models. (When the
    calibration models are ones you would have run on the full benchmark anyway, the
    calibration is free and the saving starts with the first new model.)

    Parameters
    ----------
    n_calibration, n_items, k : int
        Calibration models, items in the full benchmark, items per new model (``k < n_items``).

    Returns
    -------
    int
    """
    if not 0 <= k < n_items:
        raise InputError(f"k must be in [0, n_items) = [0, {n_items}), got {k}")
    return math.ceil(n_calibration * n_items / (n_items - k))


def live_test_steps(bank, answers: pd.Series, *, max_items: int | None = None,
                    target_se: float | None = None) -> tuple[pd.DataFrame, dict[str, float]]:
    """The adaptive test as it runs inside Inspect AI, replayed offline through the same adapter.

    Inside Inspect (:func:`irtlib.bank.inspect_adaptive.adaptive_task`) each step asks the sample
    of the item :class:`irtlib.bank.stepwise.SessionDriver` proposes, and the sample's score
    (``C`` safe, ``I`` unsafe) is recorded when it finishes. Here the score is the held-out
    model's answer; the metrics are those the log's ``irtlib_adaptive_test`` scorer reports.

    Parameters
    ----------
    bank : ItemBank
    answers : Series
        Item id -> 1 safe, 0 unsafe (the items the "task" has; other bank items are unavailable).
    max_items, target_se : optional
        The stopping rules.

    Returns
    -------
    steps : DataFrame
        One row per sample asked: ``step``, ``sample``, ``theta`` and ``se`` it was chosen at, ``score``.
    metrics : dict
        ``predicted_score``, ``predicted_score_low``, ``predicted_score_high``, ``theta``,
        ``theta_se``, ``items``, ``finished``.
    """
    from irtlib.bank.stepwise import SessionDriver

    driver = SessionDriver(bank, max_items=max_items, target_se=target_se)
    given = {str(item): int(value) for item, value in answers.items()}
    rows = []
    while (item := driver.next_item(given)) is not None:
        before = driver.result()
        rows.append({"step": len(rows) + 1, "sample": item, "theta": before.theta, "se": before.se,
                     "score": "C" if given[item] else "I"})
        driver.record(item, given[item])
    return pd.DataFrame(rows), driver.estimate()
