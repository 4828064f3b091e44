"""The agreement ceiling: what an ability-scored method reaches with every item (this book's addition).

Paper, section "Evaluation": agreement is Spearman's rho between a method's scores and the full
safety score of the test models. An IRT-scored method ranks by MAP ability, which need not order
the test models as the plain score does, so its agreement converges to this ceiling, not to 1.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from irtlib._typing import ArrayLike, PathLike
from irtlib.core.ability import map_ability
from irtlib.core.responses import ResponseMatrix
from irtlib.errors import InputTypeError
from irtlib.selection.ability_kernel import map_row_sums

from . import presets as _protocols
from .agreement import calibrate_splits, calibration_seed, check_engine, protocol_data, split_agreements, split_models

__all__ = ["agreement_ceiling"]


def _ceiling_splits(values, reference, splits, *, n_test, seed, engine, groups, n_test_groups,
                    split_rule="stream", calibration_seeds="stream", calibration_cache=None):
    """Ceilings of some splits (one joblib task of :func:`agreement_ceiling`), calibrated in one call."""
    drawn = {split: split_models(values.shape[0], n_test, seed, split, groups=groups, n_test_groups=n_test_groups,
                                 rule=split_rule) for split in splits}
    seeds = [calibration_seed(seed, split) for split in splits] if calibration_seeds == "stream" else 0
    fits = dict(zip(splits, calibrate_splits(values, [drawn[s][0] for s in splits], engine=engine, seed=seeds,
                                             cache_dir=calibration_cache), strict=True))

    def score(split, train, test):
        a, b = fits[split]
        pool = np.flatnonzero(np.isfinite(a))                         # as the protocol: seen in training
        # only now are the test rows touched, for scoring (the Newton sums in C where the kernel loads:
        # numpy's sums bit for bit, as the protocol's training abilities)
        return np.asarray(map_ability(values[np.ix_(test, pool)], a[pool], b[pool], row_sums=map_row_sums()).theta)

    return split_agreements(values, reference, splits, score, n_test=n_test, seed=seed, groups=groups,
                            n_test_groups=n_test_groups, rule=split_rule)


def agreement_ceiling(matrix: ResponseMatrix, *, n_splits: int | None = None, n_test: int | None = None,
                      seed: int | None = None, engine: str | None = None,
                      variance_threshold: float | None | str = "protocol",
                      reference: str | None = None, groups: ArrayLike | None = None, n_test_groups: int = 1,
                      n_jobs: int = 1, protocol: str | _protocols.Protocol | None = None,
                      benchmark: str | None = None, calibration_cache: PathLike | None = None) -> pd.Series:
    """The agreement an ability-scored method reaches with every item: one value per split.

    An IRT-scored method (Fluid, Random IRT, the three Fisher subsets) ranks the test models by
    their MAP ability, but agreement is Spearman's rho against the plain full-benchmark safety
    score. Even with all items given, ability and score need not order ten test models alike, so
    those methods converge, as ``k`` grows, to this ceiling and not to 1 (the score-scored
    methods, Random, DISCO and Anchor Points, converge to 1). Paper, section "Evaluation"; the
    ceiling itself is this book's addition.

    Per split, exactly as :func:`irtlib.protocol.agreement.run_protocol` with the same arguments: the
    same test models (:func:`irtlib.protocol.agreement.split_models`), the 2PL calibrated on the training
    rows only (same engine and calibration seed) over the items some training model saw; then
    the test models' MAP abilities on all those items (:func:`irtlib.map_ability`) and their
    Spearman correlation with the test models' full safety scores. Test responses are used only
    for scoring.

    Parameters
    ----------
    matrix : ResponseMatrix, shape (n_models, n_items)
        Binary responses, unfiltered (the variance filter runs here, as in the protocol).
    n_splits, n_test, seed, engine, variance_threshold, reference, groups, n_test_groups
        As in :func:`irtlib.protocol.agreement.run_protocol`; equal values give equal splits. Defaults are
        the protocol's (``"paper"``: 100 splits, 10 test models, seed 0, filter 0.01, reference
        ``"full"``).
    n_jobs : int
        Splits in parallel (joblib); results do not depend on it.
    protocol : {"paper", "authors"} or Protocol, optional
        As in :func:`irtlib.protocol.agreement.run_protocol` (None: ``"paper"``): its split rule, variance
        rule, reference and calibration seeds, so the ceiling of split ``i`` is that of the
        protocol's split ``i``. Under ``"authors"`` it is the authors' reference line: MAP
        ability on every kept item (the authors' released code).
    benchmark : str, optional
        The benchmark id whose sizes ``"authors"`` uses.
    calibration_cache : path-like, optional
        As in :func:`irtlib.protocol.agreement.run_protocol`: each split's fit kept on disk by
        content, so the ceiling reuses the protocol's calibrations of the same splits.

    Returns
    -------
    Series, shape (n_splits,), indexed by ``split``
        Spearman's rho per split (NaN where undefined: constant abilities or scores among the
        test models). ``attrs`` records the settings.

    Raises
    ------
    TypeError
        ``matrix`` is not a :class:`~irtlib.core.responses.ResponseMatrix`.
    ValueError
        Bad ``n_splits``, ``reference``, ``n_test`` or ``groups``.
    """
    if not isinstance(matrix, ResponseMatrix):
        raise InputTypeError(f"agreement_ceiling expects a ResponseMatrix, got {type(matrix).__name__}")
    proto, settled = _protocols.settle(protocol, benchmark=benchmark, n_splits=n_splits, n_test=n_test, seed=seed,
                                       reference=reference, variance_threshold=variance_threshold)
    n_splits, n_test, seed = settled["n_splits"], settled["n_test"], settled["seed"]
    reference, variance_threshold = settled["reference"], settled["variance_threshold"]
    engine = proto.engine if engine is None else check_engine(engine)
    filtered, ref, groups = protocol_data(matrix, variance_threshold=variance_threshold, reference=reference,
                                          groups=groups, n_test=n_test, seed=seed, n_test_groups=n_test_groups,
                                          variance_rule=proto.variance_rule, split_rule=proto.split_rule)
    values = np.ascontiguousarray(filtered.values)
    kwargs = dict(n_test=n_test, seed=seed, engine=engine, groups=groups, n_test_groups=n_test_groups,
                  split_rule=proto.split_rule, calibration_seeds=proto.calibration_seed,
                  calibration_cache=calibration_cache)
    splits = list(range(int(n_splits)))
    if int(n_jobs) == 1:
        rho = _ceiling_splits(values, ref, splits, **kwargs)
    else:
        from joblib import Parallel, delayed

        chunks = [splits[i:i + 10] for i in range(0, len(splits), 10)]
        rho = [r for part in Parallel(n_jobs=n_jobs)(delayed(_ceiling_splits)(values, ref, c, **kwargs)
                                                      for c in chunks) for r in part]
    out = pd.Series(np.asarray(rho, float), index=pd.RangeIndex(len(splits), name="split"), name="ceiling")
    out.attrs.update({"source": matrix.source, "n_splits": int(n_splits), "n_test": int(n_test), "seed": seed,
                      "engine": engine, "variance_threshold": variance_threshold, "reference": reference,
                      "grouped": groups is not None, "n_test_groups": int(n_test_groups),
                      "protocol": proto.name, "protocol_settings": proto.settings(), "nan_policy": proto.nan_policy})
    return out
