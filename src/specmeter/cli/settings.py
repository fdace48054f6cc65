"""Options made from the config models' fields: a field with a Flag (config/flags.py) is an option of every command
that takes its model, with the field's description as its help and the field's default shown. The command
receives the values given, as one dict of field names (`load={"warmup": 3}`), which the file-plus-flags merge lays
over the file's section (flags win, then the file, then the field's default), and the model validates; or, where no
file lies under them, the validated model itself. A setting is declared once, on its field: no command declares
an option of its own (tests/unit/cli/test_settings.py walks the tree)."""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from specmeter.cli.args import PRINTING
from specmeter.config import flag_text as parse
from specmeter.config.criteria import Criteria
from specmeter.config.files import build_model
from specmeter.config.flags import Flag, flagged
from specmeter.config.models import EngineSpec, LoadSpec
from specmeter.config.output import Printing
from specmeter.config.schedule import Schedule
from specmeter.config.workload import WorkloadSpec

Command = Callable[..., None]
M = TypeVar("M", bound=BaseModel)


def _bare(annotation: Any) -> Any:
    """A field's type without its Annotated metadata and without None; of text or a list (`str | list[str]`),
    the list."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, types.UnionType):
        options = [a for a in get_args(annotation) if a is not type(None)]
        annotation = next((a for a in options if get_origin(a) in (list, dict)), options[0])
    return annotation


def _option_type(annotation: Any, flag: Flag) -> Any:
    """The type the option parses the text into: text where the flag names its reader; a list or a dict (KEY=VALUE
    items) is a repeatable option of text; a choice of words (Literal) stays text, which the model refuses where it
    is none of them."""
    if flag.text is not None:
        return str
    annotation = _bare(annotation)
    if get_origin(annotation) in (list, dict):
        return list[str]
    if get_origin(annotation) is Literal:
        return str
    if annotation in (bool, int, float, str, Path):
        return annotation
    raise TypeError(f"a Flag on a field of type {annotation!r}: the command line has no form for it")


def _value(info: FieldInfo, flag: Flag, value: Any) -> Any:
    """The value as the field takes it: text as the flag's reader reads it; a dict's KEY=VALUE items as a dict;
    nothing given (an empty repeatable option) as None."""
    if flag.text is not None and isinstance(value, str):
        return flag.text(value, flag.name)
    if isinstance(value, list):
        if not value:
            return None
        if flag.items is not None:
            return flag.items(value, flag.name)
        field_type = _bare(info.annotation)
        if get_origin(field_type) is dict:  # text values, or any JSON value (numbers, true, lists)
            text = get_args(field_type)[1] is str
            return parse.pairs(value, flag.name) if text else parse.options(value, flag.name)
    return value


def _shown_default(info: FieldInfo, flag: Flag) -> str | bool:
    default = info.get_default(call_default_factory=True)
    if not flag.default_shown or not flag.negatable or default is None or default == [] or default == {}:
        return False
    if isinstance(default, bool):
        return "on" if default else "off"
    if isinstance(default, list) and flag.text is not None:  # in the comma form the flag's text takes
        return ",".join(map(str, default))
    return str(default)


def _parameter(prefix: str, name: str, info: FieldInfo, flag: Flag, default: Any) -> inspect.Parameter:
    kind = _option_type(info.annotation, flag)
    decls = [f"{flag.name}/{flag.negative}"] if kind is bool and flag.negatable else [flag.name]
    decls += [flag.short] if flag.short else []
    given = default is not None  # a command's own default: shown as typer shows any default
    bounds = {key: getattr(m, attr) for m in info.metadata for key, attr in (("min", "ge"), ("max", "le"))
              if flag.parse_bounds and hasattr(m, attr)}
    option = typer.Option(*decls, help=info.description, show_default=True if given else _shown_default(info, flag),
                          **bounds)
    return inspect.Parameter(f"{prefix}__{name}", inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[kind if given else kind | None, option])


def settings(model: type[BaseModel], into: str, *, only: Collection[str] | None = None,
             defaults: Mapping[str, Any] | None = None, validate: bool = False) -> Callable[[Command], Command]:
    """The command with an option per flagged field of `model` (those in `only`, where given), its parameter
    `into` receiving the values given by field name, or with `validate` the model they make (no file lies under
    them). `defaults`: the command's own default of a field, which it then always receives (the demo's workload
    size); the others are left out where not given."""
    fields = [(name, info, flag) for name, info, flag in flagged(model) if only is None or name in only]
    own = dict(defaults or {})

    def wrap(func: Command) -> Command:
        params = [p for p in inspect.signature(func, eval_str=True).parameters.values() if p.name != into]
        added = [_parameter(into, name, info, flag, own.get(name)) for name, info, flag in fields]

        @functools.wraps(func)
        def command(*args: Any, **kwargs: Any) -> None:
            given = {name: _value(info, flag, kwargs.pop(f"{into}__{name}", None)) for name, info, flag in fields}
            values = {k: v for k, v in given.items() if v is not None}
            func(*args, **kwargs, **{into: validated(model, values) if validate else values})

        keyword = [p for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
        positional = [p for p in params if p.kind is not inspect.Parameter.KEYWORD_ONLY]
        command.__signature__ = inspect.Signature([*positional, *added, *keyword])  # type: ignore[attr-defined]
        return command

    return wrap


# What every command that measures a plan takes, run and sweep alike (the last is the first in --help).
MEASURING = (("engine", EngineSpec), ("workload", WorkloadSpec), ("load", LoadSpec), ("schedule", Schedule))


def measuring(func: Command) -> Command:
    """The command with the settings of MEASURING, each arriving in the parameter of its name."""
    for into, model in MEASURING:
        func = settings(model, into)(func)
    return func


def validated(model: type[M], given: Mapping[str, Any]) -> M:
    """The settings of `model` given on the command line, over its defaults, validated (one line where not)."""
    return build_model(model, dict(given), "command line")


def decided_by(criteria: Mapping[str, Any], load: Mapping[str, Any]) -> Criteria:
    """The criteria given (recommend's, verify's, a sweep's --verify), with --slo, the load's bounds, as goodput's."""
    return validated(Criteria, {**criteria, "slo": load.get("slo")})


def speaking(func: Command, *, json: bool = True) -> Command:
    """The command with -q/--quiet and -v/--verbose, and with `json` --json too: the Terminal it makes
    (args.terminal) prints as they say."""

    @functools.wraps(func)
    def command(*args: Any, printing: Printing, **kwargs: Any) -> None:
        token = PRINTING.set(printing)
        try:
            func(*args, **kwargs)
        finally:
            PRINTING.reset(token)

    own = list(inspect.signature(func, eval_str=True).parameters.values())
    printed = inspect.Parameter("printing", inspect.Parameter.KEYWORD_ONLY, annotation=Printing)
    command.__signature__ = inspect.Signature([*own, printed])  # type: ignore[attr-defined]
    return settings(Printing, "printing", only=None if json else ("quiet", "verbose"), validate=True)(command)
