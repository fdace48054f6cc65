"""Ground truths on the second real engine: llama-server (built by scripts/setup-llamacpp.sh) serving the
demo pair, launched by specmeter from a SpecConfig exactly as `specmeter run --engine llamacpp` does."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from specmeter.config import EngineSpec, LoadSpec, SpecConfig, SpecMethod
from specmeter.data.sample import load_sample
from specmeter.data.selection import select
from specmeter.engines.gguf import server_binary
from specmeter.plans.run import run_plan
from specmeter.runner import Execution, execute
from specmeter.schemas.plan import WorkloadSelection
from specmeter.schemas.results import RunSummary
from specmeter.store import RunStore

pytestmark = pytest.mark.integration


def _engine(models: Path) -> EngineSpec:
    if server_binary() is None:  # the test command builds it: missing means the setup is broken, not optional
        pytest.fail("no llama-server: scripts/test.sh builds it with scripts/setup-llamacpp.sh")
    return EngineSpec(kind="llamacpp", model=str(models / "demo-target"), dtype="float32", max_model_len=1024,
                      max_num_seqs=4)


def _run(models: Path, spec: SpecConfig, load: LoadSpec, run_dir: Path, num_prompts: int,
         baseline: bool) -> RunSummary:
    convs = select(load_sample(), num_prompts=num_prompts, seed=0)
    plan = run_plan(_engine(models), spec, load, baseline=baseline, baseline_endpoint=None,
                    workload=WorkloadSelection(dataset="sample", conversation_ids=[c.id for c in convs]))
    summary = execute(Execution(plan=plan, conversations=convs), RunStore(run_dir))
    assert summary.status == "complete", summary.incomplete_reason
    for config in summary.configs:
        for point in config.points:
            assert point.latency.num_ok == point.latency.num_requests, point.latency.errors_by_kind
    return summary


@pytest.fixture(scope="module")
def self_draft(models: Path, tmp_path_factory: pytest.TempPathFactory) -> RunSummary:
    """Draft == target, greedy, one request at a time, against the same server with speculation off.

    One request at a time keeps the batch composition out of the numerics."""
    spec = SpecConfig(method=SpecMethod.draft_model, num_speculative_tokens=3, draft_model=str(models / "demo-target"))
    load = LoadSpec(concurrency=[1], max_tokens=48, temperature=0.0, warmup=1)
    return _run(models, spec, load, tmp_path_factory.mktemp("llamacpp-self"), num_prompts=8, baseline=True)


def test_self_draft_accepts_every_drafted_token_but_numeric_near_ties(self_draft: RunSummary) -> None:
    (point,) = self_draft.config("draft_model-k3").points  # type: ignore[union-attr]
    sd = point.sd
    assert sd.available and sd.reference == "counters"
    c = sd.counters
    assert c is not None and c.num_steps and c.num_steps > 0
    # The draft decodes one token at a time, the target verifies K + 1 in one batch: ggml's kernels sum in
    # another order there, and on this tiny model a near-tie flips now and then (seen: 1 step of 103 rejected
    # its first token, with or without the prompt cache). So "accepts everything" holds up to such flips:
    # rejections stay within one step in fifty, and every accepted token sits in a position the counts hold.
    rejected_steps = c.num_steps - c.accepted_per_pos[0]
    assert rejected_steps <= max(1, c.num_steps // 50), c
    assert c.acceptance_rate is not None and c.acceptance_rate >= 0.97
    assert sum(c.accepted_per_pos) == c.num_accepted_tokens
    assert c.accepted_per_pos == sorted(c.accepted_per_pos, reverse=True)


def test_counter_deltas_equal_the_per_request_sums(self_draft: RunSummary) -> None:
    (point,) = self_draft.config("draft_model-k3").points  # type: ignore[union-attr]
    sd = point.sd
    assert sd.agree is True, sd.agreement
    assert sd.per_request is not None and sd.per_request.num_steps is None  # llama.cpp counts no request steps
    assert sd.requests_with_stats == point.latency.num_ok
    assert "per-request AL and per-position rates" in sd.not_available


def test_greedy_outputs_equal_those_without_speculation(self_draft: RunSummary) -> None:
    (check,) = self_draft.analysis.lossless
    assert check.compared > 0 and check.matched == check.compared, check.mismatches
    (base,) = self_draft.config("baseline").points  # type: ignore[union-attr]
    assert not base.sd.available and not base.sd.stalled  # speculation off: nothing to report, nothing flagged


RATES = [0.8, 0.5, 0.2]


def test_synthetic_per_position_rates_are_measured_back(models: Path, tmp_path: Path) -> None:
    """`--spec-synth-rates` makes each step accept position i with the given unconditional probability."""
    spec = SpecConfig(method=SpecMethod.draft_model, num_speculative_tokens=len(RATES),
                      draft_model=str(models / "demo-draft"),
                      extra={"spec_synth_rates": ",".join(str(r) for r in RATES)})
    load = LoadSpec(concurrency=[2], max_tokens=128, temperature=0.0, warmup=1, ignore_eos=True)
    summary = _run(models, spec, load, tmp_path / "run", num_prompts=12, baseline=False)
    (point,) = summary.configs[0].points
    c = point.sd.counters
    assert c is not None and c.num_steps
    requests = point.latency.num_ok
    for i, (rate, measured) in enumerate(zip(RATES, c.per_position_rate, strict=True)):
        # Binomial sampling error over the steps, 4 standard errors; plus the last step of each request,
        # which may draft fewer positions (the steps that drafted position i are not reported).
        tolerance = 4 * math.sqrt(rate * (1 - rate) / c.num_steps) + requests / c.num_steps
        assert abs(measured - rate) <= tolerance, (i, measured, rate, tolerance)
