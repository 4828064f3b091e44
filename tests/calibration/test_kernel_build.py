"""How the C kernels are built: the library's name covers everything compiled into it."""

import ctypes
import os
import shutil

import pytest

from irtlib.calibration import fused_kernel

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CC") or "cc") is None, reason="no C compiler")


def test_a_changed_local_header_builds_a_new_library(tmp_path):
    src = tmp_path / "k.c"
    src.write_text('#include "k.h"\nint value(void) { return VALUE; }\n')
    header = tmp_path / "k.h"
    header.write_text("#define VALUE 1\n")
    first = fused_kernel.compile_kernel(source=src, directory=tmp_path / "out")
    header.write_text("#define VALUE 2\n")
    second = fused_kernel.compile_kernel(source=src, directory=tmp_path / "out")
    assert first != second
    assert [ctypes.CDLL(str(p)).value() for p in (first, second)] == [1, 2]


def test_a_header_included_by_an_included_source_builds_a_new_library(tmp_path):
    (tmp_path / "base.c").write_text('#include "k.h"\nint value(void) { return VALUE; }\n')
    src = tmp_path / "variant.c"
    src.write_text('#include "base.c"\nint twice(void) { return 2 * value(); }\n')
    header = tmp_path / "k.h"
    header.write_text("#define VALUE 1\n")
    first = fused_kernel.compile_kernel(source=src, directory=tmp_path / "out")
    header.write_text("#define VALUE 3\n")
    second = fused_kernel.compile_kernel(source=src, directory=tmp_path / "out")
    assert first != second
    assert [ctypes.CDLL(str(p)).twice() for p in (first, second)] == [2, 6]


def test_the_selection_kernels_load_with_their_shared_header():
    from irtlib.selection import greedy_kernel, score_kernel

    assert score_kernel.load() is not None
    assert greedy_kernel.load() is not None
