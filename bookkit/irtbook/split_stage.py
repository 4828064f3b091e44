"""The book's calibrations as one stage, run before the chapters and shared by all of them.

Every agreement-protocol run of the book that calibrates its splits with the authors' engine
(``"pyirt-authors"``: py-irt's hierarchical 2PL, 1,000 epochs per split; a QUICK build's
:data:`irtbook.pipeline.QUICK_AUTHORS_EPOCHS`, :func:`irtbook.pipeline.chapter_engine`) reads each split's fit
from :mod:`irtlib.calibration.split_cache`, keyed by the split's training block, the settings and
the code. This module computes those training blocks for every run the chapters make
(:func:`stage_runs`) and fits all that are not cached yet, one batched fit per width (the widest cut
in two), on both cores (:func:`run_stage`). A chapter run afterwards finds every calibration on disk; a chapter run
without the stage fits what it needs itself, with the same result (a split's fit does not depend
on the rest of its batch), only more slowly. The stage also fits each benchmark whole with the three
engines the fit chapters compare (:func:`benchmark_fits`), which chapters 2 to 6 read; the command
line runs the split batches and the whole fits as one list of jobs in one pool of processes, the
longest first (:func:`run_jobs`).

Run it from the repository root (the Makefile does, before the chapters)::

    python -m irtbook.split_stage [--quick] [--cache-dir _build/cache] [--workers 2]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from irtlib.protocol import presets as protocols

__all__ = ["StageRun", "StageJob", "stage_runs", "training_blocks", "training_rows", "split_jobs", "whole_fit_jobs",
           "run_jobs", "stage_pool", "run_stage", "benchmark_fits", "load_benchmarks", "main", "BOOK_BENCHMARKS",
           "QUICK_MAX_SPLITS", "QUICK_N_JOBS", "FRESH_ANCHOR_MAX_ITEMS"]

#: The six benchmarks of the paper's Table 1, as the protocol chapters (05, 06) run them.
BOOK_BENCHMARKS = ("airbench2024", "anthropic-red-team", "harmbench", "safetybench", "simplesafetytests", "wmdp-bio")
#: The split count a QUICK build caps every protocol run at (chapters 05 and 06, which import it): two, the
#: fewest whose mean, band (a standard deviation over splits, ddof 1) and paired differences (a Student-t
#: interval on one degree of freedom) are all defined, so a preview runs every code path.
QUICK_MAX_SPLITS = 2
#: The worker processes of a QUICK build's protocol runs (chapters 04b to 09 cap ``N_JOBS`` at it): one. With two
#: splits per run, each joblib worker (a fresh interpreter) spends more CPU importing numpy, scipy, scikit-learn and
#: irtlib than on its share of the work, while ``make -j2`` keeps both cores busy with two chapters anyway (chapter
#: 06's paper's-text runs: 15.9 CPU s in one process, 24.8 with two workers; ``benchmarks/RESULTS.md``, issue 26
#: ``qk``). The results do not depend on it (it is no part of any cache key).
QUICK_N_JOBS = 1
#: Chapter 05's speed rule for Anchor Points (it does not change the calibrations, only the cache key of a run).
FRESH_ANCHOR_MAX_ITEMS = 2000
#: Chapter 04b's protocol run with the authors' calibration: benchmark, splits (full, QUICK), test models, seed.
MODEL_FIT_RUN = ("harmbench", 20, QUICK_MAX_SPLITS, 10, 0)


@dataclass(frozen=True)
class StageRun:
    """One protocol run of a chapter whose splits the stage calibrates.

    Attributes
    ----------
    label : str
        Which chapter asks for it and on what (for the log).
    bench : irtbook.pipeline.Benchmark
    protocol : Protocol
    n_splits, n_test, seed : int
    threshold : float
        The variance filter's threshold (:func:`irtbook.pipeline.protocol_benchmark`'s).
    epochs : int, optional
        Epochs of the authors' calibration of every split (None: the protocol's own,
        :func:`irtbook.authors_engine.authors_epochs`); part of each split's cache key.
    """

    label: str
    bench: object
    protocol: protocols.Protocol
    n_splits: int
    n_test: int
    seed: int
    threshold: float = 0.01
    epochs: int | None = None


def load_benchmarks(*, data: str | None = None, rule: str = "strict") -> dict:
    """The benchmarks of :data:`BOOK_BENCHMARKS` by name (:func:`irtbook.pipeline.load_benchmark`)."""
    from .pipeline import load_benchmark

    return {b: load_benchmark(b, rule=rule, source=data) for b in BOOK_BENCHMARKS}


def stage_runs(*, quick: bool, data: str | None = None, rule: str = "strict",
               benches: dict | None = None) -> list[StageRun]:
    """The protocol runs of the chapters that calibrate their splits with the authors' engine.

    Chapters 05 and 06: the authors' protocol on the six benchmarks (their split counts, capped at
    :data:`QUICK_MAX_SPLITS` in a QUICK build; the ceilings use the same splits), and chapter 05's
    two HarmBench variants (without the copyright behaviours, and those alone) where HarmBench's
    item file names the categories. Chapter 04b: the paper's protocol on HarmBench with the
    authors' calibration (:data:`MODEL_FIT_RUN`). Every split at the epochs the chapters' calibration
    runs (:func:`irtbook.pipeline.chapter_epochs`: the paper's 1,000, a QUICK build's
    :data:`irtbook.pipeline.QUICK_AUTHORS_EPOCHS`).

    Parameters
    ----------
    quick : bool
        A QUICK build's sizes.
    data, rule
        As the chapters' ``DATA`` and ``RULE`` parameters (:func:`irtbook.pipeline.load_benchmark`).
    benches : dict, optional
        The benchmarks of :data:`BOOK_BENCHMARKS` by name, loaded with ``data`` and ``rule`` already
        (:func:`load_benchmarks`); else they are loaded here.

    Returns
    -------
    list of StageRun
    """
    from .authors_engine import AUTHORS_ENGINE, authors_epochs
    from .pipeline import book_protocol, chapter_epochs, harmbench_variants, protocol_sizes

    max_splits = QUICK_MAX_SPLITS if quick else None
    epochs = chapter_epochs(AUTHORS_ENGINE, authors_epochs(), quick=quick)
    benches = load_benchmarks(data=data, rule=rule) if benches is None else benches
    runs = []
    for name, bench in benches.items():
        proto = book_protocol(bench, "authors", fresh_anchor_max_items=FRESH_ANCHOR_MAX_ITEMS)
        n_splits, n_test = protocol_sizes(bench, protocol=proto, max_splits=max_splits)
        runs.append(StageRun(f"05/06 {name}", bench, proto, n_splits, n_test, proto.seed, epochs=epochs))
        if name == "harmbench":
            for label, variant in harmbench_variants(bench).items():
                if variant is not bench:
                    runs.append(StageRun(f"05 {name} ({label})", variant, proto, n_splits, n_test, proto.seed,
                                         epochs=epochs))
    name, full_splits, quick_splits, n_test, seed = MODEL_FIT_RUN
    runs.append(StageRun(f"04b {name}", benches[name], protocols.resolve(None, benchmark=name),
                         quick_splits if quick else full_splits, n_test, seed, epochs=epochs))
    return runs


def training_blocks(run: StageRun) -> tuple[list[np.ndarray], list[int]]:
    """The training block and calibration seed of every split of ``run``, as the protocol draws them.

    The same blocks :func:`irtlib.protocol.agreement.run_protocol` hands the calibration engine
    (:func:`irtlib.protocol.agreement.split_training`), so their cache keys are the protocol's.

    Returns
    -------
    blocks : list of ndarray, each shape (n_train, n_items)
    seeds : list of int
    """
    values, rows, seeds = training_rows(run)
    return [values[r] for r in rows], seeds


def training_rows(run: StageRun) -> tuple[np.ndarray, list[np.ndarray], list[int]]:
    """:func:`training_blocks` as the run's filtered matrix and each split's training rows into it.

    ``values[rows[s]]`` is split ``s``'s training block (the same cells, in the same order), without a copy
    of the matrix per split: the stage hands its jobs the matrix and the rows (a batched fit and the split
    cache take exactly these), so SafetyBench's 70 splits of 23 of its 29 models move 29 rows between the
    processes, not 70 x 23.

    Returns
    -------
    values : ndarray, shape (n_models, n_items)
        The run's filtered responses (C order).
    rows : list of ndarray of int
    seeds : list of int
    """
    from irtlib.protocol.agreement import protocol_data, split_training

    proto = run.protocol
    filtered, _, _ = protocol_data(run.bench.full, variance_threshold=run.threshold, reference=proto.reference,
                                   groups=None, n_test=run.n_test, seed=run.seed, n_test_groups=1,
                                   variance_rule=proto.variance_rule, split_rule=proto.split_rule)
    values = np.ascontiguousarray(filtered.values)
    rows, seeds = split_training(values.shape[0], range(run.n_splits), n_test=run.n_test, seed=run.seed,
                                 protocol=proto)
    return values, [np.asarray(r, dtype=np.int64) for r in rows], [int(s) for s in seeds]


def _shared_matrix(entries: list) -> tuple[np.ndarray, list[np.ndarray]]:
    """The distinct matrices of ``entries`` (label, matrix, rows, seed) stacked, and each entry's rows into the stack.

    Runs on the same matrix (chapter 05/06's and 04b's HarmBench) share its rows; equal matrices are kept once.
    """
    distinct: list = []                   # (matrix, first row in the stack)
    rows = []
    start = 0
    for _, values, r, _ in entries:
        offset = next((first for kept, first in distinct if kept is values or (
            kept.shape == values.shape and np.array_equal(kept, values, equal_nan=True))), None)
        if offset is None:
            offset = start
            distinct.append((values, offset))
            start += values.shape[0]
        rows.append(r + offset)
    matrix = distinct[0][0] if len(distinct) == 1 else np.vstack([m for m, _ in distinct])
    return matrix, rows


def run_stage(runs: list[StageRun], *, cache_dir, workers: int = 2, log=None) -> dict:
    """Fit every split of ``runs`` that is not in the cache: one batched fit per width (items kept), largest first.

    Parameters
    ----------
    runs : list of StageRun
    cache_dir : path-like
        The chapters' cache (``CACHE_DIR``); the fits go where the chapters look for them
        (:func:`irtbook.pipeline.split_cache`).
    workers : int
        Processes the batched fits run in (:func:`run_jobs`): a width's splits are one fit in one
        process, or, for the widths with the most cells, cut into ``workers`` fits.
    log : file-like, optional
        One line per batched fit.

    Returns
    -------
    dict
        ``splits`` (split calibrations asked for), ``fitted`` (those not cached before), ``seconds`` (wall).
    """
    start = time.perf_counter()
    jobs, asked, fitted = split_jobs(runs, cache_dir=cache_dir, workers=workers)
    run_jobs(jobs, workers=workers, log=log)
    return {"splits": asked, "fitted": fitted, "seconds": time.perf_counter() - start}


@dataclass(frozen=True)
class StageJob:
    """One unit of the stage's work, run in a worker process: ``function(*args)`` returns its log line.

    ``cost`` estimates its CPU seconds (cells and columns of a fit times its epochs, plus each fit's
    per-epoch Python), so that the longest jobs start first.
    """

    cost: float
    function: object
    args: tuple


#: Estimated CPU seconds of one batched fit of 1,000 epochs: per training cell, per parameter column,
#: and the per-epoch Python of one fit (the hyper-parameters' small torch operations; measured on the
#: shared 2-core machine, ``benchmarks/RESULTS.md``, issue 26 ``stg2``). Only their ratios matter.
COST_PER_CELL, COST_PER_COLUMN, COST_PER_FIT = 2.2e-6, 1.5e-5, 2.0
#: A width's splits are cut into ``workers`` batched fits when they cost more than this share of the stage's
#: split fits and more than CUT_MIN_COST seconds (each part pays a fit's per-epoch Python again): SafetyBench
#: (about half of them) is cut in two; AIR-Bench (about a sixth) is not, since the other process fits the
#: smaller widths meanwhile, and cutting it would cost one more fit's per-epoch Python.
SPLIT_SHARE, CUT_MIN_COST = 0.25, 10.0


def _fit_cost(n_splits: int, rows: int, n_items: int, epochs: int = 1000) -> float:
    cells, columns = n_splits * rows * n_items, n_splits * (rows + 2 * n_items)
    return (COST_PER_CELL * cells + COST_PER_COLUMN * columns + COST_PER_FIT) * epochs / 1000


def split_jobs(runs: list[StageRun], *, cache_dir, workers: int) -> tuple[list[StageJob], int, int]:
    """The stage's split calibrations as jobs: every split of one width in one batched fit, or cut in ``workers``.

    Splits of one width (and one epoch count) share a batched fit whatever their seeds (each split draws
    from its own stream), so the paper's protocol's one seed per split costs one batch, not one fit per split. A
    split's fit does not depend on the rest of its batch, so how the splits are cut changes no number;
    cutting pays each fit's per-epoch Python once more, so only the widths with the most cells are cut
    (so that both cores stay busy to the end). Widths whose splits are all cached give no job.

    Returns
    -------
    jobs : list of StageJob
    asked, fitted : int
        Split calibrations asked for, and those not cached yet.
    """
    from irtlib.calibration.split_cache import missing_splits

    from .authors_engine import authors_epochs
    from .pipeline import split_cache

    directory = split_cache(cache_dir)
    groups: dict = {}                     # (n_items, epochs) -> [(label, matrix, rows, seed)]
    for run in runs:
        values, rows, seeds = training_rows(run)
        epochs = authors_epochs() if run.epochs is None else int(run.epochs)
        for r, seed in zip(rows, seeds, strict=True):
            groups.setdefault((values.shape[1], epochs), []).append((run.label, values, r, int(seed)))
    asked = fitted = 0
    pending = []
    for (_, epochs), entries in groups.items():
        matrix, rows = _shared_matrix(entries)
        seeds = [seed for *_, seed in entries]
        todo = missing_splits(matrix, rows, seed=seeds, cache_dir=directory, epochs=epochs)
        asked, fitted = asked + len(rows), fitted + todo
        if todo:
            pending.append((entries, matrix, rows, seeds, todo, epochs))
    total = sum(_fit_cost(todo, max(r.size for r in rows), matrix.shape[1], epochs)
                for _, matrix, rows, _, todo, epochs in pending)
    jobs = []
    for entries, matrix, rows, seeds, todo, epochs in pending:
        n_rows, n_items = max(r.size for r in rows), matrix.shape[1]
        cost = _fit_cost(todo, n_rows, n_items, epochs)
        n_parts = workers if workers > 1 and cost > max(SPLIT_SHARE * total, CUT_MIN_COST) else 1
        labels = ", ".join(dict.fromkeys(label for label, *_ in entries))
        for k, part in enumerate(np.array_split(np.arange(len(entries)), n_parts)):
            name = labels if n_parts == 1 else f"{labels} (part {k + 1} of {n_parts})"
            jobs.append(StageJob(cost / n_parts, _fit_splits,
                                 (name, matrix, [rows[i] for i in part], [seeds[i] for i in part], directory, epochs)))
    return jobs, asked, fitted


def _fit_splits(label, block, rows, seeds, directory, epochs) -> str:
    """A stage job: the splits' batched fit (``epochs`` epochs) into the split cache, one process; its log line."""
    from irtlib.calibration.split_cache import fit_2pl_splits_cached, missing_splits

    start = time.perf_counter()
    todo = missing_splits(block, rows, seed=seeds, cache_dir=directory, epochs=epochs)
    if todo:
        fit_2pl_splits_cached(block, rows, seed=seeds, cache_dir=directory, workers=1, epochs=epochs)
    return (f"{label}: {len(rows)} splits of {block.shape[1]} items, {epochs} epochs, {todo} fitted, "
            f"{time.perf_counter() - start:.1f} s")


def run_jobs(jobs: list[StageJob], *, workers: int, log=None, pool: object | None = None) -> None:
    """Run the stage's jobs, the most costly first, in ``workers`` processes (1: here, one after the other).

    The processes are spawned once for all the jobs (a fit's random streams and kernels do not depend
    on the process) with their BLAS thread pools at one thread each, as joblib's workers had them, so
    the fits that use BLAS give the numbers they gave there; ``pool`` is one :func:`stage_pool` started
    earlier (else one is started here). Each job's line goes to ``log`` as it ends, with the process
    that ran it, when it started and ended (seconds since the first job was handed out) and its CPU
    seconds; a last line says how long each process was busy, so that idle cores show.
    """
    jobs = sorted(jobs, key=lambda job: -job.cost)
    origin = time.time()
    records: list[tuple] = []
    if pool is None and (workers <= 1 or len(jobs) <= 1):
        for job in jobs:
            _log(log, _record(_timed(job.function, job.args), origin, records))
    else:
        from concurrent.futures import as_completed

        with contextlib.nullcontext(pool) if pool is not None else stage_pool(workers) as running:
            for future in as_completed([running.submit(_timed, job.function, job.args) for job in jobs]):
                _log(log, _record(future.result(), origin, records))
    if records:
        busy: dict = {}
        for pid, start, end, _ in records:
            busy[pid] = busy.get(pid, 0.0) + end - start
        span = max(end for _, _, end, _ in records)
        _log(log, f"{len(records)} jobs in {span:.1f} s from the first; processes busy "
                  + ", ".join(f"{b:.1f} s" for b in busy.values())
                  + f"; {sum(cpu for *_, cpu in records):.1f} CPU s in the jobs")


def _timed(function, args) -> tuple:
    """A job as run in a worker: its log line, the process, its start and end (epoch seconds), its CPU seconds."""
    import os

    start, cpu = time.time(), time.process_time()
    line = function(*args)
    return line, os.getpid(), start, time.time(), time.process_time() - cpu


def _record(result, origin: float, records: list) -> str:
    """A job's log line with where and when it ran; its (process, start, end, CPU) appended to ``records``."""
    line, pid, start, end, cpu = result
    records.append((pid, start - origin, end - origin, cpu))
    processes = list(dict.fromkeys(p for p, *_ in records))
    return (f"{line} [process {processes.index(pid) + 1}, {start - origin:.1f} to {end - origin:.1f} s, "
            f"{cpu:.1f} CPU s]") if line else line


@contextlib.contextmanager
def stage_pool(workers: int, *, share_torch: bool = True) -> Iterator[object | None]:
    """``workers`` spawned processes for :func:`run_jobs`, each importing torch and loading the fit's kernels now.

    Started before the jobs are known, so that the workers' start (torch's import, the kernels' checks
    against torch) runs while this process computes the training blocks; None for one worker.

    Forked where this process has not imported torch (the stage's command line imports none) and the
    platform forks: each worker then starts with this process's modules (irtlib, numpy, pandas: about
    0.8 CPU s a worker not spent again). ``share_torch``: this process imports torch first, running none
    of its operations, so that the workers start with it too (as the pages' kernel server does): its
    import, about 1.7 CPU s, once instead of once a worker, but before the workers start rather than in
    them while this process reads the benchmarks. That pays in a full build's stage; in a QUICK build's,
    a few seconds of fits, it only delays them (the stage 0.6 s longer). Spawned otherwise: a fork of a
    process that has run torch's thread pools can hang. No number depends on it.
    """
    if workers <= 1:
        yield None
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    method = "fork" if "torch" not in sys.modules and "fork" in multiprocessing.get_all_start_methods() else "spawn"
    if method == "fork" and share_torch:
        try:
            import torch  # noqa: F401  (imported only: no thread pool has started when the workers fork)
        except ImportError:      # the light install: the workers say so when a fit needs it
            pass
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method),
                             initializer=_one_blas_thread) as pool:
        for _ in range(workers):           # each submission while no worker is idle starts one
            pool.submit(_warm_up)
        yield pool


def _warm_up() -> None:
    """Torch and the batched fit's kernels loaded (each checked against torch once).

    A stage worker's start and first task: the first loads them, the second finds them loaded.
    """
    from irtlib.calibration import adam_kernel, fused_kernel, stream_kernel

    fused_kernel.load()
    stream_kernel.load()
    adam_kernel.load()


def _one_blas_thread() -> None:
    """A stage worker's start: one BLAS thread, then torch and the kernels loaded with the cyclic collector off.

    BLAS and OpenMP thread pools at one thread (two workers share two cores); then :func:`_warm_up` with Python's
    cyclic collector off, and every object it made frozen (:func:`gc.freeze`) before the collector is on again.

    The imports make a few hundred thousand objects that live as long as the process; the collector would walk
    them in each of its full collections, during the imports and during the jobs (its passes took about 1 CPU s
    of the two workers in a ``perf`` profile of the stage, ``benchmarks/RESULTS.md``, issue 26 ``stg``; the
    imports alone about 0.3 CPU s a process). No number depends on it.
    """
    import gc

    from threadpoolctl import threadpool_limits

    globals()["_THREAD_LIMIT"] = threadpool_limits(1)
    enabled = gc.isenabled()
    gc.disable()
    try:
        _warm_up()
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def _log(log, line) -> None:
    if log is not None and line:
        print(f"[split stage] {line}", file=log, flush=True)


def _benchmark_fit(bench, engine, seed, epochs, cache_dir) -> str:
    """A stage job: one whole-benchmark fit into the chapters' cache; its log line."""
    start = time.perf_counter()
    from .pipeline import calibrate_benchmark

    calibrate_benchmark(bench, engine=engine, seed=seed, epochs=epochs, lr=0.1, cache_dir=cache_dir)
    return f"whole fit {bench.name} by {engine} (seed {seed}): {time.perf_counter() - start:.1f} s"


def whole_fit_jobs(*, quick: bool, cache_dir, data: str | None = None, rule: str = "strict",
                   benches: dict | None = None) -> tuple[list[StageJob], int]:
    """The whole-benchmark 2PL fits of chapters 2 to 6 not in the cache yet, as stage jobs.

    :func:`irtbook.pipeline.calibrate_benchmark` of each of :data:`BOOK_BENCHMARKS` with every
    engine of :data:`irtbook.pipeline.CHAPTER_ENGINES` (seed 0, learning rate 0.1, the
    epochs :func:`irtbook.pipeline.chapter_epochs` gives), and SimpleSafetyTests by py-irt
    with the text's priors and seed 1 (chapter 2's seed check); what is cached already gives no job.

    Returns
    -------
    jobs : list of StageJob
    asked : int
        The whole fits the chapters read.
    """
    from .cache import cache_path
    from .pipeline import CHAPTER_ENGINES, benchmark_fit_key, chapter_epochs

    loaded = load_benchmarks(data=data, rule=rule) if benches is None else benches
    benches = [loaded[b] for b in BOOK_BENCHMARKS]
    jobs = [(bench, engine, 0, chapter_epochs(engine, 1000, quick=quick)) for engine in CHAPTER_ENGINES
            for bench in benches]
    sst = benches[BOOK_BENCHMARKS.index("simplesafetytests")]
    jobs.append((sst, "pyirt", 1, chapter_epochs("pyirt", 1000, quick=quick)))   # chapter 2's second seed
    todo = [(bench, engine, seed, epochs) for bench, engine, seed, epochs in jobs if cache_dir is None
            or not cache_path(benchmark_fit_key(bench, engine=engine, seed=seed, epochs=epochs, lr=0.1),
                              cache_dir).exists()]

    def cost(bench, engine, epochs):      # the MAP fits: a fraction of a second
        n_rows, n_items = bench.filtered.values.shape
        return 0.0 if engine == "map" else _fit_cost(1, n_rows, n_items, epochs)

    return [StageJob(cost(bench, engine, epochs), _benchmark_fit, (bench, engine, seed, epochs, cache_dir))
            for bench, engine, seed, epochs in todo], len(jobs)


def benchmark_fits(*, quick: bool, cache_dir, workers: int = 2, data: str | None = None, rule: str = "strict",
                   log=None) -> float:
    """The whole-benchmark fits of :func:`whole_fit_jobs`, ``workers`` at a time, the largest first; wall seconds."""
    start = time.perf_counter()
    jobs, _ = whole_fit_jobs(quick=quick, cache_dir=cache_dir, data=data, rule=rule)
    run_jobs(jobs, workers=workers, log=log)
    return time.perf_counter() - start


def main(argv=None) -> int:
    """Command line: calibrate the book's splits into the chapters' cache."""
    parser = argparse.ArgumentParser(prog="python -m irtbook.split_stage", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a QUICK build's split counts")
    parser.add_argument("--cache-dir", default="_build/cache", help="the chapters' CACHE_DIR (default %(default)s)")
    parser.add_argument("--workers", type=int, default=2, help="processes per batched fit (default %(default)s)")
    parser.add_argument("--data", default=None, help="auto, real or simulated (default: $IRTLIB_DATA or auto)")
    parser.add_argument("--rule", default="strict", help="binarization of graded judgments (default %(default)s)")
    args = parser.parse_args(argv)
    # The split batches and the whole-benchmark fits are one list of jobs for one pool of processes,
    # the longest first, so that neither waits for the other and no fit's process is started twice.
    start = time.perf_counter()
    with stage_pool(args.workers, share_torch=not args.quick) as pool:
        benches = load_benchmarks(data=args.data, rule=args.rule)      # once for both lists
        split, asked, fitted = split_jobs(stage_runs(quick=args.quick, benches=benches),
                                          cache_dir=args.cache_dir, workers=args.workers)
        whole, whole_asked = whole_fit_jobs(quick=args.quick, cache_dir=args.cache_dir, benches=benches)
        run_jobs(split + whole, workers=args.workers, log=sys.stderr, pool=pool)
    print(f"[split stage] {asked} split calibrations, {fitted} fitted; {whole_asked} whole-benchmark fits, "
          f"{len(whole)} fitted; {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
