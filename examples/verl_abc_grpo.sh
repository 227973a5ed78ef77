#!/usr/bin/env bash
# ABC-GRPO on verl 0.9 with rlvr's objective: one node, GPUs=${GPUS:-1}, vLLM rollouts.
# Needs a GPU (it stops with one line without one); on a CPU, rlvr train or
# examples/trl_abc_grpo.py train on the same kind of task.
#   pip install "rlvr[verl]" vllm
#   python examples/chain_sum_data.py --out data/chain_sum
#   MODEL=Qwen/Qwen2.5-0.5B-Instruct bash examples/verl_abc_grpo.sh
# MODEL may be a hub name or a local directory. Extra arguments are appended as overrides,
# e.g. trainer.total_training_steps=5. ABC's widths default to the paper's (all 0.2); the
# hyperparameters verl has no field for are set under policy_loss.rlvr (docs/engines.md):
#   bash examples/verl_abc_grpo.sh +actor_rollout_ref.actor.policy_loss.rlvr.eps3=0.3
# CHECK=1 checks the same overrides on a CPU instead (python -m rlvr.engines.verl.check: the
# errors a GPU worker would raise at its first loss call, a note for each verl default the
# objective does not use); no GPU, model or data needed.
set -euo pipefail
MODEL=${MODEL:-Qwen/Qwen2.5-0.5B-Instruct}
DATA=${DATA:-data/chain_sum}
GPUS=${GPUS:-1}
HERE=$(cd "$(dirname "$0")" && pwd)
overrides=(
    data.train_files="$DATA/train.parquet"
    data.val_files="$DATA/test.parquet"
    data.train_batch_size=64
    data.max_prompt_length=256
    data.max_response_length=512
    actor_rollout_ref.model.path="$MODEL"
    actor_rollout_ref.rollout.name=vllm
    actor_rollout_ref.rollout.n=8
    actor_rollout_ref.rollout.tensor_model_parallel_size=1
    actor_rollout_ref.rollout.gpu_memory_utilization=0.4
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16
    actor_rollout_ref.actor.optim.lr=1e-6
    actor_rollout_ref.actor.ppo_mini_batch_size=16
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16
    actor_rollout_ref.actor.use_kl_loss=False
    actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean
    actor_rollout_ref.actor.policy_loss.loss_mode=rlvr_abc_grpo
    actor_rollout_ref.actor.policy_loss._target_=rlvr.engines.verl.PolicyLossConfig
    algorithm.adv_estimator=rlvr_group_mean
    algorithm.use_kl_in_reward=False
    reward.custom_reward_function.path="$HERE/verl_reward.py"
    trainer.logger='["console","tensorboard"]'
    trainer.project_name=rlvr
    trainer.experiment_name=abc_grpo_chain_sum
    trainer.n_gpus_per_node="$GPUS"
    trainer.nnodes=1
    trainer.val_before_train=False
    trainer.test_freq=10
    trainer.save_freq=-1
    trainer.total_epochs=1
)
if [ "${CHECK:-0}" = 1 ]; then
    exec python -m rlvr.engines.verl.check "${overrides[@]}" "$@"
fi
if ! python -c "import sys, torch; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
    echo "verl_abc_grpo.sh: needs a GPU (verl with vLLM rollouts); none is visible" >&2
    exit 1
fi

python -m verl.trainer.main_ppo "${overrides[@]}" "$@"
