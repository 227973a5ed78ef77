"""cispo: detached clipped IS weight times the log-likelihood (Klear app. A.1)."""

import math

from .helpers import OLD, close, per_token_grad, run

RATIOS = [[1.5, 0.5, 1.0], [0.5, 1.5, 1.0]]
ADV = [1.0, -1.0]


def test_value_is_weighted_log_likelihood():
    loss, metrics, _ = run("cispo", [[1.5, 0.5]], [2.0])
    lp = [OLD + math.log(1.5), OLD + math.log(0.5)]
    close(loss, (-1.28 * 2 * lp[0] - 0.8 * 2 * lp[1]) / 2)
    close(metrics["clip/frac"], 1.0)


def test_gradient_factor_is_the_clipped_ratio_in_all_quadrants():
    close(per_token_grad("cispo", RATIOS, ADV), [[-1.28, -0.8, -1.0], [0.8, 1.28, 1.0]])
    _, metrics, _ = run("cispo", RATIOS, ADV)
    close(metrics["clip/frac"], 4 / 6)
    close(metrics["clip/low_frac"], 2 / 6)
    close(metrics["clip/high_frac"], 2 / 6)


def test_infinite_eps_low_removes_the_lower_bound():
    close(
        per_token_grad("cispo", RATIOS, ADV, eps_low=math.inf),
        [[-1.28, -0.5, -1.0], [0.5, 1.28, 1.0]],
    )
