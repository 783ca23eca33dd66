# minibert: `make demo` runs the main job, `make test` runs every test.
# Both create the virtual environment .venv on first use.

# The first of these that runs and is Python 3.11, 3.12 or 3.13: the versions whose results
# minibert checks to be the same (README, "Python versions").
PYTHON ?= $(shell for p in python3 python3.13 python3.12 python3.11; do \
	$$p -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))' >/dev/null 2>&1 \
	&& { command -v $$p; break; }; done)
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
# make demo DEVICE=cuda: the demo on the GPU, with CuPy installed into .venv from the extra
# CUDA_EXTRA: cuda12 runs on any NVIDIA driver for CUDA 12 or newer, cuda13 on a CUDA 13 driver
DEVICE     ?= cpu
CUDA_EXTRA ?= cuda12

.PHONY: demo test gpu-test bench clean

$(PY):
	@test -n "$(PYTHON)" || { echo "minibert: no Python 3.11, 3.12 or 3.13 found (python3 is $$(python3 --version 2>&1)); name one: make $(MAKECMDGOALS) PYTHON=/path/to/python3.12" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# runtime dependencies only: enough for the demo
$(VENV)/.base: pyproject.toml | $(PY)
	$(PIP) install --quiet -e .
	touch $@

# everything the tests and notebooks need (torch==2.13.0 CPU and transformers as references)
$(VENV)/.test: pyproject.toml | $(PY)
	$(PIP) install --quiet -e ".[test,notebooks]"
	touch $@ $(VENV)/.base

# CuPy and CUDA's libraries, for DEVICE=cuda (README, "A GPU lab")
$(VENV)/.$(CUDA_EXTRA): pyproject.toml | $(PY)
	$(PIP) install --quiet -e ".[$(CUDA_EXTRA)]"
	touch $@ $(VENV)/.base

demo: $(VENV)/.base $(if $(filter cuda,$(DEVICE)),$(VENV)/.$(CUDA_EXTRA))
	$(PY) -m minibert demo --device $(DEVICE)

# the tests in TEST_PROCS processes, one per core the machine has (pytest-xdist; a notebook's cells,
# and a test file's tests, stay in one process); make test TEST_PROCS=0 runs them all in this one
TEST_PROCS ?= $(shell nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
test: $(VENV)/.test
	$(PY) -m pytest -n $(TEST_PROCS) --dist loadscope --nbval --nbval-sanitize-with notebooks/sanitize.cfg

bench: $(VENV)/.test
	$(PY) benchmarks/bench_step.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
