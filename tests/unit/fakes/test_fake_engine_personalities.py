"""Self-tests of the fake engine's personalities (tests/fakeengine): each is taken for its engine by
specmeter's own detection, and a whole attach-mode run against the llama.cpp one reads what llama-server
shows. (The SGLang and TensorRT-LLM runs are in test_sglang_adapter.py and test_trtllm_adapter.py, the vLLM
ones in the test_faults_* files.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from fakeengine.drive import attach_execution, only_config, run_plan
from fakeengine.llamacpp import LlamaCpp
from fakeengine.personality import Personality
from fakeengine.server import FakeEngine
from fakeengine.sglang import SGLang
from fakeengine.trtllm import TensorRTLLM
from fakeengine.vllm import VLLM
from specmeter.engines.llamacpp import LlamaCppStats
from specmeter.engines.probe import probe
from specmeter.engines.registry import detect_engine

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("personality", [VLLM(), SGLang(), TensorRTLLM(), LlamaCpp()], ids=lambda p: p.name)
def test_each_personality_is_detected_as_its_engine(personality: Personality) -> None:
    with FakeEngine(personality) as server:
        assert detect_engine(probe(server.url)) == personality.name
    assert not server.problems, server.problems


def test_two_engine_replicas_need_an_engine_that_shows_them() -> None:
    with pytest.raises(TypeError, match="num_engines must be 1"):
        FakeEngine(SGLang(), num_engines=2)


@pytest.mark.parametrize("kind", ["llamacpp", None], ids=["given", "detected"])
@pytest.mark.parametrize("api", ["chat", "completions"])
def test_a_run_against_llamacpp_reads_its_counters_and_per_request_drafts(
        fake_llamacpp: FakeEngine, tmp_path: Path, kind: str | None, api: str) -> None:
    summary, error, reporter = run_plan(attach_execution(fake_llamacpp.url, kind, api, "llamacpp-fake"),
                                        tmp_path / "run")
    assert error is None, repr(error)
    point = only_config(summary).points[0]
    truth = fake_llamacpp.true_totals
    assert point.latency.num_ok == truth.requests == len(fake_llamacpp.completion_requests()) > 0
    # one token per chunk, as llama-server streams: every output token came in a chunk of its own
    records = [r for r in reporter.records if r.ok]
    assert records and all(len(r.chunk_offsets_s) == r.output_tokens for r in records)
    sd = point.sd
    assert sd.available and sd.reference == "counters", sd
    counters = sd.counters
    assert counters is not None
    assert (counters.num_steps, counters.num_draft_tokens, counters.num_accepted_tokens) == (
        truth.steps, truth.drafted, truth.accepted)
    assert counters.accepted_per_pos == truth.accepted_per_pos
    # per request: drafted and accepted tokens only (no step count), summed equal to the counters
    assert sd.requests_with_stats == truth.requests
    assert sd.per_request is not None and sd.per_request.num_steps is None
    assert (sd.per_request.num_draft_tokens, sd.per_request.num_accepted_tokens) == (truth.drafted, truth.accepted)
    assert sd.agree is True, sd.agreement
    assert set(sd.not_available) == set(LlamaCppStats().unavailable)
