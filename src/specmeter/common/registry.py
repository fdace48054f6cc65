"""One shape for every registry of named kinds (engines, load kinds, datasets, outputs): a name maps to its thing,
given as the thing itself or as "module:attribute", imported the first time it is asked for, so naming one kind
loads only its module (a console report never imports matplotlib; an engine's module loads with that engine)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar, cast

from specmeter.common.errors import InputError

T = TypeVar("T")


class Registry(Generic[T]):
    """Names of one kind of thing (`what`, as a refusal names it) to the things, in the order given."""

    def __init__(self, what: str, entries: Mapping[str, T | str]) -> None:
        self.what = what
        self._entries = dict(entries)
        self._loaded: dict[str, T] = {}

    def names(self) -> list[str]:
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def items(self) -> list[tuple[str, T]]:
        """Every name with its thing (importing every lazy one)."""
        return [(name, self.get(name)) for name in self._entries]

    def values(self) -> list[T]:
        return [thing for _name, thing in self.items()]

    def get(self, name: str) -> T:
        """The thing registered as `name`; an InputError naming the registered ones where there is none."""
        if name not in self._loaded:
            if name not in self._entries:
                raise InputError(f"unknown {self.what} {name!r}; choose one of: {', '.join(self._entries)}")
            entry = self._entries[name]
            if isinstance(entry, str):
                module, _sep, attribute = entry.partition(":")
                entry = cast(T, getattr(importlib.import_module(module), attribute))
            self._loaded[name] = entry
        return self._loaded[name]
