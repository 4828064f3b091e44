"""Reading what users have and writing outputs safely.

Users' response files (:mod:`~irtlib.io.tables`), HELM run directories (:mod:`~irtlib.io.helm`),
the authors' JSON lines (:mod:`~irtlib.io.jsonl`), lm-evaluation-harness and Inspect AI logs
(:mod:`~irtlib.io.formats`, which also recognises every format); atomic writing (:mod:`~irtlib.io.atomic`),
checksums (:mod:`~irtlib.io.checksums`) and the one download call (:mod:`~irtlib.io.download`).

Layer rule (the table :data:`irtlib._layers.MAY_IMPORT`, checked by ``tests/test_layers.py``): imports
:mod:`irtlib.core` and below.
"""

from .atomic import DIRECTORY_MARKER, atomic_directory, atomic_write, check_writable, write_if_changed
from .checksums import file_sha256, matrix_sha256
from .download import fetch_url
from .tables import LAYOUTS, RULES, InputWarning, Responses, load_responses, read_model_responses, read_responses

__all__ = ["DIRECTORY_MARKER", "atomic_directory", "atomic_write", "check_writable", "write_if_changed",
           "file_sha256", "matrix_sha256", "fetch_url", "LAYOUTS", "RULES", "InputWarning", "Responses",
           "load_responses", "read_model_responses", "read_responses"]
