"""The fast ``make test`` and the full ``make test-all`` select what the README says."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from conftest import BOOK_TEST_MODULES, FILE_CPU_SECONDS, _file_key

ROOT = Path(__file__).resolve().parents[1]


def test_every_book_test_module_exists():
    """A renamed book test would silently join the fast suite: every listed module must exist."""
    for name in BOOK_TEST_MODULES:
        assert (ROOT / "tests" / "book" / name).is_file(), name


def test_the_files_run_first_exist_and_go_costliest_first():
    """A renamed costly file would silently lose its place at the start: every listed file must exist."""
    for name in FILE_CPU_SECONDS:
        assert (ROOT / "tests" / name).is_file(), name
    listed = [ROOT / "tests" / name for name in FILE_CPU_SECONDS]
    other = ROOT / "tests" / "test_test_selection.py"
    order = sorted([other, *listed], key=lambda path: _file_key(path, 0))
    assert order[-1] == other
    assert [FILE_CPU_SECONDS[p.relative_to(ROOT / "tests").as_posix()] for p in order[:-1]] == sorted(
        FILE_CPU_SECONDS.values(), reverse=True)


def test_the_fast_suite_leaves_out_exactly_the_registered_markers():
    markers = {line.split(":")[0] for line in
               tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]}
    makefile = (ROOT / "Makefile").read_text()
    fast = re.search(r'^FAST_TESTS := -m "([^"]+)"', makefile, flags=re.M).group(1)
    assert set(re.findall(r"not (\w+)", fast)) == markers == {"book", "browser", "slow"}
    # the whole suite, with coverage of irtlib and irtbook unless COVERAGE=0 is asked for
    assert re.search(r"^test-all: .*\n\t\$\(VPY\) -m pytest \$\(COV_ARGS\) ", makefile, flags=re.M)
    assert re.search(r"^COVERAGE \?= 1$", makefile, flags=re.M)
    assert re.search(r"^COV_ARGS := \$\(if \$\(filter 0 [^)]*,\$\(COVERAGE\)\),,--cov=irtlib --cov=irtbook ",
                     makefile, flags=re.M)
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test-all" in ci and "make book QUICK=1" in ci


def test_make_venv_installs_the_lock_with_hashes():
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^\$\(VENV_STAMP\): pyproject.toml bookkit/pyproject.toml \$\(LOCK\)\n((?:\t.*\n)+)",
                       makefile, flags=re.M).group(1)
    assert "pip install --require-hashes --no-deps -r $(LOCK)" in recipe
    assert "pip install --no-deps --no-build-isolation -e . -e bookkit" in recipe
    assert re.search(r"^LOCK := requirements-lock.txt$", makefile, flags=re.M)
    assert "-r requirements-lock.txt" in (ROOT / "environment.yml").read_text()
