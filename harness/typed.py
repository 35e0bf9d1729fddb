"""Typed settings from config mappings: unknown keys fail with the closest valid one, values are checked.

Why our own and not Hydra structured configs or pydantic: both reject unknown keys, but neither names the
closest valid key in a one-line message, and a typo such as ``ignore_identical_id`` must say what was meant.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin

from harness.errors import HarnessError, closest_first

T = TypeVar("T")


def choices(*values: Any, default: Any = dataclasses.MISSING, **kw: Any) -> Any:
    """A dataclass field restricted to ``values`` (checked by :func:`build`)."""
    return dataclasses.field(default=default, metadata={"choices": values}, **kw)


def unknown_key_error(key: str, valid: list[str], where: str) -> HarnessError:
    options = closest_first(key, valid)
    return HarnessError(
        f"unknown key {key!r} in {where}; did you mean {options[0]!r}? Valid keys: {', '.join(sorted(valid))}."
    )


def check_keys(data: Mapping[str, Any], valid: list[str], where: str) -> None:
    for key in data:
        if key not in valid:
            raise unknown_key_error(str(key), valid, where)


def build(cls: type[T], data: Mapping[str, Any] | None, where: str) -> T:
    """``cls(**data)`` for a dataclass ``cls``, recursively; unknown keys, missing keys and wrong types raise
    a :class:`HarnessError` naming ``where`` (e.g. ``model 'modernbert-base'``) and the key."""
    data = _plain(data) or {}
    if not isinstance(data, Mapping):
        raise HarnessError(f"{where} must be a mapping of keys to values, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    check_keys(data, list(fields), where)
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name, f in fields.items():
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise HarnessError(f"{where} needs the key {name!r}")
            continue
        value = _coerce(data[name], hints[name], f"{where}, {name}")
        allowed = f.metadata.get("choices")
        if allowed and value not in allowed:
            raise HarnessError(
                f"{where}, {name}={value!r} is not one of {', '.join(map(str, allowed))}"
                + (f" (closest: {closest_first(str(value), map(str, allowed))[0]})" if isinstance(value, str) else "")
            )
        kwargs[name] = value
    return cls(**kwargs)


def from_conf(cls: type[T], file: str, /, **overrides: Any) -> T:
    """``cls`` built from ``conf/<file>.yaml`` (the one place its defaults are written) with ``overrides`` on top:
    for code outside a composed config (benchmarks, tests), e.g. ``from_conf(PlaidSettings, "plaid/default")``."""
    from omegaconf import OmegaConf

    import conf

    node = OmegaConf.load(Path(conf.__file__).parent / f"{file}.yaml")
    data = {k: v for k, v in OmegaConf.to_container(node, resolve=True).items() if k != "defaults"}
    return build(cls, {**data, **overrides}, f"conf/{file}.yaml")


def _plain(data: Any) -> Any:
    """OmegaConf containers -> plain Python (resolved)."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf
    except ImportError:  # pragma: no cover
        return data
    if isinstance(data, DictConfig | ListConfig):
        return OmegaConf.to_container(data, resolve=True)
    return data


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """``value`` as type ``tp`` (dataclasses, Optional/unions, list/tuple/dict, str/int/float/bool, Any)."""
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
                return _coerce(value, arg, where)
            except HarnessError as exc:
                errors.append(str(exc))
        raise HarnessError(errors[0] if len(errors) == 1 else f"{where}: {value!r} has the wrong type")
    if dataclasses.is_dataclass(tp):
        return build(tp, value, where)
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
