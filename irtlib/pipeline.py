"""The steps every chapter repeats, with results cached between chapters.

A chapter asks for a benchmark's matrices or its calibration by name and settings; the first
chapter to ask computes it, the others read it from the cache (:mod:`irtlib.cache`), keyed by the
data's checksum, the settings and the library's source. Pass ``cache_dir=None`` to always
recompute.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import datasets
from .cache import array_checksum, cached
from .calibrate import Calibration, fit_2pl
from .data import ResponseMatrix

__all__ = ["Benchmark", "load_benchmark", "calibrate_benchmark"]


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
    """

    name: str
    display_name: str
    full: ResponseMatrix
    filtered: ResponseMatrix
    rule: str

    @property
    def checksum(self) -> str:
        """Identity of the data for cache keys."""
        return array_checksum(self.full.values, self.filtered.values)


def load_benchmark(name: str, *, rule: str = "strict", threshold: float = 0.01, data_dir=None) -> Benchmark:
    """Load a benchmark, binarize it with ``rule`` and apply the variance filter.

    Multiple-choice benchmarks have a single rule; for them ``rule`` is ignored (and recorded as
    ``"strict"``).
    """
    if datasets.load_items(name, data_dir=data_dir).columns.intersection(["answer", "safe_option"]).size:
        rule = "strict"
    full = datasets.load(name, rule=rule, data_dir=data_dir)
    return Benchmark(name, datasets.display_name(name), full, full.filter_variance(threshold), rule)


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
