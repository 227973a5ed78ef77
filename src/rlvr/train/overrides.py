"""Config dataclasses from YAML files and ``key=value`` overrides, with checked types.

``load_config(TrainConfig, "demo", ["objective.name=abc_grpo", "objective.eps3=0.3"])``
reads an embedded config (``src/rlvr/configs/demo.yaml``) or a YAML file, applies the
dotted overrides (values parsed as YAML scalars), and builds the frozen dataclasses,
naming the offending key on any error. Two conveniences:

- a scalar given for a section sets its ``name`` (``model=smollm2-135m``, keeping the
  section's other keys in any order of overrides), or the field its class names in
  ``SCALAR_KEY`` (a study's arm given as its recipe);
- keys of ``objective`` that are not its fields are the objective's hyperparameters
  (``objective.eps3=0.3``): they are built into the objective's own config dataclass
  (``objective.params``, an ``AbcConfig``...), with the same type checks as every key.
  A dataclass opts into this by naming the field in ``EXTRA_KEYS`` and providing
  ``params_class(name)``.

Every YAML file the project reads goes through :func:`from_dict`: run configurations,
studies and claim files (``rlvr.compare``) and pipelines (``rlvr.pipeline``), each a
dataclass whose fields are the file's keys. A field marked ``metadata=NOT_A_KEY`` is set
by the code, never read from the file; ``LABEL`` names the file's kind in errors
(``unknown key 'x'; valid keys of a study: ...``); :func:`from_file` starts every error with
where the file came from.
"""

from __future__ import annotations

import dataclasses
import types
import typing
import warnings
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import yaml

from rlvr.builtins import did_you_mean
from rlvr.bundled import bundled_names, read_source
from rlvr.objectives.config import ObjectiveConfig

T = TypeVar("T")

NOT_A_KEY = {"key": False}
"""Field metadata: the code sets this field; a file that names it is refused as an unknown key."""

# Top-level sections whose extra keys belong to the named thing: a new name drops them.
_NAME_SCOPED: dict[str, type] = {"objective": ObjectiveConfig}
# Sections an override names by a scalar (``model=smollm2-135m``): the name is set first and
# the section's other keys kept, so ``model.lora.rank=4 model=x`` keeps the rank.
_NAMED = (*_NAME_SCOPED, "model")
# Older spellings of a section's nested extra-keys mapping, still read.
_EXTRA_ALIASES = ("hparams",)


def _rename(key: str, section: dict[str, Any], name: Any) -> dict[str, Any]:
    """``section`` with ``name`` set; under a different name, hyperparameters of the old one are dropped."""
    cls = _NAME_SCOPED.get(key)
    if cls is not None and section.get("name") != name:
        fields = {f.name for f in dataclasses.fields(cls)} - {cls.EXTRA_KEYS}
        section = {k: v for k, v in section.items() if k in fields}
    return {**section, "name": name}


NOT_RUN_CONFIGS = ("pipelines",)
"""Folders of ``rlvr/configs`` that hold other files than run configurations."""


def embedded_configs() -> list[str]:
    """Names of the configs shipped in ``rlvr/configs`` (paper recipes as ``paper/name``)."""
    root = resources.files("rlvr") / "configs"
    names = []
    for entry in root.iterdir():
        if entry.is_dir() and entry.name in NOT_RUN_CONFIGS:
            continue
        if entry.is_dir():
            names += [f"{entry.name}/{n}" for n in bundled_names("rlvr", f"configs/{entry.name}")]
        elif entry.name.endswith(".yaml"):
            names.append(entry.name[:-5])
    return sorted(names)


def configs_of(cls: type) -> list[str]:
    """The embedded configs that configure ``cls`` (``TrainConfig`` or ``SFTConfig``): every top-level key a field of it."""
    fields = {f.name for f in dataclasses.fields(cls)}
    return [name for name in embedded_configs() if set(read_yaml(name)) <= fields]


def read_yaml(name_or_path: str, _seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """The mapping in a YAML file or embedded config, merged over its ``base:`` config if it
    names one (a relative path beside the file that names it, as :func:`base_source` finds it).
    A file's relative ``data.train``, ``data.eval`` and ``model.name`` are read beside it too
    (:func:`read_beside`)."""
    data = _read_one(name_or_path)
    if Path(name_or_path).is_file():
        data = paths_beside(data, Path(name_or_path).parent)
    base = data.pop("base", None)
    if base is None:
        return data
    if not isinstance(base, str):
        raise ValueError(f"{name_or_path}: base must name a config, got {base!r}")
    base = base_source(name_or_path, base)
    if base in _seen or base == name_or_path:
        raise ValueError(
            f"{name_or_path}: circular base {' -> '.join((*_seen, name_or_path, base))}"
        )
    return deep_merge(read_yaml(base, (*_seen, name_or_path)), data)


def base_source(including: str, base: str) -> str:
    """Where ``base:`` in ``including`` points: a file beside ``including`` (a YAML file, not
    an embedded config) when there is one, else ``base`` as given (an embedded name, or a
    path from the working directory).

    ``conf/run.yaml`` with ``base: common.yaml`` reads ``conf/common.yaml`` from any folder.
    """
    here, path = Path(including), Path(base)
    beside = here.parent / path
    if here.is_file() and not path.is_absolute() and beside.is_file():
        return str(beside)
    return base


def read_beside(folder: Path, value: str, *, model: bool = False, absolute: bool = False) -> str:
    """``value``, named in a YAML file in ``folder``: the file or folder there when there is
    one (``./`` and ``../`` ones also when it is nowhere, so an error names where it was
    looked for), else as given (from the current folder, or a data set, preset or Hub name).
    Kept as given when it names the same path from the current folder, unless ``absolute``.
    ``model``: a preset name stays one.

    ``conf/run.yaml`` with ``data: {train: qa.jsonl}`` trains on ``conf/qa.jsonl`` from any folder.
    """
    path = Path(value).expanduser()
    if not value or path.is_absolute() or value.startswith("@"):
        return value
    if model:
        from rlvr.models import preset_names

        if value in preset_names():
            return value
    there = (folder / path).resolve()
    nowhere = value.startswith(("./", "../")) and not path.exists()
    if not (there.exists() or nowhere):
        return value
    if not absolute and path.exists() and path.resolve() == there:
        return value
    return str(there)


def paths_beside(data: dict[str, Any], folder: Path, *, absolute: bool = False) -> dict[str, Any]:
    """A run configuration's mapping with its data and model paths read beside its file
    (``absolute``: each one found there written as an absolute path)."""
    out = dict(data)
    section = out.get("data")
    if isinstance(section, dict):
        out["data"] = {
            k: read_beside(folder, v, absolute=absolute)
            if k in ("train", "eval") and isinstance(v, str)
            else v
            for k, v in section.items()
        }
    model = out.get("model")
    if isinstance(model, str):
        out["model"] = read_beside(folder, model, model=True, absolute=absolute)
    elif isinstance(model, dict) and isinstance(model.get("name"), str):
        name = read_beside(folder, model["name"], model=True, absolute=absolute)
        out["model"] = {**model, "name": name}
    return out


def deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """``top`` over ``base``, section by section (a scalar section is a ``name``)."""
    out = _deep_copy(base)
    for key, value in top.items():
        below = out.get(key)
        if isinstance(below, str) and key in _NAME_SCOPED:
            below = {"name": below}
        if isinstance(value, str) and isinstance(below, dict) and key in _NAME_SCOPED:
            value = {"name": value}
        if isinstance(value, dict) and isinstance(below, dict):
            if "name" in value:
                below = _rename(key, below, value["name"])
            out[key] = deep_merge(below, value)
        else:
            out[key] = _deep_copy(value)
    return out


def _read_one(name_or_path: str) -> dict[str, Any]:
    source = read_source(
        name_or_path,
        package="rlvr",
        folder="configs",
        kind="an embedded config",
        choices=embedded_configs,
    )
    data, where = source.data, source.where
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{where}: top level must be a mapping, got {type(data).__name__}")
    return data


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """A copy of ``data`` with each ``a.b.c=value`` set (value parsed as YAML)."""
    out = _deep_copy(data)
    # A new name first, so `objective.eps3=0.3 objective.name=abc_grpo` keeps eps3.
    renames = [
        o
        for o in overrides
        if o.partition("=")[0] in {f"{k}{s}" for k in _NAMED for s in ("", ".name")}
    ]
    for item in renames + [o for o in overrides if o not in renames]:
        key, sep, raw = item.partition("=")
        if not sep or not key or any(not part for part in key.split(".")):
            raise ValueError(f"override {item!r} must look like section.key=value")
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError as err:
            raise ValueError(
                f"override {item!r}: value is not valid YAML (quote a text value: "
                f"\"{key}='...'\"): {err}"
            ) from err
        parts = key.split(".")
        if parts[0] in _NAMED and (
            len(parts) == 1 and isinstance(value, str) or parts[1:] == ["name"]
        ):
            section = out.get(parts[0])
            section = {"name": section} if isinstance(section, str) else dict(section or {})
            out[parts[0]] = _rename(parts[0], section, value)
            continue
        node = out
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):  # `model: tiny` then `model.dtype=...`
                child = node[part] = {"name": child}
            node = child
        node[parts[-1]] = value
    return out


def load_config(cls: type[T], name_or_path: str | None, overrides: list[str] = ()) -> T:  # type: ignore[assignment]
    """Build ``cls`` from a YAML file / embedded config (or nothing) plus overrides."""
    data = apply_overrides(read_yaml(name_or_path) if name_or_path else {}, list(overrides))
    if not name_or_path:
        _check_required_keys_given(cls, data)
    return from_dict(cls, data)


def _check_required_keys_given(cls: type, data: dict) -> None:
    """With no config file (``rlvr sft data.train=...``), a required section nothing set is
    named by its required keys, as the ``key=value`` to give: a file's hint (``base:``) does
    not apply. A section that is set is checked by :func:`from_dict` (unknown keys first)."""
    from rlvr.train.config_keys import config_keys

    required = [k.key for k in config_keys(cls) if k.default == "required"]
    missing = [k for k in required if k.split(".")[0] not in data]
    if missing:
        where = getattr(cls, "LABEL", "config")
        raise ValueError(
            f"{where}: missing required key(s) {', '.join(missing)}: give them as key=value "
            f"({missing[0]}=...) or in a config file"
        )


def from_dict(cls: type[T], data: Any, path: str = "") -> T:
    """Build dataclass ``cls`` from a mapping, checking keys and value types."""
    where = path or getattr(cls, "LABEL", "config")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init and f.metadata != NOT_A_KEY}
    if not isinstance(data, dict):
        scalar = getattr(cls, "SCALAR_KEY", "name")
        if scalar in fields and isinstance(data, str):
            data = {scalar: data}
        else:
            raise ValueError(f"{where} must be a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    extra_field = getattr(cls, "EXTRA_KEYS", None)
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in _renamed(cls, data, path).items():
        dotted = f"{path}.{key}" if path else str(key)
        if extra_field and key in (extra_field, *_EXTRA_ALIASES):
            if value is not None and not isinstance(value, dict):
                raise ValueError(f"{dotted} must be a mapping, got {value!r}")
            extra.update(value or {})
        elif key in fields:
            kwargs[key] = coerce(_over_default(fields[key], value, dotted), hints[key], dotted)
        elif extra_field:
            extra[key] = value
        else:
            raise ValueError(f"unknown key {dotted!r}; valid keys of {where}: {', '.join(fields)}")
    if extra_field:
        kwargs[extra_field] = _extra_section(cls, kwargs, extra, path, fields)
    missing = [
        name
        for name, f in fields.items()
        if name not in kwargs
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ValueError(
            f"{where}: missing required key(s) {', '.join((f'{path}.' if path else '') + m for m in missing)}"
            + ("" if path else _base_hint(cls))
        )
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as err:
        # A check that does not name its key (the objective's cross-field ones, a claim's
        # rule): the error names the section.
        if extra_field or (path and not str(err).startswith(path.split("[")[0])):
            raise ValueError(f"{where}: {err}") from err
        raise


def _base_hint(cls: type) -> str:
    """How a YAML file of ``cls`` gets the keys it lacks: from an embedded config."""
    names = configs_of(cls)
    example = "demo" if "demo" in names else (names[0] if names else None)
    return f" (or inherit them: base: {example} in the YAML file)" if example else ""


def from_file(cls: type[T], data: Any, where: str) -> T:
    """:func:`from_dict` for the mapping read from a file; every error starts with ``where``
    (the file, or the bundled name it was read as)."""
    if data is None:
        data = {}
    try:
        return from_dict(cls, data)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


def _over_default(f: dataclasses.Field, value: Any, path: str) -> Any:
    """A section's mapping laid over its field's own default when that differs from the
    section class's (``SFTConfig.optim`` is ``OptimConfig(lr=1e-4)``): keys not given keep it."""
    factory = f.default_factory
    if not isinstance(value, dict) or factory is dataclasses.MISSING:
        return value
    default = factory()
    if not dataclasses.is_dataclass(default) or factory is type(default):
        return value
    return deep_merge(to_dict(default), _renamed(type(default), value, path))


def _renamed(cls: type, data: dict[str, Any], path: str) -> dict[str, Any]:
    """``data`` with keys an earlier version used (``cls.RENAMED``) under their new names, with a warning."""
    renamed = getattr(cls, "RENAMED", {})
    out = {}
    for key, value in data.items():
        if key in renamed:
            new = renamed[key]
            was, now = (f"{path}.{key}", f"{path}.{new}") if path else (key, new)
            warnings.warn(f"{was} is now {now}; read as {now}", stacklevel=4)
            key = new
        out[key] = value
    return out


def _extra_section(cls: type, kwargs: dict, extra: dict, path: str, fields: dict) -> Any:
    """The ``EXTRA_KEYS`` dataclass of ``cls`` (e.g. the objective's hyperparameters) from ``extra``."""
    where = path or "config"
    name = kwargs.get("name", fields["name"].default)
    try:
        params_cls = cls.params_class(name)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from err
    known = [f.name for f in dataclasses.fields(params_cls)]
    unknown = sorted(set(extra) - set(known))
    if unknown:
        own = ", ".join(k for k in fields if k != cls.EXTRA_KEYS)
        raise ValueError(
            f"{where}: unknown hyperparameter(s) {', '.join(unknown)} for {name!r} "
            f"({', '.join(f'{path}.{k}' if path else k for k in unknown)}); valid: "
            f"{', '.join(known) or 'none'} (and the section's own keys: {own})"
            + did_you_mean(unknown[0], [*known, *(k for k in fields if k != cls.EXTRA_KEYS)])
        )
    try:
        return from_dict(params_cls, extra, path)
    except (TypeError, ValueError) as err:
        raise ValueError(err if str(err).startswith(where) else f"{where}: {err}") from err


def coerce(value: Any, tp: Any, path: str) -> Any:
    """``value`` checked against (and converted to) the annotated type ``tp``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, path)
    if origin in (typing.Union, types.UnionType):
        return _coerce_union(value, args, path)
    if origin is typing.Literal:
        return _coerce_literal(value, args, path)
    if origin is tuple:
        return _coerce_tuple(value, args, path)
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise ValueError(f"{path} must be a mapping, got {value!r}")
        return dict(value)
    if tp is typing.Any:
        return value
    return _coerce_scalar(value, tp, path)


def _coerce_union(value: Any, args: tuple, path: str) -> Any:
    if value is None and type(None) in args:
        return None
    rest = [a for a in args if a is not type(None)]
    errors = []
    for arg in rest:
        try:
            return coerce(value, arg, path)
        except ValueError as err:
            errors.append(str(err))
    raise ValueError(errors[0] if len(errors) == 1 else f"{path}: {value!r} matches none of {rest}")


def _coerce_literal(value: Any, args: tuple, path: str) -> Any:
    if isinstance(value, bool) and {"on", "off"} <= set(args):  # YAML 1.1 reads on/off as bools
        value = "on" if value else "off"
    if value not in args:
        raise ValueError(f"{path} must be one of {list(args)}, got {value!r}")
    return value


def _coerce_tuple(value: Any, args: tuple, path: str) -> tuple:
    if (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and len(args) == 2
        and args[1] is Ellipsis
    ):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{path} must be a list, got {value!r}")
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(coerce(v, args[0], f"{path}[{i}]") for i, v in enumerate(value))
    if len(value) != len(args):
        raise ValueError(f"{path} must have {len(args)} items, got {len(value)}")
    return tuple(
        coerce(v, a, f"{path}[{i}]") for i, (v, a) in enumerate(zip(value, args, strict=True))
    )


def _coerce_scalar(value: Any, tp: Any, path: str) -> Any:
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # PyYAML reads 1e-6 (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
    elif tp is str:
        if isinstance(value, str):
            return value
    else:
        raise TypeError(f"{path}: unsupported annotation {tp!r}")
    raise ValueError(f"{path} must be {tp.__name__}, got {value!r}{_quote_hint(value, tp, path)}")


def _quote_hint(value: Any, tp: Any, path: str) -> str:
    """For text that YAML read as a mapping or list (``{prompt}``, ``Q: {prompt}``): quote it."""
    if tp is not str or not isinstance(value, (dict, list)):
        return ""
    return (
        ": YAML reads {...} and 'a: b' as a mapping and [...] as a list; quote the text "
        f"(in a shell: \"{path}='...'\")"
    )


def to_dict(config: Any) -> dict[str, Any]:
    """A plain mapping (tuples as lists) that :func:`from_dict` turns back into ``config``.

    A section's ``EXTRA_KEYS`` dataclass is written flat into the section, as it is read.
    """
    out: dict[str, Any] = {}
    extra_field = getattr(config, "EXTRA_KEYS", None)
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.name == extra_field:
            out.update(to_dict(value))
        elif dataclasses.is_dataclass(value):
            out[f.name] = to_dict(value)
        else:
            out[f.name] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return to_dict(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def dump_yaml(config: Any) -> str:
    """``config`` (a config or its :func:`to_dict` mapping) as YAML text (round-trips through
    :func:`load_config`)."""
    return yaml.safe_dump(config if isinstance(config, dict) else to_dict(config), sort_keys=False)


def _deep_copy(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _deep_copy(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_deep_copy(v) for v in data]
    return data
