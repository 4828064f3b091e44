"""Choosing items: the adaptive-testing engine, static subsets, and the registry.

The engine is one small module per stage -- :mod:`~irtlib.selection.items` (item models),
:mod:`~irtlib.selection.selectors`, :mod:`~irtlib.selection.estimators`,
:mod:`~irtlib.selection.stopping` with :mod:`~irtlib.selection.certify` (decisions against a cut) --
and one loop, :class:`~irtlib.selection.engine.AdaptiveTest`, driven in batch by
:func:`~irtlib.selection.adaptive.run_adaptive` (Algorithm 1, the protocol's) and step by step by
:class:`irtlib.bank.session.AdaptiveSession`; :func:`~irtlib.selection.cat.run_cat` is the
operational CAT's entry point over it.

Layer rule (the table :data:`irtlib._layers.MAY_IMPORT`, checked by ``tests/test_layers.py``): imports
:mod:`irtlib.calibration` and below.
"""

from .adaptive import MapEstimator, MaxInformation, MeanScoreEstimator, RandomSelection, Trajectory, run_adaptive
from .engine import AdaptiveTest
from .stopping import StoppingRule

__all__ = ["AdaptiveTest", "MapEstimator", "MaxInformation", "MeanScoreEstimator", "RandomSelection", "StoppingRule",
           "Trajectory", "run_adaptive"]
