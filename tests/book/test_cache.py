import numpy as np

from irtbook.cache import array_checksum, cached


def test_cached_computes_once_per_key(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"x": np.arange(3)}

    first = cached(compute, key=("a", 1), cache_dir=tmp_path)
    second = cached(compute, key=("a", 1), cache_dir=tmp_path)
    cached(compute, key=("a", 2), cache_dir=tmp_path)
    assert len(calls) == 2
    np.testing.assert_array_equal(first["x"], second["x"])
    assert not list(tmp_path.glob("*.tmp"))


def test_damaged_entry_is_recomputed(tmp_path):
    cached(lambda: 1, key="k", cache_dir=tmp_path)
    (entry,) = tmp_path.glob("*.pkl")
    entry.write_bytes(b"garbage")
    assert cached(lambda: 2, key="k", cache_dir=tmp_path) == 2


def test_no_cache_dir_always_computes():
    assert cached(lambda: 5, key="k", cache_dir=None) == 5


def test_array_checksum_distinguishes_nan_positions_and_shapes():
    a = np.array([[1.0, np.nan], [0.0, 1.0]])
    b = np.array([[1.0, 0.0], [np.nan, 1.0]])
    assert array_checksum(a) == array_checksum(a.copy())
    assert array_checksum(a) != array_checksum(b)
    assert array_checksum(a) != array_checksum(a.reshape(1, 4))


def test_presentation_is_a_rule_not_a_list():
    """Everything under viz/ and every module that declares ``__presentation__ = True``, nothing else."""
    import importlib
    from pathlib import Path

    from irtbook import cache

    found = cache.presentation_modules()
    assert {"viz/figures.py", "viz/fit_figures.py", "viz/report.py", "datasets/paper.py",
            "book/compare.py", "book/scorecard.py", "book/table2.py", "book/reproducibility.py"} <= set(found)
    import irtlib

    cli = Path(irtlib.__file__).resolve().parent / "cli"             # the command line, every module of it
    assert {f"cli/{p.name}" for p in cli.glob("*.py") if p.name != "__main__.py"} <= set(found)
    for rel in found:                       # the marker is the module's own attribute, not a stray line
        if not rel.startswith("viz/"):
            name = rel.removesuffix(".py").replace("/", ".")
            module = importlib.import_module("irtbook." + name[5:] if name.startswith("book.") else "irtlib." + name)
            assert module.__presentation__ is True, rel
    assert cache.is_presentation("viz/anything_new.py", "")
    assert not cache.is_presentation("core/kernels.py", "def f():\n    __presentation__ = True\n")
    assert not cache.is_presentation("core/kernels.py", "# __presentation__ = True\n")


def test_no_module_the_cached_computations_run_is_presentation():
    """The modules a cached fit or protocol run executes (all that ``import irtlib`` loads, py-irt's
    engine and the extended models) all count in the fingerprint."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    import irtlib
    from irtbook import cache

    code = ("import sys, json, irtlib, irtlib.calibration.pyirt_batch, irtlib.extended.grm, irtlib.extended.mirt; "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('irtlib'))))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                       timeout=300).stdout)
    root = Path(irtlib.__file__).resolve().parent
    paths = set()
    for name in loaded:
        rel = Path(*name.split(".")[1:])
        paths.add((rel / "__init__.py").as_posix() if (root / rel).is_dir() else f"{rel.as_posix()}.py")
    assert "calibration/joint_map.py" in paths and "protocol/agreement.py" in paths
    assert sorted(paths & set(cache.presentation_modules())) == []


def test_presentation_modules_stay_out_of_the_fingerprint(tmp_path, monkeypatch):
    """Editing a presentation module (by the package rule or by the marker) leaves the fingerprint
    unchanged; editing a computing one, or marking it, changes it only as it should."""
    import shutil
    from pathlib import Path

    import irtlib
    from irtbook import cache

    copy = tmp_path / "irtlib"
    shutil.copytree(Path(irtlib.__file__).resolve().parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    book = tmp_path / "irtbook"
    shutil.copytree(Path(cache.__file__).resolve().parent, book, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(cache, "source_roots", lambda: (("", copy), ("book/", book)))

    def fingerprint():
        cache.library_fingerprint.cache_clear()
        return cache.library_fingerprint()

    def append(rel, text):
        path = book / rel.removeprefix("book/") if rel.startswith("book/") else copy / rel
        path.write_text(path.read_text() + text)

    before = fingerprint()
    append("viz/figures.py", "\n# edited\n")                  # by the package rule
    append("book/table2.py", "\n# edited\n")                  # by the marker
    assert fingerprint() == before
    (copy / "viz" / "new_figure.py").write_text("X = 1\n")     # a new presentation module
    assert fingerprint() == before
    append("core/ability.py", "\n# edited\n")
    changed = fingerprint()
    assert changed != before
    append("protocol/savings.py", "\n__presentation__ = True\n")  # marking a module takes it out
    marked = fingerprint()
    assert marked != changed
    append("selection/_exact_information.h", "\n/* edited */\n")   # a C kernel's header computes too
    assert fingerprint() != marked
    cache.library_fingerprint.cache_clear()


def test_entries_use_the_one_atomic_writer(tmp_path, monkeypatch):
    """Entries get the umask's permissions (not mkstemp's 0600) and a failed write leaves nothing."""
    import os
    import pickle

    from irtbook import cache

    old = os.umask(0o022)
    try:
        cache.cached(lambda: {"x": 1}, key="perm", cache_dir=tmp_path)
    finally:
        os.umask(old)
    (entry,) = tmp_path.glob("*.pkl")
    assert entry.stat().st_mode & 0o777 == 0o644
    assert pickle.loads(entry.read_bytes()) == {"x": 1}

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    try:
        cache.cached(lambda: 2, key="full disk", cache_dir=tmp_path)
    except OSError:
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == [entry.name]     # no temporary left behind


def test_cached_call_reuses_the_entry_for_equal_content_and_recomputes_on_a_change(tmp_path):
    import pickle

    from irtbook.cache import cached_call
    from irtbook.primer import test_information

    theta, a, b = np.linspace(-2, 2, 5), np.array([1.0, 2.0]), np.array([0.0, 0.5])
    first = cached_call(test_information, theta, a, b, cache_dir=tmp_path)
    np.testing.assert_array_equal(first, test_information(theta, a, b))
    (entry,) = tmp_path.glob("*.pkl")
    entry.write_bytes(pickle.dumps("stored"))            # a later equal call must read this entry
    assert cached_call(test_information, theta.copy(), a.copy(), b.copy(), cache_dir=tmp_path) == "stored"
    changed = cached_call(test_information, theta, a, b + 0.25, cache_dir=tmp_path)
    np.testing.assert_array_equal(changed, test_information(theta, a, b + 0.25))
    assert len(list(tmp_path.glob("*.pkl"))) == 2


def test_content_key_tells_labels_apart_and_refuses_what_it_cannot_key():
    import pandas as pd
    import pytest

    from irtbook.cache import cached_call, content_key
    from irtlib.core.responses import ResponseMatrix

    values = np.array([[1.0, 0.0], [np.nan, 1.0]])
    m = ResponseMatrix(values, ["m1", "m2"], ["i1", "i2"])
    built = ["".join(("m", str(k))) for k in (1, 2)]        # equal labels, other string objects
    assert content_key(m) == content_key(ResponseMatrix(values.copy(), built, ["i1", "i2"]))
    assert content_key(pd.Series([1.0], index=["x"])) == content_key(pd.Series([1.0], index=["".join("x")]))
    assert content_key(m) != content_key(ResponseMatrix(values, ["m1", "m2"], ["i1", "i3"]))
    s = pd.Series([1.0, 2.0], index=["x", "y"])
    assert content_key(s) != content_key(pd.Series([1.0, 2.0], index=["x", "z"]))
    assert content_key({"k": [1, 2.5]}) == content_key({"k": [1, 2.5]}) != content_key({"k": (1, 2.5)})
    with pytest.raises(TypeError, match="cannot key a cache entry on a object"):
        content_key(object())
    with pytest.raises(ValueError, match="not irtlib's or irtbook's"):
        cached_call(np.sum, values, cache_dir=None)


def test_content_key_of_a_benchmark_follows_its_data_and_rule():
    from irtbook.cache import content_key
    from irtbook.pipeline import Benchmark
    from irtlib.core.responses import ResponseMatrix

    values = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    full = ResponseMatrix(values, ["m1", "m2"], ["i1", "i2", "i3"])

    def bench(v, rule="strict"):
        m = ResponseMatrix(v, ["m1", "m2"], ["i1", "i2", "i3"])
        return Benchmark(name="b", display_name="B", full=m, filtered=m, rule=rule)

    assert content_key(bench(values)) == content_key(Benchmark(name="b", display_name="Other name", full=full,
                                                               filtered=full, rule="strict"))
    assert content_key(bench(values)) != content_key(bench(values, rule="lenient"))
    changed = values.copy()
    changed[0, 0] = 0.0
    assert content_key(bench(values)) != content_key(bench(changed))


def test_cached_call_returns_the_seconds_of_the_run_that_computed_the_result(tmp_path):
    import pickle

    from irtbook.cache import cached_call
    from irtbook.primer import test_information

    theta, a, b = np.linspace(-2, 2, 5), np.array([1.0, 2.0]), np.array([0.0, 0.5])
    value, seconds = cached_call(test_information, theta, a, b, cache_dir=tmp_path, return_seconds=True)
    np.testing.assert_array_equal(value, test_information(theta, a, b))
    assert seconds >= 0.0
    (entry,) = tmp_path.glob("*.pkl")
    entry.write_bytes(pickle.dumps(("stored", 12.5)))      # a later call reads the stored time, not its own
    assert cached_call(test_information, theta, a, b, cache_dir=tmp_path, return_seconds=True) == ("stored", 12.5)
    plain = cached_call(test_information, theta, a, b, cache_dir=tmp_path)   # its own entry: no seconds
    np.testing.assert_array_equal(plain, test_information(theta, a, b))
    assert len(list(tmp_path.glob("*.pkl"))) == 2
