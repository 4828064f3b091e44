"""Item banks: calibrate a benchmark once, save it, reuse it to evaluate new models.

The bank file format (:mod:`~irtlib.bank.format`), building a bank (:mod:`~irtlib.bank.build`),
fixed subsets of it (:mod:`~irtlib.bank.subsets`), score intervals (:mod:`~irtlib.bank.intervals`)
and their cross-fitted coverage check (:mod:`~irtlib.bank.coverage`), the resumable adaptive
session (:mod:`~irtlib.bank.session`), its step-wise adapter for live tests (:mod:`~irtlib.bank.stepwise`)
and the adaptive test inside an Inspect AI evaluation (:mod:`~irtlib.bank.inspect_adaptive`, the
optional ``inspect`` extra; not imported here).

Layer rule (the table :data:`irtlib._layers.MAY_IMPORT`, checked by ``tests/test_layers.py``): imports
:mod:`irtlib.selection`, :mod:`irtlib.fit` and below.
"""

from .build import calibrate_bank
from .format import ItemBank, read_bank
from .subsets import select_subset

__all__ = ["ItemBank", "calibrate_bank", "read_bank", "select_subset"]
