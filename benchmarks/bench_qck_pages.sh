#!/bin/bash
# Issue 26 qck: every QUICK page in make's order with one shared cache, user + sys CPU seconds per page.
#
#   benchmarks/bench_qck_pages.sh TREE STAGE_CACHE OUT_DIR
#
# TREE: a checkout with .venv (and ../shared beside it for the real data); STAGE_CACHE: a QUICK stage cache made by
# that tree's code (`python -m irtbook.split_stage --quick --cache-dir DIR`: the cache's keys hold the library's
# fingerprint); OUT_DIR: the executed notebooks (compare them with /work/profiles/gluecmp.py). Alternate two trees'
# runs (base, new, base, new, ...) and compare the medians per page. Kernels are ordinary ones
# (IRTBOOK_FORK_KERNEL=0), so each page also carries its interpreter's start and imports.
set -e
WT=$1; ST=$2; OUT=$3; mkdir -p "$OUT"; cd "$WT"
export PYTHONPATH=$WT/bookkit:$WT IRTBOOK_FORK_KERNEL=0 IRTBOOK_PAGE_SERVER=0
rm -rf _build/cache && mkdir -p _build && cp -a "$ST" _build/cache && chmod -R u+w _build/cache
for PAGE in 01_data 02_fit 05_selection 10_beyond 07_own_benchmark 04b_model_fit 08_simulation_study 00_primer \
            09_pandaguard 06_table2 04_discrimination 03_ceiling; do
  EXTRA=""; grep -q "^N_JOBS = " "book/$PAGE.md" && EXTRA="-p N_JOBS 1"
  r=$(/usr/bin/time -f "%e s wall %U user %S sys" .venv/bin/python tools/run_chapter.py "book/$PAGE.md" \
      "$OUT/$PAGE.ipynb" --cwd "$WT" -- -p QUICK True $EXTRA 2>&1 | tail -1)
  echo "$PAGE $r"
done
