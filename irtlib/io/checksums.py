"""Checksums of users' files and of response matrices (recorded in item banks and reports)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from irtlib._typing import PathLike
from irtlib.core.responses import ResponseMatrix

__all__ = ["file_sha256", "matrix_sha256", "sha256"]


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
    frame = matrix.to_frame()
    frame = frame.sort_index(axis=0, key=lambda i: i.map(str)).sort_index(axis=1, key=lambda i: i.map(str))
    digest = hashlib.sha256()
    digest.update("\x1f".join(map(str, frame.index)).encode() + b"\0")
    digest.update("\x1f".join(map(str, frame.columns)).encode() + b"\0")
    digest.update(np.ascontiguousarray(frame.to_numpy(dtype=float)).tobytes())
    return digest.hexdigest()
