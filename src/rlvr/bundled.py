"""YAML files shipped inside the package (run configs, pipelines, studies, claims), found by
name, or any YAML file by path.

>>> "demo" in bundled_names("rlvr", "configs")
True
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class YamlSource:
    """A parsed YAML file and where it came from."""

    data: Any
    """The parsed document (``None`` for an empty file)."""
    where: str
    """The path as given, or ``package/folder/name.yaml`` for a bundled file (for errors)."""
    folder: Path
    """The directory holding the file (paths inside it are relative to this)."""


def _root(package: str, folder: str):
    root = resources.files(package)
    for part in folder.split("/"):
        root = root / part
    return root


def bundled_names(package: str, folder: str) -> list[str]:
    """Names (without ``.yaml``) of the YAML files in ``folder`` of ``package``, sorted."""
    return sorted(p.name[:-5] for p in _root(package, folder).iterdir() if p.name.endswith(".yaml"))


def read_source(
    name_or_path: str,
    *,
    package: str,
    folder: str,
    kind: str,
    choices: Callable[[], list[str]],
) -> YamlSource:
    """The YAML file ``name_or_path``, or the bundled ``folder/<name>.yaml`` of ``package``.

    Errors are one line naming the file: a name that is neither a file nor bundled lists
    ``choices()`` (``kind`` says what it names, e.g. ``"a bundled study"``), and a file
    that is not valid YAML says so.
    """
    path = Path(name_or_path)
    if path.is_file():
        text, where, parent = path.read_text(), str(path), path.resolve().parent
    else:
        bundled = _root(package, folder) / f"{name_or_path}.yaml"
        if not bundled.is_file():
            raise ValueError(_not_found(name_or_path, kind, choices()))
        text = bundled.read_text()
        where = f"{package.replace('.', '/')}/{folder}/{name_or_path}.yaml"
        parent = Path(str(bundled)).parent
    try:
        data = yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as err:
        raise ValueError(f"{where}: not valid YAML: {yaml_problem(err)}") from err
    return YamlSource(data, where, parent)


class UniqueKeyLoader(yaml.SafeLoader):
    r"""``yaml.SafeLoader`` that refuses a mapping naming one key twice, which PyYAML reads
    as the last one: a second ``rollout:`` block would drop every key of the first.
    A key a merge (``<<: *base``) brings in may still be set again.

    >>> try:
    ...     yaml.load("a: 1\nb: 2\na: 3\n", Loader=UniqueKeyLoader)
    ... except yaml.YAMLError as err:
    ...     print(yaml_problem(err))
    key 'a' given twice: first at line 1, again at line 3, column 1
    """

    def construct_mapping(self, node, deep=False):
        """The mapping of ``node``, after checking that no key is given twice."""
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                if not isinstance(key, typing.Hashable):
                    continue  # PyYAML refuses it with its own message
                if key in first:
                    raise yaml.constructor.ConstructorError(
                        problem=f"key {key!r} given twice: first at line {first[key]}, again",
                        problem_mark=key_node.start_mark,
                    )
                first[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def _not_found(name_or_path: str, kind: str, choices: list[str]) -> str:
    """One line for a name that is neither a file nor bundled: a path (a ``.yaml`` file, or
    one starting ``/``, ``.`` or ``~``) is a missing file, with the bundled file it names by
    name if there is one (a checkout's path from outside it); a name (``klear/gppo`` too) lists
    ``choices``, the nearest first if one is close.

    >>> _not_found("abcc", "a bundled study", ["abc", "etr"])
    "study 'abcc' is neither a file nor a bundled study (did you mean abc? all: abc, etr)"
    >>> _not_found("runs/mine.yaml", "a bundled study", ["abc"])
    'study file runs/mine.yaml: no such file'
    >>> _not_found("src/rlvr/configs/abc/grpo.yaml", "an embedded config", ["abc/grpo", "grpo"])
    'config file src/rlvr/configs/abc/grpo.yaml: no such file (did you mean abc/grpo, an embedded config?)'
    >>> _not_found("klear/gpop", "an embedded config", ["klear/gppo"])
    "config 'klear/gpop' is neither a file nor an embedded config (did you mean klear/gppo? all: klear/gppo)"
    """
    noun = kind.split()[-1]
    if name_or_path.endswith((".yaml", ".yml")) or name_or_path.startswith(("/", ".", "~")):
        alike = _bundled_alike(name_or_path, kind, choices)
        return f"{noun} file {name_or_path}: no such file{alike}"
    near = difflib.get_close_matches(name_or_path, choices, n=1)
    listed = f"did you mean {near[0]}? all: {', '.join(choices)}" if near else ", ".join(choices)
    return f"{noun} {name_or_path!r} is neither a file nor {kind} ({listed})"


def _bundled_alike(path: str, kind: str, choices: list[str]) -> str:
    """`` (did you mean demo, an embedded config?)`` when the missing file ``path`` ends as
    a bundled file's name does (``demo.yaml``, ``src/rlvr/configs/abc/grpo.yaml``), else ``""``."""
    parts = Path(path).with_suffix("").parts
    for count in (2, 1):  # the longest name first: abc/grpo before grpo
        name = "/".join(parts[-count:])
        if len(parts) >= count and name in choices:
            return f" (did you mean {name}, {kind}?)"
    return ""


def yaml_problem(err: yaml.YAMLError) -> str:
    r"""A YAML parse error in one line, with the file's line and column (not the parser's
    multi-line text, which names the file ``<unicode string>``).

    >>> try:
    ...     yaml.safe_load("a: [1, 2\n")
    ... except yaml.YAMLError as err:
    ...     print(yaml_problem(err))
    while parsing a flow sequence at line 1, column 4: expected ',' or ']', but got '<stream end>' at line 2, column 1
    """
    mark, problem = getattr(err, "problem_mark", None), getattr(err, "problem", None)
    if mark is None or problem is None:
        return " ".join(str(err).split())
    text = f"{problem} at line {mark.line + 1}, column {mark.column + 1}"
    context, at = getattr(err, "context", None), getattr(err, "context_mark", None)
    if context and at is not None:
        return f"{context} at line {at.line + 1}, column {at.column + 1}: {text}"
    return f"{context}: {text}" if context else text
