"""AReaL's decoupled objective against hand-worked numbers.

One sequence of two tokens, A = 1, grpo with eps = 0.2, seq-mean-token-mean (here the
token mean of one sequence):

token  pi_theta  pi_prox  pi_behav   u = theta/prox   min(u, clip(u))   w = prox/behav   w * min
  1      0.6       0.5      0.4          1.2              1.2              1.25            1.5
  2      0.3       0.2      0.5          1.5              1.2 (clipped)    0.4             0.48

loss = -(1.5 + 0.48) / 2 = -0.99; d loss / d logp_1 = -w_1 u_1 / 2 = -0.75 (u_1 = 1.2 sits
on the clip edge from inside: min picks u), token 2 is clipped: gradient 0.

The coupled objective (ratio against pi_behav): r = 1.5 (clipped to 1.2) and 0.6, loss
-(1.2 + 0.6) / 2 = -0.9. With cap 1.2 token 1 (w = 1.25) leaves the loss: -(0 + 0.48) / 2.
"""

import math

import pytest
import torch

from rlvr.objectives import LossInputs, ObjectiveConfig, objective_loss
from rlvr.objectives.decoupled import decoupled_inputs

THETA, PROX, BEHAV = [0.6, 0.3], [0.5, 0.2], [0.4, 0.5]


def _log(values):
    return torch.log(torch.tensor([values], dtype=torch.float64))


def _inputs(old):
    logp = torch.log(torch.tensor([THETA], dtype=torch.float64)).requires_grad_()
    return logp, LossInputs(
        logp=logp, old_logp=old, advantages=torch.ones(1), mask=torch.ones(1, 2)
    )


GRPO = ObjectiveConfig.of("grpo", eps_low=0.2, eps_high=0.2)


def test_decoupled_loss_gradient_and_weights():
    logp, inputs = _inputs(_log(PROX))
    dec = decoupled_inputs(inputs, _log(BEHAV))
    loss, _ = objective_loss(dec.inputs, GRPO)
    assert float(loss.detach()) == pytest.approx(-0.99, abs=1e-12)
    loss.backward()
    assert logp.grad.tolist()[0] == pytest.approx([-0.75, 0.0], abs=1e-12)
    assert dec.inputs.token_weights.tolist()[0] == pytest.approx([1.25, 0.4], abs=1e-12)
    assert float(dec.metrics["decoupled/weight_mean"]) == pytest.approx(0.825, abs=1e-12)
    assert float(dec.metrics["decoupled/weight_max"]) == pytest.approx(1.25, abs=1e-12)
    assert float(dec.metrics["decoupled/capped_frac"]) == 0.0


def test_coupled_objective_differs():
    _, inputs = _inputs(_log(BEHAV))
    loss, _ = objective_loss(inputs, GRPO)
    assert float(loss.detach()) == pytest.approx(-0.9, abs=1e-12)


def test_cap_drops_tokens_from_the_loss_not_the_denominator():
    _, inputs = _inputs(_log(PROX))
    dec = decoupled_inputs(inputs, _log(BEHAV), cap=1.2)
    loss, _ = objective_loss(dec.inputs, GRPO)
    assert float(loss.detach()) == pytest.approx(-0.24, abs=1e-12)
    assert float(dec.metrics["decoupled/capped_frac"]) == 0.5


def test_proximal_equal_to_behaviour_is_the_standard_objective():
    _, inputs = _inputs(_log(BEHAV))
    dec = decoupled_inputs(inputs, _log(BEHAV))
    assert torch.equal(objective_loss(dec.inputs, GRPO).loss, objective_loss(inputs, GRPO).loss)


def test_existing_token_weights_multiply():
    _, inputs = _inputs(_log(PROX))
    inputs = LossInputs(**{**inputs.__dict__, "token_weights": torch.tensor([[2.0, 1.0]])})
    dec = decoupled_inputs(inputs, _log(BEHAV))
    assert dec.inputs.token_weights.tolist()[0] == pytest.approx([2.5, 0.4])


def test_padding_gets_weight_zero_and_bad_cap_is_refused():
    logp = _log([0.5, 1.0])
    inputs = LossInputs(
        logp=logp, old_logp=logp, advantages=torch.ones(1), mask=torch.tensor([[1, 0]])
    )
    dec = decoupled_inputs(
        inputs, torch.tensor([[math.log(0.25), float("nan")]], dtype=torch.float64)
    )
    assert dec.inputs.token_weights.tolist()[0] == [2.0, 0.0]
    with pytest.raises(ValueError, match="cap must be > 1"):
        decoupled_inputs(inputs, logp, cap=1.0)
