"""Benchmark: the stage's batched fits, a baseline tree's ``pyirt_batch`` against this tree's, in one process.

Every fit the full stage makes (``python -m irtbook.split_stage``: each width's batch of split calibrations, the
authors' hierarchical 2PL, and each benchmark's whole fit by ``pyirt-authors`` and by ``pyirt``, the text's fixed
priors), on the book's real data, at ``--epochs`` epochs (the stage runs 1,000; the per-epoch costs scale), fitted
by the baseline tree's ``irtlib/calibration/pyirt_batch.py`` and ``stream_kernel.py`` (loaded from their files
beside this tree's modules; the compiled kernels are the same) and by this tree's, alternated, best of
``--repeat`` in CPU seconds of this process. Every pair's results (a, b, theta, best epochs, every epoch's loss)
must be equal bit for bit. Prints the old and new CPU seconds and their ratio per fit, and the totals.

Usage (from the repository root, with a baseline checkout, e.g. ``git archive main | tar -x -C /work/base``)::

    python benchmarks/bench_stage_fits.py --tree /work/base [--epochs 200] [--repeat 3] [--only safetybench]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bookkit")]


def _module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module          # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def old_fitter(tree: Path):
    """The baseline tree's ``fit_hierarchical_batch``, its streams class the baseline's too."""
    from irtlib.calibration import stream_kernel

    old = _module("old_pyirt_batch", tree / "irtlib/calibration/pyirt_batch.py")
    old_streams = _module("old_stream_kernel", tree / "irtlib/calibration/stream_kernel.py")

    def streams(torch, sizes, n_items, seed, *, hyper=True):
        found = stream_kernel.load()
        if found is None:
            return old._Streams(torch, sizes, n_items, seed, hyper=hyper)
        return old_streams.CStreams(torch, *found, sizes, n_items, seed, hyper=hyper)

    old._streams = streams
    return old.fit_hierarchical_batch


def stage_fits(only: set[str] | None) -> list[tuple[str, np.ndarray, list, list, str, float, bool]]:
    """(label, matrix, rows, seeds, priors, lr_decay, best) of every fit the full stage makes."""
    from irtbook import split_stage
    from irtbook.pipeline import _BATCHED

    benches = split_stage.load_benchmarks()
    groups: dict = {}
    for run in split_stage.stage_runs(quick=False, benches=benches):
        if only and run.bench.name.split()[0] not in only and not any(o in run.label for o in only):
            continue
        values, rows, seeds = split_stage.training_rows(run)
        groups.setdefault(values.shape[1], []).append((run.label, values, rows, seeds))
    fits = []
    for entries in groups.values():
        matrix, rows = split_stage._shared_matrix([(label, v, r, s) for label, v, rr, ss in entries
                                                   for r, s in zip(rr, ss, strict=True)])
        seeds = [s for *_, ss in entries for s in ss]
        label = ", ".join(dict.fromkeys(label for label, *_ in entries))
        fits.append((f"splits: {label}", matrix, rows, seeds, "hierarchical", 0.9999, True))
    for name, bench in benches.items():
        if only and name not in only:
            continue
        values = np.ascontiguousarray(bench.filtered.values, dtype=float)
        every = [np.arange(values.shape[0])]
        for engine, settings in _BATCHED.items():
            fits.append((f"whole {name} by {engine}", values, every, [0], settings["priors"], settings["lr_decay"],
                         settings["best"]))
    return fits


def _bits(x):
    x = np.ascontiguousarray(x)
    return x.view(np.uint64) if x.dtype == np.float64 else x


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, required=True, help="the baseline tree")
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None, help="benchmark names (or run labels) to keep")
    args = parser.parse_args(argv)
    import torch

    from irtlib.calibration import adam_kernel, fused_kernel, stream_kernel
    from irtlib.calibration.pyirt_batch import fit_hierarchical_batch

    torch.set_num_threads(1)
    fused_kernel.load(), stream_kernel.load(), adam_kernel.load()
    fitters = {"old": old_fitter(args.tree.resolve()), "new": fit_hierarchical_batch}
    total = {"old": 0.0, "new": 0.0}
    same = True
    print(f"{'fit':60s} {'old CPU s':>9s} {'new CPU s':>9s} {'old/new':>7s}  equal")
    for label, matrix, rows, seeds, priors, decay, best in stage_fits(set(args.only) if args.only else None):
        best_cpu = {"old": np.inf, "new": np.inf}
        results = {}
        for r in range(args.repeat):
            for name in (("old", "new") if r % 2 == 0 else ("new", "old")):
                start = time.process_time()
                results[name] = fitters[name](matrix, rows, epochs=args.epochs, seed=seeds, priors=priors,
                                              lr_decay=decay, best=best)
                best_cpu[name] = min(best_cpu[name], time.process_time() - start)
        equal = all(np.array_equal(_bits(getattr(results["old"], f)), _bits(getattr(results["new"], f)))
                    for f in ("a", "b", "theta", "best_epoch", "loss"))
        same &= equal
        for name in total:
            total[name] += best_cpu[name]
        print(f"{label[:60]:60s} {best_cpu['old']:9.2f} {best_cpu['new']:9.2f} "
              f"{best_cpu['old'] / best_cpu['new']:7.2f}  {equal}", flush=True)
    print(f"{'all fits':60s} {total['old']:9.2f} {total['new']:9.2f} {total['old'] / total['new']:7.2f}  "
          f"{'all equal bit for bit' if same else 'SOME DIFFER'}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
