"""Launch an engine server in its own process group, wait until it serves, stop it cleanly.

The server's stdout/stderr go to a log file in the run directory; when the server dies while starting,
the one-line error carries the log's root-cause line (server_log.py) and where the whole log is.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

from specmeter.common.errors import EngineError
from specmeter.config.models import EngineSpec, SpecConfig
from specmeter.engines.base import EngineLauncher
from specmeter.engines.server_log import LAUNCH_HEADER, failure_reason
from specmeter.schemas.offload import GpuOffload


def _die_with_parent() -> None:
    """In the server's child process (Linux): get SIGTERM if specmeter itself dies, even by SIGKILL,
    so a crashed or killed benchmark never leaves an engine running."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _get_ok(url: str, api_key: str | None = None, timeout: float = 2.0) -> bool:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return bool(200 <= resp.status < 300)
    except (urllib.error.URLError, OSError, ValueError):
        return False


class LaunchedServer:
    """A running engine server process; use as a context manager so it is always stopped."""

    def __init__(
        self,
        launcher: EngineLauncher,
        engine: EngineSpec,
        spec: SpecConfig,
        log_path: Path,
        api_key: str | None = None,
    ) -> None:
        self.launcher = launcher
        # Passed through the environment, never the command line: it must not reach logs or results.
        self._api_key = api_key
        self.engine = engine.serving(spec)
        self.spec = spec
        self.log_path = log_path
        self.port = engine.port or free_port(engine.host)
        host = "127.0.0.1" if engine.host in ("0.0.0.0", "::") else engine.host
        self.base_url = f"http://{host}:{self.port}"
        self.command = launcher.server_command(self.engine, spec, self.port)
        self.proc: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None
        self._spawned_at = 0.0
        self.gpu_offload: GpuOffload | None = None  # read from the log once the server serves

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> LaunchedServer:
        """Spawn the server and wait until it serves."""
        self.spawn()
        self.wait_ready()
        return self

    def spawn(self) -> None:
        """Start the server process and return at once (wait_ready() waits for it to serve)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.launcher.server_env(self.engine)}
        if self._api_key:
            env.update(self.launcher.api_key_env(self._api_key))
        with self.log_path.open("ab") as log:
            log.write(f"{LAUNCH_HEADER}{self.launcher.name}: {' '.join(self.command)}\n".encode())
            # A process group of its own, so stop() can signal the server and all its workers; but specmeter's own
            # session, not a new one: Linux schedules each session as one group (autogroup), so a server in a session
            # of its own took half the shared cores from the next server while its idle worker kept polling (a vLLM
            # CPU server's worker process, where it has one, polls for a second after its last step; a request
            # handed over then ran at half speed).
            self._spawned_at = time.monotonic()
            self.proc = subprocess.Popen(
                self.command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                process_group=0,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )

    def poll_ready(self) -> bool:
        """One look at whether the spawned server serves; the first look that finds it serving times its start."""
        if self.startup_seconds is None and self.starting() and all(
                _get_ok(f"{self.base_url}{path}", self._api_key) for path in self.launcher.ready_paths):
            self.startup_seconds = time.monotonic() - self._spawned_at
        return self.startup_seconds is not None

    def elapsed_s(self) -> float:
        """Seconds since the server was spawned."""
        return time.monotonic() - self._spawned_at

    def starting(self) -> bool:
        """Whether the spawned server's process runs within its startup time (whether it serves yet or not)."""
        return (self.proc is not None and self.proc.poll() is None
                and time.monotonic() < self._spawned_at + self.engine.startup_timeout_s)

    def wait_ready(self) -> None:
        """Wait until the spawned server serves; EngineError (the server stopped) when it exits or times out."""
        assert self.proc is not None
        # Timed from its own spawn, not from this wait (poll_ready), which may come after other servers' starts.
        deadline = self._spawned_at + self.engine.startup_timeout_s
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                raise EngineError(f"{self.launcher.name} server {_ended(code)} while starting: "
                                  f"{failure_reason(self.log_path)} (whole log: {self.log_path})")
            if self.poll_ready():
                self.gpu_offload = self.launcher.gpu_offload(self.engine, self.command, self.log_path)
                return
            time.sleep(1.0)
        reason = failure_reason(self.log_path)  # before stop(): its shutdown adds lines of its own
        self.stop()
        raise EngineError(
            f"{self.launcher.name} server not ready after {self.engine.startup_timeout_s:.0f} s: {reason}; raise "
            f"--startup-timeout or read {self.log_path}"
        )

    def alive(self, wait_s: float = 0.0) -> bool:
        """Whether the server process runs, after giving it up to `wait_s` seconds to exit."""
        if self.proc is None:
            return False
        if wait_s > 0:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(wait_s)
        return self.proc.poll() is None

    def ended(self) -> str:
        """How the server process ended ("exited with code 1", "was killed by SIGKILL"), for messages."""
        code = None if self.proc is None else self.proc.poll()
        return "is still running" if code is None else _ended(code)

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM the whole process group, then SIGKILL what is left after `grace_s`."""
        if self.proc is None:
            return
        pgid = self.proc.pid
        if self.proc.poll() is None:
            _signal_group(pgid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        # Workers may outlive the parent; kill the group regardless.
        _signal_group(pgid, signal.SIGKILL)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def __enter__(self) -> LaunchedServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def wait_served(servers: Sequence[LaunchedServer], poll_s: float = 1.0,
                tick: Callable[[Sequence[LaunchedServer]], None] | None = None) -> None:
    """Look at the spawned `servers` together until each serves, has exited or ran out of its startup time, so each
    is timed when it came to serve, however long the others take (wait_ready then says why one did not); `tick`
    is shown those still starting after each look (a progress line)."""
    waiting = list(servers)
    while waiting:
        waiting = [s for s in waiting if not s.poll_ready() and s.starting()]
        if waiting:
            if tick is not None:
                tick(waiting)
            time.sleep(poll_s)


def _ended(code: int) -> str:
    """How a process with this return code ended (negative: the signal that killed it)."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        return f"was killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
