"""Figures and the static HTML report (matplotlib; loaded only when used).

Layer rule (the table :data:`irtlib._layers.MAY_IMPORT`, checked by ``tests/test_layers.py``): imports
:mod:`irtlib.protocol`, :mod:`irtlib.bank`, :mod:`irtlib.extended` and below.
"""
