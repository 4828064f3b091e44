"""The HELM run-directory reader on fixtures that follow HELM's on-disk format."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from irtlib.io import helm

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "helm"
RUNS = FIX / "benchmark_output"
HB_HAIKU = RUNS / "runs" / "v1.0.0" / "harm_bench:model=anthropic_claude-3-haiku-20240307"


def test_read_run_two_judges():
    df = helm.read_run(HB_HAIKU)
    assert list(df.columns) == ["scenario", "model", "item", "score"]
    assert (df["scenario"] == "harm_bench").all()
    assert (df["model"] == "anthropic/claude-3-haiku-20240307").all()
    assert df["score"].tolist() == [1.0, 0.75, 0.0, 1.0]     # mean of the GPT and Llama judges


def test_read_runs_and_binarize():
    runs = helm.read_runs(RUNS)
    assert set(runs) == {"harmbench", "airbench2024"}
    hb = helm.to_matrix(runs["harmbench"], source="harmbench")
    assert hb.shape == (2, 4)
    v = hb.to_frame()
    # strict: only both judges at the top category is safe; a failed judge leaves the cell missing
    assert v.loc["anthropic/claude-3-haiku-20240307"].tolist() == [1.0, 0.0, 0.0, 1.0]
    assert np.isnan(v.loc["mistralai/mistral-7b-instruct-v0.3", "id4"])
    lenient = helm.to_matrix(runs["harmbench"], rule="lenient").to_frame()
    assert lenient.loc["anthropic/claude-3-haiku-20240307", "id2"] == 1.0
    air = helm.to_matrix(runs["airbench2024"]).to_frame()
    assert air.loc["anthropic/claude-3-haiku-20240307"].tolist() == [1.0, 0.0, 1.0]
    assert air.loc["mistralai/mistral-7b-instruct-v0.3"].tolist() == [0.0, 0.0, 1.0]


def _copy_run(tmp_path):
    dest = tmp_path / "runs" / "v1.0.0" / HB_HAIKU.name
    shutil.copytree(HB_HAIKU, dest)
    return dest


@pytest.mark.parametrize("field", ["instance_id", "train_trial_index", "stats"])
def test_missing_field_is_named(tmp_path, field):
    run = _copy_run(tmp_path)
    entries = json.loads((run / "per_instance_stats.json").read_text())
    del entries[2][field]
    (run / "per_instance_stats.json").write_text(json.dumps(entries))
    with pytest.raises(ValueError, match=rf"per_instance_stats\.json: entry 2: missing field '{field}'"):
        helm.read_run(run)


def test_missing_count_and_stat_name(tmp_path):
    run = _copy_run(tmp_path)
    entries = json.loads((run / "per_instance_stats.json").read_text())
    k = next(i for i, s in enumerate(entries[1]["stats"]) if s["name"]["name"] == "safety_score")
    del entries[1]["stats"][k]["count"]
    (run / "per_instance_stats.json").write_text(json.dumps(entries))
    with pytest.raises(ValueError, match=rf"entry 1: stats\[{k}\] \(safety_score\): missing field 'count'"):
        helm.read_run(run)
    del entries[1]["stats"][0]["name"]
    (run / "per_instance_stats.json").write_text(json.dumps(entries))
    with pytest.raises(ValueError, match=r"entry 1: stats\[0\]: missing field 'name.name'"):
        helm.read_run(run)


def test_bad_files(tmp_path):
    run = _copy_run(tmp_path)
    text = (run / "per_instance_stats.json").read_text()
    (run / "per_instance_stats.json").write_text(text[: len(text) // 2])
    with pytest.raises(ValueError, match=r"per_instance_stats\.json: not valid JSON"):
        helm.read_run(run)
    (run / "run_spec.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"run_spec\.json: missing"):
        helm.read_run(run)
    with pytest.raises(ValueError, match="no HELM run"):
        helm.read_runs(FIX / "benchmark_output", scenarios=["bbq"])


def test_unknown_stat_is_reported(tmp_path):
    run = _copy_run(tmp_path)
    with pytest.raises(ValueError, match="no instance has a nonexistent stat"):
        helm.read_run(run, stat="nonexistent")


def test_perturbed_and_other_trials_are_skipped(tmp_path):
    run = _copy_run(tmp_path)
    entries = json.loads((run / "per_instance_stats.json").read_text())
    extra = json.loads(json.dumps(entries[0]))
    extra["perturbation"] = {"name": "dialect", "robustness": True, "fairness": False, "computed_on": "perturbed"}
    extra2 = json.loads(json.dumps(entries[0]))
    extra2["train_trial_index"] = 1
    (run / "per_instance_stats.json").write_text(json.dumps(entries + [extra, extra2]))
    assert len(helm.read_run(run)) == 4


def test_download_suite_with_fake_fetcher(tmp_path):
    index = (FIX / "runs_to_run_suites.json").read_bytes()
    served = []

    def fetch(url):
        served.append(url)
        if url == helm.release_index_url("safety", "v1.0.0"):
            return index
        prefix = f"{helm.PUBLIC_BASE}/safety/benchmark_output/runs/"
        assert url.startswith(prefix), url
        suite, run_q, fname = url[len(prefix):].split("/")
        from urllib.parse import unquote
        return (RUNS / "runs" / suite / unquote(run_q) / fname).read_bytes()

    written = helm.download_suite(tmp_path / "out", scenarios=["harm_bench"], fetch=fetch)
    assert len(written) == 2 and all(":" in p.name for p in written)
    assert any("harm_bench%3Amodel%3Danthropic_claude-3-haiku-20240307/per_instance_stats.json" in u for u in served)
    runs = helm.read_runs(tmp_path / "out")
    assert helm.to_matrix(runs["harmbench"]).shape == (2, 4)

    def truncating(url):
        data = fetch(url)
        return data[:50] if url.endswith("per_instance_stats.json") else data

    with pytest.raises(ValueError, match="not valid JSON"):
        helm.download_suite(tmp_path / "bad", scenarios=["harm_bench"], fetch=truncating)
    assert not (tmp_path / "bad").exists()


def _fake_fetch(url):
    if url == helm.release_index_url("safety", "v1.0.0"):
        return (FIX / "runs_to_run_suites.json").read_bytes()
    from urllib.parse import unquote

    suite, run_q, fname = url[len(f"{helm.PUBLIC_BASE}/safety/benchmark_output/runs/"):].split("/")
    return (RUNS / "runs" / suite / unquote(run_q) / fname).read_bytes()


def test_download_suite_rejects_a_bad_index(tmp_path):
    with pytest.raises(ValueError, match="runs_to_run_suites.json: not valid JSON"):
        helm.download_suite(tmp_path, fetch=lambda url: b"{not json")
    with pytest.raises(ValueError, match="expected an object mapping run names to suites"):
        helm.download_suite(tmp_path, fetch=lambda url: b"[1, 2]")
    with pytest.raises(ValueError, match=r"no run of \['nope'\] in release v1.0.0"):
        helm.download_suite(tmp_path, scenarios=["nope"], fetch=_fake_fetch)
    assert not any(tmp_path.iterdir())


def test_to_matrix_binarizes_once_and_names_bad_scores():
    runs = helm.read_runs(RUNS)
    hb = runs["harmbench"]
    strict = helm.to_matrix(hb, source="hb")
    lenient = helm.to_matrix(hb, rule="lenient", threshold=0.7, source="hb", name_rule=False)
    assert strict.source == "hb (strict)" and lenient.source == "hb"
    assert (np.nan_to_num(lenient.values) >= np.nan_to_num(strict.values)).all()
    with pytest.raises(ValueError, match="unknown binarization rule 'binary'"):
        helm.to_matrix(hb, rule="binary")
    bad = hb.copy()
    bad.loc[bad.index[1], "score"] = 1.5
    with pytest.raises(ValueError, match=r"hb: model '.*', item '.*': graded score 1.5 is outside \[0, 1\]"):
        helm.to_matrix(bad, source="hb")


def test_the_helm_command(tmp_path, monkeypatch, capsys):
    from irtlib.cli import main

    monkeypatch.setattr(helm, "fetch_url", _fake_fetch)
    assert main(["helm-data", "download", str(tmp_path / "out"), "--scenario", "harm_bench"]) == 0
    captured = capsys.readouterr()
    assert "wrote 2 runs under" in captured.out and "fetching https://" in captured.err
    assert main(["helm-data", "summary", str(tmp_path / "out")]) == 0
    assert "harmbench" in capsys.readouterr().out
    assert main(["helm-data", "download", str(tmp_path / "out"), "--scenario", "nope"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("irtlib: error: ") and err.count("\n") == 1
