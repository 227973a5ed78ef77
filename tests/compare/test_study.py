"""Study files: loading, includes, resolved arm configs, fingerprints, errors."""

import dataclasses
from pathlib import Path

import pytest
import yaml

import rlvr.compare
from rlvr.compare import bundled_studies, load_study, plan
from rlvr.compare.study import arm_config, fingerprint
from rlvr.train.overrides import dump_yaml


def test_bundled_studies_and_all_is_their_union():
    assert set(bundled_studies()) == {
        "abc",
        "etr",
        "klear",
        "apmpo",
        "all",
        "evidence",
        "evidence-hard",
        "evidence-hard-replication",
        "evidence-smollm2",
        "evidence-smollm2-replication",
        "evidence-smollm2-regimes",
        "evidence-smollm2-klear",
        "evidence-smollm2-q4",
        "evidence-smollm2-etr-apmpo",
        "evidence-smollm2-q2",
        "evidence-smollm2-apmpo-confirm",
        "evidence-smollm2-etr-clip-confirm",
        "evidence-smollm2-bounds",
        "evidence-smollm2-bounds-confirm",
        "evidence-smollm2-klear-confirm",
        "evidence-smollm2-abc-paper-confirm",
    }
    parts = [load_study(n) for n in ("abc", "etr", "klear", "apmpo")]
    whole = load_study("all")
    assert [a.name for a in whole.arms] == [a.name for p in parts for a in p.arms]
    assert whole.claims == ("abc", "etr", "klear", "apmpo")
    assert whole.seeds == (0, 1, 2) and all(p.seeds == (0, 1, 2) for p in parts)
    assert whole.groups == ["abc", "etr", "klear", "apmpo"]


def test_evidence_smollm2_runs_abc_on_the_smollm2_recipes_model_and_task(tmp_path):
    """Its arms are abc's, with the model, data, reward and rollout of ``--config smollm2``."""
    from rlvr.train.config import TrainConfig
    from rlvr.train.overrides import load_config

    recipe = load_config(TrainConfig, "smollm2", [])
    specs = plan(load_study("evidence-smollm2"), tmp_path)
    assert {s.arm.name for s in specs} == {"abc/grpo", "abc/abc_grpo"} and len(specs) == 12
    for spec in specs:
        cfg = spec.config
        assert (cfg.model.name, cfg.data.gym, cfg.reward.verifier) == (
            recipe.model.name,
            recipe.data.gym,
            recipe.reward.verifier,
        )
        assert cfg.data.system_prompt == recipe.data.system_prompt
        assert (cfg.rollout.prompts_per_step, cfg.rollout.max_new_tokens) == (8, 32)
        assert (cfg.rollout.minibatches, cfg.rollout.epochs, cfg.optim.lr) == (16, 2, 1e-5)
        assert cfg.loss_config.advantage_mode == "group_mean"  # abc's eq. 3, not smollm2's


def test_evidence_smollm2_replication_runs_the_same_arms_on_seeds_it_never_ran(tmp_path):
    """Same run folders (arm fingerprints) as evidence-smollm2, seeds 6-15 only."""
    there = plan(load_study("evidence-smollm2"), tmp_path)
    study = load_study("evidence-smollm2-replication")
    here = plan(study, tmp_path)
    assert study.replicates == "evidence-smollm2" and study.claims == ("abc",)
    assert {s.run_dir.parent for s in here} == {s.run_dir.parent for s in there}
    assert sorted({s.seed for s in here}) == list(range(6, 16)) and len(here) == 20


def test_evidence_smollm2_regimes_reuses_the_off_policy_runs_and_adds_the_papers_regime(
    tmp_path,
):
    """Off-policy: the run folders of evidence-smollm2 and its replication (seeds 0-15);
    paper: 4 mini-batches, one epoch (papers/abc-grpo.txt sec. 5.1), all else the same."""
    earlier = plan(load_study("evidence-smollm2"), tmp_path)
    earlier += plan(load_study("evidence-smollm2-replication"), tmp_path)
    here = plan(load_study("evidence-smollm2-regimes"), tmp_path)
    off = [s for s in here if s.regime == "off-policy"]
    paper = [s for s in here if s.regime == "paper"]
    assert sorted(s.run_dir for s in off) == sorted(s.run_dir for s in earlier)
    assert len(paper) == 32 and {s.seed for s in paper} == set(range(16))
    for spec in paper:
        assert (spec.config.rollout.minibatches, spec.config.rollout.epochs) == (4, 1)
        twin = next(s for s in off if (s.arm, s.seed) == (spec.arm, spec.seed))
        same = {**twin.config.rollout.__dict__, "minibatches": 4, "epochs": 1}
        assert spec.config.rollout.__dict__ == same
        assert (spec.config.optim, spec.config.model) == (twin.config.optim, twin.config.model)


def _assert_evidence_smollm2_task(cfg, abc):
    """``cfg`` has evidence-smollm2's model, data, learning rate, steps and rollout sizes."""
    assert (cfg.model, cfg.data, cfg.optim.lr, cfg.steps) == (
        abc.model,
        abc.data,
        abc.optim.lr,
        abc.steps,
    )
    assert (cfg.rollout.prompts_per_step, cfg.rollout.max_new_tokens) == (8, 32)


def test_evidence_smollm2_klear_runs_the_klear_recipes_on_evidence_smollm2s_task(tmp_path):
    """Model, data, reward verifier and rollout sizes of evidence-smollm2; everything else
    (objective, SFT term, filter, 8 mini-batches, +1/-1 rewards) of the klear recipes."""
    abc = plan(load_study("evidence-smollm2"), tmp_path)[0].config
    specs = plan(load_study("evidence-smollm2-klear"), tmp_path)
    assert {s.arm.name for s in specs} == {"klear/clip_higher", "klear/gppo"} and len(specs) == 16
    for spec in specs:
        cfg = spec.config
        _assert_evidence_smollm2_task(cfg, abc)
        assert (cfg.rollout.minibatches, cfg.rollout.epochs) == (8, 1)
        assert cfg.rollout.filter_zero_advantage and cfg.loss_config.sft_coef == 0.1
        assert (cfg.reward.verifier, cfg.reward.correct, cfg.reward.wrong) == (
            "reasoning_gym:products",
            1.0,
            -1.0,
        )
    assert {s.config.objective.name for s in specs} == {"dapo", "gppo"}


def test_evidence_smollm2_etr_apmpo_runs_the_recipes_on_evidence_smollm2s_task(tmp_path):
    """Model, data, verifier and rollout sizes of evidence-smollm2; objective, rewards, KL and
    the 4 x 1 mini-batches of the etr and apmpo recipes."""
    abc = plan(load_study("evidence-smollm2"), tmp_path)[0].config
    specs = plan(load_study("evidence-smollm2-etr-apmpo"), tmp_path)
    arms = {"etr/grpo", "etr/etr", "apmpo/grpo", "apmpo/apmpo"}
    assert {s.arm.name for s in specs} == arms and len(specs) == 32
    wrong = {"etr": -1.0, "apmpo": 0.0}
    for spec in specs:
        cfg = spec.config
        _assert_evidence_smollm2_task(cfg, abc)
        assert (cfg.rollout.minibatches, cfg.rollout.epochs) == (4, 1)
        assert cfg.objective.kl_coef == 0.001
        assert (cfg.reward.verifier, cfg.reward.wrong) == (
            "reasoning_gym:products",
            wrong[spec.arm.name.split("/")[0]],
        )
    assert {s.config.objective.name for s in specs} == {"grpo", "etr", "apmpo"}


@pytest.mark.parametrize(
    ("study", "paper", "seeds"),
    [
        ("evidence-smollm2-apmpo-confirm", "apmpo", range(8, 24)),
        ("evidence-smollm2-etr-clip-confirm", "etr", range(8, 48)),
    ],
)
def test_a_confirmation_runs_the_earlier_pair_on_fresh_seeds(tmp_path, study, paper, seeds):
    """Exactly one of evidence-smollm2-etr-apmpo's pairs (the same fingerprints, so the two
    studies' runs are one configuration), on seeds that study never ran."""
    earlier = plan(load_study("evidence-smollm2-etr-apmpo"), tmp_path)
    specs = plan(load_study(study), tmp_path)
    assert {s.arm.name for s in specs} == {f"{paper}/grpo", f"{paper}/{paper}"}
    assert len(specs) == 2 * len(seeds)
    before = {s.arm.name: s.fingerprint for s in earlier if s.arm.name.startswith(f"{paper}/")}
    assert {s.arm.name: s.fingerprint for s in specs} == before
    assert {s.seed for s in specs} == set(seeds)
    assert not {s.seed for s in specs} & {s.seed for s in earlier}


@pytest.mark.parametrize(
    ("before", "study", "arm", "eps", "runs"),
    [
        ("evidence-smollm2-regimes", "evidence-smollm2-q4", "abc/abc_grpo_q4_open", "eps3", 24),
        ("evidence-smollm2-q4", "evidence-smollm2-q2", "abc/abc_grpo_q2_open", "eps2", 32),
    ],
)
def test_an_abc_bound_ablation_adds_one_arm_beside_the_reused_runs(
    tmp_path, before, study, arm, eps, runs
):
    """The new arm is ABC-GRPO with one bound unbounded (GRPO's) and nothing else changed; every
    other run of the study is planned in an earlier study's folder (reused, not run again)."""
    earlier = {s.run_dir for s in plan(load_study(before), tmp_path)}
    specs = plan(load_study(study), tmp_path)
    new = [s for s in specs if s.run_dir not in earlier]
    assert len(specs) == runs
    assert {s.arm.name for s in new} == {arm} and len(new) == 8
    for spec in new:
        twin = next(s for s in specs if (s.arm.name, s.seed) == ("abc/abc_grpo", spec.seed))
        mine, theirs = spec.config.objective, twin.config.objective
        assert getattr(mine.params, eps) == float("inf")
        assert mine == dataclasses.replace(
            theirs, params=dataclasses.replace(theirs.params, **{eps: float("inf")})
        )
        assert (spec.config.rollout, spec.config.optim) == (twin.config.rollout, twin.config.optim)


def test_the_bounds_study_completes_the_2x2_on_seeds_0_to_15(tmp_path):
    """GRPO and ABC-GRPO in the folders of evidence-smollm2 and its replication, the two
    single-bound arms in evidence-smollm2-q2's; new runs only where a single-bound arm lacks
    a seed."""
    earlier = {
        s.run_dir
        for name in ("evidence-smollm2", "evidence-smollm2-replication", "evidence-smollm2-q2")
        for s in plan(load_study(name), tmp_path)
    }
    folders = {s.run_dir.parent for s in plan(load_study("evidence-smollm2-q2"), tmp_path)}
    specs = plan(load_study("evidence-smollm2-bounds"), tmp_path)
    assert len(specs) == 64 and {s.seed for s in specs} == set(range(16))
    assert {s.run_dir.parent for s in specs} == folders
    new = [s for s in specs if s.run_dir not in earlier]
    assert {s.arm.name for s in new} == {"abc/abc_grpo_q2_open", "abc/abc_grpo_q4_open"}
    assert sorted({s.seed for s in new}) == [5, 6, 7, 9, 10, 12, 14, 15] and len(new) == 16


def _confirmation(name: str, first: str, seeds: range, tmp_path) -> list:
    """The runs of confirmation study ``name``: ``first``'s arms with their fingerprints (the
    same folders), on ``seeds``, which no other bundled study runs in those folders."""
    earlier = plan(load_study(first), tmp_path)
    specs = plan(load_study(name), tmp_path)
    assert {s.seed for s in specs} == set(seeds)
    assert {s.arm.name: s.fingerprint for s in specs} == {
        s.arm.name: s.fingerprint for s in earlier
    }
    others = {
        s.run_dir
        for other in bundled_studies()
        if other != name
        for s in plan(load_study(other), tmp_path)
    }
    assert not {s.run_dir for s in specs} & others
    return specs


def test_the_bounds_confirmation_runs_the_2x2_on_30_seeds_no_study_ran(tmp_path):
    name = "evidence-smollm2-bounds-confirm"
    specs = _confirmation(name, "evidence-smollm2-bounds", range(16, 46), tmp_path)
    assert len(specs) == 120 and {s.regime for s in specs} == {"off-policy"}
    assert load_study(name).confirms == ("abc-bounds-interaction",)


def test_the_klear_confirmation_runs_its_two_arms_on_48_seeds_they_never_ran(tmp_path):
    name = "evidence-smollm2-klear-confirm"
    specs = _confirmation(name, "evidence-smollm2-klear", range(8, 56), tmp_path)
    assert len(specs) == 96 and load_study(name).confirms == ("klear-avg",)


def test_confirms_names_claims_of_the_study_and_is_not_included(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"include": ["evidence-smollm2-bounds-confirm"]}))
    assert load_study(str(path)).confirms == ()
    path.write_text(yaml.safe_dump({"include": ["abc"], "confirms": ["abc-q4", "abc-entropy"]}))
    with pytest.raises(
        ValueError,
        match=r"s.yaml: confirms names abc-q4, not a claim of the study; claims: abc-entropy, ",
    ):
        load_study(str(path))


def test_confirms_of_a_claim_whose_arm_is_not_in_the_study_is_one_line(tmp_path):
    """A confirmatory claim whose arm was misspelt (or left out) only warned, as any claim
    shared with a larger study does, and the study ran without judging its one question."""
    path = tmp_path / "s.yaml"
    arms = [{"recipe": "abc/grpo"}, {"recipe": "abc/abc_grpo", "name": "abc-grpo"}]
    study = {"steps": 2, "seeds": [0, 1], "arms": arms, "claims": ["abc"], "confirms": ["abc-avg"]}
    path.write_text(yaml.safe_dump(study))
    with pytest.raises(ValueError) as err:
        load_study(str(path))
    assert str(err.value) == (
        f"{path}: confirms abc-avg, whose arm abc/abc_grpo is not an arm of the study, so it "
        "would not be judged; arms: abc/grpo, abc-grpo"
    )
    study["confirms"] = ["abc-q4-largest"]  # GRPO's own quadrants: its one arm is there
    path.write_text(yaml.safe_dump(study))
    assert load_study(str(path)).confirms == ("abc-q4-largest",)


def test_all_reuses_the_runs_of_the_paper_studies(tmp_path):
    whole = {(s.arm.name, s.seed): s.run_dir for s in plan(load_study("all"), tmp_path)}
    for name in ("abc", "etr", "klear", "apmpo"):
        for spec in plan(load_study(name), tmp_path):
            assert whole[(spec.arm.name, spec.seed)] == spec.run_dir


def _rows(study, tmp_path):
    return sorted((s.regime, s.arm.name, s.seed, s.run_dir) for s in plan(study, tmp_path))


def _runs(tmp_path, name, study):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(study))
    return _rows(load_study(str(path)), tmp_path)


def test_an_including_study_without_regimes_runs_its_includes_regimes(tmp_path):
    """Like steps and seeds, regimes left out come from an included study; the study's own
    win, and ``{default: {}}`` runs without them (abc's runs, no regime)."""
    off = {"off-policy": {"rollout": {"minibatches": 2, "epochs": 2}}}
    inner = _runs(tmp_path, "inner", {"include": ["abc"], "regimes": off})
    assert {r[0] for r in inner} == {"off-policy"}
    assert _runs(tmp_path, "outer", {"include": [str(tmp_path / "inner.yaml")]}) == inner
    own = _runs(
        tmp_path, "own", {"include": [str(tmp_path / "inner.yaml")], "regimes": {"paper": {}}}
    )
    assert {r[0] for r in own} == {"paper"} and {r[3] for r in own}.isdisjoint(r[3] for r in inner)
    plain = _runs(
        tmp_path, "plain", {"include": [str(tmp_path / "inner.yaml")], "regimes": {"default": {}}}
    )
    assert plain == _rows(load_study("abc"), tmp_path)


def test_a_regime_name_yaml_reads_as_false_is_one_line(tmp_path):
    """``off: {...}`` made a regime called ``False``: YAML 1.1 reads a bare off as false."""
    path = tmp_path / "s.yaml"
    path.write_text("include: [abc]\nregimes:\n  paper: {}\n  off: {rollout: {epochs: 2}}\n")
    with pytest.raises(ValueError) as err:
        load_study(str(path))
    assert str(err.value) == (
        f"{path}: regime name False is not text (YAML reads a bare off, on, yes, no or null "
        "so): quote it"
    )
    path.write_text(path.read_text().replace(" off:", " 'off':"))
    assert [r.name for r in load_study(str(path)).regimes] == ["paper", "off"]


def test_a_regimes_seeds_are_checked_and_its_settings_may_be_key_value_strings(tmp_path):
    """A regime's ``seeds: [1.5]`` ran seed 1 and ``[true]`` seed 1, ``[x]`` failed with
    int()'s message and ``seeds: 3`` with a traceback; ``off-policy: [rollout.epochs=2]``,
    the form the study file's docs allow, failed with dict()'s message."""
    path = tmp_path / "s.yaml"
    for seeds, why in (
        ("[1.5]", "[0] must be int, got 1.5"),
        ("[true]", "[0] must be int, got True"),
        ("[x]", "[0] must be int, got 'x'"),
    ):
        path.write_text(
            f"include: [abc]\nregimes: {{off: {{seeds: {seeds}}}}}\n".replace("off", "'off'")
        )
        with pytest.raises(ValueError) as err:
            load_study(str(path))
        assert str(err.value) == f"{path} regime off: seeds{why}"
    path.write_text("include: [abc]\nregimes: {paper: {seeds: 3}}\n")
    with pytest.raises(ValueError, match=r"regime paper: seeds: 3 would run the one seed 3; wr"):
        load_study(str(path))
    path.write_text("include: [abc]\nregimes: {paper: 3}\n")
    with pytest.raises(ValueError, match="regime paper: settings must be a mapping or a list"):
        load_study(str(path))
    path.write_text("include: [abc]\nregimes: {paper: [rollout.epochs=2]}\n")
    as_list = load_study(str(path))
    path.write_text("include: [abc]\nregimes: {paper: {rollout: {epochs: 2}}}\n")
    assert as_list.regimes == load_study(str(path)).regimes


def test_a_claim_id_two_claim_files_share_is_one_line(tmp_path):
    """abc's claims named twice (bundled, and a copy by path) were each judged twice and
    counted twice in the study's Holm and BH corrections."""
    copy = tmp_path / "mine.yaml"
    copy.write_text((Path(rlvr.compare.__file__).parent / "claims" / "abc.yaml").read_text())
    with pytest.raises(ValueError) as err:
        load_study("abc", [f"claims=[abc, {copy}]"])
    assert str(err.value) == (
        f"rlvr/compare/studies/abc.yaml: claim id 'abc-entropy' is in abc and in {copy}: "
        "a study's claim ids must differ"
    )
    for name in bundled_studies():
        load_study(name)  # none of the bundled studies shares an id


def test_paths_in_a_study_file_are_read_beside_it(tmp_path, monkeypatch):
    """``claims: [mine.yaml]`` next to the study file was 'neither a file nor bundled claims'
    unless ``rlvr compare`` ran in that folder (``base:`` in a run config is read beside it)."""
    folder = tmp_path / "studies"
    folder.mkdir()
    claim = {"id": "mine", "text": "t", "rule": "direction", "metric": "policy/entropy",
             "arm": "abc/abc_grpo", "baseline": "abc/grpo"}  # fmt: skip
    (folder / "mine.yaml").write_text(yaml.safe_dump({"paper": "mine", "claims": [claim]}))
    (folder / "grpo.yaml").write_text("base: abc/grpo\n")
    (folder / "inner.yaml").write_text(yaml.safe_dump({"include": ["abc"]}))
    study = {
        "include": ["inner.yaml"],
        "claims": ["mine.yaml"],
        "arms": [{"recipe": "grpo.yaml", "name": "abc/grpo"}],
        "replicates": "inner.yaml",
    }
    (folder / "s.yaml").write_text(yaml.safe_dump(study))
    monkeypatch.chdir(tmp_path)  # not the study's folder
    loaded = load_study("studies/s.yaml")
    assert loaded.claims == ("abc", "studies/mine.yaml")
    assert [a.recipe for a in loaded.arms] == ["abc/abc_grpo", "studies/grpo.yaml"]
    assert loaded.replicates == "studies/inner.yaml"
    same = {s.fingerprint for s in plan(loaded, tmp_path / "runs")}
    assert same == {s.fingerprint for s in plan(load_study("abc"), tmp_path / "runs")}
    (folder / "qa.jsonl").write_text('{"prompt": "1 + 1?", "answer": "2"}\n')
    (folder / "data.yaml").write_text(
        yaml.safe_dump(study | {"settings": {"data": {"train": "./qa.jsonl"}}})
    )
    (spec, *_) = plan(load_study("studies/data.yaml"), tmp_path / "runs")
    assert spec.config.data.train == str(folder / "qa.jsonl")  # read from here before


def test_a_misspelt_replicates_is_one_line_before_any_run():
    """``replicates: abcc`` passed --dry-run and every run, then stopped the report."""
    with pytest.raises(ValueError, match=r"^study 'abcc' is neither a file nor a bundled study"):
        load_study("abc", ["replicates=abcc"])
    assert load_study("abc", ["replicates=abc"]).replicates == "abc"


def test_a_study_without_steps_or_seeds_says_which_is_missing(tmp_path):
    """An empty study file read 'steps must be >= 1', though it set no steps at all."""
    path = tmp_path / "s.yaml"
    path.write_text("")
    with pytest.raises(ValueError, match=r"s.yaml: no steps: set steps: or include a study"):
        load_study(str(path))
    path.write_text("steps: 2\narms: [abc/grpo]\n")
    with pytest.raises(ValueError, match=r"s.yaml: no seeds: set seeds: or include a study"):
        load_study(str(path))
    with pytest.raises(ValueError, match=r"s.yaml: steps must be >= 1"):
        load_study(str(path), ["steps=0", "seeds=[0]"])


def test_arm_config_applies_recipe_settings_overrides_and_run_settings(tmp_path):
    study_file = tmp_path / "s.yaml"
    study_file.write_text(
        yaml.safe_dump(
            {
                "steps": 7,
                "seeds": [3],
                "settings": {"threads": 1, "eval": {"every": 5}},
                "arms": [{"recipe": "etr/etr", "overrides": ["objective.lam1=0.3"]}],
            }
        )
    )
    study = load_study(str(study_file))
    spec = plan(study, tmp_path / "runs")[0]
    cfg = spec.config
    assert (cfg.steps, cfg.seed, cfg.threads, cfg.eval.every) == (7, 3, 1, 5)
    assert cfg.objective.name == "etr" and cfg.objective.params.lam1 == 0.3
    assert cfg.objective.kl_coef == 0.001 and cfg.reward.wrong == -1.0  # from the recipe
    assert cfg.log.progress == "off" and cfg.log.output_dir == str(spec.run_dir)
    assert spec.arm.group == "etr" and spec.run_dir.name == "seed3"


def test_fingerprint_ignores_seed_and_directory_only():
    study = load_study("abc")
    grpo, abc = study.arms
    a = arm_config(study, grpo, 0, "x")
    assert fingerprint(a) == fingerprint(arm_config(study, grpo, 5, "y"))
    assert fingerprint(a) != fingerprint(arm_config(study, abc, 0, "x"))


def test_earlier_runs_are_found_by_their_configuration(tmp_path):
    """A folder named by an older fingerprint (a field added since) is still the arm's, found
    by the configuration its runs saved; a different configuration, or a file that no longer
    parses, is not."""
    study = load_study("abc")
    grpo, abc = plan(study, tmp_path)[:2]
    old = tmp_path / "abc-grpo-0123456789ab" / "seed0"
    old.mkdir(parents=True)
    saved = yaml.safe_load(dump_yaml(grpo.config))
    del saved["rollout"]["staleness"]  # written before the field existed: at its default
    (old / "run.yaml").write_text(yaml.safe_dump(saved))
    broken = tmp_path / "abc-abc_grpo-0123456789ab" / "seed0"
    broken.mkdir(parents=True)
    (broken / "run.yaml").write_text(dump_yaml(abc.config) + "removed_key: 1\n")
    again = {(s.arm.name, s.seed): s.run_dir for s in plan(study, tmp_path)}
    assert again[(grpo.arm.name, 0)] == old and again[(grpo.arm.name, 2)] == old.parent / "seed2"
    assert again[(abc.arm.name, 0)] == abc.run_dir  # its file does not parse: not found
    (old / "run.yaml").write_text(dump_yaml(abc.config))  # another arm's, under grpo's name
    moved = plan(study, tmp_path)
    assert moved[0].run_dir == grpo.run_dir and moved[1].run_dir == old


@pytest.mark.parametrize("order", [["grpo", "copy"], ["copy", "grpo"]])
def test_two_arms_configured_alike_never_share_a_run_folder(tmp_path, order):
    """Two arms of one configuration, with that configuration's runs under another name
    (another study's, or a renamed arm's): both were planned in that folder, and both
    workers ran each missing seed there at once (metrics logged twice, one run failing)."""
    arms = [{"recipe": "abc/grpo", "name": name} for name in order]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"steps": 2, "seeds": [0, 1], "arms": arms}))
    study = load_study(str(path))
    first = plan(study, tmp_path / "runs")[0]
    other = tmp_path / "runs" / f"other-{first.fingerprint}" / "seed0"  # another study's
    other.mkdir(parents=True)
    (other / "run.yaml").write_text(dump_yaml(first.config))
    specs = plan(study, tmp_path / "runs")
    assert len({s.run_dir for s in specs}) == 4
    assert {s.run_dir.parent for s in specs if s.arm.name == order[0]} == {other.parent}
    (tmp_path / "runs" / f"grpo-{first.fingerprint}").mkdir()  # an arm's own folder comes first
    folders = {s.arm.name: s.run_dir.parent.name for s in plan(study, tmp_path / "runs")}
    assert folders == {"grpo": f"grpo-{first.fingerprint}", "copy": f"other-{first.fingerprint}"}


def test_a_misspelt_key_of_the_settings_names_the_settings_not_an_arm(tmp_path):
    """``settings: {thread: 1}`` was 'study 's', arm 'abc/grpo': unknown key 'thread'', as if
    that arm's overrides held it."""
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"steps": 2, "seeds": [0, 1], "arms": ["abc/grpo"],
                                    "settings": {"optim": {"lrr": 1}}}))  # fmt: skip
    with pytest.raises(ValueError, match=r"^study 's': settings: unknown key 'optim.lrr'; valid"):
        plan(load_study(str(path)), tmp_path / "runs")
    arms = [{"recipe": "abc/grpo", "overrides": ["optim.lrr=1"]}]  # an arm's own: the arm
    path.write_text(yaml.safe_dump({"steps": 2, "seeds": [0, 1], "arms": arms}))
    with pytest.raises(ValueError, match=r"^study 's', arm 'abc/grpo': unknown key 'optim.lrr'"):
        plan(load_study(str(path)), tmp_path / "runs")


def test_a_regime_that_changes_nothing_is_one_line(tmp_path):
    """``rollout.minibatches=4`` where the recipe has 4: both regimes were planned in the
    same folders, and both workers ran each seed there at once."""
    regimes = {"paper": {}, "same": {"rollout": {"minibatches": 4}}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"steps": 2, "seeds": [0, 1], "arms": ["abc/grpo"],
                                    "regimes": regimes}))  # fmt: skip
    with pytest.raises(ValueError, match="regimes paper and same give arm abc/grpo the same conf"):
        plan(load_study(str(path)), tmp_path / "runs")
    regimes["same"] = {"rollout": {"minibatches": 2}}
    path.write_text(yaml.safe_dump({"steps": 2, "seeds": [0, 1], "arms": ["abc/grpo"],
                                    "regimes": regimes}))  # fmt: skip
    assert len({s.run_dir for s in plan(load_study(str(path)), tmp_path / "runs")}) == 4


@pytest.mark.parametrize(
    "study, message",
    [
        ({"steps": 2, "seeds": [0], "arms": []}, "at least one arm"),
        ({"steps": 2, "seeds": [], "arms": ["demo"]}, "seeds"),
        ({"steps": 2, "seeds": [0], "arms": ["demo"], "colour": 1}, "unknown key"),
        ({"steps": 2, "seeds": [0], "arms": [{"recipe": "demo", "baseline": "x"}]}, "not an arm"),
        (
            {"steps": 2, "seeds": [0], "arms": [{"recipe": "demo", "colour": 1}]},
            r"unknown key .arms\[0\]\.colour.; valid keys of arms\[0\]: recipe, name",
        ),
    ],
)
def test_bad_studies_are_named(tmp_path, study, message):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(study))
    with pytest.raises(ValueError, match=message):
        load_study(str(path))


def test_unknown_study_and_bad_recipe_value(tmp_path):
    with pytest.raises(ValueError, match="neither a file nor a bundled study"):
        load_study("nope")
    path = tmp_path / "s.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "steps": 2,
                "seeds": [0],
                "arms": [{"recipe": "demo", "overrides": ["rollout.group_size=0"]}],
            }
        )
    )
    with pytest.raises(ValueError, match="arm 'demo'.*group_size"):
        plan(load_study(str(path)), tmp_path)


def test_a_study_read_with_the_earlier_base_key_warns_and_reads_it_as_settings(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        yaml.safe_dump({"steps": 2, "seeds": [0], "base": {"threads": 1}, "arms": ["demo"]})
    )
    with pytest.warns(UserWarning, match="base is now settings"):
        study = load_study(str(path))
    assert study.settings == {"threads": 1}


def test_unknown_study_keys_are_named_in_one_line_with_the_valid_ones(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"steps": 2, "seeds": [0], "arms": ["demo"], "colour": 1}))
    with pytest.raises(ValueError) as err:
        load_study(str(path))
    assert str(err.value) == (
        f"{path}: unknown key 'colour'; valid keys of a study: name, title, steps, seeds, "
        "settings, arms, claims, include, notes, imports, regimes, replicates, confirms"
    )


def test_overrides_change_the_study_file_over_its_includes():
    base = load_study("evidence-hard")
    study = load_study("evidence-hard", ["seeds=[0, 1]", "steps=3", "settings.eval.n=2"])
    assert study.seeds == (0, 1) and study.steps == 3
    assert study.settings["eval"]["n"] == 2
    assert study.settings["eval"]["ks"] == base.settings["eval"]["ks"]  # the rest kept
    assert study.arms == base.arms and study.claims == base.claims
    assert study.overrides == ("seeds=[0, 1]", "steps=3", "settings.eval.n=2")
    with pytest.raises(ValueError, match=r"evidence-hard.yaml with nope=1: unknown key 'nope'"):
        load_study("evidence-hard", ["nope=1"])
    with pytest.raises(ValueError, match="seeds must be a non-empty list of distinct integers"):
        load_study("abc", ["seeds=[1, 1]"])


def test_a_studys_imports_register_an_objective_its_arms_name(tmp_path, monkeypatch):
    """`imports: [my_objectives]` with an arm `objective.name=mine`: the runs import the
    module, but `rlvr compare` resolved the arms without it ("unknown objective 'mine'")."""
    import sys

    from rlvr.objectives import registry

    monkeypatch.setattr(registry, "OBJECTIVES", dict(registry.OBJECTIVES))
    tag = tmp_path.name.replace("-", "_")
    (tmp_path / f"objs_{tag}.py").write_text(
        "from rlvr.objectives import GrpoConfig, register_objective\n"
        "from rlvr.objectives.ppo_clip import grpo_loss\n"
        f"register_objective('mine_{tag}', config=GrpoConfig, advantage='group_mean',\n"
        "                   loss_agg='token-mean', paper='mine')(grpo_loss)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in sys.path if p not in ("", ".")])
    study = {
        "name": "own",
        "steps": 2,
        "seeds": [0],
        "arms": [
            {"recipe": "abc/grpo", "name": "grpo"},
            {"recipe": "abc/grpo", "name": "mine", "overrides": [f"objective.name=mine_{tag}"]},
        ],
        "imports": [f"objs_{tag}"],
    }
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(study))
    specs = plan(load_study(str(tmp_path / "study.yaml")), tmp_path / "runs")
    assert [s.config.objective.name for s in specs] == ["grpo", f"mine_{tag}"]
    monkeypatch.delitem(sys.modules, f"objs_{tag}")


def test_seeds_written_as_one_number_is_refused_not_read_as_that_one_seed(tmp_path):
    """``seeds: 3`` (or ``seeds=3`` on the command line) ran the single seed 3, with only a
    warning, where three seeds were likely meant."""
    with pytest.raises(ValueError, match=r"with seeds=3: seeds: 3 would run the one seed 3"):
        load_study("abc", ["seeds=3"])
    path = tmp_path / "s.yaml"
    path.write_text("include: [abc]\nseeds: 5\n")
    with pytest.raises(ValueError, match=r"s.yaml: seeds: 5 would run the one seed 5; write \[5\]"):
        load_study(str(path))
    assert load_study("abc", ["seeds=[3]"]).seeds == (3,)


def test_the_auto_device_is_written_as_this_machines_so_gpu_runs_get_folders_of_their_own(
    monkeypatch,
):
    """A run's folder is named by its configuration: with ``auto`` written as is, a study's
    CUDA runs shared folders with its CPU runs (and were reused for them)."""
    import torch

    study = load_study("abc")
    monkeypatch.delenv("RLVR_AUTO_DEVICE")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    on_cpu = arm_config(study, study.arms[0], 0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    on_gpu = arm_config(study, study.arms[0], 0)
    assert (on_cpu.model.device, on_gpu.model.device) == ("cpu", "cuda")
    assert fingerprint(on_cpu) != fingerprint(on_gpu)
    model = {**study.settings.get("model", {}), "device": "cpu"}
    named = dataclasses.replace(study, settings={**study.settings, "model": model})
    # auto on a CPU is the CPU's run (committed runs of model.device=cpu are found again)
    assert fingerprint(arm_config(named, study.arms[0], 0)) == fingerprint(on_cpu)
