"""What is installed in this environment: a distribution's version (engines name themselves by it, runs record it)."""

from __future__ import annotations

import importlib.metadata
import importlib.util


def installed_version(dist: str) -> str | None:
    """The installed version of distribution `dist`, None when it is not installed."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def module_available(name: str) -> bool:
    """Whether module `name` can be imported here (without importing it)."""
    return importlib.util.find_spec(name) is not None
