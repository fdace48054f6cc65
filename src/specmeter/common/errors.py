"""Errors that reach the user as one clear line: what is wrong, where, and the fix."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any, cast, get_args

if TYPE_CHECKING:  # pydantic only for the types: this module stays light to import
    from pydantic import BaseModel, ValidationError
    from pydantic_core import ErrorDetails


class SpecmeterError(Exception):
    """Base class: the CLI prints str(error) on one line and exits non-zero."""

    exit_code: int = 2


class InputError(SpecmeterError):
    """Bad user input (dataset row, config key, flag value). Raised before any server starts."""


class EngineError(SpecmeterError):
    """The engine failed to start, died, or answered something we cannot trust."""

    exit_code = 3


class RunIncomplete(SpecmeterError):
    """A run stopped before all requests finished; what finished is on disk."""

    exit_code = 4


class EngineDied(EngineError):
    """A launched server died while requests were in flight; what finished is on disk."""


class ErrorRateExceeded(SpecmeterError):
    """More requests failed than the run allows; the error-rate stop condition (load/stops.py) stops the point."""

    def __init__(self, errors: int, finished: int, limit: float, last_error: str | None) -> None:
        super().__init__(
            f"{errors} of {finished} requests failed (limit {limit:.0%}); last error: {last_error}; "
            "check the server log, or raise --max-error-rate to keep going"
        )


class StreamError(Exception):
    """One response stream went wrong; the client turns it into an error kind on the request record
    and never lets it out of `send`."""

    def __init__(self, kind: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


class SourceUnavailable(Exception):
    """data prepare: a whole source cannot be loaded (gated, offline, missing): skip its other rows."""


class RowNotFillable(Exception):
    """data prepare: this one row cannot be rebuilt (key not found, template mismatch, config not supported)."""


class RegressionFound(SpecmeterError):
    """`specmeter check`: acceptance or speedup dropped by more than its bound, with confidence. Its own exit code,
    so CI tells a regression from bad input (2) or a failed run (3, 4)."""

    exit_code = 5


# Pydantic's error types, in the user's words: what form the value should take, with an example.
_EXPECTED = {
    "int_type": "a whole number, e.g. 4", "int_parsing": "a whole number, e.g. 4",
    "int_from_float": "a whole number, e.g. 4",
    "float_type": "a number, e.g. 0.5", "float_parsing": "a number, e.g. 0.5",
    "bool_type": "true or false", "bool_parsing": "true or false",
    "string_type": "text, e.g. \"name\"",
    "list_type": "a list, e.g. [1, 4]", "tuple_type": "a list, e.g. [1, 4]",
    "dict_type": "a mapping of keys to values, e.g. {key: value}",
    "model_type": "a mapping of keys to values", "model_attributes_type": "a mapping of keys to values",
}
NESTED = "key '"  # how a nested model's one line starts, so an outer one extends its key path
_BOUNDS = {"greater_than_equal": ("ge", ">="), "greater_than": ("gt", ">"), "less_than_equal": ("le", "<="),
           "less_than": ("lt", "<")}


def validation_message(exc: ValidationError, where: str, model: type[BaseModel] | None = None,
                       skip: Collection[str] = (), under: str = "") -> str:
    """The one line a pydantic error becomes everywhere: `where`, the key path, what was given, and the fix.
    An unknown key comes first (it usually explains the missing one beside it), with the closest valid key when
    `model` is the class validated; `skip` names location parts that are not keys (a union's tags); `under` is
    the key path of the validated mapping inside a larger one."""
    errors = exc.errors()
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return (f"{where}: " if where else "") + _one_error(err, model, skip, under) + more


def _one_error(err: ErrorDetails, model: type[BaseModel] | None, skip: Collection[str], under: str) -> str:
    loc = [p for p in err.get("loc", ()) if p != "__root__"]
    keys = [str(p) for i, p in enumerate(loc) if not (p in skip and i > 0 and isinstance(loc[i - 1], int))]
    path = ".".join([under, *keys] if under else keys)
    kind = err["type"]
    given = _shown(err.get("input"))
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden":
        valid = _keys_at(model, loc[:-1]) if model is not None else []
        close = difflib.get_close_matches(str(loc[-1]), valid, n=1)
        fix = f"did you mean {close[0]!r}?" if close else (f"valid keys: {', '.join(valid)}" if valid else
                                                            "remove it or check the spelling")
        return f"unknown key {path!r}; {fix}"
    at = f"key {path!r}: " if path else ""
    if kind == "missing":
        return f"{at}required key missing; add it"
    if kind in _BOUNDS:
        name, sign = _BOUNDS[kind]
        return f"{at}must be {sign} {ctx.get(name)}, got {given}"
    if kind in _EXPECTED:
        expected = _EXPECTED[kind]
        keys = _keys_at(model, loc) if model is not None and kind.startswith("model") else []
        if keys:
            expected += f" ({', '.join(keys)}), e.g. {{{keys[0]}: ...}}"
        return f"{at}expected {expected}; got {given}"
    if kind in ("literal_error", "enum"):
        return f"{at}expected {ctx.get('expected', 'one of the listed values')}; got {given}"
    msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    if path and msg.startswith(NESTED):  # a nested model's own one line: one key path from the top
        return f"key '{path}.{msg.removeprefix(NESTED)}"
    return f"{at}{msg}"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _keys_at(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """The keys the model nested at `loc` takes ([] where the path leaves the models)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        fields = getattr(current, "model_fields", None)
        if fields is None or part not in fields:
            return []
        current = _model_in(fields[part].annotation)
    fields = getattr(current, "model_fields", None)
    return [] if fields is None else [f.alias or name for name, f in fields.items()]


def _model_in(annotation: Any) -> Any:
    """The model class inside an annotation such as `list[Model] | None` (None if there is none)."""
    if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def stored_file_message(path: object, exc: ValueError, what: str, fix: str,
                        model: type[BaseModel] | None = None) -> str:
    """A stored JSON file that does not read: cut short or not JSON (at which line), else which key is wrong
    (through `validation_message`); `fix` says what to do about it."""
    errors = exc.errors() if hasattr(exc, "errors") else []
    if errors and errors[0]["type"] == "json_invalid":
        detail = str((errors[0].get("ctx") or {}).get("error", errors[0]["msg"]))
        return f"{path}: cut short or not valid JSON ({detail}); {fix}"
    if hasattr(exc, "lineno"):  # json.JSONDecodeError
        return f"{path}: cut short or not valid JSON ({getattr(exc, 'msg', exc)} at line {exc.lineno}); {fix}"
    if errors:
        return f"{validation_message(cast('ValidationError', exc), f'{path}: not {what}', model)}; {fix}"
    return f"{path}: not {what} ({exc}); {fix}"
