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
