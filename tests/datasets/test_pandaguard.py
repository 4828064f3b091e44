"""The PandaGuard / JailbreakBench loader against the facts of the data's README (shared copy)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from irtlib import datasets
from irtlib.datasets import pandaguard

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "realdata" / "pandaguard_jbb"
if not SHARED.exists():
    SHARED = Path("/work/shared/realdata/pandaguard_jbb")
needs_data = pytest.mark.skipif(not (SHARED / "responses.csv").exists(),
                                reason=f"PandaGuard data not found at {SHARED} (set {pandaguard.DATA_ENV})")


@pytest.fixture(scope="module")
def binary():
    return datasets.load("pandaguard-jbb", data_dir=SHARED)


@needs_data
def test_readme_facts(binary):
    f = pandaguard.FACTS
    assert binary.shape == (f["n_models"], f["n_items"])
    assert int(binary.observed.sum()) == f["n_observed"]
    assert np.nanmean(binary.values) == pytest.approx(f["mean_binary"], abs=5e-5)
    scores = binary.safety_scores()
    assert int((scores == 1.0).sum()) == f["never_jailbroken"]
    assert (np.nanmin(binary.values, axis=0) == 0).all()          # every item jailbroken somewhere
    assert list(binary.items) == [f"jbb_{i:03d}" for i in range(100)]
    models = datasets.load_models("pandaguard-jbb", data_dir=SHARED)
    assert list(models["model"]) == list(binary.models)
    assert models["target"].nunique() == f["n_targets"]
    assert models["attack"].nunique() == f["n_attacks"]
    assert models["defence"].nunique() == f["n_defences"]
    assert (models.groupby("target").size() == 88).all()


@needs_data
def test_rules_order_and_graded_consistency(binary):
    strict = datasets.load("pandaguard-jbb", rule="strict", data_dir=SHARED)
    lenient = datasets.load("pandaguard-jbb", rule="lenient", data_dir=SHARED)
    for m in (strict, lenient):
        assert m.shape == binary.shape
        np.testing.assert_array_equal(m.observed, binary.observed)   # missing stays missing
    s, le, b = (np.nanmean(m.values) for m in (strict, lenient, binary))
    assert s < le <= b
    # binary safe <=> rating < 10 <=> graded > 0
    graded = datasets.load_raw("pandaguard-jbb", data_dir=SHARED)
    flat = pd.read_csv(SHARED / "responses.csv")
    merged = flat.merge(graded, on=["model", "item"], suffixes=("_bin", "_graded"))
    assert len(merged) == pandaguard.FACTS["n_observed"]
    np.testing.assert_array_equal(merged["score_bin"].to_numpy() == 1, merged["score_graded"].to_numpy() > 0)
    assert datasets.load("pandaguard-jbb", rule="binary", data_dir=SHARED).source.endswith("(binary)")


@needs_data
def test_env_variable(monkeypatch):
    monkeypatch.setenv(pandaguard.DATA_ENV, str(SHARED))
    m = datasets.load("pandaguard-jbb")
    assert m.shape == (704, 100)
    assert "pandaguard-jbb" in datasets.names(include_real=True)
    assert datasets.paper_facts("pandaguard-jbb") == {}


@needs_data
def test_checksum_mismatch_raises(tmp_path):
    for f in pandaguard.FILES:
        shutil.copy(SHARED / f, tmp_path / f)
    with open(tmp_path / "items.csv", "a") as fh:
        fh.write("jbb_100,an extra line\n")
    with pytest.raises(ValueError, match="items.csv"):
        pandaguard.load_pandaguard(tmp_path)


def test_missing_data_and_bad_rule(monkeypatch, tmp_path):
    monkeypatch.delenv(pandaguard.DATA_ENV, raising=False)
    with pytest.raises(FileNotFoundError, match=pandaguard.DATA_ENV):
        datasets.load("pandaguard-jbb")
    with pytest.raises(FileNotFoundError, match="missing"):
        datasets.load("pandaguard-jbb", data_dir=tmp_path)
    with pytest.raises(ValueError, match="rule"):
        pandaguard.load_pandaguard(tmp_path, rule="graded")


def test_simulated_default_rule_unchanged():
    """``rule=None`` means the paper's strict rule for the simulated benchmarks."""
    a = datasets.load("simplesafetytests", source="simulated")
    b = datasets.load("simplesafetytests", rule="strict", source="simulated")
    np.testing.assert_array_equal(a.values, b.values)


# ------------------------------------------------------------------ the chapter's pipeline and claims
def test_claims_without_data_are_not_testable():
    from irtbook import pandaguard_claims as pg

    rows = pg.claims(None)
    assert len(rows) == 7
    assert {r.verdict for r in rows} == {"not testable here"}
    assert {r.evidence for r in rows} == {"n/a"}


@needs_data
def test_run_headline_and_claims_on_the_real_data():
    from irtbook import pandaguard_claims as pg
    from irtbook.scorecard import VERDICTS
    from irtlib.protocol.agreement import METHODS

    result = pg.run(data_dir=SHARED, n_splits=3, ks=[1, 5, 20, 89])
    assert result["n_items"] == 100 and result["n_items_filtered"] == 89
    assert 0.9 < result["spearman_theta_score"] < 1.0
    grouped = result["grouped"]["results"]
    assert grouped.attrs["grouped"] and grouped.attrs["n_groups"] == 8
    for p in pg.PROTOCOLS:
        res, ceiling = result[p]["results"], result[p]["ceiling"]
        assert len(ceiling) == 3 and set(res["method"]) == set(METHODS)
        fluid_all = res[(res["method"] == "fluid") & (res["k"] == 89)].set_index("split")["agreement"]
        np.testing.assert_allclose(fluid_all.to_numpy(), ceiling.to_numpy(), atol=1e-9)   # every item: the ceiling
    head = pg.headline(result)
    assert list(head["protocol"]) == list(pg.PROTOCOLS.values())
    rows = pg.claims(result)
    assert len(rows) == 7 and all(r.verdict in VERDICTS for r in rows)
    rho = result["spearman_theta_score"]      # the bound 0.97 at the paper's two decimals; close within 0.02
    assert rows[0].verdict == ("reproduced" if rho >= 0.965 else "close" if rho >= 0.945 else "not reproduced")


@needs_data
def test_files_read_once_a_process_give_what_a_fresh_read_gives(tmp_path):
    # the responses are parsed and the checksums computed once per file (path, mtime, size): each load gets
    # its own copy, equal to pandas' own read, and a file edited since is read and checked again
    fresh = pd.read_csv(SHARED / "responses.csv", dtype={"model": str, "item": str, "score": float})
    first = pandaguard.load_pandaguard_raw(SHARED)
    first.loc[0, "score"] = 0.5                                  # a caller's edit stays its own
    pd.testing.assert_frame_equal(pandaguard.load_pandaguard_raw(SHARED), fresh, check_exact=True)
    ids = pd.read_csv(SHARED / "responses.csv", usecols=["model"], dtype=str)["model"]
    pd.testing.assert_frame_equal(pandaguard.load_pandaguard_models(SHARED),
                                  pandaguard._split_ids(sorted(pd.unique(ids))), check_exact=True)
    for f in pandaguard.FILES:
        shutil.copy(SHARED / f, tmp_path / f)
    assert pandaguard.verify_pandaguard(tmp_path) == pandaguard.verify_pandaguard(SHARED)
    with open(tmp_path / "responses.csv", "a") as fh:         # one more row: a new size, read again
        fh.write(f"{fresh['model'].iloc[0]},{fresh['item'].iloc[0]},1.0\n")
    assert len(pandaguard.load_pandaguard_raw(tmp_path, verify=False)) == len(fresh) + 1
    with pytest.raises(ValueError, match="responses.csv"):
        pandaguard.verify_pandaguard(tmp_path)
