"""The formula module: every 1PL/2PL/3PL formula in irtlib.core.kernels, exact and tail-safe.

Two kinds of test: (1) an AST scan of ``irtlib/`` and of the book's package ``bookkit/irtbook/``
(named ``book/...`` here) that fails when a probability or an
information is computed outside the kernel module (one place for each formula),
with an explicit allow-list; (2) the kernels against independent computations: finite
differences, 50-digit arithmetic (mpmath) in the tails ``|z| = 40`` and ``800``, scipy.
"""

from __future__ import annotations

import ast
from pathlib import Path

import mpmath
import numpy as np
import pytest

from irtlib.core import kernels as K

ROOT = Path(__file__).resolve().parents[2] / "irtlib"
#: The book's own package, whose modules the scan names ``book/<module>.py``.
BOOK = Path(__file__).resolve().parents[2] / "bookkit" / "irtbook"
KERNEL = "core/kernels.py"


def _source(rel: str) -> Path:
    """The file of a scan name: ``book/x.py`` in the book's package, anything else in irtlib."""
    return BOOK / rel.removeprefix("book/") if rel.startswith("book/") else ROOT / rel


def _scanned() -> list[tuple[str, Path]]:
    """Every module the scan reads, as (name, path): irtlib's, then the book's as ``book/...``."""
    return ([(p.relative_to(ROOT).as_posix(), p) for p in sorted(ROOT.rglob("*.py"))]
            + [("book/" + p.relative_to(BOOK).as_posix(), p) for p in sorted(BOOK.rglob("*.py"))])

#: Where a formula-shaped expression is allowed outside the kernel module, and why.
#: Keys: "path" (the whole module) or "path::Class" / "path::function" (that definition only).
ALLOWED = {
    # different models, whose formulas live once in their own modules
    "extended/mirt.py": "multidimensional 2PL: sigmoid(theta . a + d), a different model",
    # the fast adaptive MAP keeps Taylor moments of sigma's derivatives (polynomials in s) around a
    # reference theta; tests/test_adaptive.py checks its estimates against map_ability to 1e-7
    "selection/estimators.py::_MapRun": "Taylor moments of the 2PL score (the fast estimator's representation)",
    # Bernoulli variances of observed rates or predicted responses: a variance, not the
    # information, and p (1 - p) is the formula's own definition there
    "core/responses.py::ResponseMatrix": "binomial variance p (1 - p) of an item's observed safe rate (the filter)",
    "bank/build.py::calibrate_bank": "the paper's variance filter on observed rates",
    "bank/grow.py::add_items": "the paper's variance filter on the new items' observed rates",
    "selection/items.py::TwoPLItems": "variance of the unanswered responses' sum at a cut (certification)",
    "fit/checks.py::sx2_expected": "variance of the summed score (S-X2's normal approximation)",
    "fit/checks.py::_sx2": "S-X2's binomial denominator e (1 - e) of an expected proportion",
    "fit/checks.py::_mean_squares": "infit/outfit weights: the variance of a predicted response",
    "book/authors_fits.py": "the paper's variance filter on observed rates",
    "book/scorecard.py": "binomial standard error of a safety score",
    "calibration/models.py::_step": "c (1 - c): the Jacobian of c = sigmoid(gamma), the 3PL's asymptote",
    # the 1PL/3PL engine's point keeps sigmoid(z) for its step, and forms P from it with probability()'s
    # own expression rather than evaluate the logistic again (tests/fit/test_previous_forms.py: same bits);
    # its tables come from one C pass whose numpy reference (the fallback, and the load check) is here
    "calibration/threepl_kernel.py::numpy_point_tables": "the 3PL probability c + (1 - c) s from the point's own "
                                                         "s = sigmoid(z)",
    "calibration/threepl_kernel.py::numpy_step_tables": "c (1 - c): the Jacobian of c = sigmoid(gamma), the 3PL's "
                                                        "asymptote",
}


def _is_one(node) -> bool:
    return isinstance(node, ast.Constant) and node.value in (1, 1.0)


def _one_minus(node):
    """``X`` when ``node`` is ``1 - X`` (or ``1.0 - X``), else None."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and _is_one(node.left):
        return node.right
    return None


def _factors(node):
    """The operands of a chain of multiplications."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _factors(node.left) + _factors(node.right)
    return [node]


def _has_mult_of_sub(node) -> bool:
    """``a * (theta - b)``-shaped (a product with a difference inside) or ``A theta - A b``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return any(isinstance(f, ast.BinOp) and isinstance(f.op, ast.Sub) for f in _factors(node))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
        return any(isinstance(side, ast.BinOp) and isinstance(side.op, ast.Mult) for side in (node.left, node.right))
    return False


def formula_sites(tree: ast.AST) -> list[tuple[int, str]]:
    """Lines of ``tree`` that compute a 1PL/2PL/3PL probability or information by hand."""
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("expit", "sigmoid") and _has_mult_of_sub(node.args[0]):
                hits.append((node.lineno, f"{name}(a * (theta - b)): the probability"))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            facs = [ast.dump(f) for f in _factors(node)]
            for f in _factors(node):
                inner = _one_minus(f)
                if inner is not None and ast.dump(inner) in facs:
                    hits.append((node.lineno, "s * (1 - s): the information's P (1 - P)"))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.right, ast.BinOp) \
                and isinstance(node.right.op, ast.Mult):
            inner = _one_minus(node.right.left)
            if inner is not None and ast.dump(inner) == ast.dump(node.left):
                hits.append((node.lineno, "c + (1 - c) * s: the 3PL probability"))
    return hits


def _owner(tree: ast.AST, lineno: int) -> list[str]:
    """Names of the top-level class or function containing ``lineno``."""
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
            and n.lineno <= lineno <= (n.end_lineno or n.lineno)]


def test_probability_and_information_are_computed_only_in_the_kernel_module():
    found = []
    for rel, path in _scanned():
        if rel == KERNEL or rel in ALLOWED:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for lineno, what in formula_sites(tree):
            if any(f"{rel}::{name}" in ALLOWED for name in _owner(tree, lineno)):
                continue
            found.append(f"{path}:{lineno}: {what}")
    assert found == [], "use irtlib.core.kernels instead:\n" + "\n".join(found)


def test_the_scan_sees_each_pattern_and_the_allow_list_is_live():
    src = ("p = expit(a * (theta - b))\n"
           "i = a * a * p * (1.0 - p)\n"
           "q = c + (1 - c) * s\n"
           "ok = expit(z) * expit(-z)\n")
    assert [line for line, _ in formula_sites(ast.parse(src))] == [1, 2, 3]
    for key in ALLOWED:                      # every entry still names something that exists
        rel, _, name = key.partition("::")
        tree = ast.parse(_source(rel).read_text(encoding="utf-8"))
        assert not name or name in {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}, key
        sites = formula_sites(tree)
        assert sites if not name else any(name in _owner(tree, line) for line, _ in sites), f"stale: {key}"


# ---------------------------------------------------------------------------- independent values
mpmath.mp.dps = 50


def _mp(theta, a, b, c=0.0):
    """Probability, information, d log P / d theta pieces in 50-digit arithmetic."""
    z = mpmath.mpf(a) * (mpmath.mpf(theta) - mpmath.mpf(b))
    s, q = 1 / (1 + mpmath.exp(-z)), 1 / (1 + mpmath.exp(z))      # P and 1 - P of the 2PL, each exact
    c = mpmath.mpf(c)
    p, one_minus_p = c + (1 - c) * s, (1 - c) * q
    dp = mpmath.mpf(a) * (1 - c) * s * q
    return p, one_minus_p, dp * dp / (p * one_minus_p), dp


@pytest.mark.parametrize("z", [-800.0, -40.0, -3.0, 0.0, 2.5, 40.0, 800.0])
@pytest.mark.parametrize("c", [None, 0.2])
def test_kernels_in_the_tails_against_50_digit_arithmetic(z, c):
    a, b = 1.7, 0.3
    theta = b + z / a
    p_mp, q_mp, info_mp, dp_mp = _mp(theta, a, b, 0.0 if c is None else c)
    with np.errstate(all="raise"):          # no overflow, no 0/0, no warning of any kind
        p = K.probability(theta, a, b, c)
        info = K.fisher_information(theta, a, b, c)
        ll1, ll0 = K.log_likelihood(1.0, theta, a, b, c), K.log_likelihood(0.0, theta, a, b, c)
        s1, s0 = K.score(1.0, theta, a, b, c), K.score(0.0, theta, a, b, c)
    tiny = np.finfo(float).tiny
    assert p == pytest.approx(float(p_mp), rel=1e-14, abs=tiny)
    # the information keeps its relative accuracy wherever it is representable (p (1 - p) from a
    # rounded p would be exactly 0 at z = 40)
    assert info == pytest.approx(float(info_mp), rel=1e-12, abs=tiny)
    if abs(z) == 40 and c is None:
        assert info > 0
    assert ll1 == pytest.approx(float(mpmath.log(p_mp)), rel=1e-13)
    assert ll0 == pytest.approx(float(mpmath.log(q_mp)), rel=1e-13, abs=1e-300)
    assert s1 == pytest.approx(float(dp_mp / p_mp), rel=1e-12, abs=tiny)
    assert s0 == pytest.approx(float(-dp_mp / q_mp), rel=1e-12, abs=tiny)


def test_information_and_score_against_finite_differences():
    rng = np.random.default_rng(0)
    theta = rng.normal(size=(7, 1)) * 2
    a, b, c = np.exp(rng.normal(0, 0.5, 9)), rng.normal(size=9), rng.uniform(0, 0.4, 9)
    x = (rng.random((7, 9)) < 0.5).astype(float)
    h = 1e-5
    for cc in (None, c):
        p = lambda t, cc=cc: K.probability(t, a, b, cc)          # noqa: E731
        dp = (p(theta + h) - p(theta - h)) / (2 * h)
        np.testing.assert_allclose(K.fisher_information(theta, a, b, cc), dp**2 / (p(theta) * (1 - p(theta))),
                                   rtol=1e-7)
        ll = lambda t, cc=cc: K.log_likelihood(x, t, a, b, cc)    # noqa: E731
        np.testing.assert_allclose(K.score(x, theta, a, b, cc), (ll(theta + h) - ll(theta - h)) / (2 * h),
                                   rtol=1e-6, atol=1e-9)
        # the expected information is minus the expected derivative of the score
        ds1 = (K.score(1.0, theta + h, a, b, cc) - K.score(1.0, theta - h, a, b, cc)) / (2 * h)
        ds0 = (K.score(0.0, theta + h, a, b, cc) - K.score(0.0, theta - h, a, b, cc)) / (2 * h)
        np.testing.assert_allclose(-(p(theta) * ds1 + (1 - p(theta)) * ds0), K.fisher_information(theta, a, b, cc),
                                   rtol=1e-6)
    # log-likelihood: the brute-force Bernoulli log of the probability
    p3 = K.probability(theta, a, b, c)
    np.testing.assert_allclose(K.log_likelihood(x, theta, a, b, c), np.log(np.where(x == 1, p3, 1 - p3)), rtol=1e-12)


def test_the_3pl_with_no_asymptote_is_the_2pl_and_the_joint_kernels_agree():
    rng = np.random.default_rng(1)
    theta, a, b = rng.normal(size=(5, 1)), np.exp(rng.normal(0, 0.5, 8)), rng.normal(size=8)
    x = (rng.random((5, 8)) < 0.5).astype(float)
    zero = np.zeros(8)
    np.testing.assert_array_equal(K.probability(theta, a, b, zero), K.probability(theta, a, b))
    np.testing.assert_array_equal(K.fisher_information(theta, a, b, zero), K.fisher_information(theta, a, b))
    np.testing.assert_allclose(K.score(x, theta, a, b, zero), K.score(x, theta, a, b), rtol=0, atol=1e-15)
    for c in (None, rng.uniform(0, 0.3, 8)):
        g, i = K.score_and_information(x, theta, a, b, c)
        np.testing.assert_array_equal(g, K.score(x, theta, a, b, c))
        np.testing.assert_array_equal(i, K.fisher_information(theta, a, b, c))
        g_z, w_zz = K.z_derivatives(x, K.logit_z(theta, a, b), c)
        np.testing.assert_allclose(a * g_z, g, rtol=1e-15)
        np.testing.assert_allclose(a * a * w_zz, i, rtol=1e-15)
    np.testing.assert_allclose(K.expected_score(theta[:, 0], a, b), K.probability(theta, a, b).mean(axis=1))


def test_the_float32_screen_stays_within_the_margin_of_the_kernel():
    # the one allowed second form of the 2PL information: MaxInformation assumes its relative
    # error is below err = 2.4e-7 |a|max (8 + |b|max) + 1e-6
    from irtlib.selection.selectors import _information32

    rng = np.random.default_rng(2)
    a, b = np.exp(rng.normal(0, 0.6, 500)), rng.normal(0, 1.5, 500)
    theta = np.linspace(-8, 8, 41)[:, None]
    err = 2.4e-7 * np.abs(a).max() * (8 + np.abs(b).max()) + 1e-6
    a32 = a.astype(np.float32)
    got = _information32(theta.astype(np.float32), a32, b.astype(np.float32), a32 * a32).astype(float)
    want = K.fisher_information(theta, a, b)
    keep = want > 1e-30                      # float32 underflows far out
    assert np.abs(got[keep] / want[keep] - 1).max() < err


# ---------------------------------------------------------------------------- one estimator, one loop
def _draw(n, j, seed, c=None):
    rng = np.random.default_rng(seed)
    theta, a, b = rng.normal(size=n), np.exp(rng.normal(0, 0.4, j)), rng.normal(size=j)
    p = K.probability(theta[:, None], a, b, c)
    return (rng.random(p.shape) < p).astype(float), theta, a, b


def test_map_ability_with_guessing_is_the_3pl_posterior_mode():
    from scipy.optimize import minimize_scalar

    from irtlib import map_ability

    c = np.full(40, 0.25)
    x, _, a, b = _draw(12, 40, 3, c)
    x[2, :10] = np.nan
    est = map_ability(x, a, b, c=c)
    for m in range(12):
        obs = ~np.isnan(x[m])

        def neg(t, m=m, obs=obs):
            return -(K.log_likelihood(x[m, obs], t, a[obs], b[obs], c[obs]).sum() - 0.5 * t * t)

        best = minimize_scalar(neg, bounds=(-8, 8), method="bounded", options={"xatol": 1e-10})
        assert est.theta[m] == pytest.approx(best.x, abs=1e-6)
    # with c = 0, the 2PL estimator
    np.testing.assert_allclose(map_ability(x, a, b, c=np.zeros(40)).theta, map_ability(x, a, b).theta, atol=1e-10)
    with pytest.raises(ValueError, match=r"must lie in \[0, 1\)"):
        map_ability(x, a, b, c=np.full(40, 1.0))


def test_run_adaptive_with_guessing_follows_the_straightforward_loop():
    from irtlib import map_ability
    from irtlib.selection.adaptive import run_adaptive

    c = np.full(60, 0.2)
    x, theta, a, b = _draw(6, 60, 4, c)
    traj = run_adaptive(x, a, b, budget=12, c=c)
    for m in range(6):                       # information at the estimate, argmax, MAP: one model at a time
        t, given = 0.0, []
        for step in range(12):
            info = K.fisher_information(t, a, b, c)
            info[given] = -np.inf
            j = int(np.argmax(info))
            given.append(j)
            assert traj.items[m, step] == j
            t = float(map_ability(x[m, given], a[given], b[given], c=c[given], theta0=t).theta)
            assert traj.estimate[m, step] == pytest.approx(t, abs=1e-12)


def test_split_agreements_is_the_protocols_split_loop():
    from irtlib.core.stats import spearman
    from irtlib.protocol.agreement import split_agreements, split_models

    rng = np.random.default_rng(5)
    values, reference = rng.random((20, 5)), rng.random(20)
    got = split_agreements(values, reference, [0, 3], lambda s, tr, te: values[te, s % 5], n_test=6, seed=9)
    for rho, s in zip(got, [0, 3], strict=True):
        _, test = split_models(20, 6, 9, s)
        assert rho == spearman(values[test, s % 5], reference[test])


def test_average_ranks_are_scipys_rankdata_exactly_with_and_without_ties():
    from scipy.stats import rankdata

    from irtlib.core.stats import average_ranks

    rng = np.random.default_rng(5)
    for trial in range(200):
        shape = (int(rng.integers(1, 5)), int(rng.integers(1, 40)))
        values = rng.integers(0, int(rng.integers(1, 8)), shape).astype(float) if trial % 2 else rng.normal(size=shape)
        np.testing.assert_array_equal(average_ranks(values), rankdata(values, axis=1))
    np.testing.assert_array_equal(average_ranks(np.array([[3.0, 1.0, 3.0, 2.0, 3.0]])), [[4.0, 1.0, 4.0, 2.0, 4.0]])


def test_short_rows_are_ranked_by_counting_as_by_the_sort_bit_for_bit(monkeypatch):
    # rows up to _COUNTED long are ranked by counting pairs; the sort's ranks, float for float (ties, signed
    # zeros, infinities), and rows with NaN or longer ones still take the sort
    from irtlib.core import stats

    rng = np.random.default_rng(6)
    cases = [rng.integers(0, int(rng.integers(1, 6)), (int(rng.integers(1, 30)), n)).astype(float)
             for n in (0, 1, 2, 7, 8, 33, 64, 65, 90)]
    cases += [rng.normal(size=(24, 20)), np.array([[0.0, -0.0, np.inf, -np.inf, 1.0, -0.0, np.inf]]),
              np.array([[1.0, np.nan, 0.0, 1.0]])]
    counted = [stats.average_ranks(v) for v in cases]
    monkeypatch.setattr(stats, "_COUNTED", -1)
    for v, got in zip(cases, counted, strict=True):
        want = stats.average_ranks(v)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.array_equal(got, want, equal_nan=True)


def test_spearman_is_scipys():
    from scipy.stats import spearmanr

    from irtlib.core.stats import spearman

    rng = np.random.default_rng(6)
    x, y = rng.integers(0, 4, (5, 30)).astype(float), rng.integers(0, 6, 30).astype(float)   # ties
    np.testing.assert_allclose(spearman(x, y), [spearmanr(r, y)[0] for r in x], rtol=1e-12)
    assert np.isnan(spearman(np.ones(30), y)) and np.isnan(spearman(np.r_[np.nan, y[1:]], y))


@pytest.mark.parametrize("z", [-800.0, -40.0, -3.0, 0.0, 2.5, 40.0, 800.0])
def test_response_terms_against_50_digit_arithmetic(z):
    """The engine's one-exp kernel: log-likelihood, x - P and P (1 - P) of each response, in both tails."""
    zz = np.array([[z, z]])
    flip = np.array([[-1.0, 1.0]], dtype=np.float32)                   # a safe and an unsafe response
    with np.errstate(all="raise"):
        ll, g, w = K.response_terms(flip, zz)
    s, q = 1 / (1 + mpmath.exp(-mpmath.mpf(z))), 1 / (1 + mpmath.exp(mpmath.mpf(z)))
    assert ll == pytest.approx(float(mpmath.log(s) + mpmath.log(q)), rel=1e-13, abs=1e-300)
    assert g[0, 0] == pytest.approx(float(q), rel=1e-12, abs=np.finfo(float).tiny)           # 1 - P
    assert g[0, 1] == pytest.approx(float(-s), rel=1e-12, abs=np.finfo(float).tiny)          # 0 - P
    assert w[0, 0] == w[0, 1] == pytest.approx(float(s * q), rel=1e-12, abs=np.finfo(float).tiny)


def test_response_terms_agree_with_the_separate_kernels_and_skip_unobserved_cells():
    rng = np.random.default_rng(3)
    theta, a, b = rng.normal(size=(40, 1)) * 2, np.exp(rng.normal(0, 0.7, 700)), rng.normal(size=700)
    x = (rng.random((40, 700)) < 0.5).astype(float)
    x[rng.random(x.shape) < 0.1] = np.nan
    seen = ~np.isnan(x)
    z = K.logit_z(theta, a, b)
    flip = np.where(seen, 1 - 2 * np.nan_to_num(x), 0.0)
    ll, g, w = K.response_terms(flip.astype(np.float32), z, observed=seen)
    g0, w0 = K.z_derivatives(np.nan_to_num(x), z)
    assert ll == pytest.approx(K.log_likelihood(x, theta, a, b)[seen].sum(), rel=1e-13)
    np.testing.assert_allclose(g, np.where(seen, g0, 0.0), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(w, np.where(seen, w0, 0.0), rtol=1e-12, atol=1e-15)
    # float32 work arrays: the same to single precision, the log-likelihood still summed in float64
    out = tuple(np.empty(z.shape, np.float32) for _ in range(5))
    ll32, g32, w32 = K.response_terms(flip.astype(np.float32), z.astype(np.float32), observed=seen, out=out)
    assert g32.dtype == np.float32 and ll32 == pytest.approx(ll, rel=1e-6)
    np.testing.assert_allclose(g32, g, rtol=0, atol=1e-6)
    np.testing.assert_allclose(w32, w, rtol=0, atol=1e-6)


def test_bernoulli_variance_into_a_given_array_is_the_same_values():
    p = np.concatenate([[0.0, 1.0, 0.5, 1e-300], np.random.default_rng(2).random(200)])
    out = np.full_like(p, np.nan)
    got = K.bernoulli_variance(p, out=out)
    assert got is out
    np.testing.assert_array_equal(got, K.bernoulli_variance(p))
    np.testing.assert_array_equal(got, [q * (1.0 - q) for q in p])        # one float at a time
