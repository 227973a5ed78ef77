"""``RlvrGRPOTrainer`` under two real processes (gloo on CPU, the ``torchrun`` environment):
one optimiser step gives the loss, gradient and logged rlvr metrics of one process on the
same generation batch. 12 completions in groups of 4, micro-batches of 2 rows: every group is
split across micro-batches, and with two processes (6 rows each) the second group across
processes, so ETR's pass rate and APMPO's batch mean and std must come from the whole batch
gathered over processes, and every micro-batch's loss must divide by the whole step's counts."""

from __future__ import annotations

import os
import socket
import warnings

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

ROWS, GROUP, MICRO = 12, 4, 2  # the generation batch, num_generations, rows per micro-batch
CASES = {
    "etr": {"beta": 0.05, "entropy_coef": 0.01, "sft_coef": 0.1},  # + KL, entropy and SFT terms
    "apmpo": {},
}


def rollout(prompts, trainer):
    """Deterministic completions, set by each row's place in the whole generation batch (so
    one process and two produce the same batch): 1 to 7 random tokens."""
    start = trainer.accelerator.process_index * len(prompts)
    tokenizer, vocab = trainer.processing_class, trainer.model.config.vocab_size
    completions = []
    for row in range(start, start + len(prompts)):
        gen = torch.Generator().manual_seed(row)
        length = int(torch.randint(1, 8, (1,), generator=gen))
        completions.append(torch.randint(3, vocab, (length,), generator=gen).tolist())
    prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    return {"prompt_ids": prompt_ids, "completion_ids": completions, "logprobs": None}


def odd_length(completion_ids, **_):
    """1 for a completion of odd length: rewards with variance inside the groups."""
    return [float(len(ids) % 2) for ids in completion_ids]


class GradientsAtStep(TrainerCallback):
    """Keeps the gradients the optimiser is about to apply (after DDP's all-reduce)."""

    def __init__(self):
        self.grads = {}

    def on_pre_optimizer_step(self, args, state, control, model=None, **_):
        self.grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def train_one_step(model_dir, out_dir, name, processes):
    """One optimiser step of ``name`` over the 12-row generation batch; the step's loss,
    gradients and logged rlvr metrics."""
    from datasets import Dataset
    from trl import GRPOConfig

    from rlvr.engines.trl import RlvrGRPOTrainer

    options = dict(CASES[name])
    sft_coef = options.pop("sft_coef", 0.0)
    accumulation = ROWS // (MICRO * processes)  # every micro-batch of the generation batch
    args = GRPOConfig(
        output_dir=str(out_dir),
        use_cpu=True,
        report_to="none",
        seed=0,
        max_steps=1,
        logging_steps=1,
        save_strategy="no",
        per_device_train_batch_size=MICRO,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=accumulation,
        num_generations=GROUP,
        max_completion_length=8,
        learning_rate=1e-4,
        max_grad_norm=0.0,  # no clipping: the callback sees the raw gradient
        model_init_kwargs={"dtype": "float32"},
        bf16=False,
        dataloader_num_workers=0,
        use_bias_correction_kl=False,
        eval_strategy="steps",
        eval_steps=1,
        per_device_eval_batch_size=ROWS // processes,
        **options,
    )
    prompts = ["What is 3 + 4?", "Sum 1 + 2 + 3.", "What is 9 + 9?", "Calculate 7 - 2."]
    grads = GradientsAtStep()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        trainer = RlvrGRPOTrainer(
            str(model_dir),
            odd_length,
            args,
            train_dataset=Dataset.from_dict({"prompt": prompts * 4}),
            eval_dataset=Dataset.from_dict({"prompt": prompts[:3]}),  # 12 rows, as in training
            objective=name,
            sft_coef=sft_coef,
            rollout_func=rollout,
            callbacks=[grads],
        )
    on_policy = sum("on-policy" in str(w.message) for w in said)
    trainer.train()
    logged = trainer.state.log_history[0]
    evaluated = next(row for row in trainer.state.log_history if "eval_loss" in row)
    processes = trainer.accelerator.num_processes
    return {
        "logged": logged,
        "evaluated": evaluated,
        "grads": grads.grads,
        "processes": processes,
        "on_policy_notes": on_policy,
    }


def worker(rank, model_dir, out_dir, port):
    """One of two processes, in the environment ``torchrun --nproc_per_node 2`` sets."""
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE="2",
        LOCAL_WORLD_SIZE="2",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        OMP_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        TRL_EXPERIMENTAL_SILENCE="1",
    )
    torch.set_num_threads(1)
    results = {name: train_one_step(model_dir, out_dir, name, 2) for name in CASES}
    torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def two_process_results(tiny_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("two-process")
    mp.start_processes(
        worker, args=(str(tiny_model_dir), str(out), free_port()), nprocs=2, start_method="spawn"
    )
    return [torch.load(out / f"rank{rank}.pt") for rank in (0, 1)]


RLVR_PREFIXES = ("clip/", "ratio/", "kl/", "policy/entropy", "sft/", "etr/", "apmpo/")


@pytest.fixture(scope="module")
def one_process_results(tiny_model_dir, tmp_path_factory):
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    out = tmp_path_factory.mktemp("one-process")
    return {name: train_one_step(tiny_model_dir, out / name, name, 1) for name in CASES}


@pytest.mark.parametrize("name", list(CASES))
def test_two_process_step_equals_one_process(name, two_process_results, one_process_results):
    one = one_process_results[name]
    ranks = [results[name] for results in two_process_results]
    assert one["processes"] == 1 and all(r["processes"] == 2 for r in ranks)
    two = ranks[0]
    for param, grad in one["grads"].items():  # DDP's averaged gradient, the same on both ranks
        torch.testing.assert_close(two["grads"][param], grad, rtol=1e-4, atol=1e-7)
        torch.testing.assert_close(ranks[1]["grads"][param], two["grads"][param], rtol=0, atol=0)
    assert sum(float(g.abs().sum()) for g in one["grads"].values()) > 0
    assert two["logged"]["loss"] == pytest.approx(one["logged"]["loss"], rel=1e-5, abs=1e-7)
    names = {k for k in one["logged"] if k.startswith(RLVR_PREFIXES)}
    expected = {f"{name}/eps_mean", "kl/ref_k3", "sft/loss"} if name == "etr" else {"apmpo/p"}
    assert expected <= names and names == {k for k in two["logged"] if k.startswith(RLVR_PREFIXES)}
    for metric in names:
        assert two["logged"][metric] == pytest.approx(one["logged"][metric], rel=1e-5, abs=1e-7), (
            metric
        )


@pytest.mark.parametrize("name", list(CASES))
def test_two_process_evaluation_equals_one_process(name, two_process_results, one_process_results):
    """The evaluation after that step, on the same 12 rows: ``eval_loss`` is the whole batch's
    (it was the main process's half: transformers keeps one process's value) and so is every
    logged rlvr metric."""
    one = one_process_results[name]["evaluated"]
    two = two_process_results[0][name]["evaluated"]
    assert two["eval_loss"] == pytest.approx(one["eval_loss"], rel=1e-5, abs=1e-7)
    names = {k for k in one if k.removeprefix("eval_").startswith(RLVR_PREFIXES)}
    assert names and names == {k for k in two if k.removeprefix("eval_").startswith(RLVR_PREFIXES)}
    for metric in names:
        assert two[metric] == pytest.approx(one[metric], rel=1e-5, abs=1e-7), metric


def test_the_on_policy_note_is_given_once_not_once_per_process(
    two_process_results, one_process_results
):
    """Each step here is on-policy (one optimiser step per generation batch): the warning that
    the objective cannot act came from every process under torchrun; the main one gives it."""
    for name in CASES:
        assert one_process_results[name]["on_policy_notes"] == 1
        assert [r[name]["on_policy_notes"] for r in two_process_results] == [1, 0]
