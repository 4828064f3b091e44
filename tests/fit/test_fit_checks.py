"""Fit checks (item fit, Q3, dimensionality) and the 1PL / 2PL / 3PL engine, on data with a known answer."""

from itertools import product

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit
from scipy.stats import pearsonr

from irtlib import ResponseMatrix, fit_2pl
from irtlib.calibration.joint_map import Calibration
from irtlib.calibration.models import compare_models, fit_irt, fit_irt_values, heldout_folds, n_parameters
from irtlib.fit.checks import (
    _standardised_columns,
    adjust_pvalues,
    dimensionality,
    item_fit,
    lord_wingersky,
    q3,
    q3_by_category,
    q3_summary,
    residual_eigenvalues,
    residuals,
    summarise_q3,
    sx2_expected,
)


def as_matrix(values):
    n_models, n_items = values.shape
    return ResponseMatrix(values, [f"m{i:03d}" for i in range(n_models)], [f"i{j:04d}" for j in range(n_items)])


def draw(n_models, n_items, *, seed, sd_log_a=0.5, c=None, log_a=None, theta=None):
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_models) if theta is None else theta
    b = rng.normal(size=n_items)
    a = np.exp(rng.normal(0.0, sd_log_a, n_items)) if log_a is None else np.exp(log_a)
    p = expit(a * (theta[:, None] - b))
    if c is not None:
        p = c + (1 - c) * p
    return (rng.random(p.shape) < p).astype(float), theta, a, b


# ---------------------------------------------------------------------------- S-X2 machinery
def test_lord_wingersky_matches_enumeration():
    rng = np.random.default_rng(0)
    p = rng.uniform(0.05, 0.95, size=(3, 5))
    f = lord_wingersky(p)
    brute = np.zeros((3, 6))
    for pattern in product((0, 1), repeat=5):
        x = np.array(pattern)
        brute[:, x.sum()] += np.prod(np.where(x, p, 1 - p), axis=1)
    np.testing.assert_allclose(f, brute, atol=1e-14)
    np.testing.assert_allclose(f.sum(axis=1), 1.0)


def test_sx2_expected_matches_brute_force_enumeration():
    # E_j(s) = sum_q w P_j f^(-j)_(s-1) / sum_q w f_s, every score pattern of 6 items enumerated
    rng = np.random.default_rng(1)
    nodes = np.linspace(-4, 4, 21)
    w = np.exp(-nodes**2 / 2)
    w /= w.sum()
    a, b = np.exp(rng.normal(0, 0.5, 6)), rng.normal(size=6)
    p = expit(a * (nodes[:, None] - b))
    patterns = np.array(list(product((0, 1), repeat=6)))
    lik = np.prod(np.where(patterns[None], p[:, None, :], 1 - p[:, None, :]), axis=2)      # (Q, 64)
    joint = w @ lik                                                                         # Pr(pattern)
    scores = np.arange(7)
    brute = np.array([[joint[(patterns.sum(1) == s) & (patterns[:, j] == 1)].sum()
                       / joint[patterns.sum(1) == s].sum() for s in scores] for j in range(6)])
    np.testing.assert_allclose(sx2_expected(p, w, scores, exact=True), brute, atol=1e-12)
    assert np.all(sx2_expected(p, w, scores)[:, 0] == 0) and np.allclose(sx2_expected(p, w, scores)[:, 6], 1)


def test_normal_approximation_close_to_exact_on_a_long_bank():
    rng = np.random.default_rng(2)
    nodes = np.linspace(-5, 5, 101)
    w = np.exp(-nodes**2 / 2)
    w /= w.sum()
    p = expit(np.exp(rng.normal(0, 0.5, 300)) * (nodes[:, None] - rng.normal(size=300)))
    scores = np.arange(60, 241, 20)
    exact = sx2_expected(p, w, scores, exact=True)
    approx = sx2_expected(p, w, scores, exact=False)
    # measured: largest difference 0.00014
    assert np.abs(exact - approx).max() < 0.02


def test_adjust_pvalues_by_hand():
    p = np.array([0.01, 0.04, 0.03, 0.5, np.nan])
    np.testing.assert_allclose(adjust_pvalues(p, correction="bh")[:4], [0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.5])
    np.testing.assert_allclose(adjust_pvalues(p, correction="holm")[:4], [0.04, 0.09, 0.09, 0.5])
    np.testing.assert_allclose(adjust_pvalues(p, correction="bonferroni")[:4], [0.04, 0.16, 0.12, 1.0])
    assert np.isnan(adjust_pvalues(p)[4])
    with pytest.raises(ValueError, match="correction"):
        adjust_pvalues(p, correction="fdr")


# ---------------------------------------------------------------------------- item fit
@pytest.fixture(scope="module")
def clean_2pl():
    values, theta, a, b = draw(1000, 40, seed=3)
    m = as_matrix(values)
    return m, fit_2pl(m, engine="map")


def test_sx2_pvalues_near_uniform_on_2pl_data(clean_2pl):
    m, cal = clean_2pl
    fit = item_fit(m, cal)
    p = fit["p_value"].to_numpy()
    # measured: 1 of 40 items below 0.05, mean p 0.48, no item flagged after BH
    assert (p < 0.05).mean() <= 0.15
    assert 0.35 <= p.mean() <= 0.65
    assert fit["flagged"].sum() <= 1
    assert fit.attrs["n_groups"] == 10 and (fit["df"] == 8).all()


def test_sx2_and_mean_squares_flag_planted_misfit():
    rng = np.random.default_rng(4)
    values, theta, a, b = draw(1000, 40, seed=4)
    # items 0-2: non-monotone (safe most often in the middle of the ability range);
    # items 3-5: a floor at 0.5 and a steep rise (a = 4) at theta = 1, a shape no 2PL curve has
    bump = 0.9 * np.exp(-theta**2)
    values[:, :3] = (rng.random((1000, 3)) < bump[:, None]).astype(float)
    step = 0.5 + 0.5 * expit(4 * (theta[:, None] - 1.0))
    values[:, 3:6] = (rng.random((1000, 3)) < step).astype(float)
    m = as_matrix(values)
    cal = fit_2pl(m, engine="map")
    sx2 = item_fit(m, cal)
    assert sx2["flagged"].iloc[:6].all()
    # the six misfitting items (15% of the bank) distort the summed score the clean ones are
    # grouped by; measured: all 6 planted items and 4 of 34 clean items flagged
    assert sx2["flagged"].iloc[6:].mean() <= 0.15
    # (infit / outfit do not see these shapes under the 2PL: the fitted curve is nearly flat for
    # the bump, so the residuals are no larger than P (1 - P) says; measured outfit |z| < 2)


def test_sx2_flags_items_with_a_very_different_discrimination():
    # a bank with a near 1 and three items generated with a = 8: under one shared ability scale
    # the steep items' observed rates jump where the expected ones rise gently only if the fit
    # shrinks a; with the Rasch model (one a for all) they must misfit
    log_a = np.zeros(40)
    log_a[:3] = np.log(8.0)
    values, *_ = draw(1000, 40, seed=5, log_a=log_a)
    m = as_matrix(values)
    rasch = fit_irt(m, model="1pl")
    fit = item_fit(m, rasch)
    assert fit["flagged"].iloc[:3].all()
    assert fit["flagged"].iloc[3:].mean() <= 0.1
    assert (fit["df"] == 10 - 1).all()
    # mean squares see them too, as overfit (below 1; measured outfit 0.47 to 0.53)
    for method in ("infit", "outfit"):
        ms = item_fit(m, rasch, method=method)
        assert ms["flagged"].iloc[:3].all() and (ms["statistic"].iloc[:3] < 0.8).all()
        assert ms["flagged"].iloc[3:].mean() <= 0.1
    # (The 2PL does not rescue them here: with 25 times more models than items, joint MAP
    # separates the steep items perfectly and their a runs away, measured a = 58 to 4,300, so
    # they misfit under the 2PL too. The book's matrices have more items than models.)


def test_mean_squares_by_hand():
    values = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    m = as_matrix(values)
    cal = Calibration(a=pd.Series([1.0, 2.0], index=m.items), b=pd.Series([0.0, 0.5], index=m.items),
                      theta=pd.Series([0.0, 1.0, -1.0], index=m.models), engine="map")
    p = expit(np.array([1.0, 2.0]) * (np.array([0.0, 1.0, -1.0])[:, None] - np.array([0.0, 0.5])))
    w = p * (1 - p)
    r2 = (values - p) ** 2
    out = item_fit(m, cal, method="outfit", correction="none")
    inf = item_fit(m, cal, method="infit", correction="none")
    np.testing.assert_allclose(out["statistic"], (r2 / w).mean(axis=0))
    np.testing.assert_allclose(inf["statistic"], r2.sum(axis=0) / w.sum(axis=0))
    assert (out["df"] == 3).all()


def test_item_fit_bad_input(clean_2pl):
    m, cal = clean_2pl
    with pytest.raises(ValueError, match="method must be one of"):
        item_fit(m, cal, method="chi2")
    with pytest.raises(ValueError, match="n_groups"):
        item_fit(m, cal, n_groups=2)
    stranger = Calibration(a=cal.a, b=cal.b, theta=pd.Series([0.0], index=["zz"]), engine="map")
    with pytest.raises(ValueError, match="no theta for model"):
        item_fit(m, stranger)
    unknown_items = Calibration(a=cal.a.iloc[:3], b=cal.b.iloc[:3], theta=cal.theta, engine="map")
    with pytest.raises(ValueError, match=r"no parameters for item\(s\) \['i0003'"):
        q3(m, unknown_items)
    with pytest.raises(ValueError, match="alpha must lie in"):
        item_fit(m, cal, alpha=1.5)
    with pytest.raises(ValueError, match="n_replications"):
        dimensionality(m, cal, n_replications=0)


# ---------------------------------------------------------------------------- Q3
def test_q3_equals_corrcoef_of_residuals(clean_2pl):
    m, cal = clean_2pl
    sub = m.subset(items=m.items[:8])
    r = sub.values - expit(cal.a.to_numpy()[:8] * (cal.theta.to_numpy()[:, None] - cal.b.to_numpy()[:8]))
    np.testing.assert_allclose(q3(m, cal, items=m.items[:8]).to_numpy(), np.corrcoef(r.T), atol=1e-12)
    np.testing.assert_allclose(residuals(sub, cal).to_numpy(), r)


@pytest.fixture(scope="module")
def testlets():
    # 600 models, 20 testlets of 4 items: a model x testlet effect (SD 1) on top of the 2PL
    rng = np.random.default_rng(6)
    theta = rng.normal(size=600)
    groups = np.repeat(np.arange(20), 4)
    u = rng.normal(0, 1.0, size=(600, 20))[:, groups]
    a, b = np.exp(rng.normal(0, 0.3, 80)), rng.normal(size=80)
    values = (rng.random((600, 80)) < expit(a * (theta[:, None] + u - b))).astype(float)
    m = as_matrix(values)
    return m, fit_2pl(m, engine="map"), pd.Series(groups, index=m.items)


def test_q3_higher_within_planted_testlets(testlets):
    m, cal, groups = testlets
    s, per = q3_summary(m, cal, groups, by_group=True)
    # measured: within 0.141, between -0.018 (independence predicts -1/79 = -0.013)
    assert s["mean_within"] - s["mean_between"] > 0.1
    assert s["mean_between"] < 0.02
    assert s["n_within_pairs"] == 20 * 6 and s["n_between_pairs"] == 80 * 79 / 2 - 120
    assert len(per) == 20 and (per > s["mean_between"]).all()
    # the pass-over-residuals summary equals the one read off the full matrix
    full = summarise_q3(q3(m, cal), groups)
    pd.testing.assert_series_equal(s, full, atol=1e-10)


def test_q3_no_difference_without_testlets(clean_2pl):
    m, cal = clean_2pl
    groups = pd.Series(np.repeat(np.arange(10), 4), index=m.items)
    s = q3_summary(m, cal, groups)
    assert abs(s["mean_within"] - s["mean_between"]) < 0.03
    with pytest.raises(ValueError, match="groups has 3 entries for 40 items"):
        q3_summary(m, cal, [1, 2, 3])


# ---------------------------------------------------------------------------- dimensionality
def test_eigenvalues_are_those_of_the_q3_matrix(clean_2pl):
    m, cal = clean_2pl
    sub = m.subset(items=m.items[:15])
    ev = np.sort(np.linalg.eigvalsh(q3(sub, cal).to_numpy()))[::-1][:5]
    np.testing.assert_allclose(residual_eigenvalues(sub, cal, n=5), ev, atol=1e-10)


@pytest.mark.parametrize("shape", [(30, 400), (25, 25), (60, 12)])
def test_residual_eigenvalues_equal_the_squared_singular_values(shape):
    # the Gram matrix's eigenvalues against numpy's SVD of the standardised residuals, wide, square and
    # tall: equal to rounding (1e-12 of the largest; measured about 1e-15), zeros included
    values, *_ = draw(*shape, seed=21)
    values[np.random.default_rng(2).random(values.shape) < 0.05] = np.nan
    m = as_matrix(values)
    cal = fit_2pl(m, engine="map")
    z = _standardised_columns(m, cal)
    z = z[:, ~np.isnan(z).any(axis=0)]
    svd = np.linalg.svd(z, compute_uv=False) ** 2
    got = residual_eigenvalues(m, cal, n=min(shape))
    assert got.shape == svd.shape and np.all(np.diff(got) <= 0) and np.all(got >= 0)
    np.testing.assert_allclose(got, svd, rtol=0, atol=1e-12 * svd[0])
    assert got.sum() == pytest.approx(z.shape[1], rel=1e-12)   # they sum to the number of items


def test_parallel_analysis_one_against_two_dimensions():
    rng = np.random.default_rng(7)
    values1, *_ = draw(400, 40, seed=7)
    m1 = as_matrix(values1)
    one = dimensionality(m1, fit_2pl(m1, engine="map"), n=5, n_replications=10, seed=0)
    # two uncorrelated traits, 20 items each
    theta = rng.normal(size=(400, 2))
    dim = np.repeat([0, 1], 20)
    a, b = np.exp(rng.normal(0, 0.3, 40)), rng.normal(size=40)
    values2 = (rng.random((400, 40)) < expit(a * (theta[:, dim] - b))).astype(float)
    m2 = as_matrix(values2)
    two = dimensionality(m2, fit_2pl(m2, engine="map"), n=5, n_replications=10, seed=0)
    # measured: one-dimensional first eigenvalue 1.67 vs parallel 1.85 (ratio first / second 1.02);
    # two-dimensional 3.41 vs 1.77 (ratio 2.04)
    assert not one["exceeds"].iloc[0] and one.attrs["n_above"] == 0
    assert two["exceeds"].iloc[0] and two.attrs["n_above"] >= 1
    assert two.attrs["ratio_1_2"] > 1.6 and one.attrs["ratio_1_2"] < 1.2
    again = dimensionality(m1, fit_2pl(m1, engine="map"), n=5, n_replications=10, seed=0)
    pd.testing.assert_frame_equal(one, again)


# ---------------------------------------------------------------------------- 1PL / 2PL / 3PL engine
def test_fit_irt_2pl_is_fit_2pl(clean_2pl):
    m, cal = clean_2pl
    again = fit_irt(m, model="2pl")
    pd.testing.assert_series_equal(again.a, cal.a)
    pd.testing.assert_series_equal(again.theta, cal.theta)
    assert again.c is None and again.settings["model"] == "2pl"
    with pytest.raises(ValueError, match="unknown model 'grm'"):
        fit_irt(m, model="grm")
    with pytest.raises(ValueError, match="engine='pyirt' fits the 2PL only"):
        fit_irt(m, model="3pl", engine="pyirt")


@pytest.mark.parametrize("model", ["1pl", "3pl"])
def test_map_is_the_posterior_mode(model):
    from irtlib.calibration.models import _Point

    values, *_ = draw(15, 12, seed=8, c=0.2)
    fit = fit_irt_values(values, model=model, tol=1e-10, gain_tol=0.0, max_iter=2000)
    priors = ((0.0, 1.0), (0.0, 1.0), (0.0, 1.0), (5.0, 17.0))
    if model == "1pl":
        params = np.concatenate([fit["theta"], [np.log(fit["a"][0])], fit["b"]])

        def lp(v):
            return _Point(values, None, v[:15], v[15:16], v[16:], None, priors).log_posterior
    else:
        params = np.concatenate([fit["theta"], np.log(fit["a"]), fit["b"], np.log(fit["c"] / (1 - fit["c"]))])

        def lp(v):
            return _Point(values, None, v[:15], v[15:27], v[27:39], v[39:], priors).log_posterior
    eps = 1e-6
    grad = np.array([(lp(params + eps * e) - lp(params - eps * e)) / (2 * eps) for e in np.eye(params.size)])
    assert np.abs(grad).max() < 1e-3
    assert fit["info"]["converged"]


def test_parameter_recovery_of_each_model():
    # each model fitted to data drawn from itself, more items than models as in the book.
    # Joint MAP with theta ~ N(0, 1) shrinks the ability scale and inflates a (measured: the
    # 1PL's shared a 2.30 for a true 1.3), so recovery is stated as correlations.
    values, theta, a, b = draw(300, 200, seed=9, log_a=np.full(200, np.log(1.3)))
    f1 = fit_irt_values(values, model="1pl")
    # measured: r(theta) 0.990, r(b) 0.993
    assert pearsonr(theta, f1["theta"])[0] > 0.98 and pearsonr(b, f1["b"])[0] > 0.98
    assert np.ptp(f1["a"]) == 0
    values, theta, a, b = draw(300, 200, seed=10)
    f2 = fit_irt_values(values, model="2pl")
    # measured: r(theta) 0.986, r(a) 0.936, r(b) 0.972
    assert pearsonr(theta, f2["theta"])[0] > 0.97 and pearsonr(b, f2["b"])[0] > 0.95
    assert pearsonr(a, f2["a"])[0] > 0.9
    rng = np.random.default_rng(11)
    theta, b = rng.normal(size=300), rng.normal(0.5, 1, 400)
    a, c = np.exp(rng.normal(0.3, 0.3, 400)), rng.beta(5, 17, 400)
    values = (rng.random((300, 400)) < c + (1 - c) * expit(a * (theta[:, None] - b))).astype(float)
    f3 = fit_irt_values(values, model="3pl")
    # measured: r(theta) 0.989, r(a) 0.662, r(b) 0.953, r(c) 0.523; mean c 0.197 (true 0.224)
    assert pearsonr(theta, f3["theta"])[0] > 0.98
    assert pearsonr(b, f3["b"])[0] > 0.93
    assert pearsonr(a, f3["a"])[0] > 0.6
    assert pearsonr(c, f3["c"])[0] > 0.45
    assert abs(np.mean(f3["c"]) - np.mean(c)) < 0.05


# ---------------------------------------------------------------------------- compare_models
def _best(table):
    return table.set_index("model")["heldout_loglik"].idxmax()


def test_compare_models_prefers_2pl_on_varied_discrimination():
    values, *_ = draw(200, 150, seed=13, sd_log_a=0.8)
    table = compare_models(as_matrix(values), models=("1pl", "2pl"), folds=4, seed=0)
    # measured: 2PL -0.505, 1PL -0.535 per held-out response
    assert _best(table) == "2pl"
    assert list(table.columns[:2]) == ["model", "heldout_loglik"] and {"aic", "bic"} <= set(table.columns)
    assert table.set_index("model")["n_parameters"].to_dict() == {"1pl": 200 + 151, "2pl": 200 + 300}


def test_compare_models_does_not_prefer_2pl_on_equal_discrimination():
    values, *_ = draw(200, 150, seed=14, log_a=np.zeros(150))
    table = compare_models(as_matrix(values), models=("1pl", "2pl"), folds=4, seed=0).set_index("model")
    # measured: 1PL -0.5535, 2PL -0.5570 per held-out response
    assert table.loc["1pl", "heldout_loglik"] >= table.loc["2pl", "heldout_loglik"] - 1e-4
    assert table.loc["1pl", "bic"] < table.loc["2pl", "bic"]


def test_compare_models_equals_fitting_every_model_on_its_own(monkeypatch):
    # the 2PL fits handed to the 1PL and 3PL as starts give the numbers of separate fit_irt_values calls,
    # bit for bit (missing cells included)
    import irtlib.calibration.models as models_module

    values, *_ = draw(40, 60, seed=22, c=0.2)
    values[np.random.default_rng(3).random(values.shape) < 0.05] = np.nan
    m = as_matrix(values)
    shared = compare_models(m, models=("1pl", "2pl", "3pl"), folds=3, seed=1)
    calls = []

    def alone(x, which, model, two, **kw):
        calls.append(model)
        return fit_irt_values(x, model=model, **kw)

    monkeypatch.setattr(models_module, "_fit_sharing_2pl", alone)
    separate = compare_models(m, models=("1pl", "2pl", "3pl"), folds=3, seed=1)
    assert len(calls) == 12
    pd.testing.assert_frame_equal(shared.drop(columns="seconds"), separate.drop(columns="seconds"), check_exact=True)


def test_compare_models_prefers_3pl_with_a_lower_asymptote():
    # c = 0.25 on every item, 150 models x 400 items. The margin is small (measured: 3PL -0.57557,
    # 2PL -0.57633, 1PL -0.57990 per held-out response): with 150 models an item's floor is seen
    # by few of them. (With c = 0.35, far from the prior's mode 0.2, the 2PL wins: measured.)
    rng = np.random.default_rng(15)
    theta, b, a = rng.normal(size=150), rng.normal(0.5, 1, 400), np.exp(rng.normal(0.3, 0.3, 400))
    values = (rng.random((150, 400)) < 0.25 + 0.75 * expit(a * (theta[:, None] - b))).astype(float)
    table = compare_models(as_matrix(values), folds=4, seed=0)
    assert _best(table) == "3pl"
    assert table.set_index("model")["heldout_loglik"].idxmin() == "1pl"
    again = compare_models(as_matrix(values), models=("3pl",), folds=4, seed=0)
    assert again["heldout_loglik"].iloc[0] == table.set_index("model").loc["3pl", "heldout_loglik"]


def test_heldout_folds_balanced_and_seeded():
    obs = np.ones((7, 9), bool)
    obs[0, 0] = False
    f = heldout_folds(obs, folds=5, seed=1)
    assert f[0, 0] == -1
    counts = np.bincount(f[obs], minlength=5)
    assert counts.max() - counts.min() <= 1
    np.testing.assert_array_equal(f, heldout_folds(obs, folds=5, seed=1))
    assert not np.array_equal(f, heldout_folds(obs, folds=5, seed=2))
    with pytest.raises(ValueError, match="folds must be at least 2"):
        heldout_folds(obs, folds=1)
    assert n_parameters("3pl", 10, 5) == 25


# ---------------------------------------------------------------------------- Fluid with any bank
def test_fluid_irt_ranks_models_with_a_3pl_bank():
    from scipy.stats import spearmanr

    from irtlib import fisher_information
    from irtlib.protocol.model_agreement import fluid_agreement, fluid_irt

    c = np.full(300, 0.2)
    values, theta, a, b = draw(40, 300, seed=17, c=c)
    est = fluid_irt(values, a, b, c, budget=40)
    assert est.shape == (40, 40)
    # measured: Spearman 0.97 after 40 items
    assert spearmanr(est[:, -1], theta)[0] > 0.9
    # the first item is the most informative one at theta = 0 for everyone
    first = np.argmax(fisher_information(0.0, a, b, c))
    one = fluid_irt(values[:, [first]], a[[first]], b[[first]], c[[first]], budget=1)
    np.testing.assert_allclose(est[:, 0], one[:, 0])
    out = fluid_agreement(as_matrix(values), model="3pl", ks=[5, 20], n_splits=2, n_test=10, seed=0)
    assert list(out.columns) == ["split", "method", "k", "agreement", "model"] and len(out) == 4
    assert out["agreement"].between(-1, 1).all()


def test_q3_summary_sampled_pairs_keep_exact_means(testlets):
    m, cal, groups = testlets
    exact = q3_summary(m, cal, groups)
    sampled = q3_summary(m, cal, groups, max_pairs=50, seed=3)
    for key in ("mean_within", "mean_between", "mean_all", "n_within_pairs"):
        assert sampled[key] == pytest.approx(exact[key], abs=1e-12)
    assert abs(sampled["share_within_above"] - exact["share_within_above"]) < 0.2
    pd.testing.assert_series_equal(sampled, q3_summary(m, cal, groups, max_pairs=50, seed=3))


def test_item_fit_uses_a_3pl_calibrations_asymptote():
    rng = np.random.default_rng(18)
    theta, b, a = rng.normal(size=600), rng.normal(0.5, 1, 60), np.exp(rng.normal(0.3, 0.3, 60))
    values = (rng.random((600, 60)) < 0.25 + 0.75 * expit(a * (theta[:, None] - b))).astype(float)
    m = as_matrix(values)
    three = fit_irt(m, model="3pl")
    assert three.c is not None and three.probabilities().shape == (600, 60)
    fit3 = item_fit(m, three)
    assert (fit3["df"] == 10 - 3).all() and fit3.attrs["n_item_parameters"] == 3
    # measured: mean p 0.48 under the 3PL, no item flagged
    assert fit3["flagged"].mean() <= 0.1
    dropped = Calibration(a=three.a, b=three.b, theta=three.theta, engine="map", settings={"model": "2pl"})
    # the same curves without their floor misfit: measured 53% of items flagged, mean p 0.18
    assert item_fit(m, dropped)["flagged"].mean() > 0.3


def test_figures_build(clean_2pl, testlets):
    from matplotlib.figure import Figure

    from irtlib.viz import fit_figures as plots_fit

    m, cal = clean_2pl
    tm, tcal, groups = testlets
    dims = dimensionality(m, cal, n=4, n_replications=2, refit=False)
    table = pd.DataFrame({"model": ["1pl", "2pl"], "heldout_loglik": [-0.6, -0.5], "heldout_se": [0.01, 0.01]})
    curve = pd.DataFrame({"k": [1, 2, 4], "mean": [0.2, 0.5, 0.9], "sd": [0.1, 0.1, 0.05]})
    figs = [plots_fit.sx2_pvalues({"a": item_fit(m, cal)}),
            plots_fit.q3_heatmap(q3(tm, tcal, items=tm.items[:12]), groups, title="t"),
            plots_fit.scree({"a": dims, "b": dims}),
            plots_fit.heldout_comparison({"a": table}),
            plots_fit.agreement_pair({"x": curve, "y": curve}, styles={"x": ("k", ":")})]
    assert all(isinstance(f, Figure) and f.axes for f in figs)


def test_3pl_information_is_the_bernoulli_information():
    # I(theta) = P'(theta)^2 / (P (1 - P)), checked by a numerical derivative
    from irtlib import fisher_information

    theta = np.array([-1.0, 0.3, 2.0])
    a, b, c = np.array([0.7, 1.5, 2.5]), np.array([0.0, 1.0, -0.5]), np.array([0.0, 0.2, 0.4])
    p = lambda t: c + (1 - c) * expit(a * (t[:, None] - b))   # noqa: E731
    h = 1e-6
    dp = (p(theta + h) - p(theta - h)) / (2 * h)
    info = fisher_information(theta[:, None], a, b, c)
    np.testing.assert_allclose(info, dp**2 / (p(theta) * (1 - p(theta))), rtol=1e-6)
    np.testing.assert_allclose(fisher_information(theta[:, None], a, b)[:, 0], info[:, 0])


def test_leave_one_out_deconvolution_is_stable_on_a_longer_bank():
    # the deconvolved rest-score distribution of each item equals a fresh Lord-Wingersky run without it
    from irtlib.fit.checks import _leave_one_out_exact

    rng = np.random.default_rng(19)
    nodes = np.linspace(-4, 4, 15)
    p = expit(np.exp(rng.normal(0, 0.8, 120)) * (nodes[:, None] - rng.normal(0, 1.5, 120)))
    rest = np.arange(0, 120, 7)
    got = _leave_one_out_exact(lord_wingersky(p), p, rest)                  # (J, R, Q)
    for j in (0, 17, 64, 119):
        direct = lord_wingersky(np.delete(p, j, axis=1))[:, rest].T          # (R, Q)
        np.testing.assert_allclose(got[j], direct, atol=1e-12)


def test_sx2_calibrated_in_the_book_regime(sim_80x2000):
    # fewer models than items, as in the book: 80 x 2,000 from the 2PL with log a ~ N(0, 1)
    values, *_ = sim_80x2000
    m = as_matrix(values).filter_variance()
    fit = item_fit(m, fit_2pl(m, engine="map"))
    # measured: 4.6% of p-values below 0.05, mean p 0.55, 0.15% flagged (normal approximation)
    assert fit.attrs["score_distribution"] == "normal"
    assert 0.02 <= (fit["p_value"] < 0.05).mean() <= 0.08
    assert fit["flagged"].mean() <= 0.01


def test_simulate_fitted_keeps_shape_missing_cells_and_seed(clean_2pl):
    from irtlib.fit.checks import simulate_fitted

    m, cal = clean_2pl
    holes = m.values.copy()
    holes[:5, 0] = np.nan
    mh = as_matrix(holes)
    sim = simulate_fitted(mh, cal, seed=1)
    assert sim.shape == mh.shape and np.isnan(sim.values[:5, 0]).all() and sim.observed.sum() == mh.observed.sum()
    assert sim == simulate_fitted(mh, cal, seed=1) and not sim == simulate_fitted(mh, cal, seed=2)
    expected = cal.probabilities().to_numpy().mean(axis=0)
    assert np.abs(np.nanmean(sim.values, axis=0) - expected).max() < 0.06


# ---------------------------------------------------------------------------- Q3 by category
@pytest.fixture(scope="module")
def second_dimension():
    # 500 models, items in three categories; the 20 "copyright" items also load on a second,
    # independent trait (SD 1.2): a second dimension confined to one category
    rng = np.random.default_rng(11)
    theta, eta = rng.normal(size=500), rng.normal(0, 1.2, size=500)
    cats = np.array(["standard"] * 30 + ["contextual"] * 25 + ["copyright"] * 20)
    a, b = np.exp(rng.normal(0, 0.3, cats.size)), rng.normal(size=cats.size)
    z = a * (theta[:, None] - b) + np.where(cats == "copyright", 1.0, 0.0) * eta[:, None]
    m = as_matrix((rng.random(z.shape) < expit(z)).astype(float))
    return m, fit_2pl(m, engine="map"), pd.Series(cats, index=m.items)


def test_q3_by_category_equals_brute_force_means(second_dimension):
    m, cal, cats = second_dimension
    table = q3_by_category(m, cal, cats)
    full = q3(m, cal).to_numpy()
    c = cats.to_numpy()
    for g in table.index:
        for h in table.columns:
            block = full[np.ix_(c == g, c == h)]
            expected = block[np.triu_indices(block.shape[0], 1)].mean() if g == h else block.mean()
            assert table.loc[g, h] == pytest.approx(expected, abs=1e-12)
    assert list(table.index) == ["standard", "contextual", "copyright"]
    assert table.attrs["n_items"] == {"standard": 30, "contextual": 25, "copyright": 20}
    assert table.attrs["mean_all"] == pytest.approx(full[np.triu_indices(75, 1)].mean(), abs=1e-12)
    np.testing.assert_allclose(table.to_numpy(), table.to_numpy().T, atol=1e-12)


def test_q3_by_category_finds_the_planted_second_dimension(second_dimension, clean_2pl):
    m, cal, cats = second_dimension
    table = q3_by_category(m, cal, cats)
    # measured: copyright within 0.068, the other within/across cells 0.006 to 0.008, copyright
    # against the rest -0.05 (the one ability absorbs part of the second trait)
    off = table.drop(index="copyright", columns="copyright").to_numpy()
    assert table.loc["copyright", "copyright"] > 0.04
    assert table.loc["copyright", "copyright"] - np.max(off) > 0.04
    assert (table.loc["copyright"].drop("copyright") < -0.02).all()
    # on a true 2PL no category stands out
    m0, cal0 = clean_2pl
    null = q3_by_category(m0, cal0, pd.Series(np.repeat(["x", "y"], 20), index=m0.items))
    assert np.abs(null.to_numpy()).max() < 0.05


def test_q3_by_category_single_items_and_unassigned(second_dimension):
    m, cal, cats = second_dimension
    odd = cats.copy().astype(object)
    odd.iloc[0] = "alone"
    odd.iloc[1] = np.nan                               # in no category: left out
    table = q3_by_category(m, cal, odd)
    assert np.isnan(table.loc["alone", "alone"])
    assert sum(table.attrs["n_items"].values()) == 74
    with pytest.raises(ValueError, match="groups has 2 entries for 75 items"):
        q3_by_category(m, cal, ["a", "b"])
