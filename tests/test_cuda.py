"""Every objective and the ops on CUDA against the CPU (skipped where torch sees no CUDA).

``bench/gpu/check.sh`` runs this file on a GPU machine. The CPU computes each case in the
same dtype on the same inputs; float64 must agree to 1e-10 and float32 to a few ulps of
the values' scale, so a device-specific bug (a kernel that ignores the mask, a host sync
that reads the wrong stream, a dtype promoted differently) shows up as a mismatch.
"""

from __future__ import annotations

import pytest
import torch

from rlvr.objectives import OBJECTIVES, policy_loss
from rlvr.ops import sequence_token_stats, token_logprobs_entropy

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

TOL = {torch.float64: 1e-10, torch.float32: 2e-5}
GROUPS, GROUP, T = 4, 4, 12


def _batch(name: str, dtype: torch.dtype, seed: int = 0) -> dict[str, torch.Tensor]:
    """A CPU batch of ``GROUPS`` groups of ``GROUP`` rows: log-ratios in [-1.5, 1.5], a ragged
    mask, binary rewards with mixed and uniform groups, and their group-normalised advantages."""
    g = torch.Generator().manual_seed(seed)
    b = GROUPS * GROUP
    old = -torch.rand(b, T, generator=g, dtype=torch.float64) * 3
    log_ratio = (torch.rand(b, T, generator=g, dtype=torch.float64) - 0.5) * 3
    lengths = torch.randint(1, T + 1, (b,), generator=g)
    mask = torch.arange(T)[None, :] < lengths[:, None]
    rewards = (torch.rand(b, generator=g) < 0.5).to(torch.float64)
    rewards[:GROUP] = 1.0  # one uniform group (zero advantages)
    grouped = rewards.view(GROUPS, GROUP)
    adv = (grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-6)
    return {
        "logp": (old + log_ratio).to(dtype),
        "old_logp": old.to(dtype),
        "advantages": adv.flatten().to(dtype),
        "mask": mask,
        "rewards": rewards.to(dtype),
    }


def _loss_and_grad(name: str, batch: dict[str, torch.Tensor], device: str):
    on = {k: v.to(device) for k, v in batch.items()}
    logp = on.pop("logp").requires_grad_()
    loss, metrics = policy_loss(name, logp=logp, group_size=GROUP, **on)
    (grad,) = torch.autograd.grad(loss, logp)
    return loss.detach().cpu(), grad.cpu(), {k: v.cpu() for k, v in metrics.items()}


def _close(cpu: torch.Tensor, cuda: torch.Tensor, tol: float, what: str) -> None:
    scale = max(1.0, float(cpu.abs().max())) if cpu.numel() else 1.0
    err = float((cpu.double() - cuda.double()).abs().max()) if cpu.numel() else 0.0
    assert err <= tol * scale, f"{what}: CPU and CUDA differ by {err:.3g} (scale {scale:.3g})"


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_objective_on_cuda_matches_cpu(name: str, dtype: torch.dtype) -> None:
    batch = _batch(name, dtype)
    cpu = _loss_and_grad(name, batch, "cpu")
    cuda = _loss_and_grad(name, batch, "cuda")
    _close(cpu[0], cuda[0], TOL[dtype], f"{name} loss")
    _close(cpu[1], cuda[1], TOL[dtype], f"{name} gradient")
    assert cpu[2].keys() == cuda[2].keys()
    for key in cpu[2]:
        _close(cpu[2][key], cuda[2][key], TOL[dtype] * 10, f"{name} metric {key}")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_token_logprobs_entropy_on_cuda_matches_cpu(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(300, 24, generator=g, dtype=dtype)
    weight = torch.randn(97, 24, generator=g, dtype=dtype)
    labels = torch.randint(0, 97, (300,), generator=g)
    results = []
    for device in ("cpu", "cuda"):
        h = hidden.to(device).requires_grad_()
        w = weight.to(device).requires_grad_()
        stats = token_logprobs_entropy(h, w, labels.to(device), chunk_size=64)
        grads = torch.autograd.grad((stats.logp + 0.5 * stats.entropy).sum(), (h, w))
        results.append([t.detach().cpu() for t in (stats.logp, stats.entropy, *grads)])
    for what, cpu, cuda in zip(("logp", "entropy", "d/dh", "d/dw"), *results, strict=True):
        _close(cpu, cuda, TOL[dtype] * 10, what)


def test_sequence_token_stats_on_cuda_matches_cpu(tiny_model_dir) -> None:
    from rlvr.models import load_model

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 200, (6, 20), generator=g)
    attn = torch.ones_like(ids)
    attn[:2, :3] = 0  # left-padded prompts
    results = []
    for device in ("cpu", "cuda"):
        model, _ = load_model(str(tiny_model_dir))
        model = model.to(device).double()
        stats = sequence_token_stats(model, ids.to(device), attn.to(device), 8)
        (grad,) = torch.autograd.grad(stats.logp.sum(), model.get_output_embeddings().weight)
        results.append([t.detach().cpu() for t in (stats.logp, stats.entropy, grad)])
    # the statistics are computed and returned in float32 (sequence_token_stats' contract)
    for what, cpu, cuda in zip(("logp", "entropy", "d/d lm_head"), *results, strict=True):
        _close(cpu, cuda, TOL[torch.float32], what)


@pytest.mark.parametrize("family", ["Llama", "Mistral", "Qwen2", "Qwen3"])
def test_the_fast_decoder_on_cuda_matches_hugging_face(random_llama, family) -> None:
    """Float32 on CUDA (attention kernels may differ from the forward's: 1e-4)."""
    from tests.test_fast_decode import _check

    extra = {"sliding_window": None} if family == "Mistral" else {}
    model = random_llama(family=family, **extra).to("cuda")
    _check(model, 97, tol=1e-4)


@pytest.mark.parametrize("weights", ["trainable", "lora"])
def test_under_autocast_the_decoder_casts_once_on_cuda(tiny_model, weights) -> None:
    """Attention under CUDA's autocast casts to bf16 as the CPU's does: the decoder's bf16 KV
    cache and weights cast once give the logits of casting at every step, bit for bit."""
    from tests.test_fast_decode import test_under_autocast_the_decoder_casts_its_weights_once

    test_under_autocast_the_decoder_casts_its_weights_once(tiny_model, weights, device="cuda")


def test_a_run_on_cuda_logs_its_peak_gpu_memory(tmp_path, monkeypatch) -> None:
    """With ``model.device=auto`` (the default; the tests make it the CPU) the run takes the GPU."""
    from rlvr.train import TrainConfig, load_config, train
    from rlvr.train.metrics import read_metrics

    monkeypatch.delenv("RLVR_AUTO_DEVICE", raising=False)
    # the demo's task on the tiny preset (bench/gpu/check.sh carries its build)
    overrides = ["steps=1", "model.device=auto", "rollout.prompts_per_step=2", "eval.every=0",
                 "eval.at_start=false", "eval.at_end=false", f"log.output_dir={tmp_path / 'run'}",
                 "log.progress=off", "checkpoint.save_final=false"]  # fmt: skip
    result = train(load_config(TrainConfig, "demo", overrides))
    row = read_metrics(result.run_dir / "metrics.jsonl")[-1]
    assert 0 < row["perf/peak_gpu_mb"] < torch.cuda.get_device_properties(0).total_memory / 2**20


def test_a_lora_run_on_cuda_saves_the_merged_model_and_resumes(tmp_path) -> None:
    """A checkpoint saved on the GPU (adapted layers merged in float32 and moved to the CPU,
    the rest still on the GPU) loads as a plain model that computes the adapted policy, and a
    resumed run loads its adapters back onto the GPU."""
    pytest.importorskip("peft")
    from rlvr.models import load_model
    from rlvr.train import TrainConfig, load_config, train
    from rlvr.train.checkpoint import list_checkpoints
    from rlvr.train.lora import ADAPTER_DIR
    from rlvr.train.metrics import read_metrics
    from rlvr.train.policy import load_policy

    def config(steps: int) -> TrainConfig:
        overrides = [f"steps={steps}", "model.device=cuda", "model.lora.rank=8", "optim.lr=0.01",
                     "rollout.prompts_per_step=2", "eval.every=0", "eval.at_start=false",
                     "eval.at_end=false", f"log.output_dir={tmp_path / 'run'}", "log.progress=off",
                     "checkpoint.every=1"]  # fmt: skip
        return load_config(TrainConfig, "demo", overrides)

    cfg = config(2)
    train(cfg)
    last = list_checkpoints(tmp_path / "run")[-1]
    assert (last / ADAPTER_DIR / "adapter_model.safetensors").is_file()
    plain, _ = load_model(str(last))  # on the CPU
    adapted, _ = load_policy(cfg.model, str(last))  # the base on the GPU, with the adapters
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    with torch.no_grad():
        expected = adapted(input_ids=ids.cuda()).logits.float().cpu()
        got = plain(input_ids=ids).logits.float()
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)  # CPU against GPU
    train(config(3), resume=True)
    assert [r["step"] for r in read_metrics(tmp_path / "run" / "metrics.jsonl")] == [1, 2, 3]
