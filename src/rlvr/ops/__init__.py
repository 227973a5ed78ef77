"""Memory-efficient per-token log-probabilities and entropy for causal LMs.

- :func:`token_logprobs_entropy`: hidden states + ``lm_head`` weight -> ``(logp, entropy)``
  per row, chunked, with recomputation in backward.
- :func:`logprobs_entropy_from_logits`: the same from given logits.
- :func:`sequence_token_stats`: a Hugging Face causal LM and a rollout batch ->
  ``[B, T]`` statistics of the response tokens.
"""

from rlvr.ops.sequence import (
    LOGIT_TRANSFORM_ATTRS,
    head_path,
    position_ids_from_mask,
    sequence_token_stats,
)
from rlvr.ops.token_stats import (
    DEFAULT_CHUNK_SIZE,
    TokenStats,
    logprobs_entropy_from_logits,
    token_logprobs_entropy,
)

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "LOGIT_TRANSFORM_ATTRS",
    "TokenStats",
    "head_path",
    "logprobs_entropy_from_logits",
    "position_ids_from_mask",
    "sequence_token_stats",
    "token_logprobs_entropy",
]
