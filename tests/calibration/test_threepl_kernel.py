"""The 3PL's cell tables in C (irtlib.calibration.threepl_kernel): numpy's bits, and the 3PL fits unchanged."""

import numpy as np
import pytest

from irtlib.calibration import threepl_kernel
from irtlib.calibration.models import P_FLOOR, compare_models, fit_irt_values
from irtlib.core.responses import ResponseMatrix


@pytest.fixture
def lib():
    lib = threepl_kernel.load()
    if lib is None:
        pytest.skip("the 3PL kernel is not built here (no compiler)")
    return lib


def _same_bits(x, y):
    return threepl_kernel._same_bits(np.asarray(x), np.asarray(y))


def _random_case(rng, n_models, n_items, masked):
    theta = rng.normal(0.0, 3.0, n_models)
    a = np.exp(rng.normal(0.0, 1.0, n_items))
    b = rng.normal(0.0, 2.0, n_items)
    c = rng.uniform(0.0, 0.6, n_items)
    x = (rng.random((n_models, n_items)) < 0.6).astype(float)
    mask = (rng.random((n_models, n_items)) < 0.7).astype(float) if masked else None
    return theta, a, b, c, x if mask is None else x * mask, mask


@pytest.mark.parametrize("case", range(len(threepl_kernel.check_cases())))
def test_tables_have_numpy_bits_on_the_check_cases(lib, case):
    theta, a, b, c, x, mask = threepl_kernel.check_cases()[case]
    lo, hi = P_FLOOR, 1.0 - P_FLOOR
    with np.errstate(all="ignore"):
        want = threepl_kernel.numpy_point_tables(theta, a, b, c, lo, hi)
        got = threepl_kernel.point_tables(theta, a, b, c, lo, hi)
        assert all(_same_bits(w, g) for w, g in zip(want, got, strict=True))
        steps = (threepl_kernel.numpy_step_tables(x, mask, *want, a, c),
                 threepl_kernel.step_tables(x, mask, *want, a, c))
    assert len(steps[1]) == len(threepl_kernel.STEP_TABLES)
    assert all(_same_bits(w, g) for w, g in zip(*steps, strict=True))
    assert all(g.flags.c_contiguous for g in steps[1])


@pytest.mark.parametrize("masked", [False, True])
def test_tables_have_numpy_bits_on_random_tables(lib, masked):
    rng = np.random.default_rng(3)
    theta, a, b, c, x, mask = _random_case(rng, 41, 517, masked)
    want = threepl_kernel.numpy_point_tables(theta, a, b, c, P_FLOOR, 1.0 - P_FLOOR)
    got = threepl_kernel._kernel_point(lib, theta, a, b, c, P_FLOOR, 1.0 - P_FLOOR)
    assert all(_same_bits(w, g) for w, g in zip(want, got, strict=True))
    assert all(_same_bits(w, g) for w, g in zip(threepl_kernel.numpy_step_tables(x, mask, *want, a, c),
                                               threepl_kernel._kernel_step(lib, x, mask, *want, a, c), strict=True))


def test_a_fortran_table_takes_numpy_and_keeps_its_layout(lib):
    rng = np.random.default_rng(4)
    theta, a, b, c, x, mask = _random_case(rng, 9, 13, True)
    z, s, p = threepl_kernel.point_tables(theta, a, b, c, P_FLOOR, 1.0 - P_FLOOR)
    xf = np.asfortranarray(x)
    got = threepl_kernel.step_tables(xf, mask, z, s, p, a, c)
    want = threepl_kernel.numpy_step_tables(xf, mask, z, s, p, a, c)
    assert all(_same_bits(w, g) and w.flags.c_contiguous == g.flags.c_contiguous
               for w, g in zip(want, got, strict=True))


def test_the_switch_turns_the_kernel_off(monkeypatch):
    monkeypatch.setenv(threepl_kernel.SWITCH, "0")
    assert threepl_kernel.load() is None
    rng = np.random.default_rng(5)
    theta, a, b, c, *_ = _random_case(rng, 4, 6, False)
    got = threepl_kernel.point_tables(theta, a, b, c, P_FLOOR, 1.0 - P_FLOOR)
    want = threepl_kernel.numpy_point_tables(theta, a, b, c, P_FLOOR, 1.0 - P_FLOOR)
    assert all(_same_bits(w, g) for w, g in zip(want, got, strict=True))


def _simulated(rng, n_models, n_items, missing):
    theta = rng.normal(0.0, 1.0, n_models)
    a, b = np.exp(rng.normal(0.0, 0.5, n_items)), rng.normal(0.0, 1.0, n_items)
    c = rng.uniform(0.0, 0.4, n_items)
    p = c + (1 - c) / (1 + np.exp(-a * (theta[:, None] - b)))
    x = (rng.random(p.shape) < p).astype(float)
    x[rng.random(p.shape) < missing] = np.nan
    return x


@pytest.mark.parametrize("missing", [0.0, 0.15])
def test_3pl_fit_equals_the_numpy_path(lib, monkeypatch, missing):
    x = _simulated(np.random.default_rng(6), 30, 60, missing)
    fast = fit_irt_values(x, model="3pl")
    monkeypatch.setenv(threepl_kernel.SWITCH, "0")
    slow = fit_irt_values(x, model="3pl")
    for key in ("theta", "a", "b", "c"):
        assert _same_bits(fast[key], slow[key])
    assert fast["info"] == slow["info"]


def test_compare_models_equals_the_numpy_path(lib, monkeypatch):
    x = _simulated(np.random.default_rng(7), 25, 40, 0.05)
    m = ResponseMatrix(x, [f"m{i}" for i in range(x.shape[0])], [f"i{j}" for j in range(x.shape[1])])
    fast = compare_models(m, models=("1pl", "3pl"), folds=3).drop(columns="seconds")
    monkeypatch.setenv(threepl_kernel.SWITCH, "0")
    slow = compare_models(m, models=("1pl", "3pl"), folds=3).drop(columns="seconds")
    assert fast.equals(slow)


def test_the_load_check_clips_at_the_models_floor():
    assert (P_FLOOR, 1.0 - P_FLOOR) in threepl_kernel.CHECK_BOUNDS


@pytest.mark.parametrize("order", ["C", "F"])
def test_the_points_safe_cells_give_the_boolean_selections_numbers(order):
    from irtlib.calibration.models import _Point

    x = np.asarray(_simulated(np.random.default_rng(8), 13, 17, 0.2), order=order)
    mask = (~np.isnan(x)).astype(float)
    x = np.where(mask == 1.0, x, 0.0)
    rng = np.random.default_rng(9)
    args = (x, mask, rng.normal(size=13), rng.normal(0, 0.3, 17), rng.normal(size=17), rng.normal(-1.5, 1, 17),
            ((0.0, 1.0), (0.0, 1.0), (0.0, 1.0), (5.0, 17.0)))
    plain, indexed = _Point(*args), _Point(*args, safe_cells=np.flatnonzero(x == 1.0))
    assert _same_bits(plain.log_likelihood, indexed.log_likelihood)
    assert _same_bits(plain.log_posterior, indexed.log_posterior)



class _PreviousTables:
    """The 3PL's step tables as they were: ``threepl_kernel.step_tables`` of the fit's x and mask as they are."""

    def __init__(self, x, mask):
        self.x, self.mask = x, mask

    def __call__(self, z, s, p, a, c):
        return threepl_kernel.step_tables(self.x, self.mask, z, s, p, a, c)


def _fortran_matrix(seed, n_models, n_items, missing):
    """A simulated 3PL matrix in Fortran order, as a benchmark's (its columns gathered by the variance filter)."""
    x = np.asfortranarray(_simulated(np.random.default_rng(seed), n_models, n_items, missing))
    assert x.flags.f_contiguous and not x.flags.c_contiguous
    return x


# 29 x 1,200 cells (278 kB): numpy's g_z reuses the Fortran-ordered temporary x - 1.0 (its buffer
# reuse starts at 256 kB); 17 x 41: every table C-ordered
@pytest.mark.parametrize("shape", [(29, 1200), (17, 41)])
@pytest.mark.parametrize("missing", [0.0, 0.15])
def test_a_fortran_matrix_fits_as_before_and_the_3pl_takes_the_kernel(lib, monkeypatch, shape, missing):
    from irtlib.calibration import models

    x = _fortran_matrix(10, *shape, missing)
    calls = []
    kernel_step = threepl_kernel._kernel_step

    def counted(*args):
        calls.append(1)
        return kernel_step(*args)

    for model in ("1pl", "3pl"):
        with monkeypatch.context() as patch:
            patch.setattr(models, "_StepTables", _PreviousTables)
            before = fit_irt_values(x, model=model)
        calls.clear()
        monkeypatch.setattr(threepl_kernel, "_kernel_step", counted)
        fit = fit_irt_values(x, model=model)
        monkeypatch.undo()
        for key in ("theta", "a", "b", "c"):
            assert (fit[key] is None and before[key] is None) or _same_bits(fit[key], before[key])
        assert fit["info"] == before["info"]
        # the 3PL: numpy's tables at the first step (their layouts), the kernel's at every later one
        assert len(calls) == (fit["info"]["iterations"] - 1 if model == "3pl" else 0)


def test_numpy_lays_a_large_fortran_matrix_g_z_out_in_fortran_order(lib):
    """Why the first step's layouts are kept: numpy's g_z follows x's layout on a large matrix."""
    from irtlib.calibration import models

    x = np.where(np.isnan(xf := _fortran_matrix(12, 29, 1200, 0.0)), 0.0, xf)
    rng = np.random.default_rng(13)
    theta, a, b, c = rng.normal(size=29), np.exp(rng.normal(0, 0.3, 1200)), rng.normal(size=1200), np.full(1200, 0.2)
    z, s, p = threepl_kernel.point_tables(theta, a, b, c, P_FLOOR, 1.0 - P_FLOOR)
    want = threepl_kernel.numpy_step_tables(x, None, z, s, p, a, c)
    assert want[0].flags.f_contiguous and not want[0].flags.c_contiguous
    tables = models._StepTables(x, None)
    first, later = tables(z, s, p, a, c), tables(z, s, p, a, c)
    for w, f, g in zip(want, first, later, strict=True):
        assert _same_bits(w, f) and _same_bits(w, g)
        assert w.flags.c_contiguous == f.flags.c_contiguous == g.flags.c_contiguous
        assert w.flags.f_contiguous == f.flags.f_contiguous == g.flags.f_contiguous


def test_compare_models_on_a_fortran_matrix_is_as_before(lib, monkeypatch):
    from irtlib.calibration import models

    x = _fortran_matrix(11, 29, 1200, 0.0)
    m = ResponseMatrix(x, [f"m{i}" for i in range(x.shape[0])], [f"i{j}" for j in range(x.shape[1])])
    assert m.values.flags.f_contiguous
    now = compare_models(m, models=("1pl", "3pl"), folds=2).drop(columns="seconds")
    monkeypatch.setattr(models, "_StepTables", _PreviousTables)
    before = compare_models(m, models=("1pl", "3pl"), folds=2).drop(columns="seconds")
    assert now.equals(before)
