"""The book's calibrations as one stage, run before the chapters and shared by all of them.

Every agreement-protocol run of the book that calibrates its splits with the authors' engine
(``"pyirt-authors"``: py-irt's hierarchical 2PL, 1,000 epochs per split) reads each split's fit
from :mod:`irtlib.calibration.split_cache`, keyed by the split's training block, the settings and
the code. This module computes those training blocks for every run the chapters make
(:func:`stage_runs`) and fits all that are not cached yet, one batched fit per benchmark, on both
cores (:func:`run_stage`). A chapter run afterwards finds every calibration on disk; a chapter run
without the stage fits what it needs itself, with the same result (a split's fit does not depend
on the rest of its batch), only more slowly. The stage also fits each benchmark whole with the three
engines the fit chapters compare (:func:`benchmark_fits`), which chapters 2 to 6 read, at the same
time as the split batches.

Run it from the repository root (the Makefile does, before the chapters)::

    python -m irtbook.split_stage [--quick] [--cache-dir _build/cache] [--workers 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

import numpy as np

from irtlib.protocol import presets as protocols

__all__ = ["StageRun", "stage_runs", "training_blocks", "run_stage", "benchmark_fits", "main", "BOOK_BENCHMARKS",
           "QUICK_MAX_SPLITS", "FRESH_ANCHOR_MAX_ITEMS"]

#: The six benchmarks of the paper's Table 1, as the protocol chapters (05, 06) run them.
BOOK_BENCHMARKS = ("airbench2024", "anthropic-red-team", "harmbench", "safetybench", "simplesafetytests", "wmdp-bio")
#: The split count a QUICK build caps every protocol run at (chapters 05 and 06).
QUICK_MAX_SPLITS = 10
#: Chapter 05's speed rule for Anchor Points (it does not change the calibrations, only the cache key of a run).
FRESH_ANCHOR_MAX_ITEMS = 2000
#: Chapter 04b's protocol run with the authors' calibration: benchmark, splits (full, QUICK), test models, seed.
MODEL_FIT_RUN = ("harmbench", 20, 3, 10, 0)


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
    """

    label: str
    bench: object
    protocol: protocols.Protocol
    n_splits: int
    n_test: int
    seed: int
    threshold: float = 0.01


def stage_runs(*, quick: bool, data: str | None = None, rule: str = "strict") -> list[StageRun]:
    """The protocol runs of the chapters that calibrate their splits with the authors' engine.

    Chapters 05 and 06: the authors' protocol on the six benchmarks (their split counts, capped at
    :data:`QUICK_MAX_SPLITS` in a QUICK build; the ceilings use the same splits), and chapter 05's
    two HarmBench variants (without the copyright behaviours, and those alone) where HarmBench's
    item file names the categories. Chapter 04b: the paper's protocol on HarmBench with the
    authors' calibration (:data:`MODEL_FIT_RUN`).

    Parameters
    ----------
    quick : bool
        A QUICK build's sizes.
    data, rule
        As the chapters' ``DATA`` and ``RULE`` parameters (:func:`irtbook.pipeline.load_benchmark`).

    Returns
    -------
    list of StageRun
    """
    from .pipeline import book_protocol, harmbench_variants, load_benchmark, protocol_sizes

    max_splits = QUICK_MAX_SPLITS if quick else None
    benches = {b: load_benchmark(b, rule=rule, source=data) for b in BOOK_BENCHMARKS}
    runs = []
    for name, bench in benches.items():
        proto = book_protocol(bench, "authors", fresh_anchor_max_items=FRESH_ANCHOR_MAX_ITEMS)
        n_splits, n_test = protocol_sizes(bench, protocol=proto, max_splits=max_splits)
        runs.append(StageRun(f"05/06 {name}", bench, proto, n_splits, n_test, proto.seed))
        if name == "harmbench":
            for label, variant in harmbench_variants(bench).items():
                if variant is not bench:
                    runs.append(StageRun(f"05 {name} ({label})", variant, proto, n_splits, n_test, proto.seed))
    name, full_splits, quick_splits, n_test, seed = MODEL_FIT_RUN
    runs.append(StageRun(f"04b {name}", benches[name], protocols.resolve(None, benchmark=name),
                         quick_splits if quick else full_splits, n_test, seed))
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
    from irtlib.protocol.agreement import protocol_data, split_training

    proto = run.protocol
    filtered, _, _ = protocol_data(run.bench.full, variance_threshold=run.threshold, reference=proto.reference,
                                   groups=None, n_test=run.n_test, seed=run.seed, n_test_groups=1,
                                   variance_rule=proto.variance_rule, split_rule=proto.split_rule)
    values = np.ascontiguousarray(filtered.values)
    rows, seeds = split_training(values.shape[0], range(run.n_splits), n_test=run.n_test, seed=run.seed,
                                 protocol=proto)
    return [values[r] for r in rows], seeds


def run_stage(runs: list[StageRun], *, cache_dir, workers: int = 2, log=None) -> dict:
    """Fit every split of ``runs`` that is not in the cache: one batched fit per width (items kept), largest first.

    Parameters
    ----------
    runs : list of StageRun
    cache_dir : path-like
        The chapters' cache (``CACHE_DIR``); the fits go where the chapters look for them
        (:func:`irtbook.pipeline.split_cache`).
    workers : int
        Processes per batched fit (:func:`irtlib.calibration.pyirt_batch.fit_2pl_splits`).
    log : file-like, optional
        One line per benchmark.

    Returns
    -------
    dict
        ``splits`` (split calibrations asked for), ``fitted`` (those not cached before), ``seconds`` (wall).
    """
    from irtlib.calibration.split_cache import fit_2pl_splits_cached, missing_splits

    from .pipeline import split_cache

    directory = split_cache(cache_dir)
    start = time.perf_counter()
    groups: dict = {}                     # n_items -> [(label, block, seed)]: one batched fit each
    for run in runs:
        blocks, seeds = training_blocks(run)
        for block, seed in zip(blocks, seeds, strict=True):
            groups.setdefault(block.shape[1], []).append((run.label, block, int(seed)))
    asked = fitted = 0
    # Splits of one width share a batched fit whatever their seeds (each split draws from its own
    # stream): the paper's protocol's one seed per split costs one batch, not one fit per split.
    for n_items, entries in sorted(groups.items(), key=lambda g: -g[0] * sum(blk.shape[0] for _, blk, _ in g[1])):
        starts = np.cumsum([0] + [blk.shape[0] for _, blk, _ in entries])
        stacked = np.vstack([blk for _, blk, _ in entries])
        rows = [np.arange(starts[i], starts[i + 1]) for i in range(len(entries))]
        seeds = [seed for *_, seed in entries]
        todo = missing_splits(stacked, rows, seed=seeds, cache_dir=directory)
        asked, fitted = asked + len(rows), fitted + todo
        t = time.perf_counter()
        if todo:
            fit_2pl_splits_cached(stacked, rows, seed=seeds, cache_dir=directory, workers=workers)
        _log(log, [label for label, *_ in entries], len(rows), n_items, todo, time.perf_counter() - t)
    return {"splits": asked, "fitted": fitted, "seconds": time.perf_counter() - start}


def _log(log, labels, n_splits, n_items, fitted, seconds) -> None:
    if log is not None:
        print(f"[split stage] {', '.join(dict.fromkeys(labels))}: {n_splits} splits of {n_items} items, {fitted} "
              f"fitted, {seconds:.1f} s", file=log, flush=True)


def _benchmark_fit(bench, engine, seed, epochs, cache_dir) -> float:
    start = time.perf_counter()
    from .pipeline import calibrate_benchmark

    calibrate_benchmark(bench, engine=engine, seed=seed, epochs=epochs, lr=0.1, cache_dir=cache_dir)
    return time.perf_counter() - start


def benchmark_fits(*, quick: bool, cache_dir, workers: int = 2, data: str | None = None, rule: str = "strict",
                   log=None) -> float:
    """The whole-benchmark 2PL fits of chapters 2 to 6, by the three engines, into the chapters' cache.

    :func:`irtbook.pipeline.calibrate_benchmark` of each of :data:`BOOK_BENCHMARKS` with every
    engine of :data:`irtbook.pipeline.CHAPTER_ENGINES` (seed 0, learning rate 0.1, the
    epochs :func:`irtbook.pipeline.chapter_epochs` gives), and SimpleSafetyTests by py-irt
    with the text's priors and seed 1 (chapter 2's seed check), ``workers`` fits at a time, the
    largest matrices first (the MAP fits, a fraction of a second each, last); what is cached already
    is read, not refitted. Returns the wall seconds.
    """
    from joblib import Parallel, delayed

    from .cache import cache_path
    from .pipeline import CHAPTER_ENGINES, benchmark_fit_key, chapter_epochs, load_benchmark

    start = time.perf_counter()
    benches = [load_benchmark(b, rule=rule, source=data) for b in BOOK_BENCHMARKS]
    jobs = [(bench, engine, 0, chapter_epochs(engine, 1000, quick=quick)) for engine in CHAPTER_ENGINES
            for bench in benches]
    sst = benches[BOOK_BENCHMARKS.index("simplesafetytests")]
    jobs.append((sst, "pyirt", 1, chapter_epochs("pyirt", 1000, quick=quick)))   # chapter 2's second seed
    # only the fits not in the cache go to the workers (starting them costs seconds even when all is cached)
    todo = [(bench, engine, seed, epochs) for bench, engine, seed, epochs in jobs if cache_dir is None
            or not cache_path(benchmark_fit_key(bench, engine=engine, seed=seed, epochs=epochs, lr=0.1),
                              cache_dir).exists()]
    todo.sort(key=lambda job: (job[1] == "map", -job[0].filtered.values.size))    # longest first
    seconds = Parallel(n_jobs=workers)(delayed(_benchmark_fit)(bench, engine, seed, epochs, cache_dir)
                                       for bench, engine, seed, epochs in todo) if todo else []
    if log is not None:
        print(f"[split stage] whole-benchmark fits ({len(jobs)}: {', '.join(CHAPTER_ENGINES)}; {len(todo)} not "
              f"cached): {sum(seconds):.1f} s in the workers", file=log, flush=True)
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
    from concurrent.futures import ThreadPoolExecutor

    # The whole-benchmark fits run in their own worker processes while the split batches run, so that
    # neither waits for the other (the cores stay busy through each batch's uneven end).
    with ThreadPoolExecutor(1) as thread:
        whole_fits = thread.submit(benchmark_fits, quick=args.quick, cache_dir=args.cache_dir, workers=args.workers,
                                   data=args.data, rule=args.rule, log=sys.stderr)
        out = run_stage(stage_runs(quick=args.quick, data=args.data, rule=args.rule), cache_dir=args.cache_dir,
                        workers=args.workers, log=sys.stderr)
        whole = whole_fits.result()
    print(f"[split stage] {out['splits']} split calibrations, {out['fitted']} fitted, {out['seconds']:.1f} s; "
          f"whole-benchmark fits {whole:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
