"""Chapter 05's computations beyond its cells' glue, in this process, timed part by part in CPU seconds.

The six protocol runs, the six ceilings, HarmBench's three variant runs, the static rankings against
the authors' fits, the simulated exercise (``lead_at_10``) and the Q3 check, each as the chapter calls
it (``n_jobs=1``, so every CPU second is this process's), on a fresh copy of a split-stage cache (the
split calibrations read, every result computed). Run it once per tree, alternated, and compare the
frames it writes (``--out``) with ``--compare``::

    PYTHONPATH=/tmp/base:/tmp/base/bookkit .venv/bin/python benchmarks/bench_c05_chapter.py \\
        --stage /work/stage-full/cache --out /tmp/c05-old
    .venv/bin/python benchmarks/bench_c05_chapter.py --stage /work/stage-full/cache --out /tmp/c05-new
    .venv/bin/python benchmarks/bench_c05_chapter.py --compare /tmp/c05-old /tmp/c05-new
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import sys
import tempfile
import time
from pathlib import Path

BENCHMARKS = ["airbench2024", "anthropic-red-team", "harmbench", "safetybench", "simplesafetytests", "wmdp-bio"]


def lead_at_10(sd_log_a, seed=0):
    """The chapter's solution 3 (book/05_selection.md), verbatim but for its return of the run."""
    import numpy as np

    import irtlib

    rng = np.random.default_rng(seed)
    a, b, theta = np.exp(rng.normal(0, sd_log_a, 400)), rng.normal(size=400), rng.normal(size=60)
    x = (rng.random((60, 400)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    m = irtlib.ResponseMatrix(x, [f"m{i}" for i in range(60)], [f"i{j}" for j in range(400)],
                              source=f"simulated 2PL, SD of log a {sd_log_a}")
    return irtlib.run_protocol(m, methods=["fluid", "random"], ks=[10], n_splits=20, seed=seed)


def run(stage: str, out: Path, parts: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    cache = Path(tempfile.mkdtemp(prefix="c05-cache-"))
    shutil.rmtree(cache)
    shutil.copytree(stage, cache)
    t0 = time.process_time()
    import irtlib
    from irtbook import pipeline
    from irtbook.ceiling import ceiling_benchmark
    from irtlib import datasets
    from irtlib.protocol import presets

    book_protocol, load_benchmark, protocol_benchmark = (pipeline.book_protocol, pipeline.load_benchmark,
                                                         pipeline.protocol_benchmark)
    harmbench_variants, calibrate_benchmark = pipeline.harmbench_variants, pipeline.calibrate_benchmark

    benches = {b: load_benchmark(b) for b in BENCHMARKS}
    proto = {b: book_protocol(benches[b], "authors", fresh_anchor_max_items=2000) for b in BENCHMARKS}
    kw = dict(n_jobs=1, cache_dir=str(cache))
    clock = {"imports and loading": time.process_time() - t0}
    frames = {}

    def timed(name, fn):
        t = time.process_time()
        frames[name] = fn()
        clock[name] = time.process_time() - t
        print(f"{name}: {clock[name]:.2f} CPU s", flush=True)

    if "runs" in parts:
        for b in BENCHMARKS:
            timed(f"run {b}", lambda b=b: protocol_benchmark(benches[b], protocol=proto[b], **kw))
    if "ceilings" in parts:
        for b in BENCHMARKS:
            timed(f"ceiling {b}", lambda b=b: ceiling_benchmark(benches[b], protocol=proto[b], **kw))
    if "variants" in parts:
        for v, bm in harmbench_variants(benches["harmbench"]).items():
            timed(f"variant {v}", lambda bm=bm: protocol_benchmark(bm, methods=["fluid", "random", "random-irt"],
                                                                 protocol=proto["harmbench"], **kw))
    if "rankings" in parts:
        fits = datasets.authors.load_fits()
        timed("static rankings", lambda: presets.compare_static_rankings(fits, benches["simplesafetytests"].full,
                                                                          n_test=10, seed=42, splits=range(100)))
    if "exercise" in parts:
        timed("lead_at_10 (0.05)", lambda: lead_at_10(0.05))
        timed("lead_at_10 (1.0)", lambda: lead_at_10(1.0))
    if "q3" in parts:
        hb = benches["harmbench"]
        items = datasets.load_items("harmbench")
        category = items.set_index("item")["functional_category"].astype(str)
        cal = calibrate_benchmark(hb, cache_dir=str(cache))
        timed("q3", lambda: irtlib.fit.checks.q3_summary(hb.filtered, cal, category.reindex(hb.filtered.items),
                                                         by_group=True))
    with open(out / "frames.pkl", "wb") as fh:
        pickle.dump(frames, fh)
    total = sum(v for k, v in clock.items() if k != "imports and loading")
    print(f"total {total:.1f} CPU s (imports and loading {clock['imports and loading']:.1f}); load {os.getloadavg()}; "
          f"irtlib from {Path(irtlib.__file__).parent}")
    with open(out / "clock.pkl", "wb") as fh:
        pickle.dump(clock, fh)
    shutil.rmtree(cache)


def compare(old: Path, new: Path) -> int:
    import pandas as pd

    a = pickle.load(open(old / "frames.pkl", "rb"))
    b = pickle.load(open(new / "frames.pkl", "rb"))
    bad = 0
    for name in a:
        x, y = a[name], b.get(name)
        if isinstance(x, (pd.DataFrame, pd.Series)):
            same = y is not None and x.equals(y)
        else:
            same = y is not None and pickle.dumps(x) == pickle.dumps(y)
        bad += not same
        print(f"{name}: {'equal' if same else 'DIFFERENT'}" + (f" ({len(x)} rows)" if hasattr(x, '__len__') else ""))
    return 1 if bad else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage")
    parser.add_argument("--out")
    parser.add_argument("--parts", default="runs,ceilings,variants,rankings,exercise,q3")
    parser.add_argument("--compare", nargs=2)
    args = parser.parse_args(argv)
    if args.compare:
        return compare(Path(args.compare[0]), Path(args.compare[1]))
    run(args.stage, Path(args.out), args.parts.split(","))
    return 0


if __name__ == "__main__":
    sys.exit(main())
