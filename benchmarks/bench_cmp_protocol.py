"""The comparison job's protocol runs, a base revision's ``irtlib`` against this tree's in one process (A B B A).

The job (``python -m irtbook.comparison_runs``, :mod:`bench_cmp_job`) runs :func:`irtlib.run_protocol` on the six
benchmarks under the paper's text's protocol and Fluid / Total Fisher of the released ones with the MAP engine.
This runs the first ``--splits`` splits of some of those runs (the same arguments as
:func:`irtbook.pipeline.protocol_benchmark`'s, each run with a fresh empty split cache, so every split's MAP
calibration is computed as in a cold job) with the base's package (:mod:`base_package`) and with this tree's,
alternately, checks every frame equal (values bit for bit, ``attrs`` but the measured seconds), and prints the CPU
seconds and the ratio::

    PYTHONPATH=/work/wt/bookkit:/work/wt .venv/bin/python benchmarks/bench_cmp_protocol.py --base main \
        --cache /tmp/cache-copy
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import base_package  # noqa: E402
from bench_cmp_job import frame_digest  # noqa: E402


def cases(cache: str, splits: int, which: list[str]):
    """``(label, matrix, keyword arguments of run_protocol)`` of the job's runs named in ``which``."""
    from irtbook.comparison_runs import ENGINE_METHODS, chapter_arguments
    from irtbook.course import parameter_values
    from irtbook.pipeline import book_protocol, protocol_budgets, protocol_sizes

    kw = chapter_arguments(parameter_values(Path("book/06_table2.md").read_text(encoding="utf-8")), quick=False,
                           cache_dir=cache)
    out = []
    for item in which:
        kind, name = item.split("/")
        if kind == "protocol":
            c = kw["comparison"]
            bench = c["benches"][name]
            proto = book_protocol(bench, c["protocol"], fresh_anchor_max_items=c["fresh_anchor_max_items"])
            engine, methods = c["engine"] or proto.engine, None
        else:
            c = kw["engine"]
            bench, proto, engine, methods = c["benches"][name], c["protocols"][name], c["engine"], list(ENGINE_METHODS)
        _, n_test = protocol_sizes(bench, protocol=proto)
        out.append((item, bench.full, dict(methods=methods, ks=protocol_budgets(bench, protocol=proto),
                                           n_splits=splits, n_test=n_test, seed=proto.seed if c["seed"] is None
                                           else int(c["seed"]), engine=engine, n_jobs=1, variance_threshold=0.01,
                                           progress=False, protocol=proto, benchmark=bench.name,
                                           split_batch=min(splits, 10))))
    return out


def run(pkg, matrix, kw):
    proto = kw["protocol"]
    mine = pkg.protocol.presets.Protocol(**{f.name: getattr(proto, f.name) for f in dataclasses.fields(proto)})
    if pkg.__name__ != "irtlib":          # the base's own matrix class (the same values, models, items)
        matrix = pkg.ResponseMatrix(matrix.values, list(matrix.models), list(matrix.items), source=matrix.source)
    folder = tempfile.mkdtemp(prefix="cmp-splits-")
    try:
        t0 = time.process_time()
        df = pkg.protocol.agreement.run_protocol(matrix, **dict(kw, protocol=mine, calibration_cache=folder))
        return time.process_time() - t0, df
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main")
    parser.add_argument("--cache", required=True, help="a copy of the stage's cache (the benchmarks are read from it)")
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--runs", nargs="+", default=["protocol/airbench2024", "protocol/wmdp-bio",
                                                      "protocol/anthropic-red-team", "engine/harmbench"])
    args = parser.parse_args(argv)
    import irtlib

    base = base_package.load(args.base)
    print("base", subprocess.run(["git", "rev-parse", "--short", args.base], capture_output=True, text=True,
                                 cwd=Path(__file__).resolve().parents[1]).stdout.strip(), "new", irtlib.__file__)
    total = {"base": 0.0, "new": 0.0}
    for label, matrix, kw in cases(args.cache, args.splits, args.runs):
        run(base, matrix, kw)
        run(irtlib, matrix, kw)        # warm: the kernels' builds and checks
        times, digests = {"base": 0.0, "new": 0.0}, {"base": set(), "new": set()}
        for who in ("base", "new", "new", "base"):
            dt, df = run(base if who == "base" else irtlib, matrix, kw)
            times[who] += dt
            digests[who].add(frame_digest(df))
        same = digests["base"] == digests["new"] and len(digests["new"]) == 1
        for k in total:
            total[k] += times[k]
        print(f"{label:32s} base {times['base']:7.2f} s  new {times['new']:7.2f} s  old/new "
              f"{times['base'] / times['new']:.3f}  same frames: {same}", flush=True)
        if not same:
            return 1
    print(f"{'all':32s} base {total['base']:7.2f} s  new {total['new']:7.2f} s  old/new "
          f"{total['base'] / total['new']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
