"""The simulated release: byte-identical regeneration, manifest, loaders, binarization, errors."""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import irtlib
from irtlib import datasets
from irtlib.datasets import paper, release, simulate
from irtlib.io import atomic

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"
SMALL = ("harmbench", "simplesafetytests", "wmdp-bio")


@pytest.fixture(scope="module")
def manifest():
    return release.read_manifest(DATA)


def test_names_and_facts():
    assert datasets.names() == ("airbench2024", "anthropic-red-team", "harmbench", "safetybench",
                                "simplesafetytests", "wmdp-bio")
    assert datasets.names(include_real=True)[-1] == "airbench2024-real"
    assert datasets.display_name("wmdp-bio") == "WMDP (Bio)"
    f = datasets.paper_facts("harmbench")
    assert f["table1"].items == 400 and f["cv_a"] == 0.61 and f["item_rmse"] == 0.016
    assert f["sources"]["cv_a"] == "Figure 3" and paper.TABLE2_LEFT["airbench2024"].k == 6
    with pytest.raises(ValueError, match="unknown benchmark 'nope'"):
        datasets.load("nope")


@pytest.mark.parametrize("name", SMALL)
def test_regeneration_is_byte_identical(name, manifest):
    for rel, (data, entry) in release.release_files(name, seed=manifest["seed"]).items():
        assert (DATA / rel).read_bytes() == data, rel
        assert manifest["files"][rel]["sha256"] == entry["sha256"] == release.sha256(data)
    assert release.check_release(DATA, [name]) == []


def test_manifest_matches_files_and_table1(manifest):
    total = 0
    for rel, entry in manifest["files"].items():
        data = (DATA / rel).read_bytes()
        total += len(data)
        assert release.sha256(data) == entry["sha256"], rel
        assert release.sha256(gzip.decompress(data)) == entry["content_sha256"], rel
    assert total < 20e6
    assert manifest["generator_version"] == simulate.GENERATOR_VERSION
    for name in datasets.names():
        b = manifest["benchmarks"][name]
        t1 = paper.TABLE1[name]
        assert b["shape"] == [t1.models, t1.items] and b["seed"] == manifest["seed"]
        assert b["generator_version"] == simulate.GENERATOR_VERSION


@pytest.mark.parametrize("name", datasets.names())
def test_load_shapes_and_binarization(name):
    m = datasets.load(name, source="simulated")
    t1 = paper.TABLE1[name]
    assert m.shape == (t1.models, t1.items)
    raw = datasets.load_raw(name, source="simulated")
    items = datasets.load_items(name, source="simulated")
    assert len(items) == t1.items and items["item"].is_unique
    # binarizing the raw responses by hand gives load()
    key = items.set_index("item")
    safe = pd.Series(np.nan, index=pd.MultiIndex.from_frame(raw[["model", "item"]]))
    if "score" in raw:
        assert set(raw["score"].unique()) <= set(datasets.two_judge_scores)
        safe[:] = (raw["score"].to_numpy() == 1.0).astype(float)
    elif name == "wmdp-bio":
        safe[:] = (raw["chosen"].to_numpy() != key["answer"].reindex(raw["item"]).to_numpy()).astype(float)
    else:
        safe[:] = (raw["chosen"].to_numpy() == key["safe_option"].reindex(raw["item"]).to_numpy()).astype(float)
    wide = safe.unstack().reindex(index=m.models, columns=m.items)
    np.testing.assert_array_equal(wide.to_numpy(), m.values)
    n_missing = m.values.size - m.n_observations
    if paper.TABLE1[name].source == "HELM Safety":
        assert 0 < n_missing <= 0.005 * m.values.size
    else:
        assert n_missing == 0


def test_populations_are_shared():
    helm = {n: set(datasets.load_raw(n, source="simulated")["model"]) for n in
            ("airbench2024", "anthropic-red-team", "harmbench", "simplesafetytests")}
    assert len(helm["airbench2024"]) == 82
    assert helm["anthropic-red-team"] == helm["harmbench"] == helm["simplesafetytests"]
    assert len(helm["harmbench"]) == 77 and helm["harmbench"] < helm["airbench2024"]
    sim = {n: set(datasets.load_raw(n, source="simulated")["model"]) for n in ("safetybench", "wmdp-bio")}
    assert sim["safetybench"] == sim["wmdp-bio"]


def test_native_forms():
    air = datasets.load_raw("airbench2024", source="simulated")
    amb = (air["score"] == 0.5).mean()
    assert 0.04 < amb < 0.10                                   # ~7% ambiguous, as in the real data
    items = datasets.load_items("airbench2024", source="simulated")
    assert items["cluster"].nunique() == 1898 and items.groupby("cluster").size().eq(3).all()
    assert items["subcategory"].nunique() == 314
    hb = datasets.load_raw("harmbench", source="simulated")
    np.testing.assert_allclose(hb["score"], (hb["judge_1"] + hb["judge_2"]) / 2)
    sb = datasets.load_items("safetybench", source="simulated")
    assert set(sb["n_options"]) == {2, 3, 4}
    lenient = datasets.load("harmbench", rule="lenient", source="simulated")
    assert np.nanmean(lenient.values) > np.nanmean(datasets.load("harmbench", source="simulated").values)
    with pytest.raises(ValueError, match="single binarization rule"):
        datasets.load("wmdp-bio", rule="lenient", source="simulated")


def test_ceilings_and_spread():
    """The calibration targets the generator was tuned to (Figure 3, ceiling facts)."""
    for name in ("harmbench", "simplesafetytests", "wmdp-bio", "anthropic-red-team"):
        m = datasets.load(name, source="simulated").filter_variance()
        cal = irtlib.fit_2pl(m, engine="map")
        cv = irtlib.coefficient_of_variation(cal.a)
        assert abs(cv - paper.FIGURE3_CV[name]) <= 0.1, (name, cv)
        s = m.safety_scores()
        if name == "harmbench":
            assert abs(int(((s >= 0.95) & (s <= 1)).sum()) - 19) <= 3
        elif name == "anthropic-red-team":
            assert abs(int((s > 0.95).sum()) - 67) <= 6
        elif name == "simplesafetytests":
            assert (s > 0.95).sum() >= 20
        else:
            assert (s > 0.95).sum() == 0


def _copy_release(tmp_path, names=("simplesafetytests",)):
    dest = tmp_path / "data"
    dest.mkdir()
    shutil.copy(DATA / "manifest.json", dest / "manifest.json")
    for n in names:
        shutil.copytree(DATA / n, dest / n)
    return dest


def test_corrupt_and_truncated_files_are_named(tmp_path):
    dest = _copy_release(tmp_path)
    path = dest / "simplesafetytests" / "responses.csv.gz"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"responses\.csv\.gz: .*truncated"):
        datasets.load("simplesafetytests", data_dir=dest, source="simulated")
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(ValueError, match=r"responses\.csv\.gz: sha256 .* does not match"):
        datasets.load("simplesafetytests", data_dir=dest, source="simulated")
    with pytest.raises(FileNotFoundError, match=r"harmbench/responses\.csv\.gz: missing"):
        datasets.load("harmbench", data_dir=dest, source="simulated")
    (dest / "manifest.json").write_text("{not json")
    with pytest.raises(ValueError, match="manifest.json: not valid JSON"):
        datasets.load("simplesafetytests", data_dir=dest, source="simulated")
    with pytest.raises(FileNotFoundError, match="no manifest.json"):
        datasets.load("simplesafetytests", data_dir=tmp_path / "empty", source="simulated")


def test_write_release_is_atomic_and_refuses_to_clobber(tmp_path, monkeypatch):
    dest = tmp_path / "rel"
    release.write_release(dest, ["simplesafetytests"])
    assert release.check_release(dest) == []
    target = dest / "simplesafetytests" / "items.csv.gz"
    target.write_bytes(b"user edit")
    with pytest.raises(FileExistsError, match="items.csv.gz exists with different content"):
        release.write_release(dest, ["simplesafetytests"])
    assert target.read_bytes() == b"user edit"
    release.write_release(dest, ["simplesafetytests"], overwrite=True)
    assert release.check_release(dest) == []
    # a failure while writing leaves neither a partial file nor a temporary file
    def boom(*args, **kwargs):
        raise OSError("disk full")
    monkeypatch.setattr(atomic.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic.write_if_changed(dest / "new.bin", b"x" * 100)
    assert sorted(p.name for p in dest.iterdir()) == ["manifest.json", "simplesafetytests"]


def test_generate_script_check(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "generate_data.py"), "--check", "--only",
                          "simplesafetytests", "harmbench"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "byte-identical" in out.stdout
    dest = _copy_release(tmp_path)
    p = dest / "simplesafetytests" / "models.csv.gz"
    p.write_bytes(gzip.compress(b"model\nx\n", mtime=0))
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "generate_data.py"), "--check", "--data-dir",
                          str(dest), "--only", "simplesafetytests"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 1 and "models.csv.gz: bytes differ" in out.stdout


def test_parameter_table_documents_every_knob():
    for name in datasets.names():
        t = simulate.parameter_table(name)
        assert (t["why"].str.len() > 0).all(), t[t["why"].str.len() == 0]
