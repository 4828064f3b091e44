"""``python -m irtlib``: the irtlib command line (see :mod:`irtlib.cli`)."""

import sys

from .cli import main

sys.exit(main())
