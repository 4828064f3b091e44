"""The comparison job's per-split MAP calibrations, main's engine against this tree's, in one process.

The inputs are every training block that chapter 06's comparison job (``python -m irtbook.comparison_runs``:
the paper's-text protocol on six benchmarks with engine "map", and the released benchmarks' Fluid and Total
Fisher recalibrated with "map") gives :func:`irtlib.calibration.split_cache.fit_map_splits_cached`, distinct
by the split cache's key (the fits the job makes on a cold cache). They are recorded by running the job in
this process on a copy of ``--stage-cache`` with that function wrapped (``--save FILE`` keeps them), or read
from such a file (``--blocks FILE``).

Each block is fitted as the split cache fits it (``fit_map`` on the items some training row saw) by the
engine where this branch left ``main`` (``joint_map``, ``newton``; :mod:`_old_engine`) and by this tree's.
Prints whether every block's theta, a, b and convergence record (iterations, converged, log posterior,
conjugate-gradient iterations) are equal bit for bit, and the CPU seconds of all the fits, old and new
alternating, best of ``--repeat``, with their ratio.

Run from the repository root::

    .venv/bin/python benchmarks/bench_map_splits.py --stage-cache /work/stage-full/cache --save /tmp/blocks.npz
    .venv/bin/python benchmarks/bench_map_splits.py --blocks /tmp/blocks.npz
"""

from __future__ import annotations

import argparse
import os
import runpy
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _old_engine import old_modules  # noqa: E402

from irtlib.calibration import joint_map, split_cache  # noqa: E402


def record_blocks(stage_cache: str) -> list[np.ndarray]:
    """Every block the comparison job hands the MAP split cache, run on a copy of ``stage_cache``."""
    seen: list[np.ndarray] = []
    real = split_cache.fit_map_splits_cached

    def recording(blocks, *, cache_dir):
        seen.extend(np.array(b, dtype=np.float64) for b in blocks)
        return real(blocks, cache_dir=cache_dir)

    with tempfile.TemporaryDirectory(prefix="bench-map-splits-") as tmp:
        cache = Path(tmp) / "cache"
        shutil.copytree(stage_cache, cache)
        split_cache.fit_map_splits_cached = recording
        argv = sys.argv
        try:
            sys.argv = ["comparison_runs", "--cache-dir", str(cache)]
            runpy.run_module("irtbook.comparison_runs", run_name="__main__")
        except SystemExit as stop:
            if stop.code not in (0, None):
                raise
        finally:
            split_cache.fit_map_splits_cached, sys.argv = real, argv
    return seen


def distinct(blocks: list[np.ndarray]) -> list[np.ndarray]:
    """The blocks distinct by the split cache's key, in first-seen order (the fits a cold cache makes)."""
    keys = split_cache.map_split_keys(blocks)
    first = dict(zip(reversed(keys), reversed(range(len(keys))), strict=True))
    return [blocks[i] for i in sorted(first.values())]


def fit_all(fit_map, pooled: list[np.ndarray]) -> tuple[list, float]:
    t = time.process_time()
    out = [fit_map(x) for x in pooled]
    return out, time.process_time() - t


def same_fit(r0, r1) -> bool:
    """theta, a, b equal bit for bit and the same convergence record."""
    return all(u.dtype == v.dtype and u.tobytes() == v.tobytes() for u, v in zip(r0[:3], r1[:3], strict=True)) \
        and r0[3] == r1[3]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--stage-cache", help="run the comparison job on a copy of this cache to record the blocks")
    source.add_argument("--blocks", help="an .npz of blocks written by --save")
    parser.add_argument("--save", help="write the recorded blocks here (.npz)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.blocks:
        with np.load(args.blocks) as f:
            blocks = [f[k] for k in sorted(f.files)]
    else:
        blocks = record_blocks(args.stage_cache)
        if args.save:
            np.savez_compressed(args.save, **{f"b{i:05d}": b for i, b in enumerate(blocks)})
    fits = distinct(blocks)
    pooled = [x[:, (~np.isnan(x)).any(axis=0)] for x in fits]      # split_cache._map_block's items
    cells = sum(int((~np.isnan(x)).sum()) for x in pooled)
    print(f"{len(blocks)} blocks handed to the split cache, {len(fits)} distinct fits, {cells:,} observed cells; "
          f"models {min(x.shape[0] for x in pooled)}-{max(x.shape[0] for x in pooled)}, "
          f"items {min(x.shape[1] for x in pooled)}-{max(x.shape[1] for x in pooled)}; "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    old_map, _ = old_modules()
    old_map.fit_map(pooled[0])                   # kernels compiled and checked before the clocks start
    joint_map.fit_map(pooled[0])
    best = {"old": np.inf, "new": np.inf}
    for rep in range(args.repeat):
        r_old, t_old = fit_all(old_map.fit_map, pooled)
        r_new, t_new = fit_all(joint_map.fit_map, pooled)
        best = {"old": min(best["old"], t_old), "new": min(best["new"], t_new)}
        if rep == 0:
            equal = [same_fit(o, n) for o, n in zip(r_old, r_new, strict=True)]
            directions = sum(r[3]["iterations"] for r in r_new)
            cg = sum(r[3]["cg_iterations"] for r in r_new)
            print(f"equal bit for bit (theta, a, b, convergence record): {sum(equal)} of {len(equal)}; "
                  f"{directions:,} iterations, {cg:,} conjugate-gradient iterations", flush=True)
        print(f"repeat {rep + 1}: old {t_old:.2f} s, new {t_new:.2f} s CPU, ratio {t_old / t_new:.2f} "
              f"(load {os.getloadavg()[0]:.1f})", flush=True)
    print(f"the {len(pooled)} fits, best of {args.repeat}: old {best['old']:.2f} s, new {best['new']:.2f} s CPU, "
          f"ratio {best['old'] / best['new']:.2f}")


if __name__ == "__main__":
    main()
