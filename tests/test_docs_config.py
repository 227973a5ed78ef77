"""The configuration the docs show is the configuration the code reads.

- every ```yaml block of README.md and docs/*.md loads with the loader of the file it is (a
  study, a claim file, a pipeline, a study's ``regimes``, a run configuration);
- every ``section.key`` the docs' text names (in backticks) is a key of ``rlvr train`` or
  ``rlvr sft``, an objective's hyperparameter or a sampler's option;
- every option of ``rlvr <command>`` is named in that command's doc, and every option a doc
  gives an ``rlvr <command>`` in its text is one the command has.

docs/training.md's reference tables are checked field by field (defaults and docstrings) in
tests/train/test_docs.py, the shell commands of the docs in tests/test_docs_commands.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path
from unittest import mock

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _text_lines(path: Path) -> list[tuple[int, str]]:
    """``(line number, line)`` of ``path`` outside fenced blocks."""
    out, fenced = [], False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            out.append((number, line))
    return out


def _spans(path: Path) -> list[tuple[str, str]]:
    """``(file:line, text)`` of each backticked span of ``path``'s text."""
    where = path.relative_to(ROOT)
    return [
        (f"{where}:{n}", span)
        for n, line in _text_lines(path)
        for span in re.findall(r"`([^`]+)`", line)
    ]


# ------------------------------------------------------------------ YAML blocks


def _yaml_blocks() -> list[tuple[str, str]]:
    blocks = []
    for path in DOCS:
        text = path.read_text()
        for m in re.finditer(r"^```yaml\n(.*?)^```", text, re.S | re.M):
            line = text[: m.start()].count("\n") + 1
            blocks.append((f"{path.relative_to(ROOT)}:{line}", m.group(1)))
    return blocks


DATA = ["data.train=pairs.jsonl"]
"""Stands for the SFT data a block leaves to the reader (nothing reads it)."""


def _load_block(data: dict, file: Path) -> None:
    """Load ``data``, written to ``file``, as the kind of file its keys say it is."""
    from rlvr.compare.claims import load_claims
    from rlvr.compare.study import load_study
    from rlvr.pipeline import read_pipeline
    from rlvr.train.config import SFTConfig, TrainConfig
    from rlvr.train.overrides import load_config

    if set(data) == {"regimes"}:  # a study's regimes: in the smallest study
        data = {"name": "regimes", "steps": 1, "seeds": [0], "arms": ["abc/grpo"], **data}
    file.write_text(yaml.safe_dump(data))
    if "stages" in data:
        for stage in read_pipeline(str(file)).stages:
            if stage.kind != "data":  # an earlier stage's output (@NAME) stands for a file
                overrides = [re.sub(r"=@\w+$", "=pairs.jsonl", o) for o in stage.overrides]
                cls = SFTConfig if stage.kind == "sft" else TrainConfig
                load_config(cls, stage.config, overrides)
    elif "arms" in data:
        load_study(str(file))
    elif "claims" in data:
        load_claims(str(file))
    elif set(data) <= {f.name for f in dataclasses.fields(TrainConfig)} | {"base"}:
        file.write_text(yaml.safe_dump({"base": "demo", **data}))  # a part: over the demo
        load_config(TrainConfig, str(file))
    elif set(data) <= {f.name for f in dataclasses.fields(SFTConfig)} | {"base"}:
        file.write_text(yaml.safe_dump({"base": "sft", **data}))
        load_config(SFTConfig, str(file), [] if "train" in data.get("data", {}) else DATA)
    else:
        raise AssertionError(f"a YAML block of no kind this test knows, keys {sorted(data)}")


@pytest.mark.parametrize(("where", "block"), _yaml_blocks(), ids=[w for w, _ in _yaml_blocks()])
def test_every_yaml_block_of_the_docs_loads(where, block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # its relative paths (none need exist) read from a scratch folder
    _load_block(yaml.safe_load(block), tmp_path / "block.yaml")


def test_the_yaml_blocks_are_found_and_a_wrong_key_fails(tmp_path, monkeypatch):
    blocks = dict(_yaml_blocks())
    assert len(blocks) >= 4, sorted(blocks)
    monkeypatch.chdir(tmp_path)
    study = next(b for b in blocks.values() if "\narms:" in b)
    with pytest.raises(ValueError, match="unknown key 'seed'"):
        _load_block(yaml.safe_load(study.replace("seeds:", "seed:")), tmp_path / "s.yaml")
    pipeline = next(b for b in blocks.values() if "\nstages:" in b)
    with pytest.raises(ValueError, match="unknown key 'epoch'"):
        _load_block(yaml.safe_load(pipeline.replace("epochs=1", "epoch=1")), tmp_path / "p.yaml")


# ------------------------------------------------------------------ keys named in the text

NOT_KEYS = {
    "model.generate": "Hugging Face's generate method",
    "data.max_response_length": "a verl key (docs/engines.md)",
    "reward.reward_manager.name": "a verl key (docs/engines.md)",
    "reward.reward_kwargs.overlong_buffer_cfg": "a verl key (docs/engines.md)",
    "objective.q4": "the hyperparameter of docs/objectives.md's own objective",
}
"""Dotted names the docs give that are not ``rlvr`` configuration keys, and what they are."""
FREE = ("reward.options.", "data.gym.config.")
"""Mappings whose keys belong to the verifier or the task generator."""
FILES = {"md", "json", "jsonl", "yaml", "py", "png", "txt", "parquet", "safetensors", "pt"}


def _known_keys() -> set[str]:
    from rlvr.generation.registry import SAMPLERS, sampler_options
    from rlvr.objectives import OBJECTIVES, ObjectiveConfig, objective_spec
    from rlvr.train.config import SFTConfig, TrainConfig
    from rlvr.train.config_keys import config_keys

    keys = {k.key for cls in (TrainConfig, SFTConfig) for k in config_keys(cls)}
    keys |= {key.rsplit(".", n)[0] for key in set(keys) for n in range(1, key.count(".") + 1)}
    keys |= {f"objective.{f.name}" for f in dataclasses.fields(ObjectiveConfig)}  # params too
    keys |= {
        f"objective.{f.name}"
        for name in OBJECTIVES
        for f in dataclasses.fields(objective_spec(name).config_cls)
    }
    for name in ("lean", "hf", "vllm"):
        sampler_options(name)  # registers the built-in samplers
    keys |= {
        f"rollout.sampler_options.{f.name}"
        for entry in SAMPLERS.values()
        for f in dataclasses.fields(entry.options)
    }
    return keys


def _named_keys() -> list[tuple[str, str]]:
    """``(file:line, key)`` of each ``section.key`` (or ``section.key=value``) in backticks."""
    from rlvr.train.config import SFTConfig, TrainConfig
    from rlvr.train.config_keys import config_keys

    sections = {k.key.split(".")[0] for c in (TrainConfig, SFTConfig) for k in config_keys(c)}
    sections = {s for s in sections if any(k.startswith(f"{s}.") for k in _known_keys())}
    key = re.compile(rf"(?:{'|'.join(sorted(sections))})(?:\.[A-Za-z_]\w*)+")
    named = []
    for path in DOCS:
        for where, span in _spans(path):
            for word in span.split():
                name = word.partition("=")[0].removesuffix(":")  # `eval.n: 2` as YAML
                if key.fullmatch(name) and name.rsplit(".", 1)[1] not in FILES:
                    named.append((where, name))
    return named


def test_every_key_the_docs_name_is_a_configuration_key():
    known = _known_keys()
    named = _named_keys()
    assert len(named) > 100  # the docs name keys this test finds
    unknown = [
        f"{where}: {name}"
        for where, name in named
        if name not in known and name not in NOT_KEYS and not name.startswith(FREE)
    ]
    assert unknown == []


def test_a_key_no_longer_in_the_configuration_is_reported():
    known = _known_keys()
    assert "rollout.group_size" in known and "objective.eps3" in known
    assert "rollout.groupsize" not in known and "rollout.engine" not in known  # renamed: sampler


# ------------------------------------------------------------------ command-line options

COMMAND_DOCS = {
    "train": "docs/training.md",
    "sft": "docs/training.md",
    "eval": "docs/evaluation.md",
    "compare": "docs/compare.md",
    "pipeline": "docs/pipelines.md",
    "plot": "docs/training.md",
    "data gen": "docs/evaluation.md",
    "data show": "docs/evaluation.md",
    "data tasks": "docs/evaluation.md",
    "data dedup": "docs/data.md",
    "data decontaminate": "docs/data.md",
    "data filter": "docs/data.md",
}
"""Each ``rlvr`` command and the doc that describes its options."""


class _Shown(BaseException):
    """Raised in place of printing a parser's help: carries the parser."""


def eval_parser(command: str) -> argparse.ArgumentParser:
    """The parser of ``rlvr COMMAND``: the one that would print its ``--help``."""
    from rlvr.cli import main

    def shown(parser, file=None):
        raise _Shown(parser)

    with (
        mock.patch.object(argparse.ArgumentParser, "print_help", shown),
        pytest.raises(_Shown) as caught,
    ):
        main([*command.split(), "--help"])
    parser = caught.value.args[0]
    assert parser.prog == f"rlvr {command}"
    return parser


def _options(command: str) -> list[tuple[str, ...]]:
    """The option strings of ``rlvr COMMAND`` (``("-o", "--output-dir")``), ``--help`` aside."""
    return [
        tuple(a.option_strings)
        for a in eval_parser(command)._actions
        if a.option_strings and not isinstance(a, argparse._HelpAction)
    ]


def _mentions(text: str, option: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


@pytest.mark.parametrize("command", COMMAND_DOCS)
def test_every_option_of_a_command_is_in_its_doc(command):
    text = (ROOT / COMMAND_DOCS[command]).read_text()
    missing = [
        "/".join(spellings)
        for spellings in _options(command)
        if not any(_mentions(text, s) for s in spellings)
    ]
    assert missing == [], f"rlvr {command}: options {COMMAND_DOCS[command]} does not name"


def test_every_option_the_docs_give_a_command_exists():
    """``rlvr eval --limit 2`` in a doc's text: ``--limit`` is an option of ``rlvr eval``."""
    options = {c: {s for o in _options(c) for s in o} | {"-h", "--help"} for c in COMMAND_DOCS}
    pattern = re.compile(rf"^rlvr ({'|'.join(sorted(COMMAND_DOCS, key=len, reverse=True))})\b")
    wrong = []
    for path in DOCS:
        for where, span in _spans(path):
            m = pattern.match(span)
            if m is None:
                continue
            given = re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", span[m.end() :])
            wrong += [f"{where}: {span}" for o in given if o not in options[m.group(1)]]
    assert wrong == []


# ------------------------------------------------------------------ option tables


def _table_rows(doc: str, after: str) -> list[list[str]]:
    """The cells of each row of the first table in ``doc`` after the line holding ``after``."""
    lines = (ROOT / doc).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if after in line)
    head = next(i for i in range(start, len(lines)) if lines[i].startswith("|"))
    rows = []
    for line in lines[head + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_vllm_options_table_has_every_option_with_its_default():
    """docs/training.md's table of ``rollout.sampler_options`` for ``vllm``: one row per field
    of ``VllmOptions``, in order, with its default as YAML writes it."""
    from rlvr.generation.vllm import VllmOptions

    rows = _table_rows("docs/training.md", "the fields of `rlvr.generation.vllm.VllmOptions`")
    expected = [
        (f"`{f.name}`", f"`{yaml.safe_dump(f.default).splitlines()[0]}`")
        for f in dataclasses.fields(VllmOptions)
    ]
    assert [(key, default) for key, default, _ in rows] == expected


def _stated_default(cell: str, name: str) -> str | None:
    """The default ``cell`` gives option ``name`` as ``name (VALUE...)``: a number or a
    backticked value; ``None`` when it gives none or words (``required``, ``unset``)."""
    m = re.search(rf"`{name}` \((`[^`]+`|-?[\d.]+)[),:]", cell)
    return None if m is None else m.group(1).strip("`")


def test_the_data_stage_table_names_every_option_with_its_default():
    """docs/pipelines.md's table of data-stage options: every field of a step's options class,
    and where a default is given in parentheses, the class's."""
    from rlvr.evaluation.data_steps import STEPS

    table = _table_rows("docs/pipelines.md", "### Data stages")
    rows = {step.strip("`"): cell for step, cell in table}
    assert sorted(rows) == sorted(STEPS)
    wrong = []
    for step, cls in STEPS.items():
        for f in dataclasses.fields(cls):
            stated = _stated_default(rows[step], f.name)
            if f"`{f.name}`" not in rows[step]:
                wrong.append(f"{step}: {f.name} missing")
            elif stated is not None and yaml.safe_load(stated) != f.default:
                wrong.append(f"{step}: {f.name} ({stated}), default {f.default!r}")
    assert wrong == []
    assert _stated_default(rows["filter"], "n") == "16"  # the pattern reads the table


def test_the_eval_options_table_gives_the_parsers_defaults():
    """docs/evaluation.md's table of ``rlvr eval`` options: a default given in parentheses
    after an option (``--temperature`` (0.6), ``--dtype`` (``float32``)) is the parser's."""
    from rlvr.cli.eval_args import reward_args, sampling_args

    sampling = argparse.ArgumentParser(add_help=False)
    sampling_args(sampling)  # eval's parser leaves these None: a run's checkpoint takes its own
    reward_args(sampling)  # --timeout too
    resolved = {s: a.default for a in sampling._actions for s in a.option_strings}
    defaults = {s: a.default for a in eval_parser("eval")._actions for s in a.option_strings}
    defaults = {s: resolved.get(s) if d is None else d for s, d in defaults.items()}
    cells = " ".join(option for option, _ in _table_rows("docs/evaluation.md", "## `rlvr eval`"))
    stated = re.findall(r"`(--?[a-z-]+)` \((`[^`]+`|-?[\d.]+)", cells)
    assert len(stated) >= 8, stated
    wrong = [
        f"{flag} ({value}), default {defaults[flag]!r}"
        for flag, value in stated
        if yaml.safe_load(value.strip("`")) != defaults[flag]
    ]
    assert wrong == []
