"""The method registry (irtlib.selection.methods) is the one list of methods, and it drives every consumer."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import simulate_2pl

from irtlib.bank.build import SUBSET_METHODS, calibrate_bank, select_subset
from irtlib.core.responses import ResponseMatrix
from irtlib.errors import InputError
from irtlib.protocol import agreement
from irtlib.selection import methods
from irtlib.selection import static as subsets
from irtlib.selection.methods import REGISTRY, Method, Training


@pytest.fixture(scope="module")
def matrix():
    values, *_ = simulate_2pl(40, 120, seed=11, sd_log_a=1.0)
    return ResponseMatrix(values, [f"m{i:02d}" for i in range(40)], [f"q{j:03d}" for j in range(120)], source="sim")


@pytest.fixture(scope="module")
def bank(matrix):
    return calibrate_bank(matrix, interval_check=False)


def test_the_table():
    assert methods.METHOD_IDS == ("fluid", "random", "random-irt", "total-fisher", "marginal-fisher",
                                  "marginal-fisher-bq", "anchor-points", "disco")
    assert agreement.METHODS == methods.METHOD_IDS
    assert methods.adaptive_ids() == ("fluid", "random", "random-irt")
    assert methods.static_ids() == ("total-fisher", "marginal-fisher", "marginal-fisher-bq", "anchor-points", "disco")
    assert methods.irt_ids() == agreement.IRT_METHODS == ("fluid", "random-irt", "total-fisher", "marginal-fisher",
                                                          "marginal-fisher-bq")
    assert methods.subset_ids() == SUBSET_METHODS["all"] == methods.static_ids() + ("random",)
    assert SUBSET_METHODS["needs_responses"] == ("anchor-points",)
    for m in REGISTRY.values():
        assert m.kind in ("adaptive", "static") and m.scorer in ("map", "mean", "weighted") and m.name
        if m.kind == "static":
            assert m.select is not None and m.selector is None
        else:
            assert m.selector is not None and m.estimator is not None
    from irtlib.viz.figures import METHOD_STYLE

    assert {k: s.label for k, s in METHOD_STYLE.items()} == {k: m.name for k, m in REGISTRY.items()}


def test_check_methods_and_get():
    assert methods.check_methods(None) == methods.METHOD_IDS
    assert methods.check_methods(["disco", "fluid", "disco"]) == ("disco", "fluid")
    with pytest.raises(InputError, match="unknown method 'nope'; choose from fluid, random"):
        methods.check_methods(["fluid", "nope"])
    with pytest.raises(InputError, match="no method given"):
        methods.check_methods([])
    with pytest.raises(InputError, match="unknown method"):
        methods.get("Fluid")
    assert methods.get("disco").name == "DISCO"


def _training(bank, matrix=None, seed=0):
    return Training(a=bank.a, b=bank.b, theta=bank.calibration_theta.to_numpy(),
                    values=None if matrix is None else matrix.subset(items=bank.item_ids).values,
                    safe_rates=bank.items["safe_rate"].to_numpy(), seed=seed)


def test_one_signature_for_every_selection_function(bank, matrix):
    """select(training, ks) -> {k: Subset}; nested methods' subsets are prefixes of each other."""
    t = _training(bank, matrix)
    for method in methods.subset_ids():
        out = REGISTRY[method].select(t, [3, 9])
        assert sorted(out) == [3, 9] and all(isinstance(s, subsets.Subset) for s in out.values())
        assert [len(out[3]), len(out[9])] == [3, 9]
        if method not in ("anchor-points", "random"):
            assert list(out[9].items[:3]) == list(out[3].items)


def test_selection_functions_are_the_subsets_functions(bank, matrix):
    """Each registry entry selects exactly what the public irtlib.selection.static function selects."""
    t = _training(bank, matrix, seed=4)
    a, b, theta = t.a, t.b, t.theta
    expect = {
        "total-fisher": subsets.total_fisher(a, b, theta, 12),
        "marginal-fisher": subsets.marginal_fisher(a, b, theta, 12),
        "marginal-fisher-bq": subsets.marginal_fisher_bq(a, b, theta, 12),
        "disco": subsets.disco(t.values, 12),
        "anchor-points": subsets.anchor_points(t.values, 12, seed=4),
    }
    for method, want in expect.items():
        got = REGISTRY[method].select(t, [12])[12]
        assert np.array_equal(got.items, want.items), method
        assert (got.weights is None) == (want.weights is None)
        if want.weights is not None:
            assert np.array_equal(got.weights, want.weights)


def test_select_subset_reads_the_registry(bank, matrix):
    """The bank's subsets are the registry's selection on the bank's parameters and abilities."""
    for method in methods.subset_ids():
        chosen = select_subset(bank, method=method, k=10, responses=matrix, seed=3)
        want = REGISTRY[method].select(_training(bank, matrix, seed=3), [10])[10]
        assert list(chosen.index) == list(bank.item_ids[want.items]), method
        assert list(chosen["rank"]) == list(range(1, 11))
        weights = np.ones(10) if want.weights is None else want.weights
        assert np.array_equal(chosen["weight"].to_numpy(), weights)
    # without responses, DISCO uses the bank's safe rates: the same order as from the responses
    assert list(select_subset(bank, method="disco", k=10).index) == \
        list(select_subset(bank, method="disco", k=10, responses=matrix).index)
    with pytest.raises(InputError, match="needs the calibration responses"):
        select_subset(bank, method="anchor-points", k=4)
    with pytest.raises(InputError, match="unknown method 'fluid'"):
        select_subset(bank, method="fluid", k=4)


def _first_items(t: Training, ks):
    return {k: subsets.Subset(np.arange(k)) for k in ks}


def test_the_registry_drives_the_protocol(matrix, monkeypatch):
    """A method added to the table is run, scored and reported by the protocol with no other change."""
    monkeypatch.setitem(REGISTRY, "first-items", Method("first-items", "First items", "static", "mean",
                                                        select=_first_items))
    res = agreement.run_protocol(matrix, methods=["disco", "first-items", "fluid"], ks=[2, 5], n_splits=2,
                                 n_test=8, progress=False)
    assert list(dict.fromkeys(res["method"])) == ["fluid", "disco", "first-items"]     # the table's order
    values = matrix.filter_variance(0.01).values
    for split in range(2):
        train, test = agreement.split_models(values.shape[0], 8, 0, split)
        for k in (2, 5):
            score = np.nanmean(values[np.ix_(test, np.arange(k))], axis=1)
            rho = agreement.spearman(score, matrix.safety_scores().to_numpy()[test])
            got = res[(res["split"] == split) & (res["method"] == "first-items") & (res["k"] == k)]["agreement"]
            assert got.item() == pytest.approx(rho, nan_ok=True)


def test_the_registry_drives_the_command_line(monkeypatch):
    from irtlib.cli import build_parser

    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices
    subset_method = next(a for a in sub["subset"]._actions if a.dest == "method")
    assert tuple(subset_method.choices) == methods.subset_ids()
    for command in ("agreement", "report"):
        action = next(a for a in sub[command]._actions if a.dest == "methods")
        assert action.default == list(methods.METHOD_IDS)
        assert action.type("disco, fluid") == ["disco", "fluid"]
    monkeypatch.setitem(REGISTRY, "first-items", Method("first-items", "First items", "static", "mean",
                                                        select=_first_items))
    sub = build_parser()._subparsers._group_actions[0].choices
    assert "first-items" in next(a for a in sub["subset"]._actions if a.dest == "method").choices
    action = next(a for a in sub["agreement"]._actions if a.dest == "methods")
    assert action.type("first-items") == ["first-items"] and "first-items" in action.default


def test_the_command_line_holds_no_library_logic(matrix):
    """write_report and run_agreement live in the library; the CLI's names are the library's."""
    from irtlib import cli
    from irtlib.calibration.joint_map import ENGINES
    from irtlib.viz import report

    assert cli.write_report is report.write_report and cli.run_agreement is agreement.run_agreement
    with pytest.raises(AttributeError):
        cli.no_such_name  # noqa: B018
    parser = cli.build_parser()
    sub = parser._subparsers._group_actions[0].choices
    for command in ("calibrate", "agreement", "report"):
        engine = next(a for a in sub[command]._actions if a.dest == "engine")
        assert sorted(engine.choices) == sorted(ENGINES) and engine.default == "map"
    with pytest.raises(InputError, match="unknown method 'nope'"):
        agreement.run_agreement(matrix, methods=["nope"])
    with pytest.raises(InputError, match="leaves fewer than 2"):
        agreement.run_agreement(matrix, methods=["disco"], n_test=39)
    one = matrix.subset(models=matrix.models[:1])
    with pytest.raises(InputError, match="at least two models"):
        agreement.run_agreement(one, methods=["disco"])
    res = agreement.run_agreement(matrix, methods=["disco", "fluid"], ks=[2, 4], n_splits=1, n_test=8)
    assert set(res["method"]) == {"disco", "fluid"} and report.jsonable({"x": np.float64("nan"), "y": (1, 2)}) == \
        {"x": None, "y": [1, 2]}
