"""The keys of a run configuration with their defaults and one-line docstrings, read from
the config dataclasses themselves: what ``rlvr train --help`` and ``rlvr sft --help`` list
and what the reference tables of ``docs/training.md`` hold.

>>> from rlvr.train.config import TrainConfig
>>> key = next(k for k in config_keys(TrainConfig) if k.key == "rollout.group_size")
>>> key.default, key.doc
('8', 'Completions sampled per prompt (G).')
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import json
import re
import textwrap
import typing
from typing import Any, NamedTuple


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """Field name -> the docstring written under it in ``cls``'s source (bases first, so a
    subclass's own docstring wins); fields without one are absent."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body
        for field, doc in zip(body, body[1:], strict=False):
            if (
                isinstance(field, ast.AnnAssign)
                and isinstance(field.target, ast.Name)
                and isinstance(doc, ast.Expr)
                and isinstance(doc.value, ast.Constant)
                and isinstance(doc.value.value, str)
            ):
                docs[field.target.id] = doc.value.value.strip()
    return docs


class ConfigKey(NamedTuple):
    """One ``key=value`` a run configuration accepts."""

    key: str
    """Dotted key (``rollout.group_size``)."""
    default: str
    """Its default as YAML would write it (``required`` when there is none)."""
    doc: str
    """The field's docstring."""


def config_keys(cls: type, prefix: str = "", defaults: Any = None) -> list[ConfigKey]:
    """Every key of ``cls`` with sections expanded (``model.name``, ``data.gym.seed``, ...);
    ``defaults``: an instance whose values are the defaults (a section's own may differ from
    its class's, as ``SFTConfig.log`` does)."""
    docs, hints, keys = field_docs(cls), typing.get_type_hints(cls), []
    for field in dataclasses.fields(cls):
        value = getattr(defaults, field.name) if defaults is not None else _default(field)
        section = value if dataclasses.is_dataclass(value) else None
        if section is None and dataclasses.is_dataclass(hints[field.name]):
            section = hints[field.name]  # a required section: its class's defaults
        if section is not None:
            inner = None if isinstance(section, type) else section
            cls_of = section if inner is None else type(inner)
            # A section whose keys sit directly in its parent's (the objective's hyperparameters).
            extra = getattr(cls, "EXTRA_KEYS", None) == field.name
            keys += config_keys(cls_of, prefix if extra else f"{prefix}{field.name}.", inner)
        else:
            keys.append(ConfigKey(prefix + field.name, _shown(value), docs.get(field.name, "")))
    return keys


_REQUIRED = object()


def _default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return _REQUIRED


def _shown(value: Any) -> str:
    if value is _REQUIRED:
        return "required"
    if isinstance(value, str):
        return value
    return json.dumps(list(value) if isinstance(value, tuple) else value)


def keys_help(cls: type, width: int = 100, config: Any = None, source: str = "") -> str:
    """The keys of ``cls`` as ``--help`` lists them: ``key=value`` and the docstring, the value
    ``config``'s (the configuration the command would run, from ``source``: the chosen
    objective's hyperparameters included), else the class default."""
    if config is None:
        head = f"configuration keys ({cls.__name__}; key=default, which a config file may change):"
    else:
        head = (
            f"configuration keys ({cls.__name__}; key=value of the run this command starts: "
            f"{source}; another objective's hyperparameters: objective.name=NAME --help):"
        )
    lines = textwrap.wrap(head, width, subsequent_indent="  ")
    for key in config_keys(cls, defaults=config):
        head = f"  {key.key}={key.default}"
        doc = " ".join(re.sub(r":\w+:`~?([^`]*)`", r"\1", key.doc).replace("``", "").split())
        if len(head) >= 40:  # the key on a line of its own, its text wrapped below it
            lines.append(head)
            head = ""
        text = textwrap.wrap(doc, width, initial_indent=f"{head:<41}", subsequent_indent=" " * 41)
        lines += text or [head] * bool(head)
    return "\n".join(lines)
