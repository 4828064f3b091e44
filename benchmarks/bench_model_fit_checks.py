"""Benchmark: chapter 04b's S-X2 and 1PL/2PL/3PL cross-validation, previous forms against current ones, in one process.

On the chapter's own inputs (the six benchmarks of the full build, the main fit read from the cache):

- ``sx2``: :func:`irtlib.fit.checks.item_fit` (S-X2 on 201 nodes) of every benchmark: the current kernels
  (the normal approximation evaluated only where its two CDFs are not both exactly 0 or 1; the exact
  leave-one-out recursion one way per item and node) or the previous ones (every cell, both ways);
- ``compare``: :func:`irtlib.calibration.models.compare_models` as the chapter calls it (five folds; the
  1PL and 2PL everywhere, the 3PL on the two multiple-choice benchmarks, in both orientations): the current
  1PL/3PL engine (each logistic once per iteration) or the previous one.

The previous forms are those of ``tests/fit_previous_forms.py`` (the tests check both give the same bits),
swapped in for the run. Each computation runs previous, current, current, previous; the CPU seconds
(``process_time``) of the faster of each pair, their ratio, the 1-minute load, and whether the results are
equal (``DataFrame.equals``, measured seconds aside) are printed. Run from the repository root, with a copy
of the stage's cache (the main fits are read from it)::

    .venv/bin/python benchmarks/bench_model_fit_checks.py --cache-dir /tmp/cache [--only sx2 compare]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

NAMES = ["airbench2024", "anthropic-red-team", "harmbench", "safetybench", "simplesafetytests", "wmdp-bio"]
MULTIPLE_CHOICE = ("safetybench", "wmdp-bio")


@contextlib.contextmanager
def previous_forms():
    """The previous kernels swapped into irtlib for the duration."""
    import fit_previous_forms as previous

    from irtlib.calibration import models
    from irtlib.fit import checks

    swaps = [(checks, "_normal_pmf_live", previous.normal_pmf_dense),
             (checks, "_leave_one_out_exact", previous.leave_one_out_exact),
             (models, "_Point", previous.Point), (models, "_step", previous.step)]
    saved = [(module, name, getattr(module, name)) for module, name, _ in swaps]
    for module, name, value in swaps:
        setattr(module, name, value)
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", required=True, help="a copy of the stage's cache (the main fits)")
    parser.add_argument("--only", nargs="+", default=["sx2", "compare"], choices=["sx2", "compare"])
    args = parser.parse_args(argv)
    os.chdir(ROOT)

    from irtbook.pipeline import calibrate_benchmark, load_benchmark
    from irtlib.calibration.models import compare_models
    from irtlib.core.responses import ResponseMatrix
    from irtlib.fit.checks import item_fit

    benches = {b: load_benchmark(b, rule="strict") for b in NAMES}

    def sx2():
        fits = {b: calibrate_benchmark(benches[b], engine="pyirt-authors", epochs=1000, cache_dir=args.cache_dir)
                for b in NAMES}
        return {b: item_fit(benches[b].filtered, fits[b], alpha=0.05) for b in NAMES}

    def compare():
        out = {}
        for b in NAMES:
            m = benches[b].filtered
            mc = b in MULTIPLE_CHOICE
            out[b] = compare_models(m, models=("1pl", "2pl", "3pl") if mc else ("1pl", "2pl"), folds=5, seed=0)
            if mc:
                top = ResponseMatrix(1.0 - m.values, m.models, m.items, source=m.source + " (reversed)")
                out[b + " (reversed)"] = compare_models(top, models=("3pl",), folds=5, seed=0)
        return {k: v.drop(columns="seconds") for k, v in out.items()}

    calls = {"sx2": sx2, "compare": compare}
    if "sx2" in args.only:
        sx2()                                # imports and the main fits read, outside the timing
    for name in args.only:
        seconds, results = {"previous": [], "current": []}, {}
        for form in ("previous", "current", "current", "previous"):
            with previous_forms() if form == "previous" else contextlib.nullcontext():
                start = time.process_time()
                results[form] = calls[name]()
                seconds[form].append(time.process_time() - start)
        same = all(results["previous"][k].equals(results["current"][k]) for k in results["previous"])
        old, new = min(seconds["previous"]), min(seconds["current"])
        print(f"{name}: previous {old:.2f} CPU s, current {new:.2f} CPU s, ratio {old / new:.2f}; "
              f"results {'equal' if same else 'DIFFERENT'}; load {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
