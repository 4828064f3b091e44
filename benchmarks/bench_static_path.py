"""The protocol's static selections and their MAP scores: this tree against a base revision, in one process.

Replays what :mod:`capture_static` recorded of protocol runs (chapter 06's paper-text runs, ``--run paper``;
chapter 05's authors' runs, ``--run authors``): every split's
:func:`irtlib.protocol.agreement.static_selections` (section "Static subsets": Total Fisher, Marginal Fisher,
its b-quartile rule, Anchor Points, DISCO) and every ``_score_static_map`` (the MAP-scored subsets' test
scores, section "Evaluation"), with this tree's ``irtlib`` and with the base revision's whole ``irtlib``
(:mod:`base_package`, imported beside it as ``irtlib_base``), alternately (``--rounds`` times, ABBA), one BLAS
thread. Prints per benchmark the CPU seconds of both (selections and scoring apart), the ratio, and whether
every subset (items and weights) and every score equals the captured one, bit for bit::

    .venv/bin/python benchmarks/capture_static.py --run paper --cache-dir /tmp/cache --out /tmp/static-inputs
    .venv/bin/python benchmarks/bench_static_path.py --inputs /tmp/static-inputs --run paper --base main

``--methods`` times some static methods alone (one ``select`` per method and split, in registry order).
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ALL = ["airbench2024", "anthropic-red-team", "harmbench", "safetybench", "simplesafetytests", "wmdp-bio"]


def _same_arrays(x, y) -> bool:
    return (x is None and y is None) or (x is not None and y is not None and np.array_equal(x, y)
                                         and np.array_equal(np.signbit(x), np.signbit(y)))


def same_selections(got: dict, want: dict) -> bool:
    """Every method's subsets equal: the same budgets, items in the same order, the same weights."""
    if got.keys() != want.keys():
        return False
    for m in want:
        if got[m].keys() != want[m].keys():
            return False
        for k in want[m]:
            g, w = got[m][k], want[m][k]
            if not (np.array_equal(g.items, w.items) and _same_arrays(g.weights, w.weights)):
                return False
    return True


def select_all(lib, calls, methods=None) -> tuple[float, list, dict]:
    """Every captured ``static_selections`` call with ``lib``'s code; CPU seconds, results, seconds by method."""
    agreement = lib.protocol.agreement
    by_method: dict = {}
    out = []
    start = time.process_time()
    for call in calls:
        if methods is None:
            out.append(agreement.static_selections(*call["args"], **call["kw"]))
            continue
        x, a, b, theta, ks = call["args"]
        kw = call["kw"]
        training = lib.selection.methods.Training(
            a=np.asarray(a, float), b=np.asarray(b, float), theta=np.asarray(theta, float),
            values=np.asarray(x, float), seed=kw["seed"], prior_information=kw["prior_information"],
            anchor_solver=kw["anchor_solver"], bquartile_rule=kw["bquartile_rule"], anchor_rule=kw["anchor_rule"],
            anchor_seed=kw["anchor_seed"])
        got = {}
        for m in methods:
            t = time.process_time()
            got[m] = lib.selection.methods.REGISTRY[m].select(training, sorted({int(k) for k in ks}))
            by_method[m] = by_method.get(m, 0.0) + time.process_time() - t
        out.append(got)
    return time.process_time() - start, out, by_method


def score_all(lib, scorings) -> tuple[float, bool]:
    """Every captured ``_score_static_map`` call with ``lib``'s code; CPU seconds and whether every score is equal."""
    agreement = lib.protocol.agreement
    seconds, same = 0.0, True
    for kept in scorings:
        preps = [{"x_test": p["x_test"], "a": p["a"], "b": p["b"], "ks": p["ks"], "static": p["static"],
                  "scores": {m: [] for m in p["static"]}} for p in kept]
        start = time.process_time()
        agreement._score_static_map(preps)
        seconds += time.process_time() - start
        for p, q in zip(preps, kept, strict=True):
            for m in q["static"]:
                same &= len(p["scores"][m]) == len(q["scores"][m]) and all(
                    _same_arrays(g, w) for g, w in zip(p["scores"][m], q["scores"][m], strict=True))
    return seconds, same


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", nargs="*", default=None)
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--run", choices=["paper", "authors"], default="paper")
    parser.add_argument("--base", default="main")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-splits", type=int, default=None)
    parser.add_argument("--methods", nargs="*", default=None)
    parser.add_argument("--no-scoring", action="store_true")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import base_package

    import irtlib
    import irtlib.protocol.agreement  # noqa: F401
    import irtlib.selection.methods  # noqa: F401

    base = base_package.load(args.base)
    import irtlib_base.protocol.agreement  # noqa: F401
    import irtlib_base.selection.methods  # noqa: F401

    libs = {"base": base, "this": irtlib}
    totals = {name: [0.0, 0.0] for name in libs}
    for bench in args.benchmarks or ALL:
        path = Path(args.inputs) / f"{args.run}_{bench}.pkl"
        if not path.exists():
            continue
        with open(path, "rb") as fh:
            got = pickle.load(fh)
        calls = got["selections"][:args.max_splits]
        scorings = [] if args.no_scoring else got["scorings"]
        if args.max_splits is not None:
            scorings = [kept[:args.max_splits] for kept in scorings]
        for name in libs:                   # warm: kernels loaded and checked
            select_all(libs[name], calls[:1], args.methods)
        sel = {name: [] for name in libs}
        sco = {name: [] for name in libs}
        by = {name: {} for name in libs}
        equal = True
        order = ["base", "this"]
        for r in range(args.rounds):
            for name in (order if r % 2 == 0 else order[::-1]):
                seconds, out, by_method = select_all(libs[name], calls, args.methods)
                sel[name].append(seconds)
                for m, v in by_method.items():
                    by[name].setdefault(m, []).append(v)
                for call, o in zip(calls, out, strict=True):
                    want = call["out"] if args.methods is None else {m: call["out"][m] for m in args.methods}
                    equal &= same_selections(o, want)
                if scorings:
                    seconds, same = score_all(libs[name], scorings)
                    sco[name].append(seconds)
                    equal &= same
        line = f"{bench} ({len(calls)} splits): selections base {sel['base']} this {sel['this']} ratio " \
               f"{sum(sel['this']) / sum(sel['base']):.3f}"
        if scorings:
            line += f"; scoring base {[round(s, 3) for s in sco['base']]} this {[round(s, 3) for s in sco['this']]}" \
                    f" ratio {sum(sco['this']) / sum(sco['base']):.3f}"
        print(line + f"; every subset and score equal to the captured: {equal}", flush=True)
        for m in by["base"]:
            print(f"    {m}: base {sum(by['base'][m]) / args.rounds:.3f} this {sum(by['this'][m]) / args.rounds:.3f}")
        for name in libs:
            totals[name][0] += sum(sel[name]) / args.rounds
            totals[name][1] += sum(sco[name]) / args.rounds if sco[name] else 0.0
    b, t = totals["base"], totals["this"]
    print(f"all: selections base {b[0]:.2f} this {t[0]:.2f} ratio {t[0] / b[0]:.3f}; scoring base {b[1]:.2f} "
          f"this {t[1]:.2f}; both base {sum(b):.2f} this {sum(t):.2f} ratio {sum(t) / sum(b):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
