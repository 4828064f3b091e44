"""Chapter 05's protocol profiles (``profile_protocol.py --run authors``), tabulated by benchmark and part, CPU s.

Reads the cProfile dumps written by ``benchmarks/profile_protocol.py --run authors --out DIR/<bench>.prof``
(one process per benchmark) and prints, per benchmark, the cumulative CPU seconds of the protocol's parts:
the per-split calibration read and MAP abilities, each static method's selection (Anchor Points split into
FasterPAM, the distance matrix and the rest), Fluid (the MLE estimate, maximum information's choice, the
rest), the random methods, the scoring, and the imports (the first ``import kmedoids`` among them).
``--scale bench=factor`` multiplies a benchmark's figures (profiled on fewer splits than the chapter runs).

    .venv/bin/python benchmarks/bench_p05_profile_table.py --dir /tmp/p05prof \\
        --scale wmdp-bio=3.5 --scale airbench2024=3.5 --scale safetybench=3.5 ...
"""

from __future__ import annotations

import argparse
import pstats
from pathlib import Path

#: (label, predicate on (file, line, function)); cumulative seconds, so nested parts overlap their parents.
PARTS = [
    ("total", None),
    ("imports (all)", lambda f, n: n == "_find_and_load"),
    ("- import kmedoids (sklearn, scipy.stats)", lambda f, n: f.endswith("kmedoids/__init__.py") and n == "<module>"),
    ("calibration read (calibrate_splits)", lambda f, n: n == "calibrate_splits"),
    ("training MAP abilities (_prepare_split's map_ability)", None),
    ("static selection (static_selections)", lambda f, n: n == "static_selections"),
    ("- anchor points", lambda f, n: f.endswith("selection/methods.py") and n == "anchor_points"),
    ("-- FasterPAM (kmedoids' Rust)", lambda f, n: "rand_fasterpam" in n),
    ("-- kmedoids' Python wrapper (_check_medoids)", lambda f, n: n == "_check_medoids"),
    ("-- distance matrix (correlation_distances)", lambda f, n: n == "correlation_distances"),
    ("-- warm-started path (anchor_points_path)", lambda f, n: n == "anchor_points_path"),
    ("- total fisher", lambda f, n: f.endswith("selection/methods.py") and n == "total_fisher"),
    ("- marginal fisher", lambda f, n: f.endswith("selection/methods.py") and n == "marginal_fisher"),
    ("- marginal fisher bq", lambda f, n: f.endswith("selection/methods.py") and n == "marginal_fisher_bq"),
    ("- disco", lambda f, n: f.endswith("selection/methods.py") and n == "disco"),
    ("random methods (run_adaptive random / shared order)", None),
    ("static scoring: score_subset", lambda f, n: n == "score_subset"),
    ("static scoring: MAP (score_blocks_map)", lambda f, n: n == "score_blocks_map"),
    ("Fluid + random adaptive (run_adaptive)", lambda f, n: n == "run_adaptive"),
    ("- MLE estimate (C kernel, RowTerms.estimate)", lambda f, n: f.endswith("score_kernel.py") and n == "estimate"),
    ("- maximum information (MaxInformation.select)", lambda f, n: f.endswith("selectors.py") and n == "select"),
    ("- estimator push", lambda f, n: f.endswith("estimators.py") and n == "push"),
    ("spearman", lambda f, n: n == "spearman"),
]


def table(path: Path) -> dict:
    st = pstats.Stats(str(path)).stats
    total = sum(v[2] for v in st.values())
    out = {}
    for label, pred in PARTS:
        if label == "total":
            out[label] = total
        elif pred is None:
            continue
        else:
            out[label] = sum(v[3] for (f, _, n), v in st.items() if pred(f, n))
    # map_ability called from _prepare_split directly
    out["training MAP abilities (_prepare_split's map_ability)"] = sum(
        t[3] for (f, _, n), v in st.items() if n == "map_ability"
        for (cf, _, cn), t in v[4].items() if cn == "_prepare_split")
    out["random methods (run_adaptive random / shared order)"] = sum(
        t[3] for (f, _, n), v in st.items() if n == "run_adaptive"
        for (cf, _, cn), t in v[4].items() if cn == "_prepare_split")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--scale", action="append", default=[], help="bench=factor")
    parser.add_argument("benchmarks", nargs="*")
    args = parser.parse_args(argv)
    scale = {k: float(v) for k, v in (s.split("=") for s in args.scale)}
    files = sorted(Path(args.dir).glob("*.prof"))
    names = args.benchmarks or [f.stem for f in files]
    tabs = {n: table(Path(args.dir) / f"{n}.prof") for n in names}
    labels = [lab for lab, _ in PARTS]
    print("| part | " + " | ".join(names) + " | sum |")
    print("|---|" + "---:|" * (len(names) + 1))
    imp = "- import kmedoids (sklearn, scipy.stats)"
    holds_import = ("total", "imports (all)", imp, "static selection (static_selections)", "- anchor points")
    for lab in labels:
        # a process imports once, however many splits it runs: the imports are not scaled
        vals = []
        for n in names:
            once = tabs[n].get("imports (all)" if lab in ("total", "imports (all)") else imp, 0.0) \
                if lab in holds_import else 0.0
            vals.append((tabs[n].get(lab, 0.0) - once) * scale.get(n, 1.0) + once)
        print(f"| {lab} | " + " | ".join(f"{v:.1f}" for v in vals) + f" | {sum(vals):.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
