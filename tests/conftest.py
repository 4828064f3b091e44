"""Shared fixtures: small data sets simulated from the 2PL model."""

from __future__ import annotations

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


def _start_rank(item) -> int:
    """0 for a slow or browser test, 1 for a book test, 2 for the rest."""
    if item.get_closest_marker("slow") or item.get_closest_marker("browser"):
        return 0
    return 1 if item.get_closest_marker("book") else 2


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in BOOK_TEST_MODULES:
            item.add_marker(pytest.mark.book)
    # Test files holding slow, browser or book tests run first (in their own order, which xdist keeps
    # with --no-loadscope-reorder: the Makefile), so that the last files a worker takes are short ones
    # and no worker waits idle while the other finishes a long file.
    rank: dict = {}
    for item in items:
        rank[item.path] = min(rank.get(item.path, 2), _start_rank(item))
    items.sort(key=lambda item: rank[item.path])
