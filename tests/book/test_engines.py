"""The fit chapters' side-by-side of calibrations (irtbook.engines) on a small benchmark."""

from __future__ import annotations

import pytest

from irtbook import engines as eng
from irtbook import pipeline
from irtbook.words import engine_caption, engine_noun


@pytest.fixture(scope="module")
def setup():
    sst = pipeline.load_benchmark("simplesafetytests", source="simulated")
    m = sst.filtered
    cals = {"map": {"simplesafetytests": pipeline.calibrate_matrix(m, engine="map")},
            "pyirt-authors": {"simplesafetytests": pipeline.calibrate_matrix(m, engine="pyirt-authors", epochs=50)}}
    return {"simplesafetytests": sst}, cals


def test_engine_table_compares_every_other_engine_with_the_main_one(setup):
    benches, cals = setup
    table = eng.engine_table(benches, cals, "pyirt-authors")
    name = benches["simplesafetytests"].display_name
    assert list(table.index) == [name]
    assert {"authors' calibration s", "MAP engine s"} <= set(table.columns)
    spearman = [c for c in table.columns if c.startswith("Spearman")]
    assert spearman == ["Spearman θ, MAP engine", "Spearman b, MAP engine", "Spearman a, MAP engine"]
    assert ((table[spearman] > -1) & (table[spearman] <= 1)).all().all()
    phrase = eng.agreement_phrase(table, "pyirt-authors", ["map"])
    assert phrase.startswith("MAP engine: θ at least") and name in phrase
    least = eng.least_agreement_phrase(table, ["map"])
    assert least.endswith("agrees least under the other calibration") and "$" not in least
    assert "authors' calibration" in eng.seconds_phrase(table, ["pyirt-authors", "map"])


def test_phrases_compute_their_direction_and_counts():
    assert eng.direction(0.05, tol=0.02) == "higher than" and eng.direction(-0.05, tol=0.02) == "lower than"
    assert eng.direction(0.01, tol=0.02) == "close to"
    assert eng.count_phrase(6, 6) == "all 6" and eng.count_phrase(0, 6) == "none"
    assert eng.count_phrase(2, 6) == "2 of the 6"
    assert eng.names_phrase(["A", "B", "C"]) == "A, B and C" and eng.names_phrase([]) == "none"
    assert eng.alternatives("map", ["pyirt-authors", "pyirt", "map"]) == ["pyirt-authors", "pyirt"]
    assert engine_caption("map", 1000) == "MAP engine"
    assert engine_caption("pyirt-authors", 1000) == "authors' calibration, 1,000 epochs"
    assert engine_noun("pyirt") == "py-irt with the text's priors"
