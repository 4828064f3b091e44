"""Benchmark: ``irtlib calibrate`` end to end on a leaderboard-sized long CSV, stage by stage.

Writes a long CSV (model, item, score) of ``--models`` x ``--items`` responses, either coin flips
(``--data coin``: no structure, a flat posterior, the hardest case for the fit's convergence) or
simulated from a 2PL (``--data 2pl``: theta ~ N(0, 1), log a ~ N(0, 0.7), b ~ N(0, 1)), then times in
this process each stage of the command (reading; the fit, the standard errors and header, the interval
check's refits and replays; writing; wall and CPU seconds: the check runs beside the standard errors and
header, so their stage covers the check's work done meanwhile, and the check's two stages only what was left
of it, its progress being held until its stage line), and the whole command in a child process
(``/usr/bin/time``-like: wall, CPU of the child). With
``--baseline TREE`` the same command also runs on another checkout (e.g. a worktree of ``main``)
in the same session, and the ratio baseline / this tree is printed. Run with::

    .venv/bin/python benchmarks/bench_calibrate_large.py --data coin [--baseline /path/to/other/tree]

Timing is noisy on a shared machine: compare the ratio and the CPU seconds, measured in one run.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def write_csv(path: Path, kind: str, n_models: int, n_items: int, seed: int) -> np.ndarray | None:
    """The long CSV; the true a's for ``2pl`` data (None for coin flips)."""
    rng = np.random.default_rng(seed)
    a = None
    if kind == "coin":
        x = rng.integers(0, 2, (n_models, n_items), dtype=np.int8)
    else:
        theta, b = rng.normal(size=n_models), rng.normal(size=n_items)
        a = np.exp(rng.normal(0.0, 0.7, size=n_items))
        x = (rng.random((n_models, n_items)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(np.int8)
    models = np.char.add("m", np.arange(n_models).astype(str))
    items = np.char.add("i", np.arange(n_items).astype(str))
    with open(path, "w") as f:
        f.write("model,item,score\n")
        for m in range(n_models):
            f.write("\n".join(np.char.add(np.char.add(models[m] + ",", items), np.char.add(",", x[m].astype(str))))
                    + "\n")
    return a


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def stages(csv: Path, out: Path, true_a) -> None:
    from irtlib.bank.build import calibrate_bank
    from irtlib.io import load_responses

    data, w, c = timed(lambda: load_responses(csv))
    print(f"  read:  {w:7.1f} s wall {c:7.1f} s CPU")
    iterations = []
    marks = [("variance filter", time.perf_counter(), time.process_time())]    # (the stage starting, wall, CPU)
    seen: set[int] = set()
    stage_of = {"fitting": "fit", "standard": "standard errors + header", "checking": "interval check: refits"}

    def stage_starts(message: str) -> None:      # calibrate_bank's stage lines
        marks.append((stage_of.get(message.split()[0], message), time.perf_counter(), time.process_time()))

    def checked(done: int, total: int) -> None:  # the refits end at total / 2, the replays at total
        if done in (total // 2, total) and done not in seen:
            seen.add(done)
            stage = "interval check: replays" if done == total // 2 else "end"
            marks.append((stage, time.perf_counter(), time.process_time()))

    bank, w, c = timed(lambda: calibrate_bank(data.matrix, engine="map", interval_check=True, progress=stage_starts,
                                              fit_progress=lambda i, s: iterations.append(i),
                                              check_progress=checked))
    print(f"  calibrate_bank: {w:7.1f} s wall {c:7.1f} s CPU; fit {len(iterations)} iterations")
    for (stage, w0, c0), (_, w1, c1) in zip(marks[:-1], marks[1:], strict=True):
        print(f"    {stage:26s} {w1 - w0:7.1f} s wall {c1 - c0:7.1f} s CPU")
    _, w, c = timed(lambda: bank.write(out, force=True))
    print(f"  write: {w:7.1f} s wall {c:7.1f} s CPU")
    if true_a is not None:
        est = bank.items["a"].reindex([f"i{j}" for j in range(len(true_a))]).to_numpy()
        keep = ~np.isnan(est)
        print(f"  r(a) against the truth: {np.corrcoef(est[keep], true_a[keep])[0, 1]:.4f}")
    print(f"  interval inflation: {bank.meta['interval_check']['inflation']}")


def command(tree: Path, csv: Path, out: Path) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "irtlib", "calibrate", str(csv), "-o", str(out), "--force", "-q"],
                   env=env, check=True, cwd=tree)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - began, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=("coin", "2pl"), default="coin")
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--items", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--baseline", type=Path, help="another checkout to run the same command on")
    parser.add_argument("--no-stages", action="store_true", help="time the whole command only")
    parser.add_argument("--csv", type=Path, help="time this long CSV instead of writing one (--data, --models, "
                                                 "--items and --seed are then ignored; no recovery printed)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        csv, true_a = args.csv, None
        if csv is None:
            csv = Path(tmp) / "long.csv"
            true_a = write_csv(csv, args.data, args.models, args.items, args.seed)
            print(f"{args.data} data, {args.models} x {args.items}: ", end="")
        print(f"{csv.stat().st_size / 1e6:.0f} MB long CSV {csv}; load {os.getloadavg()[0]:.1f}")
        if not args.no_stages:
            print("stages, in this process:")
            stages(csv, Path(tmp) / "bank.csv", true_a)
        wall, cpu = command(ROOT, csv, Path(tmp) / "bank.csv")
        print(f"irtlib calibrate, this tree: {wall:7.1f} s wall {cpu:7.1f} s CPU")
        if args.baseline:
            b_wall, b_cpu = command(args.baseline, csv, Path(tmp) / "bank_base.csv")
            print(f"irtlib calibrate, baseline {args.baseline}: {b_wall:7.1f} s wall {b_cpu:7.1f} s CPU")
            print(f"baseline / this tree: {b_wall / wall:.2f}x wall, {b_cpu / cpu:.2f}x CPU; "
                  f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
