"""The authors' py-irt calibration on every split: separate py-irt fits against one batched fit.

Prints, for SimpleSafetyTests (the authors' 100 splits x 79 kept items): seconds for N separate py-irt
fits with the authors' settings (``fit_2pl(engine="pyirt-authors")``), extrapolated to 100 splits,
against the batched fit of all 100 (``irtlib.calibration.pyirt_batch.fit_2pl_splits``), and the ratio; then
the batched time for each of the four released benchmarks with the authors' split counts (Anthropic
Red Team 100 x 512, HarmBench 100 x 395, SimpleSafetyTests 100 x 79, WMDP-Bio 70 splits of 6 test
models x 1,090; WMDP's safety is 1 - x), the total, and the ratio against the authors' own pipeline
on SimpleSafetyTests (24 min 35 s on this machine, issue 17). Peak memory from resource.getrusage.

    nice -n 10 .venv/bin/python benchmarks/bench_authors_calibration.py [--single N] [--epochs E] [--only NAME ...]

Each time is printed as wall seconds and as this process's CPU seconds: on a shared machine the wall
time grows with the load (printed too), the CPU time much less.

Data: ../shared/realdata/paper (or IRTLIB_PAPER_DATA). Read with a few lines of json here, because
this script only needs the matrices.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from irtlib.book.authors_fits import authors_train_rows  # noqa: E402
from irtlib.calibration.joint_map import fit_2pl  # noqa: E402
from irtlib.calibration.pyirt_batch import fit_2pl_splits  # noqa: E402
from irtlib.core.responses import ResponseMatrix  # noqa: E402

DATA = Path(os.environ.get("IRTLIB_PAPER_DATA", ROOT.parent / "shared" / "realdata" / "paper"))
#: benchmark -> (file, splits, test models per split, x is "correct" so safety = 1 - x)
BENCHMARKS = {
    "anthropic_red_team": ("helm_antredteam_irt_data.jsonl", 100, 10, False),
    "harmbench": ("helm_harmbench_irt_data.jsonl", 100, 10, False),
    "simplesafetytests": ("helm_simplesafety_irt_data.jsonl", 100, 10, False),
    "wmdp": ("wmdp_irt_data.jsonl", 70, 6, True),
}
AUTHORS_SST_SECONDS = 24 * 60 + 35


def load(name: str) -> np.ndarray:
    file, _, _, flip = BENCHMARKS[name]
    with open(DATA / file) as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    items = list(records[0]["responses"])
    x = np.array([[r["responses"][i] for i in items] for r in records], dtype=float)
    if flip:
        x = 1.0 - x
    p = x.mean(axis=0)
    return x[:, p * (1 - p) >= 0.01]   # the authors' variance filter, over all models, before any split


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--single", type=int, default=10, help="separate py-irt fits to time (default 10)")
    parser.add_argument("--epochs", type=int, default=1000)
    parser.add_argument("--only", nargs="*", choices=sorted(BENCHMARKS), default=sorted(BENCHMARKS),
                        help="batched fits of these benchmarks only")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)

    sst = load("simplesafetytests")
    rows = authors_train_rows(sst.shape[0], 100, n_test=10)
    single = float("nan")
    if args.single:
        start, cpu = time.perf_counter(), time.process_time()
        for s in range(args.single):
            train = ResponseMatrix(sst[rows[s]], [f"m{i}" for i in rows[s]], [f"i{j}" for j in range(sst.shape[1])])
            fit_2pl(train, engine="pyirt-authors", epochs=args.epochs)
        single = (time.perf_counter() - start) / args.single
        cpu = (time.process_time() - cpu) / args.single
        print(f"single py-irt fits (authors' settings), SimpleSafetyTests: {single:.2f} s per split "
              f"({cpu:.2f} s CPU) over {args.single} splits; 100 splits extrapolated: {100 * single:.0f} s; "
              f"peak {peak_mib():.0f} MiB", flush=True)

    total = 0.0
    total_cpu = 0.0
    for name, (_, n_splits, n_test, _) in BENCHMARKS.items():
        if name not in args.only:
            continue
        x = sst if name == "simplesafetytests" else load(name)
        train_rows = authors_train_rows(x.shape[0], n_splits, n_test=n_test)
        start, cpu = time.perf_counter(), time.process_time()
        fit_2pl_splits(x, train_rows, epochs=args.epochs)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        total, total_cpu = total + seconds, total_cpu + cpu
        print(f"batched {name}: {n_splits} splits x {x.shape[0] - n_test} training models x {x.shape[1]} items: "
              f"{seconds:.1f} s ({cpu:.1f} s CPU); load {os.getloadavg()[0]:.1f}; peak {peak_mib():.0f} MiB",
              flush=True)
        if name == "simplesafetytests":
            print(f"  SimpleSafetyTests ratio: separate/batched {100 * single / seconds:.1f}x; "
                  f"authors' pipeline (24 min 35 s)/batched {AUTHORS_SST_SECONDS / seconds:.1f}x")
    print(f"batched, {len(args.only)} benchmark(s): {total:.0f} s ({total / 60:.1f} min), {total_cpu:.0f} s CPU; "
          f"peak {peak_mib():.0f} MiB")


if __name__ == "__main__":
    main()
