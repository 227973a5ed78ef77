"""The pipeline tests run stages of the tiny random model in this process (test verifiers and
prompt files: tests/conftest.py)."""

from __future__ import annotations

import torch

torch.set_num_threads(1)  # tiny models: one thread is fastest, and immune to a busy machine
