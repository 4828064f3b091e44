"""``irtlib evaluate --pass-score``: certification on the command line, and every new option's hostile input."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import simulate_2pl
from formats_helpers import make_cli

from irtlib.bank.build import calibrate_bank
from irtlib.bank.session import AdaptiveSession
from irtlib.core.responses import ResponseMatrix


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    values, _, _, _ = simulate_2pl(46, 160, seed=12, sd_log_a=0.6)
    matrix = ResponseMatrix(values, [f"m{i:02d}" for i in range(46)], [f"q{j:03d}" for j in range(160)])
    where = tmp_path_factory.mktemp("certify")
    bank = calibrate_bank(matrix.subset(models=matrix.models[:40]), interval_check=False)
    bank.write(where / "bank.csv")
    frame = matrix.to_frame().loc[matrix.models[40:]]
    frame.stack().rename("score").rename_axis(["model", "item"]).reset_index().to_csv(where / "r.csv", index=False)
    return where, bank, frame


def _run(args, cwd, monkeypatch, capsys):
    return make_cli(monkeypatch, capsys)(*args, cwd=cwd)


def test_evaluate_certifies_and_the_json_carries_the_decision(files, monkeypatch, capsys):
    where, bank, frame = files
    code, out, err = _run(["evaluate", "bank.csv", "--responses", "r.csv", "--model", "m42", "--pass-score", "0.55",
                           "--confidence", "0.9", "--max-items", "80", "--json", "-q"], where, monkeypatch, capsys)
    assert code == 0, err
    doc = json.loads(out)
    # the same as the Python API on the same answers
    session = AdaptiveSession(bank, max_items=80, pass_score=0.55, confidence=0.9)
    result = session.run(frame.loc["m42"].dropna().get)
    assert doc["decision"]["outcome"] == result.decision["outcome"] != "undecided"
    assert doc["n_items"] == result.n_items and doc["stop_reason"] == "decided"
    assert doc["decision"]["probability"] == pytest.approx(result.decision["probability"])
    assert doc["decision"]["probability"] >= 0.9 and doc["pass_score"] == 0.55 and doc["confidence"] == 0.9
    assert doc["decision"]["cut"]["score"] == 0.55 and doc["decision"]["rule"] == "ci"
    code, out, err = _run(["evaluate", "bank.csv", "--responses", "r.csv", "--all-models", "--pass-theta", "0.1",
                           "--indifference", "0.3", "--json", "-q"], where, monkeypatch, capsys)
    assert code == 0, err
    results = json.loads(out)["results"]
    assert len(results) == 6 and all(r["decision"]["rule"] == "sprt" for r in results)
    assert all(r["decision"]["cut"]["theta_low"] == pytest.approx(-0.2) for r in results)


def test_undecided_at_the_budget_is_a_result(files, monkeypatch, capsys):
    where, bank, _ = files
    code, out, err = _run(["evaluate", "bank.csv", "--responses", "r.csv", "--model", "m41", "--pass-theta", "0.0",
                           "--confidence", "0.999", "--max-items", "2", "--json", "-q"], where, monkeypatch, capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["decision"]["outcome"] == "undecided" and doc["stop_reason"] == "max_items" and doc["n_items"] == 2


def test_a_certification_state_resumes_with_its_cut(files, monkeypatch, capsys):
    where, _, _ = files
    args = ["evaluate", "bank.csv", "--responses", "r.csv", "--model", "m43", "--state", "s.json", "-q", "--json"]
    code, out, err = _run([*args, "--pass-score", "0.5", "--max-items", "2"], where, monkeypatch, capsys)
    assert code == 0, err
    code, out, err = _run([*args, "--max-items", "60"], where, monkeypatch, capsys)     # the stored cut applies
    assert code == 0, err
    assert json.loads(out)["decision"]["cut"]["score"] == 0.5
    code, out, err = _run([*args, "--pass-score", "0.6"], where, monkeypatch, capsys)
    assert code == 1 and "started with --pass-score 0.5, this run has --pass-score 0.6" in err
    (where / "s.json").unlink()


@pytest.mark.parametrize("options, code, message", [
    (["--pass-score", "0.9999"], 1, "bank.csv: the pass score 0.9999 is outside what this bank can tell apart: its "
                                    "predicted full-benchmark scores run from"),
    (["--pass-score", "0.5", "--indifference", "0.6"], 1, "the pass score 0.5 +/- 0.6 is outside"),
    (["--pass-theta", "8.5"], 1, "the cut theta 8.5 is outside the ability range (-8 to 8)"),
    (["--pass-score", "1.2"], 2, "argument --pass-score: '1.2' must be a safety score strictly between 0 and 1"),
    (["--pass-score", "0"], 2, "strictly between 0 and 1"),
    (["--pass-score", "nan"], 2, "strictly between 0 and 1"),
    (["--pass-score", "high"], 2, "'high' is not a number"),
    (["--pass-score", "0.5", "--confidence", "1"], 2, "argument --confidence: '1' must lie strictly between 0.5 and 1"),
    (["--pass-score", "0.5", "--confidence", "0"], 2, "must lie strictly between 0.5 and 1"),
    (["--pass-score", "0.5", "--confidence", "-3"], 2, "must lie strictly between 0.5 and 1"),
    (["--pass-score", "0.5", "--indifference", "0"], 2, "argument --indifference: '0' must be a positive number"),
    (["--pass-theta", "inf"], 2, "argument --pass-theta: 'inf' must be a finite number"),
    (["--pass-score", "0.5", "--pass-theta", "0"], 2, "--pass-score and --pass-theta: give the cut once"),
    (["--indifference", "0.1"], 2, "--indifference needs a cut"),
])
def test_hostile_certification_options_fail_in_one_line_and_write_nothing(files, monkeypatch, capsys, options, code,
                                                                         message):
    where, _, _ = files
    state = where / "hostile.json"
    got, out, err = _run(["evaluate", "bank.csv", "--responses", "r.csv", "--model", "m44", "--state", state.name,
                          *options], where, monkeypatch, capsys)
    assert got == code, err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and message in errors[0], err
    assert "Traceback" not in err and out == ""
    assert not state.exists() and not list(where.glob(".hostile.json*"))


def test_python_api_refuses_the_same(files):
    _, bank, _ = files
    with pytest.raises(ValueError, match="confidence must lie strictly between 0 and 1"):
        AdaptiveSession(bank, pass_score=0.5, confidence=1.0)
    with pytest.raises(ValueError, match="give the cut once"):
        AdaptiveSession(bank, pass_score=0.5, pass_theta=0.0)
    with pytest.raises(ValueError, match="indifference needs a cut"):
        AdaptiveSession(bank, max_items=3, indifference=0.1)
    # no budget needed: the decision is a stopping rule; it decides on every item bank it can reach
    session = AdaptiveSession(bank, pass_theta=float(np.median(bank.calibration_theta)))
    assert session.max_items is None and session.decision.outcome == "undecided" and not session.done
