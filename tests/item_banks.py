"""Random 2PL banks with the cases that break item rankings: exact ties and a negative discrimination."""

from __future__ import annotations

import numpy as np


def tricky_bank(rng: np.random.Generator, n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """``(a, b)`` of ``n_items`` >= 80 random 2PL items, with ties and a negative discrimination.

    Items 40 to 79 repeat items 0 to 39 (exact ties in information); item 5 discriminates negatively.
    """
    a = np.exp(rng.normal(0.2, 0.6, n_items))
    b = rng.normal(0, 1.5, n_items)
    a[40:80], b[40:80] = a[:40], b[:40]
    a[5] = -1.3
    return a, b


def tricky_models(rng: np.random.Generator, n_models: int, n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """``(theta, available)`` of ``n_models`` >= 8 models, with abilities at the grids' edges and an empty row.

    Models 0 to 2 sit outside or at the edge of a +-4 grid; model 7 has no item left; about 5% of the
    other cells are unavailable.
    """
    theta = rng.normal(0, 1.3, n_models)
    theta[:3] = [4.5, -6.0, 3.99]
    available = rng.random((n_models, n_items)) < 0.95
    available[7] = False
    return theta, available
