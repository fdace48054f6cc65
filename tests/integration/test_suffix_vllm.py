"""vLLM's suffix decoding on the real engine, beside the speculation-off baseline: its drafts are accepted, the
engine's counters equal the per-request stats summed, the outputs are the baseline's token for token at
temperature 0, and a request sent again is drafted as the first time (its cache of past responses is off).

Its package (arctic-inference) is scripts/setup-suffix.sh's, in the venv that runs the tests; the servers inherit
the tests' environment, so a package elsewhere is found through PYTHONPATH set for the test run."""

from __future__ import annotations

from pathlib import Path

import pytest
from vllm_helpers import ServerPool

from specmeter.config.models import EngineSpec, LoadSpec, SpecConfig, SpecMethod
from specmeter.data.sample import load_sample
from specmeter.data.selection import select
from specmeter.engines.preflight import check_local_models
from specmeter.engines.vllm import VLLMStats
from specmeter.execution.runner import Execution, execute
from specmeter.plans.demo import demo_engine
from specmeter.plans.run import config_id, run_plan
from specmeter.rundir.store import RunStore
from specmeter.schemas.plan import WorkloadSelection
from specmeter.schemas.results import RunSummary

K = 4
pytestmark = pytest.mark.integration
SUFFIX = SpecConfig(method=SpecMethod.suffix, num_speculative_tokens=K)


@pytest.fixture(scope="module")
def run(installed: None, pool: ServerPool, tmp_path_factory: pytest.TempPathFactory) -> tuple[RunSummary, Path]:
    """Six conversations (later turns carry the replies to earlier ones, which suffix decoding drafts from) at one
    stream and at three, each against the baseline server on the same requests."""
    check_local_models(demo_engine(), SUFFIX)  # the package, where the servers will look for it
    convs = select(load_sample(), num_prompts=6, seed=0)
    load = LoadSpec(concurrency=[1, 3], max_tokens=96, temperature=0.0, warmup=1)
    plan = run_plan(EngineSpec(endpoint=pool.get(SUFFIX).base_url), SUFFIX, load, baseline=True,
                    baseline_endpoint=pool.get(SpecConfig()).base_url,
                    workload=WorkloadSelection(dataset="sample", conversation_ids=[c.id for c in convs]))
    run_dir = tmp_path_factory.mktemp("suffix") / "run"
    try:
        return execute(Execution(plan=plan, conversations=convs), RunStore(run_dir)), run_dir
    finally:
        pool.stop(SUFFIX)  # its own server: the session's memory stays in bounds


def test_drafts_are_accepted_and_counted_alike(run: tuple[RunSummary, Path]) -> None:
    summary, _ = run
    result = summary.config(config_id(SUFFIX))
    assert result is not None and len(result.points) == 2
    for level in result.points:
        assert level.latency.num_ok == level.latency.num_requests > 0
        sd = level.sd
        assert sd.counters is not None and sd.per_request is not None
        assert sd.agree is True, sd.agreement
        assert sd.per_request.num_steps == sd.counters.num_steps > 0
        assert sd.per_request.num_draft_tokens == sd.counters.num_draft_tokens
        assert sd.per_request.num_accepted_tokens == sd.counters.num_accepted_tokens > 0
        # The counters have a slot per position up to K; the requests' steps reach as far as their longest draft.
        assert _trimmed(sd.per_request.accepted_per_pos) == _trimmed(sd.counters.accepted_per_pos)
        # Suffix decoding drafts only where the text so far matches a suffix it has seen: up to K per step.
        assert sd.counters.num_draft_tokens <= K * sd.counters.num_steps
        al = sd.counters.acceptance_length
        assert al is not None and 1.0 < al <= K + 1


def _trimmed(counts: list[int]) -> list[int]:
    """`counts` without its trailing zeros."""
    end = len(counts)
    while end and counts[end - 1] == 0:
        end -= 1
    return counts[:end]


def test_outputs_equal_the_baselines(run: tuple[RunSummary, Path]) -> None:
    summary, run_dir = run
    (check,) = summary.analysis.lossless
    assert check.config_id == config_id(SUFFIX) and check.basis == "token ids"
    measured = [r for r in RunStore(run_dir).read_records() if r.config_id == check.config_id and not r.warmup]
    assert check.compared == len(measured) > 0 and all(r.ok for r in measured)  # every request, at both points
    assert check.matched == check.compared, check.mismatches


def test_a_request_sent_again_drafts_as_the_first_time(run: tuple[RunSummary, Path]) -> None:
    """The same request at the warm-up and at both points: where its output is the same, so are its drafts, since
    specmeter launched suffix decoding without its cache of past responses (with it, every resend would draft from
    the answer it gave before)."""
    _, run_dir = run
    drafts: dict[tuple[str, int, tuple[int, ...]], list[tuple[int, int, int]]] = {}
    for r in RunStore(run_dir).read_records():
        if r.config_id != config_id(SUFFIX) or r.final_payload is None or r.output_token_ids is None:
            continue
        sd, _ = VLLMStats().sd_from_response(r.final_payload)
        assert sd is not None
        key = (r.conversation_id, r.turn, tuple(r.output_token_ids))
        drafts.setdefault(key, []).append((sd.num_steps, sd.num_draft_tokens, sd.num_accepted_tokens))
    assert any(len(sends) > 1 for sends in drafts.values())
    assert all(len(set(sends)) == 1 for sends in drafts.values()), drafts
