"""``python -m irtlib.cli``: the irtlib command line (same as ``irtlib`` and ``python -m irtlib``)."""

import sys

from irtlib.cli import main

sys.exit(main())
