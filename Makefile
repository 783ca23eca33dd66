# minibert: `make demo` runs the main job, `make test` runs every test.
# Both create the virtual environment .venv on first use.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip

.PHONY: demo test gpu-test bench clean

$(PY):
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

demo: $(VENV)/.base
	$(PY) -m minibert demo

test: $(VENV)/.test
	$(PY) -m pytest --nbval --nbval-sanitize-with notebooks/sanitize.cfg

bench: $(VENV)/.test
	$(PY) benchmarks/bench_step.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
