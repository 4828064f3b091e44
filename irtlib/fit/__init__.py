"""Does the model fit? The paper's fit summaries and the checks it does not run.

The paper's summaries: item-level RMSE, spread of discrimination, ceilings
(:mod:`~irtlib.fit.summaries`); item fit, Yen's Q3 and dimensionality (:mod:`~irtlib.fit.checks`).

Layer rule (the table :data:`irtlib._layers.MAY_IMPORT`, checked by ``tests/test_layers.py``): imports
:mod:`irtlib.calibration` and below.
"""

from .checks import dimensionality, item_fit, q3, q3_summary, residual_eigenvalues, summarise_q3
from .summaries import CEILING, ceiling_counts, coefficient_of_variation, item_rates, item_rmse

__all__ = ["dimensionality", "item_fit", "q3", "q3_summary", "residual_eigenvalues", "summarise_q3", "CEILING",
           "ceiling_counts", "coefficient_of_variation", "item_rates", "item_rmse"]
