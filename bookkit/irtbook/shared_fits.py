"""Each split of the agreement protocol calibrated once, for the protocol and its ceiling alike.

Paper, section "Evaluation": every split calibrates the 2PL on its training models only. The
agreement ceiling (:func:`irtlib.protocol.ceiling.agreement_ceiling`) is measured on the
protocol's own splits, with the same training rows and calibration seeds, so it needs exactly the
protocol's per-split fits. :func:`shared_calibrations` lets a chapter run both and fit each split
once (the simulation study, :mod:`irtbook.simulation_study`; PandaGuard,
:mod:`irtbook.pandaguard_claims`).
"""

from __future__ import annotations

import contextlib

import numpy as np

from irtlib.calibration.joint_map import fit_2pl
from irtlib.calibration.split_cache import fit_map_splits_cached
from irtlib.core.responses import ResponseMatrix
from irtlib.protocol.agreement import CALIBRATION_ENGINES, register_calibration_engine

__all__ = ["calibrate_block", "shared_calibrations"]


def calibrate_block(x: np.ndarray, *, engine: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """One split's item parameters from its training block, as the protocol's per-split engines compute them.

    :func:`irtlib.fit_2pl` (``engine``, ``seed``) on the items some training row saw; NaN for
    the others (paper, section "Evaluation": items are calibrated on the training models only).
    The same arrays, bit for bit, as :func:`irtlib.protocol.agreement.calibrate_splits` with a
    :func:`irtlib.fit_2pl` engine (a test checks it).

    Parameters
    ----------
    x : ndarray, shape (n_train, n_items)
        The training rows of the filtered responses (1, 0, NaN missing).
    engine : str
        A :func:`irtlib.fit_2pl` engine.
    seed : int
        The split's calibration seed.

    Returns
    -------
    a, b : ndarray, shape (n_items,)
    """
    if engine == "map":          # the protocol's own MAP fit of a split: the same arrays, no labelled matrix
        return fit_map_splits_cached([x], cache_dir=None)[0]
    pool = np.flatnonzero((~np.isnan(x)).any(axis=0))
    block = x[:, pool]
    matrix = ResponseMatrix(block, [f"m{i}" for i in range(block.shape[0])],
                            [f"i{j}" for j in range(block.shape[1])], source="training split")
    cal = fit_2pl(matrix, engine=engine, seed=int(seed))
    a, b = np.full(x.shape[1], np.nan), np.full(x.shape[1], np.nan)
    a[pool], b[pool] = cal.a.to_numpy(), cal.b.to_numpy()
    return a, b


@contextlib.contextmanager
def shared_calibrations(engine: str):
    """Within the block, each distinct training block and seed is calibrated once in this process.

    The agreement protocol and its ceiling (:func:`irtlib.protocol.ceiling.agreement_ceiling`)
    calibrate the same splits (same training rows, same calibration seeds). Inside this context
    ``engine`` (a :func:`irtlib.fit_2pl` engine) is registered as a batched calibration engine
    (:func:`irtlib.protocol.agreement.register_calibration_engine`) that keeps each split's
    :func:`calibrate_block` by content, so the second caller reads the first one's fit; on leaving,
    the registry is as it was. Only calls in this process see it: run the protocol and the ceiling
    with ``n_jobs=1`` inside. An engine already registered (``"pyirt-authors"``, which keeps its
    own cache) is left alone.

    Yields
    ------
    dict
        The fits kept, keyed by ``(seed, shape, bytes of the block)``; the seed is None for the MAP
        engine, whose fit takes none (:func:`calibrate_block`), so splits that train on the same models
        (the grouped protocol holds out the same base models in several splits) share one fit.
    """
    kept: dict = {}
    if engine in CALIBRATION_ENGINES:
        yield kept
        return

    def calibrate(blocks, seeds):
        out = []
        for x, seed in zip(blocks, seeds, strict=True):
            x = np.ascontiguousarray(x, dtype=float)
            key = (None if engine == "map" else int(seed), x.shape, x.tobytes())   # the MAP fit takes no seed
            if key not in kept:
                kept[key] = calibrate_block(x, engine=engine, seed=int(seed))
            out.append(kept[key])
        return out

    register_calibration_engine(engine, calibrate)
    try:
        yield kept
    finally:
        CALIBRATION_ENGINES.pop(engine, None)
