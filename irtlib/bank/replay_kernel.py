"""The interval check's adaptive replays in C: Fluid Benchmarking, each model's whole test in one call.

:func:`irtlib.bank.coverage.interval_check` replays the adaptive tests of up to 200 calibration models
(Paper, section "Adaptive selection (Algorithm 1)": maximum Fisher information, MAP ability with a
Normal(0, 1) prior, unobserved items unavailable) for 200 steps. :func:`irtlib.selection.adaptive.run_adaptive`
does that for all models at once, a few dozen numpy calls per step, so at 200 models its cost is mostly
per-call overhead on small arrays. ``_replay_kernel.c`` (beside this module) runs each model's test
through to the end in C:

- the pick is the exact argmax of ``a^2 s(z) s(-z)`` (ties to the lowest index), the rule of
  :class:`irtlib.selection.MaxInformation`, found without evaluating every item: the items sorted by ``b``
  in blocks, each block skipped when an upper bound on its items' information (from its largest ``a`` and
  its distance to ``theta``) cannot beat the best so far;
- the estimate after each item is the posterior mode, by Newton's method on the score warm-started from
  the previous estimate, bracketed, until a step is below 1e-7 (Newton is then within about 1e-13 of the
  mode; measured within 5e-16 of :func:`irtlib.map_ability` at ``tol=1e-14``), where
  :class:`irtlib.selection.MapEstimator` stops earlier (measured 1e-9 to 1.2e-7 from the mode).

So the items are :func:`run_adaptive`'s but where two items' information ties to within the estimates'
difference, and the estimates agree with it to that difference (``tests/bank/test_check_kernels.py``).
Compiled like :mod:`irtlib.bank.interval_kernel`; the first :func:`load` of a process replays a small
seeded matrix with both and returns the kernel only if every item agrees and every estimate is within
1e-6; otherwise, without a compiler, or with ``IRTLIB_REPLAY_KERNEL=0``, the check uses :func:`run_adaptive`.
"""

from __future__ import annotations

import ctypes
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from irtlib.core.ability import THETA_BOUNDS

__all__ = ["BLOCK", "SOURCE", "fluid_replay", "load"]

SOURCE = Path(__file__).with_name("_replay_kernel.c")

#: Items per block of the selection's bounds (one stratum of a, sorted by b).
BLOCK = 8

#: Strata of a (equal counts) whose items the selection's blocks hold.
STRATA = 16

_LAYOUT_ARRAYS = ("stratum_blocks", "block_items", "order", "bamin", "bamax", "bmin", "bmax", "samin", "samax")


def _layout(a: np.ndarray, b: np.ndarray) -> dict:
    """The pick's layout of the bank: strata of ``a`` (largest first), each sorted by ``b`` in blocks of :data:`BLOCK`.

    Each block and stratum carries its range of ``a`` (and each block its range of ``b``): the kernel bounds
    the information of the items in it from these (see ``_replay_kernel.c``).
    """
    m = a.size
    strata = min(STRATA, m)
    rank = np.empty(m, dtype=np.int64)
    rank[np.argsort(-a, kind="stable")] = np.arange(m)
    stratum = rank * strata // m                       # 0: the largest a's
    order = np.lexsort((b, stratum)).astype(np.int64)  # by stratum, then b
    counts = np.bincount(stratum, minlength=strata)
    stratum_blocks, block_items, offset = [0], [], 0
    for count in counts:                  # the blocks of each stratum, none straddling two
        block_items.extend(range(offset, offset + count, BLOCK))
        offset += count
        stratum_blocks.append(len(block_items))
    block_items.append(offset)
    block_items = np.asarray(block_items, dtype=np.int64)
    lo = block_items[:-1]
    sa, sb = a[order], b[order]
    blocks = {"bamin": np.minimum.reduceat(sa, lo), "bamax": np.maximum.reduceat(sa, lo),
              "bmin": np.minimum.reduceat(sb, lo), "bmax": np.maximum.reduceat(sb, lo)}
    first, last = np.asarray(stratum_blocks[:-1]), np.asarray(stratum_blocks[1:])
    samin = np.array([blocks["bamin"][f:e].min() if e > f else np.inf for f, e in zip(first, last, strict=True)])
    samax = np.array([blocks["bamax"][f:e].max() if e > f else -np.inf for f, e in zip(first, last, strict=True)])
    return {"n_strata": strata, "stratum_blocks": np.asarray(stratum_blocks, dtype=np.int64),
            "block_items": block_items, "order": order, **{k: np.ascontiguousarray(v, dtype=np.float64)
                                                         for k, v in blocks.items()},
            "samin": samin, "samax": samax}

#: Fewest models per thread: below twice this, one thread replays them all.
MIN_MODELS_PER_THREAD = 16

_LOADED: dict = {}       # "lib": the library or None once load() has decided


def _bind(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    i64, ptr, f64 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_double
    lib.fluid_replay.argtypes = [i64, i64, ptr, ptr, ptr, i64, i64, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr,
                                 f64, f64, f64, f64, f64, f64, ptr, ptr]
    lib.fluid_replay.restype = ctypes.c_int
    return lib


def fluid_replay(lib: ctypes.CDLL, x: np.ndarray, a: np.ndarray, b: np.ndarray, *, budget: int,
                 theta0: float = 0.0, prior_mean: float = 0.0, prior_sd: float = 1.0,
                 bounds: tuple[float, float] = THETA_BOUNDS, max_step: float = 1.0,
                 threads: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Each model's Fluid Benchmarking test replayed from its response row, for ``budget`` steps.

    Parameters
    ----------
    lib : the loaded kernel (:func:`load`)
    x : ndarray, shape (n_models, n_items)
        Responses, 1 safe, 0 unsafe, NaN unavailable.
    a, b : ndarray, shape (n_items,)
        The bank's items.
    budget : int
        Steps.
    theta0, prior_mean, prior_sd, bounds, max_step
        As :class:`irtlib.selection.MapEstimator` and :func:`irtlib.selection.adaptive.run_adaptive`.
    threads : int
        Threads sharing the models (the result does not depend on it).

    Returns
    -------
    items : ndarray of int, shape (n_models, budget)
        The item given at each step, -1 once a model has none left.
    estimate : ndarray, shape (n_models, budget)
        The MAP ability after each step.
    """
    x = np.ascontiguousarray(x, dtype=np.float64)
    a, b = np.ascontiguousarray(a, dtype=np.float64), np.ascontiguousarray(b, dtype=np.float64)
    n, m = x.shape
    if a.shape != (m,) or b.shape != (m,):
        raise ValueError(f"a and b must have shape ({m},), got {a.shape} and {b.shape}")
    layout = _layout(a, b)
    items = np.empty((n, budget), dtype=np.int64)
    estimate = np.empty((n, budget))
    lo, hi = (float(v) for v in bounds)

    def run(rows: slice) -> int:
        k = rows.stop - rows.start
        return lib.fluid_replay(k, m, x[rows].ctypes.data, a.ctypes.data, b.ctypes.data, budget, layout["n_strata"],
                                *(layout[key].ctypes.data for key in _LAYOUT_ARRAYS), float(theta0),
                                float(prior_mean), float(prior_sd), lo, hi, float(max_step), items[rows].ctypes.data,
                                estimate[rows].ctypes.data)

    parts = max(1, min(int(threads), n // MIN_MODELS_PER_THREAD))
    cuts = np.linspace(0, n, parts + 1).astype(int)
    slices = [slice(int(s), int(e)) for s, e in zip(cuts[:-1], cuts[1:], strict=True) if e > s]
    if len(slices) == 1:
        codes = [run(slices[0])]
    else:                          # ctypes frees the GIL during each call: the threads run at once
        with ThreadPoolExecutor(len(slices)) as pool:
            codes = list(pool.map(run, slices))
    if any(codes):
        raise MemoryError("the replay kernel could not allocate its work arrays")
    return items.astype(np.intp), estimate


def _matches_engine(lib: ctypes.CDLL) -> bool:
    """Whether the kernel replays a small seeded 2PL matrix (with unavailable cells) as ``run_adaptive`` does."""
    from irtlib.selection.adaptive import run_adaptive

    rng = np.random.default_rng(20261203)
    n, m, budget = 24, 300, 40
    a, b, theta = np.exp(rng.normal(0.0, 0.7, m)), rng.normal(0.0, 1.5, m), rng.normal(0.0, 1.5, n)
    x = (rng.random((n, m)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    x[rng.random((n, m)) < 0.1] = np.nan
    x[0, 30:] = np.nan                       # a model that runs out of items
    items, estimate = fluid_replay(lib, x, a, b, budget=budget, threads=1)
    want = run_adaptive(x, a, b, budget=budget)
    return bool(np.array_equal(items, want.items) and np.abs(estimate - want.estimate).max() < 1e-6)


def load() -> ctypes.CDLL | None:
    """The compiled kernel, or None (no compiler, ``IRTLIB_REPLAY_KERNEL=0``, or replays unlike the engine's).

    Decided once per process.
    """
    from irtlib.calibration.fused_kernel import verified

    return verified(SOURCE, _bind, switch="IRTLIB_REPLAY_KERNEL", matches=_matches_engine, cache=_LOADED)
