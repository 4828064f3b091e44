"""The simulation study's settings and PandaGuard's two protocols: each split calibrated twice (old) or once (new).

Chapter 08 runs, per setting of its simulation study, the agreement protocol (Fluid and Random)
and the agreement ceiling on the same splits; chapter 09 runs both for PandaGuard's two protocols.
The old path calibrated every split twice (once in the protocol, once in the ceiling); the new one
(:func:`irtbook.shared_fits.shared_calibrations`) once. Both run here, in this process
(``n_jobs=1``, so every CPU second is this process's), alternated ``--repeats`` times; the script
checks that the results are the same, bit for bit, and prints CPU seconds and the ratio::

    .venv/bin/python benchmarks/bench_c08_shared_fits.py                   # the full study's 16 settings
    .venv/bin/python benchmarks/bench_c08_shared_fits.py --settings 3 --splits 10 --pandaguard-splits 10
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np


def old_setting(settings, *, n_items, data_seed, seed, n_splits, n_test, max_k, n_points, engine):
    """:func:`irtbook.simulation_study.run_setting`'s computation before the change: protocol and ceiling apart."""
    from irtbook import simulation_study as study
    from irtlib.calibration.joint_map import fit_2pl
    from irtlib.fit.summaries import coefficient_of_variation
    from irtlib.protocol.agreement import run_protocol, spearman
    from irtlib.protocol.ceiling import agreement_ceiling

    settings = {**study.BASELINE, **settings}
    m = study.study_matrix(settings, n_items=n_items, seed=data_seed)
    filtered = m.filter_variance()
    ks = study.setting_budgets(filtered.shape[1], max_k=max_k, n_points=n_points)
    res = run_protocol(m, methods=("fluid", "random"), ks=ks, n_splits=n_splits, n_test=n_test, seed=seed,
                       engine=engine, n_jobs=1, progress=False)
    ceiling = agreement_ceiling(m, n_splits=n_splits, n_test=n_test, seed=seed, engine=engine, n_jobs=1)
    cal = fit_2pl(filtered, engine=engine)
    score = m.safety_scores().reindex(cal.theta.index).to_numpy()
    return {"settings": settings, "results": res, "ceiling": ceiling,
            "spearman_theta_score": float(spearman(cal.theta.to_numpy(), score)),
            "cv_a": coefficient_of_variation(cal.a.to_numpy()), "mean_score": float(np.nanmean(m.values)),
            "n_items_filtered": int(filtered.shape[1])}


def old_pandaguard(m, groups, *, ks, n_splits, n_test, n_test_groups, seed, engine):
    """PandaGuard's two protocols and ceilings before the change (:func:`irtbook.pandaguard_claims.run`)."""
    from irtlib.protocol.agreement import run_protocol
    from irtlib.protocol.ceiling import agreement_ceiling

    out = {}
    for name, g in (("random", None), ("grouped", groups)):
        kw = dict(n_splits=n_splits, n_test=n_test, seed=seed, engine=engine, n_jobs=1)
        if g is not None:
            kw.update(groups=g, n_test_groups=n_test_groups)
        out[name] = {"results": run_protocol(m, ks=ks, progress=False, **kw), "ceiling": agreement_ceiling(m, **kw)}
    return out


def same_run(a: dict, b: dict) -> bool:
    drop = lambda attrs: {k: v for k, v in attrs.items() if k != "seconds"}      # noqa: E731
    return (a["results"].equals(b["results"]) and a["ceiling"].equals(b["ceiling"])
            and drop(a["results"].attrs) == drop(b["results"].attrs) and a["ceiling"].attrs == b["ceiling"].attrs)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", type=int, default=None, help="the first N distinct settings (default all 16)")
    parser.add_argument("--splits", type=int, default=30, help="splits per setting (the chapter's 30)")
    parser.add_argument("--pandaguard-splits", type=int, default=100, help="splits per protocol (the chapter's 100)")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args(argv)

    from irtbook import pandaguard_claims as pg
    from irtbook import simulation_study as study
    from irtlib import datasets
    from irtlib.datasets import pandaguard
    from irtlib.protocol.agreement import budget_grid

    opts = dict(n_items=1000, data_seed=20250917, seed=0, n_splits=args.splits, n_test=10, max_k=300, n_points=12,
                engine="map")
    distinct = {}
    for _, _, s in study.study_settings(combined=True):
        distinct.setdefault(tuple(sorted(s.items())), s)
    settings = list(distinct.values())[:args.settings]

    shared = Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata" / "pandaguard_jbb"
    data_dir = os.environ.get(pandaguard.DATA_ENV) or (shared if (shared / "responses.csv").exists() else None)
    if data_dir is not None:
        m = datasets.load("pandaguard-jbb", data_dir=data_dir)
        groups = (datasets.load_models("pandaguard-jbb", data_dir=data_dir).set_index("model")
                  .reindex(m.models)["target"].to_numpy())
        ks = budget_grid(m.filter_variance().shape[1])
        pg_opts = dict(ks=ks, n_splits=args.pandaguard_splits, n_test=10, n_test_groups=2, seed=0, engine="map")

    def study_old():
        return [old_setting(s, **opts) for s in settings]

    def study_new():
        return [study.run_setting(s, **opts, n_jobs=1) for s in settings]

    def pg_old():
        return old_pandaguard(m, groups, **pg_opts)

    def pg_new():
        kw = {k: v for k, v in pg_opts.items() if k not in ("ks", "n_test_groups")}
        return {name: pg._protocol_and_ceiling(m, ks=ks, kw={**kw, **extra}) for name, extra in
                (("random", {}), ("grouped", {"groups": groups, "n_test_groups": 2}))}

    parts = [("simulation study", study_old, study_new, lambda a, b: all(
        same_run(x, y) and all(x[q] == y[q] for q in ("spearman_theta_score", "cv_a", "mean_score",
                                                         "n_items_filtered")) for x, y in zip(a, b, strict=True)))]
    if data_dir is not None:
        parts.append(("PandaGuard", pg_old, pg_new, lambda a, b: all(same_run(a[p], b[p]) for p in a)))
    else:
        print(f"PandaGuard data not found (set {pandaguard.DATA_ENV}): its part is skipped")
    print(f"{len(settings)} settings x {args.splits} splits; PandaGuard {args.pandaguard_splits} splits; "
          f"load {os.getloadavg()[0]:.1f}")
    for name, old, new, same in parts:
        cpu = {"old": [], "new": []}
        for _ in range(args.repeats):
            out = {}
            for tag, fn in (("old", old), ("new", new)):
                t = time.process_time()
                out[tag] = fn()
                cpu[tag].append(time.process_time() - t)
            assert same(out["old"], out["new"]), f"{name}: the new path's results differ from the old one's"
        o, n = min(cpu["old"]), min(cpu["new"])
        print(f"{name}: old {o:.1f} s CPU, new {n:.1f} s CPU, new/old {n / o:.2f} (results identical)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
