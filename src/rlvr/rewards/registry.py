"""The verifier registry: plain functions registered by name, looked up by spec string.

A verifier is a module-level function ``fn(completion: str, reference, **options) -> float``
registered with :func:`register`; a spec is ``name[:argument][+format]``, the argument
binding the option registered as ``spec_arg``. ``docs/rewards.md`` ("Specs", "Adding a
verifier") has the options every verifier takes and what ``check`` and ``sandboxed`` do.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlvr.builtins import available, did_you_mean, import_own, load_builtin, same_function
from rlvr.rewards.format import with_format
from rlvr.rewards.verifier import Verifier, VerifierFn


@dataclass(frozen=True)
class VerifierEntry:
    """One registered verifier."""

    fn: VerifierFn
    """``fn(completion, reference, **options) -> float``."""
    spec_arg: str | None = None
    """The keyword option that ``name:<value>`` in a spec sets."""
    check: Callable[..., None] | None = None
    """Called with every bound option (defaults included); raises ``ValueError`` for a bad one."""
    sandboxed: bool = False
    """The verifier runs programs in the sandbox."""


VERIFIERS: dict[str, VerifierEntry] = {}
"""Every verifier registered so far, by name."""

# name -> module that registers it when imported.
BUILTIN_MODULES: dict[str, str] = {
    "math": "rlvr.rewards.math",
    "reasoning_gym": "rlvr.rewards.reasoning_gym",
    "code": "rlvr.rewards.code",
}

MODIFIERS = ("format",)


def register(
    name: str,
    *,
    spec_arg: str | None = None,
    check: Callable[..., None] | None = None,
    sandboxed: bool = False,
) -> Callable[[VerifierFn], VerifierFn]:
    """Decorator: register ``fn(completion, reference, **options) -> float`` as ``name``
    (the keywords are the fields of :class:`VerifierEntry`)."""
    if not name or any(c in name for c in ":+"):
        raise ValueError(f"verifier name must be non-empty without ':' or '+', got {name!r}")

    def wrap(fn: VerifierFn) -> VerifierFn:
        if spec_arg is not None and spec_arg not in _keyword_defaults(fn):
            raise ValueError(
                f"verifier {name!r}: spec_arg {spec_arg!r} is not a keyword option of {fn.__name__}"
            )
        if BUILTIN_MODULES.get(name) != fn.__module__:  # a built-in name is taken before use
            load_builtin(name, VERIFIERS, BUILTIN_MODULES)
        taken = VERIFIERS.get(name)
        if taken is not None and not same_function(taken.fn, fn):  # it would score in its place
            raise ValueError(f"verifier {name!r} is already registered ({taken.fn.__module__})")
        VERIFIERS[name] = VerifierEntry(fn, spec_arg, check, sandboxed)
        return fn

    return wrap


def _keyword_defaults(fn: VerifierFn) -> dict[str, Any]:
    """Keyword options of ``fn`` (parameters after the first two) and their defaults."""
    params = list(inspect.signature(fn).parameters.values())[2:]
    kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return {p.name: p.default for p in params if p.kind in kinds}


def available_verifiers() -> list[str]:
    """Every verifier name that :func:`get_verifier` accepts (built-in and registered)."""
    return available(VERIFIERS, BUILTIN_MODULES)


def _lookup(name: str) -> VerifierEntry:
    """The registered entry for ``name``, importing its built-in module if needed; a dotted
    name ``module.verifier`` imports ``module`` (yours) and takes what it registers."""
    load_builtin(name, VERIFIERS, BUILTIN_MODULES)
    if name not in VERIFIERS and "." in name:
        module, _, registered = name.rpartition(".")
        if not import_own(module):  # the folder stays on sys.path, which workers inherit
            raise ValueError(
                f"verifier {name!r}: no module {module!r} to import (a file {module}.py in the "
                "working directory or on PYTHONPATH)"
            )
        if registered not in VERIFIERS:
            raise ValueError(f"verifier {name!r}: module {module!r} registers no {registered!r}")
        return VERIFIERS[registered]
    if name not in VERIFIERS:
        raise ValueError(
            f"unknown verifier {name!r}; valid: {', '.join(available_verifiers())}, or "
            f"module.name for one your own module registers{did_you_mean(name, BUILTIN_MODULES)}"
        )
    return VERIFIERS[name]


def parse_spec(spec: str) -> tuple[str, str | None, tuple[str, ...]]:
    """``"name[:argument][+modifier...]"`` -> ``(name, argument, modifiers)``.

    >>> parse_spec("reasoning_gym:chain_sum+format")
    ('reasoning_gym', 'chain_sum', ('format',))
    >>> parse_spec("math")
    ('math', None, ())
    """
    head, *modifiers = [part.strip() for part in spec.split("+")]
    name, _, argument = head.partition(":")
    unknown = [m for m in modifiers if m not in MODIFIERS]
    if not name or unknown:
        raise ValueError(
            f"bad verifier spec {spec!r}: expected name[:argument][+format], unknown parts {unknown}"
        )
    return name, (argument or None), tuple(modifiers)


def _bind(name: str, argument: str | None, options: dict[str, Any]) -> Verifier:
    """Check ``options`` against the verifier's signature and bind them."""
    entry = _lookup(name)
    fn, defaults = entry.fn, _keyword_defaults(entry.fn)
    if argument is not None:
        if entry.spec_arg is None:
            raise ValueError(f"verifier {name!r} takes no ':argument' in its spec")
        options = {**options, entry.spec_arg: argument}
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise ValueError(f"verifier {name!r} has no option(s) {unknown}; valid: {sorted(defaults)}")
    bound = {**defaults, **options}
    if entry.check is not None:
        entry.check(**bound)
    correct, wrong = bound.get("correct", 1.0), bound.get("wrong", 0.0)
    if not all(isinstance(x, numbers.Real) and math.isfinite(x) for x in (correct, wrong)) or (
        correct <= wrong
    ):  # a wrong completion would be paid as much as a right one (or NaN, a failure)
        raise ValueError(
            f"verifier {name!r}: the correct score ({correct!r}) must be a finite number above "
            f"the wrong score ({wrong!r})"
        )
    return Verifier(
        spec=name if argument is None else f"{name}:{argument}",
        fn=fn,
        options=options,
        correct_value=float(correct),
        failure_value=float(wrong),
    )


def get_verifier(spec: str | Verifier, **options: Any) -> Verifier:
    """Build the verifier named by ``spec`` with keyword ``options``.

    Options prefixed ``format_`` configure the ``+format`` wrapper (``format_penalty``,
    ``format_think_in_prompt``); the rest go to the named verifier.

    >>> v = get_verifier("math", correct=1.0, wrong=-1.0)
    >>> v(r"... so \\boxed{\\dfrac{3}{4}}", "0.75"), v("no idea", "0.75")
    (1.0, -1.0)
    """
    if isinstance(spec, Verifier):
        if options:
            raise ValueError("options cannot be applied to an already-built Verifier")
        return spec
    name, argument, modifiers = parse_spec(spec)
    format_options = {
        k.removeprefix("format_"): v for k, v in options.items() if k.startswith("format_")
    }
    if format_options and "format" not in modifiers:
        raise ValueError(
            f"format_* options {sorted(format_options)} given but spec {spec!r} has no '+format'"
        )
    inner = _bind(name, argument, {k: v for k, v in options.items() if not k.startswith("format_")})
    if "format" in modifiers:
        return with_format(inner, **format_options)
    return inner


def sandbox_isolation(spec: str) -> str | None:
    """The isolation mode a spec's verifier runs programs under, or ``None`` when it runs none.

    >>> sandbox_isolation("math+format") is None
    True
    """
    if not _lookup(parse_spec(spec)[0]).sandboxed:
        return None
    from rlvr.sandbox import isolation_mode  # the sandbox only for verifiers that use it

    return isolation_mode()
