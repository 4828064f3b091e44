"""A growing bank: new items by fixed-parameter calibration, and linking of banks calibrated apart."""

import warnings

import numpy as np
import pytest

from irtlib import ResponseMatrix
from irtlib.bank.build import calibrate_bank
from irtlib.bank.format import ItemBank, read_bank
from irtlib.bank.grow import add_items, link_banks
from irtlib.calibration.fixed import fit_fixed
from irtlib.calibration.joint_map import fit_map
from irtlib.calibration.linking import linking_constants
from irtlib.core.kernels import probability
from irtlib.errors import InputError


def draw(rng, theta, a, b):
    return (rng.random((len(theta), len(a))) < probability(theta[:, None], a, b)).astype(float)


def matrix(x, prefix, items):
    return ResponseMatrix(x, [f"{prefix}{i:03d}" for i in range(x.shape[0])], items)


def bank_of(m, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return calibrate_bank(m, interval_check=False, **kwargs)


@pytest.fixture(scope="module")
def planted():
    """300 models; 40 bank items, 20 new ones."""
    rng = np.random.default_rng(0)
    theta, a, b = rng.normal(size=300), np.exp(rng.normal(0, 0.35, 60)), rng.normal(size=60)
    items = [f"q{j:03d}" for j in range(60)]
    return matrix(draw(rng, theta, a, b), "m", items), a, b


def test_fixed_calibration_with_the_joint_fits_old_items_returns_the_joint_fits_new_items():
    rng = np.random.default_rng(1)
    x = draw(rng, rng.normal(size=150), np.exp(rng.normal(0, 0.3, 30)), rng.normal(size=30))
    theta, a, b, _ = fit_map(x, tol=1e-10)
    t, a_new, b_new, info = fit_fixed(x, a[:20], b[:20], tol=1e-10)
    assert info["converged"]
    np.testing.assert_allclose(a_new, a[20:], rtol=1e-5)
    np.testing.assert_allclose(b_new, b[20:], atol=1e-6)
    np.testing.assert_allclose(t, theta, atol=1e-6)


@pytest.mark.parametrize("scale", ["fit", "standard"])
def test_added_items_recover_the_truth_and_the_joint_refit_and_leave_the_bank_alone(planted, tmp_path, scale):
    m, a, b = planted
    bank = bank_of(m.subset(items=list(m.items[:40])), variance_threshold=0.0, scale=scale)
    grown = add_items(bank, m)
    assert list(grown.item_ids[:40]) == list(bank.item_ids)
    np.testing.assert_array_equal(grown.a[:40], bank.a)
    np.testing.assert_array_equal(grown.se_b[:40], bank.se_b)
    # the joint refit of all 60 items has a scale of its own: put it on the bank's through the 40 old items
    joint = link_banks(bank, bank_of(m, variance_threshold=0.0, scale=scale), method="mean/sigma", n_boot=10).linked
    new, refit = grown.items.iloc[40:], joint.items.iloc[40:]
    # measured (either scale): r(a) 0.95 and r(b) 0.98 against the truth; against the refit RMSE 0.03 in a, 0.006 in b
    assert np.corrcoef(new["a"], a[40:])[0, 1] >= 0.9 and np.corrcoef(new["b"], b[40:])[0, 1] >= 0.97
    assert np.sqrt(np.mean((new["a"] - refit["a"]) ** 2)) <= 0.06
    assert np.sqrt(np.mean((new["b"] - refit["b"]) ** 2)) <= 0.03
    assert (new["se_a"] > 0).all() and grown.meta["added_items"][0]["n_new_items"] == 20
    back = read_bank(grown.write(tmp_path / "grown.csv"))
    assert len(back) == 60 and back.n_items_full == 60


def test_adding_items_refuses_too_few_common_items_and_nothing_new(planted):
    m, *_ = planted
    bank = bank_of(m.subset(items=list(m.items[:40])))
    with pytest.raises(InputError, match="only 3 of its 23 items are in the bank"):
        add_items(bank, m.subset(items=list(m.items[:3]) + list(m.items[40:])))
    with pytest.raises(InputError, match="no new item"):
        add_items(bank, m.subset(items=list(m.items[:40])))


def test_every_method_recovers_a_planted_linear_map_exactly():
    rng = np.random.default_rng(2)
    a_y, b_y = np.exp(rng.normal(0, 0.3, 12)), rng.normal(size=12)
    slope, shift = 1.4, -0.3
    found = linking_constants(a_y * slope, (b_y - shift) / slope, a_y, b_y)
    for method, (aa, bb) in found.items():
        assert aa == pytest.approx(slope, abs=1e-5), method
        assert bb == pytest.approx(shift, abs=1e-5), method


def _groups(seed, items, a, b):
    rng = np.random.default_rng(seed)
    t1, t2 = rng.normal(0, 1, 250), rng.normal(0.6, 1.3, 250)
    m1, m2 = matrix(draw(rng, t1, a, b), "a", items), matrix(draw(rng, t2, a, b), "b", items)
    # on the standard scale each bank's abilities are its own models' standardized: the true map is theirs
    return m1, m2, t2.std() / t1.std(), (t2.mean() - t1.mean()) / t1.std()


@pytest.mark.slow
def test_linking_constants_are_recovered_within_their_reported_error():
    rng = np.random.default_rng(0)
    a, b = np.exp(rng.normal(0, 0.35, 50)), rng.normal(size=50)
    items = [f"q{j:03d}" for j in range(50)]
    z = []
    for seed in (10, 11, 12):
        m1, m2, slope, shift = _groups(seed, items, a, b)
        c = link_banks(bank_of(m1, scale="standard", variance_threshold=0.0),
                       bank_of(m2, scale="standard", variance_threshold=0.0)).constants
        z += list((c["A"] - slope) / c["se_A"]) + list((c["B"] - shift) / c["se_B"])
    # measured: |z| at most 2.66 over 3 data sets x 3 methods x 2 constants, median 1.1
    assert np.max(np.abs(z)) <= 3.0 and np.median(np.abs(z)) <= 1.5


def test_linked_bank_carries_the_new_bank_onto_the_base_scale(planted):
    m, *_ = planted
    base = bank_of(m.subset(models=list(m.models[:150])), scale="standard")
    new = bank_of(m.subset(models=list(m.models[150:])), scale="standard")
    result = link_banks(base, new, method="mean/sigma", n_boot=20)
    slope, shift = result.constants.loc["mean/sigma", ["A", "B"]]
    np.testing.assert_allclose(result.linked.b, slope * new.b + shift)
    np.testing.assert_allclose(result.linked.se_a, new.se_a / slope)
    assert result.linked.meta["linked"]["n_common"] == len(result.common) == len(new)
    assert set(result.constants.index) == {"mean/sigma", "mean/mean", "stocking-lord"}


def test_links_refuse_few_common_items_and_banks_made_differently(planted):
    m, *_ = planted
    base = bank_of(m.subset(items=list(m.items[:30])))
    few = bank_of(m.subset(items=list(m.items[26:50])))
    with pytest.raises(InputError, match="only 4 common items: a link needs at least 5"):
        link_banks(base, few)
    other = ItemBank(base.items, {**base.meta, "scale": {**base.meta["scale"], "kind": "standard"}})
    with pytest.raises(InputError, match="scale 'standard' differs"):
        link_banks(base, other)
