"""BLAS held to one thread around the MAP engine's fits, without re-scanning the process's libraries each time.

Every fit of :mod:`irtlib.calibration.joint_map` runs with BLAS single-threaded (its products are
per-block matrix-vector products; threaded BLAS spinning against other work on a shared 2-core machine made
a fit two to six times slower). ``threadpoolctl.threadpool_limits`` finds the BLAS libraries anew at every
call, by walking every shared library the process has loaded: about 0.3 ms in a bare process and over 1 ms
in a chapter's (matplotlib, torch, ...), against a per-split fit of 5 to 40 ms. :func:`single_threaded_blas`
finds them once, on the first fit, and then sets and restores their thread counts only.

The libraries a fit calls are numpy's and scipy's BLAS, both loaded before any fit (this package imports
``scipy.linalg``), so the controller made on the first fit holds them; a BLAS library loaded later (torch's)
is not limited, and no fit calls it.

Layer rule: part of ``calibration``; imports threadpoolctl only.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager

__all__ = ["single_threaded_blas", "blas_libraries"]

_CONTROLLER: dict = {}
_LOCK = threading.Lock()


def _controller():
    """The controller of the BLAS libraries loaded by the first call (numpy's and scipy's)."""
    controller = _CONTROLLER.get("blas")
    if controller is None:
        with _LOCK:
            controller = _CONTROLLER.get("blas")
            if controller is None:
                import scipy.linalg  # noqa: F401  (scipy's BLAS loaded before the libraries are listed)
                from threadpoolctl import ThreadpoolController

                controller = _CONTROLLER["blas"] = ThreadpoolController().select(user_api="blas")
    return controller


def single_threaded_blas() -> AbstractContextManager:
    """``threadpool_limits(limits=1, user_api="blas")`` over the BLAS libraries found on the first call."""
    return _controller().limit(limits=1, user_api="blas")


def blas_libraries() -> list[list]:
    """``[implementation, version, processor core]`` of each of those libraries (a product's bits depend on them)."""
    return sorted([str(lib.get("internal_api")), str(lib.get("version")), str(lib.get("architecture"))]
                  for lib in _controller().info())
