"""The run directory's request log (store.py): appends survive a crash that tore the last line."""

from __future__ import annotations

from pathlib import Path

import pytest

from specmeter.errors import InputError
from specmeter.schemas.records import RequestRecord
from specmeter.store import RunStore


def rec(i: int, text: str = "") -> RequestRecord:
    return RequestRecord(config_id="ngram-k4", point_id="c1", conversation_id=f"q{i}", ok=True, output_text=text)


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
