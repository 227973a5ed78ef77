"""A PEFT LoRA adapter folder loads as its base model with the adapters merged."""

import json

import pytest
import torch

peft = pytest.importorskip("peft")

from rlvr.models import check_model_dir, load_model  # noqa: E402

IDS = torch.tensor([[5, 6, 7, 8, 9, 10]])


def _logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=IDS).logits


@pytest.fixture
def adapter_folder(tiny_model_dir, tmp_path):
    """``(folder, adapted)``: adapters saved by peft itself (as TRL saves them), and the model
    they were saved from."""
    base, _ = load_model(str(tiny_model_dir))
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "down_proj"])
    adapted = peft.get_peft_model(base, config)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in adapted.named_parameters():
            if ".lora_B." in name:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
    adapted.save_pretrained(tmp_path / "adapter")
    return tmp_path / "adapter", adapted


def test_an_adapter_folder_is_its_base_with_the_adapters_merged(adapter_folder, tiny_model_dir):
    folder, adapted = adapter_folder
    check_model_dir(str(folder))  # accepted as a model
    model, tokenizer = load_model(str(folder))
    assert not any(".lora_" in name for name, _ in model.named_parameters())
    torch.testing.assert_close(_logits(model), _logits(adapted), rtol=1e-5, atol=1e-5)
    base, _ = load_model(str(tiny_model_dir))
    assert (_logits(model) - _logits(base)).abs().max() > 1e-3
    assert tokenizer.pad_token is not None  # the base model's tokenizer: the folder has none
    assert model.name_or_path == str(folder)  # adapters trained on it name the folder


def test_an_adapter_folder_loads_with_every_weight_trainable(adapter_folder):
    """peft loads adapters for inference and freezes the base weights; merged, they stayed
    frozen, and an RL or SFT run from the folder stopped with "optimizer got an empty
    parameter list"."""
    folder, _ = adapter_folder
    model, _ = load_model(str(folder))
    assert all(p.requires_grad for p in model.parameters())


def test_an_adapter_folder_loads_without_a_warning(adapter_folder):
    """Every adapter load printed transformers' deprecation of `is_gradient_checkpointing`,
    an attribute peft reads: a warning about nothing the user did."""
    import warnings

    folder, _ = adapter_folder
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_model(str(folder))
    assert [str(w.message) for w in caught] == []


def test_an_adapter_folder_without_a_base_is_named(adapter_folder):
    folder, _ = adapter_folder
    config = json.loads((folder / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = None
    (folder / "adapter_config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="names no base model") as err:
        load_model(str(folder))
    assert "\n" not in str(err.value)


def test_an_adapter_folder_whose_base_is_missing_is_refused_by_the_check(adapter_folder):
    """The dry runs passed such a folder; the run then said only "could not load model
    /old/base: no such directory", naming no adapter."""
    folder, _ = adapter_folder
    config = json.loads((folder / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = "/nowhere/base"
    (folder / "adapter_config.json").write_text(json.dumps(config))
    message = f"{folder}: adapter_config.json names the base model /nowhere/base: no such directory"
    with pytest.raises(ValueError) as err:
        check_model_dir(str(folder))
    assert str(err.value) == message
    with pytest.raises(ValueError) as err:
        load_model(str(folder))
    assert str(err.value) == f"could not load model {message}"


def test_adapters_made_for_another_model_are_one_line(adapter_folder):
    from rlvr.models import resolve_model_path

    folder, _ = adapter_folder
    config = json.loads((folder / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = resolve_model_path("tiny")  # hidden 128, not 32
    (folder / "adapter_config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="do not fit the base model") as err:
        load_model(str(folder))
    assert "\n" not in str(err.value)


def test_an_adapter_folders_fingerprint_is_the_merged_model_evaluated(
    adapter_folder, tiny_model_dir
):
    """``rlvr eval`` records the fingerprint of what it evaluates: a folder of adapters is its
    base model with the adapters merged, not the base and not the folder's path."""
    from rlvr.models.fingerprint import weights_sha256

    folder, adapted = adapter_folder
    model, _ = load_model(str(folder))
    base, _ = load_model(str(tiny_model_dir))
    assert weights_sha256(model) == weights_sha256(adapted.merge_and_unload())
    assert weights_sha256(model) != weights_sha256(base)
