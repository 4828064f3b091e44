"""FasterPAM on the chapters' own inputs: the C kernel against the kmedoids extension, in one process, CPU seconds.

The Anchor Points calls of a protocol run (chapter 05's authors' protocol, ``--run authors``: the authors'
fresh FasterPAM per budget; chapter 06's comparison job, ``--run paper``: the warm-started path's FasterPAM
from given medoids) are captured as :mod:`bench_anchor_path` captures them (the same pickles, ``--inputs``),
then every FasterPAM call they make is rebuilt (the distance matrix, column-major, the budget's initial
medoids and seed: :func:`irtlib.selection.static.anchor_points_fresh`'s steps; for the path, its
``fasterpam_from`` calls recorded while it runs on the extension) and run both ways:

- exactness: the extension's raw answer (loss, labels, medoids, iterations, swaps) against the kernel's, every
  call; the loss compared by its bits;
- CPU: the public functions (:func:`irtlib.selection.fasterpam.random_fasterpam` /
  :func:`~irtlib.selection.fasterpam.fasterpam_from`) with the kernel and with the extension alone, in turn
  (ABBA over the calls), with the per-call Python work each form pays.

With ``--base REV``, the CPU is the kernel's against the base revision's kernel instead of the extension's (REV's
``_fasterpam_kernel.c``, built as REV's loader built it: ``--base-flags``, none by default, i.e. AVX2 where the
processor has it); the exactness is still every call against the extension, and the base kernel's too.

Printed per benchmark: calls, CPU seconds each way, the ratio, and how many calls differ::

    .venv/bin/python benchmarks/bench_fasterpam_kernel.py --cache-dir /tmp/cache --run authors wmdp-bio safetybench
    .venv/bin/python benchmarks/bench_fasterpam_kernel.py --cache-dir /tmp/cache --run authors wmdp-bio --base main
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LABEL = {"ext": "extension", "base": "base kernel"}


def fasterpam_calls(calls: list) -> list:
    """Every FasterPAM call of the captured Anchor Points calls: ``(diss, medoids, seed or None, max_iter)``.

    Yields them one captured call at a time (a list per call), so that a benchmark's matrices are not all kept.
    """
    from irtlib.selection import fasterpam, static

    for kind, x, ks, kw in calls:
        if kind == "fresh":
            diss = static.correlation_distances(x, order="F")
            n = diss.shape[0]
            seed, max_iter = int(kw.get("seed", 42)), int(kw.get("max_iter", 100))
            yield [(diss, fasterpam.random_medoids(n, k, seed), seed, max_iter)
                   for k in sorted({static._check_k(k, n) for k in np.atleast_1d(ks)})]
        else:
            recorded = []
            saved = fasterpam.fasterpam_from

            def record(diss, medoids, *, max_iter=100, _saved=saved, _out=recorded):
                _out.append((diss, np.asarray(medoids).astype(np.uintp), None, int(max_iter)))
                return _saved(diss, medoids, max_iter=max_iter)

            fasterpam.fasterpam_from = record
            lib = fasterpam._KERNEL.get("lib", "unset")
            fasterpam._KERNEL["lib"] = None                  # recorded on the extension
            try:
                static.anchor_points_path(x, ks, **kw)
            finally:
                fasterpam.fasterpam_from = saved
                if lib == "unset":
                    fasterpam._KERNEL.pop("lib")
                else:
                    fasterpam._KERNEL["lib"] = lib
            if recorded:
                yield recorded


def same(lib, job) -> bool:
    """The kernel's raw answer equals the extension's (loss bits, medoids, labels, iterations, swaps)."""
    from irtlib.selection import fasterpam

    diss, init, seed, max_iter = job
    ext = fasterpam.core()
    want = (ext._rand_fasterpam_f64(diss, init, max_iter, seed) if seed is not None
            else ext._fasterpam_f64(diss, init, max_iter))
    got = fasterpam._run_kernel(lib, diss, init, max_iter, seed)
    return (np.float64(got[0]).tobytes() == np.float64(want[0]).tobytes()
            and np.array_equal(got[1], np.asarray(want[2], dtype=np.intp))
            and np.array_equal(got[2], np.asarray(want[1], dtype=np.intp))
            and (got[3], got[4]) == (int(want[3]), int(want[4])))


def base_kernel(rev: str, flags: tuple[str, ...]):
    """Revision ``rev``'s kernel (``git show REV:irtlib/selection/_fasterpam_kernel.c``), compiled with ``flags``."""
    from irtlib.calibration.fused_kernel import compile_kernel
    from irtlib.selection import fasterpam

    text = subprocess.run(["git", "show", f"{rev}:irtlib/selection/_fasterpam_kernel.c"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout
    folder = Path(tempfile.mkdtemp())
    source = folder / "_fasterpam_kernel_base.c"
    source.write_text(text)
    return fasterpam._bind(compile_kernel(source=source, directory=folder, extra_flags=flags))


def timed(jobs, use_kernel: bool, lib) -> float:
    """CPU seconds of the public function for every job, with the kernel ``lib`` or the extension alone."""
    from irtlib.selection import fasterpam

    fasterpam._KERNEL["lib"] = lib if use_kernel else None
    start = time.process_time()
    for diss, init, seed, max_iter in jobs:
        if seed is None:
            fasterpam.fasterpam_from(diss, init, max_iter=max_iter)
        else:
            fasterpam.random_fasterpam(diss, init.size, seed=seed, max_iter=max_iter)
    return time.process_time() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", nargs="+")
    parser.add_argument("--run", choices=["authors", "paper"], required=True)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--inputs", default="/tmp/anchor-inputs", help="where captured inputs are kept")
    parser.add_argument("--max-calls", type=int, default=None, help="only the first captured calls (splits)")
    parser.add_argument("--base", default=None, help="time against this revision's kernel instead of the extension")
    parser.add_argument("--base-flags", default="", help="the base kernel's extra compiler flags, comma-separated")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_anchor_path import capture
    from threadpoolctl import threadpool_limits

    from irtlib.selection import fasterpam

    lib = fasterpam.kernel()
    if lib is None:
        print("the FasterPAM kernel does not load here (or differs from the extension): nothing to compare")
        return 1
    base = None if args.base is None else base_kernel(args.base, tuple(f for f in args.base_flags.split(",") if f))
    other = "ext" if base is None else "base"
    Path(args.inputs).mkdir(parents=True, exist_ok=True)
    total = {other: 0.0, "kernel": 0.0}
    with threadpool_limits(limits=1):
        for name in args.benchmarks:
            path = Path(args.inputs) / f"{args.run}_{name}.pkl"
            if not path.exists():
                path.write_bytes(pickle.dumps(capture(args.run, name, args.cache_dir)))
            calls = pickle.loads(path.read_bytes())[:args.max_calls]
            cpu = {other: 0.0, "kernel": 0.0}
            n_jobs = differ = differ_base = 0
            sizes = set()
            for i, jobs in enumerate(fasterpam_calls(calls)):
                n_jobs += len(jobs)
                sizes.update(j[0].shape[0] for j in jobs)
                differ += sum(not same(lib, job) for job in jobs)
                if base is not None:
                    differ_base += sum(not same(base, job) for job in jobs)
                for form in ((other, "kernel") if i % 2 == 0 else ("kernel", other)):
                    cpu[form] += timed(jobs, form != "ext", base if form == "base" else lib)
            for form in cpu:
                total[form] += cpu[form]
            print(f"{args.run} {name}: {n_jobs} FasterPAM calls (n = {sorted(sizes)}), "
                  f"{LABEL[other]} {cpu[other]:.2f} CPU s, kernel {cpu['kernel']:.2f} CPU s, "
                  f"ratio {cpu['kernel'] / max(cpu[other], 1e-9):.3f}; calls differing {differ}"
                  + ("" if base is None else f" (base kernel: {differ_base})"), flush=True)
    fasterpam._KERNEL["lib"] = lib
    print(f"all: {LABEL[other]} {total[other]:.2f} CPU s, kernel {total['kernel']:.2f} CPU s, "
          f"ratio {total['kernel'] / max(total[other], 1e-9):.3f}; load {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
