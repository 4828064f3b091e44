"""The agreement ceiling of a benchmark, cached for the chapters (selection chapter, Table 2).

:func:`ceiling_benchmark` is :func:`irtlib.protocol.ceiling.agreement_ceiling` on a
:class:`~irtbook.pipeline.Benchmark`, with the same splits as
:func:`irtbook.pipeline.protocol_benchmark` for equal ``n_splits``, ``n_test``, ``seed``,
``engine`` and ``threshold``; :func:`ceiling_table` summarises several benchmarks for Table 2.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from irtlib.errors import InputError
from irtlib.protocol.agreement import mean_interval_halfwidth
from irtlib.protocol.ceiling import agreement_ceiling
from irtlib.protocol.presets import Protocol

from .cache import cached

__all__ = ["ceiling_benchmark", "ceiling_table"]


def ceiling_benchmark(bench, *, n_splits: int | None = None, n_test: int | None = None, seed: int | None = None,
                      engine: str | None = None, threshold: float = 0.01, n_jobs: int = 1, cache_dir=None,
                      protocol: str | Protocol | None = None,
                      max_splits: int | None = None) -> pd.Series:
    """The agreement ceiling per split of one benchmark (cached).

    Parameters
    ----------
    bench : irtbook.pipeline.Benchmark
    n_splits, n_test, seed, engine, threshold, protocol, max_splits
        As for :func:`irtbook.pipeline.protocol_benchmark` (same values: same splits; the
        defaults are the protocol's for this benchmark).
    n_jobs : int
        Not part of the cache key (results do not depend on it).

    Returns
    -------
    Series, shape (n_splits,), indexed by split (see :func:`irtlib.protocol.ceiling.agreement_ceiling`)
    """
    from irtlib.protocol import presets as protocols

    from .pipeline import protocol_sizes, split_cache

    proto = protocols.resolve(protocol, benchmark=bench.name)
    n_splits, n_test = protocol_sizes(bench, protocol=proto, n_splits=n_splits, n_test=n_test, max_splits=max_splits)
    seed = proto.seed if seed is None else int(seed)
    engine = proto.engine if engine is None else engine
    key = ("ceiling_benchmark", bench.name, bench.rule, bench.checksum, n_splits, n_test, seed, engine, threshold,
           tuple(sorted(proto.settings().items())))
    return cached(lambda: agreement_ceiling(bench.full, n_splits=n_splits, n_test=n_test, seed=seed, engine=engine,
                                            variance_threshold=threshold, n_jobs=n_jobs, protocol=proto,
                                            benchmark=bench.name, calibration_cache=split_cache(cache_dir)),
                  key=key, cache_dir=cache_dir)


def ceiling_table(ceilings: dict, *, level: float = 0.95, nan_policy: str = "zero") -> pd.DataFrame:
    """Mean ceiling per benchmark with its spread over splits and the interval of the mean.

    Parameters
    ----------
    ceilings : dict
        Benchmark -> :func:`ceiling_benchmark` output.
    nan_policy : {"zero", "omit"}
        Undefined splits count as 0 (as in :func:`irtlib.protocol.agreement.agreement_curves`) or are left out.

    Returns
    -------
    DataFrame indexed by benchmark
        ``mean``, ``sd``, ``lo``, ``hi`` (the ``level`` quantiles of single splits), ``ci_lo``,
        ``ci_hi`` (Student-t interval of the mean), ``n_splits``, ``n_undefined``.
    """
    if nan_policy not in ("zero", "omit"):
        raise InputError(f"nan_policy must be 'zero' or 'omit', got {nan_policy!r}")
    q = (1.0 - level) / 2.0
    rows = {}
    for bench, c in ceilings.items():
        undefined = int(c.isna().sum())
        v = (c.fillna(0.0) if nan_policy == "zero" else c.dropna()).to_numpy(float)
        sd = float(v.std(ddof=1)) if v.size > 1 else np.nan
        half = float(mean_interval_halfwidth(sd, v.size, level=level))
        rows[bench] = {"mean": float(v.mean()), "sd": sd, "lo": float(np.quantile(v, q)),
                       "hi": float(np.quantile(v, 1 - q)), "ci_lo": float(v.mean()) - half,
                       "ci_hi": float(v.mean()) + half, "n_splits": int(c.size), "n_undefined": undefined}
    return pd.DataFrame.from_dict(rows, orient="index")
