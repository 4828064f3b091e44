"""Chapter 10's M2PL and GRM questions with scipy's logistic tables and log-sum-exp, and with this tree's: CPU seconds.

"scipy" runs the tables through scipy (``IRTLIB_LOGISTIC_KERNEL=0``: :mod:`irtlib.extended.logistic_kernel`
off) and the posterior weights through ``scipy.special.logsumexp`` (patched into
:mod:`irtlib.core.quadrature`), which is the code before this change; "tree" runs them as the library
does now. Each computation runs with the chapter's full-build settings on the chapter's data, in the
order scipy, tree, tree, scipy (the faster of each pair is printed, with the ratio), and the results
are compared (every number and frame the same):

- ``mirt``: ``irtbook.beyond.dimension_heldout`` and ``dimension_agreement`` on the authors' HarmBench
  matrix, confirmatory 3-D by functional category (the chapter's default tolerance, 3 splits of 10 test
  models), and the exploratory 2-D held-out fit of its solution 3;
- ``grm``: ``irtbook.beyond.severity_heldout`` and ``severity_agreement`` (tolerance 1e-5, 3 splits) on
  AIR-Bench 2024 and PandaGuard.

Needs the real data (``../shared/realdata``; PandaGuard through ``$IRTLIB_PANDAGUARD_DATA``). Run from
the repository root::

    .venv/bin/python benchmarks/bench_beyond_tables.py [mirt grm]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pandas as pd

KS = [1, 2, 3, 5, 8, 12, 20, 30, 50]


def _harmbench():
    from irtlib import datasets
    from irtlib.extended.mirt import structure_from_labels

    hb = datasets.load("harmbench").filter_variance()
    items = datasets.load_items("harmbench").set_index("item")
    mask, _ = structure_from_labels(items.loc[hb.items, "functional_category"].to_numpy())
    return hb.values, mask


def _graded():
    from irtbook import beyond as bz
    from irtlib import datasets
    from irtlib.datasets import pandaguard
    from irtlib.extended import grm

    def keep(binary):
        p = np.nanmean(binary, axis=0)
        return p * (1 - p) > 0.01

    air, _ = grm.to_categories(bz.wide(datasets.load_raw("airbench2024-real")).to_numpy())
    panda, _ = grm.to_categories(bz.wide(pandaguard.load_pandaguard_raw(None, graded=True)).to_numpy())
    return {"AIR-Bench 2024": (air[:, keep(bz.binarize(air, 2))], 2),
            "PandaGuard": (panda[:, keep(bz.binarize(panda, 1))], 1)}


def mirt_question():
    from irtbook import beyond as bz

    x, mask = _harmbench()
    reference = np.nanmean(x, axis=1)
    fit = bz.dimension_heldout(x, structure=mask, seed=0)
    runs = bz.dimension_agreement(x, reference, structure=mask, ks=KS, n_splits=3, n_test=10, seed=0)
    explore = bz.dimension_heldout(x, structure=None, n_dims=2, seed=0)
    return [fit["ll_2pl"], fit["ll_mirt"], fit["fit"].loadings, fit["fit"].corr, runs, explore["ll_mirt"]]


def grm_question():
    from irtbook import beyond as bz

    out = []
    for cats, safe_from in _graded().values():
        reference = np.nanmean(bz.binarize(cats, safe_from), axis=1)
        held = bz.severity_heldout(cats, safe_from=safe_from, seed=0, tol=1e-5)
        runs = bz.severity_agreement(cats, reference, safe_from=safe_from, ks=KS, n_splits=3, n_test=10, seed=0,
                                     tol=1e-5)
        out += [held["ll_2pl"], held["ll_grm"], runs]
    return out


def _same(old, new) -> bool:
    for o, n in zip(old, new, strict=True):
        if isinstance(o, pd.DataFrame):
            if not o.equals(n):
                return False
        elif not np.array_equal(o, n):
            return False
    return True


def _with_scipy(on: bool, tree_lse) -> None:
    """Turn the scipy paths on (the code before the change) or off (this tree's ``tree_lse``)."""
    from scipy.special import logsumexp

    from irtlib.core import quadrature

    if on:
        os.environ["IRTLIB_LOGISTIC_KERNEL"] = "0"
        quadrature.logsumexp_rows = lambda a: logsumexp(a, axis=1)
    else:
        os.environ.pop("IRTLIB_LOGISTIC_KERNEL", None)
        quadrature.logsumexp_rows = tree_lse


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="*", help="mirt, grm (default: both)")
    args = parser.parse_args(argv)
    args.parts = args.parts or ["mirt", "grm"]
    if set(args.parts) - {"mirt", "grm"}:
        parser.error(f"parts must be mirt or grm, got {args.parts}")
    from irtlib.core.quadrature import logsumexp_rows as tree_lse

    parts = {"mirt": ("M2PL, HarmBench (3-D confirmatory, 2-D)", mirt_question),
             "grm": ("GRM, AIR-Bench 2024 and PandaGuard", grm_question)}
    total = [0.0, 0.0]
    for part in args.parts:
        label, fn = parts[part]
        times = {True: [], False: []}
        results = {}
        for scipy_path in (True, False, False, True):
            _with_scipy(scipy_path, tree_lse)
            start = time.process_time()
            results[scipy_path] = fn()
            times[scipy_path].append(time.process_time() - start)
        _with_scipy(False, tree_lse)
        old, new = min(times[True]), min(times[False])
        total[0], total[1] = total[0] + old, total[1] + new
        print(f"{label:<44} scipy {old:7.2f}  tree {new:7.2f}  ratio {old / new:5.2f}  "
              f"same: {_same(results[True], results[False])}", flush=True)
    print(f"{'total':<44} scipy {total[0]:7.2f}  tree {total[1]:7.2f}  ratio {total[0] / total[1]:5.2f}; "
          f"load {os.getloadavg()[0]:.1f}")
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
