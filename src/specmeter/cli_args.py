"""What every command of the command line reads the same way: a flag's parsed value, the API key, the command
line as a run directory records it. Beside the cli modules, below them all, so each can use it."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TypeVar

from specmeter.errors import InputError
from specmeter.redact import redact_argv

API_KEY_ENV = ("SPECMETER_API_KEY", "OPENAI_API_KEY")
V = TypeVar("V")
T = TypeVar("T")


def flag(parse: Callable[[V], T], value: V | None) -> T | None:
    """A flag's value parsed (None where it was not given); a malformed one is the one-line input error."""
    if not value:
        return None
    try:
        return parse(value)
    except ValueError as exc:
        raise InputError(str(exc)) from None


def command_line() -> list[str]:
    """The command line as the run directory records it (secrets masked)."""
    return ["specmeter", *redact_argv(sys.argv[1:])]


def find_api_key(given: str | None) -> str | None:
    """The --api-key given, else the first of API_KEY_ENV set."""
    if given:
        return given
    for name in API_KEY_ENV:
        if os.environ.get(name):
            return os.environ[name]
    return None
