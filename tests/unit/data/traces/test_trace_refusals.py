"""Trace refusals: every bad row stops the trace with one line naming the file, the line, the field and the fix;
a file that is empty, lacks a column, or whose format cannot be told is refused the same way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specmeter.common.errors import InputError
from specmeter.data.traces.formats import read_trace

MOONCAKE_OK = {"timestamp": 0, "input_length": 10, "output_length": 2}
BAILIAN_ROOT = {"chat_id": 1, "parent_chat_id": -1, "timestamp": 1.0, "input_length": 10, "output_length": 2,
                "type": "text", "turn": 1}
BURSTGPT_HEADER = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"
AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"


def _jsonl(*rows: dict[str, Any] | str) -> str:
    return "".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows)


def _refusal(path: Path, text: str, format: str | None = None) -> str:
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_trace(path, format)
    message = str(caught.value)
    assert "\n" not in message and "; " in message, message  # one line, and a fix after what is wrong
    return message


# (file name, its text, the line refused, the field named, what the line says)
ROW_CASES = [
    ("trace.jsonl", _jsonl(MOONCAKE_OK, {**MOONCAKE_OK, "input_length": "abc"}), 2, "input_length",
     "'abc' is not a whole number of tokens"),
    ("trace.jsonl", _jsonl({**MOONCAKE_OK, "input_length": 12.5}), 1, "input_length", "not a whole number"),
    ("trace.jsonl", _jsonl(MOONCAKE_OK, {**MOONCAKE_OK, "output_length": -3}), 2, "output_length", "negative"),
    ("trace.jsonl", _jsonl({**MOONCAKE_OK, "timestamp": 5000}, {**MOONCAKE_OK, "timestamp": 6000},
                           {**MOONCAKE_OK, "timestamp": 3000}), 3, "timestamp",
     "3000 is earlier than line 2's 6000"),
    ("trace.jsonl", _jsonl({**MOONCAKE_OK, "timestamp": -1}), 1, "timestamp", "negative, before the trace's start"),
    ("trace.jsonl", _jsonl({"input_length": 10, "output_length": 2}), 1, "timestamp", "is missing"),
    ("trace.jsonl", _jsonl({"timestamp": 0, "input_length": 10}), 1, "output_length", "is missing"),
    ("trace.jsonl", _jsonl({"timestamp": 0, "output_length": 2}), 1, "input_length", "is missing"),
    ("trace.jsonl", _jsonl({**MOONCAKE_OK, "text_input": "Hi"}), 1, "input_length", "conflicts with 'text_input'"),
    ("trace.jsonl", _jsonl({"timestamp": 0, "text_input": "Hi", "output_length": 2, "hash_ids": [1]}), 1,
     "hash_ids", "hash input_length's blocks"),
    ("trace.jsonl", _jsonl({**MOONCAKE_OK, "hash_ids": [0, "1"]}), 1, "hash_ids", "not a list of whole numbers"),
    ("trace.jsonl", _jsonl({"timestamp": 0, "messages": [{"content": "Hi"}], "output_length": 2}), 1,
     "messages[0]", 'with a "role"'),
    ("trace.jsonl", _jsonl({"timestamp": 0, "text_input": "  ", "output_length": 2}), 1, "text_input",
     "non-blank"),
    ("trace.jsonl", _jsonl({**MOONCAKE_OK, "delay": 200}), 1, "delay", "does not replay"),
    ("trace.jsonl", _jsonl({"timestamp": 0, "messages": [{"role": "user", "content": "Hi"}], "output_length": 2,
                            "tools": [{"type": "function"}]}), 1, "tools", "does not replay"),
    ("trace.jsonl", _jsonl(BAILIAN_ROOT, {**BAILIAN_ROOT, "chat_id": 3, "parent_chat_id": 2}, {**BAILIAN_ROOT,
                                                                                               "chat_id": 2}),
     3, "chat_id", "2 is the parent of line 2, above it"),
    ("trace.jsonl", _jsonl(BAILIAN_ROOT, {**BAILIAN_ROOT, "timestamp": 2.0}), 2, "chat_id", "1 repeats line 1"),
    ("trace.jsonl", _jsonl(BAILIAN_ROOT, {**BAILIAN_ROOT, "chat_id": 2, "parent_chat_id": -5}), 2,
     "parent_chat_id", "-1 (a new conversation) or an earlier chat_id"),
    ("trace.jsonl", _jsonl({**BAILIAN_ROOT, "turn": 0}), 1, "turn", "not a turn number"),
    ("trace.jsonl", _jsonl({**BAILIAN_ROOT, "timestamp": 9.5}, {**BAILIAN_ROOT, "chat_id": 2, "timestamp": 9.25}), 2,
     "timestamp", "9.25 is earlier than line 1's 9.5"),
    ("trace.jsonl", _jsonl({**BAILIAN_ROOT, "input_length": -1}), 1, "input_length", "negative"),
    ("BurstGPT_1.csv", f"{BURSTGPT_HEADER}\n5,ChatGPT,472,18,490,API log\n45,ChatGPT,x,0,0,API log\n", 3,
     "Request tokens", "'x' is not a whole number of tokens"),
    ("BurstGPT_1.csv", f"{BURSTGPT_HEADER}\n5,ChatGPT,472,-18,454,API log\n", 2, "Response tokens", "negative"),
    ("BurstGPT_1.csv", f"{BURSTGPT_HEADER}\n50,ChatGPT,4,1,5,API log\n\n45,GPT-4,4,1,5,API log\n", 4, "Timestamp",
     "'45' is earlier than line 2's '50'"),
    ("BurstGPT_1.csv", f"{BURSTGPT_HEADER}\n5,ChatGPT,472,,472,API log\n", 2, "Response tokens", "is empty"),
    ("BurstGPT_1.csv", f"{BURSTGPT_HEADER}\nsoon,ChatGPT,4,1,5,API log\n", 2, "Timestamp", "'soon' is not a number"),
    ("trace.csv", f"{AZURE_HEADER}\n2023-11-16 18:15:46.6805900,4808,10\n16/11/2023 18:15,3180,8\n", 3, "TIMESTAMP",
     "is not a date and time"),
    ("trace.csv", f"{AZURE_HEADER}\n2024-05-12 00:00:00+00:00,4808,10\n2024-05-12 00:00:01,3180,8\n", 3,
     "TIMESTAMP", "has no UTC offset where line 2's has one"),
    ("trace.csv", f"{AZURE_HEADER}\n2023-11-16 18:15:46.6805900,-4808,10\n", 2, "ContextTokens", "negative"),
    ("trace.csv", f"{AZURE_HEADER}\n2023-11-16 18:15:46.6805900,4808,10\n2023-11-16 18:15:45.1,3180,8\n", 3,
     "TIMESTAMP", "is earlier than line 2's"),
]


@pytest.mark.parametrize(("name", "text", "line", "field", "says"), ROW_CASES,
                         ids=[f"{case[0]}-{case[3]}-{i}" for i, case in enumerate(ROW_CASES)])
def test_a_bad_row_is_one_line_naming_file_line_and_field(tmp_path: Path, name: str, text: str, line: int,
                                                          field: str, says: str) -> None:
    path = tmp_path / name
    message = _refusal(path, text)
    assert message.startswith(f"{path} line {line}: "), message
    assert f'field "{field}"' in message and says in message, message


def test_a_csv_record_of_the_wrong_width_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "BurstGPT_2.csv"
    message = _refusal(path, f"{BURSTGPT_HEADER}\n5,ChatGPT,472,18,490,API log\n6,ChatGPT,472\n")
    assert message.startswith(f"{path} line 3: has 3 fields where the header names 6"), message


def test_bad_json_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    assert _refusal(path, _jsonl(MOONCAKE_OK, "{not json")).startswith(f"{path} line 2: is not valid JSON")


@pytest.mark.parametrize(("name", "text"), [("trace.jsonl", ""), ("trace.jsonl", "\n  \n"), ("trace.csv", "")])
def test_an_empty_file_is_refused(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    assert _refusal(path, text).startswith(f"{path}: the file is empty")


@pytest.mark.parametrize(("format", "header"), [("burstgpt", BURSTGPT_HEADER), ("azure", AZURE_HEADER)])
def test_a_header_without_requests_is_refused(tmp_path: Path, format: str, header: str) -> None:
    path = tmp_path / "trace.csv"
    assert _refusal(path, header + "\n", format).startswith(f"{path}: no requests in it")


def test_a_missing_column_is_named_with_the_ones_found(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    message = _refusal(path, "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46,3\n", "azure")
    assert message.startswith(f"{path} line 1: missing column(s) GeneratedTokens (found TIMESTAMP, ContextTokens)")


def test_a_format_named_for_the_wrong_file_names_the_missing_key(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    message = _refusal(path, _jsonl(MOONCAKE_OK), "bailian")
    assert message.startswith(f'{path} line 1: field "chat_id" is missing'), message


@pytest.mark.parametrize(("name", "text", "says"), [
    ("trace.txt", "anything\n", "cannot tell the trace format from a .txt extension"),
    ("trace", "anything\n", "cannot tell the trace format from a missing extension"),
    ("trace.jsonl", '\n{"prompt": "hi", "id": 1}\n', "line 2: cannot tell the trace format from id, prompt"),
    ("trace.csv", "time,in,out\n1,2,3\n", "line 1: cannot tell the trace format from in, out, time"),
])
def test_an_undetectable_file_asks_for_the_format(tmp_path: Path, name: str, text: str, says: str) -> None:
    path = tmp_path / name
    message = _refusal(path, text)
    assert message.startswith(f"{path}") and says in message, message
    assert "name the format: one of bailian, mooncake, burstgpt, azure" in message
