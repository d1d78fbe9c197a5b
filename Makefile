# make demo | make test | make docs | make bench: each sets up .venv first when needed.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
HLOGEN := $(VENV)/bin/hlogen
STAMP  := $(VENV)/.installed

.PHONY: setup demo test test-long docs fuzz bench clean lint-imports lint test-iree

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

setup: $(STAMP)

# The main job on a sample, on the CPU: emit StableHLO artifacts from Python
# definitions, then compile and run them with PJRT and with the reference interpreter.
demo: $(STAMP)
	$(HLOGEN) devices
	mkdir -p out/elementwise out/broadcasting  # emit writes into folders that exist
	$(HLOGEN) emit samples/elementwise.py -o out/elementwise --force
	$(HLOGEN) emit samples/broadcasting.py -o out/broadcasting --force
	$(HLOGEN) run out/broadcasting/composition_vector_and_1x2.mlir --backend cpu \
		--input 4xf32=1,2,3,4 --input 1x2xf32=5,6
	$(HLOGEN) run out/elementwise/integer_division.mlir --backend cpu \
		--input 4xs32=7,-7,-2147483648,5 --input 4xs32=2,0,-1,0
	$(HLOGEN) run samples/elementwise.py --function total_order --backend interpret \
		--input 4xf32=-0.0,nan,1,-inf --input 4xf32=0.0,inf,nan,-1
	$(HLOGEN) run samples/indexing.py --function top_3 --backend cpu \
		--input 2x5xf32=1,9,3,9,0,-1,-2,-3,-4,-5
	$(HLOGEN) run samples/computations.py --function softmax --check-interpret \
		--input 2x4xf32=1,2,3,4,0,0,0,10

# one pytest worker per core, at most 4 (the suite passes in 2 workers in 14 minutes on 2 cores)
test: $(STAMP)
	$(PY) -m pytest tests -n auto --maxprocesses 4

# the tests marked long (tests/conftest.py's LONG: end-to-end runs of 25 s or more each)
test-long: $(STAMP)
	$(PY) -m pytest tests -m long -n auto --maxprocesses 4

# IREE as a backend (the extra hlogen[iree], about 480 MB: not in the test extra, so `make
# test` skips its tests): installs the extra into .venv, runs the tests marked iree, then
# `hlogen check --backend iree` over 150 of StableHLO's testdata files (fails on a failure
# that is not a known deviation: a new IREE that fixes or breaks something shows here).
IREE_STAMP := $(VENV)/.iree-installed
$(IREE_STAMP): pyproject.toml $(STAMP)
	$(PY) -m pip install --quiet -e ".[test,iree]"
	touch $(IREE_STAMP)

test-iree: $(IREE_STAMP)
	$(PY) -m pytest -q -m "iree and not slow" tests
	$(PY) benchmarks/iree_backend.py --check

# The documentation site (mkdocs.yml, docs/) into site/; --strict fails on a broken link
# or anchor. Installs the docs extra (MkDocs) into .venv itself when needed.
DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e ".[docs]"
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(PY) -m mkdocs build --strict --site-dir site

# The layering contract alone (pyproject.toml [tool.importlinter]; make test checks it too).
lint-imports: $(STAMP)
	$(VENV)/bin/lint-imports

# ruff alone (pyproject.toml [tool.ruff]; make test runs it: tests/test_lint.py).
lint: $(STAMP)
	$(VENV)/bin/ruff check

# The fuzz suite at 20 times the cases `make test` runs, with a new seed each time
# (HLOGEN_FUZZ_SEED=N repeats a run); prints the counts docs/robustness.md records.
fuzz: $(STAMP)
	HLOGEN_FUZZ_SCALE=$${HLOGEN_FUZZ_SCALE:-20} HLOGEN_FUZZ_SEED=$${HLOGEN_FUZZ_SEED:-$$RANDOM} \
		$(PY) -m pytest tests/test_fuzz.py -q -s

# Not part of `make test` (the tests marked slow): hlogen fuzz of XLA CPU against the
# interpreter for a few minutes (HLOGEN_FUZZ_SECONDS, HLOGEN_FUZZ_SEED), each finding
# checked again and explained; prints what it found (benchmarks/RESULTS.md records a run).
.PHONY: fuzz-backends
fuzz-backends: $(STAMP)
	$(PY) -m pytest tests/test_fuzz_backends.py -m slow -q -s

bench: $(STAMP)
	$(PY) benchmarks/emit.py
	$(PY) benchmarks/dispatch.py
	$(PY) benchmarks/softmax.py
	$(PY) benchmarks/linalg.py
	$(PY) benchmarks/collectives.py
	$(PY) benchmarks/xla_client.py
	$(PY) benchmarks/generate.py
	$(PY) benchmarks/reduce.py
	$(PY) benchmarks/fuzz.py
	$(PY) benchmarks/random_inputs.py
	$(PY) benchmarks/compare.py
	$(PY) benchmarks/pass_bisection.py
	$(PY) benchmarks/plugin.py

clean:
	rm -rf $(VENV) out site .pytest_cache .hypothesis *.egg-info

# StableHLO's conformance files (../shared/conformance/stablehlo) on the reference
# interpreter and PJRT CPU; reports in out/conformance.{xml,jsonl}. `make test` runs a
# stratified sample of them (tests/test_conformance.py).
CONFORMANCE ?= ../shared/conformance/stablehlo
.PHONY: conformance
conformance: $(STAMP)
	$(HLOGEN) check $(CONFORMANCE) --backend all --junit out/conformance.xml --json out/conformance.jsonl

# Not part of `make test`: the pages hlogen draws, loaded in headless Chromium and checked
# from the DOM and a screenshot (tests/browser_check.py); Model Explorer's page too
# (`hlogen view`, the extra hlogen[view]). Installs Debian's chromium and graphviz (the
# SVG tests need its dot) with apt-get, as root, and the extra into .venv.
.PHONY: check-browser
check-browser: $(STAMP)
	command -v chromium >/dev/null && command -v dot >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends chromium fonts-dejavu-core graphviz)
	$(PY) -m pip install --quiet -e ".[test,view]"
	$(PY) -m pytest -q tests/browser_check.py tests/test_graph_cli.py -k "browser or renders or explorer or svg"
