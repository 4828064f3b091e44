"""A pytest plugin recording, for each test, its wall span and the CPU it cost, one JSON line per test.

Where ``make test-all``'s wall time goes (issue 26, `ctest`): each xdist worker appends to
``$TIMELINE_OUT_<worker>.jsonl`` the test's id, its start and end (``time.time()``, setup and teardown
included) and the CPU seconds of the worker itself and of the subprocesses it waited for in that span
(``getrusage``; a grandchild's CPU counts only once its parent has reaped it, e.g. chromium's at the browser
fixture's teardown). ``benchmarks/timeline_report.py`` summarises the files. Load it by name from a directory
on the workers' path, e.g. copied into the venv's site-packages (``PYTHONPATH`` would reach the tests' own
subprocesses too)::

    TIMELINE_OUT=/tmp/tl make test-all PYTEST_ARGS="-p pytest_timeline --durations=60"
"""

from __future__ import annotations

import json
import os
import resource
import time

import pytest

_OUT = os.environ.get("TIMELINE_OUT", "timeline")


def _cpu() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, children.ru_utime + children.ru_stime


def _write(record: dict) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(f"{_OUT}_{worker}.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps({**record, "w": worker}) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    t0, (self0, children0) = time.time(), _cpu()
    yield
    t1, (self1, children1) = time.time(), _cpu()
    _write({"id": item.nodeid, "t0": t0, "t1": t1, "self": self1 - self0, "children": children1 - children0})


def pytest_sessionstart(session):
    now, (me, children) = time.time(), _cpu()
    _write({"id": "SESSIONSTART", "t0": now, "t1": now, "self": me, "children": children})
