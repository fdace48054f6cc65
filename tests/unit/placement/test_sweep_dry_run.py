"""`specmeter sweep FILE --dry-run`: the servers and where each would run, printed before anything starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specmeter.cli import app
from specmeter.common.errors import InputError
from specmeter.placement import inventory

SMI_4 = "".join(f"{i}, NVIDIA H100 80GB HBM3, 81559\n" for i in range(4))
SWEEP = """\
engine: {model: org/target, tensor_parallel_size: 2}
candidates:
  - {method: ngram, num_speculative_tokens: [2, 4]}
interleave: true
"""


@pytest.fixture
def sweep_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP)
    return path


def dry_run(*args: str) -> str:
    res = CliRunner().invoke(app, ["sweep", *args, "--dry-run", "--out", "unused"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert not Path("unused").exists()  # nothing written, nothing started
    return res.output


def test_dry_run_shows_each_server_on_its_gpus_with_its_memory(sweep_file: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inventory, "run_nvidia_smi", lambda: SMI_4)
    out = dry_run(str(sweep_file))
    assert "3 configurations on 3 servers, all up together" in out
    assert "servers share GPUs" in out and "up to 2 per GPU" in out
    assert "GPUs from nvidia-smi: 0 (NVIDIA H100 80GB HBM3, 80 GiB)" in out
    rows = [line for line in out.splitlines() if line.startswith("│ ")]
    assert any("baseline" in r and "0,1" in r and "0.45" in r for r in rows)
    assert any("ngram-k2" in r and "2,3" in r and "0.45" in r for r in rows)
    assert any("ngram-k4" in r and "0,1" in r and "0.45" in r for r in rows)


def test_gpus_flag_chooses_the_gpus(sweep_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inventory, "run_nvidia_smi", lambda: SMI_4)
    out = dry_run(str(sweep_file), "--gpus", "2,3")
    assert "GPUs from --gpus: 2 (NVIDIA H100" in out and "up to 3 per GPU" in out
    rows = [line for line in out.splitlines() if line.startswith("│ ")]
    assert len(rows) == 3 and all("2,3" in r and "0.30" in r for r in rows)
    res = CliRunner().invoke(app, ["sweep", str(sweep_file), "--gpus", "0,,1", "--dry-run"])
    assert isinstance(res.exception, InputError) and "give GPU ids separated by commas" in str(res.exception)


def test_dry_run_json_is_the_placement(sweep_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inventory, "run_nvidia_smi", lambda: None)
    res = CliRunner().invoke(app, ["sweep", str(sweep_file), "--gpus", "2,3", "--dry-run", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["mode"] == "shared" and doc["source"] == "--gpus"
    assert [s["gpus"] for s in doc["servers"]] == [["2", "3"]] * 3


def test_dry_run_on_a_cpu_machine_places_nothing(sweep_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inventory, "run_nvidia_smi", lambda: None)
    out = dry_run(str(sweep_file))
    assert "CPU: no GPU found" in out and "Placement" not in out
