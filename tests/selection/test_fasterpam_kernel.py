"""The C FasterPAM (irtlib.selection._fasterpam_kernel.c) against the kmedoids package's extension, bit for bit.

Every case compares the loss (its bits), the medoids, the labels and the package's iteration and swap counts,
for the random-order FasterPAM and for FasterPAM from given medoids.
"""

from __future__ import annotations

import numpy as np
import pytest

from irtlib.selection import fasterpam, rust_order
from irtlib.selection.static import anchor_points_fresh, correlation_distances

kmedoids = pytest.importorskip("kmedoids")


@pytest.fixture(scope="module", params=["loaded", "avx2"])
def lib(request):
    """The kernel as loaded (with AVX-512 where the processor has it), and its build without AVX-512's flags."""
    built = fasterpam.kernel()
    if built is None:
        pytest.skip("no C compiler or no kmedoids extension: the kernel does not load")
    if request.param == "avx2":
        from irtlib.calibration.fused_kernel import compile_kernel

        if not fasterpam.AVX512_FEATURES <= _cpu_flags():
            pytest.skip("the loaded kernel is the build without AVX-512")
        built = fasterpam._bind(compile_kernel(source=fasterpam.KERNEL_SOURCE))
    return built


def _cpu_flags():
    from irtlib.calibration.fused_kernel import cpu_flags

    return cpu_flags()


def _same(lib, diss, init, seed, max_iter=100):
    ext = fasterpam.core()
    init = np.asarray(init, dtype=np.uintp)
    want = (ext._rand_fasterpam_f64(diss, init, max_iter, seed) if seed is not None
            else ext._fasterpam_f64(diss, init, max_iter))
    got = fasterpam._run_kernel(lib, diss, init, max_iter, seed)
    assert np.float64(got[0]).tobytes() == np.float64(want[0]).tobytes()
    np.testing.assert_array_equal(got[1], np.asarray(want[2], dtype=np.intp))
    np.testing.assert_array_equal(got[2], np.asarray(want[1], dtype=np.intp))
    assert (got[3], got[4]) == (int(want[3]), int(want[4]))
    return got


def _responses(n_models, n_items, seed):
    rng = np.random.default_rng(seed)
    ability = rng.normal(size=(n_models, 1))
    difficulty = rng.normal(size=(1, n_items))
    return (rng.random((n_models, n_items)) < 1.0 / (1.0 + np.exp(difficulty - ability))).astype(float)


def _budgets(n):
    return sorted({1, 2, 3, n // 7 + 1, n // 2, max(1, n - 1), n})


@pytest.mark.parametrize("n_models, n_items, seed", [(12, 40, 0), (6, 90, 1), (30, 257, 2), (60, 400, 3)])
@pytest.mark.parametrize("order", ["C", "F"])
def test_correlation_distances_every_budget_both_variants(lib, n_models, n_items, seed, order):
    """The authors' distances (few models: many ties and constant items) at budgets from 1 to n."""
    x = _responses(n_models, n_items, seed)
    x[:, ::11] = 1.0                                          # constant items: distance 1 to every item
    diss = correlation_distances(x, order=order)
    for k in _budgets(n_items):
        for random_state in (42, 0, 7):
            _same(lib, diss, fasterpam.random_medoids(n_items, k, random_state), random_state)
        _same(lib, diss, np.random.default_rng(k).choice(n_items, k, replace=False), None)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 11, 12, 13, 16, 17, 33, 100, 163])
def test_small_and_boundary_sizes(lib, n):
    """Around the order's two algorithms (Floyd's below 12 items) and the kernel's batch of 16 candidates."""
    rng = np.random.default_rng(n)
    for trial in range(6):
        x = rng.normal(size=(n, 2))
        diss = np.sqrt(((x[:, None] - x[None]) ** 2).sum(axis=-1))
        if trial % 2:
            diss = np.round(diss, 1)
        for k in sorted({1, min(2, n), n // 2 or 1, max(1, n - 1), n}):
            for seed in (42, trial, 2 ** 40 + trial):
                _same(lib, diss, fasterpam.random_medoids(n, k, seed % 2 ** 32), seed)
            _same(lib, diss, rng.choice(n, k, replace=False), None)


@pytest.mark.parametrize("case", ["ties", "duplicates", "constant", "asymmetric", "negative", "zeros"])
def test_structured_matrices(lib, case):
    rng = np.random.default_rng(len(case))
    n = 150
    x = rng.normal(size=(n, 3))
    diss = np.sqrt(((x[:, None] - x[None]) ** 2).sum(axis=-1))
    if case == "ties":
        diss = np.round(diss)
    elif case == "duplicates":                                 # identical items: zero distances among them
        dup = rng.integers(0, n, 60)
        diss[dup] = diss[3]
        diss[:, dup] = diss[:, [3]]
    elif case == "constant":
        diss[:, ::4] = 1.0
        diss[::4] = 1.0
    elif case == "asymmetric":
        diss = diss * (1.0 + 1e-9 * rng.random(diss.shape))
    elif case == "negative":                                   # and a non-zero diagonal
        diss = diss - 1.0
    elif case == "zeros":
        diss[:] = 0.0
    if case not in ("negative",):
        np.fill_diagonal(diss, 0.0)
    for layout in (np.ascontiguousarray(diss), np.asfortranarray(diss), diss.T.copy().T):
        for k in (1, 2, 5, 17, 40, n - 1, n):
            _same(lib, layout, fasterpam.random_medoids(n, k, 42), 42)
            _same(lib, layout, np.arange(k), None)
            _same(lib, layout, rng.integers(0, n, k), None)      # repeated medoids


@pytest.mark.parametrize("k", [7, 8, 9, 15, 16, 17, 19, 31, 32, 33, 47, 48, 49, 64, 65])
def test_row_store_scan_boundaries(lib, k):
    """Budgets around the second-nearest scan's blocks (16 medoids in four chains, then four, then one by one),
    on distances with many ties (the lowest index among equals) and with the ties of duplicate items."""
    rng = np.random.default_rng(k)
    for trial in range(3):
        n = int(rng.integers(k + 1, 4 * k + 40))
        x = rng.normal(size=(n, 2))
        diss = np.round(np.sqrt(((x[:, None] - x[None]) ** 2).sum(axis=-1)), 1 if trial < 2 else 2)
        if trial == 1:
            dup = rng.integers(0, n, n // 4)
            diss[dup] = diss[0]
            diss[:, dup] = diss[:, [0]]
            np.fill_diagonal(diss, 0.0)
        diss = np.asfortranarray(diss)
        for seed in (42, trial):
            _same(lib, diss, fasterpam.random_medoids(n, k, seed), seed)
        _same(lib, diss, rng.choice(n, k, replace=False), None)


def test_iteration_limits(lib):
    diss = correlation_distances(_responses(20, 200, 9), order="F")
    for max_iter in (0, 1, 2, 3, 100):
        for k in (1, 2, 10, 60):
            _same(lib, diss, fasterpam.random_medoids(200, k, 42), 42, max_iter)
            _same(lib, diss, fasterpam.random_medoids(200, k, 5), None, max_iter)


def test_strided_views(lib):
    """A view with gaps between elements (every other row and column) is read through its strides."""
    big = correlation_distances(_responses(15, 240, 4))
    view = big[::2, ::2]
    assert not view.flags.c_contiguous and not view.flags.f_contiguous
    for k in (1, 3, 30):
        _same(lib, view, fasterpam.random_medoids(120, k, 42), 42)


def test_the_public_functions_use_the_kernel_and_give_the_packages_results(lib, monkeypatch):
    x = _responses(25, 300, 8)
    diss = correlation_distances(x, order="F")
    got = [fasterpam.random_fasterpam(diss, k, seed=42) for k in (1, 4, 50)]
    got += [fasterpam.fasterpam_from(diss, np.arange(0, 300, 30))]
    monkeypatch.setitem(fasterpam._KERNEL, "lib", None)            # the extension alone
    want = [fasterpam.random_fasterpam(diss, k, seed=42) for k in (1, 4, 50)]
    want += [fasterpam.fasterpam_from(diss, np.arange(0, 300, 30))]
    for g, w in zip(got, want, strict=True):
        assert np.float64(g[0]).tobytes() == np.float64(w[0]).tobytes()
        np.testing.assert_array_equal(g[1], w[1])
        np.testing.assert_array_equal(g[2], w[2])
    fresh = anchor_points_fresh(x, [3, 20])
    for k, subset in fresh.items():
        ref = kmedoids.fasterpam(correlation_distances(x), k, max_iter=100, init="random", random_state=42, n_cpu=1)
        np.testing.assert_array_equal(subset.items, np.sort(np.asarray(ref.medoids, dtype=np.intp)))


def test_invalid_inputs_still_raise_the_packages_errors(lib):
    diss = correlation_distances(_responses(10, 30, 1))
    with pytest.raises(BaseException):  # noqa: B017 - the extension's panic
        fasterpam.fasterpam_from(diss, np.array([0, 31]))
    with pytest.raises(BaseException):  # noqa: B017
        fasterpam.fasterpam_from(diss, np.array([], dtype=np.intp))


def test_the_load_check_rejects_a_kernel_that_breaks_ties_otherwise(tmp_path):
    """The check on load is sharp: a kernel taking the last of equal swap gains instead of the first differs."""
    from irtlib.calibration.fused_kernel import compile_kernel

    src = fasterpam.KERNEL_SOURCE.read_text()
    rule = "const vi take = v < best[c];"
    assert rule in src
    bad = tmp_path / "_fasterpam_kernel_bad.c"
    bad.write_text(src.replace(rule, "const vi take = v <= best[c];"))
    try:
        built = fasterpam._bind(compile_kernel(source=bad, directory=tmp_path))
    except OSError:
        pytest.skip("no C compiler")
    assert not fasterpam._matches_package(built)


def test_the_order_is_the_packages_for_every_seed_tried():
    """The order changes the result; with the seed's own order the kernel matches, with another seed's it need not."""
    lib = fasterpam.kernel()
    if lib is None:
        pytest.skip("the kernel does not load")
    diss = correlation_distances(_responses(30, 300, 6), order="F")
    init = fasterpam.random_medoids(300, 40, 42)
    differs = 0
    for seed in range(20):
        _same(lib, diss, init, seed)
        other = fasterpam._run_kernel(lib, diss, init, 100, seed + 1000)
        mine = fasterpam._run_kernel(lib, diss, init, 100, seed)
        differs += not np.array_equal(other[1], mine[1]) or other[4] != mine[4]
    assert differs > 0
    order = rust_order.shuffled_order(42, 300)
    np.testing.assert_array_equal(np.sort(order), np.arange(300))
    assert not order.flags.writeable


def test_the_kernel_takes_only_what_it_reads_as_the_package_does():
    diss = correlation_distances(_responses(10, 30, 2))
    init = fasterpam.random_medoids(30, 4, 42)
    assert fasterpam._kernel_takes(diss, init, 100)
    raw = np.zeros(30 * 30 * 8 + 1, dtype=np.uint8)
    unaligned = np.frombuffer(raw.data, dtype=np.float64, count=900, offset=1).reshape(30, 30)
    assert not unaligned.flags.aligned
    assert not fasterpam._kernel_takes(unaligned, init, 100)
    assert not fasterpam._kernel_takes(diss.astype(np.float32), init, 100)
    assert not fasterpam._kernel_takes(diss[:, :29], init, 100)
    assert not fasterpam._kernel_takes(diss, np.array([0, 30], dtype=np.uintp), 100)
    assert not fasterpam._kernel_takes(diss, np.array([], dtype=np.uintp), 100)
    assert not fasterpam._kernel_takes(diss, init, -1)
