#!/usr/bin/env python
"""Regenerate the simulated release in data/ (or check it is byte-identical).

Usage
-----
    python scripts/generate_data.py                 # write any missing file, refuse to change others
    python scripts/generate_data.py --force         # overwrite files whose content differs
    python scripts/generate_data.py --check         # regenerate in memory, compare with data/ + manifest
    python scripts/generate_data.py --check --only harmbench simplesafetytests
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from irtlib.datasets import release, simulate  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=str(ROOT / "data"), help="release directory (default: data/)")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="benchmarks to process (default: all)")
    ap.add_argument("--seed", type=int, default=None, help=f"seed (default {simulate.DEFAULT_SEED}, "
                    "or the manifest's with --check)")
    ap.add_argument("--check", action="store_true", help="verify byte-identity; write nothing")
    ap.add_argument("--force", action="store_true", help="overwrite files whose content differs")
    args = ap.parse_args(argv)
    for n in args.only or []:
        if n not in simulate.SPECS:
            ap.error(f"unknown benchmark {n!r}; choose from {sorted(simulate.SPECS)}")
    start = time.perf_counter()
    if args.check:
        problems = release.check_release(args.data_dir, args.only, seed=args.seed)
        for p in problems:
            print("MISMATCH", p)
        which = ", ".join(args.only) if args.only else "all benchmarks in the manifest"
        print(f"checked {which} in {time.perf_counter() - start:.1f}s: "
              + ("byte-identical" if not problems else f"{len(problems)} problem(s)"))
        return 1 if problems else 0
    seed = simulate.DEFAULT_SEED if args.seed is None else args.seed
    try:
        manifest = release.write_release(args.data_dir, args.only, seed=seed, overwrite=args.force)
    except FileExistsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    total = sum(e["bytes"] for e in manifest["files"].values())
    print(f"wrote {len(manifest['files'])} files ({total / 1e6:.2f} MB) to {args.data_dir} "
          f"in {time.perf_counter() - start:.1f}s (generator {simulate.GENERATOR_VERSION}, seed {seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
