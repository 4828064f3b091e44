"""irtlib.calibration.split_cache: each split's batched py-irt fit cached on disk by content."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from irtlib.calibration import pyirt_batch, split_cache  # noqa: E402
from irtlib.calibration.split_cache import fit_2pl_splits_cached, split_keys  # noqa: E402
from irtlib.errors import InputError  # noqa: E402

EPOCHS = 20


@pytest.fixture
def data():
    rng = np.random.default_rng(3)
    x = (rng.random((30, 12)) < 0.6).astype(float)
    x[4, 2] = np.nan
    rows = [np.arange(0, 20), np.arange(5, 25), np.arange(10, 30), np.arange(0, 30, 2)]
    return x, rows


@pytest.fixture
def fits(monkeypatch):
    """Counts the splits handed to the batched fit (the real one runs)."""
    calls = []
    real = pyirt_batch.fit_2pl_splits

    def counting(values, train_rows, **kw):
        calls.append(len(train_rows))
        return real(values, train_rows, **kw)

    monkeypatch.setattr(pyirt_batch, "fit_2pl_splits", counting)
    return calls


def same(first, second):
    return all(np.array_equal(a1, a2) and np.array_equal(b1, b2) for (a1, b1), (a2, b2) in
               zip(first, second, strict=True))


def test_a_hit_returns_the_same_arrays_without_fitting(tmp_path, data, fits):
    x, rows = data
    first = fit_2pl_splits_cached(x, rows, cache_dir=tmp_path, epochs=EPOCHS)
    assert fits == [4] and len(list(tmp_path.glob("*.npz"))) == 4
    second = fit_2pl_splits_cached(x, rows, cache_dir=tmp_path, epochs=EPOCHS)
    assert fits == [4] and same(first, second)
    assert same(first, pyirt_batch.fit_2pl_splits(x, rows, epochs=EPOCHS))


def test_more_fewer_or_reordered_splits_reuse_the_entries(tmp_path, data, fits):
    x, rows = data
    two = fit_2pl_splits_cached(x, rows[:2], cache_dir=tmp_path, epochs=EPOCHS)
    four = fit_2pl_splits_cached(x, rows, cache_dir=tmp_path, epochs=EPOCHS)
    assert fits == [2, 2]                                        # only the two new splits were fitted
    assert same(two, four[:2])
    back = fit_2pl_splits_cached(x, [rows[3], rows[1]], cache_dir=tmp_path, epochs=EPOCHS)
    assert fits == [2, 2] and same(back, [four[3], four[1]])


def test_one_seed_per_split_shares_a_batch_and_the_one_seed_entries(tmp_path, data, fits):
    """Splits of different seeds in one batched fit: each is its one-seed fit, under its one-seed key."""
    x, rows = data
    seeds = [3, 0, 3, 7]
    mixed = fit_2pl_splits_cached(x, rows, cache_dir=tmp_path, epochs=EPOCHS, seed=seeds)
    assert fits == [4]                                           # one batch for the three seeds
    for s, seed in enumerate(seeds):
        alone = pyirt_batch.fit_2pl_splits(x, [rows[s]], epochs=EPOCHS, seed=seed)
        assert same([mixed[s]], alone), s
        assert split_cache.missing_splits(x, [rows[s]], cache_dir=tmp_path, epochs=EPOCHS, seed=seed) == 0
    assert same(fit_2pl_splits_cached(x, rows[:1], cache_dir=tmp_path, epochs=EPOCHS, seed=3), mixed[:1])
    assert fits == [4, 1, 1, 1, 1]                               # only the direct fits above; the cache hit none
    assert split_cache.missing_splits(x, rows[:1], cache_dir=tmp_path, epochs=EPOCHS, seed=1) == 1
    with pytest.raises(InputError, match="3 seeds for 4 splits"):
        fit_2pl_splits_cached(x, rows, cache_dir=tmp_path, epochs=EPOCHS, seed=[1, 2, 3])


def test_a_changed_setting_or_training_cell_misses(tmp_path, data, fits):
    x, rows = data
    base = fit_2pl_splits_cached(x, rows, cache_dir=tmp_path, epochs=EPOCHS)
    fit_2pl_splits_cached(x, rows, cache_dir=tmp_path, epochs=EPOCHS, seed=1)
    fit_2pl_splits_cached(x, rows, cache_dir=tmp_path, epochs=EPOCHS, best=False)
    assert fits == [4, 4, 4]
    changed = x.copy()
    changed[26, 0] = 1 - changed[26, 0]          # row 26 trains splits 2 and 3 (not 0 or 1)
    again = fit_2pl_splits_cached(changed, rows, cache_dir=tmp_path, epochs=EPOCHS)
    assert fits == [4, 4, 4, 2] and same(again[:2], base[:2])
    missing = x.copy()
    missing[2, 1] = np.nan                       # a cell that becomes missing is a change too
    fit_2pl_splits_cached(missing, rows, cache_dir=tmp_path, epochs=EPOCHS)
    assert fits[-1] == 2                          # row 2: splits 0 and 3


def test_keys_follow_the_block_not_its_row_numbers(data):
    x, rows = data
    moved = np.vstack([x[25:], x[:25]])           # the same models stored in another order
    assert split_keys(x, [np.arange(25, 30)], epochs=1) == split_keys(moved, [np.arange(0, 5)], epochs=1)
    assert split_keys(x, rows[:1], epochs=1) != split_keys(x, rows[:1], epochs=2)
    assert len(set(split_keys(x, rows, epochs=1))) == 4


def test_a_corrupt_entry_is_refitted_with_a_warning(tmp_path, data, fits):
    x, rows = data
    base = fit_2pl_splits_cached(x, rows, cache_dir=tmp_path, epochs=EPOCHS)
    keys = split_keys(x, rows, epochs=EPOCHS, lr=0.1, lr_decay=0.9999, seed=0, best=True, threads=1)
    (tmp_path / f"{keys[1]}.npz").write_bytes(b"not a zip file")
    other = tmp_path / f"{keys[2]}.npz"
    other.write_bytes((tmp_path / f"{keys[0]}.npz").read_bytes())     # a readable entry under the wrong name
    with pytest.warns(UserWarning, match="unreadable") as caught:
        again = fit_2pl_splits_cached(x, rows, cache_dir=tmp_path, epochs=EPOCHS)
    assert len(caught) == 2 and fits == [4, 2] and same(again, base)
    fit_2pl_splits_cached(x, rows, cache_dir=tmp_path, epochs=EPOCHS)   # rewritten: hits again
    assert fits == [4, 2]


def test_no_cache_dir_fits_every_time(tmp_path, data, fits):
    x, rows = data
    fit_2pl_splits_cached(x, rows[:2], cache_dir=None, epochs=EPOCHS)
    fit_2pl_splits_cached(x, rows[:2], cache_dir=None, epochs=EPOCHS)
    assert fits == [2, 2] and not list(tmp_path.iterdir())


def test_bad_input_is_named_before_the_cache_is_touched(tmp_path, data):
    x, rows = data
    with pytest.raises(InputError, match="epochs must be"):
        fit_2pl_splits_cached(x, rows, cache_dir=tmp_path / "new", epochs=0)
    with pytest.raises(InputError, match="repeats a row"):
        fit_2pl_splits_cached(x, [np.array([1, 1, 2])], cache_dir=tmp_path / "new")
    assert not (tmp_path / "new").exists()


def test_the_fingerprint_names_the_code(monkeypatch):
    from irtlib.calibration import fused_kernel

    fingerprint = split_cache.code_fingerprint()
    assert set(fingerprint) == {"irtlib", "pyirt_batch", "torch", "likelihood"}
    assert len(fingerprint["pyirt_batch"]) == 64
    assert fingerprint["likelihood"] == fused_kernel.kernel_fingerprint()       # this machine compiles the kernel
    monkeypatch.setattr(fused_kernel, "_LOADED", {"lib": None})               # where it cannot: another key
    assert split_cache.code_fingerprint()["likelihood"] == "torch"


def test_the_keys_are_the_blocks_float64_bytes_with_one_nan_pattern(data):
    """split_keys hashes each block as before: its float64 bytes, every NaN as numpy's, whether it has NaN or not."""
    import hashlib
    import json

    x, rows = data
    x = x.copy()
    x[7, 3] = np.frombuffer(np.array([0x7FF8000000000001], dtype=np.uint64).tobytes())[0]   # another NaN's bits
    settings = {"epochs": EPOCHS, "seed": 0}
    common = hashlib.sha256(json.dumps({"format": split_cache.ENTRY_FORMAT, "code": split_cache.code_fingerprint(),
                                        "settings": settings}, sort_keys=True).encode())
    expected = []
    for r in rows + [np.arange(10, 20)]:                             # the last block has no NaN
        block = np.where(np.isnan(x[r]), np.nan, x[r])
        digest = common.copy()
        digest.update(repr(block.shape).encode() + b"\0" + np.ascontiguousarray(block).tobytes())
        expected.append(digest.hexdigest())
    assert split_keys(x, rows + [np.arange(10, 20)], **settings) == expected


def test_reading_every_split_of_the_whole_matrix_gives_the_stacked_fits_or_none(tmp_path, data, fits):
    """read_splits_cached reads, from the matrix and each split's rows, the entries a fit of the stacked rows wrote."""
    x, rows = data
    assert split_cache.read_splits_cached(x, rows, cache_dir=tmp_path, epochs=EPOCHS) is None     # nothing yet
    stacked = x[np.concatenate(rows)]
    starts = np.cumsum([0] + [r.size for r in rows])
    blocks = [np.arange(starts[i], starts[i + 1]) for i in range(len(rows))]
    first = fit_2pl_splits_cached(stacked, blocks[:3], cache_dir=tmp_path, epochs=EPOCHS)
    assert split_cache.read_splits_cached(x, rows, cache_dir=tmp_path, epochs=EPOCHS) is None     # one missing
    assert split_cache.read_splits_cached(x, rows[:3], cache_dir=tmp_path, epochs=EPOCHS, seed=1) is None
    read = split_cache.read_splits_cached(x, rows[:3], cache_dir=tmp_path, epochs=EPOCHS)
    assert fits == [3] and same(read, first)
    bad = next(tmp_path.glob("*.npz"))
    bad.write_bytes(b"not an entry")
    assert split_cache.read_splits_cached(x, rows[:3], cache_dir=tmp_path, epochs=EPOCHS) is None  # left to the fit
