"""Checksums of users' files and of response matrices (recorded in item banks and reports)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np

from irtlib._typing import PathLike
from irtlib.core.responses import ResponseMatrix
from irtlib.errors import InputError

__all__ = ["RECORD_SUFFIX", "check_recorded", "file_sha256", "matrix_sha256", "recorded_sha256", "sha256"]

#: Suffix of the file beside a download that records the SHA-256 seen when it was downloaded.
RECORD_SUFFIX = ".sha256"


def sha256(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: PathLike) -> str:
    """SHA-256 of a file's bytes, or of every file under a directory (relative paths included)."""
    path = Path(path)
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for p in files:
        if path.is_dir():
            digest.update(str(p.relative_to(path)).encode() + b"\0")
        with open(p, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def matrix_sha256(matrix: ResponseMatrix) -> str:
    """SHA-256 of a response matrix's content (identifiers and values), independent of file layout.

    Rows and columns are sorted first, so the same judgments in any order give the same checksum.
    """
    models, items = [str(m) for m in matrix.models], [str(i) for i in matrix.items]
    rows = sorted(range(len(models)), key=models.__getitem__)      # ids are distinct as text: one order
    cols = np.array(sorted(range(len(items)), key=items.__getitem__), dtype=np.intp)
    digest = hashlib.sha256()
    digest.update("\x1f".join(models[r] for r in rows).encode() + b"\0")
    digest.update("\x1f".join(items[c] for c in cols).encode() + b"\0")
    values = matrix.values
    step = max(1, (4 << 20) // (8 * max(1, len(items))))              # the sorted values' bytes, a few MB at a time
    for start in range(0, len(rows), step):
        digest.update(np.take(values[rows[start:start + step]], cols, axis=1))
    return digest.hexdigest()


def recorded_sha256(path: PathLike) -> str | None:
    """The SHA-256 recorded beside ``path`` when it was downloaded (``<path>.sha256``), or None.

    The record's first word, when it is 64 hex digits (as :func:`irtlib.datasets.authors.download`
    writes it); anything else (no record, an unreadable or foreign one) is None.
    """
    side = Path(path).with_name(Path(path).name + RECORD_SUFFIX)
    try:
        words = side.read_text(encoding="utf-8", errors="replace").split()
    except OSError:
        return None
    return words[0].lower() if words and re.fullmatch(r"[0-9a-fA-F]{64}", words[0]) else None


def check_recorded(path: PathLike, digest: str) -> None:
    """Refuse a file whose bytes no longer have the SHA-256 recorded when it was downloaded.

    Parameters
    ----------
    path : path-like
    digest : str
        The SHA-256 of its bytes now.

    Raises
    ------
    InputError
        ``<path>.sha256`` records another hash: the file was edited or corrupted after download.
    """
    recorded = recorded_sha256(path)
    if recorded is not None and recorded != digest:
        raise InputError(f"{path}: sha256 {digest} differs from {recorded}, recorded in {Path(path).name}"
                         f"{RECORD_SUFFIX} when it was downloaded (edited or corrupted since): delete it and "
                         "download it again")
