"""irtlib.calibration.fused_kernel.verified: a kernel's load check runs once per library, check and numpy.

The answer is kept beside the compiled library; a later process (here: a fresh cache dict) reads it instead
of running the check, a failed check is kept as failed, and anything in the key (the check, irtlib's
sources) or ``IRTLIB_KERNEL_RECHECK=1`` runs it again.
"""

from __future__ import annotations

import ctypes
import shutil

import pytest

from irtlib.calibration import fused_kernel

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    source = tmp_path / "tiny.c"
    source.write_text("int one(void) { return 1; }\n")
    monkeypatch.setenv("IRTLIB_KERNEL_DIR", str(tmp_path / "kernels"))
    monkeypatch.delenv("IRTLIB_KERNEL_RECHECK", raising=False)
    return source


def _counting(answer: bool):
    calls = []

    def check(lib):
        calls.append(lib.one())
        return answer
    return check, calls


def _load(source, check):
    return fused_kernel.verified(source, ctypes.CDLL, switch="IRTLIB_TINY_KERNEL", matches=check, cache={})


def test_a_passed_check_is_read_back_not_run_again(tiny):
    check, calls = _counting(True)
    first, second = _load(tiny, check), _load(tiny, check)
    assert first is not None and second is not None and second.one() == 1
    assert calls == [1]
    assert len(list((tiny.parent / "kernels").glob("*.check-*"))) == 1


def test_a_failed_check_is_kept_as_failed(tiny):
    check, calls = _counting(False)
    assert _load(tiny, check) is None and _load(tiny, check) is None
    assert calls == [1]


def test_recheck_runs_the_check_again(tiny, monkeypatch):
    check, calls = _counting(True)
    _load(tiny, check)
    monkeypatch.setenv("IRTLIB_KERNEL_RECHECK", "1")
    assert _load(tiny, check) is not None
    assert calls == [1, 1]


def test_another_check_or_changed_sources_run_it_again(tiny, monkeypatch):
    check, calls = _counting(True)
    other, other_calls = _counting(True)
    other.__qualname__ = "another_check"
    _load(tiny, check)
    _load(tiny, other)
    assert (calls, other_calls) == ([1], [1])
    monkeypatch.setitem(fused_kernel._IRTLIB_SOURCES, "digest", "edited")
    _load(tiny, check)
    assert calls == [1, 1]


def test_the_switch_still_turns_the_kernel_off(tiny, monkeypatch):
    check, calls = _counting(True)
    monkeypatch.setenv("IRTLIB_TINY_KERNEL", "0")
    assert _load(tiny, check) is None and calls == []
