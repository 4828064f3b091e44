"""Run one chapter's code cells in this process and record every glued value, to compare two versions of the library.

A speed change must leave a chapter's results the same: this runs ``book/<chapter>.md``'s code cells in
an in-process IPython shell (as :mod:`benchmarks.profile_chapter` does, without the profiler), records
each value the chapter glues (a table's frame, a figure's PNG digest, a number, a phrase), keeps the
namespace variables named by ``--keep`` (result frames, dicts of them), prints the chapter's CPU seconds
(this process's and its worker processes') with the 1-minute load, and pickles all of it to ``--out``.
``--compare OLD.pkl`` then reports every glued value and kept variable that differs from an earlier run
(frames with ``DataFrame.equals``, arrays with ``np.array_equal``, floats bit for bit), with the largest
absolute difference of numbers that moved; measured seconds (a frame's ``seconds`` column, a glued value
named ``..._seconds``) are left out. Run from the repository root, with a copy of the stage's
cache (the chapter writes its own entries there)::

    .venv/bin/python benchmarks/chapter_glue.py 04b_model_fit --cache-dir /tmp/cache --out /tmp/new.pkl \\
        --keep sx2 outfit null dims models_cmp fluid --compare /tmp/old.pkl
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from profile_chapter import _children_cpu, _reap_workers, chapter_parser, runnable_cells  # noqa: E402


def canonical(value):
    """A glued value as something picklable and comparable: a frame, a PNG digest, a string or the value."""
    from IPython.display import Markdown
    from matplotlib.figure import Figure
    from pandas.io.formats.style import Styler

    if isinstance(value, Styler):
        return ("table", value.data.copy())
    if isinstance(value, Markdown):
        return ("markdown", value.data)
    if isinstance(value, Figure):
        buffer = io.BytesIO()
        value.savefig(buffer, format="png", metadata={"Software": None})
        return ("figure", hashlib.sha256(buffer.getvalue()).hexdigest())
    return value


#: A result frame's column of measured seconds, and glued values that are measured seconds: left out of
#: the comparison (they differ from run to run).
MEASURED = "seconds"


def differences(old, new, where="") -> list[str]:
    """Where two recorded values differ, as lines; empty when they are equal bit for bit (measured seconds aside)."""
    if isinstance(old, dict) and isinstance(new, dict):
        extra = sorted(map(str, set(old) ^ set(new)))
        out = [f"{where}: keys {extra} on one side only"] if extra else []
        for k in old:
            if k in new and not (isinstance(k, str) and k.endswith(MEASURED)):
                out += differences(old[k], new[k], f"{where}[{k!r}]")
        return out
    if isinstance(old, tuple) and isinstance(new, tuple) and len(old) == len(new):
        return [line for i, (o, n) in enumerate(zip(old, new, strict=True))
                for line in differences(o, n, f"{where}[{i}]")]
    if isinstance(old, pd.DataFrame) and isinstance(new, pd.DataFrame) and MEASURED in old and MEASURED in new:
        return differences(old.drop(columns=MEASURED), new.drop(columns=MEASURED), where)
    if isinstance(old, (pd.DataFrame, pd.Series)) and isinstance(new, type(old)):
        if old.equals(new) and (not isinstance(old, pd.DataFrame) or list(old.columns) == list(new.columns)):
            return []
        return [f"{where}: frames differ{_largest(old, new)}"]
    if isinstance(old, np.ndarray) and isinstance(new, np.ndarray):
        return [] if old.shape == new.shape and np.array_equal(old, new, equal_nan=old.dtype.kind == "f") else \
            [f"{where}: arrays differ{_largest(old, new)}"]
    if isinstance(old, float) and isinstance(new, float):
        same = old == new or (np.isnan(old) and np.isnan(new))
        return [] if same else [f"{where}: {old!r} -> {new!r} (difference {new - old:.3g})"]
    try:
        same = bool(old == new)
    except (TypeError, ValueError):
        same = False
    return [] if same else [f"{where}: {str(old)[:80]!r} -> {str(new)[:80]!r}"]


def _largest(old, new) -> str:
    """The largest absolute difference of two frames' or arrays' numbers, where their shapes agree."""
    try:
        a = np.asarray(old.select_dtypes("number") if isinstance(old, pd.DataFrame) else old, dtype=float)
        b = np.asarray(new.select_dtypes("number") if isinstance(new, pd.DataFrame) else new, dtype=float)
        if a.shape != b.shape:
            return f" (shapes {a.shape} and {b.shape})"
        d = np.abs(a - b)
        return f" (largest absolute difference {np.nanmax(d):.3g})" if np.isfinite(d).any() else ""
    except (TypeError, ValueError):
        return ""


def main(argv=None) -> int:
    parser = chapter_parser(__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where to pickle the glued values and kept variables")
    parser.add_argument("--keep", nargs="*", default=[], help="namespace variables to keep (result frames)")
    parser.add_argument("--compare", default=None, help="an earlier --out to compare with")
    args = parser.parse_args(argv)

    os.chdir(ROOT)
    os.environ.setdefault("MPLBACKEND", "Agg")
    import myst_nb
    from IPython.core.interactiveshell import InteractiveShell

    glued = {}

    def record(name, value, display=True):   # noqa: ARG001  (myst_nb's signature)
        glued[name] = value                  # made canonical after the timing (a figure's PNG costs)

    myst_nb.glue = record
    shell = InteractiveShell.instance()
    start_wall, start_cpu, start_children = time.perf_counter(), time.process_time(), _children_cpu()
    cells = []
    for source in runnable_cells(args):
        cell_cpu = time.process_time()
        result = shell.run_cell(source, store_history=False, silent=True)
        cells.append((time.process_time() - cell_cpu, source.strip().splitlines()[0][:60] if source.strip() else ""))
        if not result.success:
            print(f"a cell failed: {result.error_in_exec or result.error_before_exec!r}", file=sys.stderr)
            return 1
    _reap_workers()
    wall, cpu, child = (time.perf_counter() - start_wall, time.process_time() - start_cpu,
                        _children_cpu() - start_children)
    print(f"{args.chapter}: wall {wall:.1f} s, cpu {cpu:.1f} s, workers' cpu {child:.1f} s; "
          f"load {os.getloadavg()[0]:.2f}; {len(glued)} glued values")
    for i, (seconds, first) in enumerate(cells):
        if seconds >= 0.5:
            print(f"  cell {i:>2}: cpu {seconds:6.1f} s  {first}")
    glued = {name: canonical(value) for name, value in glued.items()}
    kept = {name: shell.user_ns[name] for name in args.keep}
    record_ = {"glued": glued, "kept": kept, "cpu": cpu, "workers_cpu": child, "wall": wall}
    Path(args.out).write_bytes(pickle.dumps(record_, protocol=pickle.HIGHEST_PROTOCOL))
    if args.compare:
        old = pickle.loads(Path(args.compare).read_bytes())
        lines = differences(old["glued"], glued, "glue") + differences(old["kept"], kept, "kept")
        print("\n".join(lines) if lines else f"every glued value ({len(glued)}) and kept variable ({len(kept)}) "
              "the same as in " + args.compare)
        print(f"cpu {old['cpu'] + old['workers_cpu']:.1f} s then, {cpu + child:.1f} s now")
    return 0


if __name__ == "__main__":
    sys.exit(main())
