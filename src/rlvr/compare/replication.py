"""Whether another study's decided verdicts replicate on this study's seeds.

A study file's ``replicates: NAME`` names the study it checks. Its runs must lie under the
same ``--out``; they are judged as that study's own report judges them. A verdict that study
decided (reproduced or not reproduced) **replicates** when this study gives the same verdict
for the same claim and regime and it holds with Holm's correction across this study's claims
(:mod:`rlvr.compare.multiplicity`). The rule is strict on purpose: a replication is new
evidence only where it could have failed. When the two studies share seeds the report says
so, since their numbers are then not independent.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlvr.compare.claims import NOT_REPRODUCED, REPRODUCED, Verdict
from rlvr.compare.multiplicity import holds, p_text


@dataclass(frozen=True)
class Replication:
    """One verdict the other study decided, and what this study says of the same claim."""

    there: Verdict
    here: Verdict | None
    """This study's verdict of the same claim and regime (None: it has none)."""

    @property
    def replicates(self) -> bool:
        return self.here is not None and self.here.status == self.there.status and holds(self.here)


def replications(there: list[Verdict], here: list[Verdict]) -> list[Replication]:
    """A row per verdict decided ``there``, matched to ``here`` by claim id and regime."""
    mine = {(v.claim.id, v.regime): v for v in here}
    decided = [v for v in there if v.status in (REPRODUCED, NOT_REPRODUCED)]
    return [Replication(v, mine.get((v.claim.id, v.regime))) for v in decided]


def _cell(v: Verdict | None) -> str:
    if v is None:
        return "not judged"
    holm = "" if v.p_holm is None else f" (Holm p {p_text(v.p_holm)})"
    return v.status + holm


def table(rows: list[Replication], regimes: bool) -> list[list[str]]:
    """The replication table: claim, (regime), verdict there, verdict here, replicates."""
    head = ["claim", *(["regime"] if regimes else []), "there", "here", "replicates"]
    return [head] + [
        [
            f"`{r.there.claim.id}`",
            *([r.there.regime] if regimes else []),
            _cell(r.there),
            _cell(r.here),
            "**yes**" if r.replicates else "no",
        ]
        for r in rows
    ]


def shared_seeds(rows: list[Replication]) -> list[int]:
    """Seeds both studies' verdicts of some claim were judged on."""
    shared = (set(r.there.seeds) & set(r.here.seeds) for r in rows if r.here is not None)
    return sorted(set().union(*shared))


def summary(name: str, rows: list[Replication]) -> str:
    """The paragraph above the table: the rule, the count, and whether the seeds overlap."""
    count, shared = sum(r.replicates for r in rows), shared_seeds(rows)
    overlap = (
        f"The two studies share seeds {', '.join(map(str, shared))}, so their numbers "
        "are not independent."
        if shared
        else "The two studies share no seed: these numbers are independent of theirs."
    )
    return (
        f"**{count} of the {len(rows)} verdicts `{name}` decided replicate here.** A verdict "
        "replicates when this study gives the same verdict for the same claim and it holds "
        f"with Holm's correction across this study's claims (rlvr.compare.replication). {overlap}"
    )
