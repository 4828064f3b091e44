"""The one network call of irtlib's data loaders: download a URL whole, or fail in one line."""

from __future__ import annotations

from irtlib.errors import InputError

__all__ = ["fetch_url"]


def fetch_url(url: str, *, timeout: float = 300) -> bytes:
    """Download ``url`` whole, or fail in one line.

    The one network call of the data loaders (real AIR-Bench, HELM, the authors' files); they
    accept a ``fetch`` argument so tests can replace it.

    Raises
    ------
    InputError
        ``url`` is not a URL urllib can fetch (no scheme, an unknown one), or the response is
        shorter than its Content-Length.
    OSError
        The network failed: refused, timed out (``timeout`` seconds without data), or the server
        closed the connection before the end of the response.
    """
    import http.client
    import urllib.request

    try:
        req = urllib.request.Request(url, headers={"User-Agent": "irtlib"})
    except ValueError as exc:
        raise InputError(f"{url}: not a URL irtlib can download ({exc}); give http://, https:// or file://") from None
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:      # noqa: S310 (https URLs built by callers)
            data = resp.read()
            length = resp.headers.get("Content-Length")
    except http.client.IncompleteRead as exc:
        raise ConnectionError(f"{url}: the server closed the connection after {len(exc.partial)} bytes, before the "
                              "end of the file (a flaky mirror or network: try again)") from None
    except http.client.HTTPException as exc:
        raise ConnectionError(f"{url}: bad HTTP response ({type(exc).__name__}: {exc})") from None
    except ValueError as exc:                     # urllib's "unknown url type" and the like
        raise InputError(f"{url}: not a URL irtlib can download ({exc}); give http://, https:// or file://") from None
    if length is not None and int(length) != len(data):
        raise InputError(f"{url}: received {len(data)} bytes of {length} (truncated download)")
    return data
