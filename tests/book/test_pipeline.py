"""The book's cached pipeline (irtbook.pipeline): what it computes, its cache keys, and invalidation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from irtbook import cache, pipeline
from irtlib.datasets import paper


@pytest.fixture(scope="module")
def sst():
    return pipeline.load_benchmark("simplesafetytests", source="simulated")


def test_load_benchmark_binarizes_and_filters(sst):
    from irtlib import datasets

    assert sst.name == "simplesafetytests" and sst.rule == "strict"
    assert sst.display_name == datasets.display_name("simplesafetytests")
    assert sst.full.shape[1] == 100
    rates = sst.full.item_safe_rates()
    kept = rates[rates * (1 - rates) > 0.01].index
    assert list(sst.filtered.items) == list(kept)                 # the paper's variance filter
    assert sst.checksum == pipeline.load_benchmark("simplesafetytests", source="simulated").checksum
    lenient = pipeline.load_benchmark("simplesafetytests", rule="lenient", source="simulated")
    assert lenient.rule == "lenient"
    # a multiple-choice benchmark has a single rule: `rule` is ignored and recorded as strict
    assert pipeline.load_benchmark("wmdp-bio", rule="lenient", source="simulated").rule == "strict"


class Counter:
    def __init__(self, func):
        self.func, self.calls = func, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.func(*args, **kwargs)


def _release_copy(tmp_path, name: str) -> Path:
    """A copy of the simulated release's manifest and one benchmark's directory."""
    import shutil

    from irtlib.datasets.release import MANIFEST
    from irtlib.datasets.sources import default_data_dir

    src, dest = default_data_dir(), tmp_path / "release"
    shutil.copytree(src / name, dest / name)
    shutil.copy(src / MANIFEST, dest / MANIFEST)
    return dest


def test_a_loaded_benchmark_is_kept_by_its_options_and_the_digests_of_its_files(tmp_path, monkeypatch):
    """The cache serves the same benchmark for the same options and files, and loads again when either changes."""
    import gzip
    import hashlib
    import json

    from irtlib import datasets

    data = _release_copy(tmp_path, "simplesafetytests")
    opts = dict(source="simulated", data_dir=data)
    fresh = pipeline.load_benchmark("simplesafetytests", **opts)
    load = Counter(datasets.load)
    monkeypatch.setattr(datasets, "load", load)
    cache_dir = tmp_path / "cache"
    first = pipeline.load_benchmark("simplesafetytests", cache_dir=cache_dir, **opts)
    again = pipeline.load_benchmark("simplesafetytests", cache_dir=cache_dir, **opts)
    assert load.calls == 1                                                   # read the second time
    for bench in (first, again):
        assert bench == fresh and bench.checksum == fresh.checksum and bench.display_name == fresh.display_name
        assert bench.data == fresh.data and bench.rule == fresh.rule and not bench.full.values.flags.writeable
    pipeline.load_benchmark("simplesafetytests", threshold=0.02, cache_dir=cache_dir, **opts)
    pipeline.load_benchmark("simplesafetytests", rule="lenient", cache_dir=cache_dir, **opts)
    assert load.calls == 3                                                   # other options: loaded
    # one response changed (and the manifest with it, so that the release still verifies): loaded again
    rel = "simplesafetytests/responses.csv.gz"
    lines = gzip.decompress((data / rel).read_bytes()).decode().splitlines()
    row = next(i for i, line in enumerate(lines) if line.split(",")[2] == "1")
    model, item, *_ = lines[row].split(",")
    lines[row] = f"{model},{item},0,0,0"
    blob = gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0)
    (data / rel).write_bytes(blob)
    manifest = json.loads((data / "manifest.json").read_text())
    manifest["files"][rel].update(sha256=hashlib.sha256(blob).hexdigest(), bytes=len(blob))
    (data / "manifest.json").write_text(json.dumps(manifest))
    changed = pipeline.load_benchmark("simplesafetytests", cache_dir=cache_dir, **opts)
    assert load.calls == 4 and changed.checksum != fresh.checksum
    assert changed.full.to_long().set_index(["model", "item"]).loc[(model, item), "score"] == 0 == \
        1 - fresh.full.to_long().set_index(["model", "item"]).loc[(model, item), "score"]


def test_the_files_a_benchmark_is_keyed_by_are_every_file_its_load_opens():
    """Every file :func:`load_benchmark` opens for the data of each kind found here is among :func:`data_files`."""
    import sys

    from irtlib import datasets

    opened: list[str] = []
    recording = [False]

    def hook(event, args):
        if recording[0] and event == "open" and isinstance(args[0], (str, Path)):
            opened.append(str(args[0]))

    sys.addaudithook(hook)                               # a hook cannot be removed: it records only when asked
    kinds = set()
    for name in paper.BENCHMARKS:
        for source in ("auto", "simulated"):
            data = datasets.resolve(name, source=source)
            opened.clear()
            recording[0] = True
            try:
                pipeline.load_benchmark(name, source=source)
            finally:
                recording[0] = False
            files = {str(f) for f in pipeline.data_files(data)}
            read = {f for f in opened if not f.endswith((".py", ".pyc", ".so")) and not f.startswith("/proc/")}
            assert read <= files, (name, source, read - files)
            assert read or data.kind == "paper", (name, source)     # (the authors' files are parsed once a process)
            kinds.add(data.kind)
    assert "simulated" in kinds


def test_calibration_is_cached_by_data_settings_and_library(sst, tmp_path, monkeypatch):
    fit = Counter(pipeline.fit_2pl)
    monkeypatch.setattr(pipeline, "fit_2pl", fit)
    first = pipeline.calibrate_benchmark(sst, engine="map", cache_dir=tmp_path)
    again = pipeline.calibrate_benchmark(sst, engine="map", cache_dir=tmp_path)
    assert fit.calls == 1 and again.a.equals(first.a) and again.theta.equals(first.theta)
    # the MAP engine ignores seed and epochs: they are not part of its key
    pipeline.calibrate_benchmark(sst, engine="map", seed=5, epochs=10, cache_dir=tmp_path)
    assert fit.calls == 1
    # other data (another binarization) is another entry
    lenient = pipeline.load_benchmark("simplesafetytests", rule="lenient", source="simulated")
    pipeline.calibrate_benchmark(lenient, engine="map", cache_dir=tmp_path)
    assert fit.calls == 2
    # a change of the library's code invalidates every entry
    monkeypatch.setattr(cache, "library_fingerprint", lambda: "another version of irtlib")
    pipeline.calibrate_benchmark(sst, engine="map", cache_dir=tmp_path)
    assert fit.calls == 3
    # no cache directory: always computed
    pipeline.calibrate_benchmark(sst, engine="map", cache_dir=None)
    assert fit.calls == 4


def test_library_fingerprint_follows_the_computing_sources(tmp_path, monkeypatch):
    """The fingerprint hashes every computing module: editing one changes it."""
    from pathlib import Path

    cache.library_fingerprint.cache_clear()
    before = cache.library_fingerprint()
    real = Path.read_bytes
    import irtlib

    target = Path(irtlib.__file__).resolve().parent / "protocol" / "agreement.py"

    def edited(self):
        data = real(self)
        return data + b"\n# edited\n" if self.resolve() == target else data

    monkeypatch.setattr(Path, "read_bytes", edited)
    cache.library_fingerprint.cache_clear()
    try:
        assert cache.library_fingerprint() != before
    finally:
        monkeypatch.undo()
        cache.library_fingerprint.cache_clear()
    assert cache.library_fingerprint() == before


def test_paper_and_protocol_budgets(sst):
    assert pipeline.paper_budgets("no such benchmark") == []
    sb = pipeline.paper_budgets("safetybench")
    facts = paper.SAFETYBENCH_APPENDIX_F
    assert {paper.TABLE2_LEFT["safetybench"].k, facts["k_small"], facts["random_reaches_090_at_k"]} <= set(sb)
    assert sb == sorted(sb)
    ks = pipeline.protocol_budgets(sst)
    from irtlib.protocol.agreement import budget_grid

    grid = budget_grid(sst.filtered.shape[1])
    assert set(grid) <= set(ks) and ks == sorted(set(ks)) and max(ks) == max(grid)
    assert {k for k in pipeline.paper_budgets("simplesafetytests") if k <= max(grid)} <= set(ks)


def test_protocol_is_cached_and_n_jobs_is_not_part_of_the_key(sst, tmp_path, monkeypatch):
    import irtlib.protocol.agreement

    run = Counter(irtlib.protocol.agreement.run_protocol)
    monkeypatch.setattr(irtlib.protocol.agreement, "run_protocol", run)
    first = pipeline.protocol_benchmark(sst, n_splits=2, ks=[1, 5, 20], cache_dir=tmp_path)
    assert run.calls == 1
    assert set(first["benchmark"]) == {"simplesafetytests"} and first.attrs["n_splits"] == 2
    again = pipeline.protocol_benchmark(sst, n_splits=2, ks=[20, 5, 1], n_jobs=2, cache_dir=tmp_path)
    assert run.calls == 1 and again.equals(first) and again.attrs["ks"] == [1, 5, 20]
    pipeline.protocol_benchmark(sst, n_splits=2, ks=[1, 5, 20], seed=1, cache_dir=tmp_path)
    assert run.calls == 2
    np.testing.assert_array_equal(first["k"].unique(), [1, 5, 20])


# ---------------------------------------------------------------------------- the authors' protocol
def test_authors_budgets_are_their_grid_plus_the_papers(sst):
    from irtlib.protocol import presets as protocols

    wmdp = pipeline.load_benchmark("wmdp-bio", source="simulated")
    for bench in (sst, wmdp):
        n_test, top = protocols.AUTHORS_SIZES[bench.name][1:]
        kept = int((bench.full.item_variance() >= 0.01).sum())          # the code keeps p(1-p) >= 0.01
        assert pipeline.kept_items(bench, protocol="authors") == kept
        assert pipeline.kept_items(bench) == bench.filtered.shape[1]     # the text drops p(1-p) <= 0.01
        grid = np.unique(np.round(np.geomspace(1, min(top, kept), 20)).astype(int)).tolist()
        ks = pipeline.protocol_budgets(bench, protocol="authors")
        extra = {k for k in pipeline.paper_budgets(bench.name) if k <= max(grid)}
        assert ks == sorted(set(grid) | extra)
    # the paper's own grid is unchanged without a protocol
    assert pipeline.protocol_budgets(sst) == pipeline.protocol_budgets(sst, protocol="paper")


REAL = pipeline.datasets.resolve("simplesafetytests").kind == "paper"


@pytest.mark.skipif(not REAL, reason="the authors' released matrices are not available here")
@pytest.mark.parametrize("name", ["anthropic-red-team", "harmbench", "simplesafetytests", "wmdp-bio"])
def test_every_table2_budget_lies_on_the_authors_grid_of_the_real_data(name):
    """Every k of Table 2 lies on the authors' budget grid of the real matrices."""
    from irtlib.protocol import presets as protocols

    bench = pipeline.load_benchmark(name)
    grid = protocols.authors_budget_grid(pipeline.kept_items(bench, protocol="authors"),
                                         max_budget=protocols.AUTHORS_SIZES[name][2])
    assert {paper.TABLE2_LEFT[name].k, paper.TABLE2_RIGHT[name].k} <= set(grid)


def test_protocol_sizes_follow_the_protocol(sst):
    wmdp = pipeline.load_benchmark("wmdp-bio", source="simulated")
    assert pipeline.protocol_sizes(sst) == (100, 10)
    assert pipeline.protocol_sizes(sst, protocol="authors") == (100, 10)
    assert pipeline.protocol_sizes(wmdp, protocol="authors") == (70, 6)
    assert pipeline.protocol_sizes(wmdp, protocol="authors", max_splits=10) == (10, 6)
    assert pipeline.protocol_sizes(wmdp, protocol="authors", n_splits=3, n_test=4, max_splits=10) == (3, 4)


def test_protocol_benchmark_runs_the_named_protocol_and_keys_the_cache_by_it(sst, tmp_path, monkeypatch):
    import irtlib.protocol.agreement
    from irtlib.protocol.agreement import run_protocol  # the original, for the direct run

    run = Counter(irtlib.protocol.agreement.run_protocol)
    monkeypatch.setattr(irtlib.protocol.agreement, "run_protocol", run)
    # (the authors' anchor points need complete responses, which the simulated release does not have)
    methods = ["fluid", "random", "random-irt", "total-fisher", "disco"]
    ours = pipeline.protocol_benchmark(sst, protocol="authors", max_splits=2, ks=[1, 5, 20], cache_dir=tmp_path,
                                       methods=methods)
    direct = run_protocol(sst.full, protocol="authors", benchmark="simplesafetytests", n_splits=2, ks=[1, 5, 20],
                          methods=methods)
    pd.testing.assert_frame_equal(ours.drop(columns="benchmark"), direct)
    assert ours.attrs["protocol"] == "authors" and ours.attrs["n_test"] == 10 and ours.attrs["seed"] == 42
    assert ours.attrs["nan_policy"] == "omit" and ours.attrs["band"] == "se"
    paper_run = pipeline.protocol_benchmark(sst, max_splits=2, ks=[1, 5, 20], cache_dir=tmp_path, methods=methods)
    assert run.calls == 2 and paper_run.attrs["protocol"] == "paper"         # another protocol, another entry
    pipeline.protocol_benchmark(sst, protocol="authors", max_splits=2, ks=[1, 5, 20], cache_dir=tmp_path,
                                methods=methods)
    assert run.calls == 2
    assert not np.allclose(paper_run["agreement"].fillna(9), ours["agreement"].fillna(9))


@pytest.fixture(scope="module")
def complete(sst):
    """The simulated SimpleSafetyTests with its missing cells set to 0 (complete, like the paper's data)."""
    from irtlib import ResponseMatrix

    full = ResponseMatrix(np.nan_to_num(sst.full.values), list(sst.full.models), list(sst.full.items), source="t")
    return pipeline.Benchmark(sst.name, sst.display_name, full, full.filter_variance(), sst.rule, sst.data)


@pytest.mark.parametrize("protocol", ["paper", "authors"])
def test_some_methods_are_read_from_a_stored_run_of_every_method(complete, protocol, tmp_path, monkeypatch):
    """A run of some methods equals, frame and attrs, the rows a stored run of every method holds for them."""
    import irtlib.protocol.agreement

    settings = dict(protocol=protocol, max_splits=3, ks=[1, 5, 20, 40])
    alone = {tuple(m): pipeline.protocol_benchmark(complete, methods=m, n_jobs=2, cache_dir=None, **settings)
             for m in (["fluid", "random", "random-irt"], ["marginal-fisher-bq"], ["anchor-points", "disco"],
                       ["total-fisher", "fluid"], ["random-irt"])}
    run = Counter(irtlib.protocol.agreement.run_protocol)
    monkeypatch.setattr(irtlib.protocol.agreement, "run_protocol", run)
    some = ["fluid", "random", "random-irt"]
    before = pipeline.protocol_benchmark(complete, methods=some, cache_dir=tmp_path / "other", **settings)
    assert run.calls == 1 and before.equals(alone[tuple(some)])      # no run of every method stored: computed
    whole = pipeline.protocol_benchmark(complete, cache_dir=tmp_path, **settings)
    assert run.calls == 2
    for methods, expected in alone.items():
        read = pipeline.protocol_benchmark(complete, methods=list(methods), cache_dir=tmp_path, **settings)
        assert run.calls == 2                                           # read, not run
        assert read.equals(expected) and read.attrs["methods"] == expected.attrs["methods"] == list(methods)
        assert {k: v for k, v in read.attrs.items() if k not in ("methods", "seconds", "split_batch")} == \
            {k: v for k, v in expected.attrs.items() if k not in ("methods", "seconds", "split_batch")}
    assert whole.attrs["methods"] == list(irtlib.protocol.agreement.METHODS)    # the stored run is left as it was


def small_protocol(name: str, bench, n_splits: int = 4, **rules):
    """The named protocol with fewer splits of its own (and other ``rules``), so that its whole run is quick."""
    from dataclasses import replace

    from irtlib.protocol import presets as protocols

    return replace(protocols.get(name, benchmark=bench.name), n_splits=n_splits, **rules)


@pytest.mark.parametrize("protocol", ["paper", "authors"])
def test_the_first_splits_of_some_methods_are_read_from_the_protocols_stored_run(complete, protocol, tmp_path,
                                                                                 monkeypatch):
    """Fewer splits (and, for the path methods, fewer budgets) equal the rows of the protocol's stored run."""
    import irtlib.protocol.agreement

    proto = small_protocol(protocol, complete, engine="map")      # the authors' split and order rules, a quick fit
    grid = pipeline.default_budgets(complete, protocol=proto)
    assert set(grid) < set(pipeline.protocol_budgets(complete, protocol=proto))    # the stored run has more budgets
    cases = [dict(methods=["fluid", "random"], n_splits=2, ks=grid),
             dict(methods=["random-irt"], n_splits=3, ks=grid[:5]),
             dict(methods=["fluid", "random"], n_splits=4, ks=grid[3:]),
             dict(methods=None, n_splits=2, ks=pipeline.protocol_budgets(complete, protocol=proto))]
    alone = [pipeline.protocol_benchmark(complete, protocol=proto, cache_dir=None, **case) for case in cases]
    run = Counter(irtlib.protocol.agreement.run_protocol)
    monkeypatch.setattr(irtlib.protocol.agreement, "run_protocol", run)
    pipeline.protocol_benchmark(complete, protocol=proto, n_jobs=2, cache_dir=tmp_path)    # the protocol's own run
    assert run.calls == 1
    for case, expected in zip(cases, alone, strict=True):
        read = pipeline.protocol_benchmark(complete, protocol=proto, cache_dir=tmp_path, **case)
        assert run.calls == 1                                           # read, not run
        assert read.equals(expected)
        assert {k: v for k, v in read.attrs.items() if k not in ("seconds", "split_batch")} == \
            {k: v for k, v in expected.attrs.items() if k not in ("seconds", "split_batch")}
    # a static method's rows at other budgets are computed (its subsets may follow the budgets), as is a larger run
    pipeline.protocol_benchmark(complete, protocol=proto, cache_dir=tmp_path, methods=["anchor-points"], n_splits=2,
                                ks=grid)
    pipeline.protocol_benchmark(complete, protocol=small_protocol(protocol, complete, 5, engine="map"),
                                cache_dir=tmp_path,
                                methods=["fluid"], n_splits=5, ks=grid)
    assert run.calls == 3


def test_a_benchmark_profile_reads_the_protocols_stored_run_and_equals_one_computed(complete, tmp_path, monkeypatch):
    """Chapter 8's profile of a benchmark is the same whether its Fluid and Random runs are read or computed."""
    import irtlib.protocol.agreement
    from irtbook import release_check

    proto = small_protocol("paper", complete)
    settings = dict(n_splits=3, n_test=10, seed=0, k=20, engine="map", protocol=proto)
    computed = release_check.benchmark_profile(complete, cache_dir=None, **settings)
    pipeline.protocol_benchmark(complete, protocol=proto, cache_dir=tmp_path)
    run = Counter(irtlib.protocol.agreement.run_protocol)
    monkeypatch.setattr(irtlib.protocol.agreement, "run_protocol", run)
    read = release_check.benchmark_profile(complete, cache_dir=tmp_path, **settings)
    assert run.calls == 0
    assert read.keys() == computed.keys()
    assert all(np.array_equal(read[q], computed[q], equal_nan=True) for q in computed)
    # the whole fit it reads (the stage's calibrate_benchmark with the MAP engine) is fit_2pl's
    from irtlib import fit_2pl

    whole, direct_fit = pipeline.calibrate_benchmark(complete, engine="map"), fit_2pl(complete.filtered, engine="map")
    assert whole.theta.equals(direct_fit.theta) and whole.a.equals(direct_fit.a) and whole.b.equals(direct_fit.b)
    # and the profile computed through the pipeline is the one run_protocol's own budgets give
    res = irtlib.protocol.agreement.run_protocol(complete.full, methods=["fluid", "random"], n_splits=3, n_test=10,
                                                 seed=0, engine="map", protocol=proto)
    direct = pipeline.protocol_benchmark(complete, methods=["fluid", "random"], n_splits=3, n_test=10, seed=0,
                                         ks=pipeline.default_budgets(complete, protocol=proto), protocol=proto)
    assert res.attrs["ks"] == direct.attrs["ks"] and res.drop(columns=[]).equals(direct.drop(columns=["benchmark"]))


@pytest.mark.parametrize("protocol", ["paper", "authors"])
def test_the_ceiling_is_random_irt_with_every_item_on_the_same_splits(complete, protocol, tmp_path):
    """With every kept item, Random IRT scores the test models by MAP on all items: the ceiling."""
    from irtbook.ceiling import ceiling_benchmark
    from irtlib import map_ability
    from irtlib.protocol import presets as protocols
    from irtlib.protocol.agreement import calibrate_splits, calibration_seed, run_protocol, spearman, split_models

    sst = complete
    proto = protocols.get(protocol, benchmark=sst.name)
    n = pipeline.kept_items(sst, protocol=protocol)
    ceiling = ceiling_benchmark(sst, protocol=protocol, max_splits=3, cache_dir=tmp_path)
    run = run_protocol(sst.full, protocol=protocol, benchmark=sst.name, n_splits=3, ks=[n], methods=["random-irt"])
    assert ceiling.attrs["protocol"] == protocol
    var = sst.full.item_variance()
    kept = sst.full.subset(items=[i for i, v in var.items() if (v >= 0.01 if protocol == "authors" else v > 0.01)])
    reference = (kept if protocol == "authors" else sst.full).safety_scores().to_numpy()
    untied = 0
    for split in range(3):    # by hand: the protocol's split rule, calibration seed and reference
        train, test = split_models(sst.full.shape[0], 10, proto.seed, split, rule=proto.split_rule)
        seed = calibration_seed(proto.seed, split) if proto.calibration_seed == "stream" else 0
        (a, b), = calibrate_splits(kept.values, [train], engine=proto.engine, seed=[seed])   # the protocol's engine
        theta = np.asarray(map_ability(kept.values[test], a, b).theta)
        assert abs(spearman(theta, reference[test]) - ceiling.iloc[split]) < 1e-12
        # Random IRT with every item is the same MAP; tied abilities may break either way in another item order
        if np.diff(np.sort(theta)).min() > 1e-9:
            untied += 1
            assert abs(run["agreement"].iloc[split] - ceiling.iloc[split]) < 1e-9
    assert untied >= 1


def test_book_protocol_swaps_only_the_fresh_anchor_rule_on_large_banks(sst):
    from irtlib.protocol import presets as protocols

    wmdp = pipeline.load_benchmark("wmdp-bio", source="simulated")
    kept = pipeline.kept_items(wmdp, protocol="authors")
    assert pipeline.book_protocol(wmdp, "authors") == protocols.get("authors", benchmark="wmdp-bio")
    same = pipeline.book_protocol(wmdp, "authors", fresh_anchor_max_items=kept)          # not more than the cap
    assert same.anchor_rule == "fresh"
    fast = pipeline.book_protocol(wmdp, "authors", fresh_anchor_max_items=kept - 1)
    assert fast.anchor_rule == "path"
    rest = {k: v for k, v in fast.settings().items() if k != "anchor_rule"}
    assert rest == {k: v for k, v in same.settings().items() if k != "anchor_rule"}
    # the paper's protocol already runs the path
    assert pipeline.book_protocol(sst, "paper", fresh_anchor_max_items=1) == protocols.get("paper", benchmark=sst.name)


def test_missing_responses_move_the_authors_anchor_points_to_the_path_with_a_reason():
    # the authors' distances (numpy.corrcoef) need complete responses; the simulated release has missing cells
    from dataclasses import replace

    from irtlib.protocol.agreement import run_protocol

    wmdp = pipeline.load_benchmark("wmdp-bio", source="simulated")
    assert pipeline.anchor_path_reason(wmdp, "authors") is None
    values = wmdp.full.values.copy()
    kept = np.flatnonzero(wmdp.full.item_variance().to_numpy() >= 0.01)
    values[3, kept[:5]] = np.nan
    gappy = replace(wmdp, full=type(wmdp.full)(values, wmdp.full.models, wmdp.full.items, source="gappy"))
    assert pipeline.anchor_path_reason(gappy, "authors") == "missing"
    assert pipeline.book_protocol(gappy, "authors").anchor_rule == "path"
    assert pipeline.anchor_path_reason(gappy, "authors", fresh_anchor_max_items=10) == "size"
    assert pipeline.anchor_path_reason(gappy, "paper") is None                 # the text's rule is the path already
    # a missing cell among the dropped items changes nothing
    dropped = np.flatnonzero(wmdp.full.item_variance().to_numpy() < 0.01)
    if dropped.size:
        values = wmdp.full.values.copy()
        values[3, dropped[0]] = np.nan
        only_dropped = replace(wmdp, full=type(wmdp.full)(values, wmdp.full.models, wmdp.full.items, source="x"))
        assert pipeline.anchor_path_reason(only_dropped, "authors") is None
    # the authors' rule refuses the gaps; the book's protocol runs
    kw = dict(methods=["anchor-points"], ks=[1, 3], n_splits=1, benchmark="wmdp-bio")
    with pytest.raises(Exception, match="complete training responses"):
        run_protocol(gappy.full, protocol="authors", **kw)
    assert run_protocol(gappy.full, protocol=pipeline.book_protocol(gappy, "authors"), **kw)["agreement"].notna().all()


def test_chapter_epochs_shortens_the_py_irt_runs_only_in_a_quick_build():
    assert pipeline.chapter_epochs("pyirt-authors", 1000, quick=False) == 1000     # the paper's protocol
    assert pipeline.chapter_epochs("pyirt-authors", 1000, quick=True) == pipeline.QUICK_AUTHORS_EPOCHS < 1000
    assert pipeline.chapter_epochs("pyirt", 1000, quick=True) == pipeline.QUICK_PYIRT_EPOCHS
    assert pipeline.chapter_epochs("pyirt", 1000, quick=False) == 1000
    assert pipeline.chapter_epochs("pyirt", 50, quick=True) == 50
    assert pipeline.chapter_epochs("map", 1000, quick=True) == 1000
    assert set(pipeline.CHAPTER_ENGINES) == {"pyirt-authors", "pyirt", "map"}


def test_chapter_engine_renames_only_the_authors_calibration_of_a_quick_build():
    from irtbook.authors_engine import parse_engine
    from irtlib.protocol import presets as protocols
    from irtlib.protocol.agreement import CALIBRATION_ENGINES

    assert pipeline.chapter_engine("pyirt-authors", quick=False) == "pyirt-authors"
    assert pipeline.chapter_engine("map", quick=True) == "map"
    assert pipeline.chapter_engine(None, quick=True) is None
    quick = pipeline.chapter_engine("pyirt-authors", quick=True)
    assert parse_engine(quick) == ("pyirt-authors", pipeline.QUICK_AUTHORS_EPOCHS) and quick in CALIBRATION_ENGINES
    authors = protocols.resolve("authors", benchmark="harmbench")
    assert pipeline.chapter_protocol(authors, quick=False) is authors
    renamed = pipeline.chapter_protocol(authors, quick=True)
    assert renamed.engine == quick and renamed.settings() != authors.settings()       # the epochs in every key
    assert {k: v for k, v in renamed.settings().items() if k != "engine"} == \
        {k: v for k, v in authors.settings().items() if k != "engine"}
    paper = protocols.resolve("paper", benchmark="harmbench")
    assert pipeline.chapter_protocol(paper, quick=True) is paper                     # the MAP engine has no epochs


def test_calibrate_matrix_is_calibrate_benchmark_uncached(sst, tmp_path):
    on_bench = pipeline.calibrate_benchmark(sst, engine="map", cache_dir=tmp_path)
    on_matrix = pipeline.calibrate_matrix(sst.filtered, engine="map")
    pd.testing.assert_series_equal(on_bench.a, on_matrix.a)
    authors = pipeline.calibrate_matrix(sst.filtered.subset(items=list(sst.filtered.items[:20])), epochs=5)
    assert authors.engine == "pyirt-authors" and authors.settings["epochs"] == 5 and authors.a.size == 20


def test_the_text_priors_engine_is_py_irt_itself_to_float_rounding(sst):
    """engine="pyirt" (batched, priors="paper") gives irtlib.fit_2pl(engine="pyirt")'s py-irt parameters."""
    pytest.importorskip("pyro")
    from irtlib import fit_2pl

    sub = sst.filtered.subset(models=list(sst.filtered.models[:30]), items=list(sst.filtered.items[:25]))
    batched = pipeline.calibrate_matrix(sub, engine="pyirt", seed=1, epochs=120)
    py_irt = fit_2pl(sub, engine="pyirt", seed=1, epochs=120)
    assert batched.engine == "pyirt" and batched.settings["priors"] == "paper" and batched.settings["batched"]
    assert batched.settings["lr_decay"] == 1.0 and batched.settings["best"] is False
    for name in ("a", "b", "theta"):
        got, want = getattr(batched, name), getattr(py_irt, name)
        assert got.index.equals(want.index)
        assert np.abs(got.to_numpy() - want.to_numpy()).max() < 1e-5, name     # measured about 2e-7
