"""IRT models beyond the paper's 2PL: the graded response model and the multidimensional 2PL.

Each module holds its model's formulas, calibration and item model for the adaptive-testing engine
(the chapter "Beyond the paper"). Layer rule (the table :data:`irtlib._layers.MAY_IMPORT`, checked by
``tests/test_layers.py``): imports :mod:`irtlib.selection` and below.
"""
