"""The exceptions irtlib raises for problems the user can fix.

Every problem with what the user gave irtlib -- a malformed response file, a corrupt or
foreign item bank, a budget larger than the bank, an unknown method -- raises an
:class:`IrtlibError`; most are :class:`InputError`, which is also a :class:`ValueError` so that
``except ValueError`` keeps working. The command line prints such errors (and :class:`OSError`)
as one line and exits with status 1 (2 for a usage error); any other exception is a bug in
irtlib, reported as an internal error with exit status 3 (the traceback with ``--debug``).
"""

from __future__ import annotations

__all__ = ["IrtlibError", "InputError", "InputTypeError", "UsageError", "MissingDependencyError"]


class IrtlibError(Exception):
    """Base class of the errors that describe a problem the user can fix (not a bug in irtlib)."""


class InputError(IrtlibError, ValueError):
    """Bad input: a file, a value or an argument irtlib cannot use, with what to do about it."""


class InputTypeError(InputError, TypeError):
    """An argument of the wrong type (a DataFrame where a ResponseMatrix is needed): also a :class:`TypeError`."""


class UsageError(InputError):
    """A command-line usage problem found after parsing (exit status 2, like argparse's)."""


class MissingDependencyError(IrtlibError, ImportError):
    """An optional dependency (e.g. py-irt for ``engine="pyirt"``) is not installed."""
