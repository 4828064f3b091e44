"""The paper's own data: the authors' files, their README's facts, the download, and source resolution.

The facts are the table "Facts to check a loader against" of ``../shared/realdata/paper/README.md``
(skipped, with the reason, where the shared copy is absent). The download runs against an HTTP
server started here on 127.0.0.1 serving a copy of the shared files laid out as the authors'
repository.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import http.server
import json
import shutil
import socket
import threading
from pathlib import Path

import numpy as np
import pytest

from irtbook import pipeline
from irtlib import datasets
from irtlib.cli import main
from irtlib.datasets import authors, sources
from irtlib.errors import InputError, UsageError

SHARED = Path(__file__).resolve().parents[3] / "shared" / "realdata" / "paper"
needs_shared = pytest.mark.skipif(not (SHARED / "helm_harmbench_irt_data.jsonl").exists(),
                                  reason=f"the shared copy of the authors' files is not at {SHARED}")
HELM = ("anthropic-red-team", "harmbench", "simplesafetytests")
VERIFIED = ("anthropic-red-team", "harmbench", "simplesafetytests", "wmdp-bio")

#: README, "Facts to check a loader against": cells, ones, mean of x, items kept, all-1 items,
#: models with safety > 0.95, models at safety 1.0, (lowest model, its score), (highest model, score).
FACTS = {
    "anthropic-red-team": (77_000, 74_525, 0.9679, 512, 488, 66, 3,
                           ("mistralai/mistral-7b-instruct-v0.1", 0.673), ("anthropic/claude-3-haiku-20240307", 1.0)),
    "harmbench": (30_800, 21_819, 0.7084, 395, 5, 17, 1,
                  ("mistralai/mistral-7b-instruct-v0.1", 0.0775), ("openai/gpt-oss-120b", 1.0)),
    "simplesafetytests": (7_700, 7_361, 0.9560, 79, 21, 60, 27, ("mistralai/mistral-7b-instruct-v0.1", 0.43), None),
    # WMDP: x = correct; lowest / highest CORRECT rate; safety = 1 - x
    "wmdp-bio": (36_917, 29_706, 0.8047, 1_090, 183, 0, 0,
                 ("mistralai/mistral-small-3.2-24b-instruct", 0.3818), ("openai/gpt-5.4-nano", 0.9301)),
}


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    """No env var, an empty cache and an empty 'shared' directory: the search path is under our control."""
    for var in (authors.DATA_ENV, sources.SOURCE_ENV, "IRTLIB_REAL_DATA"):
        monkeypatch.delenv(var, raising=False)
    dirs = {k: tmp_path / k for k in ("env", "shared", "cache", "airbench22")}
    for d in dirs.values():
        d.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(dirs["cache"]))
    shared_root = tmp_path / "shared-root"

    def shared_directory(name):
        return dirs["shared"] if name == authors.SHARED_NAME else shared_root / name
    monkeypatch.setattr(authors, "shared_directory", shared_directory)
    monkeypatch.setattr("irtlib.datasets.real.shared_directory", shared_directory)
    dirs["cache"] = dirs["cache"] / "irtlib" / "paper"
    dirs["cache"].mkdir(parents=True)
    return dirs


# ---------------------------------------------------------------------------- the README's facts
@needs_shared
@pytest.mark.parametrize("name", VERIFIED)
def test_readme_facts(name):
    cells, ones, mean, kept, all_one, above, at_one, lowest, highest = FACTS[name]
    stored = authors.load_stored(name, data_dir=SHARED)
    x = stored.values
    assert stored.shape == authors.FILES[name].shape
    assert x.size == cells and int(x.sum()) == ones and round(x.mean(), 4) == mean
    p = x.mean(axis=0)
    assert int((p * (1 - p) >= 0.01).sum()) == kept
    assert int((p == 1).sum()) == all_one and int((p == 0).sum()) == 0      # no item 0 for every model
    safety = datasets.load(name, data_dir=SHARED)
    score = safety.values.mean(axis=1)
    assert int((score > 0.95).sum()) == above and int((score == 1).sum()) == at_one
    rate = pd_series(x.mean(axis=1), stored.models)              # lowest/highest of x (WMDP: correct rate)
    assert rate.idxmin() == lowest[0] and round(rate.min(), 4) == lowest[1]
    if highest is not None:
        assert round(rate.max(), 4) == highest[1]
        assert rate[highest[0]] == rate.max()
    if name == "wmdp-bio":
        np.testing.assert_array_equal(safety.values, 1 - x)                 # correct = unsafe
        assert datasets.load_raw(name, data_dir=SHARED).columns.tolist() == ["model", "item", "correct"]
    else:
        np.testing.assert_array_equal(safety.values, x)
    # the filter the paper applies keeps exactly the README's count and drops only all-safe items
    assert safety.filter_variance().shape[1] == kept


def pd_series(values, index):
    import pandas as pd

    return pd.Series(values, index=list(index))


@needs_shared
def test_helm_sets_share_models_and_file_order():
    models = [authors.load_stored(n, data_dir=SHARED).models for n in HELM]
    assert all(list(m) == list(models[0]) for m in models[1:]) and len(models[0]) == 77
    first = json.loads((SHARED / "wmdp_irt_data.jsonl").open().readline())
    m = authors.load_stored("wmdp-bio", data_dir=SHARED)
    assert m.models[0] == first["subject_id"] and list(m.items) == list(first["responses"])


@needs_shared
def test_harmbench_means_by_functional_category_and_no_text():
    items = datasets.load_items("harmbench", data_dir=SHARED)
    assert {"functional_category", "semantic_category", "tags", "category"} <= set(items.columns)
    assert not {"behavior", "context", "prompt"} & set(items.columns)
    x = authors.load_stored("harmbench", data_dir=SHARED).to_frame()
    assert list(items["item"]) == list(x.columns)
    means = x.T.groupby(items.set_index("item")["functional_category"]).mean().to_numpy().mean(axis=1)
    got = dict(zip(sorted(items["functional_category"].unique()), np.round(means, 4), strict=True))
    assert got == {"contextual": 0.6086, "copyright": 0.5206, "standard": 0.8522}
    sst = datasets.load_items("simplesafetytests", data_dir=SHARED)
    assert list(sst.columns) == ["item", "harm_area", "category"] and len(sst) == 100
    assert list(datasets.load_items("anthropic-red-team", data_dir=SHARED).columns) == ["item"]


@needs_shared
def test_authors_fits():
    fits = authors.load_fits(data_dir=SHARED)
    assert fits.shape == (7_900, 29) and sorted(fits["fold"].unique()) == list(range(100))
    kept = datasets.load("simplesafetytests", data_dir=SHARED).filter_variance()
    assert fits.groupby("fold")["item_id"].apply(lambda s: set(s) == set(kept.items)).all()
    assert (fits["a"] > 0).all()


@needs_shared
def test_paper_data_are_binary_rule_does_not_apply():
    strict = datasets.load("harmbench", rule="strict", data_dir=SHARED)
    lenient = datasets.load("harmbench", rule="lenient", data_dir=SHARED)
    np.testing.assert_array_equal(strict.values, lenient.values)
    assert "no binarization rule applies" in strict.source and "the paper's data" in strict.source


# ---------------------------------------------------------------------------- verification on load
@needs_shared
def test_corrupted_copy_is_refused_naming_it(isolated, monkeypatch):
    data = bytearray((SHARED / "helm_simplesafety_irt_data.jsonl").read_bytes())
    data[200:201] = b"0" if data[200:201] != b"0" else b"1"
    bad = isolated["env"] / "helm_simplesafety_irt_data.jsonl"
    bad.write_bytes(bytes(data))
    monkeypatch.setenv(authors.DATA_ENV, str(isolated["env"]))
    with pytest.raises(InputError, match=r"helm_simplesafety_irt_data\.jsonl: sha256 \w+ does not match the pinned") \
            as err:
        datasets.load("simplesafetytests")
    assert "\n" not in str(err.value) and str(bad) in str(err.value)


# ---------------------------------------------------------------------------- resolution order
@needs_shared
def test_env_beats_shared_beats_cache(isolated, monkeypatch):
    name, fname = "simplesafetytests", authors.FILES["simplesafetytests"].filename
    for where in ("env", "shared", "cache"):
        shutil.copy(SHARED / fname, isolated[where] / fname)
    monkeypatch.setenv(authors.DATA_ENV, str(isolated["env"]))
    assert authors.locate(name).origin == "env"
    assert datasets.resolve(name).path == isolated["env"] / fname
    monkeypatch.delenv(authors.DATA_ENV)
    assert authors.locate(name).origin == "shared"
    (isolated["shared"] / fname).unlink()
    found = authors.locate(name)
    assert found.origin == "cache" and found.path == isolated["cache"] / fname
    ds = datasets.resolve(name)
    assert (ds.kind, ds.verified, ds.shape) == ("paper", True, (77, 100))
    assert ds.label == "the paper's data (authors' release, 77 models × 100 items)"
    (isolated["cache"] / fname).unlink()
    assert authors.locate(name) is None
    assert datasets.resolve(name).kind == "simulated"


def test_env_naming_no_directory_is_an_error(isolated, monkeypatch):
    monkeypatch.setenv(authors.DATA_ENV, str(isolated["env"] / "typo"))
    with pytest.raises(InputError, match="IRTLIB_PAPER_DATA=.*typo: not a directory"):
        datasets.resolve("harmbench")


@needs_shared
def test_simulated_ignores_real_files(isolated, monkeypatch):
    shutil.copy(SHARED / "helm_harmbench_irt_data.jsonl", isolated["env"])
    monkeypatch.setenv(authors.DATA_ENV, str(isolated["env"]))
    assert datasets.resolve("harmbench").kind == "paper"
    sim = datasets.resolve("harmbench", source="simulated")
    assert sim.kind == "simulated" and sim.label == "simulated release" and not sim.binary
    m = datasets.load("harmbench", source="simulated")
    assert m.models[0].startswith("sim_") and m.source.endswith(": simulated release")
    monkeypatch.setenv(sources.SOURCE_ENV, "simulated")                    # one setting switches a build
    assert datasets.resolve("harmbench").kind == "simulated"
    assert datasets.load("harmbench").models[0].startswith("sim_")
    monkeypatch.setenv(sources.SOURCE_ENV, "papers")
    with pytest.raises(InputError, match="IRTLIB_DATA='papers': choose one of auto, real, simulated"):
        datasets.resolve("harmbench")


def test_real_without_files_says_how_to_get_them(isolated):
    with pytest.raises(FileNotFoundError, match=r"harmbench: no real data found .*irtlib paper-data "
                                                r"download"):
        datasets.load("harmbench", source="real")
    with pytest.raises(FileNotFoundError, match="download --with-unverified safetybench"):
        datasets.resolve("safetybench", source="real")
    with pytest.raises(FileNotFoundError, match=r"download --with-unverified airbench2024.*IRTLIB_REAL_DATA"):
        datasets.resolve("airbench2024", source="real")
    assert datasets.resolve("safetybench").kind == "simulated"
    with pytest.raises(InputError, match="source='nope'"):
        datasets.resolve("harmbench", source="nope")


@needs_shared
def test_airbench_resolves_to_the_22_real_models_then_the_authors_file(isolated, monkeypatch):
    real22 = SHARED.parent / "airbench2024_helm22"
    if not (real22 / "responses_graded.csv").exists():
        pytest.skip(f"no 22-model AIR-Bench copy at {real22}")
    monkeypatch.setenv("IRTLIB_REAL_DATA", str(real22))
    ds = datasets.resolve("airbench2024")
    assert ds.kind == "real-subset" and ds.label == "real AIR-Bench 2024 judgments, 22 of the paper's 82 models"
    assert datasets.display_name("airbench2024") == "AIR-Bench 2024 (real, 22 models)"
    strict, lenient = datasets.load("airbench2024"), datasets.load("airbench2024", rule="lenient")
    assert strict.shape == (22, 5_694) and np.nanmean(lenient.values) > np.nanmean(strict.values)
    assert strict.source.startswith("airbench2024 (strict): real AIR-Bench")
    # the authors' 82-model file, once present, wins (shape checked; checksum not known here)
    small = dataclasses.replace(authors.FILES["airbench2024"], shape=(3, 2))
    monkeypatch.setitem(authors.FILES, "airbench2024", small)
    write_jsonl(isolated["cache"] / small.filename, [[1, 0], [1, 1], [0, 1]])
    ds = datasets.resolve("airbench2024")
    assert (ds.kind, ds.verified) == ("paper", False) and "checksum not verified" in ds.label
    assert datasets.load("airbench2024").shape == (3, 2)


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps({"subject_id": f"m{i}", "responses": {f"q{j}": v for j, v in enumerate(r)}})
                            + "\n" for i, r in enumerate(rows)))
    return path


@needs_shared
def test_benchmark_carries_its_source_and_the_cache_key_changes(isolated, monkeypatch):
    monkeypatch.setenv(authors.DATA_ENV, str(SHARED))
    real = pipeline.load_benchmark("simplesafetytests", rule="lenient")
    sim = pipeline.load_benchmark("simplesafetytests", source="simulated")
    assert real.data.kind == "paper" and real.rule == "binary" and real.filtered.shape == (77, 79)
    assert real.data.label.startswith("the paper's data") and sim.data.label == "simulated release"
    assert sim.rule == "strict" and real.checksum != sim.checksum
    assert real.checksum == pipeline.load_benchmark("simplesafetytests").checksum


# ---------------------------------------------------------------------------- the download
def _serve(root: Path):
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def mirror(tmp_path):
    """A copy of the shared files laid out as the authors' repository, served on loopback."""
    root = tmp_path / "mirror"
    for key in authors.DEFAULT_DOWNLOAD:
        f = authors.FILES[key]
        (root / f.remote).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SHARED / f.filename, root / f.remote)
    server, url = _serve(root)
    yield root, url
    server.shutdown()
    server.server_close()


@needs_shared
def test_download_verifies_and_is_byte_identical(mirror, tmp_path, isolated):
    _, url = mirror
    lines = []
    got = authors.download(dest=tmp_path / "dest", base_url=url, progress=lines.append)
    assert [r.key for r in got] == list(authors.DEFAULT_DOWNLOAD) and all(r.status == "downloaded" for r in got)
    for r in got:
        assert r.path.read_bytes() == (SHARED / authors.FILES[r.key].filename).read_bytes()
        assert r.verified and r.sha256 == authors.FILES[r.key].sha256
    assert len(lines) == 5 and all("sha256 verified" in ln for ln in lines)
    again = authors.download(dest=tmp_path / "dest", base_url=url)
    assert {r.status for r in again} == {"present"}
    # the default destination is the per-user cache, which resolution then finds
    authors.download(["harmbench"], base_url=url)
    assert authors.locate("harmbench").origin == "cache"
    assert datasets.resolve("harmbench").path == isolated["cache"] / "helm_harmbench_irt_data.jsonl"
    status = {r.key: r.status for r in authors.download(base_url=url, missing_only=True)}   # make paper-data
    assert status.pop("harmbench") == "found" and set(status.values()) == {"downloaded"}


@needs_shared
def test_corrupted_download_is_refused_and_leaves_nothing(mirror, tmp_path):
    root, url = mirror
    target = root / authors.FILES["harmbench"].remote
    data = bytearray(target.read_bytes())
    data[-3] ^= 1
    target.write_bytes(bytes(data))
    dest = tmp_path / "dest"
    with pytest.raises(InputError, match=r"helm_harmbench_irt_data\.jsonl: sha256 \w+ does not match the pinned "
                                         r"9105d4e2.*nothing was written"):
        authors.download(["harmbench"], dest=dest, base_url=url)
    assert list(dest.iterdir()) == []                      # no file, no temporary left behind
    # a corrupted copy already in the destination is refused, not overwritten
    (dest / "helm_harmbench_irt_data.jsonl").write_bytes(bytes(data))
    with pytest.raises(InputError, match="does not match the pinned"):
        authors.download(["harmbench"], dest=dest, base_url=url)
    assert (dest / "helm_harmbench_irt_data.jsonl").read_bytes() == bytes(data)


def test_closed_port_is_one_line(tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(OSError, match=rf"cannot download {url}/data/irt_input_data/helm_harmbench_irt_data\.jsonl"):
        authors.download(["harmbench"], dest=tmp_path / "d", base_url=url)
    assert list((tmp_path / "d").iterdir()) == []
    status = main(["paper-data", "download", "--dest", str(tmp_path / "d"), "--base-url", url, "harmbench"])
    err = capsys.readouterr().err
    assert status == 1 and err.count("\n") == 1 and err.startswith("irtlib: error: cannot download ")
    assert "Traceback" not in err


def test_unverified_needs_consent_and_records_the_hash(tmp_path, isolated, monkeypatch, capsys):
    small = dataclasses.replace(authors.FILES["safetybench"], shape=(3, 2))
    monkeypatch.setitem(authors.FILES, "safetybench", small)
    root = tmp_path / "mirror"
    (root / small.remote).parent.mkdir(parents=True)
    payload = write_jsonl(root / small.remote, [[1, 0], [0, 0], [1, 1]]).read_bytes()
    server, url = _serve(root)
    try:
        with pytest.raises(UsageError, match="add --with-unverified"):
            authors.download(["safetybench"], dest=tmp_path / "d", base_url=url)
        assert main(["paper-data", "download", "--dest", str(tmp_path / "d"), "--base-url", url,
                     "safetybench"]) == 2
        capsys.readouterr()
        assert main(["paper-data", "download", "--dest", str(isolated["cache"]), "--base-url", url,
                     "--with-unverified", "safetybench"]) == 0
        out = capsys.readouterr().out
    finally:
        server.shutdown()
        server.server_close()
    digest = hashlib.sha256(payload).hexdigest()
    assert f"sha256 {digest} observed, NOT verified" in out
    path = isolated["cache"] / small.filename
    assert path.read_bytes() == payload
    side = (isolated["cache"] / (small.filename + ".sha256")).read_text()
    assert side.startswith(f"{digest}  {small.filename}\n") and "NOT verified" in side
    found = authors.locate("safetybench")
    assert (found.verified, found.observed_sha256) == (False, digest)
    ds = datasets.resolve("safetybench")
    assert ds.kind == "paper" and not ds.verified and ds.label.endswith("; checksum not verified)")
    np.testing.assert_array_equal(datasets.load("safetybench").values, [[1, 0], [0, 0], [1, 1]])


def test_unverified_download_of_the_wrong_shape_is_refused(tmp_path, monkeypatch):
    small = dataclasses.replace(authors.FILES["safetybench"], shape=(3, 2))
    monkeypatch.setitem(authors.FILES, "safetybench", small)
    root = tmp_path / "mirror"
    (root / small.remote).parent.mkdir(parents=True)
    write_jsonl(root / small.remote, [[1, 0], [0, 0]])
    server, url = _serve(root)
    try:
        with pytest.raises(InputError, match="2 models x 2 items, expected 3 x 2; nothing was written"):
            authors.download(["safetybench"], dest=tmp_path / "d", base_url=url, with_unverified=True)
    finally:
        server.shutdown()
        server.server_close()
    assert list((tmp_path / "d").iterdir()) == []


@needs_shared
def test_irtlib_paper_data_command(mirror, tmp_path, capsys):
    _, url = mirror
    assert main(["paper-data", "download", "--dest", str(tmp_path / "d"), "--base-url", url, "wmdp-bio"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("downloaded wmdp-bio: ") and "sha256 verified" in out
    assert (tmp_path / "d" / "wmdp_irt_data.jsonl").read_bytes() == (SHARED / "wmdp_irt_data.jsonl").read_bytes()
    assert main(["paper-data", "download", "--dest", str(tmp_path / "d"), "safetybench"]) == 2
    assert "add --with-unverified" in capsys.readouterr().err
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["paper-data", "download", "--dest", str(tmp_path / "e"), "--base-url", f"http://127.0.0.1:{port}",
                 "harmbench"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("irtlib: error: cannot download http://127.0.0.1:")
    assert main(["paper-data", "list"]) == 0
    assert "harmbench: " in capsys.readouterr().out
