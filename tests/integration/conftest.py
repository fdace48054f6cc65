"""Fixtures for tests against the real vLLM CPU server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from vllm_helpers import ServerPool

from specmeter.engines.gguf import server_binary
from specmeter.plans.demo import models_dir

# The order the modules run in. The e2e demo first: it starts four servers of its own (two instances of two
# configurations, the demo's KV cache each), before the session's pool holds any. Then the vLLM modules: the pool
# holds at most four servers on a 24 GiB machine and stops the least recently used to start another, so modules
# that share servers run next to each other and every configuration starts once (12 starts, one a configuration,
# simulated over each module's pool.get calls; alphabetical order started 17 in a CI run, each about a minute on 2
# cores). A new module goes beside the modules that use its servers. Those that wait for the installs still run
# last whatever their place here (tests/conftest.py sorts them after this order), test_suffix_vllm among them.
MODULE_ORDER = [
    "test_demo_cli", "test_eagle3", "test_eagle3_plan_check", "test_mtp", "test_drafter_sweep", "test_sweep",
    "test_demo_pair",
    "test_recommend_verify", "test_attach_flow", "test_speculation_off", "test_input_len_sweep",
    "test_trace_replay_vllm", "test_vocab",
    "test_verify_corrects", "test_replicas_vllm", "test_draft_equals_target", "test_kill_resume", "test_suffix_vllm",
]


@pytest.hookimpl(tryfirst=True)  # before tests/conftest.py's stable sort puts the installs' modules last
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(MODULE_ORDER)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))


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
