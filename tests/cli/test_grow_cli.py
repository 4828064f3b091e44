"""``irtlib add-items`` and ``irtlib link`` on files: results, and hostile input (one line, nothing overwritten)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
import pytest
from formats_helpers import make_cli

from irtlib.bank.format import read_bank
from irtlib.core.kernels import probability


def run(args, cwd, monkeypatch, capsys):
    return make_cli(monkeypatch, capsys)(*args, cwd=cwd)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Responses of 160 models to 40 items; banks calibrated on parts of them (MAP, no interval check)."""
    from irtlib.cli import main

    d = tmp_path_factory.mktemp("grow")
    rng = np.random.default_rng(0)
    theta, a, b = rng.normal(size=160), np.exp(rng.normal(0, 0.3, 40)), rng.normal(size=40)
    x = (rng.random((160, 40)) < probability(theta[:, None], a, b)).astype(int)
    df = pd.DataFrame(x, index=pd.Index([f"m{i:03d}" for i in range(160)], name="model"),
                      columns=[f"q{j:02d}" for j in range(40)])
    df.iloc[:, :30].to_csv(d / "old.csv")
    df.to_csv(d / "all.csv")
    df.iloc[:80].to_csv(d / "group_a.csv")
    df.iloc[80:].to_csv(d / "group_b.csv")
    df.iloc[80:, 36:].to_csv(d / "four_items.csv")
    for src, bank, extra in (("old.csv", "old_bank.csv", []), ("group_a.csv", "a.csv", []),
                             ("group_b.csv", "b.csv", []), ("group_b.csv", "b_std.csv", ["--scale", "standard"]),
                             ("four_items.csv", "four.csv", ["--variance-threshold", "0"]),
                             ("old.csv", "no_errors.csv", ["--standard-errors", "none"])):
        assert main(["calibrate", str(d / src), "-o", str(d / bank), "--no-interval-check", "-q", *extra]) == 0
    return d


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_add_items_writes_a_grown_bank_with_the_old_items_unchanged(files, tmp_path, monkeypatch, capsys):
    code, out, err = run(["add-items", files / "old_bank.csv", files / "all.csv", "-o", tmp_path / "grown.csv",
                          "--json"], files, monkeypatch, capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["added"]["n_new_items"] == 10 and doc["added"]["n_fixed_items"] == 30
    old, grown = read_bank(files / "old_bank.csv"), read_bank(tmp_path / "grown.csv")
    pd.testing.assert_frame_equal(grown.items.iloc[:30], old.items)
    assert np.isfinite(grown.se_a).all()


def test_link_reports_three_methods_and_writes_the_linked_bank(files, tmp_path, monkeypatch, capsys):
    code, out, err = run(["link", files / "a.csv", files / "b.csv", "-o", tmp_path / "linked.csv", "--json",
                          "--n-boot", "20"], files, monkeypatch, capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert [c["method"] for c in doc["constants"]] == ["mean/sigma", "mean/mean", "stocking-lord"]
    assert doc["n_common"] == 40 and all(c["se_A"] > 0 for c in doc["constants"])
    linked = read_bank(tmp_path / "linked.csv")
    assert linked.meta["linked"]["method"] == "stocking-lord"


def test_evaluate_widens_the_interval_by_item_uncertainty(files, monkeypatch, capsys):
    base = ["evaluate", "old_bank.csv", "--responses", "all.csv", "--model", "m007", "--max-items", "10", "--json"]
    plain = json.loads(run(base, files, monkeypatch, capsys)[1])
    wider = json.loads(run([*base, "--item-uncertainty"], files, monkeypatch, capsys)[1])
    assert wider["predicted_score"] == plain["predicted_score"]
    (lo, hi), (wlo, whi) = plain["predicted_score_ci95"], wider["predicted_score_ci95"]
    assert wlo < lo and whi > hi


@pytest.mark.parametrize("args, code, message", [
    (["evaluate", "no_errors.csv", "--responses", "all.csv", "--model", "m001", "--item-uncertainty"], 1,
     "no_errors.csv: --item-uncertainty needs the bank's standard errors"),
    (["link", "a.csv", "four.csv", "-o", "out.csv"], 1, "only 4 common items: a link needs at least 5"),
    (["link", "a.csv", "b_std.csv", "-o", "out.csv"], 1, "b_std.csv: scale 'standard' differs from the base bank"),
    (["link", "a.csv", "b.csv", "-o", "b.csv", "--force"], 2, "-o b.csv: is the NEW given as input"),
    (["link", "a.csv", "missing.csv", "-o", "out.csv"], 1, "missing.csv: no such item bank file"),
    (["link", "a.csv", "all.csv", "-o", "out.csv"], 1, "all.csv: not an irtlib item bank"),
    (["add-items", "old_bank.csv", "all.csv", "-o", "old_bank.csv", "--force"], 2, "is the BANK given as input"),
    (["add-items", "old_bank.csv", "all.csv", "-o", "all.csv", "--force"], 2, "is the RESPONSES given as input"),
    (["add-items", "old_bank.csv", "old.csv", "-o", "out.csv"], 1, "every item is already in the bank"),
    (["add-items", "old_bank.csv", "four_items.csv", "-o", "out.csv"], 1,
     "four_items.csv: only 0 of its 4 items are in the bank old_bank.csv"),
    (["add-items", "old_bank.csv", "all.csv", "-o", "a.csv"], 1, "a.csv: already exists"),
])
def test_hostile_input_is_one_line_and_overwrites_nothing(files, monkeypatch, capsys, args, code, message):
    before = {p.name: digest(p) for p in files.iterdir()}
    got, out, err = run(args, files, monkeypatch, capsys)
    assert got == code, err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1 and message in lines[0], err
    assert "Traceback" not in err
    assert {p.name: digest(p) for p in files.iterdir()} == before
