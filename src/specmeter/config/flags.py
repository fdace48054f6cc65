"""A setting's command-line form, declared on its model field: `Annotated[int, Flag("--warmup")] = Field(default=2,
ge=0, description=...)`. The field holds everything else about the setting (its file key is the field's name; its
help, the description; its default and bounds, pydantic's), so adding a setting is one field: the command line
(cli/settings.py) makes the option from it, and validation, the file form and the docs' reference follow."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo


@dataclass(frozen=True)
class Flag:
    """The option that sets a field from the command line. A flag of a bool field also has its --no- form (unless
    not `negatable`); one of a list or dict field is repeatable (a dict's items given as KEY=VALUE)."""

    name: str  # e.g. "--duration" for duration_s
    short: str | None = None  # its one-letter form, e.g. "-k"
    # A bool field's --no- form, which sets it off over a file's on; False: a switch that is off unless given
    # (--json, -q), with no --no- form and no default shown.
    negatable: bool = True
    # The reader of the flag's text into the value a file gives the field (config/flag_text.py: `1,4,16` as
    # [1, 4, 16]), called with the text and the flag's name, which its one-line refusal names; None: the field
    # takes the option's value as typer parsed it.
    text: Callable[[str, str], Any] | None = None
    # The reader of a repeatable flag's items into the field's value, called with the items and the flag's name;
    # None: a dict field's items are KEY=VALUE pairs.
    items: Callable[[list[str], str], Any] | None = None
    default_shown: bool = True  # False where the commands default differently and the help says how
    # The field's bounds (ge, le) checked as the command line parses the value, in its own words, where a command
    # takes the setting without validating a model of it (the demo's and verify's --repeats).
    parse_bounds: bool = False

    @property
    def negative(self) -> str:
        return "--no-" + self.name.removeprefix("--")


def flagged(model: type[BaseModel]) -> Iterator[tuple[str, FieldInfo, Flag]]:
    """The model's fields that a command line sets, in declaration order, then those of the shorthand its section
    also takes (a model's `SHORTHAND`: keys its validation folds into its fields, as a load's concurrency into its
    points): (field name, field, its flag)."""
    shorthand: type[BaseModel] | None = getattr(model, "SHORTHAND", None)
    for part in (model, shorthand) if shorthand is not None else (model,):
        for name, info in part.model_fields.items():
            flag = next((m for m in info.metadata if isinstance(m, Flag)), None)
            if flag is not None:
                yield name, info, flag
