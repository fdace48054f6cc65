"""llama-server on a GPU (engines/llamacpp_offload.py): full offload where the binary sees a GPU, nothing new on
the CPU, the user's own flags first; the layers each server offloaded, read from its log and flagged.

tests/fixtures/llamacpp/server_cpu.log is the start of a real log of the llama-server scripts/setup-llamacpp.sh
builds (CPU), serving the demo pair as f32 GGUF at `-lv 4` (model paths cut to their file names): a build without
GPU support logs no offload line. server_gpu.log is the same log with the lines a CUDA build adds, as
src/llama-model.cpp prints them ("load_tensors: offloaded %d/%d layers to GPU"; the output layer counts as one,
so the 8-layer target has 9 and the 1-layer draft 2) and the CUDA0 device line.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from specmeter.analysis.offload import offload_warnings
from specmeter.config.models import EngineSpec, SpecConfig
from specmeter.engines.llamacpp import LlamaCppLauncher
from specmeter.engines.llamacpp_offload import parse_devices, read_offload
from specmeter.rundir.store import load_summary
from specmeter.schemas.offload import GpuOffload, LayerOffload
from specmeter.schemas.results import RunSummary

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "llamacpp"
RUN = ROOT / "tests" / "fixtures" / "runs" / "20261123-180233-demo"
TARGET, DRAFT = "demo-target-f32-00f03395392c0f87.gguf", "demo-draft-f32-dac68a88e59171dd.gguf"
LAUNCHER = LlamaCppLauncher()
H100 = "  CUDA0: NVIDIA H100 80GB HBM3 (81089 MiB, 80573 MiB free)"
GPU_FLAGS = ("-ngl", "--spec-draft-ngl", "--fit", "-lv")


def _server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *devices: str) -> Path:
    """A stand-in llama-server whose --list-devices lists `devices` (as the real one prints them)."""
    listing = "\\n".join(["Available devices:", *(devices or ("  (none)",))])
    binary = tmp_path / "llama-server"
    binary.write_text(f'#!/bin/sh\n[ "$1" = --list-devices ] && printf "{listing}\\n" && exit 0\nexit 1\n')
    binary.chmod(binary.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("SPECMETER_LLAMA_SERVER", str(binary))
    for name in (TARGET, DRAFT):
        (tmp_path / name).write_bytes(b"GGUF")
    return tmp_path


def _cmd(where: Path, spec: dict[str, Any], **engine: Any) -> list[str]:
    return LAUNCHER.server_command(EngineSpec(model=str(where / TARGET), kind="llamacpp", **engine),
                                   SpecConfig.model_validate(spec), 8080)


def _draft(where: Path, **extra: Any) -> dict[str, Any]:
    return {"method": "draft_model", "model": str(where / DRAFT), "num_speculative_tokens": 3, "extra": extra}


def _value(cmd: list[str], flag: str) -> str:
    assert cmd.count(flag) == 1, cmd
    return cmd[cmd.index(flag) + 1]


def test_on_a_gpu_every_layer_of_both_models_goes_on_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    where = _server(tmp_path, monkeypatch, H100)
    cmd = _cmd(where, _draft(where), extra_args=["--threads", "8"])
    assert _value(cmd, "-ngl") == "all" and _value(cmd, "--spec-draft-ngl") == "all"
    assert _value(cmd, "--fit") == "off"  # the automatic fit would offload only what fits in free memory
    assert _value(cmd, "-lv") == "4"  # the level at which the server logs what it offloaded
    assert cmd[-2:] == ["--threads", "8"]  # the user's arguments stay last


def test_a_baseline_loads_no_draft_model_to_offload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cmd = _cmd(_server(tmp_path, monkeypatch, H100), {})
    assert _value(cmd, "-ngl") == "all" and "--spec-draft-ngl" not in cmd


@pytest.mark.parametrize("devices", [(), ("  BLAS: OpenBLAS (0 MiB, 0 MiB free)",)])
def test_without_a_gpu_the_command_is_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                devices: tuple[str, ...]) -> None:
    where = _server(tmp_path, monkeypatch, *devices)
    cmd = _cmd(where, _draft(where))
    assert not set(GPU_FLAGS) & set(cmd)


def test_the_users_own_offload_flags_win(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    where = _server(tmp_path, monkeypatch, H100)
    cmd = _cmd(where, _draft(where, spec_draft_ngl=10), extra_args=["--n-gpu-layers", "20", "-fit", "on"],
               env={"LLAMA_ARG_LOG_VERBOSITY": "5"})
    assert _value(cmd, "--n-gpu-layers") == "20" and "-ngl" not in cmd
    assert _value(cmd, "--spec-draft-ngl") == "10"  # from the spec's extra, not duplicated
    assert _value(cmd, "-fit") == "on" and "--fit" not in cmd
    assert "-lv" not in cmd  # the environment sets the verbosity


def test_devices_are_the_gpus_the_listing_names() -> None:
    listing = f"Available devices:\n{H100}\n  CUDA1: NVIDIA H100 80GB HBM3 (81089 MiB, 81000 MiB free)\n"
    assert parse_devices(listing) == ["CUDA0", "CUDA1"]
    assert parse_devices("Available devices:\n  (none)\n") == []
    assert parse_devices("Available devices:\n  BLAS: OpenBLAS (0 MiB, 0 MiB free)\n") == []


def test_the_layer_counts_come_from_the_log() -> None:
    target, draft = read_offload(FIXTURES / "server_gpu.log", TARGET, DRAFT)
    assert target == LayerOffload(offloaded=9, layers=9) and target.full
    assert draft == LayerOffload(offloaded=2, layers=2)
    assert read_offload(FIXTURES / "server_cpu.log", TARGET, DRAFT) == (None, None)  # a CPU build logs none


def test_a_partial_offload_is_read_for_the_model_it_belongs_to(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text((FIXTURES / "server_gpu.log").read_text().replace("offloaded 9/9", "offloaded 5/9"))
    target, draft = read_offload(log, TARGET, DRAFT)
    assert target == LayerOffload(offloaded=5, layers=9) and not target.full
    assert draft is not None and draft.full


def test_a_self_draft_is_the_second_load_of_the_same_file(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text((FIXTURES / "server_gpu.log").read_text().replace(DRAFT, TARGET))
    assert read_offload(log, TARGET, TARGET) == (LayerOffload(offloaded=9, layers=9),
                                                 LayerOffload(offloaded=2, layers=2))


def test_the_launcher_records_devices_and_layers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    where = _server(tmp_path, monkeypatch, H100)
    engine = EngineSpec(model=str(where / TARGET), kind="llamacpp")
    cmd = [str(where / "llama-server"), "-m", TARGET, "--spec-draft-model", DRAFT]
    found = LAUNCHER.gpu_offload(engine, cmd, FIXTURES / "server_gpu.log")
    assert found == GpuOffload(devices=["CUDA0"], target=LayerOffload(offloaded=9, layers=9),
                               draft=LayerOffload(offloaded=2, layers=2))


def _placed(offloads: dict[str, GpuOffload | None]) -> RunSummary:
    summary = load_summary(RUN)
    for config in summary.configs:
        config.gpu_offload = offloads.get(config.config_id)
    return summary


def _gpu(target: int, draft: int | None = None) -> GpuOffload:
    return GpuOffload(devices=["CUDA0"], target=LayerOffload(offloaded=target, layers=33),
                      draft=None if draft is None else LayerOffload(offloaded=draft, layers=9))


def test_full_offload_everywhere_is_not_flagged() -> None:
    assert offload_warnings(_placed({"baseline": _gpu(33), "draft_model-k2": _gpu(33, 9)})) == []


def test_nothing_offloaded_without_a_gpu_is_not_flagged() -> None:
    assert offload_warnings(_placed({"baseline": GpuOffload(devices=[]),
                                     "draft_model-k2": GpuOffload(devices=[])})) == []


def test_a_server_that_kept_layers_on_the_cpu_is_flagged_against_its_baseline() -> None:
    lines = offload_warnings(_placed({"baseline": _gpu(33), "draft_model-k2": _gpu(20, 4)}))
    assert any("draft_model-k2" in ln and "20/33 layers of the target" in ln for ln in lines)
    assert any("draft_model-k2" in ln and "4/9 layers of the draft model" in ln for ln in lines)
    assert any("draft_model-k2" in ln and "baseline's 33/33" in ln for ln in lines)
    assert not any(ln.startswith("baseline:") for ln in lines)


def test_a_gpu_server_whose_log_does_not_say_is_flagged() -> None:
    lines = offload_warnings(_placed({"baseline": GpuOffload(devices=["CUDA0"])}))
    assert lines and lines[0].startswith("baseline:") and "-lv 4" in lines[0]
