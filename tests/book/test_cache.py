import numpy as np

from irtlib.book.cache import array_checksum, cached


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


def test_presentation_modules_exist_and_stay_out_of_the_fingerprint(tmp_path, monkeypatch):
    """Every module named as presentation-only exists (a rename must not silently re-enter the
    fingerprint), and editing one leaves the fingerprint unchanged while editing a computing one
    changes it."""
    import shutil
    from pathlib import Path

    import irtlib
    from irtlib.book import cache

    root = Path(irtlib.__file__).resolve().parent
    for rel in cache.PRESENTATION:
        assert (root / rel).is_file(), rel
    copy = tmp_path / "irtlib"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(cache, "__file__", str(copy / "book" / "cache.py"))

    def fingerprint():
        cache.library_fingerprint.cache_clear()
        return cache.library_fingerprint()

    before = fingerprint()
    (copy / "viz" / "figures.py").write_text((copy / "viz" / "figures.py").read_text() + "\n# edited\n")
    assert fingerprint() == before
    (copy / "core" / "ability.py").write_text((copy / "core" / "ability.py").read_text() + "\n# edited\n")
    assert fingerprint() != before
    cache.library_fingerprint.cache_clear()


def test_entries_use_the_one_atomic_writer(tmp_path, monkeypatch):
    """Entries get the umask's permissions (not mkstemp's 0600) and a failed write leaves nothing."""
    import os
    import pickle

    from irtlib.book import cache

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
