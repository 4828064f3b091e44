"""Choosing items: the adaptive loop (Algorithm 1), the full CAT, static subsets, and the registry.

Layer rule (the table :data:`irtlib._layers.MAY_IMPORT`, checked by ``tests/test_layers.py``): imports
:mod:`irtlib.calibration` and below.
"""

from .adaptive import MapEstimator, MaxInformation, MeanScoreEstimator, RandomSelection, Trajectory, run_adaptive

__all__ = ["MapEstimator", "MaxInformation", "MeanScoreEstimator", "RandomSelection", "Trajectory", "run_adaptive"]
