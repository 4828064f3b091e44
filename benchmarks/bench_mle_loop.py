"""The authors' Fluid loop (maximum information + MLE) in this tree against a baseline checkout, A/B alternated.

The agreement protocol's "authors" preset runs Fluid with :class:`irtlib.selection.MleEstimator`
from the training mean, the test models of several splits in one :func:`irtlib.run_adaptive` call
(per-model item parameters), to the largest budget; on SafetyBench (11,395 kept items, 3,000 steps)
and WMDP-Bio these runs are most of chapters 05 and 06. This script builds such an input once (a
benchmark of the simulated release, the 2PL calibrated by the MAP engine on each split's training
models, the 10 test models of ``--splits`` splits, each started at its split's mean training
ability), then times ``run_adaptive`` on it in fresh processes, alternately with this tree's
irtlib and with a baseline checkout's (``--baseline``, e.g. ``git worktree add /tmp/base main``),
``--repeats`` times each. It prints each run's CPU seconds, the median ratio, the machine load
(``uptime``) before and after, and checks that both trees chose the same items and estimates
bit for bit (a digest of the trajectory).

    .venv/bin/python benchmarks/bench_mle_loop.py --baseline /tmp/mle-base [--benchmarks wmdp-bio safetybench]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")      # single-threaded, like a protocol worker

import numpy as np  # noqa: E402

# run in a child with the baseline's irtlib first on the path (the editable install's finder removed)
_BASELINE_BOOT = """
import runpy, sys
base, sys.argv = sys.argv[1], sys.argv[2:]
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, base)
import irtlib
assert irtlib.__file__.startswith(base), irtlib.__file__
runpy.run_path(sys.argv[0], run_name="__main__")
"""


#: The largest budget of the authors' protocol runs (chapter 05's "authors" preset): 3,000 items on
#: SafetyBench, 1,000 elsewhere (at most the kept items).
MAX_BUDGET = {"safetybench": 3000}


def build_input(name: str, n_splits: int, path: Path, seed: int = 0) -> None:
    """The Fluid input of ``n_splits`` splits of ``name`` (as ``run_protocol`` batches them), saved to ``path``."""
    from irtlib import datasets, map_ability
    from irtlib.protocol.agreement import calibrate_split, split_models

    values = datasets.load(name, source="simulated").filter_variance().values
    xs, as_, bs, starts = [], [], [], []
    for split in range(n_splits):
        train, test = split_models(values.shape[0], 10, seed, split)
        a, b, _ = calibrate_split(values[train])
        theta = np.asarray(map_ability(values[train], a, b).theta)
        xs.append(values[test])
        as_.append(np.broadcast_to(a, (test.size, a.size)))
        bs.append(np.broadcast_to(b, (test.size, b.size)))
        starts.append(np.full(test.size, theta.mean()))
    np.savez(path, x=np.vstack(xs), a=np.vstack(as_), b=np.vstack(bs), start=np.concatenate(starts),
             budget=min(MAX_BUDGET.get(name, 1000), values.shape[1]))


def worker(path: str) -> None:
    """Time one run of the loop on the saved input; print CPU seconds and the trajectory's digest as JSON."""
    from irtlib.selection.adaptive import MleEstimator, run_adaptive

    data = np.load(path)
    start = time.process_time()
    traj = run_adaptive(data["x"], data["a"], data["b"], budget=int(data["budget"]), estimator=MleEstimator(),
                        theta0=data["start"])
    seconds = time.process_time() - start
    digest = hashlib.sha256(traj.items.tobytes() + traj.estimate.tobytes()).hexdigest()[:16]
    print(json.dumps({"cpu": seconds, "digest": digest}))


def _run(tree: str | None, path: Path) -> dict:
    script = str(Path(__file__).resolve())
    cmd = [sys.executable, script, "--worker", str(path)] if tree is None else \
        [sys.executable, "-c", _BASELINE_BOOT, tree, script, "--worker", str(path)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _load() -> str:
    return os.getloadavg().__repr__()


def compare(name: str, *, baseline: str, n_splits: int, repeats: int) -> dict:
    """A/B alternated runs on one benchmark; returns and prints the figures."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.npz"
        build_input(name, n_splits, path)
        with np.load(path) as data:
            shape, budget = data["x"].shape, int(data["budget"])
        print(f"\n{name}: {shape[0]} test models ({n_splits} splits) x {shape[1]} items, budget {budget}; "
              f"load before {_load()}")
        new, base = [], []
        for _ in range(repeats):
            new.append(_run(None, path))
            base.append(_run(baseline, path))
            print(f"  this tree {new[-1]['cpu']:.2f} s CPU, baseline {base[-1]['cpu']:.2f} s CPU", flush=True)
    same = {r["digest"] for r in new} == {r["digest"] for r in base} and len({r["digest"] for r in new}) == 1
    ratio = float(np.median([b["cpu"] for b in base]) / np.median([n["cpu"] for n in new]))
    print(f"  median: this tree {np.median([n['cpu'] for n in new]):.2f} s, baseline "
          f"{np.median([b['cpu'] for b in base]):.2f} s: {ratio:.2f}x; the same items and estimates bit for bit: "
          f"{same}; load after {_load()}")
    if not same:
        raise SystemExit("the trees chose different items or estimates")
    return {"benchmark": name, "ratio": ratio, "new": new, "base": base}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", nargs="+", default=["wmdp-bio", "safetybench"])
    parser.add_argument("--baseline", help="a checkout of the baseline (git worktree add /tmp/base main)")
    parser.add_argument("--splits", type=int, default=3, help="splits whose test models run together")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker)
        return
    if not args.baseline:
        parser.error("--baseline is required (a checkout of main: git worktree add /tmp/base main)")
    for name in args.benchmarks:
        compare(name, baseline=args.baseline, n_splits=args.splits, repeats=args.repeats)


if __name__ == "__main__":
    main()
