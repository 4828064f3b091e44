"""The comparison job (``python -m irtbook.comparison_runs``) cold, with a digest of every frame it returns.

Runs chapter 06's :func:`irtbook.comparison_runs.comparison_runs` and :func:`~irtbook.comparison_runs.engine_runs`
in this process on a fresh copy of a cache (the stage's: the job's own results are not in it), times the CPU, and
prints one digest per returned frame (its values, index, columns, dtypes and ``attrs``) and one for all of them, so
two trees' runs (``PYTHONPATH`` set to each) can be compared::

    PYTHONPATH=/work/wt/bookkit:/work/wt .venv/bin/python benchmarks/bench_cmp_job.py /work/stage-full/cache \
        /tmp/cache-copy --out /tmp/digests-new.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

#: ``attrs`` entries not digested: the run's measured times.
TIMING_ATTRS = frozenset({"seconds"})


def frame_digest(df: pd.DataFrame) -> str:
    """A digest of a frame's values (bits), index, columns, dtypes and ``attrs`` (but :data:`TIMING_ATTRS`)."""
    h = hashlib.sha256()
    h.update(repr(list(df.columns)).encode())
    h.update(repr([str(t) for t in df.dtypes]).encode())
    h.update(repr(sorted((str(k), repr(v)) for k, v in df.attrs.items() if k not in TIMING_ATTRS)).encode())
    h.update(pd.util.hash_pandas_object(df, index=True).to_numpy().tobytes())
    for c in df.columns:
        col = df[c]
        if col.dtype.kind in "fiub":
            h.update(col.to_numpy().tobytes())
    return h.hexdigest()[:16]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="the cache copied (the stage's)")
    parser.add_argument("cache", help="where the fresh copy goes (removed first)")
    parser.add_argument("--out", help="write the digests here (json)")
    parser.add_argument("--chapter", default="book/06_table2.md")
    args = parser.parse_args(argv)
    shutil.rmtree(args.cache, ignore_errors=True)
    shutil.copytree(args.source, args.cache, symlinks=True)
    subprocess.run(["chmod", "-R", "u+w", args.cache], check=True)
    import irtbook
    from irtbook.comparison_runs import chapter_arguments, comparison_runs, engine_runs
    from irtbook.course import parameter_values

    print("irtbook from", irtbook.__file__, file=sys.stderr)
    kw = chapter_arguments(parameter_values(Path(args.chapter).read_text(encoding="utf-8")), quick=False,
                           cache_dir=args.cache)
    t0, c0 = time.perf_counter(), time.process_time()
    other = comparison_runs(**kw["comparison"])
    alt = engine_runs(**kw["engine"])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    digests = {f"protocol/{b}": frame_digest(df) for b, df in other.items()}
    digests.update({f"engine/{b}": frame_digest(df) for b, df in alt.items()})
    digests["all"] = hashlib.sha256(json.dumps(digests, sort_keys=True).encode()).hexdigest()[:16]
    for k, v in digests.items():
        print(f"{k:40s} {v}")
    print(f"wall {wall:.1f} s, CPU {cpu:.1f} s (pid {os.getpid()})")
    if args.out:
        Path(args.out).write_text(json.dumps(dict(digests=digests, wall=wall, cpu=cpu), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
