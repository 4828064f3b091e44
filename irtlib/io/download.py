"""The one network call of irtlib's data loaders: download a URL whole, or fail in one line."""

from __future__ import annotations

from irtlib.errors import InputError

__all__ = ["fetch_url"]


def fetch_url(url: str, *, timeout: float = 300) -> bytes:
    """Download ``url`` whole; a response shorter than its Content-Length raises ``ValueError``.

    The one network call of the data loaders (real AIR-Bench, HELM); they accept a ``fetch``
    argument so tests can replace it.
    """
    import urllib.request

    req = urllib.request.Request(url, headers={"User-Agent": "irtlib"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:      # noqa: S310 (https URLs built by callers)
        data = resp.read()
        length = resp.headers.get("Content-Length")
    if length is not None and int(length) != len(data):
        raise InputError(f"{url}: received {len(data)} bytes of {length} (truncated download)")
    return data
