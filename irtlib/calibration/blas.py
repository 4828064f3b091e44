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

Callers that limit whatever thread pools are loaded when they run, as ``threadpool_limits`` itself does (the
protocol's split runs, the 3PL and the extended models' fits), use :func:`thread_limits`: the same limits,
its controller made again only when a shared object was loaded or unloaded since.

Layer rule: part of ``calibration``; imports threadpoolctl only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

__all__ = ["single_threaded_blas", "blas_libraries", "thread_limits", "loaded_libraries_state"]

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


# ----------------------------------------------------------------------------------------------------------
# threadpool_limits over every library loaded now, without walking them all when none was loaded since

def _loader_counters() -> Callable[[], tuple[int, int] | None] | None:
    """A function returning glibc's count of shared objects loaded and unloaded so far, or None where unknown.

    ``dl_iterate_phdr`` hands its callback ``dlpi_adds`` and ``dlpi_subs`` (glibc 2.4 on): how many objects the
    process has loaded and unloaded since it started, the same in every entry; the callback reads the first
    entry and stops the walk, so the question costs one call whatever the number of libraries.
    """
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return None

    class _Info(ctypes.Structure):
        _fields_ = [("addr", ctypes.c_uint64), ("name", ctypes.c_char_p), ("phdr", ctypes.c_void_p),
                    ("phnum", ctypes.c_uint16), ("adds", ctypes.c_ulonglong), ("subs", ctypes.c_ulonglong)]

    try:
        iterate = ctypes.CDLL(None).dl_iterate_phdr
    except (OSError, AttributeError):
        return None
    callback_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_Info), ctypes.c_size_t, ctypes.c_void_p)
    seen: list = []

    def first(info, size, _data):
        seen.append((info.contents.adds, info.contents.subs) if size >= ctypes.sizeof(_Info) else None)
        return 1

    callback = callback_type(first)
    iterate.argtypes, iterate.restype = [callback_type, ctypes.c_void_p], ctypes.c_int

    def counters():
        seen.clear()
        iterate(callback, None)
        return seen[0] if seen else None

    return counters if counters() is not None else None


def loaded_libraries_state() -> tuple[int, int] | None:
    """``(loaded, unloaded)`` shared objects so far (glibc's counters), or None where they cannot be read."""
    counters = _CONTROLLER.get("counters", False)
    if counters is False:
        with _LOCK:
            counters = _CONTROLLER.get("counters", False)
            if counters is False:
                counters = _CONTROLLER["counters"] = _loader_counters()
    return None if counters is None else counters()


def thread_limits(limits: int, user_api: str | None = None) -> AbstractContextManager:
    """``threadpoolctl.threadpool_limits(limits=limits, user_api=user_api)``, its libraries found once per loader state.

    ``threadpool_limits`` lists the process's thread-pool libraries anew at every call by walking every
    shared object loaded (about 3 ms in a chapter's process, with torch's libraries; 0.03 ms to set and
    restore the limits themselves). Here the controller is kept and reused while glibc's counts of objects
    loaded and unloaded (:func:`loaded_libraries_state`) have not changed since it was made, so it holds
    the libraries a fresh call would find: the same libraries limited, to the same counts, and restored
    the same way. Where the counts cannot be read, every call makes its controller as
    ``threadpool_limits`` does.
    """
    from threadpoolctl import ThreadpoolController

    state = loaded_libraries_state()
    key = ("limits", user_api)
    with _LOCK:
        kept = _CONTROLLER.get(key)
        if state is None or kept is None or kept[0] != state:
            kept = (state, ThreadpoolController())
            if state is not None:
                _CONTROLLER[key] = kept
    return kept[1].limit(limits=limits, user_api=user_api)
