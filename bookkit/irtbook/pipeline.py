"""The steps every chapter repeats, with results cached between chapters.

A chapter asks for a benchmark's matrices or its calibration by name and settings; the first
chapter to ask computes it, the others read it from the cache (:mod:`irtbook.cache`), keyed by the
data's checksum, the settings and the library's source. Pass ``cache_dir=None`` to always
recompute.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from irtlib import datasets
from irtlib.datasets import paper
from .cache import array_checksum, cache_path, cached
from irtlib.calibration.joint_map import Calibration, fit_2pl
from irtlib.core.responses import ResponseMatrix
from irtlib.datasets.sources import DataSource, source_setting
from irtlib.protocol.presets import Protocol

__all__ = ["Benchmark", "load_benchmark", "data_files", "calibrate_benchmark", "calibrate_matrix", "split_cache",
           "chapter_epochs", "chapter_engine", "chapter_protocol", "CHAPTER_ENGINES", "QUICK_PYIRT_EPOCHS",
           "QUICK_AUTHORS_EPOCHS", "paper_budgets", "protocol_budgets", "default_budgets", "kept_items",
           "book_protocol", "protocol_sizes", "protocol_benchmark", "method_rows", "split_rows", "PREFIX_METHODS",
           "harmbench_variants", "split_batch", "anchor_path_reason"]


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

    def content_key(self) -> tuple[str, str, str]:
        """What a cached result computed on this benchmark depends on (:func:`irtbook.cache.content_key`)."""
        return (self.name, self.rule, self.checksum)

    @property
    def checksum(self) -> str:
        """Identity of the data for cache keys (the values, and which source they came from).

        Computed once per benchmark when both matrices' values are read-only (:class:`ResponseMatrix` makes
        them so, unpickled ones included) and kept beside it (the benchmark is frozen): every cache key of a
        page then reuses the first SHA-256 instead of hashing both matrices again. Values that can be written
        are hashed at every call, as before.
        """
        kept = self.__dict__.get("_checksum")
        if kept is not None:
            return kept
        ident = () if self.data is None else (np.array([self.data.kind, self.data.label]),)
        value = array_checksum(self.full.values, self.filtered.values, *ident)
        if not (self.full.values.flags.writeable or self.filtered.values.flags.writeable):
            self.__dict__["_checksum"] = value
        return value


def load_benchmark(name: str, *, rule: str = "strict", threshold: float = 0.01, data_dir=None,
                   source: str | None = None, cache_dir=None) -> Benchmark:
    """Load a benchmark, binarize it with ``rule`` and apply the variance filter (paper, section "Binarization").

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
    cache_dir : path-like, optional
        Keep the loaded benchmark there (the chapters' ``CACHE_DIR``), so that the next chapter reads it
        instead of parsing and binarizing the files again: keyed by the options above as given, the data they
        resolve to (:class:`irtlib.datasets.sources.DataSource`) and the SHA-256 of every file those data are
        read from (:func:`data_files`), so a changed file loads again. None (or data of another kind): always load.
    """
    data = datasets.resolve(name, source=source, data_dir=data_dir)
    files = data_files(data) if cache_dir is not None else None
    if files is not None:
        import hashlib

        digests = tuple((str(f), hashlib.sha256(f.read_bytes()).hexdigest()) for f in files)
        key = ("load_benchmark", name, rule, threshold, None if data_dir is None else str(data_dir), source,
               source_setting(source), data, digests)
        return cached(lambda: load_benchmark(name, rule=rule, threshold=threshold, data_dir=data_dir, source=source),
                      key=key, cache_dir=cache_dir)
    if data.binary:
        rule = "binary"
    elif data.kind == "simulated" and datasets.load_items(
            name, data_dir=data_dir, source="simulated").columns.intersection(["answer", "safe_option"]).size:
        rule = "strict"
    full = datasets.load(name, rule=None if rule == "binary" else rule, data_dir=data_dir, source=source)
    shown_name = (datasets.display_name("airbench2024-real") if data.kind == "real-subset"
                  else datasets.display_name(name, source="simulated" if data.kind == "simulated" else source))
    return Benchmark(name, shown_name, full, full.filter_variance(threshold), rule, data)


def data_files(data: DataSource) -> list[Path] | None:
    """Every file :func:`load_benchmark` reads for ``data`` (sorted), or None for data it does not know.

    The paper's data: the authors' file and the checksum recorded beside it at download, if any; the real
    AIR-Bench subset: every file of its directory; the simulated release: its manifest and every file of
    the benchmark's directory.
    """
    from irtlib.datasets.release import MANIFEST
    from irtlib.io.checksums import RECORD_SUFFIX

    path = data.path
    if path is None:
        return None
    if data.kind == "paper":
        found = [path, path.with_name(path.name + RECORD_SUFFIX)]
    elif data.kind == "real-subset":
        found = list(path.iterdir())
    elif data.kind == "simulated":
        found = [path / MANIFEST, *(path / data.benchmark).rglob("*")]
    else:
        return None
    return sorted(f for f in found if f.is_file())


def calibrate_benchmark(bench: Benchmark, *, engine: str = "pyirt-authors", seed: int = 0, epochs: int = 1000,
                        lr: float = 0.1, cache_dir=None) -> Calibration:
    """Fit the 2PL to a benchmark's filtered matrix, every model at once (cached).

    Parameters
    ----------
    bench : Benchmark
    engine : {"pyirt-authors", "pyirt", "map"}
        ``"pyirt-authors"`` (the default): the authors' calibration, py-irt's hierarchical priors
        with learning-rate decay and the best epoch, run by the batched fit
        (:func:`irtlib.calibration.pyirt_batch.fit_hierarchical_batch`, the same parameters as
        py-irt's to float rounding); ``"pyirt"``: py-irt with the text's fixed priors and a constant
        learning rate, the last epoch's parameters, run by the same batched fit (``priors="paper"``:
        the parameters of ``irtlib.fit_2pl(engine="pyirt")``, which runs py-irt itself, to float
        rounding); ``"map"``: the posterior mode of the text's model (:func:`irtlib.fit_2pl`).
    seed, epochs, lr
        As in :func:`irtlib.fit_2pl`; the MAP engine ignores them.
    cache_dir : path, optional
        Where to keep fits between chapters.
    """
    key = benchmark_fit_key(bench, engine=engine, seed=seed, epochs=epochs, lr=lr)
    return cached(lambda: calibrate_matrix(bench.filtered, engine=engine, seed=seed, epochs=epochs, lr=lr),
                  key=key, cache_dir=cache_dir)


def benchmark_fit_key(bench: Benchmark, *, engine: str, seed: int, epochs: int, lr: float) -> tuple:
    """The cache key of :func:`calibrate_benchmark`'s fit (the MAP engine ignores seed, epochs and lr)."""
    settings = (engine,) if engine == "map" else (engine, seed, epochs, lr)
    return ("calibrate_benchmark", bench.name, bench.rule, bench.checksum, settings)


def calibrate_matrix(matrix: ResponseMatrix, *, engine: str = "pyirt-authors", seed: int = 0, epochs: int = 1000,
                     lr: float = 0.1) -> Calibration:
    """Fit the 2PL to any matrix (a subset of items, a simulated matrix) with one of the book's engines, uncached.

    As :func:`calibrate_benchmark` (``"pyirt-authors"`` and ``"pyirt"`` by the batched fit, ``"map"`` by
    :func:`irtlib.fit_2pl`), for the checks that refit a matrix that is not a benchmark's.
    """
    if engine in _BATCHED:
        return _batched_calibration(matrix, engine=engine, seed=seed, epochs=epochs, lr=lr)
    return fit_2pl(matrix, engine=engine, seed=seed, epochs=epochs, lr=lr)


#: The three calibrations the fit chapters set side by side: the authors' (their released code), py-irt
#: with the text's fixed priors, and irtlib's MAP engine (posterior mode of the text's model).
CHAPTER_ENGINES = ("pyirt-authors", "pyirt", "map")

#: Epochs of py-irt with the text's priors in a QUICK build (a preview).
QUICK_PYIRT_EPOCHS = 200
#: Epochs of the authors' calibration in a QUICK build (a preview; the full build runs the paper's 1,000). Chosen
#: from the whole fits of the six benchmarks at 100 to 1,000 epochs against 1,000 (``benchmarks/bench_quick_epochs.py``,
#: ``benchmarks/RESULTS.md``, issue 26 ``qs``): at 300 the fit keeps Pearson r of a at 0.82 to 0.95, of b at 0.96 to
#: 1.00 and Spearman of theta at 0.96 to 1.00 with the full run's, where 100 epochs fall to 0.66 (a) and 0.84
#: (theta); its fits cost about a third of the full run's.
QUICK_AUTHORS_EPOCHS = 300


def chapter_epochs(engine: str, epochs: int, *, quick: bool) -> int:
    """The epochs a chapter's calibration by ``engine`` runs, so that every chapter reuses the same cached fit.

    In a full build every engine runs ``epochs`` (1,000 is the paper's protocol). A QUICK build
    caps the authors' calibration (``"pyirt-authors"``) at :data:`QUICK_AUTHORS_EPOCHS` and py-irt
    with the text's priors (``"pyirt"``) at :data:`QUICK_PYIRT_EPOCHS`; the MAP engine has no
    epochs (returned unchanged, and ignored by :func:`calibrate_benchmark`).
    """
    cap = {"pyirt-authors": QUICK_AUTHORS_EPOCHS, "pyirt": QUICK_PYIRT_EPOCHS}.get(engine) if quick else None
    return int(epochs) if cap is None else min(int(epochs), cap)


def chapter_engine(engine: str | None, *, quick: bool) -> str | None:
    """The per-split engine a chapter's protocol run names: the authors' calibration at :func:`chapter_epochs`.

    ``"pyirt-authors"`` in a QUICK build becomes the same calibration at :data:`QUICK_AUTHORS_EPOCHS`
    (:func:`irtbook.authors_engine.engine_name`, registered with the protocol, its epochs in every
    cache key), the epochs at which the stage (:mod:`irtbook.split_stage`) fits every split; any other
    engine, and every engine of a full build, is returned unchanged.
    """
    from .authors_engine import AUTHORS_ENGINE, authors_epochs, engine_name

    if not quick or engine != AUTHORS_ENGINE:
        return engine
    return engine_name(chapter_epochs(engine, authors_epochs(), quick=True))


def chapter_protocol(protocol: Protocol, *, quick: bool) -> Protocol:
    """``protocol`` with its per-split engine as :func:`chapter_engine` names it (itself in a full build)."""
    from dataclasses import replace

    engine = chapter_engine(protocol.engine, quick=quick)
    return protocol if engine == protocol.engine else replace(protocol, engine=engine)


#: The py-irt engines :func:`calibrate_matrix` runs by the batched fit, with their py-irt settings: the
#: authors' (hierarchical priors, decay 0.9999, best epoch) and the text's (fixed priors, constant rate, last epoch).
_BATCHED = {"pyirt-authors": {"priors": "hierarchical", "lr_decay": 0.9999, "best": True},
            "pyirt": {"priors": "paper", "lr_decay": 1.0, "best": False}}


def _batched_calibration(matrix: ResponseMatrix, *, engine: str, seed: int, epochs: int, lr: float) -> Calibration:
    """A py-irt fit of every model of ``matrix`` by the batched fit (one split of all rows), as a Calibration."""
    import time

    from irtlib.calibration.pyirt_batch import fit_hierarchical_batch

    py_irt = _BATCHED[engine]
    start = time.perf_counter()
    fit = fit_hierarchical_batch(matrix.values, [np.arange(matrix.shape[0])], seed=seed, epochs=epochs, lr=lr,
                                 **py_irt)
    items, models = pd.Index(matrix.items), pd.Index(matrix.models)
    return Calibration(a=pd.Series(fit.a[0], index=items, name="a"), b=pd.Series(fit.b[0], index=items, name="b"),
                       theta=pd.Series(fit.theta[0], index=models, name="theta"), engine=engine,
                       settings={"seed": seed, "epochs": epochs, "lr": lr, **py_irt, "batched": True},
                       seconds=time.perf_counter() - start,
                       diagnostics={"best_epoch": int(fit.best_epoch[0]), "final_loss": float(fit.loss[0, -1])})


def split_cache(cache_dir) -> str | None:
    """Where the chapters keep every split's calibration (shared by the protocol runs and the ceilings)."""
    return None if cache_dir is None else str(Path(cache_dir) / "splits")


def paper_budgets(name: str) -> list[int]:
    """The budgets k at which the paper reports agreement for a benchmark (Table 2, appendix F)."""
    if name not in paper.BENCHMARKS:
        return []
    ks = {paper.TABLE2_LEFT[name].k, paper.TABLE2_RIGHT[name].k}
    if name == "safetybench":
        facts = paper.SAFETYBENCH_APPENDIX_F
        ks |= {facts["k_small"], facts["random_reaches_090_at_k"]}
    return sorted(int(k) for k in ks if k)


def protocol_budgets(bench: Benchmark, *, n_points: int = 25, protocol: str | Protocol | None = None) -> list[int]:
    """The swept budgets plus the paper's own budgets.

    Parameters
    ----------
    bench : Benchmark
    n_points : int
        Points of irtlib's log-spaced grid (:func:`irtlib.protocol.agreement.budget_grid`; the paper's protocol).
    protocol : {"paper", "authors"} or Protocol, optional
        None or ``"paper"``: irtlib's grid. ``"authors"``: the authors' grid, the distinct
        ``round(geomspace(1, min(largest budget, items kept), 20))`` over the items their filter
        keeps (:func:`irtlib.protocol.presets.authors_budget_grid`; every k of Table 2 lies on it).

    Returns
    -------
    list of int
        Sorted: the grid, plus every budget of :func:`paper_budgets` not larger than its top (so a
        chapter sets the paper's number beside ours at the same k, not at the nearest grid point;
        appendix F's SafetyBench budgets 19 and 556 are off the authors' grid).
    """
    from irtlib.protocol import presets as protocols
    from irtlib.protocol.agreement import budget_grid

    proto = protocols.resolve(protocol, benchmark=bench.name)
    if proto.budget_rule == "authors":
        grid = set(protocols.authors_budget_grid(kept_items(bench, protocol=proto), max_budget=proto.max_budget))
    else:
        grid = set(budget_grid(bench.filtered.shape[1], n_points=n_points))
    return sorted(grid | {k for k in paper_budgets(bench.name) if k <= max(grid)})


def default_budgets(bench: Benchmark, *, protocol: str | Protocol | None = None) -> list[int]:
    """The budgets :func:`irtlib.run_protocol` sweeps on ``bench`` when given none (no paper's budgets added).

    The protocol's grid over the items its variance filter keeps: :func:`irtlib.protocol.agreement.budget_grid`,
    or the authors' grid under ``"authors"`` (:func:`irtlib.protocol.presets.authors_budget_grid`).
    """
    from irtlib.protocol import presets as protocols
    from irtlib.protocol.agreement import budget_grid

    proto = protocols.resolve(protocol, benchmark=bench.name)
    n = kept_items(bench, protocol=proto)
    if proto.budget_rule == "authors":
        return list(protocols.authors_budget_grid(n, max_budget=proto.max_budget))
    return list(budget_grid(n))


def kept_items(bench: Benchmark, *, protocol: str | Protocol | None = None, threshold: float | None = None) -> int:
    """How many items the protocol's variance filter keeps (the text drops ``p(1-p) <= t``, the code ``< t``)."""
    from irtlib.protocol import presets as protocols

    return int(_kept(bench, protocols.resolve(protocol, benchmark=bench.name), threshold).sum())


def _kept(bench: Benchmark, proto: Protocol, threshold: float | None = None) -> np.ndarray:
    """Which items of ``bench.full`` the protocol's variance filter keeps, shape ``(n_items,)``."""
    t = proto.variance_threshold if threshold is None else threshold
    var = bench.full.item_variance().to_numpy()
    return var >= t if proto.variance_rule == "below" else var > t


def book_protocol(bench: Benchmark, protocol: str | Protocol | None = None, *,
                  fresh_anchor_max_items: int | None = None) -> Protocol:
    """The protocol a chapter runs on ``bench``: the named one, with one optional speed rule.

    The authors' Anchor Points run a fresh FasterPAM for every budget (``anchor_rule="fresh"``);
    on a bank of thousands of items that is minutes per budget and split (AIR-Bench 2024's 4,906
    kept items: about two minutes per split on this machine; SafetyBench's 11,395: tens of
    minutes). With ``fresh_anchor_max_items`` set, a benchmark keeping more items than that runs
    irtlib's warm-started K-medoids path instead (``anchor_rule="path"``), every other rule
    unchanged; the returned protocol says so in its ``anchor_rule``, and so in the cache key. So does
    a benchmark whose kept responses have missing cells, which the authors' rule cannot take
    (:func:`anchor_path_reason`).

    Parameters
    ----------
    bench : Benchmark
    protocol : {"paper", "authors"} or Protocol, optional
    fresh_anchor_max_items : int, optional
        None: the protocol as named.

    Returns
    -------
    Protocol
    """
    from dataclasses import replace

    from irtlib.protocol import presets as protocols

    proto = protocols.resolve(protocol, benchmark=bench.name)
    if anchor_path_reason(bench, proto, fresh_anchor_max_items=fresh_anchor_max_items) is not None:
        proto = replace(proto, anchor_rule="path")
    return proto


def anchor_path_reason(bench: Benchmark, protocol: str | Protocol | None = None, *,
                       fresh_anchor_max_items: int | None = None) -> str | None:
    """Why :func:`book_protocol` runs Anchor Points on irtlib's warm-started path instead of the authors' rule.

    Returns
    -------
    {"size", "missing"} or None
        ``"size"``: the protocol keeps more than ``fresh_anchor_max_items`` items (the authors'
        fresh FasterPAM per budget takes minutes per budget and split there); ``"missing"``: the
        kept responses have missing cells (the simulated release's matrices do), which the
        authors' distances (``numpy.corrcoef``) cannot take, while the path's correlation features
        fill them with the item's training mean; None: the protocol's own rule runs (always so
        under a protocol whose rule is already the path).
    """
    from irtlib.protocol import presets as protocols

    proto = protocols.resolve(protocol, benchmark=bench.name)
    if proto.anchor_rule != "fresh":
        return None
    if fresh_anchor_max_items is not None and kept_items(bench, protocol=proto) > int(fresh_anchor_max_items):
        return "size"
    return "missing" if np.isnan(bench.full.values[:, _kept(bench, proto)]).any() else None


def protocol_sizes(bench: Benchmark, *, protocol: str | Protocol | None = None, n_splits: int | None = None,
                   n_test: int | None = None,
                   max_splits: int | None = None) -> tuple[int, int]:
    """``(n_splits, n_test)`` a chapter runs: given, else the protocol's for this benchmark, capped by ``max_splits``.

    Under ``"authors"`` the protocol's are the released code's per-benchmark values
    (:data:`irtlib.protocol.presets.AUTHORS_SIZES`: AIR-Bench 70/10, Anthropic Red Team 100/10, HarmBench
    100/10, SimpleSafetyTests 100/10, SafetyBench 70/6, WMDP 70/6); under ``"paper"`` 100/10.
    ``max_splits`` (a QUICK build's 10) caps the count.
    """
    from irtlib.protocol import presets as protocols

    proto = protocols.resolve(protocol, benchmark=bench.name)
    splits = proto.n_splits if n_splits is None else int(n_splits)
    if max_splits is not None:
        splits = min(splits, int(max_splits))
    return splits, proto.n_test if n_test is None else int(n_test)


def split_batch(n_splits: int, n_jobs: int, *, largest: int = 10) -> int:
    """Splits per task of a protocol run, so that ``n_jobs`` workers all get one (at most ``largest``).

    A QUICK build's 10 splits on 2 workers run as two tasks of 5 instead of one of 10; the full
    runs keep tasks of 10 (:func:`irtlib.run_protocol`'s ``split_batch``, which the results do not
    depend on).
    """
    import os

    workers = (os.cpu_count() or 1) if int(n_jobs) < 0 else max(1, int(n_jobs))
    return max(1, min(int(largest), -(-int(n_splits) // workers)))


def protocol_benchmark(bench: Benchmark, *, n_splits: int | None = None, n_test: int | None = None,
                       seed: int | None = None, ks=None, engine: str | None = None, threshold: float = 0.01,
                       n_jobs: int = 1, cache_dir=None, progress: bool | None = False,
                       protocol: str | Protocol | None = None,
                       max_splits: int | None = None, methods=None) -> pd.DataFrame:
    """The agreement protocol (:func:`irtlib.run_protocol`) on one benchmark, cached.

    Parameters
    ----------
    bench : Benchmark
    n_splits, n_test : int, optional
        Default: the protocol's for this benchmark (:func:`protocol_sizes`), capped by ``max_splits``.
    seed : int, optional
        Default the protocol's (``"paper"`` 0; ``"authors"`` 42, their split rule's).
    ks : sequence of int, optional
        Default :func:`protocol_budgets` under the same protocol.
    engine : str, optional
        Per-split calibration engine (default the protocol's: ``"paper"`` the MAP engine,
        ``"authors"`` their hierarchical py-irt fit, batched over splits).
    threshold : float
        The variance filter's threshold.
    n_jobs : int
        Not part of the cache key: the results do not depend on it.
    protocol : {"paper", "authors"} or Protocol, optional
        :mod:`irtlib.protocol.presets`; None is ``"paper"``. Passed to ``run_protocol`` with
        ``benchmark=bench.name``; part of the cache key (every rule of it).
    max_splits : int, optional
        Cap on the protocol's split count (a QUICK build).
    methods : sequence of str, optional
        Method ids (default all eight); part of the cache key. Where ``cache_dir`` already holds the
        run of every method with the same settings, these methods' rows are read from it
        (:func:`method_rows`: the same rows as a run of these methods alone) instead of being run again
        (chapter 5's HarmBench with all its behaviours is its run of every method). Likewise a run of fewer
        splits than the protocol's, or (for :data:`PREFIX_METHODS` alone) of fewer budgets, is read from the
        protocol's own stored run of every method when there is one (:func:`split_rows`: chapter 8's profiles of
        the real data are the first 20 splits of chapter 6's runs under the paper's text).

    Returns
    -------
    DataFrame
        ``run_protocol``'s rows with a ``benchmark`` column; ``attrs`` as ``run_protocol`` records
        them (the protocol, its NaN and band rules).
    """
    from irtlib.protocol import presets as protocols
    from irtlib.protocol.agreement import run_protocol

    proto = protocols.resolve(protocol, benchmark=bench.name)
    n_splits, n_test = protocol_sizes(bench, protocol=proto, n_splits=n_splits, n_test=n_test, max_splits=max_splits)
    seed = proto.seed if seed is None else int(seed)
    engine = proto.engine if engine is None else engine
    ks = protocol_budgets(bench, protocol=proto) if ks is None else sorted({int(k) for k in ks})
    key = ("protocol_benchmark", bench.name, bench.rule, bench.checksum, n_splits, n_test, seed, tuple(ks),
           engine, threshold, tuple(sorted(proto.settings().items())), None if methods is None else tuple(methods))

    def compute(chosen=methods, splits=n_splits, budgets=ks):
        df = run_protocol(bench.full, methods=chosen, ks=budgets, n_splits=splits, n_test=n_test, seed=seed,
                          engine=engine, n_jobs=n_jobs, variance_threshold=threshold, progress=progress, protocol=proto,
                          benchmark=bench.name, calibration_cache=split_cache(cache_dir),
                          split_batch=split_batch(splits, n_jobs))
        attrs = dict(df.attrs)
        df = df.assign(benchmark=bench.name)
        df.attrs.update(attrs)
        return df

    whole_key = key[:-1] + (None,)
    if methods is not None and cache_dir is not None and cache_path(whole_key, cache_dir).exists():
        # every method's rows are computed by the same per-split rules whichever other methods run beside it
        # (the streams are per split and method kind), so a stored run of every method holds these rows already
        def read():
            return method_rows(cached(lambda: compute(None), key=whole_key, cache_dir=cache_dir), methods)

        return cached(read, key=key, cache_dir=cache_dir)
    if cache_dir is not None and not cache_path(key, cache_dir).exists():
        full_splits, _ = protocol_sizes(bench, protocol=proto, n_test=n_test)
        full_ks = protocol_budgets(bench, protocol=proto)
        stored_key = key[:4] + (full_splits, n_test, seed, tuple(full_ks)) + key[8:-1] + (None,)
        budgets_read = list(ks) == list(full_ks) or (methods is not None and set(methods) <= set(PREFIX_METHODS))
        if (stored_key != whole_key and full_splits >= n_splits and set(ks) <= set(full_ks) and budgets_read
                and cache_path(stored_key, cache_dir).exists()):
            # the protocol's own run of every method (chapter 6's comparison runs) holds these rows in its first
            # n_splits splits: each split's rows depend on its own streams, calibration and test models only
            def first_splits():
                stored = cached(lambda: compute(None, full_splits, full_ks), key=stored_key, cache_dir=cache_dir)
                return split_rows(stored, n_splits=n_splits, ks=ks, methods=methods)

            return cached(first_splits, key=key, cache_dir=cache_dir)
    return cached(compute, key=key, cache_dir=cache_dir)


#: The methods whose agreement at budget ``k`` is read off the first ``k`` steps of one path per test model (the
#: adaptive test and the random orders), whatever other budgets a run records: :func:`split_rows` may drop budgets
#: of a run of these alone. The static subsets of the other methods may be chosen along the budgets (Anchor Points'
#: warm-started path), so their rows are read only at the run's own budgets.
PREFIX_METHODS = ("fluid", "random", "random-irt")


def split_rows(results: pd.DataFrame, *, n_splits: int, ks, methods=None) -> pd.DataFrame:
    """The rows of a protocol run of fewer splits, budgets or methods, read from a larger run of the same protocol.

    :func:`irtlib.run_protocol` draws split ``s``'s test models, random orders and calibration from streams of
    ``(seed, s)`` alone, computes each method's rows by the same per-split rules whichever other methods run
    beside it (:func:`method_rows`), and records an adaptive or random method's agreement at budget ``k`` from
    its first ``k`` steps, whatever larger budgets it goes on to (the paper, section "Evaluation": every
    budget is a prefix of one path). So the first ``n_splits`` splits of a run with more, at budgets ``ks``
    among its own (of :data:`PREFIX_METHODS` only, unless ``ks`` are the run's), are, bit for bit, the rows of a
    run of ``n_splits`` splits at ``ks`` (a test compares them).

    Parameters
    ----------
    results : DataFrame
        A :func:`protocol_benchmark` (or :func:`irtlib.run_protocol`) result with at least ``n_splits``
        splits, every budget of ``ks`` and every method of ``methods``.
    n_splits : int
        Splits kept: ``0 .. n_splits - 1``.
    ks : sequence of int
        Budgets kept.
    methods : sequence of str, optional
        Methods kept (None: the run's).

    Returns
    -------
    DataFrame
        The kept rows in the run's order (split, method, k) with a fresh index; ``attrs`` are the run's with
        ``n_splits``, ``ks`` and ``methods`` those kept (``seconds`` stays the larger run's).
    """
    if methods is not None:
        results = method_rows(results, methods)
    ks = sorted({int(k) for k in ks})
    keep = (results["split"].to_numpy() < int(n_splits)) & results["k"].isin(ks).to_numpy()
    out = results[keep].reset_index(drop=True)
    out.attrs = {**results.attrs, "n_splits": int(n_splits), "ks": ks}
    return out


def method_rows(results: pd.DataFrame, methods) -> pd.DataFrame:
    """The rows of some methods of a protocol run, as a run of those methods alone returns them.

    :func:`irtlib.run_protocol` computes each method's rows by the same per-split rules whichever
    other methods run beside it (every split's random streams, calibration and test models are its
    own; the Fluid tests of a task's splits run as one batch of the same models), so the rows of
    ``methods`` in a run of every method are, bit for bit, the rows of a run of ``methods``
    alone (a test compares them). The frame keeps the run's row order (split, method, k) with a
    fresh index; ``attrs`` are the run's, with ``methods`` the ones kept.

    Parameters
    ----------
    results : DataFrame
        A :func:`protocol_benchmark` (or :func:`irtlib.run_protocol`) result.
    methods : sequence of str
        Method ids, each among the run's.

    Returns
    -------
    DataFrame
    """
    from irtlib.selection.methods import check_methods

    kept = check_methods(methods, allowed=results.attrs.get("methods", tuple(results["method"].unique())))
    out = results[results["method"].isin(kept)].reset_index(drop=True)
    out.attrs = {**results.attrs, "methods": list(kept)}
    return out


def harmbench_variants(bench: Benchmark, *, data: str | None = None) -> dict[str, Benchmark]:
    """HarmBench with all its behaviours, without the copyright ones, and those alone (chapter 5's exception).

    Parameters
    ----------
    bench : Benchmark
        HarmBench as :func:`load_benchmark` gives it.
    data : {"auto", "real", "simulated"} or None
        Where its item file is read (:func:`irtlib.datasets.load_items`).

    Returns
    -------
    dict
        ``"all 400 behaviours"`` (``bench`` itself), ``"without copyright"``, ``"copyright only"``;
        empty unless ``bench`` holds the paper's data and its item file names each behaviour's
        ``functional_category``.
    """
    items = datasets.load_items(bench.name, source=data)
    if "functional_category" not in items.columns or bench.data is None or bench.data.kind != "paper":
        return {}
    category = items.set_index("item")["functional_category"].astype(str)
    full = bench.full

    def variant(keep, label):
        sub = full.subset(items=keep)
        return Benchmark(bench.name, f"HarmBench ({label})", sub, sub.filter_variance(), bench.rule, bench.data)

    copyright_items = [i for i in full.items if category.get(i) == "copyright"]
    other_items = [i for i in full.items if category.get(i) != "copyright"]
    return {"all 400 behaviours": bench, "without copyright": variant(other_items, "without copyright"),
            "copyright only": variant(copyright_items, "copyright only")}
