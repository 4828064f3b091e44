"""Real AIR-Bench 2024 (22 models): the loader against the facts of the shared copy, and the
download/convert/verify path against a fake fetcher built from that copy (no network)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from irtlib import datasets
from irtlib.datasets import real

SHARED = Path(__file__).resolve().parents[3] / "shared" / "realdata" / "airbench2024_helm22"
needs_real = pytest.mark.skipif(not (SHARED / "responses_graded.csv").exists(),
                                reason=f"real AIR-Bench data not found at {SHARED}")


@pytest.fixture(scope="module")
def real_dir():
    return SHARED


@needs_real
def test_counts_and_graded_mean(real_dir):
    raw = datasets.load_raw("airbench2024-real", data_dir=real_dir)
    assert len(raw) == 125_268 and raw["model"].nunique() == 22 and raw["item"].nunique() == 5_694
    assert round(raw["score"].mean(), 4) == 0.5692
    assert round((raw["score"] == 0.5).mean(), 3) == 0.073
    items = datasets.load_items("airbench2024-real", data_dir=real_dir)
    assert items["cluster"].nunique() == 1_898 and items.groupby("cluster").size().eq(3).all()
    assert items["l4_name"].nunique() == 314
    graded = raw.groupby("model")["score"].mean()
    assert graded.idxmax() == "anthropic_claude-3-sonnet-20240229" and round(graded.max(), 3) == 0.847
    assert graded.idxmin() == "databricks_dbrx-instruct" and round(graded.min(), 3) == 0.254


@needs_real
def test_strict_rule(real_dir):
    m = datasets.load("airbench2024-real", data_dir=real_dir)
    assert m.shape == (22, 5_694) and m.n_observations == 125_268
    p = m.item_safe_rates()
    assert (p == 0).sum() == 336 and (p == 1).sum() == 452


@needs_real
def test_lenient_rule(real_dir):
    m = datasets.load("airbench2024-real", rule="lenient", data_dir=real_dir)
    assert round(float(np.nanmean(m.values)), 4) == 0.6056
    p = m.item_safe_rates()
    assert (p == 0).sum() == 180 and (p == 1).sum() == 753
    s = m.safety_scores()
    assert round(s.min(), 3) == 0.291 and round(s.max(), 3) == 0.869


@needs_real
def test_env_variable(real_dir, monkeypatch):
    monkeypatch.setenv(real.DATA_ENV, str(real_dir))
    assert datasets.load("airbench2024-real").shape == (22, 5_694)
    monkeypatch.delenv(real.DATA_ENV)
    # without the variable, the shared copy beside the checkout is used when there is one
    monkeypatch.setattr(real, "shared_directory", lambda name: real_dir)
    assert datasets.load("airbench2024-real").shape == (22, 5_694)
    monkeypatch.setattr(real, "shared_directory", lambda name: real_dir / "absent")
    with pytest.raises(FileNotFoundError, match="IRTLIB_REAL_DATA is not set"):
        datasets.load("airbench2024-real")


def test_missing_directory_says_how_to_download(tmp_path):
    with pytest.raises(FileNotFoundError, match="irtlib airbench-data download"):
        datasets.load("airbench2024-real", data_dir=tmp_path)


@pytest.fixture(scope="module")
def fake_source():
    """A fetcher serving the 66 source CSVs rebuilt from the shared tidy copy."""
    if not (SHARED / "items.csv").exists():
        pytest.skip(f"real AIR-Bench data not found at {SHARED}")
    items = pd.read_csv(SHARED / "items.csv", dtype={"cate_idx": str}, keep_default_na=False)
    resp = pd.read_csv(SHARED / "responses_graded.csv")
    score = resp.pivot(index="model", columns="item", values="score")
    calls = []

    def fetch(url: str) -> bytes:
        calls.append(url)
        prefix = f"https://raw.githubusercontent.com/{real.REPOSITORY}/{real.PINNED_COMMIT}/clean_data/"
        assert url.startswith(prefix), url
        variant, rest = url.rsplit("/", 1)[1].split("_", 1)
        model = rest[: -len("_result.csv")]
        sub = items.iloc[real.VARIANTS.index(variant)::3]
        df = pd.DataFrame({
            "prompt_idx": sub["hf_row"].to_numpy() // 3, "cate-idx": sub["cate_idx"].to_numpy(),
            "l2-name": sub["l2_name"].to_numpy(), "l3-name": sub["l3_name"].to_numpy(),
            "l4-name": sub["l4_name"].to_numpy(), "prompt": sub["prompt"].to_numpy(),
            "score": score.loc[model, sub["item"]].to_numpy().astype(float)})
        return df.to_csv(index=False).encode()

    fetch.calls = calls
    return fetch


def test_download_converts_to_the_pinned_bytes(tmp_path, fake_source):
    dest = real.download_airbench(tmp_path / "air", fetch=fake_source)
    assert len(fake_source.calls) == 66
    for f in real.FILES:
        assert (dest / f).read_bytes() == (SHARED / f).read_bytes(), f
    assert set(real.verify_airbench(dest)) == set(real.FILES)
    sums = (dest / real.CHECKSUM_FILE).read_text()
    assert real.PINNED_COMMIT in sums and "source/clean_data/base/base_01-ai_yi-34b-chat_result.csv" in sums
    assert datasets.load("airbench2024-real", data_dir=dest).shape == (22, 5_694)
    # a corrupted copy is caught by name
    with open(dest / "responses_graded.csv", "ab") as fh:
        fh.write(b"x")
    with pytest.raises(ValueError, match=r"responses_graded\.csv: sha256 .* does not match"):
        datasets.load("airbench2024-real", data_dir=dest)


def test_truncated_source_is_named_and_nothing_written(tmp_path, fake_source):
    def truncated(url):
        data = fake_source(url)
        return data[: len(data) // 3] if "perturb1_cohere_command-r_result" in url else data

    dest = tmp_path / "air"
    where = r"clean_data/perturb1/perturb1_cohere_command-r_result\.csv: .*(truncated|rows)"
    with pytest.raises(ValueError, match=where):
        real.download_airbench(dest, fetch=truncated)
    assert not dest.exists() or not any(dest.iterdir())


def test_bad_score_row_is_named():
    data = b"prompt_idx,cate-idx,l2-name,l3-name,l4-name,prompt,score\n" + b"".join(
        f"{i},1.1.1,a,b,c,p,{'0.7' if i == 5 else '1.0'}\n".encode() for i in range(real.N_BASE_PROMPTS))
    with pytest.raises(ValueError, match=r"x\.csv: row 6: column 'score' is '0\.7'"):
        real._parse_source(data, "x.csv")
    with pytest.raises(ValueError, match=r"y\.csv: missing column\(s\) \['score'\]"):
        real._parse_source(b"prompt_idx,cate-idx,l2-name,l3-name,l4-name,prompt\n0,1,a,b,c,p\n", "y.csv")


def test_never_in_the_repository():
    root = Path(__file__).resolve().parents[2]
    tracked = os.popen(f"git -C {root} ls-files").read().split()
    assert not [f for f in tracked if f.endswith("responses_graded.csv")]


def test_convert_a_checkout_and_the_command(tmp_path, monkeypatch, capsys):
    """convert_airbench reads a local checkout; `irtlib airbench-data` downloads, converts, verifies
    (on made-up sources: the pinned checksums refuse them, which the command reports in one line)."""
    from irtlib.cli import main

    fetch = _synthetic_source(seed=1)
    prefix = f"https://raw.githubusercontent.com/{real.REPOSITORY}/{real.PINNED_COMMIT}/"
    checkout = tmp_path / "checkout"
    for variant in real.VARIANTS:                     # a checkout holding every source file
        for model in real.MODELS:
            rel = real.source_path(variant, model)
            (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
            (checkout / rel).write_bytes(fetch(prefix + rel))
    dest = real.convert_airbench(checkout, tmp_path / "converted", verify=False)
    assert set(real.verify_airbench(dest)) == set(real.FILES)
    assert (dest / "items.csv").read_bytes() == real.download_airbench(tmp_path / "fetched", fetch=fetch,
                                                                       verify=False).joinpath("items.csv").read_bytes()
    next((checkout / "clean_data" / real.VARIANTS[0]).iterdir()).unlink()
    with pytest.raises(FileNotFoundError, match="missing source file"):
        real.convert_airbench(checkout, tmp_path / "broken", verify=False)
    assert not (tmp_path / "broken").exists()

    monkeypatch.setattr(real, "fetch_url", fetch)
    assert main(["airbench-data", "verify", str(dest)]) == 0
    assert capsys.readouterr().out.count("OK ") == len(real.FILES)
    assert main(["airbench-data", "download", str(tmp_path / "cmd")]) == 1       # made-up data: not the pinned release
    errors = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("fetching ")]
    assert len(errors) == 1 and errors[0].startswith("irtlib: error: ") and "does not match the pinned" in errors[0]
    assert main(["airbench-data", "convert", str(checkout), str(tmp_path / "cmd2")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("irtlib: error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "cmd").exists() and not (tmp_path / "cmd2").exists()          # nothing written


def _synthetic_source(seed: int = 0):
    """A fetcher serving made-up source CSVs in the repository's format (no real data needed)."""
    rng = np.random.default_rng(seed)
    n = real.N_BASE_PROMPTS
    cats = pd.DataFrame({"cate-idx": [f"{1 + i % 7}.{1 + i % 3}" for i in range(n)],
                         "l2-name": [f"area {i % 4}" for i in range(n)],
                         "l3-name": [f"group {i % 9}" for i in range(n)],
                         "l4-name": [f"risk {i % 31}" for i in range(n)]})
    cache = {}

    def fetch(url: str) -> bytes:
        if url not in cache:
            variant, rest = url.rsplit("/", 1)[1].split("_", 1)
            order = rng.permutation(n)                          # rows in any order: sorted by prompt_idx
            df = pd.DataFrame({"prompt_idx": order, **{c: cats[c].to_numpy()[order] for c in cats},
                               "prompt": [f"{variant} prompt {i}, \"quoted\"" for i in order],
                               "score": rng.choice(["0", "0.5", "1"], size=n)})
            cache[url] = df.to_csv(index=False).encode()
        return cache[url]

    return fetch


def test_conversion_of_a_synthetic_source(tmp_path):
    """The conversion's logic without the real files: 66 sources -> items, models, graded responses."""
    fetch = _synthetic_source()
    with pytest.raises(ValueError, match="does not match the pinned"):   # made-up data is not the release
        real.download_airbench(tmp_path / "pinned", fetch=fetch)
    assert not (tmp_path / "pinned").exists()
    dest = real.download_airbench(tmp_path / "air", fetch=fetch, verify=False)
    assert set(real.verify_airbench(dest)) == set(real.FILES)            # against its own SHA256SUMS
    items = pd.read_csv(dest / "items.csv", keep_default_na=False)
    assert len(items) == 3 * real.N_BASE_PROMPTS and list(items["hf_row"]) == list(range(3 * real.N_BASE_PROMPTS))
    assert items["variant"].tolist()[:3] == list(real.VARIANTS)
    assert items["prompt"].iloc[4] == 'perturb1 prompt 1, "quoted"'
    graded = pd.read_csv(dest / "responses_graded.csv")
    assert len(graded) == 22 * 3 * real.N_BASE_PROMPTS and set(graded["score"]) <= {0.0, 0.5, 1.0}
    m = real.load_airbench(dest, verify=False)
    assert m.shape == (22, 3 * real.N_BASE_PROMPTS)
    lenient = real.load_airbench(dest, rule="lenient", verify=False)
    assert np.nanmean(lenient.values) > np.nanmean(m.values)

    def inconsistent(url):                                                 # another model's categories differ
        data = fetch(url)
        if real.MODELS[3] in url:
            data = data.replace(b"area 1", b"area X", 1)
        return data

    with pytest.raises(ValueError, match="risk categories differ"):
        real.download_airbench(tmp_path / "bad", fetch=inconsistent, verify=False)
