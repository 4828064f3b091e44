"""Summarise ``benchmarks/pytest_timeline.py``'s files: per worker, per file, the costliest tests, and balance.

``python benchmarks/timeline_report.py PREFIX`` reads ``PREFIX_gw*.jsonl`` and prints each worker's span and
CPU, its files in the order it ran them (start, end, CPU), the tests that cost the most CPU and those whose
wall most exceeds their CPU (waits), and the end times of two workers running the same files with xdist's
``--dist loadfile`` (each worker holding two files, as xdist 3.8 does) in the observed order and longest
first, with each file's CPU seconds as its duration (what it takes on an idle core).
"""

from __future__ import annotations

import collections
import glob
import json
import sys


def loadfile_ends(queue: list[str], cost: dict[str, float], n_workers: int = 2, held: int = 2) -> list[float]:
    """The times at which ``n_workers`` finish ``queue``, each holding ``held`` files, taking the next when idle."""
    queue = list(queue)
    pending: list[list[str]] = [[] for _ in range(n_workers)]
    for _ in range(held):
        for w in range(n_workers):
            if queue:
                pending[w].append(queue.pop(0))
    clock = [0.0] * n_workers
    while any(pending):
        w = min((w for w in range(n_workers) if pending[w]), key=lambda w: clock[w])
        clock[w] += cost[pending[w].pop(0)]
        if len(pending[w]) < held and queue:
            pending[w].append(queue.pop(0))
    return clock


def main(prefix: str) -> None:
    rows = [json.loads(line) for name in sorted(glob.glob(f"{prefix}_*.jsonl")) for line in open(name)]
    start = min(r["t0"] for r in rows)
    tests = [r for r in rows if not r["id"].startswith("SESSION")]
    for worker in sorted({r["w"] for r in tests}):
        mine = sorted((r for r in tests if r["w"] == worker), key=lambda r: r["t0"])
        cpu = sum(r["self"] + r["children"] for r in mine)
        print(f"{worker}: first test at {mine[0]['t0'] - start:.1f} s, last ends at {mine[-1]['t1'] - start:.1f} s, "
              f"{len(mine)} tests, {cpu:.1f} CPU s ({sum(r['children'] for r in mine):.1f} in subprocesses)")
        files: dict[str, list[float]] = {}
        for r in mine:
            f = files.setdefault(r["id"].split("::")[0], [r["t0"], r["t1"], 0.0])
            f[1] = r["t1"]
            f[2] += r["self"] + r["children"]
        for name, (t0, t1, c) in files.items():
            print(f"  {t0 - start:8.1f} {t1 - start:8.1f} {c:7.1f} CPU s  {name}")
    print("costliest tests (CPU s, wall s):")
    for r in sorted(tests, key=lambda r: -(r["self"] + r["children"]))[:30]:
        print(f"  {r['self'] + r['children']:6.1f} {r['t1'] - r['t0']:7.1f}  {r['id']}")
    print("longest waits (wall minus CPU, s):")
    for r in sorted(tests, key=lambda r: r["self"] + r["children"] - (r["t1"] - r["t0"]))[:15]:
        print(f"  {r['t1'] - r['t0'] - r['self'] - r['children']:6.1f}  {r['id']}")
    cost: dict[str, float] = collections.defaultdict(float)
    first: dict[str, float] = {}
    for r in tests:
        name = r["id"].split("::")[0]
        cost[name] += r["self"] + r["children"]
        first[name] = min(first.get(name, r["t0"]), r["t0"])
    order = sorted(cost, key=first.__getitem__)
    print(f"{len(cost)} files, {sum(cost.values()):.1f} CPU s; two workers would end at (CPU s as durations):")
    print("  observed order:", [round(t, 1) for t in loadfile_ends(order, cost)])
    print("  longest first: ", [round(t, 1) for t in loadfile_ends(sorted(order, key=lambda f: -cost[f]), cost)])


if __name__ == "__main__":
    main(sys.argv[1])
