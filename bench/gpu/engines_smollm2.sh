#!/usr/bin/env bash
# rlvr's objectives on verl and TRL, a few steps each on SmolLM2-135M-Instruct, one GPU, offline.
#
#   bash bench/gpu/engines_smollm2.sh            # from the repository root
#
# Needs a CUDA machine with, in the active Python environment: rlvr with its extras and vLLM
# (pip install -e ".[verl,trl]" vllm), and the SmolLM2 model as a local Hugging Face directory
# ($MODEL; default: rlvr's smollm2-135m preset, converted once into ~/.cache/rlvr). Nothing is
# downloaded: the hub is switched off. It runs, each for $STEPS steps:
#   1. verl main_ppo, vLLM rollouts, loss_mode=rlvr_abc_grpo (the plain loss route);
#   2. verl main_ppo, vLLM rollouts, loss_mode=rlvr_apmpo with trainer.v1.trainer_mode=rlvr
#      (the exact group-statistics route);
#   3. TRL RlvrGRPOTrainer, objective=abc_grpo, vLLM colocated;
# and checks each log for rlvr's quadrant metric. Logs go to $OUT (default bench/gpu/out).
set -euo pipefail
cd "$(dirname "$0")/../.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled TOKENIZERS_PARALLELISM=false
STEPS=${STEPS:-3}
OUT=${OUT:-bench/gpu/out}
MODEL=${MODEL:-$(python -c "from rlvr.models import resolve_model_path; print(resolve_model_path('smollm2-135m'))")}
mkdir -p "$OUT"
python examples/chain_sum_data.py --out "$OUT/data" --train 256 --test 32

small=(
    data.train_batch_size=16
    data.max_response_length=256
    actor_rollout_ref.rollout.n=4
    actor_rollout_ref.actor.ppo_mini_batch_size=8
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8
    actor_rollout_ref.rollout.gpu_memory_utilization=0.3
    trainer.logger='["console"]'
    trainer.test_freq=-1
    trainer.total_training_steps="$STEPS"
)

run() {  # name, command...
    local name=$1
    shift
    echo "== $name"
    if ! "$@" > "$OUT/$name.log" 2>&1; then
        tail -n 40 "$OUT/$name.log"
        echo "FAILED: $name (log: $OUT/$name.log)"
        return 1
    fi
    if ! grep -q "clip/q1_frac" "$OUT/$name.log"; then
        echo "FAILED: $name logged no rlvr metric (log: $OUT/$name.log)"
        return 1
    fi
    grep -o "clip/q[1-4]_frac[^,]*" "$OUT/$name.log" | tail -n 4 || true
    echo "ok: $name"
}

status=0
MODEL="$MODEL" DATA="$OUT/data" GPUS=1 run verl_abc_grpo \
    bash examples/verl_abc_grpo.sh "${small[@]}" || status=1
MODEL="$MODEL" DATA="$OUT/data" GPUS=1 run verl_apmpo_exact \
    bash examples/verl_abc_grpo.sh "${small[@]}" \
    actor_rollout_ref.actor.policy_loss.loss_mode=rlvr_apmpo \
    +actor_rollout_ref.actor.policy_loss.rlvr.gamma=0.8 \
    algorithm.adv_estimator=rlvr_group_std \
    trainer.v1.trainer_mode=rlvr || status=1
run trl_abc_grpo python examples/trl_abc_grpo.py \
    --model "$MODEL" --vllm --steps "$STEPS" --out "$OUT/trl" || status=1
exit $status
