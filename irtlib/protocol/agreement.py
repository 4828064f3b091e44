"""The paper's agreement protocol (Table 2, Figure 4, appendix F), fast enough to run in full.

Paper, section "Evaluation": for each of 70 to 100 random train/test splits holding out 10 test
models, calibrate on the training models, let every method choose items and score the test
models, and take the Spearman correlation between those scores and the test models'
full-benchmark safety scores ("agreement"); average over splits, for budgets ``k`` swept on a
log scale.

:func:`run_protocol` does exactly that for the eight methods (:data:`METHODS`):

============================  ==========================================  ====================
method                        items                                       test-model score
============================  ==========================================  ====================
``fluid``                     adaptive, maximum information (Algorithm 1)  MAP ability
``random``                    adaptive loop, random items                  safety score
``random-irt``                adaptive loop, random items                  MAP ability
``total-fisher``              static (:func:`irtlib.selection.static.total_fisher`)  MAP ability
``marginal-fisher``           static, greedy summed SE                     MAP ability
``marginal-fisher-bq``        static, greedy over b-quartiles              MAP ability
``anchor-points``             static, K-medoids medoids                    weighted safety score
``disco``                     static, entropy order                        safety score
============================  ==========================================  ====================

Per split, in this order: (1) the test models are drawn; (2) the 2PL is calibrated on the
training rows only (:func:`irtlib.fit_2pl`), and the training abilities are the MAP on all items
with those parameters; (3) the static methods choose their items from the training rows and
those parameters only; (4) only then are the test rows touched, to run the adaptive loops and
score the subsets. No test response reaches calibration or static selection (a test poisons the
test rows and checks that step 2 and 3 are unchanged). The variance filter is the one step that
sees every model: as in the paper it runs once, on the whole matrix, before anything else.

Choices the paper leaves open (all parameters of :func:`run_protocol` or
:func:`summarise_table2`):

- ``reference="full"``: the full-benchmark score ``R`` is the safety score on the matrix as
  given (before the variance filter): the paper's "R is always the full safety score".
  ``"filtered"`` uses the filtered items.
- Undefined agreement: Spearman's rho is undefined when a method gives every test model the
  same score (or the reference is constant), e.g. a 1-item Random test all ten models pass.
  The raw table keeps NaN there; the summaries count such splits as agreement 0 by default
  (``nan_policy="zero"``: a method that cannot rank has no agreement; skipping them would flatter
  the small budgets) and report how many there were; ``nan_policy="omit"`` averages the rest.
- Random and Random IRT share each split's random item orders (a paired comparison).
- Randomness: split ``i`` uses ``SeedSequence(seed, spawn_key=(i, j))`` streams (the
  children of ``SeedSequence(seed).spawn(n_splits)``), so results do not depend on ``n_jobs``
  or on the order in which splits run.

The protocol as written and as run (``protocol=``, :mod:`irtlib.protocol.presets`): ``"paper"`` (the
default) is everything above; ``"authors"`` follows the authors' released code where it differs
(the authors' released code): their split rule, test sizes and budget
grid per benchmark, the filtered reference, undefined rho dropped and +-1 SE bands, Fluid by MLE
from the training mean, one shared random order per split, the interleaved b-quartile order and a
fresh FasterPAM per budget. Calibration of every split runs in one :func:`calibrate_splits` call
before any selection, so an engine that fits all splits at once can plug in
(:func:`register_calibration_engine`).
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext

import numpy as np
import pandas as pd

from irtlib._typing import ArrayLike, Seed
from irtlib.calibration.joint_map import ENGINES as _FIT_ENGINES
from irtlib.calibration.joint_map import fit_2pl
from irtlib.core.ability import map_ability
from irtlib.core.responses import ResponseMatrix
from irtlib.core.stats import spearman
from irtlib.errors import InputError, InputTypeError
from irtlib.selection import methods as _methods
from irtlib.selection.ability_kernel import map_row_sums
from irtlib.selection.adaptive import MleEstimator, run_adaptive
from irtlib.selection.methods import Training
from irtlib.selection.static import Subset, score_blocks_map, score_subset

from . import presets as _protocols

__all__ = [
    "METHODS", "IRT_METHODS", "budget_grid", "spearman", "split_models", "split_agreements", "calibration_seed",
    "calibrate_split", "calibrate_splits", "check_engine", "register_calibration_engine", "CALIBRATION_ENGINES",
    "static_selections",
    "run_splits", "protocol_data", "run_protocol", "agreement_curves", "agreement_at",
    "paired_difference", "mean_interval_halfwidth", "summarise_table2", "run_agreement",
]

#: Method identifiers in the order results are reported (from the registry, :mod:`irtlib.selection.methods`).
METHODS = _methods.METHOD_IDS
#: Methods that score a test model by its MAP ability (the rest use a safety score).
IRT_METHODS = _methods.irt_ids()

_STREAM_SPLIT, _STREAM_RANDOM, _STREAM_ANCHOR, _STREAM_CALIBRATION = range(4)


# ---------------------------------------------------------------------------- helpers
def budget_grid(n_items: int, *, max_k: int | None = None, n_points: int = 25, max_fraction: float = 0.3,
                min_max_k: int = 100) -> list[int]:
    """Log-spaced budgets ``1 .. max_k`` (unique integers).

    Parameters
    ----------
    n_items : int
        Items available (after the variance filter).
    max_k : int, optional
        Largest budget. Default ``min(n_items, max(min_max_k, ceil(max_fraction * n_items)))``:
        30% of the benchmark, and at least 100 items (all of a small one). That covers every
        budget the paper reports -- SafetyBench's sweep to about 3,000 of 11,435 items (26%),
        Anthropic Red Team's 260 of 1,000, WMDP's 234 of 1,273 and SimpleSafetyTests' 63 of 100.
    n_points : int
        Points of the geometric grid before rounding (small budgets collapse onto 1, 2, 3...).

    Returns
    -------
    list of int, increasing
    """
    n_items = int(n_items)
    if n_items < 1:
        raise InputError("n_items must be positive")
    if max_k is None:
        max_k = min(n_items, max(min_max_k, math.ceil(max_fraction * n_items)))
    max_k = int(max_k)
    if not 1 <= max_k <= n_items:
        raise InputError(f"max_k must be between 1 and n_items ({n_items}), got {max_k}")
    grid = np.unique(np.round(np.geomspace(1, max_k, max(int(n_points), 2))).astype(int))
    return [int(k) for k in grid]


def _stream(seed, split: int, j: int) -> np.random.SeedSequence:
    """Stream ``j`` of split ``split``: the ``j``-th child of ``SeedSequence(seed).spawn(...)[split]``."""
    return np.random.SeedSequence(seed, spawn_key=(int(split), int(j)))


def split_models(n_models: int, n_test: int, seed: Seed, split: int, *, groups: ArrayLike | None = None,
                 n_test_groups: int = 1, rule: str = "stream") -> tuple[np.ndarray, np.ndarray]:
    """Training and test rows of split ``split`` (sorted positions).

    Parameters
    ----------
    n_models, n_test : int
        Rows of the matrix, and test models per split.
    seed, split
        The protocol's seed and the split number (stream ``split`` of ``seed``).
    groups : array_like, shape (n_models,), optional
        A group label per model (e.g. the base model of an attacked configuration). None (the
        paper's protocol): ``n_test`` models drawn at random, the rest train. Given: the split
        draws ``n_test_groups`` whole groups, its ``n_test`` test models are drawn from their
        members, and *every* member of those groups leaves training (held-out groups: no
        configuration of a test model's base model is calibrated on). With ``groups=None`` the
        result is exactly the ungrouped split, so existing runs are unchanged.
    n_test_groups : int
        Groups held out per split (only with ``groups``).
    rule : {"stream", "authors"}
        ``"stream"``: the draw above; ``"authors"``: the authors' split ``split``
        (:func:`irtlib.protocol.presets.authors_split`, ``default_rng((seed, split))``; no ``groups``).

    Returns
    -------
    train, test : ndarray of int
        Sorted row positions. With ``groups`` the two need not cover every row.
    """
    if not 1 <= n_test < n_models - 1:
        raise InputError(f"n_test must be between 1 and n_models - 2 ({n_models - 2}), got {n_test}")
    if rule == "authors":
        if groups is not None:
            raise InputError("the authors' split rule draws models, not groups: pass groups=None")
        return _protocols.authors_split(n_models, n_test, split, seed=int(seed))
    if rule != "stream":
        raise InputError(f"rule must be 'stream' or 'authors', got {rule!r}")
    rng = np.random.default_rng(_stream(seed, split, _STREAM_SPLIT))
    if groups is None:
        test = np.sort(rng.choice(n_models, size=n_test, replace=False))
        train = np.setdiff1d(np.arange(n_models), test)
        return train, test
    labels = np.asarray(groups)
    if labels.shape != (n_models,):
        raise InputError(f"groups must have one label per model ({n_models}), got shape {labels.shape}")
    uniq, code = np.unique(labels, return_inverse=True)
    n_test_groups = int(n_test_groups)
    if not 1 <= n_test_groups < uniq.size:
        raise InputError(f"n_test_groups must be between 1 and the number of groups minus 1 "
                         f"({uniq.size - 1}), got {n_test_groups}")
    held = np.sort(rng.choice(uniq.size, size=n_test_groups, replace=False))
    out = np.isin(code, held)
    members = np.flatnonzero(out)
    if members.size < n_test:
        raise InputError(f"n_test ({n_test}) exceeds the {members.size} members of the held-out groups; "
                         f"raise n_test_groups or lower n_test")
    train = np.flatnonzero(~out)
    if train.size < 2:
        raise InputError("held-out groups leave fewer than 2 training models")
    test = np.sort(rng.choice(members, size=n_test, replace=False))
    return train, test


def calibration_seed(seed: Seed, split: int) -> int:
    """The integer seed split ``split`` passes to its calibration (stream 3 of the split)."""
    return int(_stream(seed, split, _STREAM_CALIBRATION).generate_state(1)[0])


def calibration_seeds(seed: Seed, splits: Sequence[int], *, protocol: _protocols.Protocol) -> list[int]:
    """The calibration seed of each split: its own stream's (:func:`calibration_seed`), or the authors' 0 for all."""
    if protocol.calibration_seed == "stream":
        return [calibration_seed(seed, split) for split in splits]
    return [0] * len(splits)


def split_training(n_models: int, splits: Sequence[int], *, n_test: int, seed: Seed,
                   protocol: _protocols.Protocol) -> tuple[list[np.ndarray], list[int]]:
    """The training rows and calibration seed of each split, as :func:`run_protocol` draws them (no groups).

    What the calibration engine of a split sees, so that a caller can calibrate the splits of a
    run ahead of it (:mod:`irtbook.split_stage`) under the same cache keys.

    Returns
    -------
    rows : list of ndarray of int
        Per split, the training rows (sorted positions of the filtered matrix).
    seeds : list of int
    """
    rows = [split_models(n_models, n_test, seed, split, rule=protocol.split_rule)[0] for split in splits]
    return rows, calibration_seeds(seed, splits, protocol=protocol)


def calibrate_split(train_values: ArrayLike, *, engine: str = "map",
                    seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Item parameters and training abilities from the training rows only.

    Returns ``(a, b, theta_train)``: the 2PL fitted by :func:`irtlib.fit_2pl` (``engine``) and the
    training models' MAP abilities on all items with those parameters (paper, "Static subsets":
    "training abilities come from MAP on all items").
    """
    x = np.asarray(train_values, float)
    a, b = _fit_items(x, engine=engine, seed=seed)
    theta = np.asarray(map_ability(x, a, b).theta)
    return a, b, theta


def split_agreements(values: ArrayLike, reference: ArrayLike, splits: Sequence[int], score: Callable, *,
                     n_test: int, seed: Seed, groups: ArrayLike | None = None, n_test_groups: int = 1,
                     rule: str = "stream") -> list[np.ndarray]:
    """The per-split loop of a one-method protocol: draw the split, score its test models, rank.

    Paper, section "Evaluation". For each split, :func:`split_models` draws the training and test
    rows exactly as :func:`run_protocol` does with the same arguments; ``score(split, train, test)``
    calibrates on ``values[train]`` only and returns the test models' scores, shape
    ``(n_test,)`` or ``(n_budgets, n_test)``; the agreement is :func:`spearman` of each row with
    ``reference[test]``. Used by :func:`irtlib.protocol.ceiling.agreement_ceiling` and
    :func:`irtlib.protocol.model_agreement.fluid_agreement`.

    Returns
    -------
    list of ndarray
        Per split, Spearman's rho: a float (1-D scores) or shape ``(n_budgets,)``.
    """
    reference = np.asarray(reference, dtype=float)
    out = []
    for split in splits:
        train, test = split_models(np.shape(values)[0], n_test, seed, split, groups=groups,
                                   n_test_groups=n_test_groups, rule=rule)
        out.append(spearman(score(split, train, test), reference[test]))
    return out


def _fit_items(x, *, engine, seed):
    """``(a, b)`` of :func:`irtlib.fit_2pl` on a training block (its abilities are not needed)."""
    matrix = ResponseMatrix(x, [f"m{i}" for i in range(x.shape[0])], [f"i{j}" for j in range(x.shape[1])],
                            source="training split")
    cal = fit_2pl(matrix, engine=engine, seed=int(seed))
    return cal.a.to_numpy(), cal.b.to_numpy()


def _calibrate_each(blocks: list, seeds: list, engine: str) -> list:
    """Today's engines: :func:`irtlib.fit_2pl` once per split, on the items its training rows saw."""
    out = []
    for x, seed in zip(blocks, seeds, strict=True):
        pool = np.flatnonzero((~np.isnan(x)).any(axis=0))
        a, b = _fit_items(x[:, pool], engine=engine, seed=seed)
        a_full, b_full = np.full(x.shape[1], np.nan), np.full(x.shape[1], np.nan)
        a_full[pool], b_full[pool] = a, b
        out.append((a_full, b_full))
    return out


def _split_cache():
    """:mod:`irtlib.calibration.split_cache`, imported when first needed."""
    from irtlib.calibration import split_cache

    return split_cache


def _authors_batched(blocks: list, seeds: list, *, cache_dir=None, epochs: int | None = None) -> list:
    """The authors' calibration (py-irt's hierarchical 2PL) of every split in one batched fit per seed.

    :func:`irtlib.calibration.split_cache.fit_2pl_splits_cached` on the stacked training blocks:
    each split's result is that of a separate py-irt fit with the authors' settings (their code
    seeds every split with 0; splits with other seeds are fitted in one batch per seed), read from
    ``cache_dir`` where an earlier call fitted the same training block with the same settings.
    ``epochs`` (default: the split cache's, the paper's 1,000) is part of each split's key.
    """
    starts = np.cumsum([0] + [blk.shape[0] for blk in blocks])
    return _authors_stacked(np.vstack(blocks), starts, seeds, cache_dir=cache_dir, epochs=epochs)


def _authors_read(x: np.ndarray, rows: list, seeds: list, cache_dir) -> list | None:
    """:func:`_authors_stacked`'s fits read from ``cache_dir`` without stacking the rows, or None if one is missing.

    A split's entry is keyed by its training block's content (:mod:`irtlib.calibration.split_cache`), the same
    block whether it is hashed out of the stacked array or out of ``x``, so where every split has its entry the
    fits are those :func:`_authors_stacked` would read (nothing is fitted here).
    """
    from irtlib.calibration.split_cache import read_splits_cached

    if len(rows) != len(seeds) or not rows:
        return None
    return read_splits_cached(x, rows, seed=seeds, cache_dir=cache_dir)


def _authors_stacked(stacked: np.ndarray, starts: np.ndarray, seeds: list, *, cache_dir=None,
                     epochs: int | None = None) -> list:
    """:func:`_authors_batched` of the blocks ``stacked[starts[i]:starts[i + 1]]``, already stacked.

    :func:`calibrate_splits` gathers the training rows of every split into one array at once for this
    engine, rather than one copy per split that :func:`_authors_batched` then stacks into another (on a
    SafetyBench-sized bank, tens of megabytes per batch of splits): the same rows in the same order.
    """
    from irtlib.calibration.split_cache import fit_2pl_splits_cached

    out: list = [None] * (len(starts) - 1)
    for seed in sorted(set(seeds)):
        which = [i for i, s in enumerate(seeds) if s == seed]
        rows = [np.arange(starts[i], starts[i + 1]) for i in which]
        fits = fit_2pl_splits_cached(stacked, rows, seed=int(seed), cache_dir=cache_dir,
                                     **({} if epochs is None else {"epochs": int(epochs)}))
        for i, fit in zip(which, fits, strict=True):
            out[i] = fit
    return out


#: Batched calibration engines by name: ``fn(train_blocks, seeds) -> [(a, b), ...]`` (see
#: :func:`register_calibration_engine`). An engine not listed runs :func:`calibrate_split` per split.
#: ``"pyirt-authors"`` is registered here: the authors' calibration, all splits batched (the same
#: parameters as :func:`irtlib.fit_2pl` with that engine, split by split, in a fraction of the time).
CALIBRATION_ENGINES: dict[str, Callable[[list, list], list]] = {"pyirt-authors": _authors_batched}


def check_engine(engine: object) -> str:
    """``engine`` if it names a batched or a :func:`irtlib.fit_2pl` engine, else a one-line InputError."""
    if isinstance(engine, str) and (engine in CALIBRATION_ENGINES or engine in _FIT_ENGINES):
        return engine
    raise InputError(f"unknown calibration engine {engine!r}; choose one of "
                     f"{sorted(set(_FIT_ENGINES) | set(CALIBRATION_ENGINES))}")


def register_calibration_engine(name: str, fn: Callable[[list, list], list]) -> None:
    """Let :func:`calibrate_splits` (and so ``run_protocol(engine=name)``) calibrate all splits in one call.

    Parameters
    ----------
    name : str
        The ``engine`` value that selects it (may shadow a :func:`irtlib.fit_2pl` engine).
    fn : callable
        ``fn(train_blocks, seeds) -> list of (a, b)``: ``train_blocks`` one array per split, the
        training rows of the filtered responses, shape ``(n_train, n_items)`` (1, 0, NaN missing;
        the engine never sees a test row); ``seeds`` one int per split. Returns one pair of arrays
        of shape ``(n_items,)`` per split. Items a block never observed are set to NaN afterwards
        (they leave that split's pool). Splits must not influence each other. An engine that keeps
        fits on disk takes a keyword ``cache_dir`` (passed only when :func:`calibrate_splits` gets one).
    """
    if not callable(fn):
        raise InputError(f"calibration engine {name!r} must be callable")
    CALIBRATION_ENGINES[str(name)] = fn


def calibrate_splits(values: ArrayLike, train_rows: Sequence[ArrayLike], *, engine: str = "map",
                     seed: int | Sequence[int] = 0,
                     cache_dir: str | os.PathLike | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Item parameters of every split, from each split's training rows only, in one call.

    Parameters
    ----------
    values : array_like, shape (n_models, n_items)
        The variance-filtered responses (1 safe, 0 unsafe, NaN missing).
    train_rows : sequence of array_like of int
        The training rows of each split.
    engine : str
        A registered batched engine (:data:`CALIBRATION_ENGINES`), else any
        :func:`irtlib.fit_2pl` engine, run once per split (:func:`calibrate_split`).
    seed : int or sequence of int
        One seed for every split (the authors' code: 0) or one per split.
    cache_dir : path-like, optional
        A directory where a batched engine that supports it keeps each split's fit, keyed by
        the split's training block, the settings and the code (``"pyirt-authors"``:
        :mod:`irtlib.calibration.split_cache`; ``"map"``: its
        :func:`~irtlib.calibration.split_cache.fit_map_splits_cached`), so runs that calibrate the same
        training models (the protocol and its ceiling, two chapters) fit them once. Other engines ignore it.

    Returns
    -------
    list of (a, b)
        Per split, arrays of shape ``(n_items,)``; NaN for items no training row of the split saw
        (they leave that split's pool). Training abilities are not returned: the protocol takes
        the MAP on all items given ``(a, b)`` (the authors' released code: py-irt's abilities are discarded).
    """
    x = np.asarray(values, float)
    rows = [np.asarray(r, dtype=np.intp) for r in train_rows]
    seeds = [int(seed)] * len(rows) if np.ndim(seed) == 0 else [int(s) for s in seed]
    if len(seeds) != len(rows):
        raise InputError(f"seed has {len(seeds)} values for {len(rows)} splits")
    fn = CALIBRATION_ENGINES.get(engine)
    out = _authors_read(x, rows, seeds, cache_dir) if fn is _authors_batched and cache_dir is not None else None
    # out is not None: every split fitted before (the build's stage), read with nothing stacked
    if out is None:
        if fn is _authors_batched:         # every split's training rows gathered once, stacked as it stacks them
            starts = np.cumsum([0] + [r.size for r in rows])
            stacked = x[np.concatenate(rows)] if rows else np.empty((0, x.shape[1]))
            blocks = [stacked[starts[i]:starts[i + 1]] for i in range(len(rows))]   # only training rows
            out = _authors_stacked(stacked, starts, seeds, cache_dir=cache_dir)
        else:
            blocks = [x[r] for r in rows]  # only training rows reach an engine
        if fn is None:   # the MAP engine: the same numbers, kept by content where a cache is given
            out = _calibrate_each(blocks, seeds, engine) if engine != "map" else \
                _split_cache().fit_map_splits_cached(blocks, cache_dir=cache_dir)
        elif fn is not _authors_batched:
            out = fn(blocks, seeds) if cache_dir is None else fn(blocks, seeds, cache_dir=cache_dir)
    if len(out) != len(rows):
        raise InputError(f"calibration engine {engine!r} returned {len(out)} fits for {len(rows)} splits")
    # the items each split's training rows saw; a matrix without missing cells: every item, where a split has rows
    complete = not np.isnan(x).any()
    observed = None if complete else ~np.isnan(x)
    seen_by = [np.full(x.shape[1], r.size > 0) if complete else observed[r].any(axis=0) for r in rows]
    fits = []
    for seen, (a, b) in zip(seen_by, out, strict=True):
        a, b = np.asarray(a, float).copy(), np.asarray(b, float).copy()
        if a.shape != (x.shape[1],) or b.shape != (x.shape[1],):
            raise InputError(f"calibration engine {engine!r} returned parameters of shape {a.shape}, {b.shape} "
                             f"for {x.shape[1]} items")
        a[~seen], b[~seen] = np.nan, np.nan
        fits.append((a, b))
    return fits


def static_selections(train_values: ArrayLike, a: ArrayLike, b: ArrayLike, theta_train: ArrayLike, ks: Sequence[int],
                      *, methods: Sequence[str] = METHODS, seed: Seed = 0,
                      anchor_solver: str = "auto", prior_information: float = 0.0,
                      bquartile_rule: str = "constrained", anchor_rule: str = "path", anchor_seed: int = 42) -> dict:
    """Every requested static method's subsets, from training data only.

    Returns ``{method: {k: Subset}}`` for the static methods among ``methods``, each chosen by its
    registry entry's ``select`` (:mod:`irtlib.selection.methods`; nested methods run once, to the largest
    ``k``, and are sliced). ``bquartile_rule``, ``anchor_rule`` and ``anchor_seed`` choose the text's
    or the authors' rule (:class:`irtlib.selection.methods.Training`).
    """
    ks = sorted({int(k) for k in ks})
    training = Training(a=np.asarray(a, float), b=np.asarray(b, float), theta=np.asarray(theta_train, float),
                        values=np.asarray(train_values, float), seed=seed, prior_information=prior_information,
                        anchor_solver=anchor_solver, bquartile_rule=bquartile_rule, anchor_rule=anchor_rule,
                        anchor_seed=anchor_seed)
    return {m: _methods.REGISTRY[m].select(training, ks) for m in _methods.static_ids() if m in methods}


def _blas_limit(n_threads):
    """``threadpool_limits(limits=n_threads)`` over every thread pool (its libraries listed once per loader state)."""
    if n_threads is None:
        return nullcontext()
    try:
        import threadpoolctl  # noqa: F401
    except ImportError:    # pragma: no cover - threadpoolctl comes with the scientific stack
        return nullcontext()
    from irtlib.calibration.blas import thread_limits

    return thread_limits(int(n_threads))


def run_splits(values: ArrayLike, reference: ArrayLike, splits: Sequence[int], *, ks: Sequence[int],
               methods: Sequence[str] = METHODS, n_test: int = 10, seed: Seed = 0,
               engine: str | None = None, anchor_solver: str = "auto", prior_information: float = 0.0,
               blas_threads: int | None = 1, groups: ArrayLike | None = None, n_test_groups: int = 1,
               protocol: _protocols.Protocol | None = None,
               calibration_cache: str | os.PathLike | None = None) -> dict:
    """Some train/test splits of the protocol, with their Fluid tests run together.

    Every split's calibration runs first, in one :func:`calibrate_splits` call; then each split
    selects its static subsets and scores its test models on its own (the MAP-scored ones of all the
    splits together, one MAP call per budget: the same estimates bit for bit); the Fluid Benchmarking
    tests of all the splits' test models then run as one vectorised
    :func:`irtlib.selection.adaptive.run_adaptive` with per-model item parameters (every model's test only
    depends on its own row, so the result is the same as running the splits one by one, bit for
    bit; a test checks it).

    Parameters
    ----------
    values : ndarray, shape (n_models, n_items)
        The variance-filtered responses.
    reference : ndarray, shape (n_models,)
        Full-benchmark safety scores.
    splits : sequence of int
        Split numbers (each selects its own random streams).
    ks, methods, n_test, seed, engine, anchor_solver, prior_information, groups, n_test_groups
        See :func:`run_protocol`.
    blas_threads : int or None
        Threads BLAS may use here (None: leave it alone). Splits run in parallel, and
        multi-threaded BLAS on these small matrices mostly spins on a shared machine.
    protocol : Protocol, optional
        The rules that differ between the paper's text and the authors' code
        (:mod:`irtlib.protocol.presets`; None: ``"paper"``). Its sizes are not read here; its
        ``engine`` is used when ``engine`` is None.
    calibration_cache : path-like, optional
        Where the calibration engine may keep each split's fit (:func:`calibrate_splits`).

    Returns
    -------
    dict
        ``rows``: list of (split, method, k, agreement); ``tests``: each split's test rows;
        ``seconds``: wall time per stage, summed over the splits.
    """
    protocol = _protocols.PAPER if protocol is None else protocol
    with _blas_limit(blas_threads):
        return _run_splits(np.asarray(values, float), np.asarray(reference, float), list(splits), ks=ks,
                           methods=tuple(methods), n_test=n_test, seed=seed,
                           engine=protocol.engine if engine is None else engine,
                           anchor_solver=anchor_solver, prior_information=prior_information,
                           groups=groups, n_test_groups=n_test_groups, protocol=protocol,
                           calibration_cache=calibration_cache)


def _prepare_split(values, reference, split, train, test, a, b, *, ks, methods, seed, anchor_solver,
                   prior_information, clock, protocol):
    """One calibrated split but Fluid and the MAP scores: abilities, static subsets, the other scores, Random."""
    t0 = time.perf_counter()
    # Items no training model saw cannot be calibrated: they leave this split's pool.
    pool = np.flatnonzero(np.isfinite(a))
    a, b = a[pool], b[pool]
    x_train = values[train][:, pool]      # (built as before: the memory layout sets BLAS's summation order)
    ks = [k for k in ks if k <= pool.size]
    theta_train = np.asarray(map_ability(x_train, a, b, row_sums=map_row_sums(),       # C sums: the same bits
                                         standard_errors=False).theta)
    t = time.perf_counter()
    clock["calibration"] += t - t0
    static = static_selections(x_train, a, b, theta_train, ks, methods=methods,
                               seed=_stream(seed, split, _STREAM_ANCHOR), anchor_solver=anchor_solver,
                               prior_information=prior_information, bquartile_rule=protocol.bquartile_rule,
                               anchor_rule=protocol.anchor_rule, anchor_seed=protocol.anchor_seed)
    clock["static selection"] += time.perf_counter() - t

    # Only from here on are the test rows used.
    x_test = values[np.ix_(test, pool)]
    scores = {}
    t = time.perf_counter()
    random_seed = _stream(seed, split, _STREAM_RANDOM)
    shared = _protocols.shared_random_order(pool.size, split) if protocol.random_order == "shared" else None
    drawn = {}                            # selector factory -> the items it drew from the split's stream
    for method in methods:                # random items: every such method shares the split's stream
        entry = _methods.REGISTRY[method]
        if entry.kind == "adaptive" and entry.random_items:
            if shared is not None:        # the authors' one order per split, the same for every model
                # MAP scores wait for every split's order (_score_shared_map): one MAP call per budget
                scores[method] = ([] if entry.scorer == "map" else
                                  [score_subset(x_test, Subset(shared[:k]), how=entry.scorer, a=a, b=b) for k in ks])
                continue
            # Random and Random IRT draw the same items (one selector, one seed, items that do not depend on
            # the estimates): the second replays the first's instead of drawing the same orders again
            given = drawn.get(entry.selector)
            traj = run_adaptive(x_test, a, b, budget=ks[-1], selector=entry.selector() if given is None else
                                _GivenItems(given), estimator=entry.estimator(), seed=random_seed, record=ks)
            drawn.setdefault(entry.selector, traj.items)
            scores[method] = [traj.estimate[:, k - 1] for k in ks]
    t2 = time.perf_counter()
    clock["random"] += t2 - t
    for method in static:
        scores[method] = []
    for k in ks:      # the MAP methods' scores wait for every split's subsets (_score_static_map)
        for method in (m for m in static if _methods.REGISTRY[m].scorer != "map"):
            scores[method].append(score_subset(x_test, static[method][k], how=_methods.REGISTRY[method].scorer))
    clock["static scoring"] += time.perf_counter() - t2
    return {"split": split, "test": test, "pool": pool, "a": a, "b": b, "ks": ks, "scores": scores,
            "reference": reference[test], "theta_start": float(theta_train.mean()), "x_test": x_test,
            "static": static, "shared": shared}


class _GivenItems:
    """A non-adaptive selector that gives every model the items another run of the same stream drew.

    :func:`_prepare_split` runs Random and Random IRT on one random stream of the split: their selector
    (:class:`irtlib.selection.adaptive.RandomSelection`) draws every model's order once from the run's
    seed and never reads the estimates, so both runs give the same items. The second run replays the
    first's items (``items``, shape ``(n_models, budget)``, -1 once a model's items are spent) with its
    own estimator: the same items, so the same estimates bit for bit, without drawing and sorting the
    orders again.
    """

    adaptive = False

    def __init__(self, items: np.ndarray):
        self.items = items

    def begin(self, items, available, random=None):     # noqa: ARG002  (the selector protocol's signature)
        """Start replaying from the first item."""
        return _GivenRun(self.items)


class _GivenRun:
    def __init__(self, items):
        self.items, self.pos = items, 0

    def select_block(self, m):
        """The next ``m`` items of every model, shape (n_models, m)."""
        out = self.items[:, self.pos:self.pos + m]
        self.pos += m
        return out

    def select(self, theta=None, est=None, active=None):     # noqa: ARG002  (the selector protocol's signature)
        """The next item of every model (-1 once spent)."""
        return self.select_block(1)[:, 0]

    def skipped(self, rows, items):
        """Nothing to undo: the order moves on."""


def _score_shared_map(preps, methods):
    """The MAP scores of the random-item methods on each split's shared order, every split and budget at once.

    Under the authors' rule (one random order per split, the same for every test model) a MAP-scored
    random method (Random IRT) scores each split's test models on the first ``k`` items of the split's
    order, from Newton's start at the prior mean, for every budget. All of a task's splits and budgets
    go to one :func:`irtlib.selection.static.score_blocks_map` call (one MAP call per budget), whose
    results equal ``score_subset(x_test, Subset(order[:k]), how="map", a=a, b=b)`` of each split and
    budget bit for bit.
    """
    chosen = [m for m in methods if _methods.REGISTRY[m].kind == "adaptive" and _methods.REGISTRY[m].random_items
              and _methods.REGISTRY[m].scorer == "map"]
    blocks, where = [], []
    for p in preps:
        if p["shared"] is None:
            continue
        for method in chosen:
            for k in p["ks"]:
                blocks.append((p["x_test"], Subset(p["shared"][:k]), p["a"], p["b"], None))
                where.append(p["scores"][method])
    for done, theta in zip(where, score_blocks_map(blocks), strict=True):
        done.append(theta)


def _score_static_map(preps):
    """The MAP-scored static methods' scores of every split, budget by budget (one MAP call per budget and size).

    Each split's test models are scored on each MAP method's subset of each budget, starting Newton
    from that method's estimate at the split's previous budget (the posterior mode does not depend on
    the start; a nearby one saves iterations); all splits and methods of one budget go to one
    :func:`irtlib.selection.static.score_blocks_map` call, whose results equal one call per split and
    subset bit for bit.
    """
    for k in sorted({k for p in preps for k in p["ks"]}):
        blocks, where = [], []
        for p in preps:
            if k not in p["ks"]:
                continue
            for method in (m for m in p["static"] if _methods.REGISTRY[m].scorer == "map"):
                done = p["scores"][method]
                blocks.append((p["x_test"], p["static"][method][k], p["a"], p["b"], done[-1] if done else None))
                where.append(done)
        for done, theta in zip(where, score_blocks_map(blocks), strict=True):
            done.append(theta)


def _run_splits(values, reference, splits, *, ks, methods, n_test, seed, engine, anchor_solver,
                prior_information, groups=None, n_test_groups=1, protocol=_protocols.PAPER, calibration_cache=None):
    clock = dict.fromkeys(("calibration", "static selection", "random", "static scoring", "fluid"), 0.0)
    t0 = time.perf_counter()
    ks = sorted({int(k) for k in ks})
    drawn = [split_models(values.shape[0], n_test, seed, split, groups=groups, n_test_groups=n_test_groups,
                          rule=protocol.split_rule) for split in splits]
    fits = calibrate_splits(values, [train for train, _ in drawn], engine=engine,
                            seed=calibration_seeds(seed, splits, protocol=protocol), cache_dir=calibration_cache)
    clock["calibration"] += time.perf_counter() - t0
    preps = [_prepare_split(values, reference, split, train, test, a, b, ks=ks, methods=methods, seed=seed,
                            anchor_solver=anchor_solver, prior_information=prior_information, clock=clock,
                            protocol=protocol)
             for split, (train, test), (a, b) in zip(splits, drawn, fits, strict=True)]
    t = time.perf_counter()
    _score_shared_map(preps, methods)
    t2 = time.perf_counter()
    clock["random"] += t2 - t
    _score_static_map(preps)
    clock["static scoring"] += time.perf_counter() - t2
    # adaptive methods with chosen (not random) items: one vectorised run over every split's test models
    for method in [m for m in methods if _methods.REGISTRY[m].kind == "adaptive"
                   and not _methods.REGISTRY[m].random_items]:
        entry = _methods.REGISTRY[method]
        t = time.perf_counter()
        # one vectorised run over every split's test models, each with its split's parameters;
        # items outside a split's pool are unavailable to its models
        n_items = values.shape[1]
        rows = sum(p["test"].size for p in preps)
        x = np.full((rows, n_items), np.nan)
        a = np.ones((rows, n_items))
        b = np.zeros((rows, n_items))
        start = np.zeros(rows)
        at = 0
        for p in preps:
            r = slice(at, at + p["test"].size)
            x[r, p["pool"]] = values[np.ix_(p["test"], p["pool"])]
            a[r, p["pool"]], b[r, p["pool"]] = p["a"], p["b"]
            if protocol.fluid_start == "training-mean":
                start[r] = p["theta_start"]
            p["rows"] = r
            at += p["test"].size
        kmax = max(p["ks"][-1] for p in preps)
        estimator = MleEstimator() if protocol.fluid_estimator == "mle" else entry.estimator()
        traj = run_adaptive(x, a, b, budget=kmax, selector=entry.selector(), estimator=estimator,
                            theta0=start if protocol.fluid_start == "training-mean" else 0.0)
        for p in preps:
            p["scores"][method] = [traj.estimate[p["rows"], k - 1] for k in p["ks"]]
        clock["fluid"] += time.perf_counter() - t
    out_rows = []
    for p in preps:
        for method in _methods.ids():
            if method in p["scores"]:
                rho = spearman(np.vstack(p["scores"][method]), p["reference"])
                out_rows.extend((p["split"], method, k, float(r)) for k, r in zip(p["ks"], rho, strict=True))
    clock["total"] = time.perf_counter() - t0
    return {"rows": out_rows, "tests": {p["split"]: p["test"] for p in preps}, "seconds": clock}


def _progress_wanted(progress) -> bool:
    if progress is None:
        try:
            return sys.stderr.isatty()
        except (AttributeError, ValueError):
            return False
    return bool(progress)


def protocol_data(matrix: ResponseMatrix, *, variance_threshold: float | None, reference: str,
                  groups: ArrayLike | None, n_test: int, seed: Seed, n_test_groups: int,
                  variance_rule: str = "at-most", split_rule: str = "stream"
                  ) -> tuple[ResponseMatrix, np.ndarray, np.ndarray | None]:
    """What every split of the protocol starts from: the filtered matrix and the reference scores.

    Parameters
    ----------
    matrix : ResponseMatrix, shape (n_models, n_items)
    variance_threshold : float or None
        The paper's variance filter (0.01); None keeps every item.
    reference : {"full", "filtered"}
        Whose safety score agreement is measured against (the paper: the full benchmark).
    groups : array_like, shape (n_models,), optional
        Group labels; test models are drawn as whole groups (see :func:`split_models`).
    n_test, seed, n_test_groups
        Checked against the matrix by drawing split 0.
    variance_rule : {"at-most", "below"}
        Items with ``p (1 - p)`` at most the threshold are dropped (the paper's text), or only
        those below it (the authors' code keeps ``>= 0.01``).
    split_rule : {"stream", "authors"}
        See :func:`split_models`.

    Returns
    -------
    filtered : ResponseMatrix
    reference_scores : ndarray, shape (n_models,)
    groups : ndarray or None
    """
    if variance_threshold is None:
        filtered = matrix
    elif variance_rule == "below":
        keep = (matrix.item_variance() >= variance_threshold).to_numpy()
        if not keep.any():
            raise InputError(f"{matrix.source}: no item has variance of at least {variance_threshold}")
        filtered = matrix.subset(items=[i for i, k in zip(matrix.items, keep, strict=True) if k])
    elif variance_rule == "at-most":
        filtered = matrix.filter_variance(variance_threshold)
    else:
        raise InputError(f"variance_rule must be 'at-most' or 'below', got {variance_rule!r}")
    ref = (matrix if reference == "full" else filtered).safety_scores().to_numpy()
    if groups is not None:
        groups = np.asarray(groups)
        if groups.shape != (matrix.shape[0],):
            raise InputError(f"groups must have one label per model ({matrix.shape[0]}), got shape {groups.shape}")
    split_models(filtered.shape[0], n_test, seed, 0, groups=groups, n_test_groups=n_test_groups,
                 rule=split_rule)  # validates
    return filtered, ref, groups


_FROM_PROTOCOL = _protocols.FROM_PROTOCOL     # variance_threshold's default: the protocol's


def run_protocol(matrix: ResponseMatrix, *, methods: Sequence[str] | None = None, ks: Sequence[int] | None = None,
                 n_splits: int | None = None, n_test: int | None = None,
                 seed: int | None = None, engine: str | None = None, n_jobs: int = 1,
                 variance_threshold: float | None | str = _FROM_PROTOCOL,
                 reference: str | None = None, anchor_solver: str = "auto", prior_information: float = 0.0,
                 progress: bool | None = None, blas_threads: int | None = 1,
                 split_batch: int = 10, groups: ArrayLike | None = None, n_test_groups: int = 1,
                 protocol: str | _protocols.Protocol | None = None, benchmark: str | None = None,
                 calibration_cache: str | os.PathLike | None = None) -> pd.DataFrame:
    """The paper's agreement protocol: every method, every budget, every split.

    ``protocol`` chooses the protocol as the paper's text describes it (``"paper"``, the default:
    exactly what this function has always done) or as the authors' released code runs it
    (``"authors"``, which needs ``benchmark``: their whole pipeline, calibration included); see
    :mod:`irtlib.protocol.presets`. The protocol supplies the defaults of ``n_splits``, ``n_test``,
    ``seed``, ``ks``, ``variance_threshold``, ``reference`` and ``engine``; any of them given
    explicitly overrides it.

    Parameters
    ----------
    matrix : ResponseMatrix
        The benchmark's binary responses (models x items).
    methods : sequence of str, optional
        Identifiers from :data:`METHODS`; None runs all eight.
    ks : sequence of int, optional
        Budgets; default :func:`budget_grid` of the number of items after the variance filter.
    n_splits, n_test : int, optional
        Splits, and test models held out in each (default the protocol's: ``"paper"`` 100 and 10;
        ``"authors"`` per benchmark, e.g. 100 and 10 for SimpleSafetyTests, 70 and 6 for WMDP).
    seed : int, optional
        Seeds everything (splits, random orders, anchor-point initialisation). Default the
        protocol's: 0 for ``"paper"``; 42 for ``"authors"``, where it enters the split rule only
        (their random orders use the split index, FasterPAM 42 and calibration 0).
    engine : str, optional
        Per-split calibration engine; default the protocol's (``"paper"``: ``"map"``, the posterior
        mode of the text's model, about a second on the largest benchmark; ``"authors"``:
        ``"pyirt-authors"``, the authors' hierarchical py-irt fit, all splits batched). Any
        :func:`irtlib.fit_2pl` engine (``"pyirt"``: py-irt with the text's priors, tens of seconds
        per split) or a registered batched engine (:func:`register_calibration_engine`).
    n_jobs : int
        Splits run in parallel through joblib (``-1``: all cores). Results are identical for any
        value. Under ``joblib.parallel_config(backend="dask")`` the splits run on a Dask cluster.
    variance_threshold : float or None, optional
        The paper's filter (items with ``p (1 - p) <= 0.01`` dropped before anything else; under
        ``"authors"`` only those below 0.01); None skips it. Default the protocol's (0.01).
    reference : {"full", "filtered"}, optional
        Which safety score the agreement is measured against (see the module notes); default
        the protocol's (``"paper"``: full, ``"authors"``: filtered).
    anchor_solver : {"auto", "fasterpam", "alternate"}
        K-medoids solver for anchor points (:func:`irtlib.selection.static.anchor_points_path`).
    prior_information : float
        Marginal Fisher's SE: 0 is the paper's ML SE (:func:`irtlib.selection.static.marginal_fisher`).
    progress : bool or None
        A tqdm progress bar over splits; None shows it only when stderr is a terminal.
    blas_threads : int or None
        BLAS threads inside each task (see :func:`run_splits`).
    split_batch : int
        Splits per joblib task; their Fluid tests run as one vectorised batch, which is what
        makes the adaptive loop cheap per model (see :func:`run_splits`). Results do not depend
        on it.
    groups : array_like, shape (n_models,), optional
        A group label per model (e.g. the base model of attacked configurations). None: the
        paper's protocol. Given: each split holds out ``n_test_groups`` whole groups, draws its
        ``n_test`` test models from their members and leaves every member out of training
        (:func:`split_models`).
    n_test_groups : int
        Groups held out per split (only with ``groups``).
    protocol : {"paper", "authors"} or Protocol, optional
        The protocol's rules (:mod:`irtlib.protocol.presets`); None is ``"paper"``.
    benchmark : str, optional
        The benchmark id (``"simplesafetytests"``, ...) whose sizes ``"authors"`` uses.
    calibration_cache : path-like, optional
        A directory where the calibration engine keeps each split's fit by content
        (:func:`calibrate_splits`; the authors' engine supports it). Results do not depend on it.

    Returns
    -------
    DataFrame
        One row per split, method and k, with columns ``split``, ``method``, ``k``,
        ``agreement`` (Spearman rho; NaN where undefined). ``attrs`` records the settings,
        ``n_items`` (before the filter), ``n_items_filtered``, ``n_models``, ``ks``, the
        per-stage seconds summed over splits, ``protocol`` (its name), ``protocol_settings``
        (every rule, :meth:`Protocol.settings`) and the summaries' ``nan_policy`` and ``band``,
        which :func:`agreement_curves` follows.
    """
    if not isinstance(matrix, ResponseMatrix):
        raise InputTypeError(f"run_protocol expects a ResponseMatrix, got {type(matrix).__name__}")
    proto, settled = _protocols.settle(protocol, benchmark=benchmark, n_splits=n_splits, n_test=n_test, seed=seed,
                                       reference=reference, variance_threshold=variance_threshold)
    n_splits, n_test, seed = settled["n_splits"], settled["n_test"], settled["seed"]
    reference, variance_threshold = settled["reference"], settled["variance_threshold"]
    engine = proto.engine if engine is None else check_engine(engine)
    if int(n_test) < 2:
        raise InputError(f"n_test must be at least 2, got {n_test}: agreement is Spearman's rho over the test models "
                         "of a split, undefined for one")
    methods = _methods.check_methods(methods)
    filtered, ref, groups = protocol_data(matrix, variance_threshold=variance_threshold, reference=reference,
                                          groups=groups, n_test=n_test, seed=seed, n_test_groups=n_test_groups,
                                          variance_rule=proto.variance_rule, split_rule=proto.split_rule)
    n_items = filtered.shape[1]
    if ks is None:
        ks = (_protocols.authors_budget_grid(n_items, max_budget=proto.max_budget) if proto.budget_rule == "authors"
              else budget_grid(n_items))
    else:
        ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1 or ks[-1] > n_items:
        raise InputError(f"budgets must lie between 1 and the {n_items} items left after the variance filter")

    from joblib import Parallel, delayed

    values = np.ascontiguousarray(filtered.values)
    kwargs = dict(ks=ks, methods=methods, n_test=n_test, seed=seed, engine=engine, anchor_solver=anchor_solver,
                  prior_information=prior_information, blas_threads=blas_threads, protocol=proto,
                  calibration_cache=calibration_cache)
    if groups is not None:
        kwargs.update(groups=groups, n_test_groups=int(n_test_groups))
    batch = max(1, int(split_batch))
    chunks = [list(range(i, min(i + batch, int(n_splits)))) for i in range(0, int(n_splits), batch)]
    tasks = (delayed(run_splits)(values, ref, chunk, **kwargs) for chunk in chunks)
    show = _progress_wanted(progress)
    if show:
        from tqdm.auto import tqdm

        bar = tqdm(total=int(n_splits), desc=f"agreement ({matrix.source})", unit="split", file=sys.stderr)
    else:
        bar = None
    rows, seconds = [], {}
    try:
        for out in Parallel(n_jobs=n_jobs, return_as="generator")(tasks):
            rows.extend(out["rows"])
            for stage, s in out["seconds"].items():
                seconds[stage] = seconds.get(stage, 0.0) + s
            if bar is not None:
                bar.update(len(out["tests"]))
    finally:
        if bar is not None:
            bar.close()
    order = {m: i for i, m in enumerate(_methods.ids())}
    df = pd.DataFrame(rows, columns=["split", "method", "k", "agreement"])
    df = df.sort_values(["split", "method", "k"], key=lambda s: s.map(order) if s.name == "method" else s,
                        kind="stable").reset_index(drop=True)
    df.attrs.update({
        "source": matrix.source, "n_models": int(matrix.shape[0]), "n_items": int(matrix.shape[1]),
        "n_items_filtered": int(n_items), "ks": list(ks), "methods": list(methods), "n_splits": int(n_splits),
        "n_test": int(n_test), "seed": seed, "engine": engine, "variance_threshold": variance_threshold,
        "reference": reference, "anchor_solver": anchor_solver, "prior_information": prior_information,
        "split_batch": batch, "seconds": seconds,
        "protocol": proto.name, "protocol_settings": proto.settings(), "nan_policy": proto.nan_policy,
        "band": proto.band,
    })
    if groups is not None:
        df.attrs.update({"grouped": True, "n_groups": int(np.unique(groups).size),
                         "n_test_groups": int(n_test_groups)})
    return df


def run_agreement(matrix: ResponseMatrix, *, methods: Sequence[str], ks: Sequence[int] | None = None,
                  n_splits: int = 100, n_test: int = 10, seed: Seed = 0, engine: str = "map", n_jobs: int = 1,
                  variance_threshold: float | None = 0.01, progress: bool | None = False) -> pd.DataFrame:
    """Run :func:`run_protocol` on a user's (unfiltered) response matrix, as ``irtlib agreement`` does.

    The protocol applies the variance filter itself and measures agreement against the safety
    score on all items (the paper's R). ``ks`` defaults to the protocol's log-spaced budget grid.
    """
    methods = _methods.check_methods(list(methods))
    if matrix.shape[0] < 2:
        raise InputError(f"{matrix.source}: only {matrix.shape[0]} model: the agreement protocol needs at least "
                         "two models (and --n-test of them held out)")
    if n_test >= matrix.shape[0] - 1:
        raise InputError(f"{matrix.source}: --n-test {n_test} leaves fewer than 2 of the {matrix.shape[0]} models "
                         "for calibration")
    return run_protocol(matrix, methods=list(methods), ks=ks, n_splits=n_splits, n_test=n_test, seed=seed,
                                  engine=engine, n_jobs=n_jobs, variance_threshold=variance_threshold,
                                  progress=progress)


# ---------------------------------------------------------------------------- summaries
def _rule(results: pd.DataFrame, name: str, value, default: str) -> str:
    """A summary rule: the value given, else the one the results record (``attrs``), else the default."""
    return value if value is not None else results.attrs.get(name, default)


def _nan_fill(values: pd.Series, nan_policy: str) -> pd.Series:
    if nan_policy == "zero":
        return values.fillna(0.0)
    if nan_policy == "omit":
        return values
    raise InputError(f"nan_policy must be 'zero' or 'omit', got {nan_policy!r}")


def agreement_curves(results: pd.DataFrame, *, nan_policy: str | None = None, level: float = 0.95,
                     band: str | None = None) -> pd.DataFrame:
    """Mean agreement and its spread over splits, per method and k (the curves of Figure 4).

    Parameters
    ----------
    results : DataFrame
        From :func:`run_protocol` (several benchmarks may be stacked with a ``benchmark`` column).
    nan_policy : {"zero", "omit"}, optional
        Undefined agreements (constant scores) count as 0 or are left out (the authors' nanmean).
        Default: the rule ``results.attrs`` records (its protocol's), else ``"zero"``.
    level : float
        Coverage of the interval over splits (empirical quantiles).
    band : {"sd", "se"}, optional
        The band a figure shades, ``band_lo``-``band_hi``: mean +- 1 SD over splits (the paper's
        text) or +- 1 standard error ``sd / sqrt(valid splits)`` (the authors' code: nanstd with
        ddof 1 over the splits with a defined rho). Default: the rule ``results.attrs`` records,
        else ``"sd"``. The rule used is in the result's ``attrs["band"]``, for the figure's label.

    Returns
    -------
    DataFrame with columns [benchmark,] method, k, mean, sd, lo, hi, ci_lo, ci_hi, n_splits, n_undefined,
    se, band_lo, band_hi.
        ``lo``-``hi`` is the spread of single splits (the ``level`` quantiles of the per-split
        agreements); ``ci_lo``-``ci_hi`` is the ``level`` confidence interval of the mean over
        splits (Student's t, ``mean +- t * sd / sqrt(n_splits)``, cut to [-1, 1] as every band
        here), the interval within which a rerun's mean is expected. ``n_undefined`` counts the
        splits whose rho was undefined (constant scores among the test models), counted as 0
        under ``nan_policy="zero"``.
        ``se`` is ``sd / sqrt(n)`` with ``n`` the splits averaged (all of them under ``"zero"``,
        the defined ones under ``"omit"``).
    """
    nan_policy = _rule(results, "nan_policy", nan_policy, "zero")
    band = _rule(results, "band", band, "sd")
    if band not in ("sd", "se"):
        raise InputError(f"band must be 'sd' or 'se', got {band!r}")
    keys = (["benchmark"] if "benchmark" in results.columns else []) + ["method", "k"]
    # a plain frame (without the results' attrs, which pandas would copy into every group)
    data = pd.DataFrame({key: results[key].to_numpy() for key in keys})
    data["value"] = _nan_fill(results["agreement"], nan_policy).to_numpy()
    data["undefined"] = results["agreement"].isna().to_numpy()
    q = (1.0 - level) / 2.0
    g = data.groupby(keys, sort=False)
    out = g["value"].agg(mean="mean", sd="std")
    codes = g.ngroup().to_numpy()
    out["lo"], out["hi"] = _group_percentiles(data["value"].to_numpy(float), codes, len(out),
                                              np.array([q, 1.0 - q]) * 100.0)
    out["n"], out["n_splits"] = g["value"].count(), g.size()
    return _finish_curves(out, codes, data["undefined"].to_numpy(), level=level, band=band, nan_policy=nan_policy)


def _finish_curves(out: pd.DataFrame, codes: np.ndarray, undefined: np.ndarray, *, level: float, band: str,
                   nan_policy: str) -> pd.DataFrame:
    """The curves from each group's mean, sd, lo, hi, n and n_splits (``out``, indexed by group).

    ``codes`` shape (n,): each result row's group (``ngroup``, the order of ``out``'s rows); ``undefined`` shape
    (n,): whether its agreement was undefined. The intervals and bands are the columns' own arithmetic on their
    arrays, cut to [-1, 1] as ``Series.clip`` cuts them (NaN kept); the undefined splits counted per group.
    """
    mean, sd, n = out["mean"].to_numpy(), out["sd"].to_numpy(), out["n"].to_numpy()
    half = mean_interval_halfwidth(sd, n, level=level)
    # a correlation lies in [-1, 1], and so does every interval or band of its mean
    out.insert(out.columns.get_loc("n"), "ci_lo", _clip_unit(mean - half))
    out.insert(out.columns.get_loc("n"), "ci_hi", _clip_unit(mean + half))
    out["n_undefined"] = np.bincount(codes[undefined & (codes >= 0)], minlength=len(out)).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        se = sd / np.sqrt(n.astype(float))
    out["se"] = se
    width = sd if band == "sd" else se
    out["band_lo"], out["band_hi"] = _clip_unit(mean - width), _clip_unit(mean + width)
    curves = out.drop(columns="n").reset_index()
    curves.attrs.update({"nan_policy": nan_policy, "band": band,
                         "band_label": "mean +- 1 SD over splits" if band == "sd"
                         else "mean +- 1 standard error over valid splits"})
    return curves


def _clip_unit(values: np.ndarray) -> np.ndarray:
    """``Series(values).clip(-1.0, 1.0)``'s values: below -1 set to -1, above 1 to 1, the rest (NaN too) kept."""
    return np.where(values < -1.0, -1.0, np.where(values > 1.0, 1.0, values))


def _group_percentiles(values: np.ndarray, codes: np.ndarray, n_groups: int,
                       percents: np.ndarray) -> tuple[np.ndarray, ...]:
    """Percentiles of each group's non-missing values, as ``Series.quantile`` computes them.

    ``values`` shape (n,), ``codes`` shape (n,) the group of each value (0 .. n_groups - 1),
    ``percents`` shape (p,). The groups with the same number of non-NaN values are stacked, each row
    holding one group's values in their order in ``values``, and take one ``np.percentile`` call along
    the rows: per row the same selection and interpolation as ``np.percentile`` of that group alone
    (pandas' own path, so the numbers are pandas' to the bit; :func:`_group_percentiles_loop`, one call
    per group, is the reference its tests compare with); NaN for a group without any. A protocol's
    curves have one group per (benchmark, method, k), nearly all with as many values as splits, so a
    few calls replace one per group. Returns p arrays of shape (n_groups,).
    """
    order = np.argsort(codes, kind="stable")
    kept = order[~np.isnan(values[order]) & (codes[order] >= 0)]   # each group's non-NaN values, in their order
    counts = np.bincount(codes[kept], minlength=n_groups)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    packed = values[kept]
    out = np.full((n_groups, percents.size), np.nan)
    for size in np.unique(counts[counts > 0]):
        groups = np.flatnonzero(counts == size)
        rows = packed[starts[groups][:, None] + np.arange(size)]
        out[groups] = np.percentile(rows, percents, axis=1, method="linear").T
    return tuple(out.T)


def _group_percentiles_loop(values: np.ndarray, codes: np.ndarray, n_groups: int,
                            percents: np.ndarray) -> tuple[np.ndarray, ...]:
    """:func:`_group_percentiles` with one ``np.percentile`` call per group (the reference of its tests)."""
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(n_groups + 1))
    out = np.full((n_groups, percents.size), np.nan)
    for group in range(n_groups):
        v = values[order[bounds[group]:bounds[group + 1]]]
        v = v[~np.isnan(v)]
        if v.size:
            out[group] = np.percentile(v, percents, method="linear")
    return tuple(out.T)


def mean_interval_halfwidth(sd: ArrayLike, n: ArrayLike, *, level: float = 0.95) -> np.ndarray:
    """Half-width of the Student-t confidence interval of a mean: ``t_{(1+level)/2, n-1} sd / sqrt(n)``.

    Parameters
    ----------
    sd, n : array_like, same shape
        Sample standard deviations (``ddof=1``) and sample sizes. ``n < 2`` gives NaN.
    level : float
        Coverage in (0, 1).
    """
    sd, n = np.asarray(sd, dtype=float), np.asarray(n, dtype=float)
    if not 0.0 < level < 1.0:
        raise InputError(f"level must lie in (0, 1), got {level!r}")
    with np.errstate(invalid="ignore", divide="ignore"):
        # Student's t quantile as scipy.stats.t.ppf computes it (stdtrit where df > 0, NaN elsewhere; the same
        # values, tests/protocol), from scipy.special, which irtlib imports anyway: importing scipy.stats takes
        # about half a CPU second in a fresh process (irtlib report's, a worker's)
        from scipy import special

        df = np.where(n >= 2, n - 1, np.nan)
        t = np.where(df > 0, special.stdtrit(df, 0.5 + level / 2.0), np.nan)
        return t * sd / np.sqrt(n)


def paired_difference(results: pd.DataFrame, *, k: int, method: str, baseline: str, nan_policy: str | None = None,
                      level: float = 0.95) -> dict:
    """Split-by-split difference ``method - baseline`` in agreement at one budget.

    Both methods are scored on the same test models in each split, so their difference is paired;
    its confidence interval is much narrower than the two means' intervals suggest.

    Parameters
    ----------
    results : DataFrame
        One benchmark's :func:`run_protocol` output (columns split, method, k, agreement).
    k : int
        A swept budget.
    method, baseline : str
        Method identifiers, e.g. ``"fluid"`` and ``"random"``.

    Returns
    -------
    dict
        ``mean``, ``ci_lo``, ``ci_hi`` (Student-t interval of the mean difference at ``level``),
        ``share_ahead`` (share of splits in which ``method`` is strictly ahead) and ``n_splits``.
    """
    nan_policy = _rule(results, "nan_policy", nan_policy, "zero")
    at = results[results["k"] == int(k)]
    wide = at.pivot_table(index="split", columns="method", values="agreement", dropna=False)
    for m in (method, baseline):
        if m not in wide.columns:
            raise InputError(f"method {m!r} has no results at k = {k}")
    d = (_nan_fill(wide[method], nan_policy) - _nan_fill(wide[baseline], nan_policy)).dropna().to_numpy()
    if d.size == 0:
        raise InputError(f"no split has both {method!r} and {baseline!r} at k = {k}")
    mean = float(d.mean())
    half = float(mean_interval_halfwidth(d.std(ddof=1) if d.size > 1 else np.nan, d.size, level=level))
    return {"mean": mean, "ci_lo": mean - half, "ci_hi": mean + half, "share_ahead": float((d > 0).mean()),
            "n_splits": int(d.size)}


def agreement_at(results: pd.DataFrame, budgets: int | Mapping[str, int], *, methods: Sequence[str] | None = None,
                 nan_policy: str | None = None,
                 level: float = 0.95, curves: pd.DataFrame | None = None) -> pd.DataFrame:
    """Mean agreement of each method at given budgets, with its confidence interval.

    Used to set our agreement beside the paper's at the paper's own ``k`` (Table 2), rather than
    at our own crossing point.

    Parameters
    ----------
    results : DataFrame
        From :func:`run_protocol`; several benchmarks stacked with a ``benchmark`` column.
    budgets : int or mapping
        The budget ``k`` (one benchmark), or benchmark -> ``k``. A ``k`` that was not swept raises
        ``ValueError`` naming the benchmark and the swept budgets nearest to it.
    methods : sequence of str, optional
        Default: every method in ``results``.
    curves : DataFrame, optional
        ``agreement_curves(results, nan_policy=nan_policy, level=level)`` when the caller has it already
        (several budgets read off the same results); computed here when not given.

    Returns
    -------
    DataFrame, one row per (benchmark,) method
        Columns of :func:`agreement_curves` at the requested ``k``.
    """
    if curves is None:
        curves = agreement_curves(results, nan_policy=nan_policy, level=level)
    if "benchmark" not in curves.columns:
        curves = curves.assign(benchmark=None)
        budgets = {None: budgets}
    elif not isinstance(budgets, Mapping):
        raise InputError("budgets must map benchmark -> k when results hold a 'benchmark' column")
    frames = []
    for bench, k in budgets.items():
        curve = curves[curves["benchmark"] == bench] if bench is not None else curves
        if curve.empty:
            raise InputError(f"no results for benchmark {bench!r}")
        at = curve[curve["k"] == int(k)]
        if at.empty:
            swept = np.sort(curve["k"].unique())
            near = swept[np.argsort(np.abs(swept - int(k)))[:2]]
            raise InputError(f"k = {k} was not swept for benchmark {bench!r} (nearest swept: {sorted(near.tolist())})")
        if methods is not None:
            at = at[at["method"].isin(list(methods))]
        frames.append(at)
    out = pd.concat(frames, ignore_index=True)
    return out.drop(columns="benchmark") if list(budgets) == [None] else out


def _crossings(curve: pd.DataFrame, threshold: float, baseline: str):
    """(k_left, reached, k_right, right_status) for one benchmark's mean curves."""
    wide = curve.pivot(index="k", columns="method", values="mean").sort_index()
    ks = wide.index.to_numpy()
    fluid = wide["fluid"].to_numpy()
    hit = np.flatnonzero(fluid >= threshold)
    if hit.size:
        k_left, reached = int(ks[hit[0]]), True
    else:
        k_left, reached = int(ks[-1]), False
    k_right, status = None, "no random baseline"
    if baseline in wide.columns:
        lead = fluid - wide[baseline].to_numpy()
        first = np.flatnonzero(lead > 0)
        if not first.size:
            status = "never led"
        else:
            caught = np.flatnonzero(lead[first[0]:] <= 0)
            if caught.size:
                k_right, status = int(ks[first[0] + caught[0] - 1]), "caught up"
            else:
                k_right, status = int(ks[-1]), "not caught up within the sweep"
    return k_left, reached, k_right, status


def summarise_table2(results: pd.DataFrame, n_items: int | Mapping[str, int] | None = None, *,
                     threshold: float = 0.90, nan_policy: str | None = None,
                     level: float = 0.95, baseline: str = "random") -> pd.DataFrame:
    """Table 2 from protocol results, with the spread over splits the paper does not report.

    Two budgets per benchmark, read off the mean agreement curves (:func:`agreement_curves`):

    - ``left``: the smallest swept ``k`` at which Fluid's mean agreement first reaches
      ``threshold`` (0.90). If it never does, the largest swept ``k`` with ``status`` "not
      reached" (the paper's "> 3,000" for SafetyBench).
    - ``right``: "the largest swept k before random catches up with Fluid": starting from the
      first ``k`` where Fluid's mean is above Random's, the last ``k`` before the first budget at
      which Random's mean is at least Fluid's (``status`` "caught up"); the largest swept ``k`` if
      Random never catches up ("not caught up within the sweep"); missing if Fluid never leads.
      Budgets are grid points, so, like the paper's, these are conservative: the true crossing
      lies between grid points.

    Parameters
    ----------
    results : DataFrame
        From :func:`run_protocol`, or several stacked with a ``benchmark`` column.
    n_items : int or dict, optional
        ``N`` for ``k / N`` and the saving ``1 - k / N`` (the full benchmark, before the variance
        filter, as in the paper's Table 2); default ``results.attrs["n_items"]``. A dict maps
        benchmark to ``N``.
    threshold, nan_policy, level, baseline
        Target agreement; undefined-agreement policy (default: the results' protocol's, see
        :func:`agreement_curves`) and interval level; the method Random means ("random").

    Returns
    -------
    DataFrame, one row per (benchmark,) column and method
        Columns: [benchmark,] ``column`` ("left"/"right"), ``k``, ``k_over_n``, ``saving``,
        ``status``, ``censored`` (True where the crossing lies beyond the sweep: the true budget
        is larger than ``k``, "> k"), ``method``, ``mean``, ``sd``, ``lo``, ``hi`` (the ``level``
        spread of single splits), ``ci_lo``, ``ci_hi`` (the ``level`` confidence interval of the
        mean), ``n_splits``, ``n_undefined``.
    """
    curves = agreement_curves(results, nan_policy=nan_policy, level=level)
    if "fluid" not in set(curves["method"]):
        raise InputError("Table 2 needs the 'fluid' method in the results")
    groups = curves.groupby("benchmark", sort=False) if "benchmark" in curves.columns else [(None, curves)]
    out = []
    for bench, curve in groups:
        if isinstance(n_items, dict):
            n = n_items.get(bench)
        else:
            n = n_items if n_items is not None else results.attrs.get("n_items")
        k_left, reached, k_right, status = _crossings(curve, threshold, baseline)
        for column, k, st in (("left", k_left, "reached" if reached else "not reached"), ("right", k_right, status)):
            if k is None:
                continue
            at = curve[curve["k"] == k]
            for _, r in at.iterrows():
                row = {"column": column, "k": k, "k_over_n": k / n if n else np.nan,
                       "saving": 1 - k / n if n else np.nan, "status": st,
                       "censored": st in ("not reached", "not caught up within the sweep")}
                row.update({c: r[c] for c in ("method", "mean", "sd", "lo", "hi", "ci_lo", "ci_hi", "n_splits",
                                               "n_undefined")})
                if bench is not None:
                    row = {"benchmark": bench, **row}
                out.append(row)
    return pd.DataFrame(out)
