"""``irtlib audit`` and ``irtlib drift``: planted bad items are found, a clean bank passes, bad input is one line."""

import json

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from irtlib import ResponseMatrix
from irtlib.bank.audit import audit_bank
from irtlib.bank.build import calibrate_bank
from irtlib.cli import main

PLANTED = {"flat": "low_discrimination", "flipped": "against_trend", "allsafe": "constant", "step": "misfit"}


def bank_responses(seed=1, *, planted):
    """300 models x 40 2PL items; with ``planted``, five bad items: flat, flipped labels, all safe, a dip, a twin."""
    rng = np.random.default_rng(seed)
    n, n_items = 300, 40
    a, b, theta = np.exp(rng.normal(0.3, 0.3, n_items)), rng.normal(-0.5, 0.8, n_items), rng.normal(0, 1, n)
    x = (rng.random((n, n_items)) < expit(a * (theta[:, None] - b))).astype(float)
    names = [f"q{j}" for j in range(n_items)]
    if planted:
        twin = x[:, 5].copy()
        flip = rng.random(n) < 0.05
        twin[flip] = 1 - twin[flip]
        extra = {"flat": rng.random(n) < 0.6,                                  # answered at random
                 "flipped": rng.random(n) < expit(-1.5 * theta),               # labels reversed
                 "allsafe": np.ones(n, dtype=bool),
                 "step": rng.random(n) < np.select([theta < -0.5, theta < 0.5], [0.9, 0.2], 1.0),  # a dip
                 "twin_q5": twin}                                               # a rewrite of q5
        x = np.c_[x, np.array(list(extra.values()), dtype=float).T]
        names += list(extra)
    return ResponseMatrix(x, [f"m{i}" for i in range(n)], names)


def write_inputs(tmp_path, *, planted):
    m = bank_responses(planted=planted)
    bank = calibrate_bank(m, engine="map", interval_check=False)
    bank.write(tmp_path / "bank.csv")
    m.to_long().rename(columns={"value": "score"}).to_csv(tmp_path / "responses.csv", index=False)
    return m, bank


def test_audit_finds_each_planted_item_and_nothing_in_a_clean_bank():
    m = bank_responses(planted=True)
    res = audit_bank(calibrate_bank(m, engine="map", interval_check=False), m, n_replications=5)
    for item, check in PLANTED.items():
        assert item in res["checks"][check].index, (item, check)
    pairs = res["checks"]["local_dependence"]
    assert {"q5", "twin_q5"} == set(pairs.iloc[0][["item_1", "item_2"]])
    clean = bank_responses(planted=False)
    res = audit_bank(calibrate_bank(clean, engine="map", interval_check=False), clean, n_replications=5)
    assert res["flagged_items"] == [] and res["summary"]["ok"]
    assert all(len(frame) == 0 for frame in res["checks"].values())


def call(*args):
    return main([str(a) for a in args])


def test_audit_command_writes_report_and_json_and_check_sets_the_exit_status(tmp_path, capsys):
    write_inputs(tmp_path, planted=True)
    out = tmp_path / "report"
    assert call("audit", tmp_path / "bank.csv", tmp_path / "responses.csv", "-o", out, "--replications", 3,
                "--check", "-q") == 1
    doc = json.loads((out / "audit.json").read_text())
    assert {"flat", "flipped", "step", "q5", "twin_q5"} <= set(doc["flagged_items"])
    # the all-safe item is listed; the variance filter kept it out of the bank, so it does not fail the bank
    assert [row["item"] for row in doc["flags"]["constant"]] == ["allsafe"]
    page = (out / "index.html").read_text()
    assert "data:image/png;base64," in page and "How to read it" in page
    before = page
    # an existing report is not overwritten without --force
    assert call("audit", tmp_path / "bank.csv", tmp_path / "responses.csv", "-o", out, "-q") == 1
    assert "already exists" in capsys.readouterr().err and (out / "index.html").read_text() == before


def test_audit_command_passes_a_clean_bank(tmp_path):
    write_inputs(tmp_path, planted=False)
    assert call("audit", tmp_path / "bank.csv", tmp_path / "responses.csv", "-o", tmp_path / "r", "--check",
                "--replications", 3, "-q") == 0
    assert json.loads((tmp_path / "r" / "audit.json").read_text())["summary"]["ok"] is True


@pytest.mark.parametrize("case", ["missing_bank", "missing_responses", "other_items", "some_items", "not_a_bank"])
def test_audit_refuses_bad_input_in_one_line_naming_the_file(tmp_path, capsys, case):
    m, _ = write_inputs(tmp_path, planted=False)
    bank, responses = tmp_path / "bank.csv", tmp_path / "responses.csv"
    if case == "missing_bank":
        bank = tmp_path / "nope.csv"
    elif case == "missing_responses":
        responses = tmp_path / "nope.csv"
    elif case in ("other_items", "some_items"):
        keep = m.items[:0] if case == "other_items" else m.items[:10]
        long = m.to_long().rename(columns={"value": "score"})
        if case == "other_items":
            long["item"] = "x" + long["item"]
        else:
            long = long[long["item"].isin(keep)]
        long.to_csv(responses, index=False)
    else:
        bank.write_text("item,a,b\nq0,1,0\n")
    code = call("audit", bank, responses, "-o", tmp_path / "r", "-q")
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and "Traceback" not in err[0], err
    named = {"missing_bank": "nope.csv", "missing_responses": "nope.csv", "other_items": "responses.csv",
             "some_items": "responses.csv", "not_a_bank": "bank.csv"}[case]
    assert named in err[0]
    assert not (tmp_path / "r").exists()


def test_drift_command_on_two_groups_and_its_usage_errors(tmp_path, capsys):
    m = bank_responses(planted=False)
    m.to_long().rename(columns={"value": "score"}).to_csv(tmp_path / "responses.csv", index=False)
    pd.DataFrame({"model": m.models, "group": np.where(np.arange(300) % 2, "new", "old")}).to_csv(
        tmp_path / "groups.csv", index=False)
    assert call("drift", tmp_path / "responses.csv", "--groups", tmp_path / "groups.csv", "-o",
                tmp_path / "drift.csv", "--json", "-q") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["n_reference"] == doc["n_focal"] == 150 and doc["n_tested"] == 40
    assert len(pd.read_csv(tmp_path / "drift.csv")) == 40
    assert call("drift", tmp_path / "responses.csv", "-q") == 2          # one file without --groups
    (tmp_path / "bad_groups.csv").write_text("name,group\nm0,a\n")
    assert call("drift", tmp_path / "responses.csv", "--groups", tmp_path / "bad_groups.csv", "-q") == 1
    assert "bad_groups.csv: no column 'model'" in capsys.readouterr().err
