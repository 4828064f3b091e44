"""Every argument a user can get wrong raises an :class:`~irtlib.errors.InputError` naming it.

The 1PL/3PL engine (:mod:`irtlib.calibration.models`), the fit checks (:mod:`irtlib.fit.checks`),
model-choice Fluid (:mod:`irtlib.protocol.model_agreement`), and the runners that are handed an
object of the wrong type, each on a hand-made bad argument: the error is an ``InputError`` (so
the command line reports it as the user's, exit 1, not as a bug), a ``ValueError`` as before, and
its message names what is wrong. A wrong type is an :class:`~irtlib.errors.InputTypeError`,
which is also a ``TypeError``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import simulate_2pl

from irtlib import ResponseMatrix, fit_2pl
from irtlib.calibration import models
from irtlib.errors import InputError, InputTypeError, IrtlibError
from irtlib.fit import checks
from irtlib.protocol import model_agreement


@pytest.fixture(scope="module")
def fitted():
    values, *_ = simulate_2pl(40, 30, seed=3)
    matrix = ResponseMatrix(values, [f"m{i}" for i in range(40)], [f"q{j}" for j in range(30)])
    return matrix, fit_2pl(matrix, engine="map")


def _raises(call, match, kind=InputError):
    with pytest.raises(kind, match=match) as info:
        call()
    assert isinstance(info.value, IrtlibError) and isinstance(info.value, ValueError)
    return info.value


def test_input_type_error_is_both_a_type_error_and_an_input_error():
    assert issubclass(InputTypeError, TypeError) and issubclass(InputTypeError, InputError)


# ------------------------------------------------------------------ the 1PL/2PL/3PL engine
@pytest.mark.parametrize("kwargs, match", [
    ({"model": "4pl"}, r"unknown model '4pl'"),
    ({"prior_c": (1.0, 17.0)}, r"prior_c must be two Beta parameters above 1"),
    ({"prior_c": (5.0,)}, r"prior_c must be two Beta parameters"),
    ({"model": "3pl", "start": {"theta": np.zeros(3), "a": np.ones(5), "b": np.zeros(5)}},
     r"start: parameters do not match values of shape \(4, 5\)"),
])
def test_fit_irt_values_rejects_bad_options(kwargs, match):
    x = np.array([[1, 0, 1, 0, 1], [0, 0, 1, 1, 1], [1, 1, 1, 0, 0], [0, 1, 0, 1, 0]], float)
    _raises(lambda: models.fit_irt_values(x, **kwargs), match)


@pytest.mark.parametrize("values, match", [
    (np.zeros(5), r"values must be a 2-D models x items array, got shape \(5,\)"),
    (np.array([[1.0, 0.0], [2.0, 1.0]]), r"values must be 0, 1 or NaN; cell \(1, 0\) has 2.0"),
])
def test_fit_irt_values_rejects_bad_values(values, match):
    _raises(lambda: models.fit_irt_values(values), match)


def test_fit_irt_and_compare_models_reject_bad_arguments(fitted):
    matrix, _ = fitted
    err = _raises(lambda: models.fit_irt(matrix.values, model="1pl"), r"fit_irt expects a ResponseMatrix, got ndarray",
                  InputTypeError)
    assert isinstance(err, TypeError)
    _raises(lambda: models.fit_irt(matrix, engine="stan"), r"unknown engine 'stan'")
    _raises(lambda: models.fit_irt(matrix, model="3pl", engine="pyirt"), r"engine='pyirt' fits the 2PL only")
    _raises(lambda: models.fit_irt(matrix, model="2PL"), r"unknown model '2PL'")
    _raises(lambda: models.compare_models(pd.DataFrame(matrix.values)), r"compare_models expects a ResponseMatrix",
            InputTypeError)
    _raises(lambda: models.compare_models(matrix, models=()), r"models must name at least one model")
    _raises(lambda: models.compare_models(matrix, models=("1pl", "rasch")), r"models: unknown model 'rasch'")
    _raises(lambda: models.heldout_folds(~np.isnan(matrix.values), folds=1), r"folds must be at least 2, got 1")
    _raises(lambda: models.n_parameters("3PL", 4, 5), r"unknown model '3PL'")


# ------------------------------------------------------------------ model-choice Fluid
def test_fluid_irt_rejects_a_budget_outside_the_bank():
    x = np.ones((2, 4))
    a, b = np.ones(4), np.zeros(4)
    _raises(lambda: model_agreement.fluid_irt(x, a, b, budget=5), r"budget must be between 1 and the 4 items, got 5")
    _raises(lambda: model_agreement.fluid_irt(x, a, b, budget=0), r"budget must be between 1 and the 4 items, got 0")


def test_fluid_agreement_rejects_an_unknown_model(fitted):
    matrix, _ = fitted
    _raises(lambda: model_agreement.fluid_agreement(matrix, model="4pl", ks=[5]), r"unknown model '4pl'")


# ------------------------------------------------------------------ the fit checks
def test_fit_checks_reject_the_wrong_objects(fitted):
    matrix, calibration = fitted
    _raises(lambda: checks.item_fit(matrix.values, calibration), r"matrix must be a ResponseMatrix, got ndarray",
            InputTypeError)
    _raises(lambda: checks.item_fit(matrix, {"a": calibration.a}), r"calibration must be a Calibration, got dict",
            InputTypeError)


def test_fit_checks_name_the_models_and_items_a_calibration_lacks(fitted):
    matrix, calibration = fitted
    other = ResponseMatrix(matrix.values, [f"x{i}" for i in range(40)], matrix.items)
    _raises(lambda: checks.item_fit(other, calibration),
            r"calibration has no theta for model\(s\) \['x0', 'x1', 'x2'\]")
    items = ResponseMatrix(matrix.values, matrix.models, [f"z{j}" for j in range(30)])
    _raises(lambda: checks.q3(items, calibration), r"calibration has no parameters for item\(s\) \['z0', 'z1', 'z2'\]")


@pytest.mark.parametrize("kwargs, match", [
    ({"method": "chi2"}, r"method must be one of .*got 'chi2'"),
    ({"alpha": 1.5}, r"alpha must lie in \(0, 1\), got 1.5"),
    ({"alpha": 0.0}, r"alpha must lie in \(0, 1\), got 0.0"),
    ({"correction": "bonf"}, r"correction must be one of .*got 'bonf'"),
    ({"n_groups": 2}, r"n_groups: S-X2 needs more score groups than the 2 item parameters"),
])
def test_item_fit_rejects_bad_options(fitted, kwargs, match):
    matrix, calibration = fitted
    _raises(lambda: checks.item_fit(matrix, calibration, **kwargs), match)


def test_adjust_pvalues_and_sx2_expected_reject_bad_arguments():
    _raises(lambda: checks.adjust_pvalues([0.01, 0.2], correction="holm-ish"), r"correction must be one of")
    p = np.full((3, 4), 0.5)
    w = np.full(3, 1 / 3)
    _raises(lambda: checks.sx2_expected(p, w, [0, 5]), r"scores must lie in 0..4")
    _raises(lambda: checks.sx2_expected(p, w, [-1, 2]), r"scores must lie in 0..4")


def test_q3_summary_names_the_items_without_a_group(fitted):
    matrix, calibration = fitted
    groups = {f"q{j}": j % 3 for j in range(28)}            # q28 and q29 have none
    _raises(lambda: checks.q3_summary(matrix, calibration, groups), r"groups: no group for item\(s\) \['q28', 'q29'\]")
    _raises(lambda: checks.q3_summary(matrix, calibration, [0, 1, 2]), r"groups has 3 entries for 30 items")


@pytest.mark.parametrize("kwargs, match", [
    ({"n_replications": 0}, r"n_replications must be at least 1, got 0"),
    ({"quantile": 1.0}, r"quantile must lie in \(0, 1\), got 1.0"),
])
def test_dimensionality_rejects_bad_options(fitted, kwargs, match):
    matrix, calibration = fitted
    _raises(lambda: checks.dimensionality(matrix, calibration, **kwargs), match)


# ------------------------------------------------------------------ the wrong object handed to a runner
def test_runners_name_the_object_they_need(fitted):
    from irtlib import AdaptiveSession, run_protocol
    from irtlib.protocol.ceiling import agreement_ceiling

    matrix, _ = fitted
    frame = pd.DataFrame(matrix.values)
    _raises(lambda: fit_2pl(frame, engine="map"), r"fit_2pl expects a ResponseMatrix, got DataFrame", InputTypeError)
    _raises(lambda: run_protocol(frame, ks=[5]), r"run_protocol expects a ResponseMatrix", InputTypeError)
    _raises(lambda: agreement_ceiling(frame), r"agreement_ceiling expects a ResponseMatrix", InputTypeError)
    _raises(lambda: AdaptiveSession("bank.csv"), r"AdaptiveSession needs an ItemBank, got str", InputTypeError)


def test_presentation_helpers_name_the_bad_option():
    from irtlib.datasets import paper
    from irtlib.viz import figures

    _raises(lambda: paper.facts("harmbench2"), r"unknown benchmark 'harmbench2'")
    results = pd.DataFrame({"split": [0], "method": ["random"], "k": [5], "agreement": [0.5]})
    _raises(lambda: figures.agreement_curves(results, band="iqr"), r"band must be 'sd', 'se' or 'none', got 'iqr'")


def test_the_course_helpers_name_the_bad_argument():
    from irtbook import primer

    a, b = np.ones(4), np.zeros(4)
    _raises(lambda: primer.adaptive_trace(np.ones(3), a, b, budget=2), r"responses, a and b must be 1-D of one length")
    _raises(lambda: primer.adaptive_trace(np.array([1, 0, np.nan, 1]), a, b, budget=4),
            r"budget must be between 1 and the 3 answered items, got 4")
    _raises(lambda: primer.perfect_steps(np.ones((2, 3)), np.zeros(3)), r"values must be \(n_models, n_items\)")


def test_q3_summary_reads_a_dict_of_groups_as_the_series_it_stands_for(fitted):
    """A dict ``item -> label`` (the hint's Mapping) gives what the Series gives, not one silent group."""
    matrix, calibration = fitted
    groups = {f"q{j}": j % 3 for j in range(30)}
    from_dict = checks.q3_summary(matrix, calibration, groups)
    pd.testing.assert_series_equal(from_dict, checks.q3_summary(matrix, calibration, pd.Series(groups)))
    assert from_dict["n_within_pairs"] == 3 * (10 * 9 / 2)
