"""Compressed response files read transparently: gzip, bz2 and xz, recognised from the bytes, not the name."""

from __future__ import annotations

from irtlib.errors import InputError

__all__ = ["compression_of", "decompressed"]

#: Compressed-file signatures read transparently (as the table reader does, from the bytes, not the name).
_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "xz"))


def compression_of(head: bytes) -> str | None:
    """``"gzip"``, ``"bz2"``, ``"xz"`` or None, from a file's first bytes."""
    return next((name for magic, name in _MAGIC if head.startswith(magic)), None)


def decompressed(data: bytes, *, source: str) -> bytes:
    """``data`` uncompressed when it is gzip, bz2 or xz (else as it is); a damaged archive is one InputError."""
    kind = compression_of(data[:8])
    if kind is None:
        return data
    import bz2
    import gzip
    import lzma

    try:
        return {"gzip": gzip.decompress, "bz2": bz2.decompress, "xz": lzma.decompress}[kind](data)
    except (OSError, EOFError, ValueError, lzma.LZMAError) as exc:
        raise InputError(f"{source}: cannot decompress it as {kind} ({exc})") from None
