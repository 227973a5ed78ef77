"""The study report: ``report.md``, a self-contained ``report.html``, figures and ``results.json``.

The claims are judged, and the report is built as one list of blocks (headings, paragraphs,
tables, figures, code) that :mod:`rlvr.compare.render` writes as both documents, so they say
the same thing.
"""

from __future__ import annotations

import csv
import dataclasses
import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlvr.compare import figures, multiplicity, replication
from rlvr.compare.claims import (
    CONFIRMATORY,
    DESCRIPTIVE,
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    UNTESTABLE,
    Claim,
    Verdict,
    judge,
    load_claims,
    paired_arrays,
)
from rlvr.compare.evidence import assess, pair_evidence, same_run
from rlvr.compare.render import Block, to_html, to_markdown
from rlvr.compare.results import ArmData, load_run
from rlvr.compare.stats import LEVEL, Interval, mean_std, paired_interval
from rlvr.compare.study import RunSpec, Study, load_study, objective_name, plan
from rlvr.compare.worker import code_hash

FIGURES_DIR = "figures"
MARK = {
    REPRODUCED: "reproduced",
    NOT_REPRODUCED: "**not reproduced**",
    INCONCLUSIVE: "inconclusive",
    UNTESTABLE: "untestable",
}
STATUSES = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, UNTESTABLE)


@dataclass(frozen=True)
class ReportFiles:
    """What :func:`write_report` wrote, and the verdicts it judged."""

    markdown: Path
    html: Path
    results: Path
    runs: Path
    """``runs.csv``: one row per finished run (:func:`runs_table`)."""
    figures: list[Path]
    verdicts: list[Verdict]


def collect(specs: list[RunSpec], regime: str | None = None) -> dict[str, ArmData]:
    """Finished runs by arm name, of one regime (``None``: the specs' only one); unfinished
    runs are left out."""
    data: dict[str, ArmData] = {}
    for spec in specs:
        if regime is not None and spec.regime != regime:
            continue
        arm = data.setdefault(spec.arm.name, ArmData(spec.arm.name))
        run = load_run(spec.run_dir, spec.seed)
        if run is not None:
            arm.runs[spec.seed] = run
    return data


def regimes_of(specs: list[RunSpec]) -> list[str]:
    """The regimes of ``specs`` in order of first appearance."""
    return list(dict.fromkeys(spec.regime for spec in specs))


def judge_all(study: Study, specs: list[RunSpec]) -> tuple[dict[str, dict], list[Verdict]]:
    """Per regime its finished runs, and every claim judged in every regime (with the
    evidence on whether its arms could differ, and its p-values corrected across claims)."""
    claims, _ = _claims_by_arms(study)
    by_regime, verdicts = {}, []
    for regime in regimes_of(specs):
        data = by_regime[regime] = collect(specs, regime)
        configs, names = _configs(specs, regime)
        for claim in claims:
            verdict = dataclasses.replace(
                judge(claim, data), regime=regime, role=_role(study, claim.id)
            )
            verdicts.append(assess(verdict, data, configs, names))
    return by_regime, multiplicity.adjust(verdicts)


def _configs(specs: list[RunSpec], regime: str) -> tuple[dict[str, Any], dict[str, str]]:
    """Each arm's run configuration in ``regime`` (its seeds' differ only in the seed), and
    its objective as a ``log.contrast`` name."""
    configs = {spec.arm.name: spec.config for spec in specs if spec.regime == regime}
    return configs, {arm: objective_name(config) for arm, config in configs.items()}


def claims_left_out(study: Study) -> str:
    """One line naming the claims not judged because an arm they need is not an arm of the
    study (a typo, or a claim file shared with a study that runs more arms); empty when every
    claim is judged."""
    names = {a.name for a in study.arms}
    _, left_out = _claims_by_arms(study)
    left = [
        f"`{c.id}` ({', '.join(_missing_arm(a, names) for a in c.arms_needed if a not in names)})"
        for c in left_out
    ]
    if not left:
        return ""
    return f"{len(left)} claims not judged, their arms not in the study: {'; '.join(left)}."


def _missing_arm(name: str, names: set[str]) -> str:
    """``name``, with the study's arm it is a likely typo of (``abc-esp3: did you mean
    abc-eps3?``); a claim file shared with a study of fewer arms names arms far from any."""
    near = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.8)
    return f"{name}: did you mean {near[0]}?" if near else name


def _claims_by_arms(study: Study) -> tuple[list[Claim], list[Claim]]:
    """The study's claims whose arms are all arms of the study (judged), and the others."""
    names = {a.name for a in study.arms}
    judged: list[Claim] = []
    left_out: list[Claim] = []
    for claim in (c for file in study.claims for c in load_claims(file)):
        (judged if set(claim.arms_needed) <= names else left_out).append(claim)
    return judged, left_out


def _role(study: Study, claim_id: str) -> str:
    if not study.confirms:
        return ""
    return CONFIRMATORY if claim_id in study.confirms else DESCRIPTIVE


def held_out_keys(data: dict[str, ArmData]) -> list[str]:
    """``eval/avg@k`` and ``eval/pass@k`` for the largest k logged, then self-BLEU."""
    arms = list(data.values())
    keys = [figures.resolve("eval/avg@*", arms), figures.resolve("eval/pass@*", arms)]
    keys.append(figures.resolve("eval/diversity/self_bleu", arms))
    return [k for k in keys if k]


def _final_table(
    study: Study, arms: list, data: dict[str, ArmData], keys: list[str], alike: dict[str, str]
) -> list[list[str]]:
    """The final held-out scores of ``arms``: per arm its seeds, each key's mean ± std, and the
    first two keys' paired interval against its baseline (``alike``: :func:`trained_alike`)."""
    head = ["arm", "seeds"] + [f"{k[5:]} mean ± std" for k in keys]
    head += [f"Δ {k[5:]} vs baseline [95% CI]" for k in keys[:2]]
    rows = [head]
    for arm in arms:
        runs = data.get(arm.name)
        seeds = sorted(runs.runs) if runs else []
        row = [f"{arm.label} (`{arm.name}`)", str(len(seeds))]
        for key in keys:
            if not seeds:
                row.append("-")
                continue
            mean, std = mean_std(runs.values(key, "final", seeds))
            row.append(f"{mean:.3f} ± {std:.3f}")
        for key in keys[:2]:
            row.append(_delta(arm, data, key, alike.get(arm.name, "")))
        rows.append(row)
    return rows


def _shared_seeds(arm, data: dict[str, ArmData]) -> list[int]:
    """The seeds both ``arm`` and its baseline ran (none without a baseline in ``data``)."""
    if arm.baseline is None or arm.name not in data or arm.baseline not in data:
        return []
    return sorted(set(data[arm.name].runs) & set(data[arm.baseline].runs))


def trained_alike(
    arms: list, specs: list[RunSpec], regime: str, data: dict[str, ArmData]
) -> dict[str, str]:
    """Per arm of ``arms`` that trained as its baseline did on every seed both ran, how:
    "identical runs" or "identical updates", as a claim between the two would find it
    untestable (:attr:`rlvr.compare.evidence.PairEvidence.same_training`); arms that could
    differ from their baseline, or share no seed with it, are left out."""
    configs, names = _configs(specs, regime)
    alike = {}
    for arm in arms:
        seeds = _shared_seeds(arm, data)
        if not seeds or arm.name not in configs or arm.baseline not in configs:
            continue
        how = pair_evidence(data, configs, names, arm.name, arm.baseline, seeds).same_training
        if how:
            alike[arm.name] = how
    return alike


def _delta_interval(arm, data: dict[str, ArmData], key: str) -> Interval | str | None:
    """The paired interval of ``arm`` - its baseline on the final held-out ``key`` (the
    final-score table's last columns), or why there is none; ``None`` without a baseline."""
    if arm.baseline is None or arm.name not in data or arm.baseline not in data:
        return None
    seeds = _shared_seeds(arm, data)
    if len(seeds) < 2:
        return "too few seeds"
    try:
        a, b = paired_arrays(data, arm.name, arm.baseline, key, key, "final", seeds)
    except ValueError as err:
        return f"undefined: {err}"
    return paired_interval(a, b)


def _delta(arm, data: dict[str, ArmData], key: str, alike: str = "") -> str:
    """The final-score table's Δ cell; it names its seeds when they are fewer than an arm's
    own (the mean ± std columns use each arm's own seeds, the interval the shared ones).
    When the arm trained as its baseline did (``alike``: how, from :func:`trained_alike`)
    and every paired difference is exactly 0, it says ``untestable: <how>``: the interval
    [0, 0] would read as a measured zero effect, but the arms could not differ. Differences
    with no spread (the same mean on every seed and on every problem, so a standard error
    of 0) are given without an interval."""
    delta = _delta_interval(arm, data, key)
    if delta is None or isinstance(delta, str):
        return delta or ""
    own = max(len(data[arm.name].runs), len(data[arm.baseline].runs))
    shared = f" (the {delta.seeds} seeds both ran)" if delta.seeds < own else ""
    if alike and _no_difference(arm, data, key):
        what = f"untestable: {alike}"
    elif delta.se == 0:  # every paired difference the same: a t interval of width 0 says nothing
        what = f"{delta.mean:+.3f} (no spread across seeds or problems: no interval)"
    else:
        what = delta.text(3)
    return f"{what} vs `{arm.baseline}`{shared}"


def _no_difference(arm, data: dict[str, ArmData], key: str) -> bool:
    """Whether ``arm`` and its baseline scored exactly the same on ``key`` at every shared
    seed (and, for held-out scores, every problem)."""
    seeds = _shared_seeds(arm, data)
    a, b = paired_arrays(data, arm.name, arm.baseline, key, key, "final", seeds)
    return bool(np.array_equal(a, b))


def _regime_cell(v: Verdict, regimes: bool) -> list[str]:
    return [v.regime] if regimes else []


def _summary_table(verdicts: list[Verdict], regimes: bool) -> list[list[str]]:
    roles = any(v.role for v in verdicts)
    rows = [["paper", "claim", "where", *(["regime"] if regimes else [])]]
    rows[0] += [*(["question"] if roles else []), "verdict", *P_HEAD]
    rows += [
        [
            v.claim.paper,
            f"{v.claim.text} (`{v.claim.id}`)",
            v.claim.source,
            *_regime_cell(v, regimes),
            *([v.role] if roles else []),
            MARK[v.status],
            *_p_cells(v),
        ]
        for v in verdicts
    ]
    return rows


P_HEAD = ["p", "Holm p", "BH q"]


def _p_cells(v: Verdict) -> list[str]:
    """The verdict's p-value and its two corrections across claims (rlvr.compare.multiplicity)."""
    return [multiplicity.p_text(p) for p in (v.p, v.p_holm, v.q_bh)]


def _claims_table(verdicts: list[Verdict], regimes: bool) -> list[list[str]]:
    rows = [["claim", "paper, where", "rule", *(["regime"] if regimes else []), "verdict"]]
    rows[0] += ["numbers", "could the arms differ? (contrast, out-of-band share, detectable)"]
    for v in verdicts:
        c = v.claim
        rule = f"`{c.rule}` ({c.direction if c.rule != 'largest' else c.expect}), summary `{c.summary}`"
        rows.append(
            [
                f"{c.text} (`{c.id}`)",
                f"{c.paper}, {c.source}",
                rule,
                *_regime_cell(v, regimes),
                MARK[v.status],
                v.numbers,
                v.evidence,
            ]
        )
    return rows


RULES_TEXT = [
    "Every arm runs once per seed; runs of different arms with the same seed share the preset, "
    "the training-prompt order and the held-out problems, so arms are compared **paired by seed** "
    "(and, for held-out scores, by problem, matched by id; arms that evaluated different "
    "problems do not pair).",
    f"**Confidence intervals**: paired Student-t interval at level {LEVEL:.0%} "
    "(rlvr.compare.stats.paired_interval): the mean difference -+ t x its standard error, "
    "where the squared standard error is the sample variance of the per-seed mean differences "
    "over S plus, for held-out scores, the sample variance of the per-problem mean differences "
    "over the P problems. t has S - 1 degrees of freedom for a per-run summary and "
    "Welch-Satterthwaite's for held-out scores (between min(S, P) - 1 and S + P - 2). The "
    "evaluation's sampling noise, counted in both terms, makes a held-out interval conservative, "
    "and its df, estimated from few seeds, liberal: simulated with no true difference it excludes "
    "0 in 1-8% of trials with 3 seeds and in 2-13% with 2 (at most about 6% from 5 seeds on). "
    "With 3 seeds t(2) = 4.30, so an interval of a per-run summary excludes 0 only when the "
    "seeds agree closely.",
    "**Many claims, one test each, then read together**: every verdict is its own 95% test. With "
    "no true difference anywhere, about 2.5% of the direction claims would still come out "
    "reproduced and 2.5% not reproduced, so each verdict also has a p-value, corrected across "
    "every tested claim of the study (each claim in each regime) by Holm's method (family-wise "
    "error at most 5%, for any dependence between claims) and by Benjamini-Hochberg's (false "
    "discovery rate at most 5%). A verdict's p-value is the smallest level at which its rule "
    "decides as it did: for reproduced the largest of its intervals' two-sided t p-values; for "
    "not reproduced the smallest p-value on the other side times the number of intervals "
    "(rlvr.compare.multiplicity).",
    "**Summaries** of a run's curve (rlvr.compare.results): `mean` over all steps (for a reward "
    "curve: the area under it), `late` over the steps past three quarters of the run (step > 0.75 "
    "x the last), `final` the last value "
    "(held-out: the final evaluation), `run-share` the quadrant's share of all out-of-band events "
    "of the run. A value not finite (logged as null) at a step a summary covers makes it "
    "undefined and the claim inconclusive.",
    "**Verdict rules** (rlvr.compare.claims): `direction`: the interval of arm - baseline excludes 0 "
    "on the claimed side: reproduced; on the other side: not reproduced; else inconclusive. "
    "`order`: the interval of every consecutive difference on the claimed side: reproduced; any on "
    "the other side: not reproduced; else inconclusive. `largest`: the interval of expected - other "
    "above 0 for every other metric: reproduced; any below 0: not reproduced; else inconclusive. "
    "`interaction` (a 2 x 2 ablation): the interval of the per-seed both - a_only - b_only + "
    "neither, decided as `direction`. "
    "The rules are fixed in advance; nothing is tuned to the outcome.",
]


def _header(
    study: Study, specs: list[RunSpec], by_regime, verdicts: list[Verdict], command: str
) -> list[Block]:
    finished = sum(len(a.runs) for data in by_regime.values() for a in data.values())
    counts = ", ".join(f"{sum(v.status == s for v in verdicts)} {s}" for s in STATUSES)
    seeds = ", ".join(map(str, study.seeds))
    regimes = [r.name for r in study.regimes]
    own = [f"{r.name}: seeds {', '.join(map(str, r.seeds))}" for r in study.regimes if r.seeds]
    plural = "s" if len(regimes) > 1 else ""
    where = f" under {len(regimes)} regime{plural} ({', '.join(regimes)})" if regimes else ""
    where += f" ({'; '.join(own)})" if own else ""
    summary = (
        f"{len(study.arms)} arms x {len(study.seeds)} seed{'s' * (len(study.seeds) != 1)} "
        f"(seeds {seeds}){where}, "
        f"{study.steps} rollout steps each; {finished} of {len(specs)} runs finished. "
        f"Claims{' x regimes' if regimes else ''}: {counts}."
    )
    runs = [r for data in by_regime.values() for a in data.values() for r in a.runs.values()]
    blocks = [Block("h1", f"Study `{study.name}`: {study.title}")]
    blocks += [Block("p", study.notes)] if study.notes else []
    blocks += [Block("p", summary + _code_note(runs)), Block("code", command)]
    blocks.append(Block("h2", "Verdicts"))
    blocks += [Block("p", note)] if (note := _family_note(verdicts)) else []
    blocks += [Block("p", left)] if (left := claims_left_out(study)) else []
    blocks.append(
        Block("table", _summary_table(verdicts, bool(regimes)))
        if verdicts
        else Block("p", "No claims.")
    )
    return blocks


def _family_note(verdicts: list[Verdict]) -> str:
    """Which decided verdicts hold once the study's claims are read together."""
    described = sum(v.role == DESCRIPTIVE for v in verdicts)
    tested = [v for v in verdicts if v.p is not None and v.role != DESCRIPTIVE]
    decided = [v for v in tested if v.status in (REPRODUCED, NOT_REPRODUCED)]
    prefix = (
        f"**{len(verdicts) - described} confirmatory, {described} descriptive**: the study "
        "named its confirmatory claims before its runs (`confirms`); only they are corrected "
        "across, and a descriptive verdict, with its own p and no correction, is a number to "
        "read, not a finding. "
        if described
        else ""
    )
    if not decided:
        return prefix.strip()
    several = len({v.regime for v in tested}) > 1

    def held(field: str, how: str) -> str:
        kept = {id(v) for v in multiplicity.holding(verdicts, field)}
        lost = [
            f"`{v.claim.id}`" + (f" ({v.regime})" if several else "")
            for v in decided
            if id(v) not in kept
        ]
        verb = "holds" if len(kept) == 1 else "hold"
        return f"{len(kept)} {verb} with {how}" + (f"; not {', '.join(lost)}" if lost else "")

    return prefix + (
        f"**Read together** ({len(tested)} tested claims{' x regimes' if several else ''}): of "
        f"the {len(decided)} decided verdicts, "
        + held("p_holm", "Holm's correction (at most 5% chance that any of them is wrong)")
        + ". "
        + held("q_bh", "Benjamini-Hochberg's (at most 5% of them wrong, expected)")
        + ". The p columns: each verdict's own p-value and the two corrections "
        "(rlvr.compare.multiplicity)."
    )


def _code_note(runs: list) -> str:
    """A warning when finished runs were made by other rlvr source than the one reporting."""
    now = code_hash()
    other = sum(r.code != now for r in runs)
    if not other:
        return ""
    return (
        f" **{other} of {len(runs)} finished runs were made by other rlvr code** than this "
        f"report's (`{now}`; see the runs' code below): a finished run is reused, not rerun, "
        "when the code changes; `--fresh` runs them again."
    )


def _group(
    study: Study, specs: list[RunSpec], group: str, by_regime, verdicts: list[Verdict], figure_files
) -> list[Block]:
    """One paper's section: its claims, and per regime the final held-out scores and figures."""
    arms = [a for a in study.arms if a.group == group]
    names = {a.name for a in arms}
    mine = [v for v in verdicts if set(v.claim.arms_needed) <= names]
    papers = sorted({v.claim.paper for v in mine})
    blocks = [Block("h2", f"{group or 'arms'}" + (f": {', '.join(papers)}" if papers else ""))]
    if mine:
        blocks += [Block("h3", "Claims"), Block("table", _claims_table(mine, bool(study.regimes)))]
    for regime, data in by_regime.items():
        suffix = f" ({regime})" if study.regimes else ""
        blocks.append(Block("h3", f"Final held-out scores{suffix}"))
        keys = held_out_keys(data)
        alike = trained_alike(arms, specs, regime, data) if keys else {}
        table = _final_table(study, arms, data, keys, alike) if keys else None
        blocks.append(Block("table", table) if table else Block("p", "No held-out evaluation."))
        blocks += [Block("img", path) for path in figure_files.get((group, regime), [])]
    return blocks


def _runs(specs: list[RunSpec], by_regime) -> list[Block]:
    rows = [["arm", "regime", "seed", "run directory", "finished", "steps + evaluations", "code"]]
    for spec in specs:
        run = by_regime[spec.regime].get(spec.arm.name, ArmData("")).runs.get(spec.seed)
        seconds = f"{run.seconds:.0f} s" if run else ""
        done, code = ("yes", f"`{run.code}`") if run else ("no", "")
        rows.append(
            [
                f"`{spec.arm.name}`",
                spec.regime,
                str(spec.seed),
                f"`{spec.run_dir}`",
                done,
                seconds,
                code,
            ]
        )
    runs = [r for data in by_regime.values() for a in data.values() for r in a.runs.values()]
    total = sum(r.seconds for r in runs)
    text = f"Training and evaluation time summed over the finished runs: {total / 60:.1f} min."
    return [Block("h2", "Runs"), Block("p", text), Block("table", rows)]


def build_blocks(
    study: Study,
    specs: list[RunSpec],
    by_regime: dict[str, dict[str, ArmData]],
    verdicts: list[Verdict],
    figure_files: dict[tuple[str, str], list[Path]],
    command: str,
    after_verdicts: list[Block] = (),
) -> list[Block]:
    """The report's content, in order: header and verdicts (then ``after_verdicts``), each
    paper, rules, runs."""
    blocks = _header(study, specs, by_regime, verdicts, command) + list(after_verdicts)
    placed: set[str] = set()
    for group in study.groups:
        names = {a.name for a in study.arms if a.group == group}
        placed |= {v.claim.id for v in verdicts if set(v.claim.arms_needed) <= names}
        blocks += _group(study, specs, group, by_regime, verdicts, figure_files)
    rest = [v for v in verdicts if v.claim.id not in placed]
    if rest:
        table = _claims_table(rest, bool(study.regimes))
        blocks += [Block("h2", "Claims across groups"), Block("table", table)]
    blocks.append(Block("h2", "How the numbers are made"))
    blocks += [Block("p", text) for text in RULES_TEXT]
    return blocks + _runs(specs, by_regime)


# ------------------------------------------------------------------ the report


def _merged_identical(
    arms: list[ArmData], labels: dict[str, str], same_updates: set[frozenset[str]]
) -> tuple[list, dict]:
    """``arms`` with each arm that trained exactly as an earlier one folded into it (its label
    then names both), so no figure shows one training as two: bit-identical runs on every
    seed, or a pair whose updates were identical (``same_updates``: untestable pairs, whose
    diagnostics can still differ, e.g. where a quadrant's band edge lies)."""
    kept: list[ArmData] = []
    labels, folded = dict(labels), {}
    for arm in arms:
        twin = next(
            (
                k
                for k in kept
                if frozenset((k.name, arm.name)) in same_updates
                or (
                    set(k.runs) == set(arm.runs)
                    and all(same_run(k.runs[s], arm.runs[s]) for s in arm.runs)
                )
            ),
            None,
        )
        if twin is None:
            kept.append(arm)
        else:
            folded.setdefault(twin.name, []).append(labels.get(arm.name, arm.name))
    for name, others in folded.items():
        labels[name] = " = ".join([labels.get(name, name), *others]) + "\n(identical training)"
    return kept, labels


def _same_updates(verdicts: list[Verdict], regime: str) -> set[frozenset[str]]:
    """The pairs of arms an untestable verdict of ``regime`` found to train identically."""
    return {
        frozenset(pair)
        for v in verdicts
        if v.regime == regime and v.status == UNTESTABLE
        for pair in v.claim.pairs
    }


def _figures(
    study: Study, by_regime, verdicts: list[Verdict], out: Path
) -> dict[tuple[str, str], list[Path]]:
    fig_dir = out / FIGURES_DIR
    fig_dir.mkdir(parents=True, exist_ok=True)
    files: dict[tuple[str, str], list[Path]] = {}
    for regime, data in by_regime.items():
        for group in study.groups:
            found = [
                data[a.name]
                for a in study.arms
                if a.group == group and a.name in data and data[a.name].runs
            ]
            labels = {a.name: a.label for a in study.arms}
            arms, labels = _merged_identical(found, labels, _same_updates(verdicts, regime))
            slug = (group or "arms") + (f"-{regime}" if study.regimes else "")
            title = (group or study.name) + (f" ({regime})" if study.regimes else "")
            made = [
                figures.curves_figure(title, arms, labels, fig_dir / f"{slug}-curves.png"),
                figures.quadrant_figure(title, arms, labels, fig_dir / f"{slug}-quadrants.png"),
            ] if arms else []  # fmt: skip
            files[(group, regime)] = [p for p in made if p is not None]
    _remove_stale(fig_dir, {p for paths in files.values() for p in paths})
    return files


def _remove_stale(fig_dir: Path, written: set[Path]) -> None:
    """Remove the figures an earlier report left that this one did not write (a group renamed,
    a quadrant figure no longer drawn), so the folder holds this report's figures only."""
    for old in [*fig_dir.glob("*-curves.png"), *fig_dir.glob("*-quadrants.png")]:
        if old not in written:
            old.unlink(missing_ok=True)


def _arms_json(study: Study, data: dict[str, ArmData]) -> dict:
    keys = held_out_keys(data)
    arms = {}
    for arm in study.arms:
        runs = data.get(arm.name)
        seeds = sorted(runs.runs) if runs else []
        arms[arm.name] = {
            "label": arm.label,
            "recipe": arm.recipe,
            "baseline": arm.baseline,
            "seeds": seeds,
            "code": {str(s): runs.runs[s].code for s in seeds},
            "final": {k: runs.values(k, "final", seeds).tolist() for k in keys} if seeds else {},
        }
        if arm.baseline is not None:
            arms[arm.name]["vs_baseline"] = {k: _delta_json(arm, data, k) for k in keys[:2]}
    return arms


def runs_table(study: Study, by_regime: dict[str, dict[str, ArmData]]) -> list[list]:
    """A header and one row per finished run: regime, arm, label, seed, the rlvr source hash,
    minutes, and each final held-out score (empty where the run did not log it)."""
    keys = list(dict.fromkeys(k for data in by_regime.values() for k in held_out_keys(data)))
    rows: list[list] = [["regime", "arm", "label", "seed", "code", "minutes", *keys]]
    for regime, data in by_regime.items():
        for arm in study.arms:
            runs = data[arm.name].runs if arm.name in data else {}
            for seed, run in sorted(runs.items()):
                scores = [run.summary(k, "final") for k in keys]
                head = [regime, arm.name, arm.label, seed, run.code, round(run.seconds / 60, 2)]
                rows.append(head + ["" if np.isnan(x) else x for x in scores])
    return rows


def _delta_json(arm, data: dict[str, ArmData], key: str) -> dict | str | None:
    delta = _delta_interval(arm, data, key)
    return delta._asdict() if isinstance(delta, Interval) else delta


def _results_json(
    study: Study, by_regime, verdicts: list[Verdict], rows: list[replication.Replication]
) -> dict:
    claims = [
        {
            "id": v.claim.id,
            "regime": v.regime,
            "paper": v.claim.paper,
            "source": v.claim.source,
            "text": v.claim.text,
            "verdict": v.status,
            "numbers": v.numbers,
            "evidence": v.evidence,
            "rule": v.rule,
            "intervals": {k: ci._asdict() for k, ci in v.intervals.items()},
            "p": v.p,
            "p_holm": v.p_holm,
            "q_bh": v.q_bh,
            **({"role": v.role} if v.role else {}),
        }
        for v in verdicts
    ]
    regimes = {regime: _arms_json(study, data) for regime, data in by_regime.items()}
    single = len(regimes) == 1 and not study.regimes
    return {
        "study": study.name,
        "steps": study.steps,
        "seeds": list(study.seeds),
        **({"arms": next(iter(regimes.values()))} if single else {"regimes": regimes}),
        "claims": claims,
        **({"replication": _replication_json(study, rows)} if study.replicates else {}),
    }


def _replication_json(study: Study, rows: list[replication.Replication]) -> dict:
    return {
        "of": study.replicates,
        "verdicts": [
            {
                "id": r.there.claim.id,
                "regime": r.there.regime,
                "there": r.there.status,
                "there_p_holm": r.there.p_holm,
                "here": None if r.here is None else r.here.status,
                "here_p_holm": None if r.here is None else r.here.p_holm,
                "replicates": r.replicates,
            }
            for r in rows
        ],
    }


def _replications(
    study: Study, verdicts: list[Verdict], runs_root: Path | None
) -> list[replication.Replication]:
    """The verdicts the study ``study.replicates`` decided on its runs under ``runs_root``,
    each with this study's verdict of the same claim (none without ``replicates``)."""
    if not study.replicates or runs_root is None:
        return []
    other = load_study(study.replicates)
    _, there = judge_all(other, plan(other, runs_root))
    return replication.replications(there, verdicts)


def _replication_blocks(study: Study, rows: list[replication.Replication]) -> list[Block]:
    if not study.replicates:
        return []
    title = Block("h2", f"Replication of `{study.replicates}`")
    if not rows:
        text = f"`{study.replicates}` has no decided verdict among its finished runs here."
        return [title, Block("p", text)]
    text = replication.summary(study.replicates, rows)
    return [title, Block("p", text), Block("table", replication.table(rows, bool(study.regimes)))]


def write_report(
    study: Study, specs: list[RunSpec], out: Path, command: str, runs_root: Path | None = None
) -> ReportFiles:
    """Judge the claims on the finished runs and write the report files into ``out``; with
    ``runs_root`` (where ``specs`` run), also whether the study ``study.replicates`` names
    replicates (its runs under the same root)."""
    out.mkdir(parents=True, exist_ok=True)
    by_regime, verdicts = judge_all(study, specs)
    figure_files = _figures(study, by_regime, verdicts, out)
    rows = _replications(study, verdicts, runs_root)
    extra = _replication_blocks(study, rows)
    blocks = build_blocks(study, specs, by_regime, verdicts, figure_files, command, extra)
    md, page = out / "report.md", out / "report.html"
    md.write_text(to_markdown(blocks, out))
    page.write_text(to_html(blocks, f"rlvr compare {study.name}"))
    results = out / "results.json"
    results.write_text(
        json.dumps(_results_json(study, by_regime, verdicts, rows), indent=1, default=_plain)
    )
    table = out / "runs.csv"
    with table.open("w", newline="") as f:
        csv.writer(f).writerows(runs_table(study, by_regime))
    all_figures = [p for paths in figure_files.values() for p in paths]
    return ReportFiles(md, page, results, table, all_figures, verdicts)


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(type(value).__name__)
