"""The paper's evaluation protocol: splits, agreement curves, Table 2, the ceiling and savings.

The protocol as the text describes it and as the authors ran it (:mod:`~irtlib.protocol.presets`),
its runner (:mod:`~irtlib.protocol.agreement`), the agreement ceiling
(:mod:`~irtlib.protocol.ceiling`), model choice (:mod:`~irtlib.protocol.model_agreement`) and
what a budget saves (:mod:`~irtlib.protocol.savings`).

Layer rule (the table :data:`irtlib._layers.MAY_IMPORT`, checked by ``tests/test_layers.py``): imports
:mod:`irtlib.selection`, :mod:`irtlib.fit` and below.
"""

from .agreement import METHODS, agreement_curves, budget_grid, run_protocol, summarise_table2

__all__ = ["METHODS", "agreement_curves", "budget_grid", "run_protocol", "summarise_table2"]
