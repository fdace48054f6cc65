"""A long server start says what it is doing (engines.start_notes): past SLOW_START_S, whether the engine compiles
kernels for the first run on this machine (its compile cache empty when it was spawned, about as long as the last
such start took, or an estimate) or loads what an earlier run compiled; live, on the progress, until it serves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console
from test_server_starts import _server, _serving, _ServingLauncher

import specmeter.engines.start_notes as notes
from specmeter.config.models import EngineSpec, SpecConfig
from specmeter.engines.launcher import LaunchedServer
from specmeter.engines.start_notes import COLD_START_ESTIMATE_S, SLOW_START_S, StartWatch, cache_state, record_path
from specmeter.engines.vllm import VLLMLauncher
from specmeter.execution.servers import Server, start_all
from specmeter.report.progress import RichReporter


@pytest.fixture(autouse=True)
def record_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """specmeter's record of starts under a directory of this test's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg"


def _cache(tmp_path: Path, warm: bool) -> Path:
    path = tmp_path / "torch_compile_cache"
    path.mkdir()
    if warm:
        (path / "graph").write_text("compiled")
    return path


def test_a_compile_cache_is_empty_until_it_holds_something(tmp_path: Path) -> None:
    assert cache_state(None) is None  # the engine keeps none
    assert cache_state(tmp_path / "absent") == "empty"
    assert cache_state(_cache(tmp_path, warm=False)) == "empty"
    (tmp_path / "torch_compile_cache" / "graph").write_text("compiled")
    assert cache_state(tmp_path / "torch_compile_cache") == "warm"


def test_a_first_start_says_it_compiles_and_for_about_how_long(tmp_path: Path) -> None:
    """Quiet before the threshold; past it, an empty cache says kernels are compiled for the first run on this
    machine, about an estimate's seconds where no such start was recorded and about the last one's once one was,
    and that later runs reuse them."""
    cold = StartWatch.of("k2", "vllm", "m", _cache(tmp_path, warm=False))
    assert cold.line(SLOW_START_S - 1) is None
    line = cold.line(34.0)
    assert line == (f"server k2 starting, 34 s: compiling kernels for the first run on this machine, about "
                    f"{COLD_START_ESTIMATE_S:.0f} s (an estimate); later runs reuse them")
    cold.record(73.24)
    assert json.loads(record_path().read_text()) == {"vllm m empty": 73.2}
    again = StartWatch.of("k4", "vllm", "m", tmp_path / "torch_compile_cache")
    assert again.previous_s == 73.2
    assert "about 73 s (its last first start); later runs reuse them" in (again.line(21.0) or "")
    other = StartWatch.of("k2", "vllm", "another-model", tmp_path / "torch_compile_cache")
    assert other.previous_s is None  # another model compiles its own kernels


def test_a_start_on_a_warm_cache_says_it_loads_what_an_earlier_run_compiled(tmp_path: Path) -> None:
    warm_dir = _cache(tmp_path, warm=True)
    warm = StartWatch.of("k2", "vllm", "m", warm_dir)
    assert warm.line(25.0) == "server k2 starting, 25 s: loading the model and the kernels an earlier run compiled"
    warm.record(31.0)
    assert StartWatch.of("k2", "vllm", "m", warm_dir).line(25.0) == (
        "server k2 starting, 25 s: loading the model and the kernels an earlier run compiled, about 31 s last time")
    assert "compiling" not in (StartWatch.of("k2", "vllm", "m", warm_dir).line(40.0) or "")


def test_an_engine_without_a_compile_cache_says_it_loads_and_records_nothing() -> None:
    plain = StartWatch.of("k2", "llamacpp", "m", None)
    assert plain.line(30.0) == "server k2 starting, 30 s: loading the model"
    plain.record(30.0)
    assert not record_path().exists()


def test_vllms_compile_cache_is_under_its_cache_root(record_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_CACHE_ROOT", raising=False)
    launcher = VLLMLauncher()
    assert launcher.compile_cache(EngineSpec(model="m")) == record_home / "vllm" / "torch_compile_cache"
    root = EngineSpec(model="m", env={"VLLM_CACHE_ROOT": "/scratch/vllm-cache"})
    assert launcher.compile_cache(root) == Path("/scratch/vllm-cache/torch_compile_cache")


@pytest.mark.timeout(60)
def test_a_long_start_shows_its_line_live_until_it_serves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake server that serves after 2.5 s, with the threshold at 1 s: while it starts, the progress holds one
    line for it, its seconds counting up; once it serves the line goes and the ready line stays."""
    monkeypatch.setattr(notes, "SLOW_START_S", 1.0)
    console = Console(record=True, width=200, force_terminal=False)
    reporter = RichReporter(console)
    proc = LaunchedServer(_ServingLauncher(_serving(2.5)), EngineSpec(model=str(tmp_path)), SpecConfig(),
                          tmp_path / "server.log")
    watch = StartWatch.of("k2", "vllm", "m", tmp_path / "empty-cache")
    shown: list[str] = []

    def starting(server: Server, p: LaunchedServer) -> None:
        if (line := watch.line(p.elapsed_s())) is not None:
            reporter.server_starting(server.head.id, line)
            shown.append(reporter.progress.tasks[-1].description)

    def ready(server: Server, p: LaunchedServer) -> None:
        p.wait_ready()
        reporter.server_started(server.head.id)
        reporter.server_ready(server.head.id, p.startup_seconds or 0.0)

    with reporter:
        try:
            start_all([_server("k2")], lambda server: (proc.spawn(), proc)[1], ready, starting)
        finally:
            proc.stop()
    assert shown and all("compiling kernels for the first run on this machine" in line for line in shown)
    seconds = [int(line.split(", ")[1].split(" s")[0]) for line in shown]
    assert seconds == sorted(seconds)  # one line, its seconds counting up
    assert shown[0].startswith("server k2 starting, 1 s") or shown[0].startswith("server k2 starting, 2 s")
    assert reporter.progress.tasks == []  # the start's line went once it served
    assert "server k2 ready in" in console.export_text()
