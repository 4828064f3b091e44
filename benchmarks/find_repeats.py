"""Find computations the build does more than once: the same function on the same inputs.

Wraps candidate functions of irtlib and of the book's package (MAP fits, MAP abilities, adaptive runs,
protocol runs, ceilings, Anchor Points, data loading) so that each call logs
``(job, function, digest of its arguments, CPU seconds)`` to a JSON-lines file, then runs one job in
this process: a chapter's code cells (as :mod:`benchmarks.profile_chapter` does) or chapter 06's
comparison job (``--job comparison``). Run it once per job with the same ``--log`` and the same copy of
the stage's cache (in the build's order, so what one job caches the next one reads), then
``--report`` lists every digest seen more than once, with the CPU seconds of the repeats::

    .venv/bin/python benchmarks/find_repeats.py 05_selection --cache-dir /tmp/cache --log /tmp/calls.jsonl
    .venv/bin/python benchmarks/find_repeats.py --job comparison --cache-dir /tmp/cache --log /tmp/calls.jsonl
    .venv/bin/python benchmarks/find_repeats.py --report --log /tmp/calls.jsonl

A call nested in a logged call is logged too (its CPU is part of its caller's). The digests are of the
arguments' content (arrays' bytes, response matrices' values and labels, dataclasses' fields), so two
calls with one digest compute the same thing (every candidate is deterministic given its arguments).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import json
import os
import pickle
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

#: ``module:function`` of every candidate.
CANDIDATES = (
    "irtlib.calibration.joint_map:fit_map",
    "irtlib.calibration.joint_map:fit_2pl",
    "irtlib.calibration.split_cache:fit_map_splits_cached",
    "irtlib.calibration.split_cache:fit_2pl_splits_cached",
    "irtlib.core.ability:map_ability",
    "irtlib.selection.adaptive:run_adaptive",
    "irtlib.selection.static:anchor_points_path",
    "irtlib.selection.static:anchor_points_fresh",
    "irtlib.selection.static:score_blocks_map",
    "irtlib.selection.static:total_fisher",
    "irtlib.selection.static:marginal_fisher_bq",
    "irtlib.protocol.agreement:run_protocol",
    "irtlib.protocol.agreement:calibrate_splits",
    "irtlib.protocol.agreement:static_selections",
    "irtlib.protocol.ceiling:agreement_ceiling",
    "irtbook.pipeline:calibrate_matrix",
    "irtbook.shared_fits:calibrate_block",
    "irtlib.datasets:load",
    "irtbook.pipeline:load_benchmark",
    "irtbook.pipeline:protocol_benchmark",
)


def _update(digest, value, depth=0) -> None:
    """Feed ``value``'s content to ``digest``."""
    import pandas as pd

    if depth > 6:
        digest.update(b"<deep>")
        return
    digest.update(type(value).__name__.encode())
    if value is None or isinstance(value, (bool, int, float, str, bytes, np.integer, np.floating)):
        digest.update(repr(value).encode())
    elif isinstance(value, np.ndarray):
        arr = np.ascontiguousarray(value)
        digest.update(str((arr.shape, arr.dtype.str)).encode())
        digest.update(arr.tobytes() if arr.dtype != object else repr(arr.tolist()).encode())
    elif isinstance(value, (pd.DataFrame, pd.Series)):
        digest.update(pd.util.hash_pandas_object(value).to_numpy().tobytes())
        digest.update(repr(list(getattr(value, "columns", [value.name]))).encode())
    elif isinstance(value, (list, tuple)):
        for v in value:
            _update(digest, v, depth + 1)
    elif isinstance(value, dict):
        for k in sorted(value, key=repr):
            _update(digest, k, depth + 1)
            _update(digest, value[k], depth + 1)
    elif isinstance(value, np.random.SeedSequence):
        digest.update(repr((value.entropy, value.spawn_key, value.n_children_spawned)).encode())
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            digest.update(f.name.encode())
            _update(digest, getattr(value, f.name), depth + 1)
    elif hasattr(value, "values") and hasattr(value, "items") and hasattr(value, "models"):   # ResponseMatrix
        _update(digest, np.asarray(value.values), depth + 1)
        _update(digest, [str(i) for i in value.items] + [str(m) for m in value.models], depth + 1)
    elif hasattr(value, "__dict__") and not callable(value):
        _update(digest, {k: v for k, v in vars(value).items() if not k.startswith("_")}, depth + 1)
    elif callable(value):
        digest.update(repr(getattr(value, "__qualname__", type(value).__qualname__)).encode())
        if hasattr(value, "__dict__"):
            _update(digest, {k: v for k, v in vars(value).items() if not k.startswith("_")}, depth + 1)
    else:
        try:
            digest.update(pickle.dumps(value))
        except Exception:     # noqa: BLE001 - anything unpicklable is described by its repr
            digest.update(repr(value).encode())


def arguments_digest(args, kwargs) -> str:
    """A digest of a call's arguments by content."""
    digest = hashlib.sha256()
    _update(digest, list(args))
    _update(digest, dict(kwargs))
    return digest.hexdigest()[:16]


def instrument(log_path: Path, job: str) -> None:
    """Wrap every candidate (its module's binding and every other loaded module's reference to it)."""
    log = log_path.open("a", encoding="utf-8")
    depth = [0]
    for spec in CANDIDATES:
        module_name, name = spec.split(":")
        module = importlib.import_module(module_name)
        original = getattr(module, name, None)
        if original is None:
            print(f"find_repeats: {spec} not found, not logged", file=sys.stderr)
            continue

        def wrapper(*args, __original=original, __spec=spec, **kwargs):
            digest = arguments_digest(args, kwargs)
            depth[0] += 1
            start = time.process_time()
            try:
                return __original(*args, **kwargs)
            finally:
                depth[0] -= 1
                log.write(json.dumps({"job": job, "function": __spec, "digest": digest, "depth": depth[0],
                                      "cpu": time.process_time() - start}) + "\n")
                log.flush()

        functools.update_wrapper(wrapper, original)
        for mod in list(sys.modules.values()):
            for attr, value in list(getattr(mod, "__dict__", {}).items()):
                if value is original:
                    setattr(mod, attr, wrapper)


def run_chapter(args) -> int:
    """A chapter's code cells in this process (glue recorded nowhere)."""
    import myst_nb
    from IPython.core.interactiveshell import InteractiveShell
    from profile_chapter import runnable_cells

    myst_nb.glue = lambda *a, **k: None
    shell = InteractiveShell.instance()
    start = time.process_time()
    for source in runnable_cells(args):
        result = shell.run_cell(source, store_history=False, silent=True)
        if not result.success:
            print(f"a cell failed: {result.error_in_exec or result.error_before_exec!r}", file=sys.stderr)
            return 1
    print(f"{args.chapter}: cpu {time.process_time() - start:.1f} s", file=sys.stderr)
    return 0


def report(log_path: Path, *, top: int = 40) -> None:
    """Every digest seen more than once: the function, the jobs, the calls and the CPU of the repeats."""
    calls = defaultdict(list)
    for line in log_path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        calls[(row["function"], row["digest"])].append(row)
    groups = []
    for (function, digest), rows in calls.items():
        if len(rows) > 1:
            repeat_cpu = sum(r["cpu"] for r in rows) - rows[0]["cpu"]
            jobs = defaultdict(int)
            for r in rows:
                jobs[r["job"]] += 1
            groups.append((repeat_cpu, function, digest, len(rows), dict(jobs)))
    by_function = defaultdict(lambda: [0, 0.0])
    for repeat_cpu, function, _, n, _ in groups:
        by_function[function][0] += n - 1
        by_function[function][1] += repeat_cpu
    print("repeated calls by function (calls beyond the first of each digest, their CPU s):")
    for function, (n, cpu) in sorted(by_function.items(), key=lambda kv: -kv[1][1]):
        print(f"  {function:55s} {n:6d} {cpu:8.2f}")
    print(f"\nthe {top} costliest repeated digests:")
    for repeat_cpu, function, digest, n, jobs in sorted(groups, reverse=True)[:top]:
        print(f"  {repeat_cpu:7.2f} s  {function:48s} {digest} x{n} {jobs}")


def main(argv=None) -> int:
    from profile_chapter import chapter_parser

    parser = chapter_parser(__doc__.splitlines()[0])
    parser.add_argument("--log", required=True)
    parser.add_argument("--job", default=None, help="'comparison': chapter 06's comparison job instead of a chapter")
    parser.add_argument("--report", action="store_true")
    if argv is None:
        argv = sys.argv[1:]
    if "--report" in argv or "--job" in argv:    # no chapter then
        argv = ["-"] + list(argv) + ([] if "--cache-dir" in argv else ["--cache-dir", "-"])
    args = parser.parse_args(argv)
    if args.report:
        report(Path(args.log))
        return 0
    os.chdir(ROOT)
    os.environ.setdefault("MPLBACKEND", "Agg")
    job = args.job or args.chapter
    instrument(Path(args.log), job)
    if args.job == "comparison":
        from irtbook import comparison_runs

        start = time.process_time()
        code = comparison_runs.main(["--cache-dir", args.cache_dir])
        print(f"comparison: cpu {time.process_time() - start:.1f} s", file=sys.stderr)
        return code
    return run_chapter(args)


if __name__ == "__main__":
    sys.exit(main())
