"""Compare the entries two chapter runs wrote into two copies of a cache: the same files, the same values.

Each run starts from its own copy of the same cache (e.g. of the stage's); the entries a run wrote are the files
that the original lacks. Every such file must exist in both copies, and the two values must be equal: data frames
by ``DataFrame.equals``, arrays by ``array_equal`` (NaN equal), other values by ``==``, recursively through dicts,
lists and tuples, attributes of objects by ``vars`` (``--ignore NAME``: an attribute or key of that name is not
compared, e.g. a calibration's measured ``seconds``)::

    .venv/bin/python benchmarks/compare_cache_results.py /work/stage-full/cache /tmp/cache-before /tmp/cache-after \
        --ignore seconds
"""

from __future__ import annotations

import argparse
import pickle
import sys
from pathlib import Path

import numpy as np
import pandas as pd


def equal(a, b, ignore: frozenset = frozenset()) -> bool:
    """Recursive equality: frames by ``equals``, arrays by ``array_equal`` (NaN equal), containers item by item.

    Keys and attributes named in ``ignore`` are not compared.
    """
    if type(a) is not type(b):
        return False
    if isinstance(a, (pd.DataFrame, pd.Series, pd.Index)):     # (an Index's attributes hold lazy caches)
        return a.equals(b) and (not isinstance(a, pd.Index) or a.names == b.names)
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k], ignore) for k in a if k not in ignore)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(equal(x, y, ignore) for x, y in zip(a, b, strict=True))
    if hasattr(a, "__dict__") and not isinstance(a, type):
        return equal(vars(a), vars(b), ignore)
    try:
        return bool(a == b) or (isinstance(a, float) and np.isnan(a) and np.isnan(b))
    except (TypeError, ValueError):
        return pickle.dumps(a) == pickle.dumps(b)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("original")
    parser.add_argument("first")
    parser.add_argument("second")
    parser.add_argument("--ignore", action="append", default=[], help="an attribute or key not compared")
    args = parser.parse_args(argv)
    ignore = frozenset(args.ignore)
    original = {p.relative_to(args.original) for p in Path(args.original).rglob("*.pkl")}
    new = [sorted({p.relative_to(d) for p in Path(d).rglob("*.pkl")} - original) for d in (args.first, args.second)]
    print(f"new entries: {len(new[0])} in {args.first}, {len(new[1])} in {args.second}")
    if new[0] != new[1]:
        print("the two runs wrote different entries:", sorted(set(new[0]) ^ set(new[1]))[:10])
        return 1
    differ = [rel for rel in new[0] if not equal(*(pickle.loads((Path(d) / rel).read_bytes())
                                                   for d in (args.first, args.second)), ignore)]
    print(f"entries differing: {len(differ)} {differ[:10]}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
