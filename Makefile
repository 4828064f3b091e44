# Build, test and render "Efficient safety benchmarking with item response theory".
#
#   make venv        create .venv/ with exactly the versions of the lock file requirements-lock.txt
#                    (pip --require-hashes; byte code compiled at first import, PIP_COMPILE), then irtlib and the book's helpers (bookkit/) in editable mode (reruns when the
#                    lock or pyproject.toml changes)
#   make lock        regenerate requirements-lock.txt from pyproject.toml's ranges (pip-tools'
#                    pip-compile --generate-hashes, in its own venv _build/lock-venv)
#   make test        lint (ruff) and the fast suite: the library and command-line tests, in
#                    parallel (pytest-xdist, TEST_JOBS=2 workers), without the tests marked
#                    book, browser or slow (tests/conftest.py); about 2 minutes on 2 cores
#   make test-all    (or make test FULL=1) lint and every test, with line coverage of irtlib
#                    (subprocesses included), in parallel like make test (TEST_JOBS workers, one test
#                    file per worker at a time): what CI runs after `make book QUICK=1`
#                    Select with PYTEST_ARGS="tests/test_x.py -k name" (make test-all runs any test);
#                    COVERAGE=0 leaves coverage out
#   make lint        ruff only
#   make book        execute every chapter with papermill (2 in parallel), check the
#                    executed notebooks, render the HTML book into _build/html/
#   make book QUICK=1
#                    the same with `-p QUICK True` for every chapter (reduced settings: preview, CI)
#   make stage [QUICK=1]
#                    the calibrations the chapters share, fitted once into _build/cache (every chapter
#                    target depends on it): bookkit/irtbook/split_stage.py; a full build then also computes
#                    chapter 06's own protocol runs as a job beside chapter 05 (bookkit/irtbook/comparison_runs.py)
#   make chapter CH=03_fluid [QUICK=1] [PARAMS="-p N_SPLITS 20"]
#                    re-execute one chapter (book/03_fluid.md) into _build/executed/03_fluid.ipynb
#   make html        render the HTML again from the executed notebooks (executes what is out of date)
#   make dist        irtlib's and irtbook's wheels and the source archive the book ships, in _build/dist/
#   make student     the course kit: _build/student/<chapter>.ipynb without solutions, and the
#                    answer notebooks _build/student/answers/<chapter>.ipynb (tools/student.py)
#   make pdf         the whole book as one PDF, _build/pdf/book.pdf: Jupyter Book's single-page
#                    HTML printed by headless Chromium (tools/pdf.py; no TeX needed)
#   make mathjax     fetch MathJax 3 from npm into _build/mathjax/ (only needed without the
#                    django-static-mathjax pip package of the `book` extra)
#   make clean       remove _build/ and artifacts/ (keeps .venv/);  make distclean also removes .venv/
#
# How the book is built (see tools/*.py for details):
#   book/<chapter>.md  --jupytext+papermill-->  _build/executed/<chapter>.ipynb   (tools/run_chapter.py)
#   _build/executed/*.ipynb  --checked-->  no error outputs, every code cell ran  (tools/check_executed.py)
#   _config.yml (execution off) + _toc.yml + book/ with executed .ipynb (cell tags, QUICK banner)
#     + the datasheet page + MathJax 3  -->  _build/src/  (tools/make_build_tree.py)
#     + irtlib's and irtbook's wheels and the source archive (`make dist`, tools/dist.py, built beside the
#     pages; linked from the introduction and every chapter's Reproduce box, which also lists its parameters)
#     + the repository and launch buttons when BOOK_REPOSITORY_URL is set (tools/book_config.py;
#     BOOK_REPOSITORY_BRANCH, default main; unset: no repository link anywhere)
#   _build/src/  --jupyter-book build --all -W -n --keep-going (Sphinx with -j$(JOBS))-->  _build/html/
# Each page's kernel is forked from a kernel server that has imported ipykernel and the pages'
# third-party modules once (tools/kernel_forkserver.py; it lives in _build/kernel-server/ and ends with
# the make that started it); IRTBOOK_FORK_KERNEL=0 starts an ordinary kernel per page instead.
# Likewise each page's runner (tools/run_chapter.py) hands its page to a page server that has imported
# jupytext, papermill and jupyter_client once, and which forks the runner that executes it
# (tools/page_server.py, in _build/page-server/); IRTBOOK_PAGE_SERVER=0 runs each page in its own process.
# Chapters run with the repository root as working directory.  A chapter is re-executed
# when its .md, any irtlib/**/*.py or C kernel, a git-tracked file under data/, or the papermill
# arguments (QUICK, PARAMS) change.
# After upgrading dependencies run `make clean` to re-execute everything.

SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
.DELETE_ON_ERROR:
.SUFFIXES:
.PHONY: all venv lock test test-all lint book stage executed dist dist-beside-pages html chapter student pdf mathjax clean distclean FORCE paper-data

all: book

# ---------------------------------------------------------------------------
# Python environment
# ---------------------------------------------------------------------------
PYTHON ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
# MANAGE_VENV=0 uses $(VENV) as it is (no creation, no pip), e.g. the tests' own venv.
MANAGE_VENV ?= 1

# The lock: every package of the book and test environments (pip and setuptools included) at one
# version, with its hashes. `make venv` installs exactly it (--no-deps: nothing outside the lock),
# then irtlib without build isolation (its build backend, setuptools, is in the lock too).
LOCK := requirements-lock.txt
PIP_TOOLS_VERSION := 7.6.2
LOCK_VENV := _build/lock-venv
# `make lock` moves every pin to the newest release within pyproject.toml's ranges; LOCK_UPGRADE= keeps
# the pins it can (only what pyproject.toml's change needs moves).
LOCK_UPGRADE ?= --upgrade

# pip byte-compiles every module it installs, about 120 of the lock's 230 CPU seconds on one core
# (measured from an empty pip cache), though the book and the tests import a small part of it. When
# Python writes byte code itself (PYTHONDONTWRITEBYTECODE unset, as in .ci/run), pip skips that and
# each module is compiled once, at its first import, into the venv (the book's and tests' imports: about
# 15 CPU s). With PYTHONDONTWRITEBYTECODE set nothing would keep those, so pip compiles ahead as before.
PIP_COMPILE ?= $(if $(PYTHONDONTWRITEBYTECODE),--compile,--no-compile)

ifeq ($(MANAGE_VENV),1)
VENV_STAMP := $(VENV)/.installed
$(VENV_STAMP): pyproject.toml bookkit/pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --require-hashes --no-deps -r $(LOCK) $(PIP_COMPILE)
	$(VPY) -m pip install --no-deps --no-build-isolation -e . -e bookkit
	$(VPY) -m pip check
	touch $@
else
VENV_STAMP :=
endif

venv: $(VENV_STAMP)

# Regenerate the lock from pyproject.toml (the wide ranges stay there, for people installing irtlib
# into their own environment). pip-compile runs pip's own resolver with this machine's pip
# configuration (its find-links serves the CPU build of torch; `pip config list`); the lock names
# no index, so it installs wherever pip is configured alike. Commit the result.
lock:
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install -q 'pip-tools==$(PIP_TOOLS_VERSION)'
	$(LOCK_VENV)/bin/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url \
		--no-emit-find-links --extra book --extra test --all-build-deps $(LOCK_UPGRADE) \
		--output-file $(LOCK) pyproject.toml
	$(PYTHON) tools/lock_clean.py $(LOCK)
	@echo "lock: $(LOCK) ($$(grep -c '==' $(LOCK)) pins); sha256 $$(sha256sum $(LOCK) | cut -c1-16)..."

# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------
PYTEST_ARGS ?=
TEST_JOBS ?= 2
FULL ?=
# one test file per worker at a time (a module's fixtures are built once), the files in collection order
# (--no-loadscope-reorder): tests/conftest.py puts the files of slow, browser and book tests first
XDIST := -n $(TEST_JOBS) --dist loadfile --no-loadscope-reorder
FAST_TESTS := -m "not book and not browser and not slow" $(XDIST) --durations=10

ifneq ($(filter 1 true True TRUE yes,$(FULL)),)
test: test-all
else
test: lint $(VENV_STAMP)
	$(VPY) -m pytest $(FAST_TESTS) $(PYTEST_ARGS)
endif

# COVERAGE=0: the same tests without line coverage (Python 3.11's tracer sees every line of every Python
# frame, measured or not, and the subprocess hook starts it in every Python subprocess: about 1.6 to 1.9
# times the CPU of the CLI and protocol tests; benchmarks/RESULTS.md, issue 26 `ci2`)
COVERAGE ?= 1
COV_ARGS := $(if $(filter 0 false False FALSE no,$(COVERAGE)),,--cov=irtlib --cov=irtbook --cov-report=term)

test-all: lint $(VENV_STAMP)
	$(VPY) -m pytest $(COV_ARGS) $(XDIST) --durations=15 $(PYTEST_ARGS)

# ruff (pyflakes, pycodestyle, isort, bugbear, pyupgrade, numpy docstrings: pyproject.toml [tool.ruff])
LINT_PATHS ?= irtlib bookkit tests benchmarks scripts tools book/_ext
lint: $(VENV_STAMP)
	$(VPY) -m ruff check $(LINT_PATHS)

# ---------------------------------------------------------------------------
# Chapters: discovered from _toc.yml (pages whose front matter has jupytext:/kernelspec:)
# ---------------------------------------------------------------------------
BUILD := _build
EXEC_DIR := $(BUILD)/executed
SRC_DIR := $(BUILD)/src
HTML_DIR := $(BUILD)/html
JOBS ?= 2

# toc entries such as "book/intro book/01_data ... book/reproducibility"
NOTEBOOKS := $(shell $(PYTHON) tools/chapters.py --notebooks)
ifneq ($(.SHELLSTATUS),0)
$(warning tools/chapters.py could not read _toc.yml: no chapters found)
endif
# Four pages read the other executed chapters (-p EXECUTED_DIR): book/results and book/scorecard
# collect the claims they published, book/teaching their run times, book/reproducibility their
# papermill metadata (the collectors' too), so it runs last.
SCORECARD := $(filter book/results book/scorecard book/teaching,$(NOTEBOOKS))
LAST := $(filter book/reproducibility,$(NOTEBOOKS))
COLLECTORS := $(SCORECARD) $(LAST)
CHAPTERS := $(filter-out $(COLLECTORS),$(NOTEBOOKS))
executed_path = $(patsubst book/%,$(EXEC_DIR)/%.ipynb,$(1))
EXECUTED_CHAPTERS := $(call executed_path,$(CHAPTERS))
EXECUTED_SCORECARD := $(call executed_path,$(SCORECARD))
EXECUTED_LAST := $(call executed_path,$(LAST))
EXECUTED_COLLECTORS := $(EXECUTED_SCORECARD) $(EXECUTED_LAST)
EXECUTED := $(EXECUTED_CHAPTERS) $(EXECUTED_COLLECTORS)

# Library sources and the data files tracked by git (the committed release under data/;
# untracked downloads do not count): changing any of them, or a C kernel, re-executes every chapter.
LIB_SRC := $(shell find irtlib bookkit -name '*.py' -not -path '*/__pycache__/*' 2>/dev/null | sort)
# The C kernels the library compiles at run time (and their headers) compute too.
KERNEL_SRC := $(shell find irtlib -name '*.c' -o -name '*.h' 2>/dev/null | sort)
# Not data/README.md: the datasheet is a page of the book (tools/make_build_tree.py), not an input.
DATA_SRC := $(filter-out data/README.md,$(wildcard $(shell git ls-files data 2>/dev/null)))

# Byte code of the library's and the book helpers' own sources. With PYTHONDONTWRITEBYTECODE set, Python
# writes none, so every kernel (and every worker of the stage) compiled the irtlib and irtbook modules
# it imports again from source: about 0.35 CPU s a page (0.55 s for all 140 files). compileall writes
# them once, into the usual __pycache__ folders (git-ignored), whenever a source changed; Python only
# reads them. Without the setting Python writes them itself at the first import, and nothing is done.
PYC_STAMP := $(if $(PYTHONDONTWRITEBYTECODE),$(if $(LIB_SRC),$(BUILD)/.pyc-$(words $(LIB_SRC))))
ifneq ($(PYC_STAMP),)
$(PYC_STAMP): $(LIB_SRC) | $(VENV_STAMP)
	@mkdir -p $(@D)
	$(VPY) -m compileall -q -l $(sort $(dir $(LIB_SRC))) > /dev/null
	@touch $@
endif

# Papermill arguments for every chapter.  QUICK=1 (or true/yes) -> -p QUICK True.
QUICK ?=
PARAMS ?=
ifneq ($(filter 1 true True TRUE yes,$(QUICK)),)
QUICK_VALUE := True
else
QUICK_VALUE := False
endif
PAPERMILL_ARGS := -p QUICK $(QUICK_VALUE) $(PARAMS)
export PAPERMILL_ARGS

# Real AIR-Bench 2024 judgments (22 models), which the chapters use for AIR-Bench 2024 when the authors'
# 82-model file is absent: $IRTLIB_REAL_DATA when set, else the shared copy beside the repository.
# They are read, never copied or committed (irtlib/datasets/real.py, irtlib/datasets/sources.py).
IRTLIB_REAL_DATA ?= $(wildcard $(CURDIR)/../shared/realdata/airbench2024_helm22)
export IRTLIB_REAL_DATA
# Real PandaGuard / JailbreakBench judgments for book/09_pandaguard, read the same way.
IRTLIB_PANDAGUARD_DATA ?= $(wildcard $(CURDIR)/../shared/realdata/pandaguard_jbb)
export IRTLIB_PANDAGUARD_DATA

# Which data the paper's six benchmark ids stand for (irtlib.datasets.resolve): auto (the default:
# the authors' released matrices where they are found, see irtlib/datasets/authors.py), real, or
# simulated (`make book IRTLIB_DATA=simulated` builds on the simulated release in data/).
IRTLIB_DATA ?=
export IRTLIB_DATA
# The authors' files: $IRTLIB_PAPER_DATA, else ../shared/realdata/paper, else the per-user cache that
# `make paper-data` (irtlib paper-data download) fills.
export IRTLIB_PAPER_DATA

# The papermill arguments (and the data setting) of the last run, rewritten only when they change, so
# that `make book` after `make book QUICK=1` re-executes every chapter with the new value.
PARAMS_STAMP := $(EXEC_DIR)/.papermill-args
$(PARAMS_STAMP): FORCE
	@mkdir -p $(@D)
	@printf '%s\n' "$$PAPERMILL_ARGS IRTLIB_DATA=$$IRTLIB_DATA" | cmp -s - $@ || \
		printf '%s\n' "$$PAPERMILL_ARGS IRTLIB_DATA=$$IRTLIB_DATA" > $@

# Download the authors' files that are not found anywhere yet (verified against pinned SHA-256).
# Offline it says so in one line and fails; the book builds on whatever data it has.
paper-data: $(VENV_STAMP)
	$(VPY) -m irtlib paper-data download --missing

# The calibrations every chapter shares, as one stage before them (bookkit/irtbook/split_stage.py): every
# split the protocol chapters calibrate with the authors' engine, batched per benchmark on both cores,
# and each benchmark's whole fit by the three engines, into the chapters' cache _build/cache (their
# CACHE_DIR). The stamp lives in that cache, so deleting the cache reruns the stage.
# (A tree without bookkit/irtbook/split_stage.py, such as the tests' tiny books, has no stage.)
STAGE_CACHE := _build/cache
STAGE_STAMP := $(if $(wildcard bookkit/irtbook/split_stage.py),$(STAGE_CACHE)/.stage-$(QUICK_VALUE))
# When this make goes on to run the pages (`make book`, `executed`, `html`, `pdf`), the pages' kernel
# server (tools/kernel_forkserver.py) and page server (tools/page_server.py) start beside the stage, owned by this make ($$PPID of the recipe's
# shell): its imports, about 3 CPU s on one core, then overlap the stage instead of holding up the first
# two pages with both job slots idle (3.8 s in a QUICK build in CI). They wait up to 10 minutes for their
# first page (IRTBOOK_FORK_KERNEL_IDLE, IRTBOOK_PAGE_SERVER_IDLE, left out of their environment keys);
# `make stage` alone starts none.
EARLY_KERNEL_SERVER := $(if $(filter executed html pdf,$(MAKECMDGOALS)),IRTBOOK_FORK_KERNEL_IDLE=600 IRTBOOK_PAGE_SERVER_IDLE=600 \
	$(VPY) tools/run_chapter.py --start-kernel-server --owner $$PPID --work-dir $(EXEC_DIR)/../executing \
	--cwd $(CURDIR) > /dev/null &)
ifneq ($(STAGE_STAMP),)
$(STAGE_STAMP): $(LIB_SRC) $(KERNEL_SRC) $(DATA_SRC) $(PARAMS_STAMP) | $(VENV_STAMP) $(PYC_STAMP)
	$(EARLY_KERNEL_SERVER) $(VPY) -m irtbook.split_stage $(if $(filter True,$(QUICK_VALUE)),--quick) \
		--cache-dir $(STAGE_CACHE) --workers $(JOBS)
	@touch $@
endif
stage: $(STAGE_STAMP)

# Chapter 06's own protocol runs (the paper's text's protocol and the other engine's: most of its work) do not
# read chapter 05's, which 06 waits for. A full build computes them as a job of its own that starts with chapter
# 05 (bookkit/irtbook/comparison_runs.py: chapter 06's default parameters, read from its source, one process),
# and chapter 06 reads them from the cache; otherwise both cores idled while 06 ran them alone at the end.
# Not with PARAMS (the chapter's own parameters may differ: it computes its runs itself) nor in a QUICK build,
# whose two splits a run cost less than the job's start. Chapter 08's profiles of the real data are the first 20
# splits of those runs under the paper's text (Fluid and Random; irtbook.pipeline.split_rows), so 08 waits for the
# job and reads them; without the job (QUICK, PARAMS, `make chapter`) it computes them itself.
COMPARISON_STAMP := $(if $(and $(STAGE_STAMP),$(filter book/06_table2,$(CHAPTERS))),$(if $(strip $(PARAMS)),,$(if \
	$(filter True,$(QUICK_VALUE)),,$(STAGE_CACHE)/.comparison-$(QUICK_VALUE))))
ifneq ($(COMPARISON_STAMP),)
$(COMPARISON_STAMP): book/06_table2.md $(LIB_SRC) $(KERNEL_SRC) $(DATA_SRC) $(PARAMS_STAMP) $(STAGE_STAMP) \
		| $(VENV_STAMP) $(PYC_STAMP)
	$(VPY) -m irtbook.comparison_runs --cache-dir $(STAGE_CACHE)
	@touch $@
$(EXEC_DIR)/06_table2.ipynb $(EXEC_DIR)/08_simulation_study.ipynb: $(COMPARISON_STAMP)
endif

# One executed notebook per chapter; the recursive `make -j$(JOBS) executed` runs them in parallel.
$(EXEC_DIR)/%.ipynb: book/%.md $(LIB_SRC) $(KERNEL_SRC) $(DATA_SRC) $(PARAMS_STAMP) | $(VENV_STAMP) $(PYC_STAMP)
	$(VPY) tools/run_chapter.py $< $@ --cwd $(CURDIR) -- $(PAPERMILL_ARGS) $(CHAPTER_ARGS)

# A page reads the stage's cache through its CACHE_DIR parameter; the pages without one (01_data and the
# introduction; the collectors wait for every chapter anyway) do not wait for the stage, so that make runs
# them in the job slot the stage leaves free (its own workers start only after it has loaded every benchmark).
STAGE_USERS := $(if $(STAGE_STAMP),$(call executed_path,$(basename $(shell grep -l '^CACHE_DIR = ' \
	$(addsuffix .md,$(CHAPTERS)) 2>/dev/null))))
$(STAGE_USERS): $(STAGE_STAMP)

# The results page and the scorecard run after all chapters and collect their claims; the
# reproducibility page runs after them and reads every page's metadata.
$(EXECUTED_SCORECARD): $(EXECUTED_CHAPTERS)
$(EXECUTED_LAST): $(EXECUTED_CHAPTERS) $(EXECUTED_SCORECARD)
$(EXECUTED_COLLECTORS): private CHAPTER_ARGS = -p EXECUTED_DIR $(EXEC_DIR)

# With two chapters at once (JOBS > 1) both cores are busy already, so the chapters that start worker processes
# (an N_JOBS parameter) run in one process each: every worker is a fresh interpreter that imports numpy, scipy and
# irtlib before its first task (09_pandaguard: 13.8 CPU s in one process, 16.7 with two workers; the results do not
# depend on it). `make book JOBS=1` leaves them their own default.
WORKER_CHAPTERS := $(if $(filter-out 1,$(JOBS)),$(call executed_path,$(basename $(shell grep -l '^N_JOBS = ' \
	$(addsuffix .md,$(CHAPTERS)) 2>/dev/null))))
$(WORKER_CHAPTERS): private CHAPTER_ARGS = -p N_JOBS 1

# Chapters run in parallel.  Chapters that reuse another's cached results (irtlib.cache in
# _build/cache) run after it, so the expensive work is done once: the py-irt fits of 02_fit
# serve 03 and 04; the agreement protocol of 05_selection serves 06_table2.
$(EXEC_DIR)/03_ceiling.ipynb $(EXEC_DIR)/04_discrimination.ipynb $(EXEC_DIR)/04b_model_fit.ipynb: $(EXEC_DIR)/02_fit.ipynb
$(EXEC_DIR)/06_table2.ipynb: $(EXEC_DIR)/05_selection.ipynb
# The introduction and the teachers' page count the chapters' exercises from their sources.
$(filter $(EXEC_DIR)/intro.ipynb $(EXEC_DIR)/teaching.ipynb,$(EXECUTED)): $(wildcard book/*.md) _toc.yml

# The longest chapters start first, so neither job idles at the end. GNU make (4.3) with -j2 starts the
# prerequisites of `executed` in this order as job slots free, but one whose own prerequisite still runs
# when make reaches it is passed over until make has started every other one: in a QUICK build in CI,
# 04b (listed right after 10, while 02 still ran) started last, 32 s after 02 had ended, and ran alone
# for 11.5 of its 12 s. So each chapter that reuses another's cache is listed where that one has certainly
# ended: after two more chapters that start after 02 (02 and 05 start first; 04b comes after 10 and 07, 06 after
# 04b). Listed right after 10, 04b was still passed over in QUICK builds, where 05 (6.4 s) ends before 02 (7.7 s):
# make started 10 in 05's slot and reached 04b while 02 still ran, and 04b, the longest QUICK page (9.4 s), ran
# alone at the end. Make reaches the next chapter of the list as soon as it has started the
# one before, and waits there for a free slot. Chapter 06's comparison runs (COMPARISON_STAMP), which need only the
# stage, start right after 05 (in 02's slot) and end about when 10 (in 05's slot) does; 08, which reads them, is
# listed two starts after 10 (after 07 and 04b), where both have ended: listed right after 10 it was reached while
# the job still ran, passed over, and ran alone at the end for its 31 s (a full build on 2 cores, this session's
# first). The short pages come last, to fill the end of both slots, the longest of them first (09, 9 s in a full
# build, listed after 06 it started last and ran alone for 4 of its 9 s); 01_data and intro, which
# do not wait for the stage (STAGE_USERS), run beside it, in the slot it leaves free.
FIRST_CHAPTERS := book/02_fit book/05_selection book/10_beyond book/07_own_benchmark book/04b_model_fit \
	book/08_simulation_study book/00_primer book/09_pandaguard book/06_table2 book/04_discrimination book/01_data \
	book/03_ceiling book/intro
EXECUTED_FIRST := $(foreach p,$(call executed_path,$(foreach c,$(FIRST_CHAPTERS),$(filter $(c),$(CHAPTERS)))),$(p) \
	$(if $(filter $(EXEC_DIR)/05_selection.ipynb,$(p)),$(COMPARISON_STAMP)))
executed: $(EXECUTED_FIRST) $(EXECUTED)
	@test -n "$(EXECUTED)" || { echo "no notebook chapters found in _toc.yml" >&2; exit 1; }

# ---------------------------------------------------------------------------
# The book
# ---------------------------------------------------------------------------
# jupyter-book build with Sphinx reading and writing the pages in $(JOBS) processes (its -j, which Jupyter Book 1's
# command line lacks: tools/jupyter_book_build.py, book/_ext/parallel_reading.py); the same HTML as one process.
JUPYTER_BOOK_BUILD := $(VPY) tools/jupyter_book_build.py --jobs $(JOBS) -- build

# The paper's data are fetched first when they are found nowhere (shared copy, $IRTLIB_PAPER_DATA, the
# per-user cache) and the network allows; otherwise the book builds on what it has, and every page
# that fell back to the simulated release says so.
book: $(VENV_STAMP)
	@mkdir -p $(BUILD); $(VPY) -m irtlib paper-data download --missing > $(BUILD)/paper-data.log 2>&1 || \
		{ echo "make book: the paper's data could not be fetched ($$(tail -n 1 $(BUILD)/paper-data.log)); building on what is here"; }
	$(MAKE) --no-print-directory -j$(JOBS) executed dist-beside-pages
	$(MAKE) --no-print-directory html

# irtlib's and irtbook's wheels and the source archive that the book links to (tools/dist.py). They are built from
# the repository's files alone, so `make book` builds them beside the pages, not after them: once every chapter has
# run, beside the short pages that collect the chapters' results, which leave a job slot free (at the start they
# held up the first page and the stage of a QUICK build); the render copies them. tools/dist.py keeps what it built
# while its inputs' paths, sizes and times are the same (--reuse), so the render's own `dist` costs little.
# (A tree without pyproject.toml, such as the tests' tiny books, ships none: tools/make_build_tree.py says so.)
DIST_DIR := $(BUILD)/dist
DIST := $(if $(wildcard pyproject.toml),$(VPY) tools/dist.py $(DIST_DIR) --reuse > /dev/null)
dist: | $(VENV_STAMP)
	$(DIST)
dist-beside-pages: $(EXECUTED_CHAPTERS) | $(VENV_STAMP)
	$(DIST)

# Check the executed notebooks, assemble _build/src/ and render it (always a full build).
html: executed dist | $(VENV_STAMP)
	$(VPY) tools/check_executed.py $(EXECUTED)
	$(VPY) tools/make_build_tree.py --executed $(EXEC_DIR) --out $(SRC_DIR) --dist $(DIST_DIR)
	rm -rf $(HTML_DIR)
	$(JUPYTER_BOOK_BUILD) --all -W -n --keep-going --path-output $(CURDIR) $(SRC_DIR)
	test -f $(HTML_DIR)/index.html
	@echo "book: $(HTML_DIR)/index.html"

# Re-execute one chapter regardless of timestamps, with an ordinary kernel in its own runner (a server's
# imports cost more than one page saves; IRTBOOK_FORK_KERNEL=1 and IRTBOOK_PAGE_SERVER=1 use them).  This does not re-render the HTML; a later
# `make book` renders the notebook as it is (the reproducibility page shows its parameters)
# unless its sources changed meanwhile.
CH ?=
CH_NAME := $(basename $(patsubst book/%,%,$(CH)))
chapter: $(STAGE_STAMP) | $(VENV_STAMP) $(PYC_STAMP)
	@test -n "$(CH_NAME)" || { echo 'usage: make chapter CH=<name> [QUICK=1] [PARAMS="-p KEY VALUE"]' >&2; exit 2; }
	@test -f book/$(CH_NAME).md || { echo "no chapter book/$(CH_NAME).md" >&2; exit 2; }
	IRTBOOK_FORK_KERNEL=$${IRTBOOK_FORK_KERNEL:-0} IRTBOOK_PAGE_SERVER=$${IRTBOOK_PAGE_SERVER:-0} \
	$(VPY) tools/run_chapter.py book/$(CH_NAME).md $(EXEC_DIR)/$(CH_NAME).ipynb --cwd $(CURDIR) \
		-- $(PAPERMILL_ARGS) $(if $(filter book/$(CH_NAME),$(COLLECTORS)),-p EXECUTED_DIR $(EXEC_DIR))
	$(VPY) tools/check_executed.py $(EXEC_DIR)/$(CH_NAME).ipynb

# ---------------------------------------------------------------------------
# Course kit and PDF
# ---------------------------------------------------------------------------
STUDENT_DIR := $(BUILD)/student
PDF_DIR := $(BUILD)/pdf

# Student notebooks (solution cells emptied, solution dropdowns removed, no outputs) and answer
# notebooks, straight from the chapter sources: nothing is executed.
student: | $(VENV_STAMP)
	rm -rf $(STUDENT_DIR)
	$(VPY) tools/student.py --out $(STUDENT_DIR) $(NOTEBOOKS)

# The executed chapters rendered as one HTML page (jupyter-book's singlehtml builder, in its own
# tree so that the HTML book is left alone), then printed to PDF by headless Chromium.
pdf: executed | $(VENV_STAMP)
	$(VPY) tools/check_executed.py $(EXECUTED)
	$(VPY) tools/make_build_tree.py --executed $(EXEC_DIR) --out $(PDF_DIR)/src --no-downloads
	rm -rf $(PDF_DIR)/_build
	$(JUPYTER_BOOK_BUILD) --builder singlehtml -W -n --keep-going --path-output $(CURDIR)/$(PDF_DIR) $(PDF_DIR)/src
	$(VPY) tools/pdf.py $(PDF_DIR)/_build/singlehtml/index.html $(PDF_DIR)/book.pdf
	@echo "pdf: $(PDF_DIR)/book.pdf"

# ---------------------------------------------------------------------------
# MathJax 3 ships with the book (_build/html/_static/mathjax), normally from the pip package
# django-static-mathjax (the `book` extra).  Without it, tools/make_build_tree.py takes this
# copy from npm; without either the pages load MathJax from a CDN (it says so).
# ---------------------------------------------------------------------------
MATHJAX_VERSION := 3.2.2
MATHJAX_DIR := $(BUILD)/mathjax

mathjax: $(MATHJAX_DIR)/es5/tex-mml-chtml.js
$(MATHJAX_DIR)/es5/tex-mml-chtml.js:
	rm -rf $(MATHJAX_DIR) $(MATHJAX_DIR).tmp
	mkdir -p $(MATHJAX_DIR).tmp
	cd $(MATHJAX_DIR).tmp && npm pack --silent mathjax@$(MATHJAX_VERSION) > /dev/null && tar xzf mathjax-*.tgz
	mv $(MATHJAX_DIR).tmp/package $(MATHJAX_DIR)
	rm -rf $(MATHJAX_DIR).tmp

# ---------------------------------------------------------------------------
clean:
	rm -rf $(BUILD) artifacts

distclean: clean
	rm -rf $(VENV)
