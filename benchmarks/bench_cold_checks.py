"""Benchmark: the cold computations of 04b, 10 and the primer, each against its previous form in one process.

Each computation runs on the chapters' own inputs and QUICK settings, twice with the previous form and
twice with the current one, alternated (old, new, new, old), and the CPU seconds (``process_time``: every
thread of this process) and their ratio are printed beside the 1-minute load:

- 04b's dimensionality (six benchmarks, 3 replications): residual eigenvalues from the Gram matrix
  (current) or the singular values of the residuals (previous);
- 10's bank audit (:func:`irtbook.bank_checks.audit_benchmark`, four benchmarks): the same eigenvalues inside;
- 04b's 1PL/2PL/3PL cross-validation (six benchmarks, 2 folds): each matrix's 2PL fitted once and handed to
  the 1PL and 3PL as their start (current) or fitted again for each of them (previous);
- the primer's trace animation (20 frames on a simulated bank): the layout kept once it stops moving
  (current) or a layout pass at every frame (previous).

The previous forms are reproduced here (the library keeps only the current ones); the tests check that
both give the same numbers (``tests/fit/test_fit_checks.py``, ``tests/book/test_primer.py``). The data are
those the chapters find (``IRTLIB_PAPER_DATA``, ``IRTLIB_REAL_DATA``; simulated otherwise). Run from the
repository root::

    .venv/bin/python benchmarks/bench_cold_checks.py [--only dimensionality audit compare animation]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
NAMES = ["airbench2024", "anthropic-red-team", "harmbench", "safetybench", "simplesafetytests", "wmdp-bio"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", default=["dimensionality", "audit", "compare", "animation"])
    args = parser.parse_args()

    import irtlib.calibration.models as models
    import irtlib.fit.checks as checks
    from irtbook import primer
    from irtbook.bank_checks import audit_benchmark
    from irtbook.pipeline import calibrate_benchmark, load_benchmark

    sys.path.insert(0, str(ROOT / "tests" / "book"))
    current = {"gram": checks._gram_eigenvalues, "share": models._fit_sharing_2pl}

    def previous_gram(z):
        return np.linalg.svd(z, compute_uv=False) ** 2

    def previous_share(x, which, model, two, **kw):
        return models.fit_irt_values(x, model=model, **kw)

    def use(old: bool) -> None:
        checks._gram_eigenvalues = previous_gram if old else current["gram"]
        models._fit_sharing_2pl = previous_share if old else current["share"]

    benches = {b: load_benchmark(b) for b in NAMES}
    with tempfile.TemporaryDirectory() as cache:
        refit = {b: calibrate_benchmark(benches[b], engine="map", cache_dir=cache) for b in NAMES}

    def dimensionality():
        for b in NAMES:
            checks.dimensionality(benches[b].filtered, refit[b], n=8, n_replications=3, seed=0)

    def audit():
        for b in ("anthropic-red-team", "harmbench", "simplesafetytests", "wmdp-bio"):
            audit_benchmark(benches[b].full, n_replications=5, seed=0)

    def compare():
        for b in NAMES:
            mc = b in ("safetybench", "wmdp-bio")
            models.compare_models(benches[b].filtered, models=("1pl", "2pl", "3pl") if mc else ("1pl", "2pl"),
                                  folds=2, seed=0)

    from test_primer import _bank

    x, a, b = _bank(n_items=80)
    trace = primer.adaptive_trace(x[0], a, b, budget=20)
    old_animation = [False]

    def animation():
        anim = primer.trace_animation(trace, x[0], a, b, full_theta=0.1, title="m:")
        if old_animation[0]:
            draw = anim._func

            def draw_and_lay_out(t):
                out = draw(t)
                anim._fig.set_layout_engine("constrained")
                return out

            anim._func = draw_and_lay_out
        primer.animation_html(anim)

    tasks = {"dimensionality": ("04b dimensionality, six benchmarks", dimensionality),
             "audit": ("10 bank audit, four benchmarks", audit),
             "compare": ("04b compare_models, six benchmarks", compare),
             "animation": ("primer animation, 20 frames", animation)}
    print(f"{'computation':38s} {'previous CPU s':>16s} {'current CPU s':>16s} {'ratio':>6s}  load")
    for key in args.only:
        label, run = tasks[key]
        times = {True: [], False: []}
        load = os.getloadavg()[0]
        for old in (True, False, False, True):
            use(old)
            old_animation[0] = old
            start = time.process_time()
            run()
            times[old].append(time.process_time() - start)
        use(False)
        before, after = min(times[True]), min(times[False])
        print(f"{label:38s} {before:16.2f} {after:16.2f} {before / after:6.2f}  {load:.1f} to {os.getloadavg()[0]:.1f}",
              flush=True)


if __name__ == "__main__":
    main()
