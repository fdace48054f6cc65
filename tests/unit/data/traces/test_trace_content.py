"""A trace's content, by what must hold: every row becomes one conversation of real text at its input length (within
the tolerance, counted with the target's tokenizer), rows sharing leading hash ids share leading text, a follow-up
begins with its parent's prompt, the trace's own text is sent as it is, random tokens come only when asked and with
their warning, and each conversation carries its row's arrival and output length."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specmeter.common.errors import InputError
from specmeter.config.trace import TraceSpec
from specmeter.data.matched import vocab_from_model
from specmeter.data.random_tokens import SYNTHETIC_BIAS
from specmeter.data.sample import load_sample
from specmeter.data.traces.content import Codec, target_codec, trace_conversations
from specmeter.data.traces.formats import read_trace
from specmeter.data.traces.model import Trace

TARGET = str(Path(__file__).parents[4] / "models" / "demo-target")


@pytest.fixture(scope="module")
def codec() -> Codec:
    return target_codec(TARGET)


def _bailian(tmp_path: Path, rows: list[dict[str, Any]]) -> Trace:
    path = tmp_path / "trace.jsonl"
    defaults = {"parent_chat_id": -1, "turn": 1, "type": "text", "output_length": 8}
    path.write_text("".join(json.dumps({**defaults, "chat_id": i, "timestamp": i * 0.5, **row}) + "\n"
                            for i, row in enumerate(rows)), encoding="utf-8")
    return read_trace(path)


def _common(a: str, b: str) -> str:
    """The text two prompts begin with."""
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return a[:n]


def test_each_row_is_real_text_at_its_length(tmp_path: Path, codec: Codec) -> None:
    lengths = [12, 40, 100, 333, 7]
    trace = _bailian(tmp_path, [{"input_length": n, "output_length": 5 + i} for i, n in enumerate(lengths)])
    got = trace_conversations(trace, TraceSpec(path="t"), load_sample(), codec)
    assert [c.id for c in got.conversations] == [f"trace-{r.line}" for r in trace.rows]
    for conv, row in zip(got.conversations, trace.rows):
        allowed = max(1, int(0.05 * row.input_length))  # type: ignore[operator]
        assert abs(len(codec.encode(conv.turns[0])) - row.input_length) <= allowed  # type: ignore[operator]
        assert conv.max_tokens == row.output_length
        assert conv.metadata["arrival_s"] == row.arrival_s
        assert conv.prompt_token_ids is None and not conv.raw_prompt
        assert conv.category in {c.category for c in load_sample()}
    assert got.warnings == []


def test_rows_sharing_leading_hashes_share_leading_text(tmp_path: Path, codec: Codec) -> None:
    trace = _bailian(tmp_path, [
        {"input_length": 48, "hash_ids": [1, 2, 3]},
        {"input_length": 60, "hash_ids": [1, 2, 9, 10]},  # the first two blocks of the row above
        {"input_length": 40, "hash_ids": [7, 2, 3]},  # the same ids, but not from the first position: nothing
        {"input_length": 20, "hash_ids": [1, 5]},  # one block
    ])
    a, b, c, d = trace_conversations(trace, TraceSpec(path="t"), load_sample(), codec).conversations
    blocks = codec.encode(a.turns[0])
    two = _common(a.turns[0], b.turns[0])
    assert len(codec.encode(two)) >= 32 - 1  # two 16-token blocks, give or take the boundary token
    assert b.metadata["shared_tokens"] == 32 and d.metadata["shared_tokens"] == 16
    assert d.turns[0].startswith(_common(a.turns[0], d.turns[0])) and len(
        codec.encode(_common(a.turns[0], d.turns[0]))) >= 15
    assert c.metadata["shared_tokens"] == 0
    assert codec.encode(c.turns[0])[:4] != blocks[:4]
    # Each row's own text goes on where the last one stopped, so unshared text does not repeat.
    assert len(_common(b.turns[0][len(two):], c.turns[0])) < 10


def test_a_follow_up_begins_with_its_parents_prompt(tmp_path: Path, codec: Codec) -> None:
    trace = _bailian(tmp_path, [
        {"input_length": 30},
        {"input_length": 25},
        {"input_length": 80, "parent_chat_id": 0, "turn": 2},
        {"input_length": 120, "parent_chat_id": 2, "turn": 3},
    ])
    root, other, second, third = trace_conversations(trace, TraceSpec(path="t"), load_sample(),
                                                     codec).conversations
    assert second.turns[0].startswith(root.turns[0])
    assert third.turns[0].startswith(second.turns[0])
    assert not other.turns[0].startswith(root.turns[0][:20])
    assert (second.metadata["parent_chat_id"], second.metadata["turn"]) == (0, 2)
    assert third.metadata["shared_tokens"] == 80


def test_the_traces_own_text_is_sent_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "aiperf.jsonl"
    rows = [
        {"timestamp": 0, "text_input": "Translate 'good morning' into French.", "output_length": 9},
        {"timestamp": 250, "output_length": 4, "messages": [
            {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a prime."},
            {"role": "assistant", "content": "7"}, {"role": "user", "content": "Another?"}]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    text, chat = trace_conversations(read_trace(path), TraceSpec(path="t"), None, None).conversations
    assert text.turns == ["Translate 'good morning' into French."] and text.max_tokens == 9
    assert chat.system == "Be brief." and chat.turns == ["Name a prime.", "Another?"]
    assert chat.metadata["arrival_s"] == pytest.approx(0.25) and chat.category == "trace"


def test_random_tokens_only_when_asked_and_with_the_warning(tmp_path: Path) -> None:
    trace = _bailian(tmp_path, [{"input_length": 40, "hash_ids": [1, 2, 3]},
                                {"input_length": 50, "hash_ids": [1, 2, 4, 5]}])
    vocab = vocab_from_model(TARGET)
    got = trace_conversations(trace, TraceSpec(path="t", random_tokens=True), None, None, vocab=vocab, seed=3)
    a, b = got.conversations
    assert a.prompt_token_ids is not None and b.prompt_token_ids is not None
    assert (len(a.prompt_token_ids), len(b.prompt_token_ids)) == (40, 50)
    assert a.prompt_token_ids[:32] == b.prompt_token_ids[:32] and a.prompt_token_ids[32:] != b.prompt_token_ids[32:40]
    assert not set(a.prompt_token_ids + b.prompt_token_ids) & set(vocab[1])
    assert a.raw_prompt and a.category == "random" and a.metadata["synthetic"]
    assert got.warnings == [SYNTHETIC_BIAS]
    again = trace_conversations(trace, TraceSpec(path="t", random_tokens=True), None, None, vocab=vocab, seed=3)
    assert again.conversations == got.conversations


def test_the_category_mix_is_the_datasets_unless_given(tmp_path: Path, codec: Codec) -> None:
    trace = _bailian(tmp_path, [{"input_length": 10} for _ in range(60)])
    own = trace_conversations(trace, TraceSpec(path="t"), load_sample(), codec).conversations
    assert len({c.category for c in own}) >= 6  # 11 categories of 7 prompts each, drawn 60 times
    given = TraceSpec(path="t", category_mix={"coding": 3, "math": 1, "writing": 0})
    mixed = trace_conversations(trace, given, load_sample(), codec).conversations
    cats = [c.category for c in mixed]
    assert set(cats) == {"coding", "math"} and cats.count("coding") > cats.count("math")
    with pytest.raises(InputError, match=r"no category poetry in the dataset; available: .*coding"):
        trace_conversations(trace, TraceSpec(path="t", category_mix={"poetry": 1}), load_sample(), codec)


def test_a_small_dataset_warns_that_its_text_repeats(tmp_path: Path, codec: Codec) -> None:
    trace = _bailian(tmp_path, [{"input_length": 400} for _ in range(4)])
    got = trace_conversations(trace, TraceSpec(path="t", category_mix={"coding": 1}), load_sample(), codec)
    assert any("coding text is shorter than the trace asks" in w for w in got.warnings)


def test_refusals_name_the_row_and_the_fix(tmp_path: Path, codec: Codec) -> None:
    lengths_only = _bailian(tmp_path, [{"input_length": 10}])
    with pytest.raises(InputError, match="name a dataset to fill them"):
        trace_conversations(lengths_only, TraceSpec(path="t"), None, None)
    failed = _bailian(tmp_path, [{"input_length": 10, "output_length": 0}])
    with pytest.raises(InputError, match="line 1: output_length 0 is a request that failed"):
        trace_conversations(failed, TraceSpec(path="t"), load_sample(), codec)
    with pytest.raises(InputError, match=r"re-counts to .* widen workload.trace.length_tolerance"):
        off = Codec(encode=lambda text: [0] * (2 * len(codec.encode(text))), decode=codec.decode)
        trace_conversations(lengths_only, TraceSpec(path="t"), load_sample(), off)
