"""``RlvrGRPOTrainer``: TRL's ``GRPOTrainer`` with rlvr's objectives as its loss.

What it changes in ``GRPOTrainer`` (TRL 1.16), and nothing else:

1. **Advantages and group statistics** (``_generate_and_score_completions``): from the rewards
   of the whole generation batch gathered across processes (TRL's ``_calculate_rewards``
   gathers them), in contiguous groups of ``num_generations``, rlvr computes the objective's
   advantage mode (:func:`rlvr.advantages.compute_advantages`, population std) and, for
   ``etr``/``pmpo``/``apmpo``, the per-sample statistics (``ObjectiveConfig.group_stats``).
   Each process keeps its rows; they ride in the batch dict (``rlvr_*`` keys) through TRL's
   shuffle and split, so a micro-batch smaller than a group still reads whole-batch values.
2. **Step counts** (``_prepare_inputs``): when a generation batch is split into micro-batches,
   each optimiser step's token, sequence and SFT-token counts, summed over its micro-batches
   and all processes, are attached to its micro-batches, so the micro-batch losses of every
   process add up (after DDP's average, hence the loss is scaled by the process count) to the
   loss and gradient of the whole step (``ALGORITHMS.md``, "Loss aggregation").
3. **The loss** (``_compute_loss``): :func:`rlvr.objectives.objective_loss` on TRL's per-token
   log-probs and entropies, with TRL's vLLM importance-sampling ratios as per-token weights,
   the reference log-probs for the KL term.
4. **Evaluation loss** (``prediction_step``): each process's loss divides by the evaluation
   batch's counts summed over processes, and the losses are summed over processes, so
   ``eval_loss`` is the whole batch's (transformers keeps only one process's value).
5. **Metrics** (``log``): rlvr's metrics (``clip/q1_share``..., ``docs/metrics.md``), reduced
   over the logging window's micro-batches and processes as ``rlvr train`` reduces them
   (:mod:`.metrics`), join TRL's log (TensorBoard, W&B).

Options that would change the objective are refused at construction (:mod:`.options`).
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
import trl
from trl import GRPOConfig, GRPOTrainer

from rlvr.advantages import GroupStats, compute_advantages
from rlvr.engines.trl.metrics import MetricWindow
from rlvr.engines.trl.options import (
    check_args,
    check_reward_funcs,
    objective_config,
    on_policy_note,
    reward_keywords,
)
from rlvr.engines.trl.rewards import checked_rewards
from rlvr.generation.base import varying_shape_attention
from rlvr.objectives import (
    LossInputs,
    ObjectiveConfig,
    StepCounts,
    metric_weight_tensors,
    objective_loss,
)

MODEL_INPUT_KEYS = (
    "pixel_values",
    "image_grid_thw",
    "num_images",
    "pixel_attention_mask",
    "spatial_shapes",
    "num_tiles",
    "image_sizes",
    "token_type_ids",
    "mm_token_type_ids",
    "image_position_ids",
)
"""Optional multimodal inputs TRL's loss forwards to the model."""

STATS_KEYS = ("rlvr_pass_rate", "rlvr_reward_mean", "rlvr_reward_std")
"""Batch keys carrying the rows' :class:`~rlvr.advantages.GroupStats`."""

HOOKS = (
    "_calculate_rewards",
    "training_step",
    "_generate_and_score_completions",
    "_prepare_inputs",
    "_compute_loss",
    "prediction_step",
    "log",
)
"""``GRPOTrainer`` methods this trainer overrides (TRL 1.16's names)."""
TESTED_TRL = "1.16."


def check_trl(base: type = GRPOTrainer, version: str = trl.__version__) -> None:
    """Refuse a TRL whose ``GRPOTrainer`` lacks one of :data:`HOOKS`: TRL would never call the
    override, and its own loss would train under rlvr's objective's name. Another version
    than the tested one is a warning (a hook may be called differently)."""
    missing = [name for name in HOOKS if not callable(getattr(base, name, None))]
    if missing:
        raise RuntimeError(
            f"TRL {version}'s GRPOTrainer has no {', '.join(missing)}, which RlvrGRPOTrainer "
            f'overrides: install the tested TRL (pip install "rlvr[trl]", TRL {TESTED_TRL}x)'
        )
    if not version.startswith(TESTED_TRL):
        warnings.warn(
            f"RlvrGRPOTrainer is tested with TRL {TESTED_TRL}x, not {version}: "
            f"check that its metrics (clip/q1_share, ...) appear in the log",
            stacklevel=3,
        )


def _model_name(model: Any) -> str:
    name = model if isinstance(model, str) else model.config._name_or_path
    return str(name).rstrip("/").split("/")[-1]


def response_mask(inputs: dict[str, Any]) -> torch.Tensor:
    """``[B, T]`` the completion tokens the loss covers (TRL's ``tool_mask`` applied)."""
    mask = inputs["completion_mask"]
    return mask if "tool_mask" not in inputs else mask * inputs["tool_mask"]


def card_name(cfg: ObjectiveConfig) -> str:
    """What the model card TRL writes in ``output_dir`` says the model was trained with: the
    objective, its source, hyperparameters, advantages, aggregation and regularisers."""
    return (
        f"rlvr's {cfg.name} objective ({cfg.spec.paper}) in TRL's GRPOTrainer "
        f"(RlvrGRPOTrainer): {cfg.params!r}, advantages {cfg.advantage_mode}, "
        f"aggregation {cfg.agg_mode}, {cfg.regularizers!r}"
    )


def batch_rewards(
    rewards_per_func: torch.Tensor, weights: torch.Tensor, names: list[str]
) -> torch.Tensor:
    """``[N]`` weighted sum of the reward functions (TRL's ``sum_then_normalize`` reward).

    ValueError for a completion no function scored (TRL turns a ``None`` into NaN, so a NaN
    counts as ``None``) or an infinite reward, naming the functions: ``nansum`` would make the
    first 0 and the advantages of the second's group NaN."""
    unscored = torch.isnan(rewards_per_func).all(dim=1)  # [N]
    infinite = torch.isinf(rewards_per_func)  # [N, functions]
    if bool(unscored.any() | infinite.any()):  # one host read per generation batch
        if bool(infinite.any()):
            which = ", ".join(
                f"{name!r} for {int(n)}"
                for name, n in zip(names, infinite.sum(dim=0), strict=True)
                if n
            )
            raise ValueError(
                f"reward function(s) returned inf ({which} completion(s)); rlvr's objectives "
                "need a finite reward for every completion"
            )
        raise ValueError(
            f"{int(unscored.sum())} completion(s) got no reward from any reward function "
            "(all returned None or NaN); rlvr's objectives need a reward for every completion"
        )
    return (rewards_per_func * weights.to(rewards_per_func.device)[None, :]).nansum(dim=1)


class RlvrGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose loss is rlvr's ``objective`` (``docs/engines.md``).

    Arguments are ``GRPOTrainer``'s, plus: ``objective`` (a name from
    ``rlvr.objectives.OBJECTIVES``, or ``my_module.name`` for one your module registers),
    ``objective_kwargs`` (its hyperparameters by their
    ``ALGORITHMS.md`` names), ``advantage`` and ``loss_agg`` (``None``: the objective's
    defaults), ``kl_estimator``, ``sft_coef`` and ``sft_threshold`` (Klear's SFT term on
    positives). ``args.beta`` is the KL weight and ``args.entropy_coef`` the entropy bonus.
    """

    def __init__(
        self,
        model: Any,
        reward_funcs: Any,
        args: GRPOConfig | None = None,
        *positional: Any,
        objective: str = "grpo",
        objective_kwargs: dict[str, Any] | None = None,
        advantage: str | None = None,
        loss_agg: str | None = None,
        kl_estimator: str = "k3",
        sft_coef: float = 0.0,
        sft_threshold: float | None = None,
        **kwargs: Any,
    ) -> None:
        check_trl()
        args = args if args is not None else GRPOConfig(f"{_model_name(model)}-GRPO")
        check_args(args)
        dataset = kwargs.get("train_dataset", positional[0] if positional else None)
        check_reward_funcs(reward_funcs, *reward_keywords(args, dataset, **kwargs))
        given = len(reward_funcs) if isinstance(reward_funcs, list) else int(bool(reward_funcs))
        self.rlvr_objective = objective_config(
            args,
            objective,
            objective_kwargs,
            advantage=advantage,
            loss_agg=loss_agg,
            kl_estimator=kl_estimator,
            sft_coef=sft_coef,
            sft_threshold=sft_threshold,
        )
        note = on_policy_note(args, self.rlvr_objective)
        if note is not None and args.process_index == 0:  # once, not once per process
            warnings.warn(note, stacklevel=2)
        # TRL's model card said "trained with GRPO" (DeepSeekMath) whatever the objective.
        self._name, self._paper = card_name(self.rlvr_objective), {}
        self._tag_names = [*GRPOTrainer._tag_names, "rlvr", objective]
        self._rlvr_rewards_per_func: torch.Tensor | None = None
        self._rlvr_metrics = {"train": MetricWindow(), "eval": MetricWindow()}
        super().__init__(model, reward_funcs, args, *positional, **kwargs)
        self.reward_funcs = checked_rewards(self.reward_funcs, self.reward_func_names, given)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._rlvr_rewards_per_func = rewards  # [N over all processes, reward functions]
        return rewards

    def training_step(self, model, inputs, num_items_in_batch=None):
        """TRL's step (generation when a new batch is due, then loss and backward) with
        attention off cuDNN (:func:`rlvr.generation.base.varying_shape_attention`)."""
        with varying_shape_attention():
            return super().training_step(model, inputs, num_items_in_batch)

    def _generate_and_score_completions(self, inputs):
        with varying_shape_attention():  # evaluation generates here too, outside training_step
            output = super()._generate_and_score_completions(inputs)
        cfg = self.rlvr_objective
        rewards = batch_rewards(
            self._rlvr_rewards_per_func, self.reward_weights, self.reward_func_names
        ).double()
        group = self.num_generations if self.model.training else self.num_generations_eval
        local = output["prompt_ids"].shape[0]
        rows = slice(
            self.accelerator.process_index * local, (self.accelerator.process_index + 1) * local
        )
        device = output["prompt_ids"].device
        advantages = compute_advantages(rewards, group, cfg.advantage_mode)
        output["advantages"] = advantages[rows].to(device=device, dtype=torch.float32)
        output["rlvr_rewards"] = rewards[rows].to(device)
        _replace_tail(self._logs["advantages"], advantages.tolist())  # the completions table
        stats = cfg.group_stats(rewards, group)
        if stats is not None:
            for key, values in zip(
                STATS_KEYS, (stats.pass_rate, stats.reward_mean, stats.reward_std), strict=True
            ):
                output[key] = values[rows].to(device)
        return output

    def _prepare_inputs(self, generation_batch):
        every = self.args.steps_per_generation * self.num_iterations
        fresh = self.model.training and (self._step % every == 0 or self._buffered_inputs is None)
        inputs = super()._prepare_inputs(generation_batch)
        if fresh:
            self._attach_step_counts(self._buffered_inputs)
        return inputs

    def _attach_step_counts(self, chunks: list[dict[str, Any]]) -> None:
        """Give each micro-batch its optimiser step's counts, summed over the step and all processes."""
        per_step = self.args.gradient_accumulation_steps
        threshold = self.rlvr_objective.regularizers.sft_threshold
        local = torch.stack([_counts(chunk, threshold) for chunk in chunks])  # [S, 3]
        steps = local.view(-1, per_step, 3).sum(dim=1)  # [S / per_step, 3]
        # At least 1: a step with no response token anywhere then has loss 0, not 0/0.
        steps = self.accelerator.reduce(steps, reduction="sum").clamp(min=1)
        for index, chunk in enumerate(chunks):
            chunk["rlvr_step_counts"] = steps[index // per_step]

    def _step_counts(self, inputs: dict[str, Any], mask: torch.Tensor) -> tuple[StepCounts, int]:
        """``(counts, scale)``: the step's counts and the process count DDP divides by (train);
        the evaluation batch's counts summed over all processes (collective), so the processes'
        losses add up to the whole batch's (:meth:`prediction_step`). Device tensors: never read
        on the host."""
        max_len = self.max_completion_length
        counts = inputs.get("rlvr_step_counts")
        if not self.model.training:
            threshold = self.rlvr_objective.regularizers.sft_threshold
            counts = self.accelerator.reduce(_counts(inputs, threshold), reduction="sum")
            tokens, seqs, sft_tokens = counts.clamp(min=1).unbind()
            return StepCounts(tokens, seqs, sft_tokens, max_len), 1
        if counts is None:
            rows = mask.sum(dim=1)  # [B]
            own = (rows.sum().clamp(min=1), (rows > 0).sum().clamp(min=1))
            return StepCounts(*own, max_len=max_len), 1
        tokens, seqs, sft_tokens = counts.unbind()
        return StepCounts(tokens, seqs, sft_tokens, max_len), self.accelerator.num_processes

    def _token_weights(self, inputs: dict[str, Any], mask: torch.Tensor) -> torch.Tensor | None:
        """TRL's vLLM importance-sampling ratios (``[B, T]`` or ``[B, 1]``) as per-token weights."""
        if not (self.use_vllm and self.vllm_importance_sampling_correction):
            return None
        return inputs["importance_sampling_ratio"].expand(mask.shape)

    def _row_stats(self, inputs: dict[str, Any]) -> GroupStats | None:
        if not self.rlvr_objective.spec.needs_group_stats:
            return None
        rows = (inputs[key] for key in STATS_KEYS)
        return GroupStats(*rows, self.rlvr_objective.params.stats_options())

    def _compute_loss(self, model, inputs):
        prompt_ids, completion_ids = inputs["prompt_ids"], inputs["completion_ids"]
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention_mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        logps, entropies, aux_loss = self._get_per_token_logps_and_entropies(
            model,
            input_ids,
            attention_mask,
            completion_ids.size(1),
            compute_entropy=True,
            compute_aux_loss=self.aux_loss_enabled,
            **{key: inputs.get(key) for key in MODEL_INPUT_KEYS},
        )
        mask = response_mask(inputs)  # may have no response token: the loss is then 0
        old = inputs.get("old_per_token_logps")
        counts, scale = self._step_counts(inputs, mask)
        batch = LossInputs(
            logp=logps,
            old_logp=logps.detach() if old is None else old,
            advantages=inputs["advantages"],
            mask=mask,
            rewards=inputs["rlvr_rewards"],
            group_stats=self._row_stats(inputs),
            ref_logp=inputs.get("ref_per_token_logps"),
            entropy=entropies,
            token_weights=self._token_weights(inputs, mask),
        )
        out = objective_loss(batch, self.rlvr_objective, counts)
        mode = "train" if self.model.training else "eval"
        threshold = self.rlvr_objective.regularizers.sft_threshold
        weights = metric_weight_tensors(mask, batch.rewards, threshold)
        self._rlvr_metrics[mode].add(out.metrics, mask.sum(), weights)
        loss = out.loss * scale
        if self.aux_loss_enabled:
            accumulation = self.current_gradient_accumulation_steps if model.training else 1
            loss = loss + self.router_aux_loss_coef * aux_loss / accumulation
        return loss

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        """TRL's evaluation step, its loss summed over the processes: every process returns the
        whole evaluation batch's loss. transformers keeps only the main process's value of a
        batch (``gather_for_metrics`` drops the rest as padding of the repeated prompts), so a
        process's own share made ``eval_loss`` that of half the batch under two processes."""
        loss, logits, labels = super().prediction_step(
            model, inputs, prediction_loss_only, ignore_keys
        )
        return self.accelerator.reduce(loss, reduction="sum"), logits, labels

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """TRL's log, with rlvr's metrics of the window reduced over micro-batches and processes."""
        mode = "train" if self.model.training else "eval"
        for name, value in self._rlvr_metrics[mode].reduce(self.accelerator).items():
            self._metrics[mode][name] = [value]  # TRL logs the mean of this one value
        super().log(logs, start_time)


def _replace_tail(logged: Any, values: list[float]) -> None:
    """Replace the last ``len(values)`` entries of TRL's ``deque`` log by ``values``."""
    for _ in range(min(len(values), len(logged))):
        logged.pop()
    logged.extend(values)


def _counts(chunk: dict[str, Any], sft_threshold: float) -> torch.Tensor:
    """``[3]`` float64: response tokens, non-empty sequences, tokens of rewarded responses."""
    rows = response_mask(chunk).sum(dim=1).double()  # [B]
    positive = chunk["rlvr_rewards"] >= sft_threshold
    return torch.stack(
        [rows.sum(), (rows > 0).double().sum(), torch.where(positive, rows, 0).sum()]
    )
