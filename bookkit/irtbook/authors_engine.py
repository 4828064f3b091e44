"""The authors' calibration at another epoch count, as a per-split engine of the agreement protocol.

The protocol names the calibration of its splits by engine (:func:`irtlib.protocol.agreement.calibrate_splits`):
``"pyirt-authors"`` is the authors' calibration (py-irt's hierarchical 2PL, learning rate 0.1 decayed by
0.9999 per epoch, the parameters of the epoch with the lowest loss; paper, Section 3 and appendix B) at
its 1,000 epochs, every split's fit kept in the split cache (:mod:`irtlib.calibration.split_cache`). A
QUICK build (a preview) runs the same calibration for fewer epochs (:data:`irtbook.pipeline.QUICK_AUTHORS_EPOCHS`):
:func:`engine_name` gives that run a name of its own, ``"pyirt-authors@300"``, registered with the protocol
(:func:`irtlib.protocol.agreement.register_calibration_engine`), so that the epochs are part of every
cache key that holds the engine and a QUICK run never reads a full run's result, nor the reverse. At
the calibration's own epochs the name is ``"pyirt-authors"`` itself: nothing of the full build changes.

The registration lives in the process that made the name: a run of the protocol with such an engine
must calibrate in that process (``n_jobs=1``, as a QUICK build runs, :data:`irtbook.split_stage.QUICK_N_JOBS`);
a joblib worker would not know the name and stops with irtlib's unknown-engine error.
"""

from __future__ import annotations

import functools
import inspect

__all__ = ["AUTHORS_ENGINE", "SEPARATOR", "authors_epochs", "engine_name", "parse_engine"]

#: The protocol's engine name of the authors' calibration (:data:`irtlib.protocol.agreement.CALIBRATION_ENGINES`).
AUTHORS_ENGINE = "pyirt-authors"
#: Between the engine and its epochs in a name made by :func:`engine_name`.
SEPARATOR = "@"


def authors_epochs() -> int:
    """The epochs ``"pyirt-authors"`` runs in the protocol: the split cache's default.

    :func:`irtlib.calibration.split_cache.fit_2pl_splits_cached`'s ``epochs``, the paper's 1,000.
    """
    from irtlib.calibration.split_cache import fit_2pl_splits_cached

    return int(inspect.signature(fit_2pl_splits_cached).parameters["epochs"].default)


def engine_name(epochs: int) -> str:
    """The per-split engine of the authors' calibration at ``epochs``, registered with the protocol.

    Parameters
    ----------
    epochs : int
        Epochs of every split's fit.

    Returns
    -------
    str
        ``"pyirt-authors"`` at :func:`authors_epochs` (the protocol's own engine, unchanged), else
        ``"pyirt-authors@<epochs>"``, registered in this process by
        :func:`irtlib.protocol.agreement.register_calibration_engine`.
    """
    from irtlib.errors import InputError
    from irtlib.protocol.agreement import CALIBRATION_ENGINES, register_calibration_engine

    epochs = int(epochs)
    if epochs < 1:
        raise InputError(f"epochs must be at least 1, got {epochs}")
    if epochs == authors_epochs():
        return AUTHORS_ENGINE
    name = f"{AUTHORS_ENGINE}{SEPARATOR}{epochs}"
    if name not in CALIBRATION_ENGINES:
        register_calibration_engine(name, functools.partial(CALIBRATION_ENGINES[AUTHORS_ENGINE], epochs=epochs))
    return name


def parse_engine(engine: str) -> tuple[str, int | None]:
    """``(engine, epochs)`` of a name made by :func:`engine_name`; any other name with None.

    >>> parse_engine("pyirt-authors@300")
    ('pyirt-authors', 300)
    >>> parse_engine("map")
    ('map', None)
    """
    base, sep, tail = str(engine).partition(SEPARATOR)
    return (base, int(tail)) if sep and base == AUTHORS_ENGINE and tail.isdigit() else (str(engine), None)

