"""The authors' py-irt calibration: one py-irt fit (engine="pyirt-authors") and the batched fit.

Against the authors' own per-split fits of SimpleSafetyTests (../shared/realdata/paper/authors_fits),
against py-irt itself (same objective, same random draws), on simulated 2PL data (recovery), and on
hand-made cases (per-split best epoch, batch independence, gradient, bad input).

Measured here (torch 2.13.0, pyro 1.9.2, py-irt 0.7.1): engine="pyirt-authors" reproduces the
authors' split-0 parameters to 1.4e-6 (a) and 4.8e-7 (b); the batched fit of all 100 splits to at most
1.2e-4 (a, which reaches 11: 1.4e-5 in log a) and 3.4e-5 (b). With a fixed seed SVI repeats its
random draws exactly (torch's CPU generator is the same on every machine), so what a fresh machine can change is float
rounding (other SIMD code paths), which the 1,000 steps carry along without blowing up. The tolerance
1e-3 on b and on log a is ten times the largest difference measured and far below what a different
random draw gives (two seeds differ by about 0.1).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pyro = pytest.importorskip("pyro")

from irtbook.authors_fits import authors_train_rows, read_authors_fits  # noqa: E402
from irtlib.calibration.joint_map import fit_2pl  # noqa: E402
from irtlib.calibration.pyirt_batch import fit_2pl_splits, fit_hierarchical_batch  # noqa: E402
from irtlib.core.responses import ResponseMatrix  # noqa: E402
from irtlib.errors import InputError  # noqa: E402
from irtlib.io import jsonl  # noqa: E402

PAPER = Path(__file__).resolve().parents[3] / "shared" / "realdata" / "paper"
SST = PAPER / "helm_simplesafety_irt_data.jsonl"
FITS = PAPER / "authors_fits" / "helm_simplesafety_100samples_test10_4bquant_minvar0.01_step20_items.csv"
needs_data = pytest.mark.skipif(not (SST.exists() and FITS.exists()),
                                reason="the paper's data is not beside the checkout")
TOL = 1e-3


def read_jsonl(path: Path) -> tuple[np.ndarray, list[str], list[str]]:
    """The authors' file through irtlib's own reader: values, model ids, item ids in file order."""
    m = jsonl.read_jsonl(path)
    return m.values, list(m.models), list(m.items)


@pytest.fixture(scope="module")
def sst():
    """SimpleSafetyTests after the authors' filter (p(1-p) >= 0.01 over all 77 models): 77 x 79."""
    x, models, items = read_jsonl(SST)
    p = x.mean(axis=0)
    keep = p * (1 - p) >= 0.01
    return x[:, keep], models, [i for i, k in zip(items, keep, strict=True) if k]


@pytest.fixture(scope="module")
def authors(sst):
    fits = read_authors_fits(FITS)
    items = sst[2]
    a = fits.pivot(index="fold", columns="item_id", values="a")[items].to_numpy()
    b = fits.pivot(index="fold", columns="item_id", values="b")[items].to_numpy()
    return a, b


def simulate(n_models, n_items, seed):
    rng = np.random.default_rng(seed)
    theta, b, a = rng.normal(0, 1, n_models), rng.normal(0, 1, n_items), rng.lognormal(0, 0.3, n_items)
    p = 1 / (1 + np.exp(-a * (theta[:, None] - b)))
    return (rng.random((n_models, n_items)) < p).astype(float), theta, a, b


def close(a1, b1, a2, b2, tol=TOL):
    return np.abs(np.log(a1) - np.log(a2)).max() < tol and np.abs(b1 - b2).max() < tol


# ------------------------------------------------------------------ the authors' own fits
@needs_data
def test_split_rule_and_items_are_the_authors(sst):
    x, _, items = sst
    assert x.shape == (77, 79)
    fits = read_authors_fits(FITS)
    assert sorted(fits["item_id"].unique()) == sorted(items) and sorted(fits["fold"].unique()) == list(range(100))
    rows = authors_train_rows(77, 100, n_test=10)
    assert all(r.size == 67 and np.all(np.diff(r) > 0) for r in rows)      # 10 test models out, file order
    assert np.setdiff1d(np.arange(77), rows[0]).tolist() == sorted(
        np.random.default_rng((42, 0)).choice(77, size=10, replace=False).tolist())


@needs_data
@pytest.mark.slow
def test_pyirt_authors_reproduces_the_authors_split_0(sst, authors):
    """One py-irt fit with the authors' settings on split 0's training models gives their split-0 fit."""
    x, models, items = sst
    rows = authors_train_rows(77, 1)[0]
    cal = fit_2pl(ResponseMatrix(x[rows], [models[i] for i in rows], items), engine="pyirt-authors")
    assert cal.settings["lr_decay"] == 0.9999 and cal.settings["parameters"] == "best epoch"
    assert close(cal.a.to_numpy(), cal.b.to_numpy(), authors[0][0], authors[1][0])  # measured 1.4e-6, 4.8e-7


@needs_data
@pytest.mark.slow
def test_batched_fit_reproduces_the_authors_splits(sst, authors):
    """Three splits in one batched fit: each equals the authors' separate py-irt fit of that split."""
    x = sst[0]
    splits = [0, 1, 57]
    rows = authors_train_rows(77, 58)
    fitted = fit_2pl_splits(x, [rows[s] for s in splits])
    for s, (a, b) in zip(splits, fitted, strict=True):
        assert close(a, b, authors[0][s], authors[1][s]), s


# ------------------------------------------------------------------ same objective, same draws as py-irt
def test_first_loss_is_py_irt_loss():
    """Epoch 0's loss is pyro's Trace_ELBO for py-irt's hierarchical 2PL with the same seed (same draws)."""
    from irtlib.calibration.pyirt import HierarchicalTwoParamLog

    x = simulate(30, 25, seed=3)[0]
    rows, cols = np.nonzero(np.ones_like(x))
    args = (torch.tensor(rows), torch.tensor(cols), torch.tensor(x[rows, cols], dtype=torch.float))
    torch.manual_seed(0)
    pyro.clear_param_store()
    model = HierarchicalTwoParamLog(num_items=25, num_subjects=30)
    model.model(*args)        # py-irt's trainer runs the model and the guide once before training
    model.guide(*args)
    expected = pyro.infer.Trace_ELBO().loss(model.model, model.guide, *args)
    pyro.clear_param_store()
    got = fit_hierarchical_batch(x, [np.arange(30)], epochs=1).loss[0, 0]
    assert got == pytest.approx(expected, rel=1e-6)


def test_batched_fit_equals_a_py_irt_fit_on_simulated_data():
    x = simulate(40, 30, seed=5)[0]
    x[3, 4] = np.nan                                      # a missing cell: not an observation in either
    rows = np.array([i for i in range(40) if i % 7])
    cal = fit_2pl(ResponseMatrix(x[rows], [f"m{i}" for i in rows], [f"i{j}" for j in range(30)]),
                  engine="pyirt-authors", epochs=150)
    (a, b), = fit_2pl_splits(x, [rows], epochs=150)
    assert close(a, b, cal.a.to_numpy(), cal.b.to_numpy())


# ------------------------------------------------------------------ the text's fixed priors (priors="paper")
def test_first_loss_is_py_irt_loss_under_the_fixed_priors():
    """Epoch 0's loss is pyro's Trace_ELBO for the text's fixed-prior 2PL with the same seed (same draws)."""
    from irtlib.calibration.pyirt import PaperTwoParamLog

    x = simulate(30, 25, seed=3)[0]
    x[2, 7] = np.nan
    rows, cols = np.nonzero(~np.isnan(x))
    args = (torch.tensor(rows), torch.tensor(cols), torch.tensor(x[rows, cols], dtype=torch.float))
    torch.manual_seed(0)
    pyro.clear_param_store()
    model = PaperTwoParamLog(num_items=25, num_subjects=30)
    model.model(*args)
    model.guide(*args)
    expected = pyro.infer.Trace_ELBO().loss(model.model, model.guide, *args)
    pyro.clear_param_store()
    got = fit_hierarchical_batch(x, [np.arange(30)], epochs=1, priors="paper").loss[0, 0]
    assert got == pytest.approx(expected, rel=1e-6)


def test_fixed_priors_batched_fit_equals_py_irt_with_the_text_priors():
    """priors="paper", constant rate, last epoch: fit_2pl(engine="pyirt")'s py-irt fit (measured 2e-7)."""
    x = simulate(40, 30, seed=5)[0]
    x[3, 4] = np.nan
    rows = np.array([i for i in range(40) if i % 7])
    cal = fit_2pl(ResponseMatrix(x[rows], [f"m{i}" for i in rows], [f"i{j}" for j in range(30)]),
                  engine="pyirt", seed=2, epochs=150)
    fit = fit_hierarchical_batch(x, [rows, np.arange(40)], epochs=150, seed=2, lr_decay=1.0, best=False,
                                 priors="paper")
    assert close(fit.a[0], fit.b[0], cal.a.to_numpy(), cal.b.to_numpy(), tol=1e-5)
    assert np.abs(fit.theta[0, :rows.size] - cal.theta.to_numpy()).max() < 1e-5
    hierarchical = fit_hierarchical_batch(x, [rows], epochs=150, seed=2, lr_decay=1.0, best=False)
    assert not close(hierarchical.a[0], hierarchical.b[0], cal.a.to_numpy(), cal.b.to_numpy(), tol=1e-2)


def test_unknown_priors_are_named():
    with pytest.raises(InputError, match="priors must be one of"):
        fit_2pl_splits(np.ones((4, 3)), [np.arange(3)], epochs=1, priors="vague")


def test_a_split_does_not_depend_on_its_batch():
    x = simulate(50, 40, seed=8)[0]
    rows = [np.arange(0, 45), np.arange(5, 50), np.arange(0, 50, 2)]          # ragged: 45, 45, 25 rows
    together = fit_hierarchical_batch(x, rows, epochs=200)
    alone = fit_hierarchical_batch(x, rows[2:], epochs=200)
    assert close(together.a[2], together.b[2], alone.a[0], alone.b[0], tol=1e-4)
    assert together.best_epoch[2] == alone.best_epoch[0]
    assert np.isnan(together.theta[2, 25:]).all() and not np.isnan(together.theta[2, :25]).any()


def test_same_call_twice_gives_the_same_numbers():
    x = simulate(30, 20, seed=2)[0]
    rows = [np.arange(25), np.arange(5, 30)]
    first, second = fit_2pl_splits(x, rows, epochs=50), fit_2pl_splits(x, rows, epochs=50)
    for (a1, b1), (a2, b2) in zip(first, second, strict=True):
        assert np.array_equal(a1, a2) and np.array_equal(b1, b2)


# ------------------------------------------------------------------ best epoch, per split
def test_best_epoch_is_chosen_per_split():
    """Each split reports the parameters after its own lowest-loss epoch, not a shared one."""
    x = simulate(40, 30, seed=11)[0]
    rows = [np.arange(40), np.arange(0, 40, 3)]
    fit = fit_hierarchical_batch(x, rows, epochs=120)
    assert np.array_equal(fit.best_epoch, fit.loss.argmin(axis=1))              # first lowest loss
    assert fit.best_epoch[0] != fit.best_epoch[1]                               # the case tests something
    for s in range(2):      # rerun to that epoch and report the last parameters: the same numbers
        last = fit_hierarchical_batch(x, rows, epochs=int(fit.best_epoch[s]) + 1, best=False)
        assert np.array_equal(last.a[s], fit.a[s]) and np.array_equal(last.b[s], fit.b[s])
        assert last.best_epoch[s] == fit.best_epoch[s]


# ------------------------------------------------------------------ recovery
@pytest.mark.slow
def test_recovers_simulated_parameters():
    x, theta, a, b = simulate(300, 60, seed=21)
    rows = authors_train_rows(300, 2, n_test=30)
    fit = fit_hierarchical_batch(x, rows, epochs=1000)
    for s in range(2):
        assert np.corrcoef(fit.b[s], b)[0, 1] > 0.95
        assert np.corrcoef(np.log(fit.a[s]), np.log(a))[0, 1] > 0.6
        assert np.corrcoef(fit.theta[s], theta[rows[s]])[0, 1] > 0.95


# ------------------------------------------------------------------ gradient and input
def test_likelihood_gradient_matches_autograd():
    """The likelihood's written-out gradient (computed chunk by chunk in its forward pass) is autograd's."""
    from irtlib.calibration.pyirt_batch import _Likelihood

    rng = np.random.default_rng(0)
    f64 = torch.float64
    theta = torch.tensor(rng.normal(size=(5, 5)), dtype=f64, requires_grad=True)
    b = torch.tensor(rng.normal(size=(5, 4)), dtype=f64, requires_grad=True)
    a = torch.tensor(rng.lognormal(size=(5, 4)), dtype=f64, requires_grad=True)
    x = torch.tensor((rng.random((5, 5, 4)) < 0.6).astype(float), dtype=f64)
    w = torch.tensor((rng.random((5, 5, 4)) < 0.8).astype(float), dtype=f64)
    weights = torch.tensor([1.5, -0.5, 2.0, 1.0, 0.25], dtype=f64)
    for mask in (None, w):
        lik = _Likelihood(torch, 2 * x - 1, mask, chunk_cells=40)           # chunks of 2, 2 and 1 splits
        assert lik.chunk == 2
        ours = (lik(theta, b, a) * weights).sum()
        g_ours = torch.autograd.grad(ours, (theta, b, a))
        z = a[:, None, :] * (theta[:, :, None] - b[:, None, :])
        ll = -torch.nn.functional.binary_cross_entropy_with_logits(z, x, reduction="none")
        plain = ((ll if mask is None else ll * mask).sum((1, 2)) * weights).sum()
        assert ours.item() == pytest.approx(plain.item(), rel=1e-12)
        for g1, g2 in zip(g_ours, torch.autograd.grad(plain, (theta, b, a)), strict=True):
            assert torch.allclose(g1, g2, rtol=1e-10, atol=1e-12)


def test_likelihood_gradient_keeps_its_relative_precision_in_saturated_cells():
    """In float32, d/dz = sign sigmoid(-s) of a well-predicted cell (s up to 40) to float32 precision, not 1 - q."""
    from irtlib.calibration.pyirt_batch import _Likelihood

    theta = torch.tensor([[-40.0, -12.0, 3.0, 9.0, 25.0, 40.0]] * 2)
    b, a = torch.zeros((2, 1)), torch.ones((2, 1))
    x = torch.tensor([[1.0, 0.0, 1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 1.0, 0.0, 1.0, 1.0]])[:, :, None]
    value, g_theta, _, _ = _Likelihood(torch, 2 * x - 1).value_and_gradient(theta, b, a)
    z = theta.double()[:, :, None]
    xd = x.double()
    exact = (xd * torch.sigmoid(-z) - (1 - xd) * torch.sigmoid(z))[:, :, 0]   # d/dz of x z - softplus(z)
    assert torch.allclose(g_theta.double(), exact, rtol=1e-6, atol=0)
    ll = -torch.nn.functional.binary_cross_entropy_with_logits(z, x.double(), reduction="none").sum((1, 2))
    assert torch.allclose(value.double(), ll, rtol=1e-6)


def test_balanced_parts_cut_by_cells():
    from irtlib.calibration.pyirt_batch import _balanced_parts

    assert [p.tolist() for p in _balanced_parts([10, 10, 10, 50], 2)] == [[0, 1, 2], [3]]
    assert [p.tolist() for p in _balanced_parts([67] * 4, 2)] == [[0, 1], [2, 3]]
    assert [p.tolist() for p in _balanced_parts([5], 2)] == [[0]]


def test_adam_is_torch_adam_with_exponential_decay_bit_for_bit():
    from irtlib.calibration.adam_kernel import TorchAdam

    gen = torch.Generator().manual_seed(0)
    ours = torch.randn(40, generator=gen)
    theirs = ours.clone().requires_grad_()
    adam = TorchAdam(torch, ours, 0.1, 0.99)
    optimizer = torch.optim.Adam([theirs], lr=0.1)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.99)
    for _ in range(50):
        grad = torch.randn(40, generator=gen) * 10
        adam.step(grad)
        theirs.grad = grad.clone()
        optimizer.step()
        scheduler.step()
    assert torch.equal(ours, theirs.detach()) and adam.lr == optimizer.param_groups[0]["lr"]


def test_a_split_is_the_same_bit_for_bit_in_any_batch_and_with_two_workers():
    """Splitting the batch (between worker processes, or by the cache) changes no number."""
    x = simulate(40, 30, seed=4)[0]
    rows = [np.arange(0, 35), np.arange(5, 40), np.arange(0, 40, 2), np.arange(1, 40, 2), np.arange(3, 38)]
    together = fit_hierarchical_batch(x, rows, epochs=60)
    apart = fit_hierarchical_batch(x, rows[1:3], epochs=60)
    assert np.array_equal(together.a[1:3], apart.a) and np.array_equal(together.loss[1:3], apart.loss)
    workers = fit_hierarchical_batch(x, rows, epochs=60, workers=2)
    for field in ("a", "b", "best_epoch", "loss"):
        assert np.array_equal(getattr(together, field), getattr(workers, field)), field
    assert np.array_equal(together.theta, workers.theta, equal_nan=True)


@pytest.mark.parametrize(("values", "rows", "message"), [
    (np.full((4, 3), 0.5), [np.arange(3)], "only 0, 1 or NaN; row 0, column 0"),
    (np.ones((4, 3)), [np.array([0, 4])], r"train_rows\[0\] holds row 4, outside 0..3"),
    (np.ones((4, 3)), [np.arange(3), np.array([1, 1, 2])], r"train_rows\[1\] repeats a row"),
    (np.ones((4, 3)), [np.array([2])], "at least two models"),
    (np.ones((4, 3)), np.arange(3), "one per split"),
    (np.ones(3), [np.arange(2)], "2-D"),
])
def test_bad_input_is_named(values, rows, message):
    with pytest.raises(InputError, match=message):
        fit_2pl_splits(values, rows, epochs=1)


def test_importing_the_module_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, irtlib, irtlib.calibration.pyirt_batch, irtbook.authors_fits; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize("workers", [0, 1.5, True])
def test_bad_workers_are_named(workers):
    with pytest.raises(InputError, match="workers must be a positive integer"):
        fit_2pl_splits(np.ones((4, 3)), [np.arange(3)], epochs=1, workers=workers)
