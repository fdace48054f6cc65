"""A sweep on a real one-node Slurm cluster (slurm_cluster.py): the baseline and the demo pair's draft model at
K = 2, submitted with `--executor slurm`. Its job is cancelled (scancel) once it has finished a cell; the driver
resubmits the group as attempt 2, which resumes the finished cell on the same node, and merges. The merged run is
complete and has the structure of a local run of the same file.

The job's servers are llama-servers: the executor is the same for every engine, and each of its attempts starts
its servers afresh, which llama-server does in seconds where a vLLM CPU server takes most of a minute (and about
4 GiB beside the session's own servers)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from slurm_cluster import slurm_cluster

from specmeter.executors.layout import AttemptDir, read_state
from specmeter.plans.sweep import read_sweep_file
from specmeter.rundir.store import RunStore, load_summary
from specmeter.schemas.results import RunSummary

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("llama_server")]
SPECMETER = [sys.executable, "-m", "specmeter.cli"]


@pytest.fixture(scope="module")
def partition() -> Iterator[str]:
    with slurm_cluster() as name:
        yield name


def _sweep_file(models: Path, where: Path) -> Path:
    sweep = {
        "workload": {"dataset": "sample", "num_prompts": 6},
        "engine": {"kind": "llamacpp", "model": str(models / "demo-target"), "dtype": "float32",
                   "max_model_len": 1024, "max_num_seqs": 4},
        "candidates": [{"method": "draft_model", "model": str(models / "demo-draft"), "num_speculative_tokens": 2}],
        # Two points, fixed design: the cancel lands after the first cell and before the last.
        "load": {"concurrency": [1, 2], "max_tokens": 24, "temperature": 0, "warmup": 1, "precision": "fixed"},
        "interleave": True,
    }
    path = where / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep), encoding="utf-8")
    return path


def _cells(summary: RunSummary) -> list[tuple[str, str, int]]:
    return sorted((c.config_id, p.point_id, p.repeat) for c in summary.configs for p in c.points)


def _cancel_after_first_cell(driver: subprocess.Popen[str], run_dir: Path, timeout_s: float = 600) -> str:
    """scancel the first attempt's job as soon as its run directory holds a finished cell; its job id."""
    first = AttemptDir(run_dir, "node", 1)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert driver.poll() is None, "the driver ended before the job was cancelled"
        summary = first.path / "summary.json"
        if summary.exists():
            try:
                done = load_summary(first.path)
            except Exception:
                done = None  # being replaced right now
            if done is not None and _cells(done):
                job = read_state(run_dir).latest("node")
                assert job is not None and job.job_id is not None and done.status != "complete"
                subprocess.run(["scancel", job.job_id], check=True)
                return job.job_id
        time.sleep(0.2)
    pytest.fail("the first attempt finished no cell in time")


def test_sweep_on_slurm_survives_a_cancelled_job(partition: str, models: Path, tmp_path: Path) -> None:
    sweep = _sweep_file(models, tmp_path)
    run_dir = tmp_path / "runs" / "on-slurm"
    cmd = [*SPECMETER, "sweep", str(sweep), "--executor", "slurm", "--partition", partition, "--time", "30:00",
           "--slurm-option", "mem=8G", "--out", str(tmp_path / "runs"), "--name", "on-slurm"]
    driver = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    cancelled = _cancel_after_first_cell(driver, run_dir)
    out, _ = driver.communicate(timeout=1200)
    print("\n".join(line for line in out.splitlines() if "attempt-" in line or "submitted job" in line))
    assert driver.returncode == 0, out[-4000:]
    assert f"node/attempt-1: job {cancelled}" in out and "resubmitting as attempt-2" in out

    summary = load_summary(run_dir)
    assert summary.status == "complete"
    # The cancelled attempt is kept and named, the resubmitted one merged; each attempt wrote its own directory.
    first, second = summary.jobs
    assert (first.attempt, first.job_id, first.status, first.used) == (1, cancelled, "incomplete", False)
    assert first.state in ("CANCELLED", "GONE") and first.why
    assert (second.attempt, second.status, second.used) == (2, "complete", True)
    assert AttemptDir(run_dir, "node", 2).path.is_dir()
    node = socket.gethostname()
    assert first.node == second.node == node

    # What attempt 1 finished, attempt 2 kept (same node) and did not measure again.
    kept = _cells(load_summary(AttemptDir(run_dir, "node", 1).path))
    assert kept and set(kept) <= set(_cells(summary))
    records = RunStore(run_dir).read_records()
    for config_id, point_id, repeat in kept:
        sent = {r.attempt for r in records if (r.config_id, r.point_id, r.repeat) == (config_id, point_id, repeat)}
        assert sent == {0}

    # The structure of a local run of the same file: its configurations and points, every cell once, decisions.
    local = read_sweep_file(sweep)
    assert [c.id for c in summary.plan.configs] == [c.id for c in local.configs()]
    points = [p.id for p in local.effective_load().points]
    assert _cells(summary) == sorted((c.id, p, 0) for c in local.configs() for p in points)
    assert {(s.config_id, s.point_id) for s in summary.analysis.speedups} == {("draft_model-k2", p) for p in points}
    assert [c.point_id for c in summary.analysis.choices] == points
    assert [c.config_id for c in summary.analysis.lossless] == ["draft_model-k2"]
    for result in summary.configs:
        assert result.ran_on is not None and (result.ran_on.node, result.ran_on.attempt) == (node, 2)

    shown = subprocess.run([*SPECMETER, "report", str(run_dir), "-v"], capture_output=True, text=True,
                           check=True).stdout
    assert "Slurm jobs" in shown and f"{node} (node/attempt-2" in shown
