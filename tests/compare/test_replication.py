"""Whether another study's decided verdicts replicate: the rule, the table and the seeds."""

import dataclasses

from rlvr.compare.claims import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, Claim, Verdict
from rlvr.compare.replication import replications, shared_seeds, summary, table


def verdict(claim_id, status, p_holm, seeds=(0, 1, 2), regime="r"):
    claim = Claim(claim_id, text="a > b", rule="direction", metric="m", arm="a", baseline="b")
    return Verdict(claim, status, "", "", seeds=list(seeds), regime=regime, p_holm=p_holm)


THERE = [
    verdict("same", NOT_REPRODUCED, 0.001),
    verdict("weak-here", REPRODUCED, 0.01),
    verdict("flipped", REPRODUCED, 0.02),
    verdict("gone", NOT_REPRODUCED, 0.03),
    verdict("undecided", INCONCLUSIVE, 1.0),  # not a verdict to replicate
    verdict("other-regime", REPRODUCED, 0.01, regime="q"),
]
HERE = [
    verdict("same", NOT_REPRODUCED, 0.004, seeds=(5, 6)),
    verdict("weak-here", REPRODUCED, 0.2, seeds=(5, 6)),  # same verdict, not holding
    verdict("flipped", NOT_REPRODUCED, 0.001, seeds=(5, 6)),
    verdict("gone", INCONCLUSIVE, 1.0, seeds=(5, 6)),
    verdict("undecided", REPRODUCED, 0.001, seeds=(5, 6)),
]


def test_a_verdict_replicates_only_when_it_is_the_same_and_holds_with_holm():
    rows = replications(THERE, HERE)
    assert [r.there.claim.id for r in rows] == [
        "same", "weak-here", "flipped", "gone", "other-regime",
    ]  # fmt: skip
    assert [r.replicates for r in rows] == [True, False, False, False, False]
    assert rows[-1].here is None  # no verdict of that claim in that regime here


def test_the_table_and_summary_say_what_replicated_and_whether_the_seeds_overlap():
    rows = replications(THERE, HERE)
    cells = table(rows, regimes=False)
    assert cells[0] == ["claim", "there", "here", "replicates"]
    assert cells[1] == [
        "`same`", "not reproduced (Holm p 0.001)", "not reproduced (Holm p 0.004)", "**yes**",
    ]  # fmt: skip
    assert cells[-1][2:] == ["not judged", "no"]
    text = summary("base", rows)
    assert text.startswith("**1 of the 5 verdicts `base` decided replicate here.**")
    assert "share no seed" in text and shared_seeds(rows) == []
    overlapping = [dataclasses.replace(HERE[0], seeds=[2, 5])]
    rows = replications(THERE[:1], overlapping)
    assert shared_seeds(rows) == [2] and "share seeds 2, so" in summary("base", rows)
