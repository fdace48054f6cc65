"""Trace readers: each format read from a small file in its published shape, every field where the row model puts it,
and the format told from the file (or named) the same way."""

from __future__ import annotations

from pathlib import Path

import pytest
from data_fixtures import write_jsonl

from specmeter.common.errors import InputError
from specmeter.data.traces.formats import TRACE_FORMATS, read_trace


def _arrivals_from_first(stamps: list[float]) -> list[float]:
    return [stamp - stamps[0] for stamp in stamps]


def test_mooncake_milliseconds_lengths_and_block_hashes(tmp_path: Path) -> None:
    stamps_ms = [0, 3000, 3000, 5999]
    path = write_jsonl(tmp_path / "conversation_trace.jsonl", [
        {"timestamp": stamps_ms[0], "input_length": 1100, "output_length": 50, "hash_ids": [0, 1, 2]},
        {"timestamp": stamps_ms[1], "input_length": 600, "output_length": 7, "hash_ids": [0, 3]},
        {"timestamp": stamps_ms[2], "input_length": 20, "output_length": 1},
        {"timestamp": stamps_ms[3], "input_length": 513, "output_length": 0, "hash_ids": [0, 4]},
    ])
    trace = read_trace(path)
    assert (trace.format, trace.block_tokens, trace.source) == ("mooncake", 512, str(path))
    assert [row.arrival_s for row in trace.rows] == pytest.approx([ms / 1000 for ms in stamps_ms])
    assert [(row.input_length, row.output_length) for row in trace.rows] == [(1100, 50), (600, 7), (20, 1), (513, 0)]
    assert [row.hash_ids for row in trace.rows] == [[0, 1, 2], [0, 3], None, [0, 4]]
    assert [row.line for row in trace.rows] == [1, 2, 3, 4]
    assert all(row.chat_id is None and row.text_input is None for row in trace.rows)


def test_mooncake_rows_carrying_their_prompt_as_text_or_messages(tmp_path: Path) -> None:
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Bye"}]
    path = write_jsonl(tmp_path / "aiperf.jsonl", [
        {"timestamp": 1000, "text_input": "What is the capital of France?", "output_length": 20, "session_id": "a"},
        "",
        {"timestamp": 1500.5, "messages": chat, "output_length": 8, "session_id": "a"},
    ])
    first, second = read_trace(path).rows
    assert first.text_input == "What is the capital of France?" and first.input_length is None
    assert second.messages == chat and second.input_length is None and second.text_input is None
    assert (first.session_id, second.session_id) == ("a", "a")
    assert second.line == 3 and second.arrival_s == pytest.approx(0.5005)


def test_bailian_seconds_and_conversation_links(tmp_path: Path) -> None:
    stamps = [61.114, 62.5, 62.5, 70.0]
    path = write_jsonl(tmp_path / "qwen_traceA_blksz_16.jsonl", [
        {"chat_id": 159, "parent_chat_id": -1, "timestamp": stamps[0], "input_length": 521, "output_length": 132,
         "type": "text", "turn": 1, "hash_ids": [1089, 1090, 1091]},
        {"chat_id": 160, "parent_chat_id": 159, "timestamp": stamps[1], "input_length": 700, "output_length": 80,
         "type": "text", "turn": 2, "hash_ids": [1089, 1090, 1091, 1092]},
        {"chat_id": 7, "parent_chat_id": -1, "timestamp": stamps[2], "input_length": 30, "output_length": 3,
         "type": "search", "turn": 1},
        {"chat_id": 161, "parent_chat_id": 160, "timestamp": stamps[3], "input_length": 900, "output_length": 1,
         "turn": 3, "hash_ids": []},
    ])
    trace = read_trace(path)
    assert (trace.format, trace.block_tokens) == ("bailian", 16)
    assert [row.arrival_s for row in trace.rows] == pytest.approx(_arrivals_from_first(stamps))
    assert [(row.chat_id, row.parent_chat_id, row.turn) for row in trace.rows] == [
        (159, -1, 1), (160, 159, 2), (7, -1, 1), (161, 160, 3)]
    assert [row.request_type for row in trace.rows] == ["text", "text", "search", None]
    assert [row.hash_ids for row in trace.rows] == [[1089, 1090, 1091], [1089, 1090, 1091, 1092], None, []]
    assert trace.rows[0].input_length == 521 and trace.rows[-1].output_length == 1


def test_a_bailian_follow_up_whose_parent_came_before_the_slice_is_kept(tmp_path: Path) -> None:
    """A slice of a service's log starts mid-conversation: a follow-up whose parent the file never holds keeps its
    link (its input length already holds the context the service received)."""
    path = write_jsonl(tmp_path / "slice.jsonl", [
        {"chat_id": 500, "parent_chat_id": 42, "timestamp": 1.0, "input_length": 800, "output_length": 5, "turn": 4},
        {"chat_id": 501, "parent_chat_id": 500, "timestamp": 2.0, "input_length": 900, "output_length": 5, "turn": 5},
    ])
    assert [(row.chat_id, row.parent_chat_id) for row in read_trace(path).rows] == [(500, 42), (501, 500)]


@pytest.mark.parametrize("newer", [False, True], ids=["six-columns", "with-session-and-elapsed"])
def test_burstgpt_seconds_from_midnight_counted_from_the_first_request(tmp_path: Path, newer: bool) -> None:
    stamps = [5.0, 45.0, 110.5]
    rows = [(stamps[0], "s1", "ChatGPT", 472, 18, "Conversation log"),
            (stamps[1], "", "ChatGPT", 1087, 0, "API log"),
            (stamps[2], "s1", "GPT-4", 417, 505, "Conversation log")]
    if newer:
        lines = ["Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type"]
        lines += [f"{t:g},{s},1.5,{m},{i},{o},{i + o},{log}" for t, s, m, i, o, log in rows]
    else:
        lines = ["Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"]
        lines += [f"{t:g},{m},{i},{o},{i + o},{log}" for t, _s, m, i, o, log in rows]
    path = tmp_path / "BurstGPT_1.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    trace = read_trace(path)
    assert (trace.format, trace.block_tokens) == ("burstgpt", None)
    assert [row.arrival_s for row in trace.rows] == pytest.approx(_arrivals_from_first(stamps))
    assert [(row.input_length, row.output_length) for row in trace.rows] == [(i, o) for _t, _s, _m, i, o, _l in rows]
    assert [(row.model, row.log_type) for row in trace.rows] == [(m, log) for _t, _s, m, _i, _o, log in rows]
    # A failed request (Response tokens 0) is the trace's own row, kept as it is.
    assert trace.rows[1].output_length == 0
    assert [row.session_id for row in trace.rows] == (["s1", None, "s1"] if newer else [None, None, None])
    assert [row.line for row in trace.rows] == [2, 3, 4]


def test_azure_2023_absolute_times_counted_from_the_first(tmp_path: Path) -> None:
    path = tmp_path / "AzureLLMInferenceTrace_code.csv"
    # The 2023 files: no zone, seven decimals; a byte-order mark and CRLF line ends as a Windows export writes them.
    path.write_text("\ufeffTIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:17:03.9799600,4808,10\r\n"
                    "2023-11-16 18:17:04.0319600,3180,8\r\n2023-11-16 18:18:04.9799600,110,27\r\n", encoding="utf-8")
    trace = read_trace(path)
    assert trace.format == "azure"
    assert [row.arrival_s for row in trace.rows] == pytest.approx([0.0, 0.052, 61.0])
    assert [(row.input_length, row.output_length) for row in trace.rows] == [(4808, 10), (3180, 8), (110, 27)]


def test_azure_2024_times_with_a_utc_offset_with_and_without_decimals(tmp_path: Path) -> None:
    path = tmp_path / "AzureLLMInferenceTrace_conv_1week.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-12 00:00:00+00:00,1452,3\n"
                    "2024-05-12 00:00:00.041683+00:00,584,3\n2024-05-12 02:00:00+01:00,862,38\n", encoding="utf-8")
    # 02:00 at +01:00 is 01:00 UTC: an hour after the first request.
    assert [row.arrival_s for row in read_trace(path).rows] == pytest.approx([0.0, 0.041683, 3600.0])


def test_a_named_format_reads_a_file_whatever_its_name(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mooncake.log", [{"timestamp": 0, "input_length": 3, "output_length": 1}])
    assert read_trace(path, "mooncake").rows[0].input_length == 3
    with pytest.raises(InputError, match="unknown trace format 'moon'; choose one of: bailian, mooncake"):
        read_trace(path, "moon")


@pytest.mark.parametrize("name", list(TRACE_FORMATS))
def test_detection_and_the_name_agree(tmp_path: Path, name: str) -> None:
    samples = {
        "mooncake": ('{"timestamp": 0, "input_length": 3, "output_length": 1}\n', ".jsonl"),
        "bailian": ('{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 3, "output_length": 1, '
                    '"turn": 1}\n', ".jsonl"),
        "burstgpt": ("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n3,GPT-4,3,1,4,API log\n",
                     ".csv"),
        "azure": ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,3,1\n", ".csv"),
    }
    text, suffix = samples[name]
    path = tmp_path / f"trace{suffix}"
    path.write_text(text, encoding="utf-8")
    assert read_trace(path).format == name
    assert read_trace(path, name) == read_trace(path)
