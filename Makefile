# Every target sets up .venv first; nothing needs to be installed but Python 3.11.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# pytest-xdist workers for `make test`: one more than the CPUs, at most 4 (each may load torch); 0
# runs serially. The extra one fills the time the others wait on servers and trainers starting
# (2 workers on 2 cores left the CPUs 18% idle).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
# The tests write bytecode (to __pycache__/, ignored by git) even where the environment says not
# to (PYTHONDONTWRITEBYTECODE=1 here): otherwise each of the hundreds of processes they start
# compiles jobs/ and vtx/ again (`vtx --help`: 1.5 s of CPU without, 0.7 s with).

.PHONY: setup browser demo test lint bench gpu-wheels bench-gpu clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "vtx: installing into $(VENV) (torch CPU, transformers, the Google clients, pulumi):"
	@echo "vtx: about 4 minutes on 2 cores the first time, then only when pyproject.toml changes"
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install -c constraints.txt -e '.[trainer,dev]'
	touch $(STAMP)

# Headless Chromium for the tests of the pages vtx writes (tests/chromium.py): Debian's package,
# installed where it is missing and this user may (root, or sudo without a password). Elsewhere
# those tests skip, saying how to install it; under CI=true a missing browser fails the run.
browser:
	@if command -v chromium >/dev/null || [ -x /usr/bin/chromium ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then as=; elif sudo -n true 2>/dev/null; then as="sudo -n"; \
	else as=none; fi; \
	if command -v apt-get >/dev/null && [ "$$as" != none ]; then \
		echo "vtx: installing Debian's chromium for the browser tests (a minute or two)"; \
		$$as apt-get update -qq && $$as env DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq chromium >/dev/null && exit 0; \
	fi; \
	echo "vtx: no headless Chromium, and it could not be installed here (needs Debian's apt-get"; \
	echo "vtx: and root or passwordless sudo): the browser tests will skip. Install it yourself:"; \
	echo "vtx:   sudo apt-get install chromium   (any chromium on PATH will do)"; \
	if [ "$${CI:-}" = true ]; then echo "vtx: CI=true: a missing browser fails the run"; exit 1; fi

demo: setup
	$(VENV)/bin/vtx demo

test: setup browser
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q -n $(TEST_WORKERS) --maxprocesses=4 --dist loadscope --no-loadscope-reorder --durations=10

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ruff format --check .

bench: setup
	$(PY) -m bench

# The GPU run (bench/trainer/gpu.py), in two steps. Here, with PyPI: the wheels the GPU machine's image
# lacks. There, with no network and no .venv (its own Python has PyTorch with CUDA): install
# them, then measure into $(OUT) (default build/gpu). Rehearse on CPU: python -m bench.trainer.gpu --dry-run
GPU_WHEELS := build/gpu-wheels
GPU_PYTHON ?= python3
# Seconds after which bench.trainer.gpu skips the parts it has not started (each names its least cost).
GPU_BUDGET_S ?= 480
gpu-wheels: setup
	$(PY) -m pip download --quiet --no-deps --only-binary=:all: --implementation cp \
		--python-version 3.12 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
		-r bench/trainer/gpu-wheels.txt -d $(GPU_WHEELS)

bench-gpu:
	$(GPU_PYTHON) -m pip install --quiet --no-index --no-deps --find-links $(GPU_WHEELS) \
		-r bench/trainer/gpu-wheels.txt
	$(GPU_PYTHON) -m bench.trainer.gpu --output $${OUT:-build/gpu} --budget-s $(GPU_BUDGET_S)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
