"""Benchmark: irtlib's MAP engine against the other Python 2PL calibrators, on the same simulated matrices.

Each size is one simulated 2PL matrix (theta ~ N(0, 1), log a ~ N(0, 0.7), b ~ N(0, 1), every cell
observed, seeded), fitted by each engine that is installed, each called as its documentation shows:

- ``irtlib``: :func:`irtlib.calibration.joint_map.fit_map` (the joint posterior mode, ``irtlib calibrate``'s fit);
- ``girth``: ``girth.twopl_jml`` (joint maximum likelihood; data laid out items x people);
- ``theta-irt``: ``theta.fit(responses, "2PL")`` (JAX, marginal maximum likelihood by EM);
- ``mirt``: ``mirt.fit_mirt(responses, model="2PL")`` (the Python package; EM), standard errors off;
- ``py-irt``: py-irt's own trainer as the paper ran it (:func:`irtlib.calibration.pyirt.fit_pyirt`:
  1,000 epochs of SVI with the paper's priors).

A missing engine is skipped with a message (``pip install girth mirt theta-irt``; py-irt comes with
``irtlib[pyirt]``); none of them is a dependency of irtlib. Every fit runs in a child process forked
for it, after one untimed fit of a 20 x 30 matrix there (imports, JAX's and numba's compilation),
so its time and peak memory (the child's maximum resident set, the matrix included) are its own; the
table also gives each engine's time as a multiple of irtlib's on the same matrix, and its recovery:
Pearson r of ``a`` and ``b`` with the truth, and RMSE of ``b`` after the linear map that puts its
abilities' scale on the truth's (each engine reports on its own scale: a joint mode shrinks the
abilities, a marginal fit does not). Run with::

    .venv/bin/python benchmarks/bench_peers.py [--sizes 77x400 82x5694 1000x2000 5000x5000]

Timing is wall time on whatever else the machine is doing: compare the ratios, measured minutes apart.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import pickle
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: Largest matrix (cells) each engine is given: beyond it, it is skipped (py-irt needs minutes per
#: million cells; the others are run at every size).
MAX_CELLS = {"irtlib": None, "girth": None, "theta-irt": None, "mirt": None, "py-irt": 2_500_000}
#: The module each engine needs, for the "not installed" message.
NEEDS = {"irtlib": "irtlib", "girth": "girth", "theta-irt": "theta", "mirt": "mirt", "py-irt": "py_irt"}


def simulate(n_models: int, n_items: int, seed: int):
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_models)
    a = np.exp(rng.normal(0.0, 0.7, size=n_items))
    b = rng.normal(size=n_items)
    p = 1.0 / (1.0 + np.exp(-a * (theta[:, None] - b)))
    return (rng.random((n_models, n_items)) < p).astype(float), theta, a, b


def fit(engine: str, x: np.ndarray) -> dict:
    """One engine's fit of ``x`` (models x items): ``a``, ``b`` and, where it reports them, ``theta``."""
    if engine == "irtlib":
        from irtlib.calibration.joint_map import fit_map

        theta, a, b, _ = fit_map(x)
        return {"a": a, "b": b, "theta": theta}
    if engine == "girth":
        from girth import twopl_jml

        out = twopl_jml(x.T.astype(int))
        return {"a": out["Discrimination"], "b": out["Difficulty"]}
    if engine == "theta-irt":
        import theta as theta_irt

        model = theta_irt.fit(x, "2PL")
        return {"a": np.asarray(model.a), "b": np.asarray(model.b)}
    if engine == "mirt":
        import mirt

        coef = mirt.fit_mirt(x.astype(int), model="2PL", compute_standard_errors=False).coef()
        return {"a": coef["discrimination"].to_numpy(), "b": coef["difficulty"].to_numpy()}
    if engine == "py-irt":
        from irtlib.calibration.pyirt import fit_pyirt

        theta, a, b = fit_pyirt(x, seed=0, epochs=1000, lr=0.1, lr_decay=1.0)
        return {"a": np.asarray(a), "b": np.asarray(b), "theta": np.asarray(theta)}
    raise ValueError(engine)


def in_child(engine: str, x: np.ndarray) -> tuple[dict, float, float]:
    """``fit(engine, x)`` in a forked child: (result, seconds, the child's peak resident memory in MB)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:                                         # the child: fit, send the result, exit
        os.close(read)
        try:
            fit(engine, simulate(20, 30, 1)[0])           # imports and just-in-time compilation, not timed
            start = time.perf_counter()
            result = fit(engine, x)
            payload = pickle.dumps(({k: np.asarray(v, float) for k, v in result.items()},
                                    time.perf_counter() - start, None))
        except Exception as exc:                         # noqa: BLE001  (reported by the parent)
            payload = pickle.dumps((None, 0.0, f"{type(exc).__name__}: {exc}"))
        with os.fdopen(write, "wb") as fh:
            fh.write(payload)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as fh:
        result, seconds, error = pickle.loads(fh.read())
    _, _, usage = os.wait4(pid, 0)
    if error is not None:
        raise RuntimeError(error)
    return result, seconds, usage.ru_maxrss / 1024.0


def recovery(result: dict, theta: np.ndarray, a: np.ndarray, b: np.ndarray) -> dict:
    out = {"r_a": float(np.corrcoef(result["a"], a)[0, 1]), "r_b": float(np.corrcoef(result["b"], b)[0, 1])}
    # b on the truth's scale: b' = s b + m maps the engine's scale onto the truth's (least squares on b)
    slope, intercept = np.polyfit(result["b"], b, 1)
    out["rmse_b"] = float(np.sqrt(np.mean((slope * result["b"] + intercept - b) ** 2)))
    out["raw_rmse_b"] = float(np.sqrt(np.mean((result["b"] - b) ** 2)))
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["77x400", "82x5694", "1000x2000", "5000x5000"],
                        help="models x items of each matrix (default: the issue's four)")
    parser.add_argument("--engines", nargs="+", default=list(MAX_CELLS), choices=list(MAX_CELLS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    engines = []
    for engine in args.engines:
        if importlib.util.find_spec(NEEDS[engine]) is None:
            print(f"skipped {engine}: not installed (module {NEEDS[engine]!r} missing)")
        else:
            engines.append(engine)
    import irtlib

    print(f"irtlib {irtlib.__version__} from {Path(irtlib.__file__).parent}; {os.cpu_count()} cores; "
          f"load average {os.getloadavg()[0]:.1f}")
    header = f"{'size':>11} {'engine':>9} {'seconds':>9} {'x irtlib':>9} {'peak MB':>8} {'r(a)':>7} {'r(b)':>7} " \
             f"{'RMSE b*':>8} {'RMSE b':>7}"
    print(header)
    rows = []
    for size in args.sizes:
        n_models, n_items = (int(v) for v in size.lower().split("x"))
        x, theta, a, b = simulate(n_models, n_items, args.seed)
        base = None
        for engine in engines:
            limit = MAX_CELLS[engine]
            if limit is not None and x.size > limit:
                print(f"{size:>11} {engine:>9} skipped: more than {limit:,} cells")
                continue
            try:
                result, seconds, peak = in_child(engine, x)
            except RuntimeError as exc:
                print(f"{size:>11} {engine:>9} failed: {exc}")
                continue
            base = seconds if engine == "irtlib" else base
            rec = recovery(result, theta, a, b)
            ratio = f"{seconds / base:9.2f}" if base else f"{'-':>9}"
            print(f"{size:>11} {engine:>9} {seconds:9.2f} {ratio} {peak:8.0f} {rec['r_a']:7.3f} {rec['r_b']:7.3f} "
                  f"{rec['rmse_b']:8.3f} {rec['raw_rmse_b']:7.3f}", flush=True)
            rows.append({"size": size, "engine": engine, "seconds": seconds, "peak_mb": peak, **rec})
    print("RMSE b*: after the linear map of each engine's b onto the truth's scale; RMSE b: as reported")


if __name__ == "__main__":
    main()
