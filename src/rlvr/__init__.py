"""rlvr: reinforcement learning with verifiable rewards for language models.

The layers, bottom up:

- :mod:`rlvr.objectives` and :mod:`rlvr.advantages`: the policy objectives of GRPO and the
  trust-region papers, pure functions over tensors (see ``docs/objectives.md``).
- :mod:`rlvr.rewards`, :mod:`rlvr.data`, :mod:`rlvr.evaluation`: verifiers, prompt sets and
  the evaluation harness (avg@k, pass@k, maj@k).
- :mod:`rlvr.models` and :mod:`rlvr.generation`: loading causal LMs (hub name, local path
  or preset) and sampling groups of completions.
- :mod:`rlvr.train`: the SFT stage and the RL trainer behind ``rlvr sft`` / ``rlvr train``.
"""

__version__ = "0.1.0"
