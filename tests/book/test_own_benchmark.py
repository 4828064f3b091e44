"""irtbook.own_benchmark: the helpers of the chapter "Your own benchmark, start to finish"."""

from __future__ import annotations

import json
import math
import shlex
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import irtlib
from irtbook import own_benchmark as ob
from irtlib import ResponseMatrix
from irtlib.errors import InputError


def _simulated(n_models=40, n_items=80, seed=0):
    """A response matrix drawn from a known 2PL (the model the method assumes holds exactly)."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_models)
    a = np.exp(rng.normal(0.2, 0.4, n_items))
    b = rng.normal(size=n_items)
    p = 1 / (1 + np.exp(-a * (theta[:, None] - b)))
    x = (rng.random(p.shape) < p).astype(float)
    return ResponseMatrix(x, [f"m{i:02d}" for i in range(n_models)], [f"q{j:03d}" for j in range(n_items)],
                          source="simulated 2PL"), b


def _jsonl(tmp_path, rows):
    path = tmp_path / "responses.jsonl"
    path.write_text("".join(json.dumps({"subject_id": m, "responses": r}) + "\n" for m, r in rows))
    return path


# ----------------------------------------------------------------------------- choosing the model
def test_choose_held_out_given_and_unknown():
    scores = pd.Series([0.1, 0.5, 0.9], index=["a", "b", "c"])
    assert ob.choose_held_out(scores, held_out="c") == "c"
    with pytest.raises(InputError, match="HELD_OUT='z' is not a model"):
        ob.choose_held_out(scores, held_out="z")


def test_choose_held_out_draws_a_typical_model_reproducibly():
    scores = pd.Series(np.linspace(0, 1, 21), index=[f"m{i:02d}" for i in range(21)])
    picks = {ob.choose_held_out(scores, seed=s) for s in range(30)}
    lo, hi = np.quantile(scores, [0.25, 0.75])
    assert all(lo <= scores[m] <= hi for m in picks)
    assert len(picks) > 1                                      # the seed matters
    assert ob.choose_held_out(scores, seed=3) == ob.choose_held_out(scores, seed=3)


# ----------------------------------------------------------------------------- response files
def test_split_jsonl_keeps_the_other_lines_verbatim(tmp_path):
    src = _jsonl(tmp_path, [("m1", {"q1": 1, "q2": 0}), ("m2", {"q1": 0, "q2": 0}), ("m3", {"q1": 1, "q2": 1})])
    out = tmp_path / "out"
    out.mkdir()
    files = ob.split_jsonl(src, "m2", out, stem="bench")
    lines = src.read_text().splitlines()
    assert files.calibration.read_text().splitlines() == [lines[0], lines[2]]
    assert files.new_model.read_text().splitlines() == [lines[1]]
    assert (files.model, files.options, files.rule) == ("m2", "", "auto")
    answers = irtlib.read_model_responses(files.new_model, rule=files.rule)
    assert answers.to_dict() == {"q1": 0.0, "q2": 0.0}
    assert irtlib.read_responses(files.calibration).shape == (2, 2)
    with pytest.raises(InputError, match="exists"):
        ob.split_jsonl(src, "m1", out, stem="bench")
    with pytest.raises(InputError, match="0 lines have subject_id 'zz'"):
        ob.split_jsonl(src, "zz", tmp_path, stem="other")


def test_split_long_writes_graded_scores_and_the_rule(tmp_path):
    raw = pd.DataFrame({"model": ["m1", "m1", "m2", "m2"], "item": ["q1", "q2", "q1", "q2"],
                        "score": [1.0, 0.5, 0.0, 1.0]})
    files = ob.split_long(raw, "m1", tmp_path, stem="bench", rule="strict")
    assert files.options == " --binarize strict"
    answers = irtlib.read_model_responses(files.new_model, rule=files.rule)
    assert answers.to_dict() == {"q1": 1.0, "q2": 0.0}        # strict: safe only at the top score
    assert irtlib.read_responses(files.calibration, rule="strict").models.tolist() == ["m2"]
    with pytest.raises(InputError, match="no row of model 'm9'"):
        ob.split_long(raw, "m9", tmp_path / "x", stem="bench")
    with pytest.raises(InputError, match=r"missing column\(s\) \['score'\]"):
        ob.split_long(raw.drop(columns="score"), "m1", tmp_path, stem="bench")


def test_subset_responses_keeps_only_the_items(tmp_path):
    src = _jsonl(tmp_path, [("m1", {"q1": 1, "q2": 0, "q3": 1})])
    out = ob.subset_responses(src, ["q3", "q1"], tmp_path / "sub.jsonl")
    assert irtlib.read_model_responses(out).to_dict() == {"q3": 1.0, "q1": 1.0}
    with pytest.raises(InputError, match="no response to item 'q9'"):
        ob.subset_responses(src, ["q9"], tmp_path / "sub2.jsonl")
    csv = tmp_path / "one.csv"
    pd.DataFrame({"model": ["m1"] * 3, "item": ["q1", "q2", "q3"], "score": [1, 0.5, 0]}).to_csv(csv, index=False)
    out = ob.subset_responses(csv, ["q2"], tmp_path / "sub.csv")
    assert pd.read_csv(out)["item"].tolist() == ["q2"]
    with pytest.raises(InputError, match="exists"):
        ob.subset_responses(csv, ["q2"], out)


# ----------------------------------------------------------------------------- the command runner
def test_run_command_runs_irtlib_as_typed(tmp_path, capsys):
    done = ob.run_command("irtlib --version", cwd=tmp_path)
    assert irtlib.__version__ in done.stdout
    printed = capsys.readouterr().out
    assert printed.startswith("$ irtlib --version\n") and irtlib.__version__ in printed
    with pytest.raises(RuntimeError, match="exited with status 1"):
        ob.run_command("irtlib evaluate missing.csv --responses r.csv --max-items 3", cwd=tmp_path, echo=False)
    failed = ob.run_command("irtlib evaluate missing.csv --responses r.csv --max-items 3", cwd=tmp_path, echo=False,
                            check=False)
    assert failed.returncode == 1 and "missing.csv" in failed.stdout


def test_command_json_gives_the_document_the_command_prints(tmp_path):
    matrix, _ = _simulated(n_models=30, n_items=40, seed=2)
    irtlib.calibrate_bank(matrix, interval_check=False).write(tmp_path / "bank.csv")
    _jsonl(tmp_path, [("m00", {item: int(v) for item, v in zip(matrix.items, matrix.values[0], strict=True)})])
    command = "irtlib evaluate bank.csv --responses responses.jsonl --max-items 8 --json"
    typed = json.loads(subprocess.run([sys.executable, "-m", *shlex.split(command)], cwd=tmp_path, check=True,
                                      capture_output=True, text=True).stdout)   # stdout only: a warning goes to stderr
    assert ob.command_json(command, cwd=tmp_path) == typed
    assert len(typed["administered"]) == 8
    with pytest.raises(RuntimeError, match="exited with status 1"):
        ob.command_json("irtlib evaluate missing.csv --responses r.csv --max-items 3 --json", cwd=tmp_path)
    with pytest.raises(ValueError, match="--json"):
        ob.command_json("irtlib evaluate bank.csv --responses responses.jsonl", cwd=tmp_path)


# ----------------------------------------------------------------------------- held-out coverage
@pytest.fixture(scope="module")
def coverage():
    matrix, _ = _simulated()
    return matrix, ob.held_out_coverage(matrix, budgets=[10, 20], n_groups=4, seed=0)


def test_held_out_coverage_rows_and_invariants(coverage):
    matrix, res = coverage
    assert len(res) == matrix.shape[0] * 2 and set(res["k"]) == {10, 20}
    assert res.groupby("model")["group"].nunique().eq(1).all() and res["group"].nunique() == 4
    assert (res["n_calibration"] == 30).all()                  # 40 models, groups of 10 held out
    truth = matrix.safety_scores()
    assert np.allclose(res["truth"], truth[res["model"]].to_numpy())
    assert (res["inside"] == ((res["lo"] <= res["truth"]) & (res["truth"] <= res["hi"]))).all()
    # the stated interval is the plain one widened: it contains it, so plain coverage implies coverage
    assert (res["lo"] <= res["plain_lo"] + 1e-12).all() and (res["hi"] >= res["plain_hi"] - 1e-12).all()
    assert (~res["plain_inside"] | res["inside"]).all()
    # item uncertainty only widens the stated interval (same prediction, a larger half-width)
    assert (res["items_lo"] <= res["lo"] + 1e-12).all() and (res["items_hi"] >= res["hi"] - 1e-12).all()
    assert (~res["inside"] | res["items_inside"]).all()
    # a random subset's mean is a mean of k zeros and ones
    assert np.allclose(res["random_score"] * res["k"], np.round(res["random_score"] * res["k"]))
    # on data drawn from a 2PL the stated 95% interval covers about as it says
    assert res["inside"].mean() >= 0.85


def test_held_out_coverage_checks_groups_and_runs_a_part():
    matrix, _ = _simulated(n_models=24, n_items=40)
    with pytest.raises(InputError, match="n_groups must be between 2 and 24"):
        ob.held_out_coverage(matrix, budgets=[5], n_groups=1)
    part = ob.held_out_coverage(matrix, budgets=[5], n_groups=12, groups_run=2, seed=1)
    assert part["model"].nunique() == 4 and part["group"].tolist() == [0, 0, 1, 1]


def test_coverage_summary_by_hand():
    res = pd.DataFrame({"model": ["a", "b", "a", "b"], "k": [5, 5, 10, 10], "truth": [0.5, 0.8, 0.5, 0.8],
                        "predicted": [0.6, 0.7, 0.55, 0.8], "lo": [0.4, 0.75, 0.45, 0.7],
                        "hi": [0.8, 0.9, 0.65, 0.9], "inside": [True, False, True, True],
                        "plain_inside": [False, False, True, False], "random_score": [0.2, 1.0, 0.5, 0.9],
                        "items_lo": [0.35, 0.7, 0.4, 0.7], "items_hi": [0.85, 0.9, 0.7, 0.95],
                        "items_inside": [True, True, True, True], "inflation": [2.0, 2.0, 3.0, 3.0]})
    s = ob.coverage_summary(res)
    assert s.loc[5, "items_coverage"] == 1.0 and s.loc[10, "items_width"] == pytest.approx(0.275)
    assert s.loc[5, "coverage"] == 0.5 and s.loc[10, "coverage"] == 1.0
    assert s.loc[10, "plain_coverage"] == 0.5 and s.loc[5, "models"] == 2
    assert s.loc[5, "mae_fluid"] == pytest.approx(0.1) and s.loc[5, "mae_random"] == pytest.approx(0.25)
    assert s.loc[10, "mean_width"] == pytest.approx(0.2) and s.loc[10, "inflation"] == 3.0


# ----------------------------------------------------------------------------- calibration size
def test_calibration_size_recovers_parameters_with_more_models():
    matrix, _ = _simulated(n_models=70, n_items=60, seed=2)
    out = ob.calibration_size(matrix, sizes=[10, 40, 50, 500], n_reps=4, n_test=20, budget=15, seed=0)
    assert out.groupby("n").size().to_dict() == {10: 4, 40: 4, 50: 1}      # 500 > pool: left out
    mean = out.groupby("n").mean()
    assert mean.loc[50, "rho_b"] == pytest.approx(1.0) and mean.loc[50, "rho_a"] == pytest.approx(1.0)
    assert mean.loc[40, "rho_b"] > mean.loc[10, "rho_b"]
    assert (out["agreement"] > 0.5).all() and (out["mae"] < 0.2).all()


def test_predicted_full_scores_equal_the_bank_method_model_by_model():
    # calibration_size's predictions of every test model at once: bit for bit the method, called model by model
    from irtlib.selection.adaptive import run_adaptive

    matrix, _ = _simulated(n_models=60, n_items=90, seed=4)
    bank = irtlib.calibrate_bank(matrix.subset(models=matrix.models[:45]), interval_check=False)
    assert bank.filtered.get("safe_rate_sum", 0.0) >= 0.0 and bank.n_items_full == 90
    x = pd.DataFrame(matrix.values[45:], columns=matrix.items)[bank.item_ids].to_numpy()
    for k in (1, 7, 15, len(bank)):
        path = run_adaptive(x, bank.a, bank.b, budget=k)
        theta = path.at(k)
        want = np.array([bank.predicted_full_score(theta[i], known=pd.Series(
            x[i, path.items[i, :k]], index=bank.item_ids[path.items[i, :k]])) for i in range(len(x))])
        got = ob._predicted_full_scores(bank, theta, x, path.items[:, :k])
        assert got.dtype == want.dtype and np.array_equal(got, want)


# ----------------------------------------------------------------------------- rules and costs
def test_scores_by_rule_by_hand():
    raw = pd.DataFrame({"model": ["a", "a", "a", "a", "b", "b"], "item": list("wxyzwx"),
                        "score": [1.0, 0.5, 0.0, np.nan, 0.75, 1.0]})
    s = ob.scores_by_rule(raw)
    assert s.loc["a"].tolist() == pytest.approx([1 / 3, 2 / 3, 1 / 3])
    assert s.loc["b"].tolist() == pytest.approx([0.5, 1.0, 0.5])
    assert ob.scores_by_rule(raw, threshold=0.8).loc["b", "lenient"] == pytest.approx(0.5)


def test_break_even_models():
    assert ob.break_even_models(n_calibration=76, n_items=400, k=30) == math.ceil(76 * 400 / 370) == 83
    assert ob.break_even_models(n_calibration=10, n_items=100, k=0) == 10
    assert ob.break_even_models(n_calibration=10, n_items=100, k=50) == 20
    with pytest.raises(InputError, match="k must be in"):
        ob.break_even_models(n_calibration=10, n_items=100, k=100)


def test_live_test_steps_replay_the_session_as_inspect_would_ask():
    matrix, _ = _simulated()
    bank = irtlib.calibrate_bank(matrix.subset(models=matrix.models[:35]), interval_check=False)
    row = matrix.to_frame().loc["m37"]
    answers = row.drop(index=["q000", "q001", "q002"])          # three bank items the "task" lacks
    steps, metrics = ob.live_test_steps(bank, answers, max_items=12, target_se=0.35)
    want = irtlib.AdaptiveSession(bank, max_items=12, target_se=0.35).run(answers.get)
    assert list(steps["sample"]) == want.items and list(steps["step"]) == list(range(1, want.n_items + 1))
    assert list(steps["score"]) == ["C" if r else "I" for r in want.responses]
    assert (steps["theta"].iloc[0], steps["se"].iloc[0]) == (0.0, 1.0)      # the first item is chosen at the prior
    assert metrics == pytest.approx({"predicted_score": want.predicted_score,
                                     "predicted_score_low": want.predicted_score_ci95[0],
                                     "predicted_score_high": want.predicted_score_ci95[1], "theta": want.theta,
                                     "theta_se": want.se, "items": want.n_items, "finished": 1.0})
