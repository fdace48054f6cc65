"""How an engine's settings follow from EngineSpec and SpecConfig: one declarative table per engine, one mechanism.

An engine declares rows; `settings` reads them against a spec into (name, value) pairs, in table order; `argv`
writes pairs as command-line flags and `dict(pairs)` as a config object (vLLM's JSON, TensorRT-LLM's YAML), where
a later pair of the same name replaces the earlier one in its place (so `extra` overrides what a row chose).

- `Flag(name, source, write, when)`: the setting `name` from a field or property of the spec (or a small named
  function of the whole spec), written by `write` (as is by default), only where `when` holds;
- `Each(source, name, when)`: a mapping whose every key is a setting of its own (`extra`), the key turned into a
  name by `name`;
- `Unsupported(source, reason, when)`: a field the engine cannot honour; set, it is refused with `reason` before
  any server starts.

A value that is None, False, "" or empty is unset: its row writes nothing. In argv, True is a bare flag.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from specmeter.common.errors import InputError

S = TypeVar("S", bound=BaseModel)

Source = str | Callable[[S], Any]  # a field or property name, or a function of the whole spec
Setting = tuple[str, Any]


def as_is(value: Any) -> Any:
    """The value itself (an enum as its value)."""
    return value.value if isinstance(value, Enum) else value


def fixed(value: Any) -> Callable[[Any], Any]:
    """A source that is always `value` (a flag every launch carries)."""
    return lambda _spec: value


def dashed(key: str) -> str:
    """`some_option` -> `--some-option`: an `extra` key as a command-line flag."""
    return "--" + key.replace("_", "-")


def rows(value: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """A table of rows (tuples in the spec) as lists, the shape JSON and YAML write."""
    return [list(r) for r in value]


@dataclass(frozen=True)
class Flag(Generic[S]):
    name: str
    source: Source[S]
    write: Callable[[Any], Any] = as_is
    when: Callable[[S], bool] | None = None


@dataclass(frozen=True)
class Each(Generic[S]):
    source: Source[S]
    name: Callable[[str], str] = str
    when: Callable[[S], bool] | None = None


@dataclass(frozen=True)
class Unsupported(Generic[S]):
    source: Source[S]
    reason: str | Callable[[S], str]
    when: Callable[[S], bool] | None = None


Row = Flag[S] | Each[S] | Unsupported[S]


def _read(source: Source[S], spec: S) -> Any:
    return getattr(spec, source) if isinstance(source, str) else source(spec)


def _unset(value: Any) -> bool:
    return value is None or value is False or (isinstance(value, (str, list, tuple, dict)) and not value)


def settings(table: Iterable[Row[S]], spec: S) -> list[Setting]:
    """The (name, value) pairs `table` gives for `spec`, in table order; an InputError for an unsupported field."""
    out: list[Setting] = []
    for row in table:
        if row.when is not None and not row.when(spec):
            continue
        value = _read(row.source, spec)
        if _unset(value):
            continue
        if isinstance(row, Unsupported):
            raise InputError(row.reason if isinstance(row.reason, str) else row.reason(spec))
        if isinstance(row, Each):
            out += [(row.name(key), v) for key, v in value.items()]
        else:
            out.append((row.name, row.write(value)))
    return out


def argv(pairs: Iterable[Setting]) -> list[str]:
    """Pairs as command-line items: True is a bare flag, anything else the flag and its value as text."""
    return [item for name, value in pairs for item in ([name] if value is True else [name, str(value)])]


def overridden(pairs: Iterable[Setting]) -> list[Setting]:
    """Pairs where a later one of the same name replaces the earlier in its place, and False or None drops it
    (for an engine whose `extra` overrides the flags its table chose)."""
    merged: dict[str, Any] = {}
    for name, value in pairs:
        if value is False or value is None:
            merged.pop(name, None)
        else:
            merged[name] = value
    return list(merged.items())
