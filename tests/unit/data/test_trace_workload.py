"""A trace as a run's workload (data/workload.py with workload.trace): its window's rows, one conversation each in
arrival order, counted from the window's start, the same again on reload; refused where the points or the other
workload settings say otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specmeter.common.errors import InputError
from specmeter.config.models import LoadSpec
from specmeter.config.trace import TraceSpec
from specmeter.config.workload import WorkloadSpec
from specmeter.data.random_tokens import SYNTHETIC_BIAS
from specmeter.data.workload import load_conversations, reload_conversations

TARGET = str(Path(__file__).parents[3] / "models" / "demo-target")
TRACE_POINTS = LoadSpec(trace_scale=[1, 2])


def bailian(tmp_path: Path) -> str:
    path = tmp_path / "bailian.jsonl"
    rows = [{"chat_id": i, "parent_chat_id": -1, "timestamp": i * 0.4, "input_length": 20 + i, "output_length": 6,
             "turn": 1, "hash_ids": [i % 2, 100 + i]} for i in range(8)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def test_the_windows_rows_in_arrival_order_and_the_same_on_reload(tmp_path: Path) -> None:
    trace = TraceSpec(path=bailian(tmp_path), start_s=0.5, duration_s=1.5)  # rows at 0.8, 1.2, 1.6
    convs, info = load_conversations("sample", None, TRACE_POINTS, tokenizer=TARGET, trace=trace)
    assert [c.id for c in convs] == ["trace-3", "trace-4", "trace-5"]
    assert [c.metadata["arrival_s"] for c in convs] == pytest.approx([0.3, 0.7, 1.1])
    assert [c.max_tokens for c in convs] == [6, 6, 6]
    assert info.trace == trace and info.conversation_ids == [c.id for c in convs] and info.notes == []
    assert info.requests == 3 and sum(info.category_counts.values()) == 3
    assert reload_conversations(info, TRACE_POINTS, "resume") == convs


def test_random_tokens_carry_the_synthetic_bias_note(tmp_path: Path) -> None:
    trace = TraceSpec(path=bailian(tmp_path), random_tokens=True)
    convs, info = load_conversations("random", None, TRACE_POINTS, tokenizer=TARGET, trace=trace)
    assert [len(c.prompt_token_ids or []) for c in convs] == [20 + i for i in range(8)]
    assert info.notes == [SYNTHETIC_BIAS]


def test_a_trace_goes_with_trace_points_and_its_own_lengths(tmp_path: Path) -> None:
    trace = TraceSpec(path=bailian(tmp_path))
    with pytest.raises(InputError, match=r"replayed at trace points only: give load.trace_scale"):
        load_conversations("sample", None, LoadSpec(concurrency=[1]), tokenizer=TARGET, trace=trace)
    with pytest.raises(InputError, match=r"trace points replay a trace; give the file as workload.trace.path"):
        load_conversations("sample", None, TRACE_POINTS)
    with pytest.raises(InputError, match="drop input_len, num_prompts and duration_s"):
        load_conversations("sample", None, LoadSpec(trace_scale=[1], num_prompts=2), tokenizer=TARGET, trace=trace)
    with pytest.raises(InputError, match=r"set workload.trace.random_tokens"):
        load_conversations("random", None, TRACE_POINTS, tokenizer=TARGET, trace=trace)
    with pytest.raises(ValueError, match="rows have their own input lengths"):
        WorkloadSpec.model_validate({"trace": {"path": "t.jsonl"}, "input_len": [128]})
