"""Errors that reach the user as one clear line: what is wrong, where, and the fix."""

from __future__ import annotations


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
