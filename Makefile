# Two entry points do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# A Python >= 3.12 (ArviZ 1.x line) for the cross-version smoke run, if this machine has one.
PY312 ?= $(shell for p in $$(ls -d $$(pyenv root 2>/dev/null)/versions/3.1[2-9]*/bin/python 2>/dev/null) $$(command -v python3.12 python3.13 2>/dev/null); do $$p -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null && echo $$p && break; done)
SMOKE := tests/inference/test_nuts.py tests/core/test_likelihood.py tests/data/test_annotations.py

.PHONY: demo test test-all golden real-data smoke-py312 docs bench gates install clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/noisycal-bayes demo

# Tests and the package's doctests (every module under noisycal_bayes/ is imported: none runs anything at import).
TEST_PATHS := --doctest-modules tests noisycal_bayes

test: $(STAMP)
	$(PY) -m pytest -q -n 2 -m "not slow" --durations=15 $(TEST_PATHS)

# Everything, including the tests marked slow (NUTS through the CLI, layout variants, heavy SBC).
test-all: $(STAMP)
	$(PY) -m pytest -q -n 2 $(TEST_PATHS)

# The golden corpus (tests/golden/README.md): today's outputs of the public entry points, compared entry by entry.
golden: $(STAMP)
	$(PY) -m pytest -q -n 2 -p no:cacheprovider tests/golden

# The real-data matrix: `noisycal-bayes evaluate`, both routes, on every set of the shared data folder
# ($$NOISYCAL_SHARED_DATA or ../shared/data beside the checkout), full size; fails on any error. Without the folder
# it says so and passes, unless REQUIRE_DATA=1 (CI). Results: benchmarks/results/real_data_matrix.json.
real-data: $(STAMP)
	$(PY) benchmarks/real_data_matrix.py $(if $(REQUIRE_DATA),--require-data)

# ArviZ 1.x (xarray DataTree) needs Python >= 3.12: run a smoke subset there as well (DESIGN §7).
smoke-py312:
	@if [ -z "$(PY312)" ]; then echo "no Python >= 3.12 on this machine: smoke run skipped"; else \
	  [ -x .venv312/bin/python ] || $(PY312) -m venv .venv312; \
	  .venv312/bin/python -m pip install --quiet --upgrade pip && \
	  .venv312/bin/python -m pip install --quiet -e ".[dev]" && \
	  .venv312/bin/python -m pytest -q -n 2 -m "not slow" -p no:cacheprovider $(SMOKE); fi

# The documentation site in docs/_build/html (open docs/_build/html/index.html): README, docs/*.md, the API
# reference from the docstrings, and the notebooks executed at their small size; warnings are errors.
# Executed notebooks are cached in docs/_build/.jupyter_cache (a rebuild re-runs only changed ones).
DOCS_STAMP := $(VENV)/.installed-docs

$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e ".[dev,docs]"
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(PY) -m sphinx -W --keep-going -q -b html -c docs . docs/_build/html

# Benchmarks (not tests): each script writes benchmarks/results/bench_*.json, then docs/performance.md is regenerated.
bench: $(STAMP)
	$(PY) -m pip install --quiet -e ".[dev,bench]"
	for f in benchmarks/bench_*.py; do $(PY) $$f || exit 1; $(PY) benchmarks/render_performance.py || exit 1; done

# Performance gates (not in CI, not in `make test`; about 5 minutes): the headline case of each benchmark in one
# process, compared with benchmarks/results/gates_baseline.json at +-10% (docs/performance.md, "Performance gates").
gates: $(STAMP)
	$(PY) -m pip install --quiet -e ".[dev,bench]"
	$(PY) benchmarks/gates.py

clean:
	rm -rf $(VENV) .venv312 docs/_build docs/api
