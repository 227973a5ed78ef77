"""Study files: shared settings, arms (recipe + overrides), seeds and steps.

A study is a YAML mapping (a bundled name such as ``abc`` or ``all``, or a file)::

    name: abc
    title: ABC-GRPO against GRPO as the paper ran it
    steps: 100
    seeds: [0, 1, 2]
    settings:                   # applied to every arm, over its recipe
      threads: 1
      eval: {every: 25, n: 4, ks: [1, 4]}
    arms:
      - {recipe: abc/grpo, label: GRPO (eq. 3)}
      - {recipe: abc/abc_grpo, label: ABC-GRPO, baseline: abc/grpo}
    claims: [abc]               # bundled claim files or paths
    confirms: []                # optional: ids of claims fixed before the runs as its questions
    include: []                 # other studies whose arms and claims are added
    imports: []                 # modules imported first (e.g. registering a verifier or objective)
    regimes:                    # optional: every arm x seed runs once per regime
      paper: {seeds: [0, 1, 2]} # a regime's own seeds (default: the study's)
      off-policy: {rollout: {minibatches: 16, epochs: 2}}

``steps``, ``seeds`` and ``regimes`` left out come from the first included study that sets
them (``regimes: {default: {}}`` runs an including study without its includes' regimes).
A relative path the file names is read beside it when there is such a file there.

An arm's name defaults to its recipe; ``overrides`` (``key=value`` strings or a nested
mapping) apply after ``settings``. (``base:``, this key's earlier name, is still read, with a
warning: in a run configuration ``base:`` names a config file to inherit.) The file is read
by :func:`rlvr.train.overrides.from_file` into a :class:`StudyFile`. Each arm x seed becomes one :class:`RunSpec` whose run
directory is named by a hash of its resolved configuration, so a run is reused by any
study that needs exactly the same run, and a changed setting makes a new one. A regime's
settings apply after the arm's overrides; with no ``regimes`` a study has one, ``default``,
with none. Every run logs the objective contrast (``log.contrast``) against the objective of
each arm it is compared with in a claim, so the report can say whether two arms' updates
differed at all (:func:`contrast_plan`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import yaml

from rlvr.builtins import import_own
from rlvr.bundled import bundled_names, read_source
from rlvr.compare.worker import RUN_FILE
from rlvr.models import resolve_device
from rlvr.train.config import TrainConfig
from rlvr.train.overrides import (
    apply_overrides,
    base_source,
    coerce,
    deep_merge,
    from_dict,
    from_file,
    paths_beside,
    read_yaml,
    to_dict,
)

if TYPE_CHECKING:
    from rlvr.compare.claims import Claim

DEFAULT_REGIME = "default"


@dataclass(frozen=True)
class Arm:
    """One configuration of a study, run once per seed (in a file: a mapping, or its recipe)."""

    SCALAR_KEY: ClassVar[str] = "recipe"

    recipe: str
    """Embedded recipe or YAML file the arm starts from."""
    name: str = ""
    """Unique name in the study (``""``: the recipe, e.g. ``abc/grpo``)."""
    label: str = ""
    """Legend text (``""``: the name)."""
    baseline: str | None = None
    """Arm this one is compared against in the final-score table (``None``: none)."""
    overrides: tuple[str, ...] | dict[str, Any] = ()
    """``key=value`` settings applied after the study's settings (a nested mapping in a file
    is read as those strings)."""
    group: str = ""
    """Figure group (the paper; ``""``: the recipe's folder)."""

    def __post_init__(self) -> None:
        name = self.name or self.recipe
        embedded = "/" in self.recipe and not self.recipe.endswith((".yaml", ".yml"))
        fill = {
            "name": name,
            "label": self.label or name,
            "overrides": _overrides(self.overrides, f"arm {name}"),
            "group": self.group or (self.recipe.split("/")[0] if embedded else ""),
        }
        for key, value in fill.items():
            object.__setattr__(self, key, value)


@dataclass(frozen=True)
class Regime:
    """A named set of settings under which every arm of a study runs (e.g. off-policy)."""

    name: str
    overrides: tuple[str, ...] = ()
    """``key=value`` settings applied after each arm's own overrides."""
    seeds: tuple[int, ...] = ()
    """Seeds of this regime's runs (empty: the study's)."""


@dataclass(frozen=True)
class Study:
    """A set of arms x seeds with shared settings and the claims they test."""

    name: str
    title: str
    steps: int
    seeds: tuple[int, ...]
    settings: dict[str, Any]
    """Applied to every arm, over its recipe."""
    arms: tuple[Arm, ...]
    claims: tuple[str, ...] = ()
    """Claim files (bundled names or paths)."""
    notes: str = ""
    """Free text printed at the top of the report."""
    source: str = ""
    """Where the study was read from."""
    imports: tuple[str, ...] = ()
    """Python modules every run imports before training, and ``rlvr compare`` before it reads the arms (custom verifiers and objectives register themselves)."""
    regimes: tuple[Regime, ...] = ()
    """Settings every arm runs under, each in its own runs (empty: one regime, ``default``)."""
    overrides: tuple[str, ...] = ()
    """``key=value`` changes made to the study's file when it was loaded."""
    replicates: str | None = None
    """A study whose decided verdicts this one checks (:mod:`rlvr.compare.replication`)."""
    confirms: tuple[str, ...] = ()
    """Ids of its confirmatory claims (empty: every claim is in the corrected family)."""

    @property
    def regime_list(self) -> tuple[Regime, ...]:
        """The regimes, or the one ``default`` regime with no settings."""
        return self.regimes or (Regime(DEFAULT_REGIME),)

    def arm(self, name: str) -> Arm:
        """The arm called ``name`` (error listing the valid ones)."""
        for arm in self.arms:
            if arm.name == name:
                return arm
        raise ValueError(
            f"study {self.name!r} has no arm {name!r}; arms: {', '.join(a.name for a in self.arms)}"
        )

    @property
    def groups(self) -> list[str]:
        """Figure groups in order of first appearance."""
        return list(dict.fromkeys(a.group for a in self.arms))


@dataclass(frozen=True)
class RunSpec:
    """One arm x seed: its configuration and where it runs."""

    arm: Arm
    seed: int
    config: TrainConfig
    run_dir: Path
    fingerprint: str
    """Hash of the configuration without seed and output directory."""
    regime: str = DEFAULT_REGIME

    @property
    def key(self) -> str:
        where = "" if self.regime == DEFAULT_REGIME else f" [{self.regime}]"
        return f"{self.arm.name} seed {self.seed}{where}"


def bundled_studies() -> list[str]:
    """Names of the studies shipped in ``rlvr/compare/studies``."""
    return bundled_names("rlvr.compare", "studies")


@dataclass(frozen=True)
class StudyFile:
    """The keys of a study file, as written (its ``include``s not yet merged)."""

    LABEL: ClassVar[str] = "a study"
    RENAMED: ClassVar[dict[str, str]] = {"base": "settings"}

    name: str = ""
    """Study name (``""``: the file's stem)."""
    title: str = ""
    """Report title (``""``: the name)."""
    steps: int | None = None
    """Steps of every run (``None``: an included study's)."""
    seeds: tuple[int, ...] | None = None
    """Seeds every arm runs with (``None``: an included study's)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Configuration applied to every arm, over its recipe."""
    arms: tuple[Arm, ...] = ()
    """The arms; one with an included arm's name replaces it."""
    claims: tuple[str, ...] = ()
    """Claim files (bundled names or paths)."""
    include: tuple[str, ...] = ()
    """Studies whose arms, claims, imports and settings are added first."""
    notes: str = ""
    """Free text printed at the top of the report."""
    imports: tuple[str, ...] = ()
    """Python modules every run imports before training."""
    regimes: dict[str, Any] | None = None
    """Name -> settings (a mapping or ``key=value`` strings) every arm also runs under
    (``None``: an included study's)."""
    replicates: str | None = None
    """A study whose decided verdicts this one checks on its own seeds (its runs under the
    same ``--out``; :mod:`rlvr.compare.replication`)."""
    confirms: tuple[str, ...] = ()
    """Ids of the claims fixed before the runs as the study's questions (not taken from
    includes): only they are corrected across; the other claims are reported as descriptive."""


def _read(name_or_path: str, overrides: Sequence[str] = ()) -> tuple[StudyFile, str]:
    source = read_source(
        name_or_path,
        package="rlvr.compare",
        folder="studies",
        kind="a bundled study",
        choices=bundled_studies,
    )
    data, where = source.data, source.where
    if overrides:
        data = apply_overrides(data, list(overrides))
        where = f"{where} with {' '.join(overrides)}"
    _seed_list(data.get("seeds") if isinstance(data, dict) else None, where)
    return from_file(StudyFile, data, where), source.where


def _seed_list(seeds: Any, where: str) -> None:
    """Refuse ``seeds: 3``: a config scalar is a one-item list, so it would run the one seed 3
    where three seeds were likely meant."""
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        raise ValueError(
            f"{where}: seeds: {seeds} would run the one seed {seeds}; write [{seeds}] for it, "
            "or a list such as [0, 1, 2] for three seeds"
        )


def _overrides(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, dict):
        return tuple(f"{k}={json.dumps(v)}" for k, v in _flatten(value).items())
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) and "=" in v for v in value):
        return tuple(value)
    raise ValueError(f"{where}: overrides must be a mapping or a list of key=value strings")


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def load_study(
    name_or_path: str, overrides: Sequence[str] = (), _seen: tuple[str, ...] = ()
) -> Study:
    """A study from a bundled name or a YAML file, with its ``include``s merged in and
    ``overrides`` (``key=value`` on the file's keys: ``seeds=[0,1,2,3]``, ``steps=20``,
    ``settings.optim.lr=2e-3``) set in the file itself, so they win over its includes.

    >>> load_study("abc", ["seeds=[0, 1, 2, 3, 4]", "steps=20"]).seeds
    (0, 1, 2, 3, 4)
    """
    if name_or_path in _seen:
        raise ValueError(f"circular include: {' -> '.join((*_seen, name_or_path))}")
    file, where = _read(name_or_path, overrides)
    file = _paths_beside(file, where)
    arms, claims, settings, imports = [], [], {}, []
    steps, seeds, regimes = file.steps, file.seeds, _regimes(file.regimes, where)
    for inc in file.include:
        sub = load_study(inc, _seen=(*_seen, name_or_path))
        arms += [a for a in sub.arms if a.name not in {b.name for b in arms}]
        claims += [c for c in sub.claims if c not in claims]
        imports += [m for m in sub.imports if m not in imports]
        settings = deep_merge(settings, sub.settings)
        steps = sub.steps if steps is None else steps
        seeds = sub.seeds if seeds is None else seeds
        regimes = regimes or sub.regimes
    settings = deep_merge(settings, file.settings)
    for key, value in (("steps", steps), ("seeds", seeds)):
        if value is None:
            raise ValueError(f"{where}: no {key}: set {key}: or include a study that sets them")
    for arm in file.arms:
        arms = [a for a in arms if a.name != arm.name] + [arm]
    study = Study(
        name=file.name or Path(name_or_path).stem,
        title=file.title or file.name or name_or_path,
        steps=steps,
        seeds=seeds,
        settings=settings,
        arms=tuple(arms),
        claims=(*claims, *(c for c in file.claims if c not in claims)),
        notes=file.notes.strip(),
        source=where,
        imports=(*imports, *(m for m in file.imports if m not in imports)),
        regimes=regimes,
        overrides=tuple(overrides),
        replicates=file.replicates,
        confirms=file.confirms,
    )
    _check(study, where)
    return study


def _paths_beside(file: StudyFile, where: str) -> StudyFile:
    """``file`` with each relative path it names (an include, a claim file, a YAML recipe, the
    study it replicates, the data and model of its ``settings``) read beside it when there is
    such a file, as ``base:`` in a run configuration (:func:`rlvr.train.overrides.base_source`,
    :func:`~rlvr.train.overrides.read_beside`); else as given."""
    beside = functools.partial(base_source, where)
    folder = Path(where).parent if Path(where).is_file() else None  # a bundled study: none
    return dataclasses.replace(
        file,
        settings=file.settings if folder is None else paths_beside(file.settings, folder),
        include=tuple(map(beside, file.include)),
        claims=tuple(map(beside, file.claims)),
        arms=tuple(dataclasses.replace(a, recipe=beside(a.recipe)) for a in file.arms),
        replicates=file.replicates and beside(file.replicates),
    )


def _regimes(value: Any, where: str) -> tuple[Regime, ...]:
    if value is None:
        return ()
    if not isinstance(value, dict) or not value:
        raise ValueError(f"{where}: regimes must be a mapping of names to settings")
    regimes = []
    for name, settings in value.items():
        if name is None or isinstance(name, bool):
            raise ValueError(
                f"{where}: regime name {name} is not text (YAML reads a bare off, on, yes, no "
                "or null so): quote it"
            )
        here = f"{where} regime {name}"
        if isinstance(settings, (list, tuple)):  # key=value strings, as an arm's overrides
            regimes.append(Regime(str(name), _overrides(settings, here)))
            continue
        if settings is not None and not isinstance(settings, dict):
            raise ValueError(f"{here}: settings must be a mapping or a list of key=value strings")
        settings = dict(settings or {})
        _seed_list(settings.get("seeds"), here)
        seeds = coerce(settings.pop("seeds", None) or (), tuple[int, ...], f"{here}: seeds")
        regimes.append(Regime(str(name), _overrides(settings, here), seeds))
    return tuple(regimes)


def _check_name(name: str, where: str) -> None:
    """Refuse a study name that is no plain folder name, or ``runs``: the report goes to
    ``OUT/<name>``, so a path would write it elsewhere and ``runs`` among the runs."""
    if name in ("", ".", "..", "runs") or "/" in name or "\\" in name:
        raise ValueError(
            f"{where}: name {name!r} must be a plain folder name other than 'runs' "
            "(the report is written to OUT/NAME, beside OUT/runs)"
        )


def _check(study: Study, where: str) -> None:
    _check_name(study.name, where)
    if study.steps < 1:
        raise ValueError(f"{where}: steps must be >= 1")
    if not study.seeds or len(set(study.seeds)) != len(study.seeds):
        raise ValueError(f"{where}: seeds must be a non-empty list of distinct integers")
    for regime in study.regimes:
        if len(set(regime.seeds)) != len(regime.seeds):
            raise ValueError(f"{where}: regime {regime.name} has repeated seeds")
    if not study.arms:
        raise ValueError(f"{where}: a study needs at least one arm")
    names = [a.name for a in study.arms]
    for arm in study.arms:
        if arm.baseline is not None and arm.baseline not in names:
            raise ValueError(f"{where}: arm {arm.name!r} has baseline {arm.baseline!r}, not an arm")
    if study.replicates is not None:
        _read(study.replicates)  # a misspelt name stopped the report after every run
    claims = _claims_by_id(study, where)
    if unknown := [c for c in study.confirms if c not in claims]:
        raise ValueError(
            f"{where}: confirms names {', '.join(unknown)}, not a claim of the study; "
            f"claims: {', '.join(claims)}"
        )
    for claim_id in study.confirms:  # else only a warning, and the question goes unjudged
        if missing := [a for a in claims[claim_id].arms_needed if a not in names]:
            raise ValueError(
                f"{where}: confirms {claim_id}, whose arm {', '.join(missing)} is not an arm "
                f"of the study, so it would not be judged; arms: {', '.join(names)}"
            )


def _claims_by_id(study: Study, where: str) -> dict[str, Claim]:
    """The study's claims by id; a ``ValueError`` naming an id two of them share (each
    would be judged, and counted in the study's correction, twice)."""
    from rlvr.compare.claims import load_claims

    claims: dict[str, Claim] = {}
    files: dict[str, str] = {}
    for name in study.claims:
        for claim in load_claims(name):
            if claim.id in files:
                raise ValueError(
                    f"{where}: claim id {claim.id!r} is in {files[claim.id]} and in {name}: "
                    "a study's claim ids must differ"
                )
            files[claim.id], claims[claim.id] = name, claim
    return claims


RUN_SETTINGS = {
    "log": {"progress": "off", "tensorboard": False, "plots": False},
}
"""What every study run sets (no progress bar or plots inside the workers; the report draws)."""


def arm_config(
    study: Study,
    arm: Arm,
    seed: int,
    output_dir: str = "run",
    regime: Regime | None = None,
    contrast: tuple[str, ...] = (),
) -> TrainConfig:
    """The resolved configuration of ``arm`` at ``seed`` (recipe, settings, overrides, regime,
    run settings), logging the objective contrast against the specs in ``contrast``."""
    data = deep_merge(read_yaml(arm.recipe), study.settings)
    data = deep_merge(data, RUN_SETTINGS)
    data = apply_overrides(data, list(arm.overrides))
    data = apply_overrides(data, list(regime.overrides) if regime else [])
    data = apply_overrides(
        data, [f"steps={study.steps}", f"seed={seed}", f"log.output_dir={output_dir}"]
    )
    if contrast:
        data = deep_merge(data, {"log": {"contrast": list(contrast)}})
    where = f"study {study.name!r}, arm {arm.name!r}" + (
        f", regime {regime.name!r}" if regime else ""
    )
    # What they register (an objective) is read here too; one that is gone matters only to an
    # arm that cannot be read without it (a report of finished runs needs none; a run is
    # refused by check_imports).
    missing = [module for module in study.imports if not import_own(module)]
    try:
        config = from_dict(TrainConfig, data)
    except ValueError as err:
        _check_settings_keys(study)
        gone = [module for module in missing if module not in str(err)]
        hint = f" (imports {', '.join(gone)}: not in the working folder or on PYTHONPATH)"
        raise ValueError(f"{where}: {err}{hint if gone else ''}") from err
    # `auto` is written as the device it is here: a run's folder is named by its configuration,
    # so GPU runs never share a folder with CPU runs (their numbers differ)
    device = resolve_device(config.model.device)
    return dataclasses.replace(config, model=dataclasses.replace(config.model, device=device))


def _check_settings_keys(study: Study) -> None:
    """Name ``settings`` for an unknown key of the study's ``settings`` (else the error named
    the first arm, as if its overrides held the misspelt key)."""
    try:
        from_dict(TrainConfig, study.settings)
    except ValueError as err:
        if str(err).startswith("unknown key"):
            raise ValueError(f"study {study.name!r}: settings: {err}") from None


def fingerprint(config: TrainConfig) -> str:
    """12 hex digits identifying a run's configuration, seed and output directory left out."""
    data = to_dict(dataclasses.replace(config, seed=0))
    data["log"].pop("output_dir", None)
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def run_folders(runs_root: Path) -> dict[str, Path]:
    """Run folders under ``runs_root`` by the :func:`fingerprint` of their runs' configuration
    (read from the first ``seed*/run.yaml`` of each, as this version of the code resolves it).

    A folder is named by the fingerprint its configuration had when it was made; a field added
    to the configuration since (at its default) changes that hash but not the run, so a study
    finds its earlier runs by what they ran, not by their folder's name. A file that no
    longer parses (a key since removed) names no folder.
    """
    found: dict[str, Path] = {}
    for folder in sorted(p for p in runs_root.glob("*") if p.is_dir()):
        for config_file in sorted(folder.glob(f"seed*/{RUN_FILE}"))[:1]:
            try:
                config = from_dict(TrainConfig, yaml.safe_load(config_file.read_text()))
            except (OSError, ValueError, TypeError, yaml.YAMLError):
                continue
            found.setdefault(fingerprint(config), folder)
    return found


def compared_pairs(study: Study) -> list[tuple[str, str]]:
    """The pairs of arms the study's claims compare."""
    from rlvr.compare.claims import load_claims

    return [pair for name in study.claims for c in load_claims(name) for pair in c.pairs]


def plan(study: Study, runs_root: Path) -> list[RunSpec]:
    """Every arm x regime x seed with its configuration and run directory under ``runs_root``,
    seed by seed (a study stopped early has every arm at its first seeds). Each pair of arms
    a claim compares has its objective contrast logged in one of the two arms' runs
    (:func:`contrast_plan`)."""
    specs, used = [], {}
    pairs = compared_pairs(study)
    earlier = functools.cache(lambda: run_folders(runs_root))  # read once, if a folder is missing
    for regime in study.regime_list:
        named = regime if study.regimes else None
        contrast = contrast_plan(study, pairs, named)
        digests = {
            arm.name: fingerprint(
                arm_config(study, arm, study.seeds[0], regime=named, contrast=contrast[arm.name])
            )
            for arm in study.arms
        }
        folders = _folders(runs_root, digests, earlier)
        _check_regimes_differ(study, regime.name, folders, used)
        for arm in study.arms:
            for seed in regime.seeds or study.seeds:
                run_dir = folders[arm.name] / f"seed{seed}"
                config = arm_config(study, arm, seed, str(run_dir), named, contrast[arm.name])
                specs.append(RunSpec(arm, seed, config, run_dir, digests[arm.name], regime.name))
    return sorted(specs, key=lambda s: s.seed)


def _check_regimes_differ(
    study: Study, regime: str, folders: dict[str, Path], used: dict[Path, str]
) -> None:
    """Refuse a regime that gives an arm the configuration an earlier regime gave it (say
    ``rollout.minibatches=4`` where the recipe has 4): both regimes' workers ran each seed in
    the one folder at once. ``used`` maps each folder planned so far to its regime."""
    for arm, folder in folders.items():
        if (other := used.setdefault(folder, regime)) != regime:
            raise ValueError(
                f"study {study.name!r}: regimes {other} and {regime} give arm {arm} the same "
                "configuration; a regime must change what its runs train"
            )


def _folders(
    runs_root: Path, digests: dict[str, str], earlier: Callable[[], dict[str, Path]]
) -> dict[str, Path]:
    """Each arm's run folder: ``<arm>-<digest>`` when it exists, else an earlier folder of
    that configuration (``earlier()``: :func:`run_folders`, called only when a folder is
    missing), else a new ``<arm>-<digest>``. No two arms share one, though they be configured
    alike: both arms' workers ran each seed in it."""
    own = {name: runs_root / f"{name.replace('/', '-')}-{d}" for name, d in digests.items()}
    taken = {folder for folder in own.values() if folder.exists()}
    known = earlier() if len(taken) < len(own) else {}
    folders = {}
    for name, digest in digests.items():
        found = known.get(digest)
        if own[name].exists() or found is None or found in taken:
            folders[name] = own[name]
        else:
            folders[name] = found
            taken.add(found)
    return folders


def objective_name(config: TrainConfig) -> str:
    """``config``'s objective as a ``log.contrast`` entry: its name and every setting that
    differs from the objective's defaults (``apmpo:fss_form=mean``)."""
    obj = config.loss_config
    default = type(obj.params)()
    settings = {
        f.name: getattr(obj.params, f.name)
        for f in dataclasses.fields(obj.params)
        if getattr(obj.params, f.name) != getattr(default, f.name)
    }
    if obj.agg_mode != obj.spec.loss_agg:  # the advantages are the run's: not part of it
        settings["loss_agg"] = obj.agg_mode
    items = ",".join(f"{k}={_value_text(v)}" for k, v in settings.items())
    return obj.name + (f":{items}" if items else "")


def _value_text(value: Any) -> str:
    if isinstance(value, str) and re.fullmatch(r"[A-Za-z_][\w.-]*", value):
        return value
    return json.dumps(list(value) if isinstance(value, tuple) else value)


def contrast_plan(
    study: Study, pairs: list[tuple[str, str]], regime: Regime | None
) -> dict[str, tuple[str, ...]]:
    """For each arm, the objectives its runs log the contrast against: for every compared
    pair whose objectives differ, the other arm's, assigned to whichever of the two has fewer
    so far (the cost spreads over the arms)."""
    names = {a.name for a in study.arms}
    objective = {
        a.name: objective_name(arm_config(study, a, study.seeds[0], regime=regime))
        for a in study.arms
    }
    out: dict[str, list[str]] = {a.name: [] for a in study.arms}
    seen: set[frozenset[str]] = set()
    for a, b in pairs:
        key = frozenset((a, b))
        if a == b or key in seen or not {a, b} <= names or objective[a] == objective[b]:
            continue
        seen.add(key)
        host, other = (a, b) if len(out[a]) <= len(out[b]) else (b, a)
        out[host].append(objective[other])
    return {name: tuple(specs) for name, specs in out.items()}
