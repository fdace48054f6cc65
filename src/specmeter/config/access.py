"""The API key a command sends to the servers it measures: the one given, else the environment's. It is never part
of a plan, a file or a run directory."""

from __future__ import annotations

import os
from typing import Annotated, Any

from pydantic import Field, field_validator

from specmeter.config.flags import Flag
from specmeter.config.points import StrictModel

API_KEY_ENV = ("SPECMETER_API_KEY", "OPENAI_API_KEY")


class Access(StrictModel):
    """How a command authenticates to the servers (run, sweep, verify, resume, a Slurm job)."""

    # default_shown=False: the default is the environment's key, which --help must not print.
    api_key: Annotated[str | None, Flag("--api-key", default_shown=False)] = Field(
        default=None, validate_default=True, repr=False,
        description=f"API key (else ${API_KEY_ENV[0]} or ${API_KEY_ENV[1]}); never written anywhere.")

    @field_validator("api_key")
    @classmethod
    def _else_the_environments(cls, value: Any) -> Any:
        return value or next((os.environ[name] for name in API_KEY_ENV if os.environ.get(name)), None)
