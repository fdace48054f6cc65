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
