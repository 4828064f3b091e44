"""Anchor Points on the chapters' own inputs: this tree's code against a base revision's, in one process, CPU seconds.

The inputs are captured from the protocol runs themselves (chapter 05's authors' protocol, chapter 06's
paper-text protocol: every call of :func:`irtlib.selection.static.anchor_points_path` and
:func:`~irtlib.selection.static.anchor_points_fresh` of a run with Anchor Points alone, the split
calibrations read from ``--cache-dir``), stored in ``--inputs`` and replayed. The base revision's
``static.py`` (``git show REV:irtlib/selection/static.py``) is loaded beside this tree's as
``irtlib.selection._static_base``, with the revision's nearest-medoid kernel (``anchor_kernel.py`` and its C
source) where it has one (the rest of the library is this tree's); the two forms run in turn
(``--rounds`` times, ABBA), one BLAS thread as the protocol runs them. Printed per benchmark: each form's
CPU seconds, the ratio of the sums, a digest of every subset's items and weights, and how many subsets
differ (medoid sets, weights); with ``--labels``, also a digest of every budget's medoids and item labels
(what ``_as_subset`` receives) under each form, from one more untimed replay::

    .venv/bin/python benchmarks/bench_anchor_path.py --cache-dir /tmp/cache --run authors safetybench airbench2024
    .venv/bin/python benchmarks/bench_anchor_path.py --cache-dir /tmp/cache --run paper safetybench --base main
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _show(rev: str, path: str) -> str | None:
    """``git show REV:PATH``, or None where the revision has no such file."""
    done = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def _import(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def base_module(rev: str):
    """The base revision's ``static.py``, imported as ``irtlib.selection._static_base`` (relative imports: here).

    Where the revision has the nearest-medoid kernel (``anchor_kernel.py`` and ``_anchor_kernel.c``), its own
    kernel too (``irtlib.selection._anchor_kernel_base``, compiled from the revision's C source), so a change of
    the kernel is measured as well.
    """
    folder = Path(tempfile.mkdtemp())
    (folder / "_static_base.py").write_text(_show(rev, "irtlib/selection/static.py"))
    kernel_py, kernel_c = (_show(rev, f"irtlib/selection/{f}") for f in ("anchor_kernel.py", "_anchor_kernel.c"))
    module = _import("irtlib.selection._static_base", folder / "_static_base.py")
    if kernel_py is not None and kernel_c is not None:
        (folder / "_anchor_kernel.c").write_text(kernel_c)
        (folder / "_anchor_kernel_base.py").write_text(kernel_py)
        module.anchor_kernel = _import("irtlib.selection._anchor_kernel_base", folder / "_anchor_kernel_base.py")
    return module


def capture(run: str, name: str, cache_dir: str) -> list:
    """Every Anchor Points call of one protocol run (Anchor Points alone), with its arguments."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import profile_protocol

    import irtlib.protocol.agreement as agreement
    from irtbook.pipeline import load_benchmark
    from irtlib.selection import static

    calls = []
    saved = static.anchor_points_path, static.anchor_points_fresh, agreement.run_protocol

    def recorder(kind, fn):
        def record(train_values, ks, **kw):
            calls.append((kind, np.array(train_values, float), list(ks), kw))
            return fn(train_values, ks, **kw)
        return record

    def anchors_only(*args, **kw):
        kw["methods"] = ["anchor-points"]
        return saved[2](*args, **kw)

    static.anchor_points_path = recorder("path", saved[0])
    static.anchor_points_fresh = recorder("fresh", saved[1])
    agreement.run_protocol = anchors_only
    try:
        profile_protocol.run_one(load_benchmark(name), run, max_splits=None, cache_dir=cache_dir)
    finally:
        static.anchor_points_path, static.anchor_points_fresh, agreement.run_protocol = saved
    return calls


def replay(module, calls):
    """CPU seconds, digest and results of every call under ``module``'s functions."""
    fn = {"path": module.anchor_points_path, "fresh": module.anchor_points_fresh}
    digest = hashlib.sha256()
    out = []
    start = time.process_time()
    for kind, x, ks, kw in calls:
        res = fn[kind](x, ks, **kw)
        out.append(res)
    cpu = time.process_time() - start
    for res in out:
        for k in sorted(res):
            digest.update(res[k].items.tobytes())
            digest.update(res[k].weights.tobytes())
    return cpu, digest.hexdigest()[:16], out


def label_digest(module, calls):
    """A digest of every budget's medoids and item labels (what ``_as_subset`` receives), one untimed replay."""
    digest = hashlib.sha256()
    saved = module._as_subset

    def recording(med, lab):
        digest.update(np.asarray(med, dtype=np.int64).tobytes())
        digest.update(np.asarray(lab, dtype=np.int64).tobytes())
        return saved(med, lab)

    module._as_subset = recording
    try:
        fn = {"path": module.anchor_points_path, "fresh": module.anchor_points_fresh}
        for kind, x, ks, kw in calls:
            fn[kind](x, ks, **kw)
    finally:
        module._as_subset = saved
    return digest.hexdigest()[:16]


def differences(old, new):
    """(subsets, subsets with other medoids, subsets with other weights only)."""
    total = items = weights = 0
    for a, b in zip(old, new, strict=True):
        for k in a:
            total += 1
            if not np.array_equal(a[k].items, b[k].items):
                items += 1
            elif not np.array_equal(a[k].weights, b[k].weights):
                weights += 1
    return total, items, weights


def summary(label: str, calls: list, runs: dict, seen: dict) -> str:
    """One benchmark's line of an ABBA replay: each form's CPU seconds (``runs``: form -> seconds per round), the
    ratio, the digests and how many subsets differ (``seen``: form -> (digest, results) of :func:`replay`)."""
    (d_old, r_old), (d_new, r_new) = seen["base"], seen["this tree"]
    total, items, weights = differences(r_old, r_new)
    ratio = sum(runs["this tree"]) / sum(runs["base"])
    return (f"{label} ({len(calls)} calls): base {', '.join(f'{t:.2f}' for t in runs['base'])} CPU s; "
            f"this tree {', '.join(f'{t:.2f}' for t in runs['this tree'])}; ratio {ratio:.3f}; digests "
            f"{d_old} / {d_new}; subsets {total}, other medoids {items}, other weights only {weights}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", nargs="+")
    parser.add_argument("--run", choices=["authors", "paper"], required=True)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--inputs", default="/tmp/anchor-inputs", help="where captured inputs are kept")
    parser.add_argument("--base", default="8340cf4", help="the revision whose static.py is the old form")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-calls", type=int, default=None, help="replay only the first calls (splits)")
    parser.add_argument("--labels", action="store_true",
                        help="also compare every budget's medoids and item labels (one more replay of each form)")
    args = parser.parse_args(argv)
    from threadpoolctl import threadpool_limits

    from irtlib.selection import static

    old = base_module(args.base)
    Path(args.inputs).mkdir(parents=True, exist_ok=True)
    with threadpool_limits(limits=1):
        for name in args.benchmarks:
            path = Path(args.inputs) / f"{args.run}_{name}.pkl"
            if not path.exists():
                path.write_bytes(pickle.dumps(capture(args.run, name, args.cache_dir)))
            calls = pickle.loads(path.read_bytes())[:args.max_calls]
            forms = {"base": old, "this tree": static}
            runs = {form: [] for form in forms}
            seen = {}
            for r in range(args.rounds):
                for form in (forms if r % 2 == 0 else dict(reversed(forms.items()))):
                    cpu, digest, res = replay(forms[form], calls)
                    runs[form].append(cpu)
                    seen[form] = digest, res
            if args.labels:
                lab_old, lab_new = label_digest(old, calls), label_digest(static, calls)
                print(f"{args.run} {name}: medoids and labels digests {lab_old} / {lab_new} "
                      f"({'equal' if lab_old == lab_new else 'DIFFERENT'})", flush=True)
            print(summary(f"{args.run} {name}", calls, runs, seen), flush=True)
    print(f"load {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
