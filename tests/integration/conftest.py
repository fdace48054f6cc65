"""Fixtures for tests against the real vLLM CPU server."""

from __future__ import annotations

from pathlib import Path

import pytest

from specmeter.demo import models_dir


@pytest.fixture(scope="session")
def models() -> Path:
    """The committed demo models (a missing models/ directory fails the tests, it never skips them)."""
    return models_dir()
