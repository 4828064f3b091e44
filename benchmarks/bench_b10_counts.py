"""Benchmark: the M2PL's and the GRM's expected counts from lifted posterior weights, against the plain product.

:func:`irtlib.core.quadrature.posterior_counts` computes ``post.T @ indicator`` (a 0/1 indicator) from the
weights times ``2^64``, then scales back by ``2^-64``: the same bits, without the subnormal weights that slow
the BLAS product's multiply-adds. "plain" swaps the plain product ``post.T @ indicator`` back into
:mod:`irtlib.extended.mirt` and :mod:`irtlib.extended.grm` for the run.

- ``mirt``: chapter 10's dimension question on the authors' HarmBench matrix (confirmatory M2PL, three
  dimensions from the functional categories): the held-out fit and the three splits' agreement runs
  (``irtbook.beyond.dimension_heldout`` and ``dimension_agreement``, full settings), and the exploratory 2-D
  held-out fit of the solution cell;
- ``grm``: the marginal-ML GRM of chapter 10's severity question on PandaGuard (held-out fit and three splits);
- ``posterior``: :func:`irtlib.core.quadrature.posterior_weights` and ``logsumexp_rows`` with the shift and the
  exponential written into their own tables' buffers, against the previous expressions (new arrays; kept here and
  swapped in as "plain"), on chapter 10's certification study of HarmBench (``irtbook.certification.study``, full
  settings), whose rules' posteriors call them at every step.

Each computation runs plain, lifted, lifted, plain; the CPU seconds (``process_time``) of the faster of each
pair, their ratio, the 1-minute load and whether every result is equal (arrays bit for bit, frames with
``DataFrame.equals``) are printed. Run from the repository root with the real data::

    IRTLIB_PANDAGUARD_DATA=... .venv/bin/python benchmarks/bench_b10_counts.py [--only mirt grm]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time

import numpy as np
import pandas as pd


@contextlib.contextmanager
def plain_counts():
    """The plain product ``weights.T @ indicator`` in place of :func:`posterior_counts` for the duration."""
    from irtlib.extended import grm, mirt

    def plain(weights, indicator):
        return weights.T @ indicator

    saved = [(module, module.posterior_counts) for module in (mirt, grm)]
    try:
        for module, _ in saved:
            module.posterior_counts = plain
        yield
    finally:
        for module, value in saved:
            module.posterior_counts = value


def _previous_logsumexp_rows(a):
    """``logsumexp_rows`` before this branch: the maxima set by a boolean index, ``exp(rest - max)`` a new array."""
    from irtlib.core.quadrature import logsumexp

    if not (isinstance(a, np.ndarray) and a.ndim == 2 and a.dtype == np.float64 and a.size):
        return logsumexp(a, axis=1)
    a_max = a.max(axis=1, keepdims=True)
    at_max = a == a_max
    rest = np.array(a, copy=True)
    rest[at_max] = -np.inf
    m = at_max.sum(axis=1, keepdims=True, dtype=a.dtype)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = np.exp(rest - a_max).sum(axis=1, keepdims=True, dtype=a.dtype)
        s = np.where(s == 0, s, s / m)
        sign = np.sign(s + 1) * np.sign(m)
        s = np.where(s < -1, -s - 2, s)
        out = np.log1p(s) + np.log(np.abs(m)) + a_max
        out[sign < 0] = np.nan
        direct = ~np.isfinite(out[:, 0])
        if direct.any():
            out[direct] = np.log(np.exp(a[direct]).sum(axis=1, keepdims=True))
    return out[:, 0]


def _previous_posterior_weights(log_lik, log_prior):
    joint = np.asarray(log_lik, dtype=float) + np.asarray(log_prior, dtype=float)
    norm = _previous_logsumexp_rows(joint)
    return np.exp(joint - norm[:, None]), norm


@contextlib.contextmanager
def previous_posterior():
    """The previous ``posterior_weights`` (and its ``logsumexp_rows``) wherever the chapter's code calls them."""
    from irtlib.core import quadrature
    from irtlib.extended import grm, mirt
    from irtlib.selection import certify

    swaps = [(m, "posterior_weights", _previous_posterior_weights) for m in (quadrature, certify, grm, mirt)]
    swaps.append((quadrature, "logsumexp_rows", _previous_logsumexp_rows))
    saved = [(m, name, getattr(m, name)) for m, name, _ in swaps]
    try:
        for m, name, value in swaps:
            setattr(m, name, value)
        yield
    finally:
        for m, name, value in saved:
            setattr(m, name, value)


def _equal(x, y) -> bool:
    """Bit for bit: arrays (NaN where NaN), frames, dicts and sequences of them, dataclasses by their fields."""
    if isinstance(x, pd.DataFrame):
        return x.equals(y)
    if isinstance(x, dict):
        return x.keys() == y.keys() and all(_equal(x[k], y[k]) for k in x if k not in ("mirt_seconds", "grm_seconds"))
    if isinstance(x, (list, tuple)):
        return len(x) == len(y) and all(_equal(a, b) for a, b in zip(x, y, strict=True))
    if hasattr(x, "__dataclass_fields__"):
        return all(_equal(getattr(x, f), getattr(y, f)) for f in x.__dataclass_fields__ if f != "seconds")
    if isinstance(x, (np.ndarray, float, np.floating)):
        x, y = np.atleast_1d(np.asarray(x)), np.atleast_1d(np.asarray(y))
        return x.shape == y.shape and x.dtype == y.dtype and np.array_equal(
            x.view(np.uint8) if x.dtype == np.float64 else x, y.view(np.uint8) if y.dtype == np.float64 else y)
    return x == y


def mirt_question():
    from irtbook import beyond as bz
    from irtlib import datasets
    from irtlib.extended.mirt import structure_from_labels

    hb = datasets.load("harmbench").filter_variance()
    items = datasets.load_items("harmbench").set_index("item")
    mask, _ = structure_from_labels(items.loc[hb.items, "functional_category"].to_numpy())
    x = hb.values
    reference = np.nanmean(x, axis=1)
    ks = [1, 2, 3, 5, 8, 12, 20, 30, 50]

    def run():
        held = bz.dimension_heldout(x, structure=mask, seed=0)
        runs = bz.dimension_agreement(x, reference, structure=mask, ks=ks, n_splits=3, n_test=10, seed=0)
        explore = bz.dimension_heldout(x, structure=None, n_dims=2, seed=0)
        return [held, runs, explore]

    return run


def grm_question():
    from irtbook import beyond as bz
    from irtlib.datasets import pandaguard
    from irtlib.extended import grm

    raw = pandaguard.load_pandaguard_raw(None, graded=True)
    cats, _ = grm.to_categories(bz.wide(raw).to_numpy())
    binary = bz.binarize(cats, 1)
    p = np.nanmean(binary, axis=0)
    cats = cats[:, p * (1 - p) > 0.01]
    reference = np.nanmean(bz.binarize(cats, 1), axis=1)
    ks = [1, 2, 3, 5, 8, 12, 20, 30, 50]

    def run():
        held = bz.severity_heldout(cats, safe_from=1, seed=0, tol=1e-5)
        runs = bz.severity_agreement(cats, reference, safe_from=1, ks=ks, n_splits=3, n_test=10, seed=0, tol=1e-5)
        return [held, runs]

    return run


def certification_study():
    from irtbook import certification as cert
    from irtlib import datasets

    m = datasets.load("harmbench")

    def run():
        return cert.study(m, confidence=0.95, budget=100, indifference=0.01, n_simulees=4000, loo_every=1, seed=0)

    return run


def _timed(run, plain, swap=plain_counts):
    with swap() if plain else contextlib.nullcontext():
        start = time.process_time()
        out = run()
        return time.process_time() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=["mirt", "grm", "posterior"], default=["mirt", "grm", "posterior"])
    args = parser.parse_args()
    for name in args.only:
        run = {"mirt": mirt_question, "grm": grm_question, "posterior": certification_study}[name]()
        swap = previous_posterior if name == "posterior" else plain_counts
        times, outs = {"plain": [], "lifted": []}, {}
        for side in ("plain", "lifted", "lifted", "plain"):
            seconds, out = _timed(run, side == "plain", swap)
            times[side].append(seconds)
            outs.setdefault(side, out)
        same = _equal(outs["plain"], outs["lifted"])
        old, new = min(times["plain"]), min(times["lifted"])
        print(f"{name:5s} plain {old:7.2f}  lifted {new:7.2f}  ratio {old / new:5.2f}  same: {same}  "
              f"load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
