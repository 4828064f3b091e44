"""Item banks (irtlib.bank.build) and reading users' response files (irtlib.io)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from conftest import simulate_2pl
from kernel_helpers import numpy_or_kernel

from irtlib.bank.build import (
    ItemBank,
    calibrate_bank,
    read_bank,
    read_subset,
    score_interval,
    select_subset,
    write_subset,
)
from irtlib.core.responses import ResponseMatrix
from irtlib.io import load_responses, read_model_responses, read_responses
from irtlib.io.atomic import atomic_write
from irtlib.io.checksums import matrix_sha256


@pytest.fixture(scope="module")
def matrix():
    values, *_ = simulate_2pl(40, 150, seed=3)
    values[:, :4] = 1.0          # four all-safe items: removed by the variance filter
    values[:, 4] = 0.0           # and one all-unsafe item
    return ResponseMatrix(values, [f"m{i:02d}" for i in range(40)], [f"q{j:03d}" for j in range(150)])


@pytest.fixture(scope="module")
def bank(matrix):
    return calibrate_bank(matrix, source="sim", data_sha256="abc")


# ---------------------------------------------------------------------------- bank
def test_calibrate_bank_filters_and_records_settings(bank, matrix):
    assert len(bank) == 145
    assert bank.filtered == {"n_items": 5, "n_safe": 4, "n_unsafe": 1, "safe_rate_sum": 4.0}
    assert bank.n_items_full == 150
    assert bank.meta["settings"]["engine"] == "map"
    assert bank.meta["settings"]["variance_threshold"] == 0.01
    assert bank.meta["data"]["matrix_sha256"] == matrix_sha256(matrix)
    assert bank.meta["data"]["sha256"] == "abc"
    assert list(bank.calibration_theta.index) == list(matrix.models)
    assert {"a", "b", "safe_rate", "n_models", "expected", "residual"} <= set(bank.items.columns)
    check = bank.meta["interval_check"]
    # the check's checkpoints up to the longest test (145 items) and its fold settings
    assert check["k"] == [1, 2, 3, 5, 10, 20, 30, 50, 100] and check["n_models"] == 40 and check["seed"] == 0
    # on 2PL data the 2PL intervals need little widening: the factors stay near 1 (observed 1.0 to 1.44)
    assert max(check["inflation"]) < 1.8 and check["inflation"][0] < 1.2


def test_bank_round_trip_is_exact(bank, tmp_path):
    path = bank.write(tmp_path / "bank.csv")
    again = read_bank(path)
    assert again.checksum == bank.checksum
    pd.testing.assert_frame_equal(again.items, bank.items, check_dtype=False)
    assert again.meta["filtered"] == bank.meta["filtered"]
    # writing the bank that was read reproduces the file byte for byte, except the header's path
    again.write(tmp_path / "copy.csv")
    assert (tmp_path / "copy.csv").read_text().split("\n", 1)[1] == path.read_text().split("\n", 1)[1]


def test_nothing_is_overwritten_without_force(bank, tmp_path):
    target = tmp_path / "bank.csv"
    target.write_text("precious")
    with pytest.raises(FileExistsError, match="--force"):
        bank.write(target)
    assert target.read_text() == "precious"
    with pytest.raises(FileExistsError, match="not written by irtlib"):   # --force replaces only a bank
        bank.write(target, force=True)
    assert target.read_text() == "precious"
    target.unlink()
    bank.write(target)
    bank.write(target, force=True)                                        # a previous bank: replaced
    assert read_bank(target).checksum == bank.checksum
    assert [p.name for p in tmp_path.iterdir()] == ["bank.csv"]   # no temporary file left behind
    # the writer itself (banks, states, subsets, reports and the release all use it)
    other = tmp_path / "out.txt"
    atomic_write(other, "one")
    with pytest.raises(FileExistsError):
        atomic_write(other, "two")
    assert other.read_text() == "one"
    atomic_write(other, "two", force=True)
    assert other.read_text() == "two"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        atomic_write(tmp_path / "nodir" / "x.txt", "x")


def test_edited_or_foreign_bank_is_rejected(bank, tmp_path):
    path = bank.write(tmp_path / "bank.csv")
    header, body = path.read_text().split("\n", 1)
    (tmp_path / "edited.csv").write_text(header + "\n" + body.replace("q010,", "q010,9", 1))
    with pytest.raises(ValueError, match="edited.csv: the item table does not match the checksum"):
        read_bank(tmp_path / "edited.csv")
    (tmp_path / "plain.csv").write_text("item,a,b\nq1,1,0\n")
    with pytest.raises(ValueError, match="plain.csv: not an irtlib item bank"):
        read_bank(tmp_path / "plain.csv")
    (tmp_path / "header.csv").write_text("# irtlib-bank {not json\n" + body)
    with pytest.raises(ValueError, match="header.csv: line 1: corrupt bank header"):
        read_bank(tmp_path / "header.csv")


def test_bank_validates_parameters():
    with pytest.raises(ValueError, match="row 2: discrimination a must be positive"):
        ItemBank(pd.DataFrame({"a": [1.0, -1.0], "b": [0.0, 0.0]}, index=["x", "y"]))
    with pytest.raises(ValueError, match="no column 'b'"):
        ItemBank(pd.DataFrame({"a": [1.0]}, index=["x"]))


def test_check_items_spots_another_benchmark(bank):
    with pytest.raises(ValueError, match="another benchmark"):
        bank.check_items(["z1", "z2"], source="other.csv")
    bank.check_items(["q010", "z2"], source="ok.csv")


def test_predicted_full_score_counts_filtered_items(bank):
    p = bank.expected_bank_score(0.0)
    full = bank.predicted_full_score(0.0)
    assert full == pytest.approx((p * 145 + 4.0) / 150)
    # known responses replace their model-implied probability
    item = bank.item_ids[0]
    known = pd.Series([1.0], index=[item])
    p0 = float(1 / (1 + np.exp(-bank.a[0] * (0.0 - bank.b[0]))))
    assert bank.predicted_full_score(0.0, known=known) == pytest.approx(full + (1 - p0) / 150)


def test_score_interval_is_ordered_and_monotone(bank):
    theta = np.linspace(-3, 3, 7)
    score, lo, hi = score_interval(bank.a, bank.b, theta, np.full(7, 0.3))
    assert np.all(lo <= score) and np.all(score <= hi)
    assert np.all(np.diff(score) > 0)
    theta = np.linspace(-1, 1, 5)
    score, lo, hi = score_interval(bank.a, bank.b, theta, np.full(5, 0.1))
    _, lo2, hi2 = score_interval(bank.a, bank.b, theta, np.full(5, 0.1), inflation=2.0)
    inner = (lo2 > 0) & (hi2 < 1)                     # where clipping to [0, 1] does not act
    assert inner.sum() >= 3
    np.testing.assert_allclose((hi2 - score)[inner], 2.0 * (hi - score)[inner], rtol=1e-12)
    np.testing.assert_allclose((score - lo2)[inner], 2.0 * (score - lo)[inner], rtol=1e-12)


def test_score_interval_against_a_hand_computation():
    """Two items, one known: the score, and each half-width as hypot(theta part, Bernoulli part) / n_full."""
    a, b = np.array([1.0, 2.0]), np.array([0.0, 1.0])
    theta, se, z = 0.5, 0.4, 1.959963984540054
    def p(t):                                                      # the unknown item
        return 1 / (1 + np.exp(-a[1] * (t - b[1])))

    spread = z * np.sqrt(p(theta) * (1 - p(theta)))
    n_full, filtered_sum = 5, 1.8                                  # 3 filtered items with 1.8 safe in all
    score = (1.0 + p(theta) + filtered_sum) / n_full
    lo = score - np.hypot(p(theta) - p(theta - z * se), spread) / n_full * 1.5
    hi = score + np.hypot(p(theta + z * se) - p(theta), spread) / n_full * 1.5
    got = score_interval(a, b, theta, se, known_mask=np.array([True, False]), known_sum=1.0,
                         filtered_sum=filtered_sum, n_full=n_full, inflation=1.5)
    np.testing.assert_allclose(got, (score, lo, hi), rtol=1e-12)


def test_score_interval_of_many_models_equals_one_model_at_a_time():
    """Per-model known items (the interval check's replays): each row as its own call, bit for bit."""
    rng = np.random.default_rng(3)
    a, b = np.exp(rng.normal(0.0, 0.7, 300)), rng.normal(size=300)
    theta, se = rng.normal(size=6), rng.uniform(0.1, 0.6, 6)
    known = rng.random((6, 300)) < 0.2
    known_sum = rng.uniform(0.0, 30.0, 6)
    item_se = (rng.uniform(0.0, 0.2, 300), rng.uniform(0.0, 0.2, 300))
    for extra in ({}, {"item_se": item_se}):
        got = score_interval(a, b, theta, se, known_mask=known, known_sum=known_sum, filtered_sum=2.5, n_full=320,
                             **extra)
        for m in range(6):
            one = score_interval(a, b, theta[m], se[m], known_mask=known[m], known_sum=known_sum[m], filtered_sum=2.5,
                                 n_full=320, **extra)
            assert [v[m] for v in got] == [float(v) for v in one]


@pytest.fixture(params=["numpy", "C kernel"])
def interval_path(request, monkeypatch):
    """score_interval's probabilities by numpy, or by the C kernel (skipped where it cannot be built)."""
    from irtlib.bank import interval_kernel

    return numpy_or_kernel(request.param, interval_kernel, monkeypatch, what="the interval kernel")


def test_known_items_by_index_give_the_masks_interval_bit_for_bit(interval_path):
    """The replays' known items by index (C kernel or numpy) against the mask they mark, on the numpy path."""
    from irtlib.bank import interval_kernel

    rng = np.random.default_rng(4)
    n_models, n_items = 9, 400
    a, b = np.exp(rng.normal(0.0, 1.2, n_items)), rng.normal(0.0, 2.0, n_items)
    theta, se = np.r_[rng.normal(0.0, 2.0, n_models - 2), 8.0, -8.0], rng.uniform(0.05, 0.8, n_models)
    given = np.where(rng.random((n_models, 30)) < 0.9, rng.choice(n_items, (n_models, 30)), -1)
    given[0] = -1                                                  # nothing known yet
    mask = np.zeros((n_models, n_items), dtype=bool)
    rows = np.broadcast_to(np.arange(n_models)[:, None], given.shape)
    mask[rows[given >= 0], given[given >= 0]] = True
    known_sum = rng.uniform(0.0, 20.0, n_models)
    item_se = (rng.uniform(0.0, 0.2, n_items), rng.uniform(0.0, 0.2, n_items))
    for extra in ({}, {"item_se": item_se}, {"inflation": 1.7}):
        by_index = score_interval(a, b, theta, se, known_items=given, known_sum=known_sum, filtered_sum=3.0,
                                  n_full=450, **extra)
        interval_kernel._LOADED["lib"], kept = None, interval_kernel._LOADED.get("lib")
        try:
            by_mask = score_interval(a, b, theta, se, known_mask=mask, known_sum=known_sum, filtered_sum=3.0,
                                     n_full=450, **extra)
        finally:
            interval_kernel._LOADED["lib"] = kept
        for got, want in zip(by_index, by_mask, strict=True):
            np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="known_mask or known_items"):
        score_interval(a, b, theta, se, known_mask=mask, known_items=given)


def test_the_interval_check_is_the_same_with_the_interval_kernel_and_with_numpy(matrix, monkeypatch):
    from irtlib.bank import coverage, interval_kernel

    if interval_kernel.load() is None:
        pytest.skip("the interval kernel cannot be built here")
    kept = matrix.filter_variance(0.01)
    rates = matrix.item_safe_rates()
    filtered_sum = float(rates[~rates.index.isin(kept.items)].sum())
    with_kernel = coverage.interval_check(matrix, kept.items, filtered_sum)
    monkeypatch.setitem(interval_kernel._LOADED, "lib", None)
    assert coverage.interval_check(matrix, kept.items, filtered_sum) == with_kernel
    assert len(with_kernel["k"]) >= 8 and max(with_kernel["inflation"]) > 1.0


def test_the_interval_kernel_is_off_when_turned_off(monkeypatch):
    from irtlib.bank import interval_kernel

    monkeypatch.setattr(interval_kernel, "_LOADED", {})
    monkeypatch.setenv("IRTLIB_INTERVAL_KERNEL", "0")
    assert interval_kernel.load() is None


def test_score_interval_agrees_with_scipys_expit_and_plain_sums_to_rounding():
    """The interval against an independent computation: scipy's expit item by item, plain sums, to 1e-13."""
    from scipy.special import expit

    rng = np.random.default_rng(11)
    n_models, n_items = 7, 3000
    a, b = np.exp(rng.normal(0.0, 1.2, n_items)), rng.normal(0.0, 3.0, n_items)
    theta, se = np.r_[rng.normal(0.0, 2.0, n_models - 2), 40.0, -40.0], rng.uniform(0.05, 0.8, n_models)
    known = rng.random((n_models, n_items)) < 0.02
    known_sum = rng.uniform(0.0, 20.0, n_models)
    score, lo, hi = score_interval(a, b, theta, se, known_mask=known, known_sum=known_sum, filtered_sum=3.0,
                                   n_full=3010)
    for m in range(n_models):
        unknown = ~known[m]

        def total(t, unknown=unknown):
            return sum(expit(a[j] * (t - b[j])) for j in np.flatnonzero(unknown))

        mid, low, high = total(theta[m]), total(theta[m] - 1.959963984540054 * se[m]), \
            total(theta[m] + 1.959963984540054 * se[m])
        p = expit(a[unknown] * (theta[m] - b[unknown]))
        spread = 1.959963984540054 * np.sqrt(np.sum(p * (1 - p)))
        want_score = (mid + known_sum[m] + 3.0) / 3010
        assert score[m] == pytest.approx(want_score, rel=1e-13, abs=1e-15)
        assert lo[m] == pytest.approx(max(0.0, want_score - np.hypot(mid - low, spread) / 3010), rel=1e-12, abs=1e-15)
        assert hi[m] == pytest.approx(min(1.0, want_score + np.hypot(high - mid, spread) / 3010), rel=1e-12,
                                      abs=1e-15)


def test_interval_inflation_interpolates_in_log_test_length(bank):
    check = {"k": [1, 10, 100], "inflation": [3.0, 2.0, 1.2]}
    b = ItemBank(bank.items, {"interval_check": check})
    assert b.interval_inflation(10) == pytest.approx(2.0)                       # at a knot
    assert b.interval_inflation(round(10 ** 0.5 * 1000) / 1000) == pytest.approx(2.5, abs=1e-4)   # halfway in log k
    assert b.interval_inflation(30) == pytest.approx(2.0 - 0.8 * np.log(3) / np.log(10))
    assert b.interval_inflation(10_000) == pytest.approx(1.2)                   # beyond the last knot: the last
    low = ItemBank(bank.items, {"interval_check": {"k": [1, 100], "inflation": [1.4, 0.6]}})
    assert low.interval_inflation(100) == 1.0                                   # never below 1
    assert ItemBank(bank.items, {}).interval_inflation(10) == 1.0               # no check: the plain interval
    assert ItemBank(bank.items, {"interval_check": {"skipped": "only 5 models"}}).interval_inflation(10) == 1.0


def test_random_subset_and_subset_file(bank, tmp_path):
    chosen = select_subset(bank, method="random", k=10, seed=1)
    assert len(chosen) == 10 and chosen.index.isin(bank.item_ids).all()
    assert chosen.equals(select_subset(bank, method="random", k=10, seed=1))
    path = write_subset(tmp_path / "sub.csv", chosen, bank=bank, method="random", k=10)
    frame, meta = read_subset(path)
    assert meta["bank_sha256"] == bank.checksum and list(frame.index) == list(chosen.index)
    with pytest.raises(ValueError, match="between 1 and"):
        select_subset(bank, method="random", k=1000)


# ---------------------------------------------------------------------------- io
def _long_frame():
    return pd.DataFrame({"model": ["m1", "m1", "m2", "m2", "m3", "m3"],
                         "item": ["001", "002", "001", "002", "001", "002"],
                         "score": [1, 0, 0.5, 1, 0, 1]})


def test_long_csv_with_strict_and_lenient(tmp_path):
    path = tmp_path / "long.csv"
    _long_frame().to_csv(path, index=False)
    strict = read_responses(path, rule="strict")
    assert list(strict.items) == ["001", "002"]          # identifiers stay strings
    assert strict.to_frame().loc["m2", "001"] == 0.0
    assert read_responses(path, rule="lenient").to_frame().loc["m2", "001"] == 1.0
    with pytest.raises(ValueError, match=r"long.csv: row 3: score 0.5 is not 0 or 1"):
        read_responses(path)                              # binary is the default


def test_wide_and_parquet_layouts(tmp_path):
    wide = pd.DataFrame({"model": ["m1", "m2"], "q1": [1, 0], "q2": [0, None]})
    wide.to_csv(tmp_path / "wide.csv", index=False)
    data = load_responses(tmp_path / "wide.csv")
    assert data.layout == "wide" and data.matrix.shape == (2, 2)
    assert np.isnan(data.matrix.to_frame().loc["m2", "q2"])
    _long_frame().assign(score=lambda d: (d.score == 1).astype(int)).to_parquet(tmp_path / "long.parquet")
    assert read_responses(tmp_path / "long.parquet").shape == (3, 2)


def test_choice_and_wmdp_rules(tmp_path):
    frame = pd.DataFrame({"model": ["m1", "m1", "m2"], "item": ["a", "b", "a"],
                          "answer": ["A", "C", "B"], "key": ["A", "B", "A"]})
    frame.to_csv(tmp_path / "mc.csv", index=False)
    choice = read_responses(tmp_path / "mc.csv", rule="choice", score_column="answer").to_frame()
    wmdp = read_responses(tmp_path / "mc.csv", rule="wmdp", score_column="answer").to_frame()
    assert choice.loc["m1", "a"] == 1.0 and choice.loc["m1", "b"] == 0.0
    assert wmdp.loc["m1", "a"] == 0.0 and wmdp.loc["m2", "a"] == 1.0


@pytest.mark.parametrize("content, message", [
    ("model,item,judgement\nm1,q1,1\n", r"missing column\(s\) \['score'\]"),
    ("model,item,score\nm1,q1,1\nm1,q2,yes\n", r"row 2: score 'yes' in column 'score' is not a number"),
    ("model,item,score\nm1,q1,1\n,q2,1\n", r"row 2: column 'model' is empty"),
    ("model,item,score\nm1,q1,1\nm2,q1,0\nm1,q1,0\n", r"rows \[1, 3\]: model 'm1', item 'q1' has conflicting scores"),
    ("model,q1,q2\nm1,1,0\nm2,1,7\n", r"row 2: model 'm2', column 'q2': score 7 is not 0 or 1"),
    ("model,q1\nm1,1\nm1,0\n", r"row 2: model 'm1' appears in more than one row"),
])
def test_errors_name_file_and_row(tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(ValueError, match=message) as info:
        read_responses(path)
    assert str(info.value).startswith(str(path)) and "\n" not in str(info.value)


def test_missing_file_and_unreadable_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_responses(tmp_path / "absent.csv")
    (tmp_path / "x.parquet").write_bytes(b"not parquet")
    with pytest.raises(ValueError, match="x.parquet: cannot read as a Parquet table"):
        read_responses(tmp_path / "x.parquet")


def test_read_model_responses(tmp_path):
    path = tmp_path / "long.csv"
    _long_frame().assign(score=lambda d: (d.score == 1).astype(int)).to_csv(path, index=False)
    with pytest.raises(ValueError, match="holds 3 models .* choose one with --model"):
        read_model_responses(path)
    row = read_model_responses(path, model="m3")
    assert row.name == "m3" and row.to_dict() == {"001": 0.0, "002": 1.0}
    with pytest.raises(ValueError, match="no model 'zz'"):
        read_model_responses(path, model="zz")


def test_a_standardized_bank_has_the_fits_probabilities_on_the_calibration_models_scale(bank, matrix):
    fit_scale = bank.meta["scale"]
    assert fit_scale["kind"] == "fit"
    theta = np.asarray(bank.meta["models"]["theta"])
    assert fit_scale["fit_theta_mean"] == pytest.approx(theta.mean()) and fit_scale["fit_theta_sd"] == pytest.approx(
        theta.std())
    standard = calibrate_bank(matrix, scale="standard", interval_check=False)
    theta_s = np.asarray(standard.meta["models"]["theta"])
    assert standard.meta["scale"]["kind"] == "standard"
    assert theta_s.mean() == pytest.approx(0.0, abs=1e-12) and theta_s.std() == pytest.approx(1.0)
    # a linear change of scale: the same probability for every model and item, the transformation recorded
    m, s = fit_scale["fit_theta_mean"], fit_scale["fit_theta_sd"]
    np.testing.assert_allclose(standard.a, bank.a * s, rtol=1e-12)
    np.testing.assert_allclose(standard.b, (bank.b - m) / s, rtol=0, atol=1e-12)
    np.testing.assert_allclose(standard.predicted_full_score(theta_s), bank.predicted_full_score(theta), atol=1e-12)
    with pytest.raises(ValueError, match="unknown scale 'z'"):
        calibrate_bank(matrix, scale="z")


def test_the_interval_check_replays_a_seeded_sample_of_a_large_calibration_set(matrix, monkeypatch):
    from irtlib.bank import coverage

    monkeypatch.setattr(coverage, "MAX_REPLAYED", 20)         # as if the 40 models were a leaderboard
    first = calibrate_bank(matrix).meta["interval_check"]
    assert first["n_models"] == 40 and first["n_replayed"] == 20
    assert first == calibrate_bank(matrix).meta["interval_check"]             # the same sample and factors again
    monkeypatch.setattr(coverage, "MAX_REPLAYED", 200)
    everyone = calibrate_bank(matrix).meta["interval_check"]
    assert everyone["n_replayed"] == 40 and everyone["inflation"] != first["inflation"]


def test_on_a_large_calibration_set_each_replayed_model_is_held_out_of_one_refit_at_least_a_fold_in_size(
        matrix, monkeypatch):
    from irtlib.bank import coverage

    trained, replayed = [], []
    real_fit, real_replay = coverage.fit_map_after_items, coverage._adaptive_replay

    def fit(x, *args, **kwargs):
        trained.append({tuple(row) for row in np.nan_to_num(x, nan=-1.0)})      # the refit's training rows
        return real_fit(x, *args, **kwargs)

    def replay(x, a, b, checkpoints):
        replayed.append({tuple(row) for row in np.nan_to_num(x, nan=-1.0)})   # the rows replayed with these items
        return real_replay(x, a, b, checkpoints)

    monkeypatch.setattr(coverage, "MAX_REPLAYED", 12)       # 40 models, 12 replayed: as if a leaderboard
    monkeypatch.setattr(coverage, "fit_map_after_items", fit)
    monkeypatch.setattr(coverage, "_adaptive_replay", replay)
    check = calibrate_bank(matrix).meta["interval_check"]
    assert check["n_replayed"] == 12 and check["refits"] == 2 == len(trained)     # ceil(5 x 12 / 40) refits
    everyone = set(matrix.models)
    # each model's response row on the bank's items (the first 5 items are left out by the variance filter)
    rows = {m: tuple(np.nan_to_num(matrix.subset(models=[m]).values[0, 5:], nan=-1.0)) for m in everyone}
    assert len(set(rows.values())) == len(everyone)
    left_out = [{m for m in everyone if rows[m] not in t} for t in trained]
    assert all(len(t) == len(everyone) - len(o) for t, o in zip(trained, left_out, strict=True))
    # every refit trains on at least a fold's share (4/5) of the models; the left-out groups are disjoint
    assert all(len(t) >= 0.8 * len(everyone) for t in trained)
    assert not left_out[0] & left_out[1] and len(left_out[0] | left_out[1]) == 12
    # each replayed row is the response row of a model its refit left out (not one it trained on)
    by_refit = [{rows[m] for m in group} for group in left_out]
    assert len(replayed) == 2 and sum(map(len, replayed)) == 12
    for got in replayed:
        assert any(got <= group for group in by_refit)


def test_a_refit_from_the_item_stepped_start_finds_the_refit_from_the_banks_fit():
    """The check's refit starts from the bank's fit moved by item-only steps: the same mode, in fewer iterations."""
    from irtlib.bank.coverage import REFIT_ITEM_STEPS, REFIT_TOL, refit_start
    from irtlib.calibration.joint_map import fit_map, fit_map_after_items

    values, *_ = simulate_2pl(150, 600, seed=8, sd_log_a=0.7)
    theta, a, b, _ = fit_map(values)
    train = np.arange(150) % 5 != 0
    x = values[train]
    plain = fit_map(x, start={"theta": theta[train], "a": a, "b": b}, tol=REFIT_TOL)
    start = refit_start(x, theta[train], a, b)
    assert start["theta"] is not None and np.array_equal(start["theta"], theta[train])
    assert np.abs(np.log(start["a"]) - np.log(a)).max() > 10 * REFIT_TOL      # the items did move
    stepped = fit_map(x, start=start, tol=REFIT_TOL)
    for got, want in zip((stepped[0], np.log(stepped[1]), stepped[2]), (plain[0], np.log(plain[1]), plain[2]),
                         strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=REFIT_TOL)
    assert stepped[3]["iterations"] < plain[3]["iterations"]
    # the check's refit does both on one set of blocks: the same numbers, bit for bit
    once = fit_map_after_items(x, theta[train], a, b, item_steps=REFIT_ITEM_STEPS, tol=REFIT_TOL)
    for got, want in zip(once[:3], stepped[:3], strict=True):
        np.testing.assert_array_equal(got, want)
    assert once[3] == stepped[3]


def test_the_checks_inexact_newton_refit_lands_as_near_the_mode_as_the_exact_newton_refit():
    """The check's refits stop each Newton step's conjugate gradients at the last step's size (``forcing``).

    Against the refit's mode (the same refit run to a step of 1e-9): within 5 x ``REFIT_TOL`` in every
    parameter, as the refit with every Newton step solved to 1e-4 (the check before) is, in fewer
    conjugate-gradient products; on 2PL data and on coin flips (a flat posterior, the refit's hardest
    case). Measured largest distances, inexact and exact: 2.0e-5 and 2.0e-5 (2PL), 4.9e-6 and 4.3e-4 (coin).
    """
    from irtlib.bank.coverage import REFIT_ITEM_STEPS, REFIT_TOL
    from irtlib.calibration.joint_map import fit_map, fit_map_after_items

    rng = np.random.default_rng(5)
    for values in (simulate_2pl(150, 600, seed=8, sd_log_a=0.7)[0], rng.integers(0, 2, (120, 800)).astype(float)):
        theta, a, b, _ = fit_map(values)
        train = np.arange(values.shape[0]) % 5 != 0
        x, start = values[train], (theta[train], a, b)
        mode = fit_map_after_items(x, *start, item_steps=REFIT_ITEM_STEPS, tol=1e-9)
        exact = fit_map_after_items(x, *start, item_steps=REFIT_ITEM_STEPS, tol=REFIT_TOL)
        inexact = fit_map_after_items(x, *start, item_steps=REFIT_ITEM_STEPS, tol=REFIT_TOL, forcing=True)
        for fit in (exact, inexact):
            assert fit[3]["converged"]
            for got, want in zip((fit[0], np.log(fit[1]), fit[2]), (mode[0], np.log(mode[1]), mode[2]), strict=True):
                np.testing.assert_allclose(got, want, rtol=0, atol=5 * REFIT_TOL)
        assert inexact[3]["cg_iterations"] < exact[3]["cg_iterations"]


def test_bank_body_is_the_text_pandas_writes_with_seventeen_digits():
    from irtlib.bank.format import FLOAT_FORMAT, ItemBank

    rng = np.random.default_rng(8)
    a = np.exp(rng.normal(size=6))
    a[1] = 1e-300
    items = pd.DataFrame({"a": a, "b": [0.1, -0.0, np.inf, -np.inf, np.nan, 1 / 3],
                          "n_models": [1, 2, 3, 4, 5, 6],
                          "se_a": [np.nan] * 6,
                          "prompt": ['say "hi", then', "two\nlines", "", None, "x,y", "plain"]},
                         index=pd.Index([f"i{j}" for j in range(6)]))
    bank = ItemBank.__new__(ItemBank)
    bank.items = items
    buf = io.StringIO()
    items.to_csv(buf, index=True, index_label="item", float_format=FLOAT_FORMAT, lineterminator="\n")
    assert bank._body() == buf.getvalue()


def test_bank_body_from_the_csv_writer_is_the_text_pandas_writes():
    # ItemBank._body's own rows (irtlib.bank.format._csv_body) against pandas' to_csv on random tables with the
    # fields that need quoting, missing values, extreme floats; tables it does not take fall back to pandas
    from irtlib.bank.format import FLOAT_FORMAT, ItemBank, _csv_body

    def pandas_text(items):
        buf = io.StringIO()
        items.to_csv(buf, index=True, index_label="item", float_format=FLOAT_FORMAT, lineterminator="\n")
        return buf.getvalue()

    rng = np.random.default_rng(21)
    texts = ['say "hi", then', "two\nlines", "", "x,y", "plain", "tab\there", "cr\rhere", "é ü 漢", " lead", '"']
    for trial in range(60):
        n = int(rng.integers(0, 12))
        floats = rng.normal(size=n) * 10.0 ** rng.integers(-300, 300, n)
        floats[rng.random(n) < 0.2] = np.nan
        floats[rng.random(n) < 0.1] = rng.choice([np.inf, -np.inf, -0.0, 5e-324], size=1)
        cols = {"a": np.exp(rng.normal(size=n)), "b": floats, "n_models": rng.integers(-5, 10**12, n)}
        if trial % 2:
            cols["prompt"] = [None if rng.random() < 0.2 else str(rng.choice(texts)) for _ in range(n)]
        if trial % 3 == 0:
            cols["se_a"] = np.full(n, np.nan)
        items = pd.DataFrame(cols, index=pd.Index([f"i{j}" if j % 4 else f"q,{j}" for j in range(n)]))
        bank = ItemBank.__new__(ItemBank)
        bank.items = items
        assert _csv_body(items) is not None
        assert bank._body() == bank._pandas_body() == pandas_text(items)
    odd = pd.DataFrame({"a": [1.0, 2.0], "b": np.array([0.5, 1.5], dtype=np.float32)}, index=["x", "y"])
    other = [odd, pd.DataFrame({"a": [1.0, 2.0], "p": [1, "x"]}, index=["x", "y"]),
             pd.DataFrame({"a": [1.0, 2.0]}, index=[1, 2]),
             pd.DataFrame({"a": [1.0, 2.0], 3: [1.0, 2.0]}, index=["x", "y"]),
             pd.DataFrame({"a": [1.0, 2.0], "c": pd.Categorical(["u", "v"])}, index=["x", "y"])]
    for items in other:
        bank = ItemBank.__new__(ItemBank)
        bank.items = items
        assert _csv_body(items) is None and bank._body() == pandas_text(items)


def test_a_banks_kept_body_follows_its_table():
    # the body is kept while the table is the same value for value; an edit in place (a float, -0.0 for 0.0, a
    # prompt, a new column) gives the text pandas writes for the edited table; pickles and copies leave it out
    import copy
    import pickle

    from irtlib.bank.format import FLOAT_FORMAT, ItemBank

    def pandas_text(items):
        buf = io.StringIO()
        items.to_csv(buf, index=True, index_label="item", float_format=FLOAT_FORMAT, lineterminator="\n")
        return buf.getvalue()

    items = pd.DataFrame({"a": [1.0, 2.0, 0.5], "b": [0.0, -1.0, 1.0], "n_models": [3, 4, 5],
                          "prompt": ["x", None, 'a "b", c']}, index=["q1", "q2", "q3"])
    bank = ItemBank(items.copy())
    first = bank.checksum
    assert bank.checksum == first and bank._body() == pandas_text(bank.items)
    edits = [lambda t: t.__setitem__("a", t["a"] * 1.0),                        # the same values: kept
             lambda t: t.iloc.__setitem__((0, 1), -0.0),
             lambda t: t.iloc.__setitem__((1, 0), 2.0000000000000004),
             lambda t: t.iloc.__setitem__((2, 3), "other"),
             lambda t: t.__setitem__("se_a", [0.1, np.nan, 0.2]),
             lambda t: t.rename(index={"q3": "q4"}, inplace=True)]
    for edit in edits:
        edit(bank.items)
        assert bank._body() == pandas_text(bank.items)
    assert bank.checksum != first
    for other in (pickle.loads(pickle.dumps(bank)), copy.copy(bank), copy.deepcopy(bank)):
        assert "_body_kept" not in other.__dict__ and other.checksum == bank.checksum
    assert pickle.dumps(ItemBank(items.copy())) == pickle.dumps(bank.__class__(items.copy()))


def test_the_interval_checks_progress_comes_after_its_stage_line_and_in_order(matrix):
    events = []
    lock = __import__("threading").Lock()

    def note(kind):
        def call(*args):
            with lock:
                events.append((kind, args))
        return call

    bank = calibrate_bank(matrix, source="sim", progress=note("stage"), se_progress=note("se"),
                          check_progress=note("check"), refit_progress=note("refit"))
    stages = [args[0].split()[0] for kind, args in events if kind == "stage"]
    assert stages == ["fitting", "standard", "checking"]
    line = next(i for i, (kind, args) in enumerate(events) if kind == "stage" and args[0].startswith("checking"))
    assert all(i > line for i, (kind, _) in enumerate(events) if kind in ("check", "refit"))
    assert all(i < line for i, (kind, _) in enumerate(events) if kind == "se")
    done = [args for kind, args in events if kind == "check"]
    total = 2 * bank.meta["interval_check"]["refits"]
    assert [d for d, _ in done] == sorted(d for d, _ in done) and done[-1] == (total, total)
    assert any(kind == "refit" for kind, _ in events)


def test_too_many_interval_folds_are_refused_before_the_fit(matrix, monkeypatch):
    from irtlib.bank import build

    monkeypatch.setattr(build, "fit_2pl", lambda *a, **k: pytest.fail("fitted before refusing the folds"))
    with pytest.raises(ValueError, match="interval_folds 21 is too many for 40 models"):
        calibrate_bank(matrix, interval_folds=21)
