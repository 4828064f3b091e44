"""Chapter 06's own protocol runs, which do not read chapter 05's: one job of the build, beside chapter 05.

Chapter 06 (the paper's Table 2) reads the authors' protocol runs that chapter 05 computes, and sets two
more sets of runs beside them: every benchmark under the paper's text's protocol
(:func:`comparison_runs`, the section "The protocol as written") and the released benchmarks' Fluid and
Total Fisher recalibrated with another engine (:func:`engine_runs`, "What the calibration engine
changes"). Neither reads chapter 05's runs, and together they are most of chapter 06's work. So that they
do not wait for chapter 05, ``make book`` computes them in a job of their own, started with chapter 05
(``python -m irtbook.comparison_runs``, :func:`main`), and chapter 06, which runs after both, reads them
from the cache (:func:`irtbook.pipeline.protocol_benchmark` keys a run by its settings, not by who asks).

The job builds chapter 06's arguments from the defaults of the chapter's parameters cell (read from
``book/06_table2.md``) with the same helpers the chapter's first cell uses, and calls the same two
functions the chapter calls, so its runs are the chapter's, cached under the same keys. A chapter run
with other parameters (``make chapter CH=06_table2 PARAMS=...``; the Makefile runs no job then) computes
its own runs, with its own keys.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

__all__ = ["ENGINE_METHODS", "comparison_runs", "engine_runs", "chapter_arguments", "main"]

#: The methods chapter 06 recalibrates with the other engine: Fluid and Total Fisher, the two the paper's
#: Table 2 discussion turns on.
ENGINE_METHODS = ("fluid", "total-fisher")

#: The chapter whose runs the job computes, relative to the repository root.
CHAPTER = Path("book") / "06_table2.md"


def comparison_runs(benches: dict, *, protocol: str, fresh_anchor_max_items: int | None, **run_kw) -> dict:
    """Every benchmark's agreement runs under another protocol (chapter 06's paper's-text runs).

    Parameters
    ----------
    benches : dict
        Benchmark id -> :class:`irtbook.pipeline.Benchmark`.
    protocol : str
        The protocol run beside the chapter's (:mod:`irtlib.protocol.presets`; chapter 06's
        ``COMPARE_PROTOCOL``, the paper's text, section "Evaluation").
    fresh_anchor_max_items : int, optional
        :func:`irtbook.pipeline.book_protocol`'s speed rule for Anchor Points.
    **run_kw
        :func:`irtbook.pipeline.protocol_benchmark`'s other arguments (seed, engine, n_jobs, cache_dir,
        max_splits).

    Returns
    -------
    dict
        Benchmark id -> the run's rows (:func:`irtbook.pipeline.protocol_benchmark`).
    """
    from .pipeline import book_protocol, protocol_benchmark

    return {b: protocol_benchmark(bench, protocol=book_protocol(bench, protocol,
                                                                fresh_anchor_max_items=fresh_anchor_max_items),
                                  **run_kw) for b, bench in benches.items()}


def engine_runs(benches: dict, protocols: dict, *, engine: str, **run_kw) -> dict:
    """Fluid's and Total Fisher's runs of each benchmark with every split recalibrated by ``engine``.

    Parameters
    ----------
    benches : dict
        Benchmark id -> :class:`irtbook.pipeline.Benchmark` (chapter 06: the released ones).
    protocols : dict
        Benchmark id -> the chapter's protocol for it (its engine replaced by ``engine``).
    engine : str
        The per-split calibration engine.
    **run_kw
        As in :func:`comparison_runs` (an ``engine`` there is replaced by this one).

    Returns
    -------
    dict
        Benchmark id -> the rows of :data:`ENGINE_METHODS`.
    """
    from .pipeline import protocol_benchmark

    return {b: protocol_benchmark(bench, protocol=protocols[b], methods=list(ENGINE_METHODS),
                                  **dict(run_kw, engine=engine)) for b, bench in benches.items()}


def chapter_arguments(params: dict, *, quick: bool, cache_dir, n_jobs: int = 1) -> dict:
    """Chapter 06's arguments of :func:`comparison_runs` and :func:`engine_runs`, as its first cell makes them.

    Parameters
    ----------
    params : dict
        The chapter's parameters (name -> value; :func:`irtbook.course.parameter_values` of its source).
    quick : bool
        A QUICK build (the stage's split count and epochs).
    cache_dir : path-like
        The chapters' ``CACHE_DIR``.
    n_jobs : int
        Worker processes (no part of any key).

    Returns
    -------
    dict
        ``comparison`` (the keyword arguments of :func:`comparison_runs` with ``benches``) and ``engine``
        (those of :func:`engine_runs`).
    """
    from .pipeline import book_protocol, chapter_engine, chapter_protocol, load_benchmark
    from .split_stage import QUICK_MAX_SPLITS

    max_splits = QUICK_MAX_SPLITS if quick else None
    benches = {b: load_benchmark(b, rule=params["RULE"], source=params["DATA"], cache_dir=str(cache_dir))
               for b in params["BENCHMARKS"]}
    run_kw = dict(seed=params["SEED"], engine=params["ENGINE"], n_jobs=n_jobs, cache_dir=str(cache_dir),
                  max_splits=max_splits)
    proto = {b: chapter_protocol(book_protocol(benches[b], params["PROTOCOL"],
                                               fresh_anchor_max_items=params["FRESH_ANCHOR_MAX_ITEMS"]), quick=quick)
             for b in benches}
    engine = params["ENGINE"] or proto[params["BENCHMARKS"][0]].engine
    released = [b for b in benches if benches[b].data.kind == "paper"]
    alternative = "map" if engine != "map" else chapter_engine("pyirt-authors", quick=quick)
    return {"comparison": dict(benches=benches, protocol=params["COMPARE_PROTOCOL"],
                               fresh_anchor_max_items=params["FRESH_ANCHOR_MAX_ITEMS"], **run_kw),
            "engine": dict(benches={b: benches[b] for b in released}, protocols=proto, engine=alternative,
                           **{k: v for k, v in run_kw.items() if k != "engine"})}


def main(argv=None) -> int:
    """Compute chapter 06's :func:`comparison_runs` and :func:`engine_runs` into the cache (the build's job)."""
    from .course import parameter_values

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a QUICK build's split count and epochs")
    parser.add_argument("--cache-dir", default="_build/cache", help="the chapters' CACHE_DIR (default _build/cache)")
    parser.add_argument("--chapter", default=str(CHAPTER), help=f"the chapter's source (default {CHAPTER})")
    args = parser.parse_args(argv)
    path = Path(args.chapter)
    if not path.is_file():
        print(f"comparison runs: {path} not found (run from the repository root)", file=sys.stderr)
        return 2
    start = time.perf_counter()
    kw = chapter_arguments(parameter_values(path.read_text(encoding="utf-8")), quick=args.quick,
                           cache_dir=args.cache_dir)
    other = comparison_runs(**kw["comparison"])
    alt = engine_runs(**kw["engine"])
    kinds = [bench.data.kind for bench in kw["comparison"]["benches"].values()]
    data = ", ".join(f"{kinds.count(k)} on {k} data" for k in sorted(set(kinds)))
    print(f"[comparison runs] {path.stem}: {len(other)} benchmarks under the {kw['comparison']['protocol']} protocol "
          f"({data}), {len(alt)} recalibrated with {kw['engine']['engine']} (the released ones, on the paper's "
          f"data); {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
