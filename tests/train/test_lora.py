"""LoRA adapters on the policy (rlvr.train.lora): only they train, a checkpoint is the merged
plain model, and the KL reference is the base model. A killed LoRA run resuming exactly is
tested with the full-weight one in test_loop.py."""

import json
import warnings

import pytest
import torch

pytest.importorskip("peft")

from rlvr.models import load_model  # noqa: E402
from rlvr.ops.merged import merged_weight, plain_tensors  # noqa: E402
from rlvr.train.checkpoint import list_checkpoints  # noqa: E402
from rlvr.train.config import LoraConfig, ModelConfig  # noqa: E402
from rlvr.train.loop import build_run, train  # noqa: E402
from rlvr.train.lora import (  # noqa: E402
    ADAPTER_DIR,
    adapter_notes,
    adapters_off,
    add_adapters,
    merged_state_dict,
)
from rlvr.train.metrics import read_metrics  # noqa: E402
from rlvr.train.policy import load_policy  # noqa: E402

IDS = torch.tensor([[5, 6, 7, 8, 9, 10], [11, 12, 13, 14, 15, 16]])
PROJECTIONS = 7  # q, k, v, o, gate, up, down in each of the tiny model's 2 layers


def _logits(model, ids=IDS) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids).logits


def _adapted(model_dir, rank=4, **kw):
    model, _ = load_model(str(model_dir))
    add_adapters(model, LoraConfig(rank=rank, **kw))
    return model


def _perturb(model, seed=0) -> None:
    """Random B matrices (they start at zero), so the adapters change the output."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".lora_B." in name:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))


def test_adapters_start_as_the_identity_and_alone_train(tiny_model_dir):
    base, _ = load_model(str(tiny_model_dir))
    model = _adapted(tiny_model_dir)
    assert torch.equal(_logits(model), _logits(base))  # B = 0
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert len(trainable) == 2 * PROJECTIONS * 2 and all(".lora_" in n for n in trainable)
    only_q = _adapted(tiny_model_dir, targets=("q_proj",))
    assert len([p for p in only_q.parameters() if p.requires_grad]) == 2 * 2


def test_a_run_names_what_trains(tiny_model_dir):
    model = _adapted(tiny_model_dir)
    adapters = sum(p.numel() for n, p in model.named_parameters() if ".lora_" in n)
    base = sum(p.numel() for n, p in model.named_parameters() if ".lora_" not in n)
    assert adapter_notes(model) == [
        f"LoRA adapters on {PROJECTIONS * 2} layers: {adapters:,} parameters train, the "
        f"model's {base:,} stay frozen"
    ]
    assert adapter_notes(load_model(str(tiny_model_dir))[0]) == []


def test_merged_weight_is_w_plus_alpha_over_r_b_a(tiny_model_dir):
    """LoRA eq. 3 by hand on one layer: ``W + alpha / r * B @ A`` with r = 4, alpha = 6."""
    model = _adapted(tiny_model_dir, rank=4, alpha=6.0)
    _perturb(model)
    q = model.model.layers[1].self_attn.q_proj
    expected = q.base_layer.weight + 1.5 * q.lora_B["default"].weight @ q.lora_A["default"].weight
    merged = merged_state_dict(model)
    torch.testing.assert_close(
        merged["model.layers.1.self_attn.q_proj.weight"], expected, rtol=0, atol=1e-6
    )
    assert not any(".lora_" in k or ".base_layer" in k for k in merged)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # the decoder merges under autocast
        torch.testing.assert_close(merged_weight(q), expected, rtol=0, atol=1e-6)


def test_merged_model_is_the_adapted_model_and_adapters_off_the_base(tiny_model_dir):
    base, _ = load_model(str(tiny_model_dir))
    model = _adapted(tiny_model_dir)
    _perturb(model)
    plain, _ = load_model(str(tiny_model_dir))
    plain.load_state_dict(merged_state_dict(model), strict=True)
    adapted = _logits(model)
    assert (adapted - _logits(base)).abs().max() > 1e-3  # the adapters change the output
    torch.testing.assert_close(_logits(plain), adapted, rtol=1e-5, atol=1e-5)
    with adapters_off(model):
        assert torch.equal(_logits(model), _logits(base))
    torch.testing.assert_close(_logits(model), adapted, rtol=0, atol=0)  # back on
    assert all(p.requires_grad for n, p in model.named_parameters() if ".lora_" in n)


def test_plain_tensors_are_the_plain_models_parameters_merged(tiny_model_dir):
    """What the vllm sampler pushes: the plain model's parameter names, adapters merged."""
    model = _adapted(tiny_model_dir)
    _perturb(model)
    pushed = {k: v.detach() for k, v in plain_tensors(model, model.named_parameters())}
    plain, _ = load_model(str(tiny_model_dir))
    assert pushed.keys() == dict(plain.named_parameters()).keys()
    plain.load_state_dict(pushed, strict=False)  # the tied head follows the embedding
    torch.testing.assert_close(_logits(plain), _logits(model), rtol=1e-5, atol=1e-5)


def test_gradient_checkpointing_keeps_the_adapters_gradients(tiny_model_dir):
    """The embeddings are frozen, so the checkpointed blocks' input needs no grad: reentrant
    checkpointing would give the adapters none."""
    models = []
    for checkpointing in (False, True):
        cfg = ModelConfig(
            name=str(tiny_model_dir),
            gradient_checkpointing=checkpointing,
            lora=LoraConfig(rank=4),
        )
        models.append(load_policy(cfg)[0])
    _perturb(models[0])
    adapters = {k: v for k, v in models[0].state_dict().items() if ".lora_" in k}
    models[1].load_state_dict(adapters, strict=False)  # A is drawn at random
    grads = []
    for model in models:
        model(input_ids=IDS).logits.logsumexp(-1).sum().backward()
        grads.append({n: p.grad for n, p in model.named_parameters() if p.requires_grad})
    assert grads[0].keys() == grads[1].keys()
    for name, grad in grads[0].items():
        assert grad.abs().sum() > 0, name
        torch.testing.assert_close(grads[1][name], grad, rtol=1e-5, atol=1e-6)


def test_a_lora_checkpoint_is_the_merged_model(train_config):
    """The directory loads as a plain model computing what the adapted policy computes."""
    cfg = train_config("steps=2", "model.lora.rank=4", "optim.lr=0.05", "checkpoint.every=2")
    last = list_checkpoints(train(cfg).run_dir)[-1]
    assert (last / ADAPTER_DIR / "adapter_config.json").is_file()
    plain, _ = load_model(str(last))
    base, _ = load_model(cfg.model.name)
    adapted, _ = load_policy(cfg.model, str(last))  # the base with the saved adapters
    assert not any(".lora_" in n for n, _ in plain.named_parameters())
    torch.testing.assert_close(_logits(plain), _logits(adapted), rtol=1e-5, atol=1e-5)
    assert (_logits(plain) - _logits(base)).abs().max() > 1e-4  # the run trained its adapters
    plain_state, base_state = plain.state_dict(), base.state_dict()
    assert torch.equal(plain_state["model.norm.weight"], base_state["model.norm.weight"])


@pytest.mark.parametrize(
    ("targets", "tied"), [("[lm_head]", False), ("[embed_tokens]", False), ("[q_proj]", True)]
)
def test_a_checkpoint_whose_adapters_part_the_tied_head_unties_it(train_config, targets, tied):
    """The tiny model ties its output head to its input embedding. An adapter on either one
    trains them apart, but the checkpoint's config.json still said tie_word_embeddings: true,
    so a loader that follows it (vLLM, older transformers) tied the saved head back to the
    embedding: not the model the run trained."""
    overrides = ("steps=1", "model.lora.rank=4", f"model.lora.targets={targets}", "optim.lr=0.05")
    cfg = train_config(*overrides, "checkpoint.every=1", out="head")
    last = list_checkpoints(train(cfg).run_dir)[-1]
    assert json.loads((last / "config.json").read_text())["tie_word_embeddings"] is tied
    plain, _ = load_model(str(last))
    adapted, _ = load_policy(cfg.model, str(last))
    torch.testing.assert_close(_logits(plain), _logits(adapted), rtol=1e-5, atol=1e-5)


def test_a_lora_checkpoints_adapters_load_with_peft(train_config):
    """``adapter/`` is a PEFT adapter folder: PeftModel puts it on the base named in its
    config and computes the merged model."""
    from peft import PeftModel

    cfg = train_config("steps=2", "model.lora.rank=4", "optim.lr=0.05", "checkpoint.every=2")
    last = list_checkpoints(train(cfg).run_dir)[-1]
    config = json.loads((last / ADAPTER_DIR / "adapter_config.json").read_text())
    assert (config["base_model_name_or_path"], config["r"]) == (cfg.model.name, 4)
    base, _ = load_model(config["base_model_name_or_path"])
    peft_model = PeftModel.from_pretrained(base, str(last / ADAPTER_DIR))
    plain, _ = load_model(str(last))
    torch.testing.assert_close(_logits(peft_model), _logits(plain), rtol=1e-5, atol=1e-5)


def test_the_kl_reference_of_a_lora_run_is_its_base_model(train_config):
    """No second copy of the model: the reference log-probs are the policy's with its adapters
    off, which equal a separately loaded base model's."""
    from rlvr.train.rollout import assemble, behaviour_logp, collect_rounds, sequence_logp
    from rlvr.train.run_dir import prepare_run_dir

    cfg = train_config("objective.kl_coef=0.1", "model.lora.rank=4", out="kl")
    run = build_run(cfg, prepare_run_dir(cfg, resume=False)[0], None)
    assert run.reference is run.policy
    _perturb(run.policy)  # as if trained: the adapted policy is no longer the base
    _, kept = collect_rounds(
        run.generator, run.tokenizer, run.scorer, run.train_set.prompts, run.order, cfg
    )
    batch, _ = assemble(kept, run.tokenizer.pad_token_id, cfg)
    batch, _ = behaviour_logp(batch, run.policy, run.reference, cfg)
    run.close()
    base, _ = load_policy(ModelConfig(name=cfg.model.name))
    mask = batch.seqs.response_mask.bool()
    on_base = sequence_logp(base, batch.seqs, cfg)
    torch.testing.assert_close(batch.ref_logp[mask], on_base[mask], rtol=1e-5, atol=1e-5)
    adapted = sequence_logp(run.policy, batch.seqs, cfg)
    assert (adapted[mask] - on_base[mask]).abs().max() > 1e-3


def test_a_target_the_model_lacks_is_named_with_the_names_it_has(tiny_model_dir):
    with pytest.raises(ValueError, match="model.lora.targets") as err:
        _adapted(tiny_model_dir, targets=("no_such_proj",))
    assert str(err.value) == (
        "model.lora.targets: this model has no layer named 'no_such_proj'; its linear layers "
        "and embeddings are embed_tokens, q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
        "down_proj, lm_head (or all-linear for every linear layer but the output head)"
    )


@pytest.mark.parametrize(("target", "kind"), [("self_attn", "Qwen2Attention"), ("norm", "RMSNorm")])
def test_a_target_that_is_no_linear_layer_is_named_in_one_line(tiny_model_dir, target, kind):
    """peft's message prints the module, so its first line was all the error said:
    ``model.lora.targets: Target module Qwen2Attention(``."""
    with pytest.raises(ValueError) as err:
        _adapted(tiny_model_dir, targets=(target,))
    message = str(err.value)
    assert message.startswith(f"model.lora.targets: {target!r} is a ") and kind in message
    assert "not a linear layer or embedding" in message and "\n" not in message


def test_all_linear_stands_alone():
    """``[all-linear, lm_head]`` was read as two module names, so only ``lm_head`` got one."""
    with pytest.raises(ValueError, match="all-linear stands alone"):
        LoraConfig(rank=4, targets=("all-linear", "lm_head"))
    with pytest.raises(ValueError, match="each by a name"):
        LoraConfig(rank=4, targets=("",))


def test_one_adapted_layer_is_one_layer(tiny_model_dir):
    model = _adapted(tiny_model_dir, targets=("model.layers.0.self_attn.q_proj",))
    assert adapter_notes(model)[0].startswith("LoRA adapters on 1 layer: ")


def test_resuming_adapters_from_a_checkpoint_without_them_is_refused(train_config):
    cfg = train_config("steps=1", "checkpoint.every=1", out="plain")
    result = train(cfg)
    lora = ModelConfig(name=cfg.model.name, lora=LoraConfig(rank=4))
    with pytest.raises(FileNotFoundError, match=f"no {ADAPTER_DIR}/"):
        load_policy(lora, str(list_checkpoints(result.run_dir)[-1]))


@pytest.mark.parametrize(
    ("trained", "resumed", "asked"),
    [
        ("model.lora.rank=4", "model.lora.rank=0", "model.lora.rank=0"),
        ("model.lora.rank=4", "model.lora.alpha=8", "model.lora.alpha=8.0"),
        ("model.lora.rank=4", "model.lora.targets=[q_proj]", "model.lora.targets=[q_proj]"),
        ("model.lora.rank=0", "model.lora.rank=4", "model.lora.rank=4"),
    ],
)
def test_resuming_with_other_adapters_is_refused_before_anything_loads(
    train_config, trained, resumed, asked
):
    """A resume with another model.lora failed in torch's optimiser (rank 0: "loaded state
    dict contains a parameter group that doesn't match ...") or, with another alpha, trained
    on as a rescaled model; it is refused in one line naming what the run trained."""
    from rlvr.train.run_dir import locate_run_dir

    cfg = train_config("steps=1", "checkpoint.every=1", trained, out="lora")
    train(cfg)
    before = (cfg.log.output_dir, read_metrics(f"{cfg.log.output_dir}/metrics.jsonl"))
    with pytest.raises(ValueError) as err:
        locate_run_dir(train_config("steps=2", trained, resumed, out="lora"), resume=True)
    message = str(err.value)
    assert message.startswith(f"{asked}: the run in {cfg.log.output_dir} trained "), message
    assert "\n" not in message and "model.name=" in message
    assert before[1] == read_metrics(f"{before[0]}/metrics.jsonl")


def test_resuming_the_same_adapters_is_accepted(train_config):
    from rlvr.train.run_dir import locate_run_dir

    cfg = train_config("steps=1", "checkpoint.every=1", "model.lora.rank=4", out="lora")
    train(cfg)
    same = train_config("steps=2", "model.lora.rank=4", "model.lora.alpha=32", out="lora")
    assert locate_run_dir(same, resume=True).checkpoint is not None


def test_sft_with_adapters_learns_and_saves_the_merged_model(tiny_model_dir, sft_file, tmp_path):
    from rlvr.train.config import LogConfig, OptimConfig, SFTConfig, SFTDataConfig
    from rlvr.train.supervised import sft

    cfg = SFTConfig(
        epochs=12,  # adapters on a random model learn slower than full weights: no embeddings
        batch_size=3,
        model=ModelConfig(name=str(tiny_model_dir), lora=LoraConfig(rank=8)),
        data=SFTDataConfig(train=sft_file, eval=sft_file),
        optim=OptimConfig(lr=1e-2),
        log=LogConfig(output_dir=str(tmp_path / "sft"), tensorboard=False, progress="off"),
    )
    result = sft(cfg)
    rows = read_metrics(result.run_dir / "metrics.jsonl")
    evals = [r["sft/eval_loss"] for r in rows if "sft/eval_loss" in r]
    assert evals[-1] < evals[0] - 0.1
    plain, _ = load_model(str(result.model_dir))
    adapted, _ = load_policy(cfg.model, str(result.model_dir))
    torch.testing.assert_close(_logits(plain), _logits(adapted), rtol=1e-5, atol=1e-5)


def test_a_rank_that_reaches_a_layers_side_is_warned(tiny_model_dir):
    """``model.lora.rank=4096`` on a 64-wide model was accepted without a word, with more
    adapter parameters than the model has."""
    model, _ = load_model(str(tiny_model_dir))
    linear = [m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    side = min(min(m.in_features, m.out_features) for m in linear if m is not model.lm_head)
    with pytest.warns(UserWarning, match=rf"model.lora.rank={side} reaches the smaller side of "):
        _adapted(tiny_model_dir, rank=side)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _adapted(tiny_model_dir, rank=side - 1)
