"""A server that fails to start is reported in one line with its root cause, read from its log.

The vLLM logs under tests/fixtures/server_logs are cut from real failed starts of the vLLM CPU build:
`specmeter run` with a model path that does not exist (a hub lookup, offline), with
`"extra": {"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 2.0}` (an AssertionError in
a worker, then "See root cause above" wrappers) and with synthetic_acceptance_length 9.0 (pydantic's
ValidationError). The llama.cpp logs follow the messages and the log prefix of the llama.cpp source
scripts/setup-llamacpp.sh builds (a GGUF path that does not exist; an unknown flag).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from specmeter.common.errors import EngineError
from specmeter.config.models import EngineSpec, SpecConfig, SpecMethod
from specmeter.engines.base import DeployConfig, EngineLauncher
from specmeter.engines.launcher import LaunchedServer
from specmeter.engines.server_log import failure_reason, root_cause

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "server_logs"


@pytest.mark.parametrize(("log", "cause"), [
    ("vllm-synthetic-acceptance-on-cpu.log", "AssertionError: Synthetic acceptance not supported with CPU sampling"),
    ("vllm-model-path-not-found.log",
     "LocalEntryNotFoundError: Cannot find an appropriate cached snapshot folder for the specified revision"),
    ("vllm-spec-config-invalid.log", "ValidationError: 1 validation error for SpeculativeConfig: Value error, "
                                     "synthetic_acceptance_length must be in [1, 3], got 9.0."),
    ("llamacpp-gguf-not-found.log",
     "gguf_init_from_file: failed to open GGUF file '/data/no-such-model.gguf' (No such file or directory)"),
    ("llamacpp-invalid-argument.log", "error: invalid argument: --spec-bogus"),
])
def test_the_root_cause_line_is_found(log: str, cause: str) -> None:
    reason = failure_reason(LOGS / log)
    assert reason.startswith(cause)
    assert "\n" not in reason and len(reason) <= 300
    assert "root cause" not in reason.lower() and "[type=" not in reason


def test_a_wrapper_is_the_cause_only_when_nothing_else_was_raised() -> None:
    wrapper = "RuntimeError: Engine core initialization failed. See root cause above."
    assert root_cause(["Traceback (most recent call last):", '  File "x.py", line 1, in f', wrapper]) == wrapper


def test_exceptions_inside_messages_and_indented_code_are_not_causes() -> None:
    lines = [
        "(APIServer pid=1) WARNING 11-24 11:50:02 [system_utils.py:255] Found ulimit of 20000 and failed to increase "
        "with error: `OSError: [Errno 24] Too many open files`",
        "    raise ValueError(msg)",
        "UserWarning: resource_tracker: There appear to be 1 leaked shared_memory objects",
        "(APIServer pid=1) INFO 11-24 11:50:03 [api_server.py:1] Starting vLLM API server",
    ]
    assert root_cause(lines) is None


def test_without_a_cause_the_last_line_or_an_empty_log_is_said(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("# specmeter: launching vllm: python -m vllm\nloading weights\nKilled\n\n")
    assert failure_reason(log) == "its last log line: Killed"
    log.write_text("# specmeter: launching vllm: python -m vllm\n")
    assert failure_reason(log) == "it logged nothing"
    assert failure_reason(tmp_path / "missing.log") == "it logged nothing"


def test_a_long_cause_is_cut_to_one_short_line(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("ValueError: " + "x" * 1000 + "\n")
    reason = failure_reason(log)
    assert reason.startswith("ValueError: x") and reason.endswith("…") and len(reason) == 300


class ScriptLauncher(EngineLauncher):
    """Launches `python -c SCRIPT` as the 'server'."""

    name = "stub"
    methods = (SpecMethod.ngram,)

    def __init__(self, script: str) -> None:
        self.script = script

    def server_command(self, engine: EngineSpec, spec: SpecConfig, port: int) -> list[str]:
        return [sys.executable, "-c", self.script]

    def deploy_spec(self, spec: SpecConfig, slots: int | None) -> DeployConfig:
        raise NotImplementedError

    def version(self) -> str | None:
        return None


def _start(tmp_path: Path, script: str, timeout_s: float = 30) -> str:
    engine = EngineSpec(model=str(tmp_path), startup_timeout_s=timeout_s)
    server = LaunchedServer(ScriptLauncher(script), engine, SpecConfig(), tmp_path / "server.log")
    with pytest.raises(EngineError) as err:
        server.start()
    server.stop()
    return str(err.value)


def test_a_failed_start_is_one_line_with_the_engine_reason_and_the_log(tmp_path: Path) -> None:
    log = (LOGS / "vllm-synthetic-acceptance-on-cpu.log").read_text()
    script = f"import sys\nsys.stdout.write({log!r})\nsys.exit(1)\n"
    message = _start(tmp_path, script)
    assert "\n" not in message
    assert message.startswith("stub server exited with code 1 while starting: AssertionError: Synthetic acceptance")
    assert message.endswith(f"(whole log: {tmp_path / 'server.log'})")
    assert "See root cause above" in (tmp_path / "server.log").read_text()  # the whole log stays on disk


def test_a_server_killed_while_starting_names_the_signal(tmp_path: Path) -> None:
    script = "import os, signal\nprint('loading weights', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n"
    message = _start(tmp_path, script)
    assert message.startswith(f"stub server was killed by {signal.SIGKILL.name} while starting: its last log "
                              "line: loading weights")


def test_a_server_that_never_serves_reports_what_it_logged(tmp_path: Path) -> None:
    script = "import time\nprint('OSError: [Errno 98] Address already in use', flush=True)\ntime.sleep(60)\n"
    message = _start(tmp_path, script, timeout_s=1)
    assert "\n" not in message
    assert message.startswith("stub server not ready after 1 s: OSError: [Errno 98] Address already in use; raise "
                              "--startup-timeout")


def test_a_server_says_how_it_ended(tmp_path: Path) -> None:
    server = LaunchedServer(ScriptLauncher(""), EngineSpec(model=str(tmp_path)), SpecConfig(), tmp_path / "log")
    server.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    assert server.ended() == "is still running"
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(timeout=10)
    assert server.ended() == "was killed by SIGKILL"
