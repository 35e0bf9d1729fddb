"""Typed settings from config mappings: unknown keys fail with the closest valid one (neither Hydra structured configs
nor pydantic names it in one line), values are checked against the constraints declared on the field; a task's
settings are composed of its stages' typed nodes (a :func:`flat` node's keys are the parent's own)."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin

from harness.core.errors import HarnessError, closest_first

T = TypeVar("T")


def _field(meta: dict[str, Any], *, excluded: str = "", default: Any = dataclasses.MISSING, **kw: Any) -> Any:
    """A dataclass field with the constraint ``meta``; ``excluded``: see :func:`excluded`; ``kw``: the field's."""
    return dataclasses.field(default=default, metadata={**meta, **({"excluded": excluded} if excluded else {})}, **kw)


def choices(*values: Any, **kw: Any) -> Any:
    """A dataclass field restricted to ``values`` (checked by :func:`build`)."""
    return _field({"choices": values}, **kw)


def at_least(low: float, *, below: float | None = None, null: str = "", nonempty: bool = False, **kw: Any) -> Any:
    """A number (each of a list or mapping) >= ``low`` (< ``below``); ``null``: what null means where allowed."""
    return _field({"min": low, "below": below, "null": null, "nonempty": nonempty}, **kw)


def count(low: int = 1, **kw: Any) -> Any:
    """A count or size: an integer >= ``low`` (1 unless told; null, not 0, means "no limit" where a field says so)."""
    return at_least(low, **kw)


def positive(*, null: str = "", nonempty: bool = False, **kw: Any) -> Any:
    """A number > 0 (a learning rate, a number of epochs, a time or memory budget)."""
    return _field({"min": 0, "open": True, "null": null, "nonempty": nonempty}, **kw)


def nonempty(names_from: str = "", **kw: Any) -> Any:
    """A list that selects what runs (empty would run nothing); ``names_from``: the field of valid names."""
    return _field({"nonempty": True, "names_from": names_from}, **kw)


def excluded(why: str, **kw: Any) -> Any:
    """A field the run identity leaves out, and ``why`` (it changes no number, or is hashed resolved)."""
    return _field({}, excluded=why, **kw)


def flat() -> Any:
    """A stage's settings node whose keys are the parent's own (``task.batch_tokens``); a key is in one node only."""
    return dataclasses.field(metadata={"flat": True})


def init_fields(cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]


def _node_of(cls: type, f: dataclasses.Field) -> type | None:
    """The dataclass a field holds (itself, or in an Optional/union), or None."""
    found = _dataclasses_in(typing.get_type_hints(cls)[f.name])
    return found[0] if found else None


def config_keys(cls: type) -> list[str]:
    """The keys a mapping for ``cls`` may have: its own fields, and the keys of its :func:`flat` nodes."""
    return list(key_fields(cls))


def key_fields(cls: type) -> dict[str, tuple[type, dataclasses.Field]]:
    """``{key: (declaring class, field)}`` of every key a mapping for ``cls`` may have, flat nodes' too."""
    out: dict[str, tuple[type, dataclasses.Field]] = {}
    for name, f in init_fields(cls).items():
        node = _node_of(cls, f) if f.metadata.get("flat") else None
        found = key_fields(node) if node is not None else {name: (cls, f)}
        clash = set(found) & set(out)
        if clash:
            raise TypeError(f"{cls.__qualname__}: key {sorted(clash)[0]!r} is declared by two of its nodes")
        out |= found
    return out


def excluded_keys(cls: type, prefix: str) -> dict[str, str]:
    """``{dotted key: why}`` of every :func:`excluded` field of ``cls`` and its nodes, under ``prefix`` (``task``)."""
    out: dict[str, str] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.metadata.get("excluded"):
            out[f"{prefix}.{f.name}"] = f.metadata["excluded"]
        elif (node := _node_of(cls, f)) is not None:
            out |= excluded_keys(node, prefix if f.metadata.get("flat") else f"{prefix}.{f.name}")
    return out


def role_keys(cls: type, role: str, prefix: str) -> tuple[str, ...]:
    """The dotted keys of every node of ``cls`` whose ``role`` is ``role`` (a nested node counts as one key)."""
    if getattr(cls, "role", None) == role:
        return tuple(f"{prefix}.{k}" for k in (*config_keys(cls), *getattr(cls, "derived", ())))
    out: list[str] = []
    for name, f in init_fields(cls).items():
        node = _node_of(cls, f)
        if node is None:
            continue
        if f.metadata.get("flat"):
            out += role_keys(node, role, prefix)
        elif getattr(node, "role", None) == role:
            out.append(f"{prefix}.{name}")
        else:
            out += role_keys(node, role, f"{prefix}.{name}")
    return tuple(out)


def check_keys(data: Mapping[str, Any], valid: list[str], where: str) -> None:
    for key in data:
        if key not in valid:
            name = str(key)
            raise HarnessError(f"unknown key {name!r} in {where}; did you mean {closest_first(name, valid)[0]!r}? "
                               f"Valid keys: {', '.join(sorted(valid))}.")


def build(cls: type[T], data: Mapping[str, Any] | None, where: str, key: str = "") -> T:
    """``cls(**data)`` for a dataclass ``cls``, recursively; a bad key or value is an error naming the key."""
    data = _plain(data) or {}
    if not isinstance(data, Mapping):
        raise HarnessError(f"{where} must be a mapping of keys to values, got {type(data).__name__}")
    fields = init_fields(cls)
    check_keys(data, config_keys(cls), where)
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name, f in fields.items():
        if f.metadata.get("flat"):
            node = _dataclasses_in(hints[name])[0]
            kwargs[name] = build(node, {k: data[k] for k in config_keys(node) if k in data}, where, key)
            continue
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise HarnessError(f"{where} needs the key {name!r}")
            continue
        value = _coerce(data[name], hints[name], f"{where}, {name}", f"{key}.{name}" if key else "")
        allowed = f.metadata.get("choices")
        if allowed and value not in allowed:
            raise HarnessError(
                f"{where}, {name}={value!r} is not one of {', '.join(map(str, allowed))}"
                + (f" (closest: {closest_first(str(value), map(str, allowed))[0]})" if isinstance(value, str) else "")
            )
        kwargs[name] = value
    for name, value in kwargs.items():
        if not fields[name].metadata.get("flat"):
            check_constraint(fields[name].metadata, value, f"{key}.{name}" if key else f"{where}, {name}", kwargs)
    return cls(**kwargs)


def check_constraint(meta: Mapping[str, Any], value: Any, label: str, siblings: Mapping[str, Any]) -> None:
    """``value`` (field ``meta``, key ``label``) within bounds and, for :func:`nonempty`, not empty; else one line."""
    if meta.get("nonempty"):
        _check_nonempty(value, label, siblings.get(meta.get("names_from") or ""))
    if meta.get("min") is None:
        return
    low, below, is_open, null = meta["min"], meta.get("below"), meta.get("open", False), meta.get("null") or ""
    for where, number in _numbers(value, label):
        if is_open and number <= low:
            problem, want = f"must be above {low}", f"a number > {low}"
        elif number < low or (below is not None and number >= below):
            problem = f"is below {low}" if number < low else f"must be below {below}"
            want = (f"a number in [{low}, {below})" if below is not None else
                    f"{'an integer' if isinstance(number, int) else 'a number'} >= {low}")
        else:
            continue
        raise HarnessError(f"{where}={number!r} {problem}: set {where} to {want}"
                           + (f", or to null ({null})" if null else ""))


def _numbers(value: Any, label: str) -> list[tuple[str, float]]:
    """Every number in ``value`` (a number, or a list or mapping of them, nested) with its key."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return []
    if isinstance(value, int | float):
        return [(label, value)]
    if isinstance(value, Mapping):
        return [n for k, v in value.items() for n in _numbers(v, f"{label}.{k}")]
    if isinstance(value, list | tuple):
        return [n for i, v in enumerate(value) for n in _numbers(v, f"{label}[{i}]")]
    return []


def _check_nonempty(value: Any, label: str, names: Any) -> None:
    """A list that selects what runs is not empty (nor is each list of a mapping of lists)."""
    empty = []
    if isinstance(value, list | tuple) and not value:
        empty = [label]
    elif isinstance(value, Mapping):
        empty = [label] if not value else [f"{label}.{k}" for k, v in value.items() if isinstance(v, list | tuple)
                                           and not v]
    if empty:
        valid = sorted(map(str, names)) if isinstance(names, Mapping) else []
        example = f", e.g. {empty[0]}=[{valid[0]}] (valid names: {', '.join(valid)})" if valid else ""
        raise HarnessError(f"{empty[0]}=[] selects nothing, so nothing would run: list at least one{example}")


def constraints(cls: type, key: str) -> list[tuple[str, str]]:
    """(dotted key, rule) of every constrained field of ``cls`` and its nested settings (docs and tests)."""
    out = []
    hints = typing.get_type_hints(cls)
    for f in init_fields(cls).values():
        name, meta = f"{key}.{f.name}", f.metadata
        if meta.get("flat"):
            out += [c for tp in _dataclasses_in(hints[f.name]) for c in constraints(tp, key)]
            continue
        if meta.get("nonempty"):
            out.append((name, "not empty"))
        if meta.get("min") is not None:
            rule = f"> {meta['min']}" if meta.get("open") else f">= {meta['min']}"
            rule += f" and < {meta['below']}" if meta.get("below") is not None else ""
            out.append((name, rule + (f"; null: {meta['null']}" if meta.get("null") else "")))
        out += [c for tp in _dataclasses_in(hints[f.name]) for c in constraints(tp, name)]
    return out


def _dataclasses_in(tp: Any) -> list[type]:
    if dataclasses.is_dataclass(tp):
        return [tp]  # type: ignore[list-item]
    return [a for arg in get_args(tp) for a in _dataclasses_in(arg)]


def from_conf(cls: type[T], file: str, /, *, part: bool = False, **overrides: Any) -> T:
    """``cls`` from ``conf/<file>.yaml`` with ``overrides``; ``part``: only ``cls``'s keys of a larger file."""
    from omegaconf import OmegaConf

    import conf
    node = OmegaConf.load(Path(conf.__file__).parent / f"{file}.yaml")
    if part:
        data = {k: _plain(node[k]) for k in config_keys(cls) if k in node and k not in overrides}
    else:
        data = {k: v for k, v in OmegaConf.to_container(node, resolve=True).items() if k != "defaults"}
    return build(cls, {**data, **overrides}, f"conf/{file}.yaml")


def nodes_from_conf(file: str, *classes: type, **keys: Any) -> list[Any]:
    """``classes`` built from ``conf/<file>.yaml`` with flat task ``keys`` on top; an unknown key names the closest."""
    check_keys(keys, [k for cls in classes for k in config_keys(cls)], f"conf/{file}.yaml")
    return [from_conf(cls, file, part=True, **{k: v for k, v in keys.items() if k in config_keys(cls)})
            for cls in classes]


def _plain(data: Any) -> Any:
    """OmegaConf containers -> plain Python (resolved)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf
    return OmegaConf.to_container(data, resolve=True) if isinstance(data, DictConfig | ListConfig) else data


def _coerce(value: Any, tp: Any, where: str, key: str = "") -> Any:
    """``value`` as type ``tp`` (dataclasses, unions, containers, scalars, Any); ``key``: its dotted config key."""
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _coerce(value, arg, where, key)
            except HarnessError as exc:
                errors.append(str(exc))
        raise HarnessError(errors[0] if len(errors) == 1 else f"{where}: {value!r} has the wrong type")
    if dataclasses.is_dataclass(tp):
        return value if isinstance(value, tp) else build(tp, value, where, key)   # type: ignore[arg-type]
    if origin in (list, tuple):
        if not isinstance(value, list | tuple):
            raise HarnessError(f"{where} must be a list, got {value!r}")
        (inner, *_) = get_args(tp) or (Any,)
        items = [_coerce(v, inner, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise HarnessError(f"{where} must be a mapping, got {value!r}")
        _, inner = get_args(tp) or (str, Any)
        return {str(k): _coerce(v, inner, f"{where}.{k}") for k, v in value.items()}
    if tp is bool:
        if not isinstance(value, bool):
            raise HarnessError(f"{where} must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise HarnessError(f"{where} must be an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool):
            raise HarnessError(f"{where} must be a number, got {value!r}")
        try:
            return float(value)   # YAML reads 8e-5 (no dot) as a string
        except (TypeError, ValueError):
            raise HarnessError(f"{where} must be a number, got {value!r}") from None
    if tp is str:
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise HarnessError(f"{where} must be a string, got {value!r}")
        return str(value)
    return value
