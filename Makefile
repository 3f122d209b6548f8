# Two entry points: `make demo` and `make test`. Both set up .venv once; a stamp file
# that depends on pyproject.toml keeps later runs from installing anything.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: demo test lint clean conformance .typecheck

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python -m pip install --quiet --no-deps torchrec==1.8.0
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/gnomon run --profile $$($(BIN)/python -c 'from gnomon.bundled import model_path; print(model_path("light_resnet50"))')

# Two pytest workers, one per core. `--dist loadgroup` sends all the tests of one model (its `xdist_group`, see
# tests/conftest.py) to one worker, which imports and compiles the model once; `loadfile` would keep a model's
# tests together only within a file and put the largest file on one worker. OpenMP threads that wait for work
# sleep rather than spin: with two workers on two cores a spinning thread takes the core the other worker needs.
test: $(STAMP)
	OMP_WAIT_POLICY=passive $(BIN)/python -m pytest -q -n 2 --dist loadgroup
	$(BIN)/lit -v filecheck/

# ONNX's node test cases through gnomon's ONNX backend, each in its own process (bench/conformance.py): totals, a
# per-op table and the largest failure groups; every case's result goes to bench/out/conformance.json. It takes tens
# of minutes; `make conformance CONFORMANCE_ARGS=--ops=Add,Conv` runs the cases of a few ops.
conformance: $(STAMP)
	$(BIN)/python bench/conformance.py --json bench/out/conformance.json $(CONFORMANCE_ARGS)

lint: .typecheck
	$(BIN)/ruff check compiler dialects passes runtime tests bench
	$(BIN)/pyright
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_layers.py

clean:
	rm -rf $(VENV) .typecheck

# pyright cannot follow setuptools' package-dir mapping of an editable install, so lint type-checks
# a tree of symlinks laid out as the installed package is.
.typecheck: $(STAMP)
	rm -rf .typecheck && mkdir -p .typecheck/gnomon
	for f in compiler/*; do ln -s ../../$$f .typecheck/gnomon/; done
	for d in dialects passes runtime; do ln -s ../../$$d .typecheck/gnomon/$$d; done
