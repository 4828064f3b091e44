"""Capture the static selections' inputs and results of protocol runs, for :mod:`bench_static_path`.

Runs chapter 06's paper-text protocol (``--run paper``, what ``python -m irtbook.comparison_runs`` runs) or
chapter 05's authors' protocol (``--run authors``) on each benchmark (:func:`profile_protocol.run_one`, one
job, split calibrations read from ``--cache-dir``) and keeps, per benchmark, every call of
:func:`irtlib.protocol.agreement.static_selections` (its arguments and the subsets it returned) and every
call of ``agreement._score_static_map`` (the MAP-scored static methods' test scores, section
"Evaluation": each split's test responses, item parameters, subsets and the scores it appended). Written to
``--out/{run}_{benchmark}.pkl``::

    .venv/bin/python benchmarks/capture_static.py --run paper --cache-dir /tmp/cache --out /tmp/static-inputs
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALL = ["airbench2024", "anthropic-red-team", "harmbench", "safetybench", "simplesafetytests", "wmdp-bio"]


def capture(name: str, run: str, *, cache_dir: str, max_splits: int | None) -> dict:
    """One protocol run of ``name`` with its static selections and MAP scorings recorded."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from profile_protocol import run_one

    import irtlib.protocol.agreement as agreement
    from irtbook.pipeline import load_benchmark
    from irtlib.selection import methods as registry

    selections, scorings = [], []
    real_select, real_score = agreement.static_selections, agreement._score_static_map

    def select(*args, **kw):
        out = real_select(*args, **kw)
        selections.append({"args": args, "kw": kw, "out": out})
        return out

    def score(preps):
        kept = [{"x_test": p["x_test"], "a": p["a"], "b": p["b"], "ks": list(p["ks"]),
                 "static": {m: s for m, s in p["static"].items() if registry.REGISTRY[m].scorer == "map"}}
                for p in preps]
        before = [{m: len(p["scores"][m]) for m in q["static"]} for p, q in zip(preps, kept, strict=True)]
        real_score(preps)
        for p, q, n in zip(preps, kept, before, strict=True):
            q["scores"] = {m: [s.copy() for s in p["scores"][m][n[m]:]] for m in q["static"]}
        scorings.append(kept)

    agreement.static_selections, agreement._score_static_map = select, score
    try:
        start = time.process_time()
        run_one(load_benchmark(name), run, max_splits=max_splits, cache_dir=cache_dir)
        print(f"{run} {name}: {len(selections)} selections, {time.process_time() - start:.1f} CPU s", flush=True)
    finally:
        agreement.static_selections, agreement._score_static_map = real_select, real_score
    return {"selections": selections, "scorings": scorings}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", nargs="*", default=None)
    parser.add_argument("--run", choices=["paper", "authors"], required=True)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--max-splits", type=int, default=None)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.benchmarks or ALL:
        got = capture(name, args.run, cache_dir=args.cache_dir, max_splits=args.max_splits)
        with open(out / f"{args.run}_{name}.pkl", "wb") as fh:
            pickle.dump(got, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
