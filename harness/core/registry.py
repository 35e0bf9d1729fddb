"""One registry type for every "name -> implementation" table (runners, data kinds, selection rules, stages, ...):
the same lookup, closest-name error and conflict rule, and lazy imports where the table names code."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, Generic, TypeVar

from harness.core.errors import HarnessError, unknown_name

T = TypeVar("T")


class Registry(MutableMapping[str, T], Generic[T]):
    """``name -> T`` (``lazy``: a value may be a ``"module[:attr]"`` string imported on first lookup)."""

    def __init__(self, what: str, entries: Mapping[str, T | str] | None = None, *, hint: str = "",
                 lazy: bool = False) -> None:
        self.what, self.hint, self.lazy = what, hint, lazy
        self._targets: dict[str, T | str] = dict(entries or {})
        self._loaded: dict[str, T] = {}

    def __getitem__(self, name: str) -> T:
        target = self._targets[name]
        if not (self.lazy and isinstance(target, str)):
            return target  # type: ignore[return-value]
        if name not in self._loaded:
            self._loaded[name] = load_target(target)
        return self._loaded[name]

    def __setitem__(self, name: str, target: T | str) -> None:
        self._targets[name] = target
        self._loaded.pop(name, None)

    def __delitem__(self, name: str) -> None:
        del self._targets[name]
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._targets)

    def __len__(self) -> int:
        return len(self._targets)

    def lookup(self, name: str, hint: str | None = None) -> T:
        """``self[name]``; an unknown name is a :class:`HarnessError` naming the valid ones, closest first."""
        if name not in self._targets:
            raise unknown_name(self.what, name, self._targets, self.hint if hint is None else hint)
        return self[name]

    def target(self, name: str) -> T | str:
        """What ``name`` was registered as (a lazy entry's ``"module:attr"``, unimported)."""
        return self._targets[name]

    def register(self, name: str, target: T | str) -> None:
        """Add ``name``; registering it again with another target is an error (no plugin silently shadows another)."""
        key = _key(target)
        if name in self._targets and _key(self._targets[name]) != key:
            raise HarnessError(f"{self.what} {name!r} is already registered as {_key(self._targets[name])}")
        self._targets[name] = target

    def replaced(self, **entries: T) -> Registry[T]:
        """A copy with ``entries`` put in place (e.g. a stage at another version, in a test)."""
        out: Registry[T] = Registry(self.what, {**self._targets, **entries}, hint=self.hint, lazy=self.lazy)
        out._loaded = {k: v for k, v in self._loaded.items() if k not in entries}
        return out


def load_target(target: str) -> Any:
    """The object ``"package.module[:attr]"`` names, imported now (the module itself without ``:attr``)."""
    module, _, attr = target.partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, attr) if attr else loaded


def _key(target: object) -> str:
    if isinstance(target, str):
        return target
    module, name = getattr(target, "__module__", None), getattr(target, "__qualname__", None)
    return f"{module}:{name}" if module and name else repr(target)
