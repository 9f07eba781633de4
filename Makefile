# qnb developer commands. Each target does its own set-up, so on a fresh machine
# `make lab` or `make test` is the only command needed.
#
#   make lab          JupyterLab on notebooks/ (the demos)
#   make test         system packages + venv, then the test suite and, beside it, the
#                     notebooks (one worker per CPU each; TEST_WORKERS=1: one process)
#   make test-notebooks  only the notebooks, under nbval (as `make test` checks them)
#   make demo         execute the notebooks headless to HTML under build/demo/
#   make bench        run every benchmarks/bench_*.py
#   make lint         ruff check + ruff format --check
#   make format       ruff format + ruff check --fix (rewrites files: format only your own)
#   make venv         create/update .venv (quick when pyproject.toml is unchanged)
#   make system-deps  Vulkan driver (lavapipe) and Chromium, if missing (root on Debian/Ubuntu)

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
EXTRAS ?= dev,lab,wgpu,cuda
STAMP  := $(VENV)/.qnb-installed

# Mesa's Vulkan driver complains on stderr without a private runtime dir. A directory in
# the build tree is private to this checkout and survives between runs.
RUNTIME_DIR := $(CURDIR)/build/xdg-runtime
RUN_ENV := XDG_RUNTIME_DIR=$(RUNTIME_DIR)

NOTEBOOKS := $(sort $(wildcard notebooks/*.ipynb)) $(sort $(wildcard notebooks/puzzles/*.ipynb))

# The tests and the notebooks run on pytest-xdist workers, one per CPU (TEST_WORKERS=1:
# in this process, one after another). The tests: --dist loadgroup, where tests/conftest.py
# keeps each file's tests on one worker (some share a module's fixture, an IPython shell or
# a race report, or its state) except the long files it names, handed out test by test. A
# notebook's cells run in order in one kernel: --dist loadfile.
TEST_WORKERS ?= auto
WORKERS := $(if $(filter 1,$(TEST_WORKERS)),,-n $(TEST_WORKERS))
PARALLEL := $(if $(WORKERS),$(WORKERS) --dist loadgroup)
NOTEBOOK_PARALLEL := $(if $(WORKERS),$(WORKERS) --dist loadfile)
LINT_PATHS := qnb tests benchmarks

.PHONY: venv system-deps test test-notebooks lab demo bench lint format runtime-dir clean

venv: $(STAMP)

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "qnb needs Python >= 3.10")'
	$(PYTHON) -m venv $(VENV)

# Reinstall only when the package metadata changes (or the venv is new). pip is upgraded
# first: Python 3.10.0's own pip cannot install a pyproject.toml project editable, and a
# current pip installs these extras in 36 s where Python 3.11's (23.2) takes 61 s, for 3 s
# of upgrade. pip byte-compiles what it installs one file after another (half its time);
# compileall does the same files on every CPU, leaving out the packages' own test suites
# and what nothing here imports, or only a sliver of: pip and setuptools, SciPy (the
# notebooks' second opinion: scipy.linalg), fontTools (matplotlib's PDF/SVG fonts),
# pygments' lexers (IPython takes Python's) and wcwidth: 23 of 72 MB of source. What is
# imported of them is compiled at its first import. (Not skipped: where
# PYTHONDONTWRITEBYTECODE is set, as on some CI runners, every test process would compile
# what it imports again.)
NOT_IMPORTED := /site-packages/(pip|setuptools|scipy|fontTools|wcwidth|pygments/lexers)/|/tests?/
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-compile -e '.[$(EXTRAS)]'
	$(PY) -m compileall -q -j 0 -x '$(NOT_IMPORTED)' \
		"$$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
	$(PY) scripts/configure_lab.py $(VENV)
	@touch $@

system-deps:
	@PYTHON=$(PYTHON) scripts/install_system_deps.sh

runtime-dir:
	@mkdir -p $(RUNTIME_DIR) && chmod 700 $(RUNTIME_DIR)

# The notebooks run beside the tests (their output printed whole after the tests'): their
# kernels take the CPU time the tests' workers leave idle (start-up, waits on subprocesses,
# the last file) instead of adding their own time after the tests. TEST_WORKERS=1: one
# after the other.
NOTEBOOK_LOG ?= build/test-notebooks.log
# The tests do not run notebooks in-process: without the nbval plugin each of their pytest
# processes starts 8 s sooner (nbval imports nbformat, whose jsonschema builds an IRI
# grammar with lark on import).
NO_NBVAL := -p no:nbval
test: system-deps venv runtime-dir
ifeq ($(WORKERS),)
	$(RUN_ENV) $(PY) -m pytest $(NO_NBVAL) tests
	@$(MAKE) --no-print-directory test-notebooks
else
	@$(MAKE) --no-print-directory test-notebooks > $(NOTEBOOK_LOG) 2>&1 & notebooks=$$!; \
	echo "$(RUN_ENV) $(PY) -m pytest $(NO_NBVAL) $(PARALLEL) tests  (the notebooks run beside it)"; \
	$(RUN_ENV) $(PY) -m pytest $(NO_NBVAL) $(PARALLEL) tests; tests=$$?; \
	wait $$notebooks; checked=$$?; cat $(NOTEBOOK_LOG); rm -f $(NOTEBOOK_LOG); \
	[ $$tests -eq 0 ] && [ $$checked -eq 0 ]
endif

# nbval compares every notebook cell's output with the stored one (after the sanitizers in
# notebooks/sanitize.cfg). scripts/run_notebooks.py --check runs it the way the outputs were
# stored: a fresh, empty kernel cache (build/nbval-cache), and the reference machine whatever
# this one has (no CUDA device, wgpu on lavapipe, so "auto" picks cpu), so the stored
# "[cpu]" status lines and "not available" notes read the same on a GPU machine. The
# notebooks share no kernel, so each can run on its own worker against that one cache.
test-notebooks: venv runtime-dir
ifneq ($(NOTEBOOKS),)
	$(RUN_ENV) $(PY) scripts/run_notebooks.py --check --pytest-args "$(NOTEBOOK_PARALLEL)" $(NOTEBOOKS)
else
	@echo "no notebooks/*.ipynb yet: skipping the notebook check"
endif

# The "auto" backend (the default) picks CUDA, then a hardware wgpu adapter, then cpu.
# Extra server flags: make lab LAB_ARGS="--ip=0.0.0.0 --port=9000"
LAB_ARGS ?=
# A machine with no display (a server, a container) opens no browser: Jupyter's own "No web
# browser found" would come right after the install step; say where to open it instead.
HEADLESS := $(if $(or $(DISPLAY),$(WAYLAND_DISPLAY),$(filter Darwin,$(shell uname -s))),,yes)
lab: system-deps venv runtime-dir
	@mkdir -p notebooks
	@$(if $(HEADLESS),echo "No display here: open the http://127.0.0.1:8888/lab?token=... URL Jupyter prints below in a browser (from another machine: ssh -L 8888:127.0.0.1:8888 this-host, then that URL).")
	$(RUN_ENV) $(VENV)/bin/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) $(if $(HEADLESS),--no-browser) $(LAB_ARGS) notebooks/

demo: venv runtime-dir
ifneq ($(NOTEBOOKS),)
	@# A fresh kernel cache, as on a first run, so the pages read the same every time.
	rm -rf build/demo build/demo-cache
	@mkdir -p build/demo
	@# Pages without widget state show each widget's static view (no CDN: works offline).
	$(RUN_ENV) QNB_CACHE_DIR=$(CURDIR)/build/demo-cache $(PY) scripts/demo_html.py build/demo $(NOTEBOOKS)
	@echo "demo HTML written to build/demo/"
else
	@echo "no notebooks/*.ipynb yet: nothing to render"
endif

bench: venv runtime-dir
	$(RUN_ENV) $(PY) -m benchmarks

lint: venv
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)

# Narrow it to your own files: make format LINT_PATHS="qnb/cli.py tests/test_cli.py"
format: venv
	$(VENV)/bin/ruff format $(LINT_PATHS)
	$(VENV)/bin/ruff check --fix $(LINT_PATHS)

clean:
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache
