"""The CAT toolkit in AdaptiveSession and `irtlib evaluate`: against irtlib.selection.cat's vectorised loop and EAP."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import simulate_2pl

from irtlib.bank.build import calibrate_bank
from irtlib.bank.session import AdaptiveSession
from irtlib.cli import main
from irtlib.core.eap import eap_ability
from irtlib.core.kernels import fisher_information
from irtlib.core.responses import ResponseMatrix
from irtlib.errors import InputError
from irtlib.selection.cat import ContentBalance, StoppingRule, TwoPLItems, run_cat


@pytest.fixture(scope="module")
def data():
    values, _, _, _ = simulate_2pl(40, 200, seed=5, sd_log_a=0.6)
    return ResponseMatrix(values, [f"m{i:02d}" for i in range(40)], [f"q{j:03d}" for j in range(200)])


@pytest.fixture(scope="module")
def bank(data):
    return calibrate_bank(data.subset(models=data.models[:32]), interval_check=False)


def _row(data, bank, model):
    return data.to_frame().loc[model, list(bank.item_ids)]


def test_eap_session_estimate_is_eap_on_the_items_given(bank, data):
    row = _row(data, bank, "m35")
    result = AdaptiveSession(bank, max_items=12, estimator="eap").run(row.get)
    pos = bank.item_ids.get_indexer(result.items)
    est = eap_ability(np.asarray(result.responses, float), bank.a[pos], bank.b[pos])
    assert result.theta == pytest.approx(est.theta, abs=1e-12) and result.se == pytest.approx(est.se, abs=1e-12)


def test_session_with_content_balancing_gives_the_items_of_the_vectorised_loop(bank, data):
    cats = {item: ("A" if j % 4 == 0 else "B") for j, item in enumerate(bank.item_ids)}
    models = ["m33", "m36", "m39"]
    x = np.stack([_row(data, bank, m).to_numpy() for m in models])
    ref = run_cat(x, TwoPLItems(bank.a, bank.b), stopping=StoppingRule(max_items=20),
                  content=ContentBalance(np.array(list(cats.values()))))
    for i, m in enumerate(models):
        result = AdaptiveSession(bank, max_items=20, categories=cats).run(_row(data, bank, m).get)
        assert list(bank.item_ids.get_indexer(result.items)) == list(ref.items[i])
        assert result.theta == pytest.approx(ref.final_theta[i], abs=1e-7)
        assert sum(cats[it] == "A" for it in result.items) == 5      # a quarter of 20


def test_min_information_stop_matches_a_brute_force_check(bank, data):
    row = _row(data, bank, "m34")
    session = AdaptiveSession(bank, min_information=0.3, max_items=200)
    result = session.run(row.get)
    assert result.stop_reason == "min_information"
    left = ~bank.item_ids.isin(result.items)
    assert fisher_information(result.theta, bank.a[left], bank.b[left]).max() < 0.3


def test_randomesque_session_is_seeded_and_its_state_replays(bank, data, tmp_path):
    row = _row(data, bank, "m37")
    one = AdaptiveSession(bank, max_items=15, randomesque=4, seed=3)
    for _ in range(8):
        item = one.propose()
        one.record(item, row[item])
    one.save(tmp_path / "s.json")
    back = AdaptiveSession.load(tmp_path / "s.json", bank)
    assert back.randomesque == 4 and back.propose() == one.propose()
    full = AdaptiveSession(bank, max_items=15, randomesque=4, seed=3).run(row.get)
    assert full.items[:8] == one.result().items
    other = AdaptiveSession(bank, max_items=15, randomesque=4, seed=4).run(row.get)
    assert other.items != full.items
    plain = AdaptiveSession(bank, max_items=15).run(row.get)
    assert plain.items != full.items


def test_session_rejects_bad_cat_settings(bank):
    with pytest.raises(InputError, match="estimator"):
        AdaptiveSession(bank, max_items=3, estimator="mle")
    with pytest.raises(InputError, match="no category for"):
        AdaptiveSession(bank, max_items=3, categories={"q000": "A"})
    with pytest.raises(InputError, match="min_information"):
        AdaptiveSession(bank, min_information=-1)


def test_evaluate_command_line_with_the_cat_options(bank, data, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    bank.write("bank.csv")
    frame = data.to_frame().loc[["m38"]]
    frame.stack().rename("score").rename_axis(["model", "item"]).reset_index().to_csv("r.csv", index=False)
    with open("cats.csv", "w") as fh:
        fh.write("item,category\n" + "".join(f"{it},{'A' if j % 2 else 'B'}\n" for j, it in enumerate(bank.item_ids)))
    code = main(["evaluate", "bank.csv", "--responses", "r.csv", "--estimator", "eap", "--randomesque", "2",
                 "--categories", "cats.csv", "--min-information", "0.05", "--max-items", "30", "--json", "-q"])
    out = capsys.readouterr()
    assert code == 0, out.err
    doc = json.loads(out.out)
    assert doc["estimator"] == "eap" and doc["min_information"] == 0.05
    assert doc["n_items"] <= 30 and doc["stop_reason"] in ("max_items", "min_information")
    given = [e["item"] for e in doc["administered"]]
    cats = dict(zip(bank.item_ids, ["A" if j % 2 else "B" for j in range(len(bank.item_ids))], strict=True))
    n_a = sum(cats[i] == "A" for i in given)
    assert abs(n_a - len(given) / 2) <= 1
    with open("bad.csv", "w") as fh:
        fh.write("item,cat\nq000,A\n")
    code = main(["evaluate", "bank.csv", "--responses", "r.csv", "--categories", "bad.csv", "-q"])
    err = capsys.readouterr().err
    assert code == 1 and "bad.csv" in err and "category" in err and len(err.strip().splitlines()) == 1
