"""irtlib: efficient safety benchmarking with item response theory.

The helper library of the book "Efficient safety benchmarking with item response theory":
response matrices and the paper's binarization rules, the 2PL model and its calibration
(py-irt as the paper ran it, and a fast MAP engine), MAP ability estimation, Fluid
Benchmarking, static subsets and the agreement protocol.
"""

#: The package version: the one place it is kept (pyproject.toml reads it; banks record it).
__version__ = "0.1.0"

from .ability import AbilityEstimate, map_ability
from .adaptive import MapEstimator, MaxInformation, MeanScoreEstimator, RandomSelection, Trajectory, run_adaptive
from .agreement import METHODS, agreement_curves, budget_grid, run_protocol, summarise_table2
from .bank import ItemBank, calibrate_bank, read_bank, select_subset
from .binarize import binarize_choice, binarize_graded, binarize_wmdp
from .calibrate import Calibration, fit_2pl
from .calibrate_models import compare_models, fit_irt
from .data import ResponseMatrix
from .diagnostics import (
    ceiling_counts,
    coefficient_of_variation,
    dimensionality,
    item_fit,
    item_rates,
    item_rmse,
    q3,
    q3_summary,
)
from .io import load_responses, read_model_responses, read_responses
from .model import expected_score, fisher_information, log_likelihood, probability, sigmoid
from .session import AdaptiveSession, EvaluationResult

#: Subpackages and modules loaded only when first used (``irtlib.datasets``, ``from irtlib import
#: plots``): the core imports no book module, no plotting library and no torch.
_LAZY = ("datasets", "book", "plots", "cli", "methods", "errors", "subsets", "savings", "model", "io")


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
