"""Attached servers are checked to be what the plan says before anything is measured: the baseline is another
server than the candidate, serves the same model, and does not speculate; each mismatch is one line and no run
directory. A resume checks them again, and that they serve the model the run measured."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fakeengine.server import FakeEngine
from specmeter.common.errors import InputError
from specmeter.engines.probe import check_drafting, probe
from specmeter.rundir.store import load_summary
from specmeter.schemas.plan import Role

pytestmark = pytest.mark.timeout(60)
NGRAM = '{"method": "ngram", "num_speculative_tokens": 4}'
DEMO_RUN = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "20261123-180233-demo"


def _run_args(sd: str, base: str, out: Path) -> list[str]:
    return [sys.executable, "-m", "specmeter.cli", "run", "--endpoint", sd, "--baseline-endpoint", base, "--spec",
            NGRAM, "--dataset", "sample", "--num-prompts", "2", "--max-tokens", "8", "--warmup", "0", "--out",
            str(out), "--name", "r"]


def _run(sd: str, base: str, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*_run_args(sd, base, out), "--concurrency", "1"], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize(("case", "said"), [("same server", "are the same server"),
                                            ("another model", "serves"),
                                            ("a drafting baseline", "runs speculative decoding")])
def test_a_baseline_that_is_not_the_candidates_twin_is_refused_before_measuring(tmp_path: Path, case: str,
                                                                                said: str) -> None:
    with FakeEngine() as sd, FakeEngine(speculative=case == "a drafting baseline",
                                        model="fake/other" if case == "another model" else "fake/target-model") as base:
        res = _run(sd.url, sd.url if case == "same server" else base.url, tmp_path)
        sent = len(sd.completion_requests()) + len(base.completion_requests())
    assert res.returncode == 2, res.stdout[-1000:] + res.stderr[-1000:]
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and "Traceback" not in res.stderr
    assert sent == 0 and not (tmp_path / "r").exists()  # refused before anything was measured


def test_the_candidates_speculation_off_twin_passes(tmp_path: Path) -> None:
    with FakeEngine() as sd, FakeEngine(speculative=False) as base:
        res = _run(sd.url, base.url, tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]


@pytest.mark.parametrize(("swapped", "said"), [("candidate", "serves fake/other"),
                                               ("both", "but this run measured fake/target-model there")])
def test_a_resume_against_servers_now_serving_another_model_is_refused_and_loses_nothing(
        tmp_path: Path, swapped: str, said: str) -> None:
    """The servers were restarted between the run and its resume, serving another model: the resumed points would
    measure it, not the run's. Both servers swapped pass the baseline check (one model), so the run's own record
    of what it measured there refuses them."""
    with FakeEngine() as sd, FakeEngine(speculative=False) as base:
        first = subprocess.run([*_run_args(sd.url, base.url, tmp_path), "--concurrency", "1,2"],
                               capture_output=True, text=True, timeout=60)
        assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
        run_dir = tmp_path / "r"
        doc = json.loads((run_dir / "summary.json").read_text())
        for config in doc["configs"]:  # c2 unfinished, as a run stopped before it
            config["points"] = [p for p in config["points"] if p["point_id"] != "c2"]
        doc["status"] = "incomplete"
        (run_dir / "summary.json").write_text(json.dumps(doc))
        before = hashlib.sha256((run_dir / "requests.jsonl").read_bytes()).hexdigest()
        sd.model = "fake/other"
        if swapped == "both":
            base.model = "fake/other"
        res = subprocess.run([sys.executable, "-m", "specmeter.cli", "resume", str(run_dir)],
                             capture_output=True, text=True, timeout=60)
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-2000:]
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and "Traceback" not in res.stderr
    assert hashlib.sha256((run_dir / "requests.jsonl").read_bytes()).hexdigest() == before


def test_a_candidate_given_a_spec_on_a_server_without_speculation_is_refused_before_measuring(tmp_path: Path) -> None:
    with FakeEngine(speculative=False) as plain, FakeEngine(speculative=False) as base:
        res = _run(plain.url, base.url, tmp_path)
        sent = len(plain.completion_requests()) + len(base.completion_requests())
    assert res.returncode == 2, res.stdout[-1000:] + res.stderr[-1000:]
    (line,) = res.stderr.strip().splitlines()
    assert "runs no speculative decoding" in line and "ngram K = 4" in line and "--spec" in line
    assert sent == 0 and not (tmp_path / "r").exists()


def test_verify_endpoint_must_run_speculative_decoding() -> None:
    """`verify --endpoint URL`: the user's server for the table; one started without a speculative config cannot
    be running it."""
    plan = load_summary(DEMO_RUN / "verify").plan
    dynamic = next(c for c in plan.configs if c.role is Role.verification)
    with FakeEngine(speculative=False) as plain:
        dynamic.engine = dynamic.engine.model_copy(update={"endpoint": plain.url, "kind": "vllm"})
        with pytest.raises(InputError) as err:
            check_drafting(plan, {plain.url: probe(plain.url)})
    assert "\n" not in str(err.value) and "recommend RUN" in str(err.value) and dynamic.id in str(err.value)
