"""Anchor Points on the chapters' own inputs: this tree's code against a base revision's, in one process, CPU seconds.

The inputs are captured from the protocol runs themselves (chapter 05's authors' protocol, chapter 06's
paper-text protocol: every call of :func:`irtlib.selection.static.anchor_points_path` and
:func:`~irtlib.selection.static.anchor_points_fresh` of a run with Anchor Points alone, the split
calibrations read from ``--cache-dir``), stored in ``--inputs`` and replayed. The base revision's
``static.py`` (``git show REV:irtlib/selection/static.py``) is loaded beside this tree's as
``irtlib.selection._static_base`` (the rest of the library is this tree's); the two forms run in turn
(``--rounds`` times, ABBA), one BLAS thread as the protocol runs them. Printed per benchmark: each form's
CPU seconds, the ratio of the sums, a digest of every subset's items and weights, and how many subsets
differ (medoid sets, weights)::

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


def base_module(rev: str):
    """The base revision's ``static.py``, imported as ``irtlib.selection._static_base`` (relative imports: here)."""
    text = subprocess.run(["git", "show", f"{rev}:irtlib/selection/static.py"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "_static_base.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("irtlib.selection._static_base", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmarks", nargs="+")
    parser.add_argument("--run", choices=["authors", "paper"], required=True)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--inputs", default="/tmp/anchor-inputs", help="where captured inputs are kept")
    parser.add_argument("--base", default="8340cf4", help="the revision whose static.py is the old form")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-calls", type=int, default=None, help="replay only the first calls (splits)")
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
            (d_old, r_old), (d_new, r_new) = seen["base"], seen["this tree"]
            total, items, weights = differences(r_old, r_new)
            ratio = sum(runs["this tree"]) / sum(runs["base"])
            print(f"{args.run} {name} ({len(calls)} calls): base {', '.join(f'{t:.2f}' for t in runs['base'])} CPU s; "
                  f"this tree {', '.join(f'{t:.2f}' for t in runs['this tree'])}; ratio {ratio:.3f}; digests "
                  f"{d_old} / {d_new}; subsets {total}, other medoids {items}, other weights only {weights}",
                  flush=True)
    print(f"load {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
