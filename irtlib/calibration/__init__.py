"""Calibration: fitting item parameters to a response matrix.

The fast joint-MAP 2PL engine and the :class:`~irtlib.calibration.joint_map.Calibration` result
(:mod:`~irtlib.calibration.joint_map`), the 1PL/2PL/3PL engine and model comparison
(:mod:`~irtlib.calibration.models`), py-irt as the paper ran it (:mod:`~irtlib.calibration.pyirt`)
and batched over splits (:mod:`~irtlib.calibration.pyirt_batch`), each split's fit cached on disk
by content (:mod:`~irtlib.calibration.split_cache`).

Layer rule (the table :data:`irtlib._layers.MAY_IMPORT`, checked by ``tests/test_layers.py``): imports
:mod:`irtlib.io` and below.
"""

from .joint_map import Calibration, fit_2pl
from .models import compare_models, fit_irt

__all__ = ["Calibration", "fit_2pl", "compare_models", "fit_irt"]
