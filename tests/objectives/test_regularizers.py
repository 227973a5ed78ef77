"""KL estimators, SFT on positives (Klear eq. 13-14), entropy bonus."""

import math

import pytest
import torch

from rlvr.objectives import kl_penalty, policy_loss

from .helpers import OLD, close, inputs

D = [0.5, -0.2]  # ref_logp - logp on the two response tokens


def test_kl_estimators_by_hand():
    logp = torch.tensor([[0.0, 0.0, 3.0]], dtype=torch.float64)
    ref = torch.tensor(
        [[0.5, -0.2, 900.0]], dtype=torch.float64
    )  # padding: huge, never exponentiated
    mask = torch.tensor([[True, True, False]])
    close(kl_penalty(logp, ref, mask, "k1"), [[-0.5, 0.2, 0.0]])
    close(kl_penalty(logp, ref, mask, "k2"), [[0.125, 0.02, 0.0]])
    close(kl_penalty(logp, ref, mask, "k3"), [[math.exp(0.5) - 1.5, math.exp(-0.2) - 0.8, 0.0]])


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
def test_kl_term_is_added_with_the_objective_aggregation(estimator):
    logp, old, mask = inputs([[1.0, 1.0]])
    ref = logp.detach() + torch.tensor([D], dtype=torch.float64)
    adv = torch.tensor([0.0], dtype=torch.float64)  # objective contributes 0
    loss, metrics = policy_loss(
        "grpo",
        logp=logp,
        old_logp=old,
        advantages=adv,
        mask=mask,
        ref_logp=ref,
        kl_coef=0.1,
        kl_estimator=estimator,
    )
    (grad,) = torch.autograd.grad(loss, logp)
    per_token = {
        "k1": [-d for d in D],
        "k2": [0.5 * d * d for d in D],
        "k3": [math.exp(d) - d - 1 for d in D],
    }[estimator]
    dper_token = {"k1": [1.0, 1.0], "k2": [-d for d in D], "k3": [1 - math.exp(d) for d in D]}[
        estimator
    ]
    close(loss, 0.1 * sum(per_token) / 2)
    close(grad, [[0.1 * g / 2 for g in dper_token]])
    close(metrics[f"kl/ref_{estimator}"], sum(per_token) / 2)


def test_kl_is_measured_but_not_added_when_coef_is_zero():
    logp, old, mask = inputs([[1.0, 1.0]])
    ref = logp.detach() + torch.tensor([D], dtype=torch.float64)
    adv = torch.tensor([1.0], dtype=torch.float64)
    with_ref, metrics = policy_loss(
        "grpo", logp=logp, old_logp=old, advantages=adv, mask=mask, ref_logp=ref
    )
    without, _ = policy_loss("grpo", logp=logp, old_logp=old, advantages=adv, mask=mask)
    close(with_ref, without)
    assert "kl/ref_k3" in metrics


def test_sft_on_positive_responses():
    logp, old, mask = inputs([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]], [[1, 1, 0], [1, 1, 1]])
    rewards = torch.tensor([1.0, 0.0])
    adv = torch.tensor([0.0, 0.0], dtype=torch.float64)
    loss, metrics = policy_loss(
        "grpo", logp=logp, old_logp=old, advantages=adv, mask=mask, rewards=rewards, sft_coef=0.1
    )
    (grad,) = torch.autograd.grad(loss, logp)
    close(loss, 0.1 * -OLD)  # token-mean NLL of row 0's two tokens, each -log p = 1
    close(grad, [[-0.05, -0.05, 0.0], [0.0, 0.0, 0.0]])
    close(metrics["sft/loss"], 1.0)
    # with the step's positive-token count (e.g. 4 across micro-batches) the share shrinks
    loss, _ = policy_loss(
        "grpo",
        logp=logp,
        old_logp=old,
        advantages=adv,
        mask=mask,
        rewards=rewards,
        sft_coef=0.1,
        num_sft_tokens=4,
    )
    close(loss, 0.1 * 2 / 4)


def test_sft_threshold_and_no_positives():
    logp, old, mask = inputs([[1.0], [1.0]])
    adv = torch.zeros(2, dtype=torch.float64)
    common = {"logp": logp, "old_logp": old, "advantages": adv, "mask": mask, "sft_coef": 0.1}
    loss, metrics = policy_loss("grpo", **common, rewards=torch.tensor([0.5, 0.2]))
    close(loss, 0.0)
    close(metrics["sft/loss"], 0.0)
    loss, _ = policy_loss("grpo", **common, rewards=torch.tensor([0.5, 0.2]), sft_threshold=0.5)
    close(loss, 0.1)


def test_entropy_bonus_lowers_the_loss_and_has_gradient():
    logp, old, mask = inputs([[1.0, 1.0], [1.0, 1.0]], [[1, 1], [1, 0]])
    entropy = torch.tensor([[2.0, 1.0], [3.0, 50.0]], dtype=torch.float64, requires_grad=True)
    adv = torch.zeros(2, dtype=torch.float64)
    loss, metrics = policy_loss(
        "grpo",
        logp=logp,
        old_logp=old,
        advantages=adv,
        mask=mask,
        entropy=entropy,
        entropy_coef=0.01,
    )
    (grad,) = torch.autograd.grad(loss, entropy)
    close(loss, -0.01 * (1.5 + 3.0) / 2)  # seq-mean-token-mean of H
    close(grad, [[-0.01 / 4, -0.01 / 4], [-0.01 / 2, 0.0]])
    close(metrics["policy/entropy"], 2.0)  # token mean of 2, 1, 3
