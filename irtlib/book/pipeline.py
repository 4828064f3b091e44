"""The steps every chapter repeats, with results cached between chapters.

A chapter asks for a benchmark's matrices or its calibration by name and settings; the first
chapter to ask computes it, the others read it from the cache (:mod:`irtlib.book.cache`), keyed by the
data's checksum, the settings and the library's source. Pass ``cache_dir=None`` to always
recompute.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import datasets
from . import paper
from .cache import array_checksum, cached
from ..calibrate import Calibration, fit_2pl
from ..data import ResponseMatrix
from ..datasets.sources import DataSource

__all__ = ["Benchmark", "load_benchmark", "calibrate_benchmark", "paper_budgets", "protocol_budgets",
           "protocol_benchmark"]


@dataclass(frozen=True)
class Benchmark:
    """One benchmark as the paper prepares it.

    Attributes
    ----------
    name, display_name : str
    full : ResponseMatrix
        All items, binarized with ``rule``; its safety scores are the full-benchmark scores R.
    filtered : ResponseMatrix
        After the variance filter (paper, section "Binarization"): what everything is fitted to.
    rule : str
        The binarization rule applied; ``"binary"`` for the paper's data, which are stored binary.
    data : DataSource or None
        Which data these are (:func:`irtlib.datasets.resolve`): ``data.label`` is the phrase a
        caption prints, ``data.kind`` one of ``"paper"``, ``"real-subset"``, ``"simulated"``.
    """

    name: str
    display_name: str
    full: ResponseMatrix
    filtered: ResponseMatrix
    rule: str
    data: DataSource | None = None

    @property
    def checksum(self) -> str:
        """Identity of the data for cache keys (the values, and which source they came from)."""
        ident = () if self.data is None else (np.array([self.data.kind, self.data.label]),)
        return array_checksum(self.full.values, self.filtered.values, *ident)


def load_benchmark(name: str, *, rule: str = "strict", threshold: float = 0.01, data_dir=None,
                   source: str | None = None) -> Benchmark:
    """Load a benchmark, binarize it with ``rule`` and apply the variance filter.

    Parameters
    ----------
    name : str
        A benchmark id.
    rule : {"strict", "lenient"}
        Graded benchmarks only. Multiple-choice benchmarks have a single rule (recorded as
        ``"strict"``); the paper's data are stored binary, so no rule applies (recorded as ``"binary"``).
    threshold : float
        The variance filter's threshold.
    data_dir : path-like, optional
        As in :func:`irtlib.datasets.load`.
    source : {"auto", "real", "simulated"} or None
        Which data ``name`` stands for (:func:`irtlib.datasets.resolve`); None: ``$IRTLIB_DATA`` or ``"auto"``.
    """
    data = datasets.resolve(name, source=source, data_dir=data_dir)
    if data.binary:
        rule = "binary"
    elif data.kind == "simulated" and datasets.load_items(
            name, data_dir=data_dir, source="simulated").columns.intersection(["answer", "safe_option"]).size:
        rule = "strict"
    full = datasets.load(name, rule=None if rule == "binary" else rule, data_dir=data_dir, source=source)
    shown_name = (datasets.display_name("airbench2024-real") if data.kind == "real-subset"
                  else datasets.display_name(name, source="simulated" if data.kind == "simulated" else source))
    return Benchmark(name, shown_name, full, full.filter_variance(threshold), rule, data)


def calibrate_benchmark(bench: Benchmark, *, engine: str = "pyirt", seed: int = 0, epochs: int = 1000,
                        lr: float = 0.1, cache_dir=None) -> Calibration:
    """Fit the 2PL to a benchmark's filtered matrix (cached).

    Parameters
    ----------
    bench : Benchmark
    engine, seed, epochs, lr
        As in :func:`irtlib.fit_2pl`; the MAP engine ignores seed, epochs and lr.
    cache_dir : path, optional
        Where to keep fits between chapters.
    """
    settings = (engine, seed, epochs, lr) if engine == "pyirt" else (engine,)
    key = ("calibrate_benchmark", bench.name, bench.rule, bench.checksum, settings)
    return cached(lambda: fit_2pl(bench.filtered, engine=engine, seed=seed, epochs=epochs, lr=lr),
                  key=key, cache_dir=cache_dir)


def paper_budgets(name: str) -> list[int]:
    """The budgets k at which the paper reports agreement for a benchmark (Table 2, appendix F)."""
    if name not in paper.BENCHMARKS:
        return []
    ks = {paper.TABLE2_LEFT[name].k, paper.TABLE2_RIGHT[name].k}
    if name == "safetybench":
        facts = paper.SAFETYBENCH_APPENDIX_F
        ks |= {facts["k_small"], facts["random_reaches_090_at_k"]}
    return sorted(int(k) for k in ks if k)


def protocol_budgets(bench: Benchmark, *, n_points: int = 25) -> list[int]:
    """A log-spaced sweep (:func:`irtlib.agreement.budget_grid`) plus the paper's own budgets.

    Adding the k at which the paper reports a value lets each chapter set the paper's number
    beside ours at the same k, not at the nearest grid point.
    """
    from ..agreement import budget_grid

    n = bench.filtered.shape[1]
    grid = set(budget_grid(n, n_points=n_points))
    return sorted(grid | {k for k in paper_budgets(bench.name) if k <= max(grid)})


def protocol_benchmark(bench: Benchmark, *, n_splits: int = 100, n_test: int = 10, seed: int = 0, ks=None,
                       engine: str = "map", threshold: float = 0.01, n_jobs: int = 1, cache_dir=None,
                       progress: bool | None = False) -> pd.DataFrame:
    """The agreement protocol (:func:`irtlib.run_protocol`) on one benchmark, cached.

    ``ks`` defaults to :func:`protocol_budgets`. ``n_jobs`` is not part of the cache key: the
    results do not depend on it. The returned frame carries ``benchmark`` as a column and the
    protocol's settings in ``attrs``.
    """
    from ..agreement import run_protocol

    ks = protocol_budgets(bench) if ks is None else sorted({int(k) for k in ks})
    key = ("protocol_benchmark", bench.name, bench.rule, bench.checksum, n_splits, n_test, seed, tuple(ks),
           engine, threshold)

    def compute():
        df = run_protocol(bench.full, ks=ks, n_splits=n_splits, n_test=n_test, seed=seed, engine=engine,
                          n_jobs=n_jobs, variance_threshold=threshold, progress=progress)
        attrs = dict(df.attrs)
        df = df.assign(benchmark=bench.name)
        df.attrs.update(attrs)
        return df

    return cached(compute, key=key, cache_dir=cache_dir)
