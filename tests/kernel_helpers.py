"""Run a test through numpy or through one of irtlib's optional C kernels."""

from __future__ import annotations

import pytest


def numpy_or_kernel(path: str, module, monkeypatch, *, what: str) -> str:
    """Make ``module.load()`` answer None for ``path == "numpy"``; skip ``"C kernel"`` where it cannot be built.

    ``module`` is a kernel module with a ``_LOADED`` cache (:mod:`irtlib.bank.interval_kernel`,
    :mod:`irtlib.selection.score_kernel`); ``what`` names the kernel in the skip message.
    """
    if path == "numpy":
        monkeypatch.setitem(module._LOADED, "lib", None)
    elif module.load() is None:
        pytest.skip(f"{what} cannot be built here")
    return path
