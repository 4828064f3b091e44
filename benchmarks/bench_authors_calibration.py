"""The authors' py-irt calibration on every split: separate py-irt fits against one batched fit.

Prints, for SimpleSafetyTests (the authors' 100 splits x 79 kept items): seconds per split of N
separate py-irt fits with the authors' settings (``fit_2pl(engine="pyirt-authors")``); then the
batched fit (``irtlib.calibration.pyirt_batch.fit_2pl_splits``, ``--workers`` processes) of each of the
four released benchmarks with the authors' split counts (Anthropic Red Team 100 x 512, HarmBench
100 x 395, SimpleSafetyTests 100 x 79, WMDP-Bio 70 splits of 6 test models x 1,090; WMDP's safety
is 1 - x): seconds per benchmark and per split, and per split against one separate py-irt fit (the
baseline, measured in the same run); then the total, the total per split against the baseline, and
SimpleSafetyTests against the authors' own pipeline (24 min 35 s on this machine, issue 17). Peak
memory from resource.getrusage.

    nice -n 10 .venv/bin/python benchmarks/bench_authors_calibration.py [--single N] [--epochs E]
        [--only NAME ...] [--workers W] [--profile EPOCHS] [--ab-streams SPLITS] [--ab-adam SPLITS]

Each time is printed as wall seconds and as CPU seconds (this process and its worker processes): on
a shared machine the wall time grows with the load (printed too), the CPU time much less.
``--profile EPOCHS`` first prints where the time of a batched fit goes: torch's profiler over
EPOCHS epochs of each benchmark's batched fit in this process (the top operations by their own
CPU time).

``--ab-streams SPLITS`` first times, in this process and one core, the batched fit of SPLITS splits of
each benchmark (300 epochs) with the per-split draws made by torch calls from Python and by the C
streams (:mod:`irtlib.calibration.stream_kernel`), alternating twice, and prints the CPU ratio and
whether the two fits are equal bit for bit. ``--ab-adam SPLITS`` does the same for Adam's step, torch's
operations against the C step (:mod:`irtlib.calibration.adam_kernel`).

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

from irtbook.authors_fits import authors_train_rows  # noqa: E402
from irtlib.calibration.joint_map import fit_2pl  # noqa: E402
from irtlib.calibration.pyirt_batch import fit_2pl_splits, fit_hierarchical_batch  # noqa: E402
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


class Clock:
    """Wall and CPU seconds of a block (CPU of the worker processes: see :func:`worker_cpu`)."""

    def __enter__(self):
        self.start, self.cpu0 = time.perf_counter(), time.process_time()
        self.workers0 = worker_cpu()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start
        self.cpu = time.process_time() - self.cpu0 + worker_cpu() - self.workers0


def worker_cpu() -> float:
    """CPU seconds used so far by this process's live child processes (the fit's worker pool), from /proc."""
    total = 0.0
    me = str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:                       # the parent pid; then utime and stime in clock ticks
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def profile(x: np.ndarray, train_rows: list, epochs: int, name: str) -> None:
    """Print the top torch operations (own CPU time) of ``epochs`` epochs of the batched fit."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        fit_hierarchical_batch(x, train_rows, epochs=epochs)
    print(f"profile of {name}, {epochs} epochs, {len(train_rows)} splits, 1 process:")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=40))


#: The kernels --ab-streams and --ab-adam compare with torch: module, its _LOADED key, what each side is.
AB_KERNELS = {"streams": ("stream_kernel", "lib", "draws", "torch calls", "C streams"),
              "adam": ("adam_kernel", "kernel", "Adam", "torch step", "C step")}


def ab_kernel(x: np.ndarray, train_rows: list, name: str, kernel: str, epochs: int = 300) -> None:
    """CPU of the batched fit with one part in torch against its C kernel (same process), and their equality."""
    import importlib

    module_name, key, part, torch_label, c_label = AB_KERNELS[kernel]
    module = importlib.import_module(f"irtlib.calibration.{module_name}")
    if module.load() is None:
        print(f"{name}: the {c_label} does not give torch's numbers here; nothing to compare")
        return
    cpu: dict = {"torch": [], "c": []}
    fits = {}
    for _ in range(2):
        for kind in ("torch", "c"):
            module._LOADED.clear()
            if kind == "torch":
                module._LOADED[key] = None          # as where the kernel does not match torch
            module.load()
            start = time.process_time()
            fits[kind] = fit_hierarchical_batch(x, train_rows, epochs=epochs)
            cpu[kind].append(time.process_time() - start)
    module._LOADED.clear()
    same = all(np.array_equal(getattr(fits["torch"], k), getattr(fits["c"], k), equal_nan=True)
               for k in ("a", "b", "theta", "best_epoch", "loss"))
    torch_s, c_s = min(cpu["torch"]), min(cpu["c"])
    print(f"{part} A/B, {name}: {len(train_rows)} splits x {epochs} epochs, 1 process: {torch_label} {torch_s:.2f} "
          f"CPU s, {c_label} {c_s:.2f} CPU s: {torch_s / c_s:.2f}x less CPU; equal bit for bit: {same}",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--single", type=int, default=10, help="separate py-irt fits to time (default 10)")
    parser.add_argument("--epochs", type=int, default=1000)
    parser.add_argument("--only", nargs="*", choices=sorted(BENCHMARKS), default=sorted(BENCHMARKS),
                        help="batched fits of these benchmarks only")
    parser.add_argument("--workers", type=int, default=2, help="processes of the batched fit (default 2)")
    parser.add_argument("--profile", type=int, default=0, metavar="EPOCHS",
                        help="first profile EPOCHS epochs of each batched fit (default 0: no profile)")
    parser.add_argument("--ab-streams", type=int, default=0, metavar="SPLITS",
                        help="first compare torch's and the C streams' draws on SPLITS splits (default 0: no)")
    parser.add_argument("--ab-adam", type=int, default=0, metavar="SPLITS",
                        help="first compare torch's and the C Adam step on SPLITS splits (default 0: no)")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)

    data = {name: load(name) for name in BENCHMARKS if name in args.only or name == "simplesafetytests"}
    splits = {name: authors_train_rows(x.shape[0], BENCHMARKS[name][1], n_test=BENCHMARKS[name][2])
              for name, x in data.items()}
    for kernel, n_splits in (("streams", args.ab_streams), ("adam", args.ab_adam)):
        for name in args.only if n_splits else ():
            ab_kernel(data[name], splits[name][:n_splits], name, kernel)
    if args.profile:
        for name in args.only:
            profile(data[name], splits[name], args.profile, name)

    sst, rows = data["simplesafetytests"], splits["simplesafetytests"]
    single = float("nan")
    if args.single:
        with Clock() as clock:
            for s in range(args.single):
                train = ResponseMatrix(sst[rows[s]], [f"m{i}" for i in rows[s]],
                                       [f"i{j}" for j in range(sst.shape[1])])
                fit_2pl(train, engine="pyirt-authors", epochs=args.epochs)
        single = clock.seconds / args.single
        print(f"single py-irt fits (authors' settings), SimpleSafetyTests: {single:.2f} s per split "
              f"({clock.cpu / args.single:.2f} s CPU) over {args.single} splits; 100 splits extrapolated: "
              f"{100 * single:.0f} s; peak {peak_mib():.0f} MiB", flush=True)

    total = total_cpu = 0.0
    n_total = 0
    fit_2pl_splits(sst, rows[:args.workers], epochs=1, workers=args.workers)   # start the worker processes
    for name in BENCHMARKS:
        if name not in args.only:
            continue
        x, train_rows = data[name], splits[name]
        with Clock() as clock:
            fit_2pl_splits(x, train_rows, epochs=args.epochs, workers=args.workers)
        n_splits = len(train_rows)
        total, total_cpu, n_total = total + clock.seconds, total_cpu + clock.cpu, n_total + n_splits
        per_split = clock.seconds / n_splits
        ratio = f", {single / per_split:.0f}x one py-irt fit per split" if args.single else ""
        print(f"batched {name}: {n_splits} splits x {x.shape[0] - BENCHMARKS[name][2]} training models x "
              f"{x.shape[1]} items: {clock.seconds:.1f} s ({clock.cpu:.1f} s CPU), {per_split:.3f} s per split"
              f"{ratio}; load {os.getloadavg()[0]:.1f}; peak {peak_mib():.0f} MiB", flush=True)
        if name == "simplesafetytests":
            separate = (f"100 separate py-irt fits / batched {100 * single / clock.seconds:.0f}x; "
                        if args.single else "")
            print(f"  SimpleSafetyTests: {separate}authors' pipeline (24 min 35 s) / batched "
                  f"{AUTHORS_SST_SECONDS / clock.seconds:.0f}x")
    ratio = f", {single * n_total / total:.0f}x one py-irt fit per split" if args.single else ""
    print(f"batched, {len(args.only)} benchmark(s), {n_total} splits, {args.workers} worker(s): {total:.1f} s "
          f"({total_cpu:.1f} s CPU), {total / n_total:.3f} s per split{ratio}; peak {peak_mib():.0f} MiB")


if __name__ == "__main__":
    main()
