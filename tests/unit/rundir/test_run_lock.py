"""One writer per run directory (rundir/lock.py): a second command that would write a run another is writing is
refused in one line naming the holder, a lock a killed process left is free again, and two `specmeter resume` of
one run at once end with the run complete and no record twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fakeengine.server import FakeEngine
from specmeter.common.errors import InputError
from specmeter.rundir.lock import LOCK, writing
from specmeter.rundir.store import RunStore, load_summary

pytestmark = pytest.mark.timeout(120)
SPECMETER = Path(sys.executable).with_name("specmeter")


def _run_args(url: str, out: Path) -> list[str]:
    return [str(SPECMETER), "run", "--endpoint", url, "--no-baseline", "--spec",
            '{"method": "ngram", "num_speculative_tokens": 4}', "--dataset", "sample", "--num-prompts", "4",
            "--max-tokens", "12", "--warmup", "0", "--concurrency", "1,2", "--request-timeout", "20",
            "--out", str(out), "--name", "r"]


def _env() -> dict[str, str]:
    return {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}


def _wait(cond: object, timeout_s: float = 60.0) -> None:
    end = time.monotonic() + timeout_s
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.05)


def _holder_pid(run_dir: Path) -> int | None:
    try:
        return int(json.loads((run_dir / LOCK).read_text() or "{}").get("pid"))
    except (OSError, ValueError, TypeError):
        return None


def test_a_second_writer_is_refused_naming_the_holder_and_a_killed_holders_lock_is_free(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    with writing(run_dir, "specmeter resume"):
        with writing(run_dir, "specmeter recommend"):  # the same process again (the demo's steps): re-entrant
            pass
        held = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                               "from specmeter.rundir.lock import writing\n"
                               "with writing(Path(sys.argv[1]), 'specmeter verify'): pass", str(run_dir)],
                              capture_output=True, text=True, timeout=60)
        assert held.returncode != 0 and "specmeter resume" in held.stderr and str(os.getpid()) in held.stderr
    # A holder killed with SIGKILL cannot release anything: the kernel does.
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                               "from specmeter.rundir.lock import writing\n"
                               "with writing(Path(sys.argv[1]), 'specmeter run'):\n"
                               "    print('held', flush=True); time.sleep(60)", str(run_dir)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    with pytest.raises(InputError, match="specmeter run") as err:
        with writing(run_dir, "specmeter resume"):
            pass
    assert "\n" not in str(err.value)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with writing(run_dir, "specmeter resume"):  # taken over
        assert _holder_pid(run_dir) == os.getpid()


def test_two_resumes_at_once_one_refuses_and_the_run_ends_complete_without_a_record_twice(tmp_path: Path) -> None:
    with FakeEngine(output_tokens=12, slow_chunk_s=0.15, default_fault="slow") as server:  # seconds a request
        first = subprocess.Popen(_run_args(server.url, tmp_path), env=_env(), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        run_dir = tmp_path / "r"
        _wait(lambda: (run_dir / "requests.jsonl").exists() and (run_dir / "requests.jsonl").stat().st_size > 0)
        first.send_signal(signal.SIGKILL)  # killed mid-run, holding the lock: the kernel frees it
        first.wait()
        assert load_summary(run_dir).status != "complete"
        resume = [str(SPECMETER), "resume", str(run_dir)]
        one = subprocess.Popen(resume, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _wait(lambda: _holder_pid(run_dir) == one.pid)
        two = subprocess.run(resume, env=_env(), capture_output=True, text=True, timeout=60)
        out, err = one.communicate(timeout=90)
    assert two.returncode == 2, two.stderr
    said = two.stderr.strip().splitlines()
    assert len(said) == 1 and "specmeter resume" in said[0] and str(one.pid) in said[0]
    assert "Traceback" not in two.stderr
    assert one.returncode == 0, out[-2000:] + err[-2000:]
    assert load_summary(run_dir).status == "complete"
    records = RunStore(run_dir).read_records()
    keys = [r.key for r in records]
    assert len(keys) == len(set(keys))
