"""The API key reaches the server (Authorization: Bearer ...) and nothing else: no file of the run
directory, no line of stdout/stderr, no exception message. Checked through runner.execute (Execution.api_key)
and through the real `specmeter run` command line (--api-key, --api-key=..., $SPECMETER_API_KEY).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fakeengine.drive import attach_plan, conversations, only_config, point_requests, run_plan
from fakeengine.server import FakeEngine
from specmeter.common.errors import RunIncomplete

pytestmark = pytest.mark.timeout(60)

SECRET = "sk-test-SECRET-abc123"
# The key, and pieces of it long enough to identify it (a truncated or partly masked copy is a leak too).
NEEDLES = [SECRET, "SECRET-abc123", "sk-test-SECRET"]
SPECMETER = Path(sys.executable).with_name("specmeter")


def _leaks(root: Path) -> list[str]:
    """Every file under root (and which needle) that contains the secret."""
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path.relative_to(root)}: {n!r}" for n in NEEDLES if n.encode() in data]
    return found


def _text_leaks(text: str) -> list[str]:
    return [n for n in NEEDLES if n in text]


def _assert_server_got_the_key(server: FakeEngine) -> None:
    v1 = [r for r in server.log if r.path.startswith("/v1/")]
    assert any(r.path == "/v1/models" for r in v1)
    assert any(r.index is not None for r in v1)
    for r in v1:
        assert r.headers.get("Authorization") == f"Bearer {SECRET}", (r.method, r.path, r.headers.get("Authorization"))
    assert all(r.outcome != "rejected" for r in server.completion_requests())


def test_runner_sends_the_key_and_writes_it_nowhere(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "run"
    convs = conversations(["Q one", ["Q two", "Q two again"], "Q three"])
    with FakeEngine(api_key=SECRET) as server:
        plan = attach_plan(server.url, convs, api_key=SECRET, concurrency=[2], warmup=1)
        summary, error, _ = run_plan(plan, root)
    assert error is None, repr(error)
    assert summary.status == "complete"
    latency = only_config(summary).points[0].latency
    assert latency.num_ok == latency.num_requests == point_requests(convs, 2)
    _assert_server_got_the_key(server)
    assert _leaks(root) == []
    assert _text_leaks(summary.model_dump_json()) == []
    out, err = capfd.readouterr()
    assert _text_leaks(out + err) == []


def test_a_server_that_echoes_the_key_in_its_errors_does_not_leak_it(tmp_path: Path,
                                                                     capfd: pytest.CaptureFixture[str]) -> None:
    """Some gateways answer 401 with 'Incorrect API key provided: sk-...'. specmeter keeps the error
    text (requests.jsonl, the incomplete_reason in summary.json, the RunIncomplete message shown to
    the user): the key must be masked in all of them."""
    root = tmp_path / "run"
    with FakeEngine(api_key=SECRET) as server:
        server.default_fault = "http_401_echo_key"
        server.schedule = {0: "none"}
        plan = attach_plan(server.url, conversations([f"Q{i}" for i in range(12)]), api_key=SECRET,
                           concurrency=[1], max_error_rate=0.5)
        _, error, _ = run_plan(plan, root)
    assert isinstance(error, RunIncomplete), repr(error)
    assert "HTTP 401" in str(error)  # the error itself is still reported...
    assert _text_leaks(str(error)) == [], str(error)  # ...without the key
    assert _leaks(root) == []
    out, err = capfd.readouterr()
    assert _text_leaks(out + err) == []


def test_a_server_that_echoes_the_key_in_its_payloads_and_scrapes_does_not_put_it_on_disk(tmp_path: Path) -> None:
    """A debugging proxy repeats the Authorization header in every stream's closing chunk and in /metrics: both are
    written down (requests.jsonl's final payloads, captures/' scrapes), the key in neither, and the run's numbers
    are as they would be."""
    root = tmp_path / "run"
    with FakeEngine(api_key=SECRET, echo_auth=True) as server:
        convs = conversations(["Q one", "Q two", "Q three"])
        summary, error, _ = run_plan(attach_plan(server.url, convs, api_key=SECRET, concurrency=[2]), root)
    assert error is None, repr(error)
    latency = only_config(summary).points[0].latency
    assert latency.num_ok == latency.num_requests == point_requests(convs, 2)
    assert only_config(summary).points[0].sd.available
    written = (root / "requests.jsonl").read_text() + "".join(p.read_text() for p in root.rglob("captures/*/*.json"))
    assert "request_headers" in written and "Bearer ***" in written  # what was echoed is kept, masked
    assert _leaks(root) == []


def _cli(server: FakeEngine, out_dir: Path, extra: list[str], env_key: str | None,
         json_out: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SPECMETER_API_KEY", "OPENAI_API_KEY")}
    env.update({"NO_COLOR": "1", "COLUMNS": "200", "PYTHONUNBUFFERED": "1"})
    if env_key is not None:
        env["SPECMETER_API_KEY"] = env_key
    cmd = [
        str(SPECMETER), "run", "--endpoint", server.url, "--no-baseline",
        "--spec", '{"method": "ngram", "num_speculative_tokens": 4}',
        "--dataset", "sample", "--num-prompts", "3", "--max-tokens", "16", "--warmup", "0",
        "--concurrency", "2", "--request-timeout", "10", "--out", str(out_dir), "--name", "r1",
        *extra,
    ]
    if json_out:
        cmd.append("--json")
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=50, cwd=out_dir.parent)


@pytest.mark.parametrize(
    ("extra", "env_key", "json_out"),
    [
        (["--api-key", SECRET], None, False),
        ([f"--api-key={SECRET}"], None, True),
        ([], SECRET, False),
    ],
    ids=["--api-key KEY", "--api-key=KEY --json", "$SPECMETER_API_KEY"],
)
def test_cli_sends_the_key_and_writes_it_nowhere(tmp_path: Path, extra: list[str], env_key: str | None,
                                                 json_out: bool) -> None:
    assert SPECMETER.exists(), f"{SPECMETER} missing: install the project into the venv"
    out_dir = tmp_path / "runs"
    with FakeEngine(api_key=SECRET) as server:
        proc = _cli(server, out_dir, extra, env_key, json_out)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _assert_server_got_the_key(server)
    run_dir = out_dir / "r1"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "complete"
    assert _leaks(out_dir) == []
    assert _text_leaks(proc.stdout) == [] and _text_leaks(proc.stderr) == []
    if extra:
        assert any("***" in arg for arg in summary["command"])  # the flag is recorded, its value masked
    if json_out:
        assert json.loads(proc.stdout)["status"] == "complete"


def test_cli_masks_the_key_in_engine_args(tmp_path: Path) -> None:
    """Protecting a launched vLLM takes its own `--api-key`, passed as `--engine-arg=--api-key=KEY`
    next to specmeter's `--api-key KEY`. summary.json records both the command line and the engine
    config (extra_args, and server_command in launch mode): the key must be masked there too. Attach
    mode writes the same fields, so it shows the leak without launching an engine."""
    out_dir = tmp_path / "runs"
    with FakeEngine(api_key=SECRET) as server:
        proc = _cli(server, out_dir, ["--api-key", SECRET, f"--engine-arg=--api-key={SECRET}"], None, False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _leaks(out_dir) == []
    assert _text_leaks(proc.stdout + proc.stderr) == []


def test_cli_without_the_key_is_refused_by_the_server(tmp_path: Path) -> None:
    """Control: the fake really checks the key, so the tests above prove it was sent."""
    out_dir = tmp_path / "runs"
    with FakeEngine(api_key=SECRET) as server:
        proc = _cli(server, out_dir, [], None, False)
    assert proc.returncode != 0
    assert all(r.headers.get("Authorization") is None for r in server.log)
