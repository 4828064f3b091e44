"""The book's data: the paper's own response matrices where they exist, else a simulated release.

Each of the paper's six benchmark ids resolves (:func:`resolve`, ``source=``) to real data wherever
it exists: the authors' released matrices for Anthropic Red Team, HarmBench, SimpleSafetyTests
and WMDP-Bio (:mod:`irtlib.datasets.authors`), real AIR-Bench 2024 judgments (the authors' 82-model
file once downloaded, else 22 real models, :mod:`irtlib.datasets.real`), the authors' SafetyBench
file once downloaded; and otherwise to a SIMULATED release that looks like the paper's data in
every way the paper reports, generated deterministically by :mod:`irtlib.datasets.simulate` and
committed under ``data/`` (see ``data/README.md``). ``source="simulated"`` (or the environment
variable ``IRTLIB_DATA=simulated``) reads the simulated release everywhere
(:mod:`irtlib.datasets.sources`).

>>> from irtlib import datasets
>>> datasets.names()
('airbench2024', 'anthropic-red-team', 'harmbench', 'safetybench', 'simplesafetytests', 'wmdp-bio')
>>> datasets.resolve("harmbench").label     # with ../shared beside the checkout
"the paper's data (authors' release, 77 models × 400 items)"
>>> m = datasets.load("harmbench")          # the authors' 0/1 matrix (1 = safe)
>>> sim = datasets.load("harmbench", source="simulated")   # binarized with the paper's strict rule
>>> raw = datasets.load_raw("harmbench", source="simulated")    # the judges' graded scores
>>> items = datasets.load_items("harmbench")

Real data: ``load("pandaguard-jbb")`` reads the PandaGuard jailbreak judgments on JailbreakBench
(704 attacked configurations x 100 behaviours; :mod:`irtlib.datasets.pandaguard`) from
``data_dir=`` or ``$IRTLIB_PANDAGUARD_DATA``. ``load("airbench2024-real")`` reads real AIR-Bench 2024
judgments of 22 models,
downloaded once by :func:`irtlib.datasets.real.download_airbench` into a directory given as
``data_dir=`` or by the environment variable ``IRTLIB_REAL_DATA``. HELM Safety's own per-instance
results (the paper's source) can be read with :mod:`irtlib.io.helm`.

Layer rule (the table :data:`irtlib._layers.MAY_IMPORT`, checked by ``tests/test_layers.py``): imports
:mod:`irtlib.protocol`, :mod:`irtlib.bank`, :mod:`irtlib.extended` and below (today it needs only
:mod:`irtlib.io` and :mod:`irtlib.core`); never :mod:`irtbook`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from irtlib.core.binarize import RULES, binarize_choice, binarize_graded, binarize_wmdp
from irtlib.core.responses import ResponseMatrix

from .._typing import PathLike
from ..errors import InputError
from . import paper as _paper
from . import release as _release
from . import simulate as simulate  # loaded with the package: irtlib.datasets.simulate
from .sources import REAL, SIM_DATA_ENV, SIMULATED, SOURCE_ENV, SOURCES, DataSource, default_data_dir, resolve

__all__ = [
    "SIMULATED", "REAL", "DATA_ENV", "SIM_DATA_ENV", "names", "display_name", "paper_facts",
    "default_data_dir", "load", "load_raw", "load_items", "load_models", "metadata",
    "binarize_raw", "two_judge_scores", "SOURCES", "SOURCE_ENV", "DataSource", "resolve",
]

#: Environment variable naming the real-data directory.
DATA_ENV = "IRTLIB_REAL_DATA"

#: Scores a two-judge HELM Safety benchmark can have: the mean of two judges' 0 / 0.5 / 1.
two_judge_scores = (0.0, 0.25, 0.5, 0.75, 1.0)


def names(*, include_real: bool = False) -> tuple:
    """Benchmark ids: the six simulated ones, plus the real ones with ``include_real=True``."""
    return SIMULATED + (REAL if include_real else ())


def _check_name(name: str) -> None:
    if name not in SIMULATED and name not in REAL:
        raise InputError(f"unknown benchmark {name!r}; choose one of {list(SIMULATED + REAL)}")


def display_name(name: str, *, source: str | None = None) -> str:
    """The benchmark's name as the paper prints it (``"AIR-Bench 2024"``, ...).

    With a ``source`` (or ``$IRTLIB_DATA``) under which ``"airbench2024"`` resolves to the 22 real
    models, that is said: ``"AIR-Bench 2024 (real, 22 models)"``.
    """
    _check_name(name)
    if name == "airbench2024-real":
        return "AIR-Bench 2024 (real, 22 models)"
    if name == "pandaguard-jbb":
        return "PandaGuard JailbreakBench (real, 704 configurations)"
    if name == "airbench2024" and resolve(name, source=source).kind == "real-subset":
        return display_name("airbench2024-real")
    return _paper.DISPLAY_NAMES[name]


def paper_facts(name: str) -> dict:
    """What the paper reports about a benchmark (see :func:`irtlib.datasets.paper.facts`)."""
    _check_name(name)
    if name == "pandaguard-jbb":
        return {}      # not one of the paper's benchmarks
    return _paper.facts("airbench2024" if name == "airbench2024-real" else name)


def _sim_dir(data_dir) -> Path:
    return Path(data_dir) if data_dir is not None else default_data_dir()


def _read(name: str, table: str, data_dir, manifest=None) -> pd.DataFrame:
    d = _sim_dir(data_dir)
    manifest = _release.read_manifest(d) if manifest is None else manifest
    if name not in manifest["benchmarks"]:
        raise InputError(f"{d / _release.MANIFEST}: benchmark {name!r} is not in this release")
    dtype = {"model": str, "item": str}
    if table == "responses":
        dtype.update({"score": str, "judge_1": str, "judge_2": str, "chosen": str})
    return _release.read_table(d, f"{name}/{table}.csv.gz", manifest=manifest, dtype=dtype)


def load_raw(name: str, *, data_dir: PathLike | None = None, source: str | None = None) -> pd.DataFrame:
    """The native (unbinarized) responses, one row per observed (model, item).

    Parameters
    ----------
    name : str
        A benchmark id; ``"airbench2024-real"`` reads the real graded judgments.
    data_dir : path-like, optional
        Release directory (simulated) or real-data directory (real); see :func:`resolve`.
    source : {"auto", "real", "simulated"} or None
        Which data ``name`` stands for (:func:`resolve`; default ``$IRTLIB_DATA`` or ``"auto"``).

    Returns
    -------
    DataFrame
        Graded benchmarks: ``model, item, score`` with ``score`` a float in {0, 0.5, 1}
        (two-judge HELM Safety benchmarks: ``score`` in {0, 0.25, ..., 1}, the mean of
        ``judge_1`` and ``judge_2``). Multiple choice: ``model, item, chosen`` (a letter);
        the key is in :func:`load_items` (``safe_option`` or ``answer``). The paper's data
        (already binary): ``model, item, score`` with the file's 0/1 (1 = safe), except WMDP-Bio,
        whose file stores ``model, item, correct`` (1 = correct answer, i.e. unsafe).
    """
    _check_name(name)
    if name == "pandaguard-jbb":
        from . import pandaguard
        return pandaguard.load_pandaguard_raw(data_dir, graded=True)
    data = resolve(name, source=source, data_dir=data_dir)
    if data.kind == "paper":
        from . import authors

        stored = authors.load_stored(name, data_dir=data.path.parent).to_long()
        return stored.rename(columns={"score": "correct"}) if authors.FILES[name].stores == "correct" else stored
    if data.kind == "real-subset":
        from . import real
        return real.load_airbench_raw(data.path)
    df = _read(name, "responses", data_dir)
    for col in ("score", "judge_1", "judge_2"):
        if col in df:
            df[col] = pd.to_numeric(df[col], errors="raise")
    return df


def load_items(name: str, *, data_dir: PathLike | None = None, source: str | None = None) -> pd.DataFrame:
    """Item metadata of a benchmark.

    Simulated: columns ``item, cluster, variant, category, subcategory, dimension``, the answer
    key for multiple choice (``n_options`` and ``safe_option`` or ``answer``), and the generating
    parameters ``gen_a, gen_b``. Real AIR-Bench: the risk categories. The paper's data: ``item``
    in the matrix's order, plus HarmBench's ``functional_category, semantic_category, tags`` and
    SimpleSafetyTests' ``harm_area, category`` (never prompt or behaviour text); ``category`` is
    HarmBench's ``semantic_category``. ``source`` as in :func:`resolve`.
    """
    _check_name(name)
    if name == "pandaguard-jbb":
        from . import pandaguard
        return pandaguard.load_pandaguard_items(data_dir)
    data = resolve(name, source=source, data_dir=data_dir)
    if data.kind == "paper":
        from . import authors

        try:
            items = authors.load_items(name, data_dir=data.path.parent if data_dir is not None else None)
        except FileNotFoundError as exc:       # the category files come with the shared copy only
            import warnings

            warnings.warn(f"{name}: item categories unavailable ({exc}); returning item ids only", stacklevel=2)
            items = pd.DataFrame({"item": list(load(name, data_dir=data_dir, source=source).items)})
        if "semantic_category" in items:
            items = items.assign(category=items["semantic_category"])
        return items
    if data.kind == "real-subset":
        from . import real
        return real.load_airbench_items(data.path)
    return _read(name, "items", data_dir)


def load_models(name: str, *, data_dir: PathLike | None = None, source: str | None = None) -> pd.DataFrame:
    """Model metadata of the benchmark's whole population.

    Simulated: columns ``model, population`` and the generating latent traits ``gen_*``; real
    data: ``model, origin``. ``source`` as in :func:`resolve`.
    """
    _check_name(name)
    if name == "pandaguard-jbb":
        from . import pandaguard
        return pandaguard.load_pandaguard_models(data_dir)
    data = resolve(name, source=source, data_dir=data_dir)
    if data.kind == "paper":
        from . import authors

        models = authors.load_stored(name, data_dir=data.path.parent).models
        return pd.DataFrame({"model": list(models), "origin": f"the authors' release ({data.path.name})"})
    if data.kind == "real-subset":
        from . import real
        return real.load_airbench_models(data.path)
    return _read(name, "models", data_dir)


def metadata(name: str, *, data_dir: PathLike | None = None, source: str | None = None) -> dict:
    """Everything known about a benchmark besides its responses.

    ``{"items": load_items(...), "models": load_models(...), "display_name": ..., "paper":
    paper_facts(...), "data": resolve(...)}``.
    """
    data = resolve(name, source=source, data_dir=data_dir)
    return {"items": load_items(name, data_dir=data_dir, source=source),
            "models": load_models(name, data_dir=data_dir, source=source),
            "display_name": display_name(name, source=source), "paper": paper_facts(name), "data": data}


def binarize_raw(name: str, raw: pd.DataFrame, items: pd.DataFrame, *, rule: str = "strict",
                 models: Sequence[str] | None = None) -> ResponseMatrix:
    """Apply the paper's binarization to native responses.

    Parameters
    ----------
    name : str
        Benchmark id (decides the rule family).
    raw : DataFrame
        As returned by :func:`load_raw`.
    items : DataFrame
        As returned by :func:`load_items` (gives the item order and the answer keys).
    rule : {"strict", "lenient"}
        Graded benchmarks only. ``strict`` (the paper's): safe only for the top category
        (score 1); ``lenient``: score >= 0.5. Multiple choice has one rule and rejects
        ``lenient``.
    models : sequence, optional
        Row order; default: models in order of first appearance in ``raw``.

    Returns
    -------
    ResponseMatrix
        ``(n_models, n_items)``, 1 = safe, NaN = not observed.
    """
    if rule not in RULES:
        raise InputError(f"unknown binarization rule {rule!r}; choose one of {RULES}")
    src = f"{name} ({rule})"
    if "score" in raw.columns:
        allowed = two_judge_scores if "judge_1" in raw.columns else (0.0, 0.5, 1.0)
        safe = binarize_graded(raw["score"].to_numpy(dtype=float), rule=rule, allowed=allowed,
                               name=f"{name} score")
    elif "chosen" in raw.columns:
        if rule != "strict":
            raise InputError(f"{name}: multiple choice has a single binarization rule; "
                             f"rule={rule!r} applies to graded judges only")
        key_col = "answer" if "answer" in items.columns else "safe_option"
        keys = items.set_index("item")[key_col].reindex(raw["item"]).to_numpy(dtype=object)
        if pd.isna(keys).any():
            bad = raw["item"].to_numpy()[pd.isna(keys)][0]
            raise InputError(f"{name}: item {bad!r} has responses but no {key_col} in the items table")
        chosen = raw["chosen"].to_numpy(dtype=object)
        safe = binarize_wmdp(chosen, keys) if key_col == "answer" else binarize_choice(chosen, keys)
    else:
        raise InputError(f"{name}: raw responses need a 'score' or a 'chosen' column; found {list(raw.columns)}")
    model_index = pd.Index(pd.unique(raw["model"]) if models is None else models)
    item_index = pd.Index(items["item"])
    r = model_index.get_indexer(raw["model"])
    c = item_index.get_indexer(raw["item"])
    if (c < 0).any():
        raise InputError(f"{name}: item {raw['item'].to_numpy()[c < 0][0]!r} is not in the items table")
    if (r < 0).any():
        raise InputError(f"{name}: model {raw['model'].to_numpy()[r < 0][0]!r} is not in the model list")
    values = np.full((len(model_index), len(item_index)), np.nan)
    values[r, c] = safe
    return ResponseMatrix(values, model_index, item_index, source=src)


def load(name: str, *, rule: str | None = None, data_dir: PathLike | None = None,
         source: str | None = None) -> ResponseMatrix:
    """The binary response matrix of a benchmark: the paper's data, or binarized with the paper's rule.

    Parameters
    ----------
    name : str
        One of :func:`names` (``include_real=True`` for ``"airbench2024-real"``).
    rule : {"strict", "lenient"} or None
        Graded benchmarks: ``strict`` (the paper's rule; what None means) or ``lenient``.
        ``"pandaguard-jbb"`` also takes ``"binary"``, its default (None): the file's own 0/1,
        jailbroken iff the judge's rating is 10 (see :mod:`irtlib.datasets.pandaguard`).
        The paper's data are already binary: no rule applies to them (either gives the
        authors' 0/1; the matrix's ``source`` says so). The 22 real AIR-Bench models are graded
        and take both rules.
    data_dir : path-like, optional
        Simulated: the release directory (default: the repository's ``data/`` or
        ``$IRTLIB_SIM_DATA``). Real: the directory of the files (default: see :func:`resolve`;
        ``$IRTLIB_PANDAGUARD_DATA`` for ``"pandaguard-jbb"``).
    source : {"auto", "real", "simulated"} or None
        Which data ``name`` stands for (:func:`resolve`); None: ``$IRTLIB_DATA`` or ``"auto"``.

    Returns
    -------
    ResponseMatrix
        Models x items, unfiltered (apply ``.filter_variance()`` as the paper does); its
        ``source`` names the data (:attr:`DataSource.label`).

    Raises
    ------
    ValueError
        Unknown benchmark, rule or source; a file whose checksum does not match.
    FileNotFoundError
        Missing files (the message says how to get them).
    """
    _check_name(name)
    if name == "pandaguard-jbb":
        from . import pandaguard
        return pandaguard.load_pandaguard(data_dir, rule="binary" if rule is None else rule)
    rule = "strict" if rule is None else rule
    if rule not in RULES:
        raise InputError(f"unknown binarization rule {rule!r}; choose one of {RULES}")
    data = resolve(name, source=source, data_dir=data_dir)
    if data.kind == "paper":
        from . import authors
        return authors.load_matrix(name, data_dir=data.path.parent,
                                   source=f"{name}: {data.label}; already binary, no binarization rule applies")
    if data.kind == "real-subset":
        from . import real
        m = real.load_airbench(data.path, rule=rule)
        return ResponseMatrix(m.values, m.models, m.items, source=f"{name} ({rule}): {data.label}")
    d = _sim_dir(data_dir)
    manifest = _release.read_manifest(d)
    raw = load_raw(name, data_dir=d, source="simulated")
    items = _read(name, "items", d, manifest)
    models = _read(name, "models", d, manifest)
    took = models["model"][models["model"].isin(set(raw["model"]))]
    m = binarize_raw(name, raw, items, rule=rule, models=took)
    return ResponseMatrix(m.values, m.models, m.items, source=f"{m.source}: {data.label}")
