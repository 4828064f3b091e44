#!/usr/bin/env python
"""Print the simulated release beside the paper: shape, binarized mean, CV of a, ceilings, RMSE.

Each benchmark is binarized with the paper's strict rule, items with variance <= 0.01 are
dropped (as the paper does first), and the 2PL is fitted with the fast joint-MAP engine
(``fit_2pl(..., engine="map")``, the paper's priors). Ceiling counts use safety scores on the
filtered items; the unfiltered count is shown in brackets where it differs.

Usage
-----
    python scripts/data_report.py                # all six, plain-text table
    python scripts/data_report.py --markdown     # the same as a Markdown table
    python scripts/data_report.py --only harmbench
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402

import irtlib  # noqa: E402
from irtlib import datasets  # noqa: E402
from irtlib.datasets import paper  # noqa: E402


def measure(name: str, data_dir=None) -> dict:
    """Fit the 2PL to one benchmark's binarized data and measure what the paper reports."""
    m = datasets.load(name, data_dir=data_dir, source="simulated")
    f = m.filter_variance(paper.VARIANCE_FILTER["max_variance_dropped"])
    cal = irtlib.fit_2pl(f, engine="map")
    s = f.safety_scores()
    s_all = m.safety_scores()
    raw = datasets.load_raw(name, data_dir=data_dir, source="simulated")
    ambiguous = float(np.mean((raw["score"] > 0) & (raw["score"] < 1))) if "score" in raw else None
    return {
        "name": name, "shape": m.shape, "n_obs": m.n_observations, "kept": f.shape[1],
        "mean": float(np.nanmean(m.values)), "cv": irtlib.coefficient_of_variation(cal.a),
        "rmse": irtlib.item_rmse(f, cal),
        "above": int((s > paper.CEILING_SCORE).sum()), "above_all": int((s_all > paper.CEILING_SCORE).sum()),
        "in_095_100": int(((s >= 0.95) & (s <= 1.0)).sum()),
        "score_min": float(s_all.min()), "score_max": float(s_all.max()),
        "spearman": float(spearmanr(cal.theta, s).statistic), "ambiguous": ambiguous,
        "theta_above": (float(cal.theta[s > 0.95].min()), float(cal.theta[s > 0.95].max()))
        if (s > 0.95).any() else None,
    }


def paper_ceiling(name: str) -> str:
    c = paper.CEILING[name]
    if "in_095_100" in c:
        return f"{c['in_095_100']} in [.95,1]"
    return "cluster (n/r)" if c["above"] is None else str(c["above"])


def rows(results):
    head = ["benchmark", "shape (paper)", "shape (ours)", "obs", "kept", "mean", "CV a paper", "CV a ours",
            "ceiling paper", "ceiling ours", "RMSE paper", "RMSE ours", "rho(theta,score)"]
    out = [head]
    for r in results:
        t1 = paper.TABLE1[r["name"]]
        ceil = f"{r['above']}" + (f" [{r['above_all']}]" if r["above_all"] != r["above"] else "")
        if "in_095_100" in paper.CEILING[r["name"]]:
            ceil = f"{r['in_095_100']} in [.95,1]"
        out.append([paper.DISPLAY_NAMES[r["name"]], f"{t1.models} x {t1.items:,}",
                    f"{r['shape'][0]} x {r['shape'][1]:,}", f"{r['n_obs']:,}", f"{r['kept']:,}",
                    f"{r['mean']:.3f}", f"{paper.FIGURE3_CV[r['name']]:.2f}", f"{r['cv']:.2f}",
                    paper_ceiling(r["name"]), ceil, f"{paper.ITEM_RMSE[r['name']]:.3f}", f"{r['rmse']:.3f}",
                    f"{r['spearman']:.3f}"])
    return out


def render(table, markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(table[0]) + " |", "|" + "---|" * len(table[0])]
        lines += ["| " + " | ".join(r) + " |" for r in table[1:]]
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) for r in table)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=datasets.names(), metavar="NAME")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args(argv)
    results = [measure(n, args.data_dir) for n in (args.only or datasets.names())]
    print(render(rows(results), args.markdown))
    print()
    for r in results:
        extra = f"  theta of models above 0.95: {r['theta_above'][0]:.2f} to {r['theta_above'][1]:.2f}" \
            if r["theta_above"] else ""
        amb = f", ambiguous (0 < score < 1) {r['ambiguous']:.3f}" if r["ambiguous"] is not None else ""
        print(f"{r['name']}: safety scores {r['score_min']:.3f} to {r['score_max']:.3f}{amb}.{extra}")
    print("\nceiling ours: models above 0.95 on the variance-filtered items [on all items]; "
          "paper's SimpleSafety count is not reported (n/r).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
