"""Pipeline files, stages and callbacks shared by the pipeline tests."""

import json

import yaml

from rlvr.train.harness import Callback

LOG = ["log.tensorboard=false", "log.progress=off", "log.plots=false"]


class Killed(Exception):
    """Stands for the process being killed."""


class KillAt(Callback):
    """Raises after step ``step``'s metrics (and checkpoint, if one was due) are written."""

    def __init__(self, step: int, hook: str = "on_step") -> None:
        self.step, self.hook = step, hook

    def on_step(self, job, step, record):
        if self.hook == "on_step" and step == self.step:
            raise Killed(step)

    def on_end(self, job, result):
        if self.hook == "on_end":
            raise Killed("end")


def _pipeline_file(tmp_path, tiny_model_dir, sft_file, prompt_file):
    """SFT -> RL -> RL on the tiny random model, each stage a few steps."""
    train = [
        f"data.train={prompt_file}",
        f"data.eval={prompt_file}",
        "data.max_prompt_tokens=64",
        "reward.verifier=even",
        "rollout.prompts_per_step=2",
        "rollout.group_size=4",
        "rollout.max_new_tokens=8",
        "eval.n=2",
        "eval.ks=[1]",
        "eval.at_start=false",
        "eval.every=0",
        "checkpoint.every=1",
        "threads=1",
        *LOG,
    ]
    data = {
        "output_dir": str(tmp_path / "pipe"),
        "model": str(tiny_model_dir),
        "stages": [
            {
                "name": "warm",
                "kind": "sft",
                "config": "sft",
                "overrides": [
                    f"data.train={sft_file}",
                    "epochs=1",
                    "batch_size=3",
                    "threads=1",
                    *LOG,
                ],
            },
            {"name": "math", "kind": "train", "config": "demo", "overrides": ["steps=3", *train]},
            {
                "name": "more",
                "kind": "train",
                "config": "gppo",
                "overrides": ["steps=2", "rollout.filter_zero_advantage=false", *train],
            },
        ],
    }
    path = tmp_path / "pipe.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _model_name(run_dir):
    return yaml.safe_load((run_dir / "config.yaml").read_text())["model"]["name"]


class StopAtStart(Callback):
    def on_start(self, job, start_step):
        raise Killed


EVAL_PROBLEM = "Alice has twelve red apples and seven green pears in her basket today."


def _data_pipeline(tmp_path, tiny_model_dir):
    """dedup -> decontaminate -> filter -> SFT on the cleaned pairs, from one file."""
    from tests.conftest import SFT_PAIRS

    rows = [{**r, "answer": r["response"].rsplit(" ", 1)[1]} for r in SFT_PAIRS]
    rows += [
        {**rows[0], "prompt": "what is 12+7"},  # a duplicate of the first
        {"prompt": f"{EVAL_PROBLEM[:-1]}; how many?", "response": "19", "answer": "19"},
    ]
    (tmp_path / "raw.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "eval.jsonl").write_text(json.dumps({"problem": EVAL_PROBLEM}) + "\n")
    filter_options = ["keep=mean>=0", "n=1", "max_tokens=4", "batch_size=4", "workers=0"]
    data = {
        "output_dir": str(tmp_path / "pipe"),
        "model": str(tiny_model_dir),
        "stages": [
            {
                "name": "dedup",
                "kind": "data",
                "config": "dedup",
                "overrides": ["input=./raw.jsonl"],
            },
            {
                "name": "clean",
                "kind": "data",
                "config": "decontaminate",
                "overrides": ["against=[./eval.jsonl]", "ngram=9"],
            },
            {"name": "filter", "kind": "data", "config": "filter", "overrides": filter_options},
            {
                "name": "sft",
                "kind": "sft",
                "config": "sft",
                "overrides": ["data.train=@filter", "epochs=1", "batch_size=3", *LOG],
            },
        ],
    }
    path = tmp_path / "pipe.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _data_stages(tmp_path, model: str | None, *stages: dict) -> dict:
    """A pipeline of ``stages`` with ``raw.jsonl`` beside its file and the model ``model``."""
    (tmp_path / "raw.jsonl").write_text('{"prompt": "what is 1+1", "answer": "2"}\n')
    return {"output_dir": str(tmp_path / "pipe"), "model": model, "stages": list(stages)}


DEDUP = {"name": "dedup", "kind": "data", "config": "dedup", "overrides": ["input=./raw.jsonl"]}


DECON = {
    "name": "decon",
    "kind": "data",
    "config": "decontaminate",
    "overrides": ["against=[./raw.jsonl]"],
}
