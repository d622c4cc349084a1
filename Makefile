# Developer loop. The README's two quick-start commands are `make demo` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
EXAMPLE ?= examples/synthetic_training.pt.trace.json.gz

.PHONY: demo install dev test lint typecheck pytest fuzz-long bench bench-hta bench-scale bench-ranks fixtures clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# the compiled part (the Kineto column scanner) is built by the
# install: a changed C source reinstalls
BUILD_INPUTS := pyproject.toml setup.py src/traceforensics/ingest/kineto/_colscan.c

$(VENV)/.installed: $(BUILD_INPUTS) | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.dev-installed: $(BUILD_INPUTS) | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed

dev: $(VENV)/.dev-installed

## demo: install and analyze the bundled sample trace
demo: install
	$(BIN)/tf analyze $(EXAMPLE)

## test: install dev extras, then lint, type-check and run the whole test suite
test: dev lint typecheck pytest

lint: dev
	$(BIN)/ruff check src tests bench tools setup.py
	$(BIN)/ruff format --check src tests bench tools setup.py

typecheck: dev
	$(BIN)/mypy

pytest: dev
	$(BIN)/pytest -q -n 2

## fuzz-long: the long fuzz profiles (docs/reliability.md); FUZZ_CASES per mutation family,
## SHAPE_EXAMPLES drawn trace shapes in all (tools/shapes_long.py)
FUZZ_CASES ?= 900
SHAPE_EXAMPLES ?= 20000
fuzz-long: dev
	$(BIN)/python tools/fuzz_long.py --cases $(FUZZ_CASES) --json fuzz-long.json
	$(BIN)/python tools/shapes_long.py --examples $(SHAPE_EXAMPLES) --json shapes-long.json

## bench: speed and memory benchmarks (ratios against peers/baselines, one run)
bench: dev
	$(BIN)/python bench/bench_kineto_load.py
	$(BIN)/python bench/bench_analysis.py
	$(BIN)/python bench/bench_nsys.py
	$(BIN)/python bench/bench_monitor.py

## bench-hta: side by side with Holistic Trace Analysis (installs it into bench/.venv-hta)
bench-hta: dev
	$(BIN)/python bench/bench_hta.py

## bench-scale: tf vs HTA on the ResNet-50 trace tiled 1x/10x/40x, whole process (issue 12)
bench-scale: dev
	$(BIN)/python bench/bench_scale.py --copies 1,10,40

## bench-ranks: 64 rank files of the ResNet-50 trace, tf analyze DIR --jobs 1 vs 2 (issue 14)
bench-ranks: dev
	$(BIN)/python bench/bench_ranks.py --ranks 64

## fixtures: rebuild the project's own generated fixtures and the bundled example
fixtures: dev
	$(BIN)/python tools/make_nsys_fixtures.py
	$(BIN)/python tools/make_example.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache src/*.egg-info build
	find src -name "*.so" -delete
