"""The core: the IRT formulas, ability estimation, the response matrix and binarization.

Layer rule (the table :data:`irtlib._layers.MAY_IMPORT`, checked by ``tests/test_layers.py``): numpy,
scipy and pandas only; from irtlib, only the foundation (:mod:`irtlib.errors`, :mod:`irtlib._typing`)
and this package.

Every formula of the 1PL/2PL/3PL model (probability, Fisher information, log-likelihood, score)
lives in :mod:`irtlib.core.kernels`.
"""

from .ability import AbilityEstimate, map_ability
from .binarize import binarize_choice, binarize_graded, binarize_wmdp
from .kernels import expected_score, fisher_information, log_likelihood, probability, sigmoid
from .responses import ResponseMatrix

__all__ = ["AbilityEstimate", "map_ability", "binarize_choice", "binarize_graded", "binarize_wmdp",
           "expected_score", "fisher_information", "log_likelihood", "probability", "sigmoid", "ResponseMatrix"]
