"""Fixtures of the unit tests: fake engines, one per personality, each fresh for one test and checked for
problems of its own after it (a fake that misbehaved makes the test fail, whatever specmeter did)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fakeengine.llamacpp import LlamaCpp
from fakeengine.server import FakeEngine
from fakeengine.sglang import SGLang
from fakeengine.trtllm import TensorRTLLM


def _serve(server: FakeEngine) -> Iterator[FakeEngine]:
    with server:
        yield server
    assert not server.problems, f"the fake engine itself misbehaved: {server.problems}"


@pytest.fixture
def fake_engine() -> Iterator[FakeEngine]:
    """A vLLM-shaped fake engine with the defaults, for faults set by the test."""
    yield from _serve(FakeEngine())


@pytest.fixture
def fake_baseline() -> Iterator[FakeEngine]:
    """A vLLM-shaped fake engine without a speculative config: the speculation-off twin of `fake_engine`."""
    yield from _serve(FakeEngine(speculative=False))


@pytest.fixture
def fake_sglang() -> Iterator[FakeEngine]:
    """An SGLang-shaped fake engine, a few ms per step."""
    yield from _serve(FakeEngine(SGLang(), model="fake/sglang-target", step_s=0.002))


@pytest.fixture
def fake_trtllm() -> Iterator[FakeEngine]:
    """A trtllm-serve-shaped fake engine (a build with every counter), a few ms per step."""
    yield from _serve(FakeEngine(TensorRTLLM(), model="fake/trtllm-target", step_s=0.002))


@pytest.fixture
def fake_llamacpp() -> Iterator[FakeEngine]:
    """A llama-server-shaped fake engine."""
    yield from _serve(FakeEngine(LlamaCpp(), model="fake/llamacpp-target"))
