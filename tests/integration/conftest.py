"""Fixtures for tests against the real vLLM CPU server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from vllm_helpers import ServerPool

from specmeter.engines.gguf import server_binary
from specmeter.plans.demo import models_dir


@pytest.fixture(scope="session")
def models() -> Path:
    """The committed demo models (a missing models/ directory fails the tests, it never skips them)."""
    return models_dir()


@pytest.fixture(scope="session")
def llama_server(installed: None) -> Path:
    """The llama-server binary the llama.cpp tests launch (modules that need it use this fixture)."""
    binary = server_binary()
    if binary is None:  # the test command builds it: missing means the setup is broken, not optional
        pytest.fail("no llama-server: scripts/test.sh builds it with scripts/setup-llamacpp.sh")
    return binary


@pytest.fixture(scope="session")
def pool(models: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    """Real servers shared by the whole session (see vllm_helpers.ServerPool)."""
    servers = ServerPool(tmp_path_factory.mktemp("servers"))
    yield servers
    servers.stop_all()
