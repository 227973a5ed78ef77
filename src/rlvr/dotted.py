"""Nested configurations as dotted keys (``{"optim": {"lr": 1e-5}}`` as ``optim.lr``), to
compare two of them key by key: a resumed run's against its saved ``config.yaml``, a pipeline
stage's against its ``stage.json``, a data filter's settings against its recorded ones."""

from __future__ import annotations

import json
from typing import Any


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``data`` with nested mappings as dotted keys, each value as JSON reads it back (tuples
    as lists), so that two configurations compare key by key.

    >>> flatten({"optim": {"lr": 1e-5, "betas": (0.9, 0.99)}, "log": {}})
    {'optim.lr': 1e-05, 'optim.betas': [0.9, 0.99], 'log': {}}
    """
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = json.loads(json.dumps(value, default=str))
    return out


def changed_keys(
    old: dict[str, Any], new: dict[str, Any], ignore: tuple[str, ...] = ()
) -> list[str]:
    """The keys of two :func:`flatten`-ed configurations that differ (those starting with one
    of ``ignore`` aside): on both sides with other values, or on one side only where the other
    holds a parent key (an option added to or removed from a mapping such as
    ``reward.options``). A key one side lacks outright (a field another rlvr version added) is
    not a change.

    >>> changed_keys({"a.b": 1, "opts": {}}, {"a.b": 2, "opts.x": 1, "new": 0})
    ['a.b', 'opts.x']
    """

    def under(key: str, side: dict[str, Any]) -> bool:
        parts = key.split(".")
        return any(".".join(parts[:i]) in side for i in range(1, len(parts)))

    def differs(key: str) -> bool:
        if key in old and key in new:
            return old[key] != new[key]
        return under(key, new) if key in old else under(key, old)

    return [k for k in sorted(old.keys() | new.keys()) if not k.startswith(ignore) and differs(k)]
