"""IRT models beyond the paper's 2PL: the graded response model and the multidimensional 2PL.

Each module holds its model's formulas, calibration and adaptive items (the chapter "Beyond the
paper"). Layer rule: imports :mod:`irtlib.selection` and below.
"""
