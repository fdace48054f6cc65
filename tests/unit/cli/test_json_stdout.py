"""--json: stdout carries exactly one JSON document, which `json.loads` reads whole, for every command that
has the flag; what a person reads (progress, notes, paths of files written) goes to stderr."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from contextlib import nullcontext
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from fakeengine.server import FakeEngine
from specmeter.common.errors import InputError, RunIncomplete
from specmeter.execution.runner import Reporter
from specmeter.rundir.store import load_summary
from specmeter.schemas.recommend import Recommendation
from specmeter.schemas.results import RunSummary
from specmeter.workflows.terminal import Terminal
from specmeter.workflows.verify import DeployAnswer, answering

pytestmark = pytest.mark.timeout(180)
STORED = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "20261123-180233-demo"
SMALL = ["--dataset", "sample", "--num-prompts", "3", "--max-tokens", "8", "--warmup", "0", "--concurrency", "1"]
NGRAM = '{"method": "ngram", "num_speculative_tokens": 4}'


def specmeter(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "specmeter.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=env)


def one_document(res: subprocess.CompletedProcess[str], exit_code: int = 0) -> Any:
    assert res.returncode == exit_code, res.stderr[-2000:]
    return json.loads(res.stdout)  # raises on a second document or any other line


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    """A copy of a real demo run (recommend writes recommendation.json and report.html into it)."""
    return Path(shutil.copytree(STORED, tmp_path / "demo"))


def test_stored_run_commands_print_one_document(stored: Path, tmp_path: Path) -> None:
    assert one_document(specmeter("report", stored, "--json"))["status"] == "complete"
    res = specmeter("report", stored, "--json", "--csv", tmp_path / "csv")
    assert one_document(res)["status"] == "complete"
    assert "wrote" in res.stderr  # the files written are named where a person reads

    res = specmeter("recommend", stored, "--json")  # the run's answer, shown: nothing is decided or written
    doc = one_document(res)
    assert Recommendation.model_validate(doc).model_dump() == Recommendation.model_validate_json(
        (stored / "recommendation.json").read_text(encoding="utf-8")).model_dump()
    assert doc["answer_round"] == 1 and doc["history"] == []

    res = specmeter("compare", stored, stored / "verify", "--json", "--plots", tmp_path / "plots")
    assert len(one_document(res)["runs"]) == 2
    assert "plots:" in res.stderr

    twin = Path(shutil.copytree(STORED, tmp_path / "twin"))  # the same results in a directory of their own
    doc = one_document(specmeter("compare", twin, stored, "--check", "--json"))
    assert doc["checks"] and doc["regressions"] == []


def test_run_sweep_resume_and_compare_workloads_print_one_document(
        fake_engine: FakeEngine, fake_baseline: FakeEngine, tmp_path: Path) -> None:
    url = fake_engine.url
    run = one_document(specmeter("run", "--endpoint", url, "--no-baseline", *SMALL, "--json", "--out", tmp_path,
                                 "--name", "run"))
    assert run == json.loads((tmp_path / "run" / "summary.json").read_text(encoding="utf-8"))

    cw = one_document(specmeter("run", "--compare-random", "--endpoint", url, "--no-baseline", "--spec", NGRAM,
                                "--vocab-size", "500", *SMALL, "--json", "--out", tmp_path, "--name", "cw"))
    assert cw["plan"]["kind"] == "compare-workloads"

    sweep_file = tmp_path / "sweep.yaml"
    sweep_file.write_text(json.dumps({
        "workload": {"dataset": "sample", "num_prompts": 3}, "engine": {"endpoint": url},
        "baseline_endpoint": fake_baseline.url, "candidates": [{"method": "ngram", "num_speculative_tokens": 4,
                                                                "endpoint": url}],
        "load": {"concurrency": [1], "max_tokens": 8, "warmup": 0}}), encoding="utf-8")
    sweep = one_document(specmeter("sweep", sweep_file, "--json", "--out", tmp_path, "--name", "sweep"))
    assert sweep["plan"]["kind"] == "sweep" and sweep["status"] == "complete"

    # A run the error rate stops still prints what finished, with the 'incomplete' exit code; resume finishes it.
    fake_engine.default_fault = "http_500"
    stopped = one_document(specmeter("run", "--endpoint", url, "--no-baseline", *SMALL, "--num-prompts", "12",
                                     "--max-error-rate", "0.5", "--json", "--out", tmp_path, "--name", "stopped"),
                           RunIncomplete.exit_code)
    assert stopped["status"] == "incomplete"
    fake_engine.default_fault = None
    assert one_document(specmeter("resume", tmp_path / "stopped", "--json"))["status"] == "complete"


def test_plan_before_any_run_prints_one_document() -> None:
    models = Path(__file__).resolve().parents[3] / "models"
    doc = one_document(specmeter("plan", "--hardware", "h100", "--target-config", models / "demo-target",
                                 "--draft-config", models / "demo-draft", "--acceptance", "0.7", "--k", "2,4",
                                 "--batch", "1,8", "--json"))
    assert doc["title"] == "roofline estimate, not a measurement"
    assert {(row["k"], row["batch"]) for row in doc["rows"]} == {(2, 1), (2, 8), (4, 1), (4, 8)}


def test_sweep_verify_of_attached_servers_is_refused_before_the_sweep(tmp_path: Path) -> None:
    sweep_file = tmp_path / "sweep.yaml"
    url = "http://127.0.0.1:9"  # nothing answers: the refusal must come before any request
    sweep_file.write_text(json.dumps({"engine": {"endpoint": url}, "baseline_endpoint": url,
                                      "candidates": [{"method": "ngram", "num_speculative_tokens": 4,
                                                      "endpoint": url}]}), encoding="utf-8")
    res = specmeter("sweep", sweep_file, "--verify", "--json", "--out", tmp_path / "runs")
    assert res.returncode == InputError.exit_code and res.stdout == ""
    assert "specmeter verify RUN_DIR --endpoint URL" in " ".join(res.stderr.split())
    assert not (tmp_path / "runs").exists()


def _terminal(json_out: bool) -> tuple[Terminal, StringIO]:
    stdout = StringIO()
    return Terminal(out=Console(file=stdout), err=Console(file=StringIO()), json_out=json_out,
                    progress=lambda _console: nullcontext(Reporter())), stdout


def test_recommend_verify_answer_is_one_document_also_when_a_run_stops() -> None:
    term, stdout = _terminal(json_out=True)
    sweep, verification = load_summary(STORED), load_summary(STORED / "verify")
    rec = Recommendation.model_validate_json((STORED / "recommendation.json").read_text(encoding="utf-8"))
    with pytest.raises(RunIncomplete), answering(DeployAnswer(), term) as answer:
        answer.keep_sweep(sweep)
        answer.recommendation = rec
        answer.verifications.append(verification)
        raise RunIncomplete("the verification stopped")
    doc = json.loads(stdout.getvalue())
    assert RunSummary.model_validate(doc["sweep"]).model_dump() == sweep.model_dump()
    assert Recommendation.model_validate(doc["recommendation"]).model_dump() == rec.model_dump()
    assert [RunSummary.model_validate(v).model_dump() for v in doc["verifications"]] == [verification.model_dump()]


def test_without_json_the_answer_prints_no_document() -> None:
    term, stdout = _terminal(json_out=False)
    with answering(DeployAnswer(), term) as answer:
        answer.keep_sweep(load_summary(STORED))
    assert stdout.getvalue() == ""
