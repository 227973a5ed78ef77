"""``torch_device``: a device this machine has, or one clear line naming what was asked."""

import pytest
import torch

from rlvr.models import device_notes, load_model, torch_device


def test_cpu_is_a_device():
    assert torch_device("cpu") == torch.device("cpu")


def test_auto_is_the_gpu_torch_sees_else_the_cpu(monkeypatch):
    monkeypatch.delenv("RLVR_AUTO_DEVICE")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert torch_device("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert torch_device("auto") == torch.device("cuda")
    monkeypatch.setenv("RLVR_AUTO_DEVICE", "cpu")  # what the tests run with
    assert torch_device("auto") == torch.device("cpu")


def test_a_model_loads_on_the_auto_device_by_default(tiny_model_dir):
    model, _ = load_model(str(tiny_model_dir))
    assert next(model.parameters()).device == torch_device("auto")


def test_a_run_names_its_device_only_off_the_cpu():
    """With ``auto`` a GPU is taken unasked: the run says so (and says nothing on the CPU)."""
    assert device_notes(torch.nn.Linear(2, 2)) == []
    assert device_notes(torch.nn.Linear(2, 2, device="meta")) == ["model on meta"]


def test_unknown_device_type_is_a_value_error():
    with pytest.raises(ValueError, match="torch device such as cpu, cuda.*got 'gpu0'"):
        torch_device("gpu0")


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_without_cuda_is_a_value_error():
    with pytest.raises(ValueError, match="device 'cuda:0' is not available to this torch"):
        torch_device("cuda:0")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_index_past_the_devices_is_a_value_error():
    with pytest.raises(ValueError, match="is not available"):
        torch_device(f"cuda:{torch.cuda.device_count()}")


def test_load_model_checks_the_device_before_loading(tmp_path):
    with pytest.raises(ValueError, match="torch device such as"):
        load_model(str(tmp_path / "no-model"), device="nope")


def test_a_local_directory_without_a_loadable_model_is_named_as_such(tiny_model_dir, tmp_path):
    """The error said "not a local directory" about a directory that holds a broken model."""
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):  # no weights
        (tmp_path / name).write_bytes((tiny_model_dir / name).read_bytes())
    with pytest.raises(ValueError) as err:
        load_model(str(tmp_path))
    message = str(err.value)
    assert f"could not load model from the directory {str(tmp_path)!r}" in message
    assert "not a local directory" not in message and "model.safetensors" in message


@pytest.mark.parametrize("name", ["/nonexistent/model", "./missing", "runs/x/checkpoints"])
def test_a_missing_local_path_is_named_without_asking_the_hub(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"no such directory$"):
        load_model(name)


def test_a_file_given_as_the_model_is_named_a_file(tiny_model_dir):
    """`--model runs/x/model.safetensors` (or a data file) was "no such directory"."""
    weights = str(tiny_model_dir / "model.safetensors")
    with pytest.raises(ValueError, match=r"model.safetensors: is a file; a model is the directory"):
        load_model(weights)


def test_a_model_under_the_home_folder_loads_by_its_tilde_path(tiny_model_dir, monkeypatch):
    """``~/m`` passed the directory check (which expands ``~``) but reached transformers as is."""
    monkeypatch.setenv("HOME", str(tiny_model_dir.parent))
    model, tokenizer = load_model(f"~/{tiny_model_dir.name}")
    want, want_tokenizer = load_model(str(tiny_model_dir))
    assert tokenizer("1 + 2")["input_ids"] == want_tokenizer("1 + 2")["input_ids"]
    for (name, got), (_, ref) in zip(
        model.state_dict().items(), want.state_dict().items(), strict=True
    ):
        torch.testing.assert_close(got, ref, rtol=0, atol=0, msg=name)


def test_a_directory_with_a_model_but_no_tokenizer_is_an_error(tiny_model_dir, tmp_path):
    """transformers built an empty tokenizer (every text encoded to no tokens) and loading went on."""
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        (tmp_path / name).write_bytes((tiny_model_dir / name).read_bytes())
    with pytest.raises(ValueError, match=f"{tmp_path}: holds a model but no tokenizer"):
        load_model(str(tmp_path))


def test_a_directory_without_config_json_is_named_as_no_model(tmp_path):
    """A run directory given as the model stopped with transformers' "Should have a
    `model_type` key in its config.json", about a directory with no config.json at all."""
    step = tmp_path / "checkpoints" / "step_000008"
    step.mkdir(parents=True)
    (tmp_path / "config.yaml").write_text("steps: 8\n")
    with pytest.raises(
        ValueError,
        match=rf"holds no model \(no config\.json\); a run's models are its checkpoints, e\.g\. {step}$",
    ):
        load_model(str(tmp_path))
    with pytest.raises(ValueError, match=r"holds no model \(no config\.json\)$"):
        load_model(str(step))


def test_a_hub_model_unreachable_offline_says_so(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ValueError, match="the Hugging Face Hub: HF_HUB_OFFLINE is set"):
        load_model("rlvr-no-such-org/no-such-model")


def test_a_hub_models_config_unreachable_offline_says_so(monkeypatch, capsys):
    """`rlvr train model=Org/Model --show-prompts 1` (which reads the config, not the weights)
    gave transformers' paragraph ("We couldn't connect to 'https://huggingface.co' ... Check
    your internet connection ..."), where a run says the Hub is off in one line."""
    from huggingface_hub import constants

    from rlvr.cli import main
    from rlvr.models import model_tokenizer_and_config

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    said = (
        "could not load the config of model 'rlvr-no-such-org/no-such-model': not a preset "
        r"\(.*\), not a local directory, and the Hugging Face Hub: HF_HUB_OFFLINE is set$"
    )
    with pytest.raises(ValueError, match=said):
        model_tokenizer_and_config("rlvr-no-such-org/no-such-model")
    assert main(["train", "model=rlvr-no-such-org/no-such-model", "--show-prompts", "1"]) == 2
    assert "the Hugging Face Hub: HF_HUB_OFFLINE is set\n" in capsys.readouterr().err


def test_damaged_weights_or_tokenizer_files_are_named(tiny_model_dir, tmp_path):
    """A truncated model.safetensors escaped as safetensors' SafetensorError (a traceback in
    the commands); a damaged tokenizer.json said only "Expecting value: line 2 column 1"."""
    weights, tokenizer = tmp_path / "weights", tmp_path / "tokenizer"
    for folder in (weights, tokenizer):
        folder.mkdir()
        for item in tiny_model_dir.iterdir():
            (folder / item.name).write_bytes(item.read_bytes())
    (weights / "model.safetensors").write_bytes(
        (tiny_model_dir / "model.safetensors").read_bytes()[:100]
    )
    with pytest.raises(
        ValueError, match=rf"could not load model from {str(weights)!r}: damaged weights"
    ):
        load_model(str(weights))
    (tokenizer / "tokenizer.json").write_text('{"x":\n')
    with pytest.raises(
        ValueError, match=rf"could not load the tokenizer of {str(tokenizer)!r}: Expecting"
    ):
        load_model(str(tokenizer))
    (tokenizer / "tokenizer_config.json").write_text('{"x":\n')
    with pytest.raises(
        ValueError, match=rf"could not load the tokenizer of {str(tokenizer)!r}: Expecting"
    ):
        load_model(str(tokenizer))


def test_loading_a_model_shows_no_progress_bar_of_transformers(tiny_model_dir, capfd):
    """transformers' "Loading weights" bar came through every rlvr eval and data filter."""
    from transformers.utils import logging as hf_logging

    from rlvr.models import load_model

    hf_logging.enable_progress_bar()
    load_model(str(tiny_model_dir))
    assert "Loading weights" not in capfd.readouterr().err
    assert hf_logging.is_progress_bar_enabled()  # left as it was
