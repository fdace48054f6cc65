"""The demo EAGLE-3 head (models/demo-eagle3) on the real engine, beside the speculation-off baseline: the
engine's counters equal the per-request stats summed, the outputs are the baseline's token for token at
temperature 0, and the head's own draft vocabulary bounds the acceptance it reached."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from vllm_helpers import ServerPool

from specmeter.config.models import EngineSpec, LoadSpec, SpecConfig, SpecMethod
from specmeter.data.sample import load_sample
from specmeter.data.selection import select
from specmeter.execution.runner import Execution, execute
from specmeter.plans.run import config_id, run_plan
from specmeter.rundir.store import RunStore
from specmeter.schemas.plan import WorkloadSelection
from specmeter.schemas.results import RunSummary
from specmeter.schemas.vocab import VocabReport

K = 3
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def head(models: Path) -> SpecConfig:
    return SpecConfig(method=SpecMethod.eagle3, num_speculative_tokens=K, draft_model=str(models / "demo-eagle3"))


@pytest.fixture(scope="module")
def run(pool: ServerPool, head: SpecConfig, tmp_path_factory: pytest.TempPathFactory) -> tuple[RunSummary, Path]:
    """Eight conversations (later turns carry the replies to earlier ones) at one stream and at three, each against
    the baseline server on the same requests."""
    convs = select(load_sample(), num_prompts=8, seed=0)
    load = LoadSpec(concurrency=[1, 3], max_tokens=40, temperature=0.0, warmup=1)
    plan = run_plan(EngineSpec(endpoint=pool.get(head).base_url), head, load, baseline=True,
                    baseline_endpoint=pool.get(SpecConfig()).base_url,
                    workload=WorkloadSelection(dataset="sample", conversation_ids=[c.id for c in convs]))
    run_dir = tmp_path_factory.mktemp("eagle3") / "run"
    return execute(Execution(plan=plan, conversations=convs), RunStore(run_dir)), run_dir


def test_counters_equal_the_per_request_sums(run: tuple[RunSummary, Path], head: SpecConfig) -> None:
    summary, _ = run
    result = summary.config(config_id(head))
    assert result is not None and len(result.points) == 2
    for level in result.points:
        assert level.latency.num_ok == level.latency.num_requests > 0
        sd = level.sd
        assert sd.counters is not None and sd.per_request is not None
        assert sd.agree is True, sd.agreement
        assert sd.per_request.num_steps == sd.counters.num_steps > 0
        assert sd.per_request.num_draft_tokens == sd.counters.num_draft_tokens == K * sd.counters.num_steps
        assert sd.per_request.num_accepted_tokens == sd.counters.num_accepted_tokens
        assert sd.per_request.accepted_per_pos == sd.counters.accepted_per_pos
        # A trained head: some drafts accepted, and never more than K per step.
        al = sd.counters.acceptance_length
        assert al is not None and 1.0 < al <= K + 1


def test_outputs_equal_the_baselines(run: tuple[RunSummary, Path], head: SpecConfig) -> None:
    summary, run_dir = run
    (check,) = summary.analysis.lossless
    assert check.config_id == config_id(head) and check.basis == "token ids"
    measured = [r for r in RunStore(run_dir).read_records() if r.config_id == check.config_id and not r.warmup]
    assert check.compared == len(measured) > 0 and all(r.ok for r in measured)  # every request, at both points
    assert check.matched == check.compared, check.mismatches


def test_the_heads_vocabulary_bounds_its_acceptance(run: tuple[RunSummary, Path], models: Path,
                                                    tmp_path: Path) -> None:
    """`specmeter vocab` reads the head's own d2t: no drafter restricted to it can beat the ceiling it implies on
    the baseline's outputs (the same tokens the head's server emitted)."""
    _, run_dir = run
    res = subprocess.run([sys.executable, "-m", "specmeter.cli", "vocab", str(run_dir), "--draft-vocab",
                          str(models / "demo-eagle3"), "--vocab-json", str(tmp_path / "vocab.json"), "--json"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    report = VocabReport.model_validate_json(res.stdout)
    (analysis,) = report.maps
    assert analysis.map.kind == "d2t" and analysis.map.size == head_draft_vocab(models)
    coverage = analysis.overall.coverage.value
    assert coverage is not None and 0 < coverage < 1  # a pruned vocabulary: some target tokens it cannot draft
    (drafted,) = analysis.drafted
    assert drafted.k == K
    measured, ceiling = drafted.overall.al_measured, drafted.overall.al_ceiling
    assert measured is not None and ceiling is not None and measured <= ceiling <= K + 1


def head_draft_vocab(models: Path) -> int:
    return int(json.loads((models / "demo-eagle3" / "config.json").read_text())["draft_vocab_size"])
