"""Chapter 10's GRM and certification computations, old code against new, in one process (CPU seconds).

The old code is a base revision's modules (``git show BASE:path``, default the branch point of this
work) loaded under other names beside the working tree's; each computation runs with the chapter's
full-build settings on the chapter's data, old then new, and the script prints each one's CPU seconds,
the ratio, and whether the results are the same:

- ``grm``: ``irtbook.beyond.severity_heldout`` and ``severity_agreement`` (the GRM fits and the graded
  adaptive tests, tolerance 1e-5, 3 splits) on AIR-Bench 2024 and PandaGuard, with the base's
  ``irtlib.extended.grm`` patched in for "old"; same when every returned number and frame is equal.
- ``cert``: ``irtbook.certification.study`` (4,000 simulated models per cut, every model left out)
  on the authors' Anthropic Red Team and HarmBench matrices; same when its frames are ``equals``.

Needs the real data (``../shared/realdata``; PandaGuard through ``$IRTLIB_PANDAGUARD_DATA``, as the
Makefile sets it). Run from the repository root::

    .venv/bin/python benchmarks/bench_c10_beyond.py [grm cert] [--base REV] [--simulees N]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
KS = [1, 2, 3, 5, 8, 12, 20, 30, 50]


def _base_module(rev: str, path: str, name: str):
    """The module at ``path`` in revision ``rev``, imported as ``name``."""
    source = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True,
                            text=True).stdout
    # a dotted name (``irtlib.extended._base_grm``) puts the module in its package, for its relative imports
    target = Path(tempfile.mkdtemp(prefix="bench_c10_")) / f"{name.rpartition('.')[2]}.py"
    target.write_text(source)
    spec = importlib.util.spec_from_file_location(name, target)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _cpu(fn):
    start = time.process_time()
    out = fn()
    return out, time.process_time() - start


def _report(label, old_s, new_s, same):
    print(f"{label:<44} old {old_s:7.2f}  new {new_s:7.2f}  ratio {old_s / new_s:5.2f}  same: {same}", flush=True)
    return old_s, new_s


def _graded():
    from irtbook import beyond as bz
    from irtlib import datasets
    from irtlib.datasets import pandaguard
    from irtlib.extended import grm

    def keep(binary):
        p = np.nanmean(binary, axis=0)
        return p * (1 - p) > 0.01

    raw = datasets.load_raw("airbench2024-real")
    air, _ = grm.to_categories(bz.wide(raw).to_numpy())
    raw = pandaguard.load_pandaguard_raw(None, graded=True)
    panda, _ = grm.to_categories(bz.wide(raw).to_numpy())
    return {"AIR-Bench 2024": (air[:, keep(bz.binarize(air, 2))], 2),
            "PandaGuard": (panda[:, keep(bz.binarize(panda, 1))], 1)}


def bench_grm(base: str) -> tuple[float, float]:
    """The severity question's GRM fits and graded tests, old GRM module against new."""
    import irtlib.extended.grm as new
    from irtbook import beyond as bz
    old = _base_module(base, "irtlib/extended/grm.py", "irtlib.extended._base_grm")
    totals = [0.0, 0.0]
    for name, (cats, safe_from) in _graded().items():
        reference = np.nanmean(bz.binarize(cats, safe_from), axis=1)
        results = []
        for i, module in enumerate((old, new)):
            bz.fit_grm, bz.GradedItems = module.fit_grm, module.GradedItems
            out, seconds = _cpu(lambda c=cats, s=safe_from, r=reference: (
                bz.severity_heldout(c, safe_from=s, seed=0, tol=1e-5),
                bz.severity_agreement(c, r, safe_from=s, ks=KS, n_splits=3, n_test=10, seed=0, tol=1e-5)))
            totals[i] += seconds
            results.append((out, seconds))
        bz.fit_grm, bz.GradedItems = new.fit_grm, new.GradedItems
        (held_old, runs_old), s_old = results[0]
        (held_new, runs_new), s_new = results[1]
        same = runs_old.equals(runs_new) and all(held_old[k] == held_new[k] for k in held_old if k != "grm_seconds")
        _report(f"GRM severity, {name} {cats.shape}", s_old, s_new, same)
    return _report("GRM severity, both", *totals, "see above")


def bench_cert(base: str, n_simulees: int, loo_every: int) -> tuple[float, float]:
    """The certification study on both matrices, old module against new."""
    from irtbook import certification as new
    from irtlib import datasets
    old = _base_module(base, "bookkit/irtbook/certification.py", "_base_certification")
    totals = [0.0, 0.0]
    for name in ("anthropic-red-team", "harmbench"):
        matrix = datasets.load(name)
        out = []
        for i, module in enumerate((old, new)):
            result, seconds = _cpu(lambda m=module, data=matrix: m.study(data, n_simulees=n_simulees,
                                                                         loo_every=loo_every, seed=0))
            totals[i] += seconds
            out.append((result, seconds))
        (r_old, s_old), (r_new, s_new) = out
        same = r_old["simulation"].equals(r_new["simulation"]) and r_old["loo"].equals(r_new["loo"]) and all(
            r_old[k] == r_new[k] for k in ("above", "n_items", "n_bank", "n_models", "n_left_out"))
        _report(f"certification study, {name}", s_old, s_new, same)
    return _report("certification study, both", *totals, "see above")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="*", default=["grm", "cert"], choices=["grm", "cert"])
    parser.add_argument("--base", default=None, help="the old code's revision (default: the merge base with main)")
    parser.add_argument("--simulees", type=int, default=4000, help="simulated models per cut (the chapter's 4,000)")
    parser.add_argument("--loo-every", type=int, default=1, help="leave out every n-th model (the chapter's 1)")
    args = parser.parse_args(argv)
    os.chdir(ROOT)
    base = args.base or subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=ROOT, check=True,
                                       capture_output=True, text=True).stdout.strip()
    print(f"old code: {base[:10]}; load {os.getloadavg()}")
    totals = []
    if "grm" in args.parts:
        totals.append(bench_grm(base))
    if "cert" in args.parts:
        totals.append(bench_cert(base, args.simulees, args.loo_every))
    if totals:
        old_s, new_s = (sum(t[i] for t in totals) for i in (0, 1))
        _report("adopted parts (GRM, certification), total", old_s, new_s, "see above")
    print(f"load {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
