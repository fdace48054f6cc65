"""The demo EAGLE-3 head (models/demo-eagle3) on the real llama-server (`--spec-type draft-eagle3`), launched by
specmeter from a SpecConfig as `specmeter run --engine llamacpp` does: the head converted to GGUF against the
target, its drafts accepted, the server's counters equal to the per-request stats summed, and the outputs the
speculation-off baseline's at temperature 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from specmeter.config.models import EngineSpec, LoadSpec, SpecConfig, SpecMethod
from specmeter.data.sample import load_sample
from specmeter.data.selection import select
from specmeter.execution.runner import Execution, execute
from specmeter.plans.run import config_id, run_plan
from specmeter.rundir.store import RunStore
from specmeter.schemas.plan import WorkloadSelection
from specmeter.schemas.results import PointResult, RunSummary

K = 3
pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("llama_server")]


@pytest.fixture(scope="module")
def head(models: Path) -> SpecConfig:
    return SpecConfig(method=SpecMethod.eagle3, num_speculative_tokens=K, draft_model=str(models / "demo-eagle3"))


@pytest.fixture(scope="module")
def run(models: Path, head: SpecConfig, tmp_path_factory: pytest.TempPathFactory) -> tuple[RunSummary, Path]:
    """Six conversations, one request at a time (the batch composition stays out of the numerics), against the
    same server with speculation off."""
    engine = EngineSpec(kind="llamacpp", model=str(models / "demo-target"), dtype="float32", max_model_len=1024,
                        max_num_seqs=2)
    convs = select(load_sample(), num_prompts=6, seed=0)
    load = LoadSpec(concurrency=[1], max_tokens=40, temperature=0.0, warmup=1)
    plan = run_plan(engine, head, load, baseline=True, baseline_endpoint=None,
                    workload=WorkloadSelection(dataset="sample", conversation_ids=[c.id for c in convs]))
    run_dir = tmp_path_factory.mktemp("llamacpp-eagle3") / "run"
    summary = execute(Execution(plan=plan, conversations=convs), RunStore(run_dir))
    assert summary.status == "complete", summary.incomplete_reason
    return summary, run_dir


def _point(summary: RunSummary, head: SpecConfig) -> PointResult:
    result = summary.config(config_id(head))
    assert result is not None
    (point,) = result.points
    assert point.latency.num_ok == point.latency.num_requests > 0, point.latency.errors_by_kind
    return point


def test_the_head_drafts_and_its_drafts_are_accepted(run: tuple[RunSummary, Path], head: SpecConfig) -> None:
    sd = _point(run[0], head).sd
    assert sd.available and sd.reference == "counters"
    c = sd.counters
    assert c is not None and c.num_steps and c.num_steps > 0
    assert c.num_draft_tokens <= K * c.num_steps  # a step drafts at most K (fewer near the output cap)
    # A trained head: well past the one token a step emits with every draft rejected, never more than K + 1.
    al = c.acceptance_length
    assert al is not None and 1.5 < al <= K + 1, c
    assert sum(c.accepted_per_pos) == c.num_accepted_tokens
    assert c.accepted_per_pos == sorted(c.accepted_per_pos, reverse=True)


def test_counter_deltas_equal_the_per_request_sums(run: tuple[RunSummary, Path], head: SpecConfig) -> None:
    point = _point(run[0], head)
    sd = point.sd
    assert sd.agree is True, sd.agreement
    assert sd.counters is not None and sd.per_request is not None
    assert sd.per_request.num_steps is None  # llama.cpp counts no steps per request
    assert sd.per_request.num_draft_tokens == sd.counters.num_draft_tokens
    assert sd.per_request.num_accepted_tokens == sd.counters.num_accepted_tokens
    assert sd.requests_with_stats == point.latency.num_ok


def test_greedy_outputs_equal_those_without_speculation(run: tuple[RunSummary, Path], head: SpecConfig) -> None:
    summary, run_dir = run
    (check,) = summary.analysis.lossless
    assert check.config_id == config_id(head)
    measured = [r for r in RunStore(run_dir).read_records() if r.config_id == check.config_id and not r.warmup]
    assert check.compared == len(measured) > 0 and all(r.ok for r in measured)
    # The target verifies K + 1 tokens in one batch where the baseline decodes one: ggml sums in another order
    # there, and on this tiny float32 model a near-tie flips now and then (a mismatch was seen here in one run of
    # several). A head drafting wrong tokens into the output would break most replies, and at their start; so
    # every reply but at most one matches, and a mismatch starts past the reply's first token.
    assert check.matched >= check.compared - 1, check.mismatches
    assert all(m.first_diff > 0 for m in check.mismatches), check.mismatches
