"""The authors' Fluid path in one C call per run: maximum information and the bounded MLE, every step.

:func:`irtlib.selection.adaptive.run_adaptive` with :class:`~irtlib.selection.selectors.MaxInformation`
and :class:`~irtlib.selection.estimators.MleEstimator` (the authors' protocol: paper, section "Adaptive
selection (Algorithm 1)", with the released code's MLE in [-8, 8]) advances all models one step at a
time, and each step is some thirty numpy and ctypes calls around three C kernels: the selector's cached
step and full pass (:mod:`irtlib.selection.maxinfo_kernel`) and the MLE
(:meth:`irtlib.selection.score_kernel.RowTerms.estimate`). Those kernels treat every model on its own, so
``_fluid_path_kernel.c`` (beside this module: the two kernels' sources included unchanged, and a loop)
runs the same calls with the same arguments model by model, a whole test at a time, in one call:
:func:`run_mle_path`. The picks and estimates are the step-by-step loop's, bit for bit.

A model whose full pass the selector's kernel leaves to numpy (a value that is not a number, ``|a (theta
- b)|`` beyond 700, ...) is flagged by the kernel, and its test runs again in the class-based loop
(:class:`~irtlib.selection.engine.AdaptiveTest`), which stays the general path and this one's oracle.

Compiled like :mod:`irtlib.selection.maxinfo_kernel` (the same compiler driver and flags; the AVX-512
build first where the processor has it). The first :func:`load` of a process runs random adaptive tests
(shared and per-model banks, missing responses, banks smaller than the selector's cache, theta0 per
model) through both paths and returns the library only if every item, every estimate and every final
ability is equal; otherwise, or without a compiler, or with ``IRTLIB_FLUID_PATH=0``, ``run_adaptive``
keeps the class-based loop (no warning: the numbers are the same, only slower).

Layer rule: part of ``selection``; imports ``calibration`` (the compiler driver) and ``core``.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any

import numpy as np

from .estimators import Estimator
from .items import ItemModel
from .selectors import Selector

__all__ = ["SOURCE", "load", "run_mle_path", "loop_path"]

SOURCE = Path(__file__).with_name("_fluid_path_kernel.c")

_LOADED: dict = {}
#: :class:`irtlib.selection.maxinfo_kernel.FullPass`'s arrays for its ranked step, in the kernel's order.
_RANKED = ("cw", "cs", "cm", "corder", "camax", "cready")


def _bind(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    i64, ptr, f64 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_double
    lib.fluid_mle_path.argtypes = [i64, i64, i64, i64, i64, *[ptr] * 14, i64, ptr, i64, *[ptr] * 14, i64,
                                   *[ptr] * 7, f64, f64, f64, i64, i64, i64, *[ptr] * 4]
    lib.fluid_mle_path.restype = i64
    lib.maxinfo_vector_width.argtypes = []
    lib.maxinfo_vector_width.restype = i64
    return lib


def _address(arr: np.ndarray | None) -> int | None:
    return None if arr is None else arr.ctypes.data


def run_mle_path(lib: ctypes.CDLL, selector: Any, estimator: Any, x: np.ndarray, budget: int,
                 theta0: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every model's test in one call: ``(items, estimate, theta, wild)``.

    Parameters
    ----------
    lib : the loaded library (:func:`load`)
    selector : irtlib.selection.selectors._MaxInfoRun
        A fresh run whose full pass is in C (``selector.fused``); its state is advanced in place.
    estimator : irtlib.selection.estimators._MleRun
        A fresh run with the C terms (``estimator._terms``); its arrays are written in place.
    x : ndarray, shape (n_models, n_items)
        The responses (NaN: unavailable).
    budget : int
    theta0 : ndarray, shape (n_models,)
        The ability the first item is chosen at.

    Returns
    -------
    items : ndarray of int, shape (n_models, budget)
    estimate : ndarray, shape (n_models, budget)
    theta : ndarray, shape (n_models,)
        The last estimate.
    wild : ndarray of bool, shape (n_models,)
        The models the kernel stopped (their outputs are meaningless): run them in the class-based loop.
    """
    fused, e, terms = selector.fused, estimator.e, estimator._terms
    n, n_items = x.shape
    x = np.ascontiguousarray(x, dtype=np.float64)
    theta0 = np.ascontiguousarray(np.broadcast_to(np.asarray(theta0, dtype=np.float64), (n,)))
    terms._fit(estimator.A.shape)
    cap = estimator.A.shape[1]
    if cap < budget:
        raise ValueError(f"the estimator's capacity {cap} is below the budget {budget}")
    items = np.empty((n, budget), dtype=np.int64)
    out = np.empty((n, budget))
    theta = np.empty(n)
    wild = np.zeros(n, dtype=np.bool_)
    cwork = np.empty(max(3 * fused.cache, 1))
    p = fused._ptr
    # the selector's ranking of its candidates, where its library ranks them (FullPass.step's arrays), else none
    ranked = [p.get(k) for k in _RANKED] if getattr(fused, "ranked", False) else [None] * len(_RANKED)
    lo, hi = e.bounds
    terms.evaluated += lib.fluid_mle_path(
        n, n_items, int(budget), fused.cache, fused.radii.size, p["radii"], p["unused"], p["left"], p["items"],
        p["ca"], p["cb"], p["used"], p["ctwin"], p["guard"], p["theta_c"], p["bound"], p["a"], p["b"], p["loga2"],
        fused.ld, p["twin"], fused.ldt, p["twinned"], p["work"], p["work2"], p["lastc"], p["has"], cwork.ctypes.data,
        *ranked, x.ctypes.data, theta0.ctypes.data, cap, *(_address(arr) for arr in (
            estimator.X, estimator.A, estimator.B, terms.g, terms.h, terms.at, terms.upto)),
        float(e.tol), float(lo), float(hi), int(e.max_newton), int(e.max_halvings), int(e.max_bisection),
        items.ctypes.data, out.ctypes.data, theta.ctypes.data, wild.ctypes.data)
    estimator.t = budget
    estimator.theta = theta.copy()
    return items.astype(np.intp), out, theta, wild


def loop_path(items: ItemModel, x: np.ndarray, budget: int, theta0: np.ndarray, *, selector: Selector | None = None,
              estimator: Estimator | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The class-based loop of the same tests (``run_adaptive``'s, without this module): ``(items, estimate, theta)``.

    ``selector`` and ``estimator`` default to ``MaxInformation()`` and ``MleEstimator()``.
    """
    from .engine import AdaptiveTest
    from .estimators import MleEstimator
    from .selectors import MaxInformation

    n = x.shape[0]
    rows = np.arange(n)
    test = AdaptiveTest(items, selector=MaxInformation() if selector is None else selector,
                        estimator=MleEstimator() if estimator is None else estimator, n_models=n,
                        available=~np.isnan(x), theta0=theta0, capacity=budget)
    given, out = np.full((n, budget), -1, dtype=np.intp), np.full((n, budget), np.nan)
    for t in range(budget):
        j = test.propose()
        given[:, t] = j
        test.record(j, x[rows, np.maximum(j, 0)])
        out[:, t] = test.value
    return given, out, test.theta


def _matches_loop(lib: ctypes.CDLL) -> bool:
    """Whether :func:`run_mle_path` gives :func:`loop_path`'s items and estimates on random runs.

    Shared and per-model banks (each split's rows sharing one bank, as the protocol runs them), 5% of
    the responses missing, banks smaller and larger than the selector's cache, every 13th item a twin
    of its neighbour, theta0 per model; the whole trajectory and the final abilities must be equal.
    """
    if lib.maxinfo_vector_width() not in (4, 8):
        return False
    from .engine import AdaptiveTest
    from .estimators import MleEstimator
    from .items import TwoPLItems
    from .selectors import MaxInformation

    rng = np.random.default_rng(20261205)
    for n_models, n_items, budget, shared in [(6, 40, 40, True), (9, 300, 60, False), (4, 700, 90, False),
                                              (3, 12, 12, False)]:
        if shared:
            a, b = rng.lognormal(0.0, 0.5, n_items), rng.normal(0.0, 1.5, n_items)
            a[1::13], b[1::13] = a[::13][:a[1::13].size], b[::13][:b[1::13].size]
        else:
            a = np.repeat(rng.lognormal(0.0, 0.5, (3, n_items)), -(-n_models // 3), axis=0)[:n_models]
            b = np.repeat(rng.normal(0.0, 1.5, (3, n_items)), -(-n_models // 3), axis=0)[:n_models]
        theta = rng.normal(0.0, 1.5, n_models)
        p = 1.0 / (1.0 + np.exp(-a * (theta[:, None] - b)))
        x = (rng.random((n_models, n_items)) < p).astype(float)
        x[rng.random(x.shape) < 0.05] = np.nan
        theta0 = rng.normal(0.0, 0.5, n_models)
        bank = TwoPLItems(a, b)
        want = loop_path(bank, x, budget, theta0)
        test = AdaptiveTest(bank, selector=MaxInformation(), estimator=MleEstimator(), n_models=n_models,
                            available=~np.isnan(x), theta0=theta0, capacity=budget)
        got = run_mle_path(lib, test.selector, test.estimator, x, budget, theta0)
        if got[3].any() or not all(np.array_equal(u, v, equal_nan=True) for u, v in zip(want, got[:3], strict=True)):
            return False
    return True


def load() -> ctypes.CDLL | None:
    """The compiled library, or None (no compiler, ``IRTLIB_FLUID_PATH=0``, or a run unlike the loop's).

    Decided once per process; needs :mod:`irtlib.selection.score_kernel` and
    :mod:`irtlib.selection.maxinfo_kernel` to load (the loop it is checked against uses them). Where the
    processor has AVX-512F and DQ, the build with :data:`irtlib.selection.maxinfo_kernel.AVX512_FLAGS` is
    tried first.
    """
    from irtlib.calibration.fused_kernel import cpu_flags, verified

    from . import maxinfo_kernel, score_kernel

    if "lib" not in _LOADED and (score_kernel.load() is None or maxinfo_kernel.load() is None):
        _LOADED["lib"] = None
    if ("lib" not in _LOADED and {"avx512f", "avx512dq"} <= cpu_flags()
            and os.environ.get("IRTLIB_MAXINFO_KERNEL_AVX512", "1") != "0"):
        wide = verified(SOURCE, _bind, switch="IRTLIB_FLUID_PATH", matches=_matches_loop, cache={},
                        extra_flags=maxinfo_kernel.AVX512_FLAGS)
        if wide is not None:
            _LOADED["lib"] = wide
    return verified(SOURCE, _bind, switch="IRTLIB_FLUID_PATH", matches=_matches_loop, cache=_LOADED)
