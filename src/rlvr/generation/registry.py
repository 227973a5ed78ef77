"""Samplers by name: the :class:`Sampler` protocol and its registry.

A sampler turns prompt token ids into ``n`` completions each (a :class:`Generation`). The
built-in ``lean`` and ``hf`` samplers draw from the policy model itself; a backend with an
engine of its own (vLLM) receives the policy's weights through :meth:`Sampler.sync_weights`
before each rollout. A new backend is one module that registers itself::

    @register_sampler("mine", options=MineOptions)
    class MineSampler:
        def __init__(self, model, tokenizer, options: MineOptions): ...
        def generate(self, prompt_ids, *, n, sampling) -> Generation: ...
        def sync_weights(self) -> None: ...
        def close(self) -> None: ...

plus one line in :data:`BUILTIN_MODULES` if it ships with ``rlvr`` (so it is found by name
without being imported first). ``rollout.sampler=mine`` then selects it and
``rollout.sampler_options`` fills ``MineOptions``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from rlvr.builtins import available, load_builtin
from rlvr.generation.base import Generation, SamplingConfig


@runtime_checkable
class Sampler(Protocol):
    """What the trainer and the evaluation harness sample with."""

    def generate(
        self, prompt_ids: Sequence[Sequence[int]], *, n: int, sampling: SamplingConfig
    ) -> Generation:
        """``n`` completions of each prompt (rows grouped by prompt), drawn from the torch RNG's stream or seeded from it."""
        ...

    def sync_weights(self) -> None:
        """Make the next :meth:`generate` sample from the policy's current weights."""
        ...

    def close(self) -> None:
        """Release what the sampler holds (engines, memory)."""
        ...


@dataclass(frozen=True)
class NoOptions:
    """A sampler without options."""


@dataclass(frozen=True)
class SamplerEntry:
    """A registered sampler."""

    factory: Callable[[Any, Any, Any], Sampler]
    """``factory(model, tokenizer, options) -> Sampler``."""
    options: type
    """Frozen dataclass of its options (``rollout.sampler_options``)."""
    logprobs: bool | None = None
    """Whether its :class:`Generation` carries the sampled tokens' log-probs: ``False`` is
    refused with ``rollout.importance_correction=tis`` before the run; ``None`` (not declared)
    leaves that to the first update."""
    requires: str | None = None
    """A package it imports when made (``vllm``), checked before a model loads."""
    missing: str = ""
    """The one line said when ``requires`` is not installed."""


SAMPLERS: dict[str, SamplerEntry] = {}
"""Every sampler registered so far."""

BUILTIN_MODULES: dict[str, str] = {
    "lean": "rlvr.generation.lean",
    "hf": "rlvr.generation.hf",
    "vllm": "rlvr.generation.vllm",
}
"""Samplers shipped with rlvr, imported (and so registered) on first use."""


def register_sampler(
    name: str,
    *,
    options: type = NoOptions,
    logprobs: bool | None = None,
    requires: str | None = None,
    missing: str = "",
) -> Callable:
    """Decorator: register ``factory(model, tokenizer, options)`` (usually a class) as ``name``;
    ``logprobs``: whether it reports the sampled tokens' log-probs (``None``: not declared);
    ``requires``: a package it needs, ``missing`` the line said without it."""
    if not dataclasses.is_dataclass(options):
        raise ValueError(f"sampler {name!r}: options must be a dataclass, got {options!r}")

    def wrap(factory):
        SAMPLERS[name] = SamplerEntry(factory, options, logprobs, requires, missing)
        return factory

    return wrap


def available_samplers() -> list[str]:
    """Names :func:`make_sampler` accepts (built-in and registered)."""
    return available(SAMPLERS, BUILTIN_MODULES)


def sampler_entry(name: str) -> SamplerEntry:
    """The registered entry of ``name``; an unknown name lists the valid ones."""
    load_builtin(name, SAMPLERS, BUILTIN_MODULES)
    if name not in SAMPLERS:
        raise ValueError(f"unknown sampler {name!r}; valid: {', '.join(available_samplers())}")
    return SAMPLERS[name]


def sampler_options(name: str, **options: Any) -> Any:
    """The options dataclass of sampler ``name`` built from ``options`` (unknown keys listed)."""
    cls = sampler_entry(name).options
    valid = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValueError(
            f"unknown option(s) {', '.join(unknown)} for sampler {name!r}; valid: {', '.join(valid) or 'none'}"
        )
    options = _exponents_read(cls, options)
    check_types(name, cls, options)
    return cls(**options)


def named_options(name: str, options: dict[str, Any], keys: tuple[str, str]) -> Any:
    """:func:`sampler_options`, its one-line error naming what was given: ``keys`` are the
    sampler's and its options' (``("rollout.sampler", "rollout.sampler_options")``)."""
    try:
        sampler_entry(name)
    except ValueError as err:
        raise ValueError(f"{keys[0]}: {err}") from None
    try:
        return sampler_options(name, **options)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{keys[1]}: {err}") from None


def _exponents_read(cls: type, options: dict[str, Any]) -> dict[str, Any]:
    """Each text given for a float option that reads as one, as that number: PyYAML reads
    ``5e-1`` (an exponent without a dot) as text, as the configuration keys' reader knows."""
    try:
        hints = typing.get_type_hints(cls)
    except NameError:  # annotations this module cannot resolve: left to the class
        return options
    out = dict(options)
    for key, value in options.items():
        if isinstance(value, str) and matches(0.5, hints[key]) and not matches(value, hints[key]):
            with contextlib.suppress(ValueError):
                out[key] = float(value)
    return out


def missing_package(name: str) -> str | None:
    """The line saying sampler ``name`` needs a package this environment lacks (checked
    without importing it, before a model loads); ``None`` when it has what it needs."""
    entry = sampler_entry(name)
    if entry.requires is None or importlib.util.find_spec(entry.requires) is not None:
        return None
    return entry.missing or f"sampler {name!r} needs the {entry.requires} package"


def check_types(name: str, cls: type, options: dict[str, Any]) -> None:
    """Each option of the type its field declares (an int passes for a float); one line
    naming the first that is not (a quoted ``"false"`` would otherwise read as true)."""
    try:
        hints = typing.get_type_hints(cls)
    except NameError:  # annotations this module cannot resolve: left to the class
        return
    for key, value in options.items():
        if not matches(value, hints[key]):
            raise ValueError(
                f"option {key} of sampler {name!r} must be {type_name(hints[key])}, got {value!r}"
            )


def matches(value: Any, tp: Any) -> bool:
    """Whether ``value`` fits ``tp`` (plain classes, ``X | None``; other annotations pass)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return any(matches(value, arg) for arg in typing.get_args(tp))
    if tp in (int, float) and isinstance(value, bool):
        return False
    if tp is float:
        return isinstance(value, (int, float))
    if isinstance(tp, type) and typing.get_origin(tp) is None:
        return isinstance(value, tp)
    return True


def type_name(tp: Any) -> str:
    """``bool``, ``int or None``, ...: an annotation as the error names it."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return " or ".join(type_name(arg) for arg in typing.get_args(tp))
    return "None" if tp is type(None) else getattr(tp, "__name__", str(tp))


def make_sampler(name: str, model, tokenizer, **options: Any) -> Sampler:
    """Sampler ``name`` for ``model`` and ``tokenizer`` with its ``options``."""
    entry = sampler_entry(name)
    return entry.factory(model, tokenizer, sampler_options(name, **options))
