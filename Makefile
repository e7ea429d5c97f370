# Every target sets up .venv first; nothing needs to be installed but Python 3.11.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# pytest-xdist workers for `make test`: one per CPU, at most 4 (each may load torch); 0 runs serially.
TEST_WORKERS ?= logical

.PHONY: setup demo test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "vtx: installing into $(VENV) (torch CPU, transformers, the Google clients, pulumi):"
	@echo "vtx: about 4 minutes on 2 cores the first time, then only when pyproject.toml changes"
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install -c constraints.txt -e '.[trainer,dev]'
	touch $(STAMP)

demo: setup
	$(VENV)/bin/vtx demo

test: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q -n $(TEST_WORKERS) --maxprocesses=4 --dist loadscope

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ruff format --check .

bench: setup
	$(PY) -m bench

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
