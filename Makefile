# Two entry points: `make demo` and `make test`. Both set up .venv once; a stamp file
# that depends on pyproject.toml keeps later runs from installing anything.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: demo test lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/gnomon summary $$($(BIN)/python -c 'from gnomon.bundled import model_path; print(model_path("light_resnet50"))')

test: $(STAMP)
	$(BIN)/python -m pytest -q
	$(BIN)/lit -sv filecheck/

lint: $(STAMP)
	$(BIN)/ruff check compiler dialects passes runtime tests bench
	$(BIN)/pyright

clean:
	rm -rf $(VENV)
