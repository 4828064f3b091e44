"""The primer's Sympson-Hetter calibration with and without the C lazy walk, in one process, ABBA; results compared.

00_primer calibrates Sympson-Hetter exposure parameters on AIR-Bench 2024's whole-benchmark MAP calibration (1,000
simulees, 20 items, maximum exposure 0.3). This runs :func:`irtlib.selection.cat.sympson_hetter` with those settings
alternately with :mod:`irtlib.selection.sympson_hetter_kernel` (the default where it loads) and with the numpy path
of :class:`irtlib.selection.selectors.SympsonHetterCandidates` (the candidate cells, ``RowDraws``' per-row jumps),
each on a fresh bank object (so each builds its own cells), prints the CPU seconds and a digest of the parameters
``K`` and exposures (every bit), and the ratio. ``--cache-dir``: a copy of the stage's cache (the calibration).

    .venv/bin/python benchmarks/bench_sympson_hetter_kernel.py --cache-dir /tmp/cache --rounds 2
"""

from __future__ import annotations

import argparse
import hashlib
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--rounds", type=int, default=2, help="ABBA pairs")
    args = parser.parse_args(argv)

    import numpy as np

    from irtbook.pipeline import calibrate_benchmark, load_benchmark
    from irtlib.selection import selectors
    from irtlib.selection import sympson_hetter_kernel as shk
    from irtlib.selection.cat import TwoPLItems, sympson_hetter

    bench = load_benchmark("airbench2024", rule="strict")
    cal = calibrate_benchmark(bench, engine="map", cache_dir=args.cache_dir)
    lib = shk.load()
    if lib is None:
        print("the kernel does not load here: nothing to compare")
        return 1
    original = selectors._sympson_hetter_kernel

    def run(kernel: bool) -> tuple[float, str]:
        selectors._sympson_hetter_kernel = (lambda: lib) if kernel else (lambda: None)
        try:
            items = TwoPLItems(cal.a.to_numpy(), cal.b.to_numpy())
            start = time.process_time()
            k, exposure = sympson_hetter(items, max_exposure=0.3, max_items=20, n_simulees=1000, seed=0)
            seconds = time.process_time() - start
        finally:
            selectors._sympson_hetter_kernel = original
        data = np.ascontiguousarray(k).tobytes() + np.ascontiguousarray(exposure).tobytes()
        return seconds, hashlib.sha256(data).hexdigest()[:16]

    run(True)                                   # warm: imports, the kernel's first use
    totals, digests = {True: 0.0, False: 0.0}, set()
    for r in range(args.rounds):
        for kernel in ((False, True, True, False) if r % 2 == 0 else (True, False, False, True)):
            seconds, digest = run(kernel)
            totals[kernel] += seconds
            digests.add(digest)
            print(f"round {r + 1} {'kernel' if kernel else 'numpy '}: {seconds:.2f} CPU s, digest {digest}", flush=True)
    print(f"numpy / kernel: {totals[False] / totals[True]:.2f}x; every digest equal: {len(digests) == 1}")
    return 0 if len(digests) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
