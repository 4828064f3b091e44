r"""Writing and reading the simulated release: compact, checksummed, byte-reproducible files.

Layout of a release directory (the repository's ``data/``)::

    manifest.json                       generator version, seed, and per file: sha256, bytes,
                                        rows, columns, sha256 of the uncompressed CSV
    <benchmark>/responses.csv.gz        raw responses in the benchmark's native form (long)
    <benchmark>/items.csv.gz            item metadata (category, cluster, variant, key, ...)
    <benchmark>/models.csv.gz           model metadata (population, generating traits)

Every file is a CSV (``\n`` line ends, floats with 10 significant digits) compressed by gzip at
level 9 with a zero modification time and no file name in the header, so the same tables always
give the same bytes. Files are written atomically by :func:`irtlib.io.atomic_write` (a temporary
file in the same directory, then ``os.replace``, with the umask's permissions): a failure never
leaves a half-written file, and an existing file with different
content is never overwritten unless asked.
"""

from __future__ import annotations

import gzip
import io
import json
import os  # noqa: F401 - kept as release.os (tests patch os.replace through it)
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from irtlib.io.atomic import write_if_changed
from irtlib.io.checksums import sha256

from .._typing import PathLike
from ..errors import InputError
from . import simulate as _sim

__all__ = [
    "TABLES", "MANIFEST", "csv_bytes", "gzip_bytes", "release_files",
    "write_release", "check_release", "read_manifest", "read_table", "verify_file",
]

#: The three tables of each benchmark, in the order they are written.
TABLES = ("responses", "items", "models")
MANIFEST = "manifest.json"


def csv_bytes(df: pd.DataFrame) -> bytes:
    r"""A DataFrame as deterministic CSV bytes (UTF-8, ``\n``, no index, ``%.10g`` floats)."""
    text = df.to_csv(index=False, lineterminator="\n", float_format="%.10g")
    return text.encode("utf-8")


def gzip_bytes(data: bytes) -> bytes:
    """Gzip ``data`` reproducibly: level 9, modification time 0, no file name in the header."""
    return gzip.compress(data, compresslevel=9, mtime=0)


def release_files(name: str, *, seed: int = _sim.DEFAULT_SEED) -> dict:
    """Simulate one benchmark and render its files in memory.

    Returns
    -------
    dict
        Relative path (``"<name>/<table>.csv.gz"``) -> ``(bytes, manifest entry)``.
    """
    sim = _sim.simulate(name, seed=seed)
    out = {}
    for table in TABLES:
        df = getattr(sim, table)
        raw = csv_bytes(df)
        data = gzip_bytes(raw)
        entry = {"sha256": sha256(data), "bytes": len(data), "content_sha256": sha256(raw),
                 "rows": int(len(df)), "columns": list(map(str, df.columns))}
        out[f"{name}/{table}.csv.gz"] = (data, entry)
    return out


def _benchmark_entry(name: str, files: dict, seed: int) -> dict:
    spec = _sim.SPECS[name]
    responses = files[f"{name}/responses.csv.gz"][1]
    return {"display_name": spec.display_name, "shape": [spec.n_models, spec.n_items],
            "n_observations": responses["rows"], "response_format": spec.response_format,
            "n_judges": spec.n_judges if spec.response_format == "graded" else None,
            "generator_version": _sim.GENERATOR_VERSION, "seed": seed,
            "files": sorted(files)}


def read_manifest(data_dir: PathLike) -> dict:
    """Read ``manifest.json`` from a release directory.

    Raises
    ------
    FileNotFoundError
        No manifest there.
    ValueError
        The manifest is not valid JSON or lacks its ``files`` / ``benchmarks`` sections.
    """
    path = Path(data_dir) / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"no {MANIFEST} in {data_dir}: not a release directory "
                                f"(regenerate with scripts/generate_data.py)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    for key in ("files", "benchmarks"):
        if key not in manifest:
            raise InputError(f"{path}: missing the {key!r} section")
    return manifest


def write_release(data_dir: PathLike, names: Sequence[str] | None = None, *, seed: int = _sim.DEFAULT_SEED,
                  overwrite: bool = False) -> dict:
    """Generate benchmarks and write their files and the manifest.

    Parameters
    ----------
    data_dir : path-like
        Release directory (created if needed).
    names : sequence of str, optional
        Benchmarks to (re)generate; default all six. Entries of other benchmarks already in the
        manifest are kept.
    seed : int
    overwrite : bool
        Replace files whose content differs (otherwise they raise ``FileExistsError`` before
        anything is written).

    Returns
    -------
    dict
        The manifest written.
    """
    data_dir = Path(data_dir)
    names = list(_sim.SPECS) if names is None else list(names)
    for n in names:
        if n not in _sim.SPECS:
            raise InputError(f"unknown simulated benchmark {n!r}; choose from {sorted(_sim.SPECS)}")
    try:
        manifest = read_manifest(data_dir)
    except FileNotFoundError:
        manifest = {"files": {}, "benchmarks": {}}
    rendered = {n: release_files(n, seed=seed) for n in names}
    if not overwrite:     # refuse before writing anything
        for files in rendered.values():
            for rel, (data, _) in files.items():
                path = data_dir / rel
                if path.exists() and path.read_bytes() != data:
                    raise FileExistsError(f"{path} exists with different content; pass "
                                          f"overwrite=True (--force) to replace it")
    for n, files in rendered.items():
        for rel, (data, entry) in files.items():
            write_if_changed(data_dir / rel, data, force=overwrite)
            manifest["files"][rel] = entry
        manifest["benchmarks"][n] = _benchmark_entry(n, files, seed)
    manifest = {
        "description": "Simulated release of six LLM safety benchmarks (irtlib.datasets.simulate). "
                       "SIMULATED data, not real model responses.",
        "generator": "irtlib.datasets.simulate",
        "generator_version": _sim.GENERATOR_VERSION,
        "seed": seed,
        "benchmarks": {k: manifest["benchmarks"][k] for k in sorted(manifest["benchmarks"])},
        "files": {k: manifest["files"][k] for k in sorted(manifest["files"])},
    }
    text = json.dumps(manifest, indent=2, sort_keys=False) + "\n"
    write_if_changed(data_dir / MANIFEST, text.encode("utf-8"), force=True)
    return manifest


def check_release(data_dir: PathLike, names: Sequence[str] | None = None, *, seed: int | None = None) -> list:
    """Regenerate benchmarks in memory and compare them with the files and the manifest.

    Parameters
    ----------
    data_dir : path-like
    names : sequence of str, optional
        Default: every benchmark in the manifest.
    seed : int, optional
        Default: the manifest's seed.

    Returns
    -------
    list of str
        One line per problem (missing file, checksum mismatch, bytes differ from a fresh
        regeneration); empty when the release is byte-identical to what the code generates.
    """
    data_dir = Path(data_dir)
    manifest = read_manifest(data_dir)
    seed = manifest.get("seed", _sim.DEFAULT_SEED) if seed is None else seed
    names = list(manifest["benchmarks"]) if names is None else list(names)
    problems = []
    if manifest.get("generator_version") != _sim.GENERATOR_VERSION:
        problems.append(f"manifest generator_version {manifest.get('generator_version')!r} != "
                        f"code's {_sim.GENERATOR_VERSION!r}")
    for n in names:
        for rel, (data, entry) in release_files(n, seed=seed).items():
            path = data_dir / rel
            recorded = manifest["files"].get(rel)
            if recorded is None:
                problems.append(f"{rel}: not in the manifest")
            elif recorded["sha256"] != entry["sha256"]:
                problems.append(f"{rel}: manifest sha256 {recorded['sha256'][:12]} != regenerated "
                                f"{entry['sha256'][:12]}")
            if not path.exists():
                problems.append(f"{rel}: file missing")
            elif path.read_bytes() != data:
                on_disk = path.read_bytes()
                same_content = False
                try:
                    same_content = sha256(gzip.decompress(on_disk)) == entry["content_sha256"]
                except (OSError, EOFError, zlib.error):
                    pass
                problems.append(f"{rel}: bytes differ from a fresh regeneration"
                                + (" (same CSV content: only the gzip stream differs, e.g. "
                                   "another zlib)" if same_content else ""))
    return problems


def verify_file(path: PathLike, entry: dict) -> bytes:
    """Read a release file and check it against its manifest entry.

    Returns
    -------
    bytes
        The file's (compressed) bytes.

    Raises
    ------
    FileNotFoundError
        The file is missing.
    ValueError
        Its size or SHA-256 differs from the manifest (truncated or corrupted download, or
        an edited file); the message names the file.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing (listed in the manifest)")
    data = path.read_bytes()
    if "bytes" in entry and len(data) != entry["bytes"]:
        raise InputError(f"{path}: {len(data)} bytes, the manifest says {entry['bytes']} "
                         f"(truncated or corrupted file)")
    digest = sha256(data)
    if digest != entry["sha256"]:
        raise InputError(f"{path}: sha256 {digest} does not match the manifest's "
                         f"{entry['sha256']} (corrupted or edited file)")
    return data


def read_table(data_dir: PathLike, rel: str, *, manifest: dict | None = None, dtype: Any | None = None) -> pd.DataFrame:
    """Read one release table after verifying its checksum.

    Parameters
    ----------
    data_dir : path-like
    rel : str
        Relative path, e.g. ``"harmbench/responses.csv.gz"``.
    manifest : dict, optional
        Already-read manifest (default: read it).
    dtype : optional
        Passed to :func:`pandas.read_csv`.
    """
    manifest = read_manifest(data_dir) if manifest is None else manifest
    entry = manifest["files"].get(rel)
    path = Path(data_dir) / rel
    if entry is None:
        raise InputError(f"{path}: not listed in {Path(data_dir) / MANIFEST}")
    data = verify_file(path, entry)
    try:
        raw = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{path}: not a valid gzip file ({exc})") from None
    df = pd.read_csv(io.BytesIO(raw), dtype=dtype, keep_default_na=False, na_values=[""])
    if list(df.columns) != entry.get("columns", list(df.columns)):
        raise InputError(f"{path}: columns {list(df.columns)} differ from the manifest's {entry['columns']}")
    if len(df) != entry.get("rows", len(df)):
        raise InputError(f"{path}: {len(df)} rows, the manifest says {entry['rows']}")
    return df
