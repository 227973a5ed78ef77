"""Multi-stage runs: data, SFT and RL stages in order, each model stage starting from the
previous one's model.

A pipeline file is YAML (a path, or the name of one shipped in ``rlvr/configs/pipelines``)::

    output_dir: runs/klear            # each stage runs in output_dir/<stage name>
    model: smollm2-135m               # the first stage's model (default: its config's)
    stages:
      - {name: sft,  kind: sft,   config: sft,  overrides: [data.train=./worked.jsonl]}
      - {name: math, kind: train, config: gppo, overrides: [steps=20]}
      - {name: code, kind: train, config: code}

``config`` is an embedded config name or a YAML file; ``overrides`` are ``key=value``
strings as on the command line. Each stage's ``model.name`` is set to the previous
stage's final model directory (the first stage's: the file's ``model``, or a command-line
``model=`` in its place) and its ``log.output_dir`` to its own directory; relative
paths (``./``, ``../``) in ``config`` and in the file's ``data.train`` / ``data.eval``
overrides are read from the pipeline file's folder (command-line overrides: from the
current folder).

A ``kind: data`` stage runs a data step (``config``: ``dedup``, ``decontaminate`` or
``filter``, :mod:`rlvr.evaluation.data_steps`) with ``overrides`` as its options; it reads
``input=`` (a file, a relative one read from the pipeline file's folder; ``@NAME``: data
stage NAME's output; default: the previous data stage's output) and writes ``output_dir/<stage name>/data.jsonl``, which a later stage's
``data.train=@NAME`` / ``data.eval=@NAME`` trains on. A data stage passes the model on
unchanged (``filter`` samples with it); the command line's overrides for every stage skip
data stages (``NAME:key=value`` reaches one).

Running a pipeline again continues it: a stage whose ``stage.json`` exists is finished
and skipped (its final model is read from there; a finished stage that this run would make
otherwise, :func:`stage_options`, is refused, naming the folders to delete), a stage with a
run directory but no ``stage.json`` was interrupted and resumes from its last checkpoint
(the ``--resume`` machinery of ``rlvr train`` / ``rlvr sft``), the rest start fresh (an
interrupted ``filter`` keeps the prompts it scored). ``pipeline.json`` in the output
directory lists each stage's run directory, final model and held-out scores. One run at a
time holds the output directory (``.pipeline.lock`` there).

The package, a module per job:

- :mod:`rlvr.pipeline.spec`: the file and its types (:class:`Stage`, :class:`Pipeline`,
  :class:`StageResult`), :func:`read_pipeline`;
- :mod:`rlvr.pipeline.overrides`: the command line's overrides, by stage;
- :mod:`rlvr.pipeline.configs`: what each stage runs with (:func:`stage_config`,
  :func:`data_step`) and what it is made from (:func:`stage_options`);
- :mod:`rlvr.pipeline.checks`: what is checked before any stage runs (:func:`check_pipeline`);
- :mod:`rlvr.pipeline.record`: ``stage.json`` and ``pipeline.json``;
- :mod:`rlvr.pipeline.run`: running the stages, one run at a time (:func:`run_pipeline`).
"""

from __future__ import annotations

from rlvr.pipeline.checks import PRODUCED, RUN_KEYS, check_pipeline
from rlvr.pipeline.configs import KEEP_HINT, PATH_KEYS, data_step, stage_config, stage_options
from rlvr.pipeline.overrides import MODEL_KEYS
from rlvr.pipeline.run import LOCK_FILE, run_pipeline
from rlvr.pipeline.spec import (
    DATA_FILE,
    KINDS,
    STAGE_FILE,
    SUMMARY_FILE,
    Pipeline,
    Stage,
    StageResult,
    embedded_pipelines,
    parse_pipeline,
    read_pipeline,
)

__all__ = [
    "DATA_FILE",
    "KEEP_HINT",
    "KINDS",
    "LOCK_FILE",
    "MODEL_KEYS",
    "PATH_KEYS",
    "PRODUCED",
    "RUN_KEYS",
    "STAGE_FILE",
    "SUMMARY_FILE",
    "Pipeline",
    "Stage",
    "StageResult",
    "check_pipeline",
    "data_step",
    "embedded_pipelines",
    "parse_pipeline",
    "read_pipeline",
    "run_pipeline",
    "stage_config",
    "stage_options",
]
