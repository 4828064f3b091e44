"""irtlib: efficient safety benchmarking with item response theory.

The helper library of the book "Efficient safety benchmarking with item response theory".
Its subpackages follow the method's stages, each importing only those before it:

- :mod:`irtlib.core`: the IRT formulas (one kernel module), MAP/EAP ability, the response matrix,
  the paper's binarization rules;
- :mod:`irtlib.io`: reading users' files, HELM runs and the authors' JSON lines; atomic writing;
- :mod:`irtlib.calibration`: the fast MAP engines, py-irt as the paper ran it, model comparison;
- :mod:`irtlib.fit` (fit summaries and checks) and :mod:`irtlib.selection` (the adaptive loop,
  static subsets, the method registry); :mod:`irtlib.extended` (GRM, M2PL);
- :mod:`irtlib.protocol` (splits, agreement, Table 2, the ceiling, savings) and
  :mod:`irtlib.bank` (the bank file, intervals, adaptive sessions);
- :mod:`irtlib.datasets`, :mod:`irtlib.viz` and :mod:`irtlib.cli` on top. The book's own helpers are
  a separate package, :mod:`irtbook` (``bookkit/`` in the repository), which imports irtlib.

The names below are the stable top-level API.
"""

from irtlib._version import __version__ as __version__
from irtlib.bank import ItemBank, calibrate_bank, read_bank, select_subset
from irtlib.bank.session import AdaptiveSession, EvaluationResult
from irtlib.calibration import Calibration, compare_models, fit_2pl, fit_irt
from irtlib.core import (
    AbilityEstimate,
    ResponseMatrix,
    binarize_choice,
    binarize_graded,
    binarize_wmdp,
    expected_score,
    fisher_information,
    log_likelihood,
    map_ability,
    probability,
    sigmoid,
)
from irtlib.fit import (
    ceiling_counts,
    coefficient_of_variation,
    dimensionality,
    item_fit,
    item_rates,
    item_rmse,
    q3,
    q3_summary,
)
from irtlib.io import load_responses, read_model_responses, read_responses
from irtlib.protocol import METHODS, agreement_curves, budget_grid, run_protocol, summarise_table2
from irtlib.selection import MapEstimator, MaxInformation, MeanScoreEstimator, RandomSelection, Trajectory, run_adaptive

#: Subpackages loaded only when first used (``irtlib.datasets``, ``from irtlib.viz import figures``):
#: ``import irtlib`` loads the method's layers (core, io, calibration, fit, selection, protocol, bank)
#: and no data set, book module, plotting library or torch.
_LAZY = ("datasets", "viz", "extended", "cli")


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

__all__ = [
    "datasets",
    "METHODS", "MapEstimator", "MaxInformation", "MeanScoreEstimator", "RandomSelection", "Trajectory",
    "agreement_curves", "budget_grid", "run_adaptive", "run_protocol", "summarise_table2",
    "AbilityEstimate", "AdaptiveSession", "Calibration", "EvaluationResult", "ItemBank", "ResponseMatrix",
    "calibrate_bank", "load_responses", "read_bank", "read_model_responses", "read_responses", "select_subset",
    "binarize_choice", "binarize_graded", "binarize_wmdp",
    "ceiling_counts", "coefficient_of_variation", "expected_score", "fisher_information",
    "fit_2pl", "fit_irt", "compare_models", "item_fit", "q3", "q3_summary", "dimensionality", "item_rates",
    "item_rmse", "log_likelihood", "map_ability", "probability", "sigmoid",
]
