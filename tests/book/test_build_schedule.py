"""The Makefile's page schedule: every page that reads the stage's cache waits for the stage; the others do not."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXEC = "_build/executed"
STAGE = "_build/cache/.stage-False"


def _make_database(*settings: str) -> dict[str, set[str]]:
    """Every target's prerequisites from ``make -p`` (make's own database; nothing is run), with make ``settings``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    venv = Path(sys.executable).parent.parent
    done = subprocess.run(["make", "-p", "-q", "-n", "lint", "MANAGE_VENV=0", f"VENV={venv}", *settings], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=120)
    deps: dict[str, set[str]] = {}
    for line in done.stdout.splitlines():
        m = re.match(r"^([^\s#:=]+):(?!=)\s*(.*)$", line)
        if m and "=" not in m.group(2).split("|")[0]:
            deps.setdefault(m.group(1), set()).update(m.group(2).replace("|", " ").split())
    return deps


def _waits_for(deps: dict[str, set[str]], target: str, goal: str) -> bool:
    seen, todo = set(), [target]
    while todo:
        t = todo.pop()
        if t == goal:
            return True
        if t not in seen:
            seen.add(t)
            todo.extend(deps.get(t, ()))
    return False


def _reads_cache(page: Path) -> bool:
    code = "\n".join(c.source for c in jupytext.read(page).cells if c.cell_type == "code")
    return bool(re.search(r"CACHE_DIR|cache_dir|_build/cache", code))


@pytest.fixture(scope="module")
def database():
    if not (ROOT / "bookkit" / "irtbook" / "split_stage.py").exists():
        pytest.skip("no stage in this tree")
    return _make_database()


def test_every_page_that_reads_the_cache_waits_for_the_stage(database):
    pages = {t: ROOT / "book" / (Path(t).stem + ".md") for t in database
             if t.startswith(f"{EXEC}/") and t.endswith(".ipynb")}
    pages = {t: source for t, source in pages.items() if source.exists()}
    assert {f"{EXEC}/05_selection.ipynb", f"{EXEC}/01_data.ipynb"} <= set(pages), sorted(pages)
    for target, source in sorted(pages.items()):
        if _reads_cache(source):
            assert _waits_for(database, target, STAGE), f"{target} reads the cache but does not wait for the stage"


def test_the_pages_without_the_cache_run_beside_the_stage(database):
    for page in ("01_data", "intro"):
        assert not _reads_cache(ROOT / "book" / f"{page}.md"), page
        assert not _waits_for(database, f"{EXEC}/{page}.ipynb", STAGE), page
    assert _waits_for(database, f"{EXEC}/02_fit.ipynb", STAGE)


COMPARISON = "_build/cache/.comparison-False"


def test_the_simulation_study_reads_the_comparison_runs_of_a_full_build_and_runs_alone_otherwise(database):
    """08 waits for chapter 06's comparison job, whose first splits are its profiles; without the job, for the stage."""
    chapter = f"{EXEC}/08_simulation_study.ipynb"
    assert _waits_for(database, chapter, COMPARISON) and _waits_for(database, f"{EXEC}/06_table2.ipynb", COMPARISON)
    for settings in (("QUICK=1",), ("PARAMS=-p SEED 0",)):          # no job: the chapter computes what it needs
        deps = _make_database(*settings)
        assert not any(t.startswith("_build/cache/.comparison-") for t in deps), settings
        assert _waits_for(deps, chapter, "_build/cache/.stage-" + ("True" if settings == ("QUICK=1",) else "False"))
