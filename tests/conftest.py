"""Shared fixtures: small data sets simulated from the 2PL model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest


def simulate_2pl(n_models: int, n_items: int, *, seed: int = 0, sd_log_a: float = 0.5,
                 missing: float = 0.0):
    """Responses simulated from the 2PL with known parameters.

    Returns ``(values, theta, a, b)`` with values of shape ``(n_models, n_items)``.
    """
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_models)
    b = rng.normal(size=n_items)
    a = np.exp(rng.normal(0.0, sd_log_a, size=n_items))
    p = 1.0 / (1.0 + np.exp(-a * (theta[:, None] - b)))
    values = (rng.random((n_models, n_items)) < p).astype(float)
    if missing:
        values[rng.random(values.shape) < missing] = np.nan
    return values, theta, a, b


@pytest.fixture(scope="session")
def sim_80x2000():
    """80 models x 2,000 items from the 2PL with the paper's priors (log a ~ N(0, 1)), 1% missing."""
    return simulate_2pl(80, 2000, seed=0, sd_log_a=1.0, missing=0.01)


#: Test modules that build a book, read the built one (_build/) or drive the browser: marked
#: ``book``, they are left out of the fast ``make test`` and run by ``make test-all`` (CI).
BOOK_TEST_MODULES = frozenset({
    "test_book_build.py", "test_book_content.py", "test_book_html.py", "test_browser.py", "test_course_kit.py",
    "test_kernel_forkserver.py",
})


#: CPU seconds (worker and subprocesses, setup and teardown included) of the 30 costliest test files in one
#: ``make test-all`` (benchmarks/RESULTS.md, section `ctest`; measured with benchmarks/pytest_timeline.py at
#: load 5 to 16, so the seconds are inflated, the proportions are what matter): they start first, the costliest
#: first, so that the last files a worker takes are short ones and the two workers end together. The other files
#: (each under 11 CPU s) follow in the order of :func:`_start_rank`. tests/test_test_selection.py checks that
#: every file named here exists.
FILE_CPU_SECONDS = {
    "test_hostile_input.py": 55, "book/test_book_build.py": 44, "book/test_command_server.py": 42,
    "calibration/test_calibrate_batch.py": 40, "book/test_primer.py": 37, "test_light_install.py": 35,
    "calibration/test_calibrate.py": 32, "cli/test_cli.py": 32, "book/test_kernel_forkserver.py": 28,
    "datasets/test_real_data.py": 28, "protocol/test_protocols.py": 26, "book/test_browser.py": 25,
    "book/test_book_wheel.py": 21, "book/test_course_kit.py": 21, "book/test_book_tools.py": 19,
    "selection/test_certify.py": 18, "book/test_figure_cache.py": 18, "test_hostile_sessions_and_files.py": 17,
    "book/test_pipeline.py": 17, "test_layers.py": 17, "calibration/test_pyirt_engine.py": 16,
    "book/test_own_benchmark.py": 15, "book/test_book_html.py": 15, "fit/test_fit_checks.py": 14,
    "test_imports.py": 13, "selection/test_cat.py": 13, "viz/test_plots.py": 12, "datasets/test_datasets.py": 12,
    "bank/test_inspect_adaptive.py": 11, "selection/test_engine.py": 11,
}
TESTS = Path(__file__).resolve().parent


def _start_rank(item) -> int:
    """0 for a slow or browser test, 1 for a book test, 2 for the rest."""
    if item.get_closest_marker("slow") or item.get_closest_marker("browser"):
        return 0
    return 1 if item.get_closest_marker("book") else 2


def _file_key(path, rank: int) -> tuple:
    """The files of :data:`FILE_CPU_SECONDS` first, costliest first; then the others by rank."""
    try:
        seconds = FILE_CPU_SECONDS.get(Path(path).resolve().relative_to(TESTS).as_posix())
    except ValueError:   # a test file outside tests/
        seconds = None
    return (0, -seconds, 0) if seconds is not None else (1, 0, rank)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in BOOK_TEST_MODULES:
            item.add_marker(pytest.mark.book)
    # Test files run in this order (xdist keeps it with --no-loadscope-reorder: the Makefile; one file per
    # worker at a time with --dist loadfile): the costliest known files first, then those holding slow, browser
    # or book tests, then the rest, so that no worker waits idle while the other finishes a long file.
    rank: dict = {}
    for item in items:
        rank[item.path] = min(rank.get(item.path, 2), _start_rank(item))
    key = {path: _file_key(path, r) for path, r in rank.items()}
    items.sort(key=lambda item: key[item.path])
