"""Which data a benchmark id stands for: the paper's own files, a real subset, or the simulated release.

The six benchmark ids of the paper resolve, with ``source="auto"`` (the default), to real data
wherever it exists:

============================  ===========================================================
benchmark                     real source (``kind``), in order of preference
============================  ===========================================================
Anthropic Red Team, HarmBench, the authors' released matrices (``"paper"``,
SimpleSafetyTests, WMDP-Bio   :mod:`irtlib.datasets.authors`)
AIR-Bench 2024                the authors' 82-model file if downloaded (``"paper"``, checksum
                              not verified), else the 22 real models of
                              :mod:`irtlib.datasets.real` (``"real-subset"``)
SafetyBench                   the authors' file if downloaded (``"paper"``, not verified)
============================  ===========================================================

and to the simulated release in ``data/`` (``"simulated"``) otherwise. ``source="real"`` insists
on real data (an error saying how to get it when absent), ``source="simulated"`` ignores real
files. ``source=None`` reads the environment variable ``IRTLIB_DATA`` (:data:`SOURCE_ENV`), else
``"auto"``: one setting switches a whole build.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .._typing import PathLike
from ..errors import InputError
from .paper import BENCHMARKS

__all__ = ["SOURCES", "SOURCE_ENV", "KINDS", "SIMULATED", "REAL", "SIM_DATA_ENV", "DataSource", "default_data_dir",
           "source_setting", "resolve"]

#: The six simulated benchmarks (the paper's six, by id).
SIMULATED = tuple(BENCHMARKS)
#: Real data sets that can be loaded after a download.
REAL = ("pandaguard-jbb", "airbench2024-real")
#: Environment variable that overrides where the simulated release is read from.
SIM_DATA_ENV = "IRTLIB_SIM_DATA"

#: Values of ``source=``.
SOURCES = ("auto", "real", "simulated")
#: Environment variable giving the default ``source``.
SOURCE_ENV = "IRTLIB_DATA"
#: Kinds of data a benchmark can resolve to (``"real"``: a real data set that is not one of the paper's).
KINDS = ("paper", "real-subset", "simulated", "real")


@dataclass(frozen=True)
class DataSource:
    """What a benchmark id resolved to, for captions and cache keys.

    Attributes
    ----------
    benchmark : str
        The benchmark id.
    kind : str
        ``"paper"`` (the authors' released matrix), ``"real-subset"`` (real judgments of some of the
        paper's models), ``"simulated"`` (the simulated release) or ``"real"`` (another real data set).
    label : str
        A phrase a caption can print, e.g. "the paper's data (authors' release, 77 models × 400 items)".
    path : Path or None
        The file (paper) or directory (real subset, simulated release) read.
    verified : bool
        Whether its checksum was checked against a pinned one (False: the authors' AIR-Bench and
        SafetyBench files, whose checksums are not known here).
    shape : tuple of int or None
        ``(models, items)`` before the variance filter, when known without reading the data.
    """

    benchmark: str
    kind: str
    label: str
    path: Path | None
    verified: bool
    shape: tuple[int, int] | None = None

    @property
    def is_real(self) -> bool:
        """True for every kind but ``"simulated"``."""
        return self.kind != "simulated"

    @property
    def binary(self) -> bool:
        """True when the data are stored binary (the paper's files): no binarization rule applies."""
        return self.kind == "paper"


def source_setting(source: str | None = None) -> str:
    """``source`` checked, or ``$IRTLIB_DATA``, or ``"auto"``.

    Raises
    ------
    InputError
        A value outside :data:`SOURCES` (naming the environment variable when it came from there).
    """
    where = "source"
    if source is None:
        source, where = os.environ.get(SOURCE_ENV) or "auto", f"{SOURCE_ENV}"
    if source not in SOURCES:
        raise InputError(f"{where}={source!r}: choose one of {', '.join(SOURCES)}")
    return source


def _paper(name: str, data_dir: PathLike | None) -> DataSource | None:
    from . import authors

    if name not in authors.RESPONSE_FILES:
        return None
    found = authors.locate(name, data_dir=data_dir)
    if found is None:
        return None
    m, n = found.file.shape
    check = "" if found.verified else "; checksum not verified"
    label = f"the paper's data (authors' release, {m} models × {n:,} items{check})"
    return DataSource(name, "paper", label, found.path, found.verified, (m, n))


def _airbench22(data_dir: PathLike | None) -> DataSource | None:
    from . import real

    try:
        d = real.resolve_data_dir(data_dir)
    except FileNotFoundError:
        return None
    return DataSource("airbench2024", "real-subset",
                      f"real AIR-Bench 2024 judgments, {len(real.MODELS)} of the paper's 82 models", d, True,
                      (len(real.MODELS), 3 * real.N_BASE_PROMPTS))


def default_data_dir() -> Path:
    """Where the simulated release is read from: ``$IRTLIB_SIM_DATA`` or the repository's ``data/``."""
    env = os.environ.get(SIM_DATA_ENV)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "data"


def _simulated(name: str, data_dir: PathLike | None) -> DataSource:
    d = Path(data_dir) if data_dir is not None else default_data_dir()
    return DataSource(name, "simulated", "simulated release", d, True, None)


def _how(name: str) -> str:
    from . import authors, real

    if name in authors.UNVERIFIED:
        how = (f"download the authors' file with `irtlib paper-data download --with-unverified {name}`"
               f" (or set {authors.DATA_ENV}=DIR)")
        if name == "airbench2024":
            how += (f", or point {real.DATA_ENV} at the 22-model judgments (`irtlib airbench-data "
                    "download DIR`)")
        return how
    return authors.HOW


def resolve(name: str, *, source: str | None = None, data_dir: PathLike | None = None) -> DataSource:
    """The data a benchmark id stands for under ``source``.

    Parameters
    ----------
    name : str
        One of the paper's six benchmark ids (:data:`irtlib.datasets.SIMULATED`), or a real data
        set id (``"airbench2024-real"``, ``"pandaguard-jbb"``, which are always real).
    source : {"auto", "real", "simulated"} or None
        ``auto``: real data where they exist, else the simulated release; ``real``: real data or
        an error; ``simulated``: the simulated release. None: ``$IRTLIB_DATA`` or ``"auto"``.
    data_dir : path-like, optional
        Look only in this directory: the authors' files or the 22-model AIR-Bench files in it for
        a real source, else (``auto``, ``simulated``) read it as the simulated release.

    Returns
    -------
    DataSource

    Raises
    ------
    InputError
        Unknown benchmark or ``source``; ``source="simulated"`` for a data set that is only real.
    FileNotFoundError
        ``source="real"`` and no real data for ``name``; the message says how to get them.
    """
    from . import real

    explicit = source
    source = source_setting(source)
    if name in REAL:
        if explicit == "simulated":
            raise InputError(f"{name} is a real data set; there is no simulated version of it")
        if name == "airbench2024-real":
            found = _airbench22(data_dir)
            d = found.path if found else (Path(data_dir) if data_dir is not None else None)
            return DataSource(name, "real-subset", f"real AIR-Bench 2024 judgments, {len(real.MODELS)} of the "
                              "paper's 82 models", d, True, (len(real.MODELS), 3 * real.N_BASE_PROMPTS))
        return DataSource(name, "real", "real PandaGuard JailbreakBench judgments (not one of the paper's six)",
                          Path(data_dir) if data_dir is not None else None, True, (704, 100))
    if name not in SIMULATED:
        raise InputError(f"unknown benchmark {name!r}; choose one of {list(SIMULATED + REAL)}")
    if source == "simulated":
        return _simulated(name, data_dir)
    found = _paper(name, data_dir)
    if found is None and name == "airbench2024":
        found = _airbench22(data_dir)
    if found is not None:
        return found
    if source == "real":
        where = f" in {data_dir}" if data_dir is not None else ""
        raise FileNotFoundError(f"{name}: no real data found{where} (source='real'); {_how(name)}")
    return _simulated(name, data_dir)
