"""Type aliases of irtlib's public signatures."""

from __future__ import annotations

import os
from typing import TypeAlias

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["ArrayLike", "PathLike", "Seed"]

#: A file or directory path.
PathLike: TypeAlias = str | os.PathLike[str]
#: What seeds a random stream: an integer, a SeedSequence (the protocol's per-split streams) or None.
Seed: TypeAlias = int | np.random.SeedSequence | None
