"""The batched py-irt fit's hyper-parameter terms and loss in numpy: torch's operations, bit for bit.

:func:`irtlib.calibration.pyirt_batch._negative_elbo` computes the hierarchical model's hyper-parameters'
gradient and every site's log density with numpy's float32 operations and torch's transcendental
functions; :func:`~irtlib.calibration.pyirt_batch._negative_elbo_torch` is the same in torch operations.
Whole fits with each (hierarchical and the text's fixed priors; one split, ragged splits with missing
cells, many equal splits) must give the same abilities, parameters, best epochs and every epoch's loss.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from irtlib.calibration import pyirt_batch  # noqa: E402


def _torch_terms(torch, problem, lik, streams, flat, grad):
    """The reference: torch's operations, their (S,) tensors stacked as the fit's numpy loop takes them."""
    log_q, log_p = pyirt_batch._negative_elbo_torch(torch, problem, lik, streams, flat, grad)
    return np.stack([t.numpy() for t in log_q]), np.stack([t.numpy() for t in log_p])


def _bits(x):
    x = np.ascontiguousarray(x)
    return x.view(np.uint64) if x.dtype == np.float64 else x


@pytest.mark.parametrize("priors", ["hierarchical", "paper"])
@pytest.mark.parametrize(("n_models", "m", "sizes", "missing", "epochs"), [
    (31, 29, [31], 0.0, 300),                       # a whole-benchmark fit: one split of every row
    (40, 70, [30, 25, 40, 12, 2], 0.05, 200),       # ragged splits (padded rows), missing cells
    (20, 37, [20] * 12, 0.0, 150),                  # many equal splits
    (25, 16, [3, 2, 25, 24], 0.3, 250),             # tiny splits, many missing cells
])
def test_numpy_terms_give_the_torch_operations_fit_bit_for_bit(monkeypatch, priors, n_models, m, sizes, missing,
                                                               epochs):
    rng = np.random.default_rng(n_models * 1000 + m)
    x = (rng.random((n_models, m)) < rng.uniform(0.2, 0.8, m)).astype(float)
    x[rng.random(x.shape) < missing] = np.nan
    rows = [np.sort(rng.choice(n_models, k, replace=False)) for k in sizes]
    seeds = [int(s) for s in rng.integers(0, 4, len(sizes))]
    ours = pyirt_batch.fit_hierarchical_batch(x, rows, epochs=epochs, seed=seeds, priors=priors)
    monkeypatch.setattr(pyirt_batch, "_negative_elbo", _torch_terms)
    theirs = pyirt_batch.fit_hierarchical_batch(x, rows, epochs=epochs, seed=seeds, priors=priors)
    for field in ("a", "b", "theta", "best_epoch", "loss"):
        assert np.array_equal(_bits(getattr(ours, field)), _bits(getattr(theirs, field))), field
    if priors == "hierarchical":
        assert len(set(ours.best_epoch.tolist())) > 1 or len(sizes) == 1   # the splits' own best epochs


def test_site_sum_adds_the_three_sites_as_torch_sums_them():
    rng = np.random.default_rng(3)
    terms = (rng.normal(0.0, 1.0, (500, 3)) * 10.0 ** rng.uniform(-4, 4, (500, 3))).astype(np.float32)
    out = np.empty(500, dtype=np.float32)
    pyirt_batch._site_sum(terms, out)
    assert np.array_equal(out, torch.from_numpy(terms).sum(1).numpy())


@pytest.mark.parametrize(("sizes", "missing"), [([7, 7, 7], 0.0), ([7, 3, 5], 0.0), ([7, 7], 0.2), ([2, 6, 4], 0.3)])
def test_fused_cells_are_the_torch_cells_sign_times_weight_padded(sizes, missing):
    rng = np.random.default_rng(len(sizes) * 10 + int(missing * 10))
    x = (rng.random((9, 13)) < 0.5).astype(float)
    x[rng.random(x.shape) < missing] = np.nan
    rows = [np.sort(rng.choice(9, k, replace=False)) for k in sizes]
    problem = pyirt_batch._Problem.build(torch, x, rows)
    width = 16
    sign, weight = problem.sign, problem.weight
    cells = sign if weight is None else sign * weight
    expected = torch.zeros((len(sizes), max(sizes), width))
    expected[:, :, :13] = cells
    assert np.array_equal(problem.fused_cells(width).numpy().view(np.uint32), expected.numpy().view(np.uint32))
