import json
import warnings

import pytest

from rlvr.train import prompts
from rlvr.train.config import DataConfig, GymConfig, SFTDataConfig
from rlvr.train.prompts import IndexSampler, gym_files, warn_generated_held_out


def test_index_sampler_covers_each_epoch_once_and_resumes_exactly():
    a = IndexSampler(5, seed=3)
    first = a.take(7)
    assert sorted(first[:5]) == [0, 1, 2, 3, 4] and a.epoch == 1
    state = a.state_dict()
    rest = a.take(9)
    b = IndexSampler(5, seed=3)
    b.load_state_dict(state)
    assert b.take(9) == rest
    assert sorted(first[5:] + rest[:3]) == [0, 1, 2, 3, 4]  # epoch 1 is a permutation too
    assert IndexSampler(5, seed=4).take(5) != IndexSampler(5, seed=3).take(5)
    assert IndexSampler(4, seed=0, shuffle=False).take(6) == [0, 1, 2, 3, 0, 1]


def test_gym_sources_are_generated_once_without_overlap(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path))
    cfg = DataConfig(
        train="reasoning_gym:chain_sum",
        eval="reasoning_gym:chain_sum",
        gym=GymConfig(train_size=30, eval_size=8, config={"max_terms": 2}),
    )
    files = gym_files(cfg)
    train = [json.loads(line) for line in files["train"].read_text().splitlines()]
    held_out = [json.loads(line) for line in files["eval"].read_text().splitlines()]
    assert len(train) == 30 and len(held_out) == 8
    assert not {r["question"] for r in train} & {r["question"] for r in held_out}
    stamp = files["train"].stat().st_mtime_ns
    assert gym_files(cfg) == files and files["train"].stat().st_mtime_ns == stamp
    other = gym_files(
        DataConfig(train="reasoning_gym:chain_sum", gym=GymConfig(train_size=30, seed=1))
    )
    assert other["train"] != files["train"]


def test_a_new_code_tasks_version_makes_new_cached_sets(tmp_path, monkeypatch):
    """Sets cached by an older generator are not reused: the same seed now draws other tests."""
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path))
    cfg = DataConfig(
        train="code_tasks:clamp", eval="code_tasks:clamp", gym=GymConfig(train_size=3, eval_size=2)
    )
    files = gym_files(cfg)
    monkeypatch.setattr(prompts, "CODE_TASKS_VERSION", prompts.CODE_TASKS_VERSION + 1)
    again = gym_files(cfg)
    assert again["train"] != files["train"] and again["eval"] != files["eval"]
    assert again["train"].read_text() == files["train"].read_text()  # same code, same rows


def test_train_on_a_generated_reasoning_gym_task(train_config, tmp_path, monkeypatch):
    from rlvr.train.loop import train
    from rlvr.train.metrics import read_metrics

    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    cfg = train_config(
        "data.train=reasoning_gym:chain_sum",
        "data.eval=reasoning_gym:chain_sum",
        "data.gym={train_size: 16, eval_size: 4}",
        "reward.verifier=reasoning_gym:chain_sum",
        "data.max_prompt_tokens=200",
        "eval.at_start=true",
    )
    result = train(cfg)
    rows = read_metrics(result.run_dir / "metrics.jsonl")
    assert rows[0]["step"] == 0 and rows[0]["eval/avg@1"] == 0.0  # a random model solves none
    assert rows[-1]["reward/mean"] == 0.0 and rows[-1]["verifier/failures"] == 0


def test_a_generated_held_out_set_beside_your_own_training_data_is_warned_about():
    """A config with `base: demo` that sets only data.train keeps the demo's held-out chain sums."""
    mine = DataConfig(train="mine.jsonl", eval="reasoning_gym:chain_sum")
    match = "data.eval is the generated set reasoning_gym:chain_sum while data.train is mine.jsonl"
    with pytest.warns(UserWarning, match=match):
        assert warn_generated_held_out(mine)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        generated = "reasoning_gym:chain_sum"
        assert not warn_generated_held_out(DataConfig(train=generated, eval=generated))
        assert not warn_generated_held_out(DataConfig(train="a.jsonl", eval="b.jsonl"))


def test_a_folder_of_splits_gives_data_eval_its_own_split(tiny_model, tmp_path):
    """`data.split` chose the split of data.train and data.eval both, so a folder with train
    and test splits as data.eval was read as its train split: the held-out set was the
    training set. data.eval_split names the held-out split, and without one it is refused."""
    folder = tmp_path / "mine"
    folder.mkdir()
    for split, questions in {"train": ["1 + 2 =", "3 + 4 ="], "test": ["5 + 6 ="]}.items():
        rows = [{"prompt": q, "answer": "0"} for q in questions]
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    tokenizer = tiny_model[1]
    cfg = DataConfig(train=str(folder), eval=str(folder), eval_split="test")
    train = prompts.load_prompt_set(tokenizer, cfg, role="train")
    held_out = prompts.load_prompt_set(tokenizer, cfg, role="eval")
    assert [p.example.prompt for p in train.prompts] == ["1 + 2 =", "3 + 4 ="]
    assert [p.example.prompt for p in held_out.prompts] == ["5 + 6 ="]
    refused = DataConfig(train=str(folder), eval=str(folder))
    with pytest.raises(ValueError, match=r"holds the splits train, test; name the held-out one"):
        prompts.load_prompt_set(tokenizer, refused, role="eval")
    with pytest.raises(ValueError, match="data.eval_split"):
        prompts.check_local_data(refused)
    split = DataConfig(train=str(folder), eval=str(folder), split="test")  # both, as before
    assert len(prompts.load_prompt_set(tokenizer, split, role="eval").prompts) == 1
    # a split the folder lacks named no key (datasets' "Unknown split")
    missing = DataConfig(train=str(folder), eval=str(folder), eval_split="dev")
    with pytest.raises(ValueError) as err:
        prompts.check_local_data(missing)
    assert str(err.value).endswith("no split 'dev'; its splits: train, test; name one with "
                                   "data.eval_split")  # fmt: skip
    (folder / "train.jsonl").unlink()
    with pytest.raises(ValueError, match=r"no split 'train'; its splits: test; .* data.split$"):
        prompts.check_local_data(DataConfig(train=str(folder)))


def test_a_task_verifier_beside_your_own_training_data_is_warned_about():
    """A config on the demo base that set only the data kept its reasoning_gym:chain_sum
    verifier, which reads answers as chain sums (\\frac{1}{2} against 1/2 scores wrong), and
    the run said nothing; it now warns. Generated or reasoning-gym rows pass."""
    match = r"reward.verifier is reasoning_gym:chain_sum while data.train is mine.jsonl"
    with pytest.warns(UserWarning, match=match):
        assert prompts.warn_task_verifier(DataConfig(train="mine.jsonl"), "reasoning_gym:chain_sum")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gym = "reasoning_gym:chain_sum"
        assert not prompts.warn_task_verifier(DataConfig(train=gym), gym)
        rows = DataConfig(train="gen.jsonl", fields="reasoning_gym")
        assert not prompts.warn_task_verifier(rows, gym)
        assert not prompts.warn_task_verifier(DataConfig(train="mine.jsonl"), "math")


def test_sft_reads_the_splits_of_a_folder_as_training_does(tiny_model, tmp_path):
    """SFT had no split keys: a folder of train and test splits as data.eval was read as its
    train split, so the held-out NLL was the training rows'. It now takes data.split and
    data.eval_split, and refuses such a folder as data.eval without one."""
    folder = tmp_path / "pairs"
    folder.mkdir()
    for split, prompts_ in {"train": ["1 + 2 =", "3 + 4 ="], "test": ["5 + 6 ="]}.items():
        rows = [{"prompt": p, "response": "0"} for p in prompts_]
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    tokenizer = tiny_model[1]
    cfg = SFTDataConfig(train=str(folder), eval=str(folder), eval_split="test")
    train = prompts.load_sft_examples(str(folder), tokenizer, cfg, limit=None)
    held_out = prompts.load_sft_examples(str(folder), tokenizer, cfg, limit=None, role="eval")
    assert (len(train.examples), len(held_out.examples)) == (2, 1)
    with pytest.raises(ValueError, match="holds the splits train, test; name the held-out one"):
        prompts.check_local_data(SFTDataConfig(train=str(folder), eval=str(folder)))


def test_a_dry_run_reads_a_local_folder_named_without_dot_slash(tmp_path, monkeypatch):
    """`data.train=data/mine` (a folder, named as a hub dataset would be) was not read by
    --dry-run, so a misspelt field was found only when the run loaded it."""
    folder = tmp_path / "data" / "mine"
    folder.mkdir(parents=True)
    (folder / "train.jsonl").write_text('{"question": "1 + 1", "answer": "2"}\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"missing field 'questoin'"):
        prompts.check_local_data(DataConfig(train="data/mine", prompt_field="questoin"))
    prompts.check_local_data(DataConfig(train="data/mine", prompt_field="question"))
    prompts.check_local_data(DataConfig(train="someorg/someset"))  # a hub name: not read here
    (tmp_path / "math500").mkdir()  # a folder named as a named set: the set, read when run
    prompts.check_local_data(DataConfig(train="math500"))


def test_a_training_set_smaller_than_a_step_is_warned_about(train_config):
    """Six training prompts with rollout.prompts_per_step=16 repeated prompts within each step
    without a word; the run now warns once at start, saying how many distinct prompts a step
    gets at most. A step that fits in the set warns nothing."""
    from rlvr.train.loop import build_run
    from rlvr.train.run_dir import prepare_run_dir

    cfg = train_config("rollout.prompts_per_step=16")
    match = (
        r"data.train has 6 prompts, fewer than rollout.prompts_per_step=16: a step's 16 "
        r"prompts are at most 6 distinct ones, repeated \(about 2.7 times each\); add prompts "
        r"or set rollout.prompts_per_step=6 or less"
    )
    with pytest.warns(UserWarning, match=match) as caught:
        build_run(cfg, prepare_run_dir(cfg, resume=False)[0], None).close()
    assert sum("fewer than rollout.prompts_per_step" in str(w.message) for w in caught) == 1
    with pytest.warns(UserWarning, match=r"6 prompts, fewer than .*=12: .*about 2 times each"):
        prompts.warn_few_prompts(6, 12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not prompts.warn_few_prompts(6, 6)
        cfg = train_config("data.eval=null", out="fits")
        build_run(cfg, prepare_run_dir(cfg, resume=False)[0], None).close()


def test_a_held_out_set_with_other_field_names_has_its_own_keys(tiny_model, tmp_path):
    """data.prompt_field / data.answer_field mapped data.train and data.eval both, so a held-out
    set whose columns differ from the training set's could not be used. data.eval_prompt_field /
    data.eval_answer_field (or data.eval_fields) map data.eval alone; unset, it is read as
    data.train is."""
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps({"prompt": "1 + 2 =", "answer": "3"}) + "\n")
    held = tmp_path / "held.jsonl"
    row = {"problem": "5 + 6 =", "solution": "11", "answer": "x", "unique_id": "t/1"}
    held.write_text(json.dumps(row) + "\n")
    tokenizer = tiny_model[1]
    with pytest.raises(ValueError, match=r"missing field 'prompt'.* data.eval_prompt_field /"):
        prompts.check_local_data(DataConfig(train=str(train), eval=str(held)))
    own = DataConfig(
        train=str(train), eval=str(held), eval_prompt_field="problem", eval_answer_field="solution"
    )
    prompts.check_local_data(own)
    held_out = prompts.load_prompt_set(tokenizer, own, role="eval").prompts
    assert [(p.example.prompt, p.reference) for p in held_out] == [("5 + 6 =", "11")]
    trained = prompts.load_prompt_set(tokenizer, own, role="train").prompts
    assert [(p.example.prompt, p.reference) for p in trained] == [("1 + 2 =", "3")]
    named = DataConfig(train=str(train), eval=str(held), eval_fields="math500")
    (held_out,) = prompts.load_prompt_set(tokenizer, named, role="eval").prompts
    assert (held_out.example.prompt, held_out.reference) == ("5 + 6 =", "x")
    with pytest.raises(ValueError, match="data.eval_fields or data.eval_prompt_field"):
        DataConfig(train=str(train), eval_fields="math500", eval_prompt_field="problem")


def test_sft_held_out_pairs_with_other_field_names_have_their_own_keys(tiny_model, tmp_path):
    """As for rlvr train: SFT's data.prompt_field / data.response_field mapped data.eval too;
    data.eval_prompt_field / data.eval_response_field map it alone."""
    train = tmp_path / "pairs.jsonl"
    train.write_text(json.dumps({"prompt": "1 + 2 =", "response": "3"}) + "\n")
    held = tmp_path / "held.jsonl"
    held.write_text(json.dumps({"question": "5 + 6 =", "solution": "11"}) + "\n")
    cfg = SFTDataConfig(train=str(train), eval=str(held))
    with pytest.raises(ValueError, match=r"data.eval_prompt_field / data.eval_response_field$"):
        prompts.check_local_data(cfg)
    own = SFTDataConfig(
        train=str(train),
        eval=str(held),
        eval_prompt_field="question",
        eval_response_field="solution",
    )
    prompts.check_local_data(own)
    tokenizer = tiny_model[1]
    held_out = prompts.load_sft_examples(str(held), tokenizer, own, limit=None, role="eval")
    train_set = prompts.load_sft_examples(str(train), tokenizer, own, limit=None)
    assert (len(held_out.examples), len(train_set.examples)) == (1, 1)
    response = tokenizer.decode(held_out.examples[0].response_ids, skip_special_tokens=True)
    assert response == "11"


def test_data_split_does_not_reach_a_generated_held_out_set(tiny_model, tmp_path, monkeypatch):
    """`data.split=train` for a folder of splits also went to the demo's generated held-out
    set, one cached file, and the run stopped at start on that file ("one file has no splits")
    after `--dry-run` had passed. A generated set has no splits: data.split is not its."""
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "mine"
    folder.mkdir()
    for split in ("train", "test"):
        (folder / f"{split}.jsonl").write_text(json.dumps({"prompt": "1 + 2 =", "answer": "3"}))
    gym = GymConfig(train_size=4, eval_size=3, config={"max_terms": 2})
    cfg = DataConfig(train=str(folder), eval="reasoning_gym:chain_sum", gym=gym, split="train")
    assert len(prompts.load_prompt_set(tiny_model[1], cfg, role="eval").prompts) == 3
    both = DataConfig(train="reasoning_gym:chain_sum", gym=gym, split="test", eval_split="test")
    assert len(prompts.load_prompt_set(tiny_model[1], both, role="train").prompts) == 4
