"""Helpers that exist only for the book: not part of the method a practitioner imports.

- :mod:`irtlib.datasets.paper`: every number the paper reports, keyed for comparison;
- :mod:`irtlib.book.compare`: tables of the paper's value beside ours;
- :mod:`irtlib.book.pipeline`: the chapters' cached calibrations and protocol runs;
- :mod:`irtlib.book.cache`: the on-disk cache those runs use;
- :mod:`irtlib.book.reproducibility`: the execution table of the reproducibility page.

Layer rule (the table :data:`irtlib._layers.MAY_IMPORT`, checked by ``tests/test_layers.py``): the leaf; imports
:mod:`irtlib.cli` and everything below it, and nothing outside :mod:`irtlib.book` imports it.
"""
