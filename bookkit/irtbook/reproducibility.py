"""Provenance of the executed book: papermill metadata and package versions.

The book's chapters are executed by papermill (``make book``) before jupyter-book
renders them with execution turned off, so jupyter-book's own execution table
(``{nb-exec-table}``) is empty.  The reproducibility chapter builds it instead
from the ``metadata.papermill`` block that papermill writes into every executed
notebook, with the functions below.

The environment is pinned by the lock file ``requirements-lock.txt`` (every package of the book
and test environments with its exact version and hashes; ``make venv`` installs it, ``make lock``
regenerates it): :func:`lock_status` reports its checksum and compares it with what is installed.
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
from importlib import metadata
from pathlib import Path

import pandas as pd

#: Presentation only: a change here cannot change a computed number (irtbook.cache leaves it out).
__presentation__ = True
__all__ = [
    "DEFAULT_PACKAGES",
    "LOCK_FILE",
    "execution_table",
    "lock_status",
    "package_versions",
    "read_lock",
    "read_papermill_metadata",
]

#: Distributions whose versions the reproducibility chapter reports.
DEFAULT_PACKAGES = (
    "irtlib",
    "numpy",
    "scipy",
    "pandas",
    "torch",
    "py-irt",
    "pyro-ppl",
    "jupyter-book",
    "myst-nb",
    "sphinx",
    "papermill",
)


def read_papermill_metadata(path: str | Path) -> dict:
    """Read the papermill execution record of one executed notebook.

    Parameters
    ----------
    path : str or pathlib.Path
        An ``.ipynb`` file written by papermill.

    Returns
    -------
    dict
        Keys ``chapter`` (the file stem), ``parameters`` (dict of the parameters
        papermill injected), ``default_parameters`` (dict of the notebook's own
        ``parameters`` cell, when papermill could infer it, else empty),
        ``duration_s`` (float seconds, NaN when absent), ``start_time`` and
        ``end_time`` (ISO strings or None), ``exception`` (bool or None) and
        ``papermill_version`` (str or None).  A notebook without papermill metadata
        yields NaN/None values and empty dicts rather than an error, so the table
        shows it as "not executed by papermill".

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If ``path`` is not valid JSON.
    """
    path = Path(path)
    notebook = json.loads(path.read_text(encoding="utf-8"))
    record = notebook.get("metadata", {}).get("papermill") or {}
    duration = record.get("duration")
    default_parameters = record.get("default_parameters") or {}
    return {
        "chapter": path.stem,
        "parameters": dict(record.get("parameters") or {}),
        "default_parameters": {
            name: spec.get("default") if isinstance(spec, dict) else spec
            for name, spec in default_parameters.items()
        },
        "duration_s": float(duration) if duration is not None else float("nan"),
        "start_time": record.get("start_time"),
        "end_time": record.get("end_time"),
        "exception": record.get("exception"),
        "papermill_version": record.get("version"),
    }


def _format_parameters(parameters: dict) -> str:
    return ", ".join(f"{name}={value!r}" for name, value in parameters.items())


def execution_table(
    executed_dir: str | Path,
    exclude: tuple[str, ...] | list[str] = (),
    order: list[str] | None = None,
) -> pd.DataFrame:
    """Tabulate parameters and run time of every executed notebook in a directory.

    Parameters
    ----------
    executed_dir : str or pathlib.Path
        Directory of papermill-executed notebooks (``_build/executed`` in the
        Makefile's layout, relative to the repository root).
    exclude : sequence of str, optional
        Chapter names (file stems) to leave out, e.g. the calling notebook itself.
    order : list of str, optional
        Chapter names in the order the rows should appear (e.g. the table of
        contents); chapters not listed follow in alphabetical order.  By default
        the rows are sorted by chapter name.

    Returns
    -------
    pandas.DataFrame
        One row per notebook, columns ``chapter``, ``parameters`` (the injected
        parameters as ``NAME=value`` text), ``duration_s``, ``start_time``,
        ``end_time``, ``exception`` and ``papermill_version``.  Empty (with these
        columns) when the directory holds no notebook.

    Raises
    ------
    FileNotFoundError
        If ``executed_dir`` is not a directory.
    """
    executed_dir = Path(executed_dir)
    if not executed_dir.is_dir():
        raise FileNotFoundError(f"{executed_dir} is not a directory of executed notebooks")
    columns = [
        "chapter",
        "parameters",
        "duration_s",
        "start_time",
        "end_time",
        "exception",
        "papermill_version",
    ]
    rows = []
    for path in sorted(executed_dir.glob("*.ipynb")):
        if path.stem in set(exclude):
            continue
        record = read_papermill_metadata(path)
        record["parameters"] = _format_parameters(record["parameters"])
        rows.append({column: record[column] for column in columns})
    table = pd.DataFrame(rows, columns=columns)
    if order:
        rank = {name: i for i, name in enumerate(order)}
        keys = [(rank.get(name, len(rank)), name) for name in table["chapter"]]
        table = table.iloc[sorted(range(len(keys)), key=keys.__getitem__)]
    return table.reset_index(drop=True)


def package_versions(packages: tuple[str, ...] | list[str] = DEFAULT_PACKAGES) -> pd.DataFrame:
    """Installed versions of the given distributions, plus the Python version.

    Parameters
    ----------
    packages : sequence of str, optional
        Distribution names as pip knows them (``py-irt``, ``pyro-ppl``, ...).
        Defaults to :data:`DEFAULT_PACKAGES`.

    Returns
    -------
    pandas.DataFrame
        Columns ``package`` and ``version``; the first row is ``python``.  A
        distribution that is not installed has version ``"not installed"``.
    """
    rows = [{"package": "python", "version": platform.python_version()}]
    for name in packages:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "not installed"
        rows.append({"package": name, "version": version})
    return pd.DataFrame(rows, columns=["package", "version"])


#: The lock file, relative to the repository root (``make lock`` writes it).
LOCK_FILE = "requirements-lock.txt"

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def _normalise(name: str) -> str:
    """A distribution name as PEP 503 compares it (``Py_IRT`` -> ``py-irt``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path: str | Path) -> dict[str, str]:
    """The pins of a pip-compile lock file: normalised distribution name -> exact version.

    Parameters
    ----------
    path : str or Path
        A requirements file of ``name==version`` lines (hash continuation lines, comments and
        options are skipped).

    Returns
    -------
    dict
        ``{"numpy": "2.3.4", ...}``, in the file's order.
    """
    pins = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        match = _PIN.match(line.strip())
        if match:
            pins[_normalise(match.group(1))] = match.group(2)
    return pins


def lock_status(path: str | Path, *, installed: dict[str, str] | None = None) -> dict:
    """Whether this environment is the one the lock file pins.

    Parameters
    ----------
    path : str or Path
        The lock file (:data:`LOCK_FILE` under the repository root).
    installed : dict, optional
        Normalised name -> version of the installed distributions (default: this environment's,
        from :mod:`importlib.metadata`).

    Returns
    -------
    dict
        ``exists`` (bool), ``sha256`` (hex digest of the file's bytes, or None), ``n_pinned``,
        ``matches`` (True when every pinned distribution is installed at its pinned version),
        and ``differences``: a DataFrame with columns ``package``, ``locked``, ``installed``
        (``"not installed"`` when absent) listing each pin the environment does not satisfy.
    """
    path = Path(path)
    columns = ["package", "locked", "installed"]
    if not path.is_file():
        return {"exists": False, "sha256": None, "n_pinned": 0, "matches": False,
                "differences": pd.DataFrame(columns=columns)}
    pins = read_lock(path)
    if installed is None:
        installed = {_normalise(d.metadata["Name"]): d.version for d in metadata.distributions() if d.metadata["Name"]}
    rows = [{"package": name, "locked": version, "installed": installed.get(name, "not installed")}
            for name, version in pins.items() if installed.get(name) != version]
    return {"exists": True, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "n_pinned": len(pins),
            "matches": not rows, "differences": pd.DataFrame(rows, columns=columns)}
