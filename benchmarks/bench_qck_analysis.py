"""Issue 26 ``qck``: the protocol analyses' new forms against their references, in one process, ABBA; results compared.

On protocol-like results (six benchmarks, ``--splits`` splits, five methods, 19 budgets; agreements with ties and
undefined values, as a QUICK build's chapter 06 has them), alternately:

- ``agreement_curves``'s per-group percentiles: one ``np.percentile`` call per group size
  (``_group_percentiles``) against one call per group (``_group_percentiles_loop``);
- ``at_paper_budgets``: each benchmark's curves once against ``agreement_at`` recomputing them per reported value;
- ``bootstrap_budget``'s 1,000 samples: all at once (``_bootstrap_budgets``) against one at a time
  (``_bootstrap_budgets_loop``), both columns;
- ``threadpool_limits(limits=1)`` against ``irtlib.calibration.blas.thread_limits(1)`` (torch, scipy and numpy
  loaded, as in a chapter's kernel).

- ``agreement_curves``: the bands cut on their arrays and the undefined splits by ``bincount`` against
  ``Series.clip`` and a groupby sum (both with the grouped percentiles);

Prints CPU seconds per form and the ratio, and whether every output is the same (bytes of the arrays, frames equal).

    .venv/bin/python benchmarks/bench_qck_analysis.py --rounds 2 --splits 2
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def _results(rng, n_splits):
    import numpy as np
    import pandas as pd

    ks = [1, 2, 3, 5, 8, 10, 13, 20, 27, 30, 40, 50, 70, 100, 130, 200, 300, 500, 1000]
    methods = ["fluid", "random", "random-irt", "anchor-points", "tinybenchmarks"]
    out = {}
    for bench in ("airbench2024", "anthropic-red-team", "harmbench", "safetybench", "simplesafetytests", "wmdp-bio"):
        rows = [(s, m, k, float(np.round(rng.uniform(0.3, 1.0), 3)) if rng.random() > 0.05 else np.nan)
                for s in range(n_splits) for m in methods for k in ks]
        frame = pd.DataFrame(rows, columns=["split", "method", "k", "agreement"])
        frame.attrs["nan_policy"] = "omit"
        out[bench] = frame
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="ABBA pairs")
    parser.add_argument("--splits", type=int, default=2, help="splits per benchmark (QUICK: 2)")
    args = parser.parse_args(argv)

    import warnings

    import numpy as np
    import pandas as pd
    import threadpoolctl
    import torch  # noqa: F401  (a chapter's kernel has torch's libraries loaded)

    from irtbook import table2 as t2
    from irtlib.calibration import blas
    from irtlib.protocol import agreement
    from irtlib.protocol.agreement import agreement_at

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "protocol"))
    from test_agreement import _curves_with_pandas_clip  # the old form, as the test keeps it

    warnings.simplefilter("ignore", RuntimeWarning)
    runs = _results(np.random.default_rng(26), args.splits)
    stacked = pd.concat([r.assign(benchmark=b) for b, r in runs.items()], ignore_index=True)
    data = stacked.assign(g=stacked.groupby(["benchmark", "method", "k"], sort=False).ngroup())
    values, codes, n_groups = data["agreement"].to_numpy(float), data["g"].to_numpy(), int(data["g"].max()) + 1
    percents = np.array([2.5, 97.5])

    def per_value(results):          # at_paper_budgets' values as agreement_at gave them, curves per value
        rows = []
        for bench, res in results.items():
            for v in t2.paper_values(bench):
                k = t2.nearest_swept(res, v["k_paper"])
                at = agreement_at(res, k, methods=[v["method"]])
                if not at.empty:
                    rows.append(at.iloc[0][["mean", "ci_lo", "ci_hi", "sd", "lo", "hi"]].to_numpy(float))
        return np.array(rows)

    def at_once(results):
        return t2.at_paper_budgets(results)[["mean", "ci_lo", "ci_hi", "sd", "lo", "hi"]].to_numpy(float)

    cubes = {}
    for bench, res in runs.items():
        for column, methods in (("left", ["fluid"]), ("right", ["fluid", "random"])):
            ks, cube = t2._split_cube(res, methods, "omit")
            draws = np.random.default_rng(0).integers(0, cube.shape[0], size=(1000, cube.shape[0]))
            cubes[(bench, column)] = (ks, cube, draws)

    def boot(fn):
        return [fn(ks, cube, draws, column=column, threshold=0.9, policy="omit")
                for (_, column), (ks, cube, draws) in cubes.items()]

    def limits(fn, n=200):
        for _ in range(n):
            with fn():
                pass

    def curves_pandas_clip(results):     # agreement_curves before: Series.clip and a groupby sum (the test's form)
        return _curves_with_pandas_clip(results, "omit", "sd", percentiles=agreement._group_percentiles)

    def all_curves(fn):
        return [fn(res) for res in runs.values()]

    pairs = {
        "agreement_curves' finish (6 calls)": (lambda: all_curves(curves_pandas_clip),
                                               lambda: all_curves(lambda r: agreement.agreement_curves(r, band="sd"))),
        "group percentiles": (lambda: agreement._group_percentiles_loop(values, codes, n_groups, percents),
                              lambda: agreement._group_percentiles(values, codes, n_groups, percents)),
        "at_paper_budgets": (lambda: per_value(runs), lambda: at_once(runs)),
        "bootstrap budgets (12 x 1,000)": (lambda: boot(t2._bootstrap_budgets_loop),
                                           lambda: boot(t2._bootstrap_budgets)),
        "thread limits (200 calls)": (lambda: limits(lambda: threadpoolctl.threadpool_limits(limits=1)),
                                      lambda: limits(lambda: blas.thread_limits(1))),
    }
    for name, (old, new) in pairs.items():
        a, b = old(), new()
        if name == "thread limits (200 calls)":
            same = True
        elif isinstance(a, list) and isinstance(a[0], pd.DataFrame):
            same = all(x.equals(y) and all(x[c].to_numpy().tobytes() == y[c].to_numpy().tobytes()
                                           for c in x.columns if x[c].dtype == float)
                       for x, y in zip(a, b, strict=True))
        elif isinstance(a, list):
            same = all(x.tobytes() == y.tobytes() for x, y in zip(a, b, strict=True))
        elif isinstance(a, tuple):
            same = all(x.tobytes() == y.tobytes() for x, y in zip(a, b, strict=True))
        else:
            same = a.tobytes() == b.tobytes()
        seconds = {"old": 0.0, "new": 0.0}
        for r in range(args.rounds):
            for label in (("old", "new") if r % 2 == 0 else ("new", "old")):
                fn = old if label == "old" else new
                t = time.process_time()
                fn()
                seconds[label] += time.process_time() - t
        print(f"{name:34s} old {seconds['old'] / args.rounds:8.4f} s  new {seconds['new'] / args.rounds:8.4f} s  "
              f"ratio {seconds['old'] / max(seconds['new'], 1e-9):7.1f}x  same: {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
