"""MTP on the real engine: demo-target served as a MiMo model with its trained MTP layer (models/demo-mtp), beside
the speculation-off baseline on demo-target, and the same target with a random MTP layer, which the report names as
a drafter whose weights are probably missing or random."""

from __future__ import annotations

import os
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

pytestmark = pytest.mark.integration
MTP_FILE = "mtp.safetensors"


def mtp(target: Path, k: int) -> SpecConfig:
    return SpecConfig(method=SpecMethod.mtp, num_speculative_tokens=k, target_model=str(target))


def random_layer(models: Path, out: Path) -> Path:
    """models/demo-mtp with its MTP layer's weights drawn at random (the target's own files linked as they are):
    what a checkpoint whose MTP tensors were lost and re-initialized serves."""
    import torch
    from safetensors.torch import load_file, save_file

    out.mkdir()
    src = models / "demo-mtp"
    for f in src.iterdir():
        if f.name != MTP_FILE:
            (out / f.name).symlink_to(f.resolve())
    gen = torch.Generator().manual_seed(0)
    tensors = {name: (torch.randn(t.shape, generator=gen) * 0.02).to(t.dtype) if "mtp_layers" in name else t
               for name, t in load_file(str(src / MTP_FILE)).items()}
    save_file(tensors, str(out / MTP_FILE), metadata={"format": "pt"})
    return out


def measure(pool: ServerPool, spec: SpecConfig, run_dir: Path) -> RunSummary:
    """Twelve sample conversations at one stream and at three, against the baseline server on the same requests."""
    convs = select(load_sample(), num_prompts=12, seed=0)
    load = LoadSpec(concurrency=[1, 3], max_tokens=48, temperature=0.0, warmup=1)
    plan = run_plan(EngineSpec(endpoint=pool.get(spec).base_url), spec, load, baseline=True,
                    baseline_endpoint=pool.get(SpecConfig()).base_url,
                    workload=WorkloadSelection(dataset="sample", conversation_ids=[c.id for c in convs]))
    summary = execute(Execution(plan=plan, conversations=convs), RunStore(run_dir))
    pool.stop(spec)
    return summary


@pytest.fixture(scope="module")
def trained(pool: ServerPool, models: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[RunSummary, Path]:
    run_dir = tmp_path_factory.mktemp("mtp") / "run"
    return measure(pool, mtp(models / "demo-mtp", 1), run_dir), run_dir


def test_the_trained_layer_drafts_and_is_accepted_and_counted_by_the_engine(trained: tuple[RunSummary, Path],
                                                                             models: Path) -> None:
    summary, _ = trained
    result = summary.config(config_id(mtp(models / "demo-mtp", 1)))
    assert result is not None and len(result.points) == 2
    for level in result.points:
        assert level.latency.num_ok == level.latency.num_requests > 0
        sd = level.sd
        assert sd.counters is not None and sd.per_request is not None
        assert sd.agree is True, sd.agreement
        assert sd.counters.num_draft_tokens == sd.counters.num_steps > 0  # K = 1: one draft per step
        al = sd.counters.acceptance_length
        assert al is not None and 1.0 < al <= 2.0  # a trained layer: some drafts accepted


def test_the_mtp_targets_outputs_are_demo_targets_token_for_token(trained: tuple[RunSummary, Path]) -> None:
    """demo-mtp links demo-target's weights and adds zero attention biases: the same model, so at temperature 0
    the MTP server returns the baseline's tokens (and speculation keeps them)."""
    summary, run_dir = trained
    (check,) = summary.analysis.lossless
    measured = [r for r in RunStore(run_dir).read_records() if r.config_id == check.config_id and not r.warmup]
    assert check.compared == len(measured) > 0 and all(r.ok for r in measured)
    assert check.matched == check.compared, check.mismatches


def test_a_random_mtp_layer_is_named_in_the_report(pool: ServerPool, models: Path, tmp_path: Path) -> None:
    spec = mtp(random_layer(models, tmp_path / "random-mtp"), 1)
    run_dir = tmp_path / "run"
    summary = measure(pool, spec, run_dir)
    result = summary.config(config_id(spec))
    assert result is not None
    drafted = sum(p.sd.counters.num_draft_tokens for p in result.points if p.sd.counters is not None)
    accepted = sum(p.sd.counters.num_accepted_tokens for p in result.points if p.sd.counters is not None)
    assert drafted >= 256 and accepted < 0.02 * drafted  # what the guard reads: enough drafts, almost none taken
    report = subprocess.run([sys.executable, "-m", "specmeter.cli", "report", str(run_dir)], capture_output=True,
                            text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert report.returncode == 0, report.stderr[-3000:]
    assert "probably missing or random" in " ".join(report.stdout.split())
