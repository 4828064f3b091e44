"""irtlib.calibration.blas.thread_limits: threadpool_limits with its controller kept while no library is loaded."""

from __future__ import annotations

import importlib
import sys

import pytest

threadpoolctl = pytest.importorskip("threadpoolctl")

from irtlib.calibration import blas  # noqa: E402


def _pools():
    return sorted((d["filepath"], d["num_threads"]) for d in threadpoolctl.threadpool_info())


@pytest.mark.parametrize("user_api", [None, "blas"])
def test_thread_limits_limit_and_restore_what_threadpool_limits_does(user_api):
    before = _pools()
    with threadpoolctl.threadpool_limits(limits=1, user_api=user_api):
        reference = _pools()
    assert _pools() == before
    for _ in range(2):                                       # made, then kept
        with blas.thread_limits(1, user_api=user_api):
            assert _pools() == reference
        assert _pools() == before


def test_thread_limits_keeps_its_controller_until_a_library_is_loaded():
    if blas.loaded_libraries_state() is None:
        pytest.skip("glibc's loader counters are not readable here")
    with blas.thread_limits(1):
        pass
    kept = blas._CONTROLLER[("limits", None)]
    with blas.thread_limits(1):
        pass
    assert blas._CONTROLLER[("limits", None)] is kept
    state = blas.loaded_libraries_state()
    name = next((m for m in ("_ctypes_test", "_testbuffer", "_testcapi", "_testinternalcapi", "xxlimited")
                 if m not in sys.modules and importlib.util.find_spec(m) is not None), None)
    if name is None:
        pytest.skip("no extension module left to load")
    importlib.import_module(name)                            # a new shared object in the process
    assert blas.loaded_libraries_state()[0] > state[0]
    with blas.thread_limits(1):
        pass
    assert blas._CONTROLLER[("limits", None)] is not kept
