"""docs/rewards.md's table of ``Scores.metrics()`` names every key the scorer logs."""

from pathlib import Path

from rlvr.rewards.scoring import Scores

DOC = (Path(__file__).resolve().parents[2] / "docs" / "rewards.md").read_text()


def test_every_scores_metric_is_in_the_docs_table():
    table = DOC.split("| Metric (`Scores.metrics()`) |", 1)[1].split("\n\n", 1)[0]
    keys = Scores(values=[], status=[], events=[]).metrics()
    missing = [key for key in keys if f"| `{key}` |" not in table]
    assert not missing, f"docs/rewards.md's Scores.metrics() table lacks {missing}"
