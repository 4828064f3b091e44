"""irtbook.pipeline.Benchmark.checksum: computed once for read-only matrices, the same as hashing them again."""

from __future__ import annotations

import pickle

import numpy as np

from irtbook.cache import array_checksum
from irtbook.pipeline import Benchmark
from irtlib.core.responses import ResponseMatrix


def _bench():
    values = np.random.default_rng(0).integers(0, 2, (12, 9)).astype(float)
    values[0, 0] = np.nan
    full = ResponseMatrix(values, [f"m{i}" for i in range(12)], [f"i{j}" for j in range(9)])
    return Benchmark("x", "X", full, full.filter_variance(0.01), "binary")


def test_benchmark_checksum_is_the_matrices_sha256_and_is_kept():
    bench = _bench()
    first = bench.checksum
    assert first == array_checksum(bench.full.values, bench.filtered.values)
    assert bench.checksum is first                                   # kept, not hashed again
    again = pickle.loads(pickle.dumps(bench))
    assert again.checksum == first and again.content_key() == bench.content_key()
    assert again == bench                                            # equality still by the fields only


def test_unpickled_matrices_are_read_only_and_writable_ones_are_hashed_every_time():
    bench = pickle.loads(pickle.dumps(_bench()))
    assert not bench.full.values.flags.writeable and not bench.filtered.values.flags.writeable
    bench.full.values.setflags(write=True)                           # someone made it writable: no keeping
    first = bench.checksum
    bench.full.values[1, 1] = 1.0 - bench.full.values[1, 1]
    assert bench.checksum != first
    assert bench.checksum == array_checksum(bench.full.values, bench.filtered.values)
