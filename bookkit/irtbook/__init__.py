"""Helpers that exist only for the book: not part of the method a practitioner imports.

A package of its own (``bookkit/`` in the repository, the wheel ``irtbook``), so that
``pip install irtlib`` gets the library alone; a chapter notebook downloaded from the book runs after
``pip install`` of both wheels its Reproduce box links (``irtbook`` requires ``irtlib[book]``).

- :mod:`irtlib.datasets.paper`: every number the paper reports, keyed for comparison;
- :mod:`irtbook.compare`: tables of the paper's value beside ours;
- :mod:`irtbook.pipeline`: the chapters' cached calibrations and protocol runs;
- :mod:`irtbook.cache`: the on-disk cache those runs use;
- :mod:`irtbook.reproducibility`: the execution table of the reproducibility page.

Layer rule (the table :data:`irtlib._layers.MAY_IMPORT`, checked by ``tests/test_layers.py``): the leaf; imports
:mod:`irtlib.cli` and everything below it, and nothing outside :mod:`irtbook` imports it.
"""

#: The version of the book's helpers: always the library's (a test checks), so that one book build
#: ships one pair of wheels.
__version__ = "0.1.0"
