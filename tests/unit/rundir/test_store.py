"""The run directory's request log (rundir/store.py): appends survive a crash that tore the last line; the writer
puts each record on the file at once, fsyncs in batches and always before summary.json, and reports its errors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from specmeter.common.errors import InputError, SpecmeterError
from specmeter.config.models import EngineSpec, LoadSpec, SpecConfig
from specmeter.plans.run import run_plan
from specmeter.rundir.store import RunStore
from specmeter.schemas.plan import Plan, WorkloadSelection
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary


def rec(i: int, text: str = "") -> RequestRecord:
    return RequestRecord(config_id="ngram-k4", point_id="c1", conversation_id=f"q{i}", ok=True, output_text=text)


def _plan() -> Plan:
    return run_plan(EngineSpec(endpoint="http://127.0.0.1:1"), SpecConfig(), LoadSpec(), baseline=False,
                    baseline_endpoint=None, workload=WorkloadSelection(dataset="sample"))


def line(r: RequestRecord) -> str:
    return r.model_dump_json(exclude_computed_fields=True) + "\n"


@pytest.mark.parametrize("long_tail", [False, True], ids=["short-tail", "tail-longer-than-a-read-block"])
def test_append_after_a_torn_last_line_keeps_the_file_readable(tmp_path: Path, long_tail: bool) -> None:
    whole = [rec(0), rec(1)]
    torn = line(rec(2, "x" * (200_000 if long_tail else 10)))[:-30]  # the write a kill cut short
    store = RunStore(tmp_path)
    store.requests_path.write_text("".join(line(r) for r in whole) + torn)
    assert [r.conversation_id for r in store.read_records()] == ["q0", "q1"]  # the torn line is skipped
    store.append(rec(3))  # a resume appends
    store.close()
    assert [r.conversation_id for r in RunStore(tmp_path).read_records()] == ["q0", "q1", "q3"]


def test_append_keeps_whole_lines_and_a_torn_only_line(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.append(rec(0))
    store.close()
    store = RunStore(tmp_path)
    store.append(rec(1))
    store.close()
    assert [r.conversation_id for r in store.read_records()] == ["q0", "q1"]
    only_torn = RunStore(tmp_path / "b")
    only_torn.requests_path.write_text(line(rec(0))[:25])
    only_torn.append(rec(1))
    only_torn.close()
    assert [r.conversation_id for r in only_torn.read_records()] == ["q1"]


def test_a_damaged_line_before_the_last_is_an_error(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.requests_path.write_text(line(rec(0)) + "{not a record\n" + line(rec(1)))
    with pytest.raises(InputError, match=r"line 2.*damaged"):
        store.read_records()


def test_appended_records_are_read_back_before_close(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    for i in range(50):
        store.append(rec(i))
    assert [r.conversation_id for r in store.read_records()] == [f"q{i}" for i in range(50)]
    store.append(rec(50))
    assert len(store.read_records()) == 51
    store.close()
    assert len(RunStore(tmp_path).read_records()) == 51


KILLED_AFTER_APPEND = """
import os, signal, sys, time
from pathlib import Path
from specmeter.schemas.records import RequestRecord
from specmeter.rundir.store import RunStore
store = RunStore(Path(sys.argv[1]), fsync_every=10**6, fsync_after_s=3600.0)  # no fsync before the kill
store.append(RequestRecord(config_id="c", point_id="p", conversation_id="q0", ok=True))
time.sleep(0.5)  # the writer needs no barrier, no batch and no close to put it on the file
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_record_survives_a_sigkill_soon_after_its_append_without_fsync(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", KILLED_AFTER_APPEND, str(tmp_path)], timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert [r.conversation_id for r in RunStore(tmp_path).read_records()] == ["q0"]


def _count_fsyncs(monkeypatch: pytest.MonkeyPatch, store: RunStore) -> list[bool]:
    """One entry per fsync: whether summary.json existed when it ran."""
    calls: list[bool] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        calls.append(store.summary_path.exists())
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def _wait_for(cond: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.01)
    return cond()


def test_fsync_is_batched_by_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = RunStore(tmp_path, fsync_every=10, fsync_after_s=3600.0)
    calls = _count_fsyncs(monkeypatch, store)
    for i in range(9):
        store.append(rec(i))
    store.read_records()  # all nine written
    time.sleep(0.2)
    assert calls == []  # below the count, and long before the time limit
    store.append(rec(9))
    assert _wait_for(lambda: len(calls) == 1)
    store.close()


def test_fsync_is_batched_by_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = RunStore(tmp_path, fsync_every=10**6, fsync_after_s=0.05)
    calls = _count_fsyncs(monkeypatch, store)
    store.append(rec(0))
    assert _wait_for(lambda: len(calls) == 1)
    time.sleep(0.2)
    assert len(calls) == 1  # nothing new written: nothing to fsync
    store.close()


def test_the_summary_is_written_after_the_records_are_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = RunStore(tmp_path, fsync_every=10**6, fsync_after_s=3600.0)
    calls = _count_fsyncs(monkeypatch, store)
    store.append(rec(0))
    store.write_summary(RunSummary(specmeter_version="0", created_utc="now", plan=_plan()))
    # The records' fsync came first (summary.json did not exist yet), then the summary's own.
    assert calls[:2] == [False, False] and store.summary_path.exists()
    store.close()


def test_a_write_error_stops_the_run_once_with_the_file_named(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.requests_path.mkdir()  # not a file: the writer cannot open it
    with pytest.raises(SpecmeterError, match=r"requests\.jsonl: request records could not be written"):
        store.append(rec(0))  # raises here if the writer failed already, else at the next wait for it
        store.sync()
    store.close()  # already reported: closing does not raise it again
