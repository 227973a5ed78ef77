"""The evaluation harness: avg@k / pass@k / maj@k metrics and :func:`evaluate`.

::

    from rlvr.evaluation import EvalConfig, evaluate

    report = evaluate(model, tokenizer, examples, "math", EvalConfig(n=8, ks=(1, 4, 8)))
    report.metrics["avg@8"], report.metrics["pass@4"], report.per_dataset["math500"]

Two reports of the same problems compared problem by problem: :func:`paired_differences`
(per dataset too: :func:`~rlvr.evaluation.paired.compare_reports`).
"""

from rlvr.evaluation.harness import (
    EVAL_SAMPLING,
    EvalConfig,
    EvalReport,
    ProblemResult,
    build_report,
    evaluate,
)
from rlvr.evaluation.majority import maj_at_k
from rlvr.evaluation.metrics import (
    avg_at_k,
    best_at_k,
    mean_at_k,
    mean_avg_at_k,
    mean_pass_at_k,
    pass_at_k,
    summarize,
)
from rlvr.evaluation.paired import paired_differences, read_report

__all__ = [
    "EVAL_SAMPLING",
    "EvalConfig",
    "EvalReport",
    "ProblemResult",
    "avg_at_k",
    "best_at_k",
    "build_report",
    "evaluate",
    "maj_at_k",
    "mean_at_k",
    "mean_avg_at_k",
    "mean_pass_at_k",
    "paired_differences",
    "pass_at_k",
    "read_report",
    "summarize",
]
