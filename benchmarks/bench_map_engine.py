"""The MAP engine's per-split fits, the code before this branch against this tree's, in one process, on real inputs.

The inputs are the training blocks the chapters calibrate with ``engine="map"``: chapter 6's paper's-text
protocol (every benchmark; chapter 8's comparison with the real data and chapter 4b's engine comparison
run its first 20 splits) and its ``alt_runs`` (the authors' protocol recalibrated by the MAP engine),
the first ``--splits`` splits of each. Old: ``joint_map`` and ``newton`` where this branch left ``main``
(:mod:`_old_engine`) through the protocol's per-split path (a ResponseMatrix, ``fit_2pl``). New:
:func:`irtlib.protocol.agreement.calibrate_splits` as this tree runs it. Prints, per benchmark, whether
every parameter is equal bit for bit and the CPU seconds of both (alternating, best of ``--repeat``),
then the same for whole-matrix fits (every model of each benchmark, and a larger random matrix with
missing cells, several row blocks).

Run from the repository root: ``.venv/bin/python benchmarks/bench_map_engine.py [--splits 10]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _old_engine import old_modules  # noqa: E402

from irtlib.core.responses import ResponseMatrix  # noqa: E402
from irtlib.protocol import agreement  # noqa: E402

BENCHMARKS = ("airbench2024", "anthropic-red-team", "harmbench", "safetybench", "simplesafetytests", "wmdp-bio")


class _Drawn(Exception):
    pass


def training_blocks(protocol: str, bench, n_splits: int) -> list[np.ndarray]:
    """The first ``n_splits`` training blocks of ``protocol``'s run on ``bench`` as the chapters make it."""
    from irtbook.pipeline import book_protocol, chapter_protocol, protocol_benchmark

    seen = {}

    def record(values, reference, splits, **kw):
        seen.update(values=np.asarray(values, float), kw=kw)
        raise _Drawn

    real, agreement._run_splits = agreement._run_splits, record
    try:
        proto = chapter_protocol(book_protocol(bench, protocol, fresh_anchor_max_items=2000), quick=False)
        protocol_benchmark(bench, protocol=proto, engine="map", n_jobs=1, cache_dir=None)
    except _Drawn:
        pass
    finally:
        agreement._run_splits = real
    values, kw = seen["values"], seen["kw"]
    return [values[agreement.split_models(values.shape[0], kw["n_test"], kw["seed"], s, groups=kw.get("groups"),
                                          n_test_groups=kw.get("n_test_groups", 1),
                                          rule=kw["protocol"].split_rule)[0]] for s in range(n_splits)]


def old_per_split(old_map, blocks: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The old per-split MAP calibration (``agreement._calibrate_each`` with the old engine)."""
    out = []
    for x in blocks:
        pool = np.flatnonzero((~np.isnan(x)).any(axis=0))
        matrix = ResponseMatrix(x[:, pool], [f"m{i}" for i in range(x.shape[0])],
                                [f"i{j}" for j in range(pool.size)], source="training split")
        cal = old_map.fit_2pl(matrix, engine="map")
        a, b = np.full(x.shape[1], np.nan), np.full(x.shape[1], np.nan)
        a[pool], b[pool] = cal.a.to_numpy(), cal.b.to_numpy()
        out.append((a, b))
    return out


def new_per_split(blocks: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """This tree's: :func:`irtlib.protocol.agreement.calibrate_splits` (no cache)."""
    values = np.vstack(blocks)
    starts = np.cumsum([0] + [len(b) for b in blocks])
    return agreement.calibrate_splits(values, [np.arange(starts[i], starts[i + 1]) for i in range(len(blocks))],
                                      engine="map")


def _cpu(fn, *args):
    t = time.process_time()
    out = fn(*args)
    return out, time.process_time() - t


def _equal(r0, r1) -> bool:
    return all(np.array_equal(u, v, equal_nan=True) for p, q in zip(r0, r1, strict=True)
               for u, v in zip(p, q, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from irtbook.pipeline import load_benchmark
    from irtlib.calibration import joint_map as new_map

    old_map, _ = old_modules()
    totals = {"old": 0.0, "new": 0.0}
    print(f"{'protocol':8s} {'benchmark':20s} {'block':>12s} {'splits':>6s} {'equal':>5s} {'old s':>7s} "
          f"{'new s':>7s} {'ratio':>6s}")
    for protocol in ("paper", "authors"):
        for name in BENCHMARKS:
            bench = load_benchmark(name)
            blocks = training_blocks(protocol, bench, args.splits)
            best = {"old": np.inf, "new": np.inf}
            for _ in range(args.repeat):
                r_old, t_old = _cpu(old_per_split, old_map, blocks)
                r_new, t_new = _cpu(new_per_split, blocks)
                best = {"old": min(best["old"], t_old), "new": min(best["new"], t_new)}
            same = _equal(r_old, r_new)
            totals = {k: totals[k] + best[k] for k in totals}
            print(f"{protocol:8s} {name:20s} {str(blocks[0].shape):>12s} {len(blocks):6d} {str(same):>5s} "
                  f"{best['old']:7.3f} {best['new']:7.3f} {best['old'] / best['new']:6.2f}", flush=True)
    print(f"per-split fits: old {totals['old']:.2f} s, new {totals['new']:.2f} s, "
          f"ratio {totals['old'] / totals['new']:.2f}")
    rng = np.random.default_rng(0)
    big = (rng.random((2500, 800)) < 0.6).astype(float)
    big[rng.random(big.shape) < 0.1] = np.nan
    wholes = [(name, load_benchmark(name).filtered.values) for name in BENCHMARKS] + [("random 2500 x 800", big)]
    for name, x in wholes:
        x = x[:, ~np.isnan(x).all(axis=0)]
        r_old, t_old = _cpu(old_map.fit_map, x)
        r_new, t_new = _cpu(new_map.fit_map, x)
        same = _equal([r_old[:3]], [r_new[:3]]) and r_old[3] == r_new[3]
        print(f"whole fit {name:20s} {str(x.shape):>13s} equal {same}  old {t_old:.3f} s  new {t_new:.3f} s  "
              f"ratio {t_old / t_new:.2f}", flush=True)


if __name__ == "__main__":
    main()
