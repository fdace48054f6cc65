"""Custom JSONL loader: accepted shapes, and one-line errors naming file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from data_fixtures import write_jsonl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmeter.common.errors import InputError
from specmeter.data.jsonl import load_jsonl


def test_prompt_rows_with_optional_fields_and_extras(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "data.jsonl", [
        {"prompt": "Hello there", "id": "a", "category": "chat", "max_tokens": 64, "lang": "en"},
        {"prompt": "Second", "system": "Be brief."},
    ])
    first, second = load_jsonl(path)
    assert (first.id, first.category, first.turns, first.max_tokens) == ("a", "chat", ["Hello there"], 64)
    assert first.metadata == {"lang": "en"}
    assert second.system == "Be brief." and second.category == "default"
    assert first.id != second.id


def test_messages_become_system_and_user_turns(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "chat.jsonl", [{"messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "First question"},
        {"role": "user", "content": [{"type": "text", "text": "Second "}, {"type": "text", "text": "question"}]},
        {"role": "assistant", "content": "A reference answer"},
    ]}])
    (conversation,) = load_jsonl(path)
    assert conversation.system == "You are terse."
    assert conversation.turns == ["First question", "Second question"]
    assert conversation.metadata["reference_reply"] == "A reference answer"


def test_turns_rows_are_accepted(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [{"id": "x", "turns": ["one", "two"]}])
    assert load_jsonl(path)[0].turns == ["one", "two"]


def _error(tmp_path: Path, rows: list, name: str = "data.jsonl") -> str:
    path = write_jsonl(tmp_path / name, rows)
    with pytest.raises(InputError) as caught:
        load_jsonl(path)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_assistant_message_in_the_middle_is_rejected_with_the_reason(tmp_path: Path) -> None:
    message = _error(tmp_path, [
        {"prompt": "fine"},
        {"messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": "And then?"},
        ]},
    ])
    assert "data.jsonl line 2" in message
    assert 'field "messages[1]"' in message
    assert "regenerated" in message


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"category": "x"}, "prompt"),
        ({"prompt": ""}, "prompt"),
        ({"prompt": 3}, "prompt"),
        ({"prompt": "a", "messages": [{"role": "user", "content": "b"}]}, "prompt"),
        ({"turns": []}, "turns"),
        ({"turns": ["ok", ""]}, "turns"),
        ({"prompt": "a", "max_tokens": 0}, "max_tokens"),
        ({"prompt": "a", "max_tokens": "many"}, "max_tokens"),
        ({"prompt": "a", "id": ["x"]}, "id"),
        ({"prompt": "a", "category": {"x": 1}}, "category"),
        ({"messages": "hello"}, "messages"),
        ({"messages": [{"role": "assistant", "content": "x"}]}, "messages[0]"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0]"),
        ({"messages": [{"role": "user", "content": "x"}, {"role": "system", "content": "y"}]}, "messages[1]"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}, "messages[0].content"),
        ({"messages": [{"role": "system", "content": "only system"}]}, "messages"),
        ({"messages": [{"role": "user", "content": "x"}], "system": "y"}, "system"),
    ],
)
def test_bad_rows_name_file_line_and_field(tmp_path: Path, row: dict, field: str) -> None:
    message = _error(tmp_path, [{"prompt": "good row"}, row])
    assert message.startswith(str(tmp_path / "data.jsonl") + " line 2:")
    assert f'field "{field}"' in message


def test_invalid_json_and_non_object_lines_name_the_line(tmp_path: Path) -> None:
    assert " line 3:" in _error(tmp_path, [{"prompt": "a"}, "", "{not json"])
    assert " line 1:" in _error(tmp_path, ["[1, 2]"], name="list.jsonl")


def test_duplicate_ids_name_both_lines(tmp_path: Path) -> None:
    message = _error(tmp_path, [{"prompt": "a", "id": "same"}, {"prompt": "b", "id": "same"}])
    assert "line 2" in message and "line 1" in message and '"id"' in message


def test_empty_and_missing_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(InputError, match="no rows"):
        load_jsonl(empty)
    with pytest.raises(InputError, match="not found"):
        load_jsonl(tmp_path / "absent.jsonl")


def test_non_utf8_file_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "latin.jsonl"
    path.write_bytes(b'{"prompt": "caf\xe9"}\n')
    with pytest.raises(InputError, match="UTF-8"):
        load_jsonl(path)


def _check_only_input_errors(tmp_path: Path, text: str) -> None:
    path = tmp_path / "fuzz.jsonl"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        conversations = load_jsonl(path)
    except InputError as exc:
        assert "\n" not in str(exc)
    else:
        assert conversations and all(c.turns for c in conversations)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(lines=st.lists(st.text(max_size=60), max_size=6))
def test_arbitrary_text_lines_raise_only_input_errors(tmp_path: Path, lines: list[str]) -> None:
    _check_only_input_errors(tmp_path, "\n".join(lines))


any_text = st.text(max_size=20) | st.text(st.characters(exclude_categories=()), max_size=4)  # incl. surrogates
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | any_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
message_like = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "developer", "tool", 3]), "content": json_values}
)
row_like = st.dictionaries(
    st.sampled_from(["prompt", "turns", "messages", "id", "category", "system", "max_tokens", "other"]),
    json_values | st.lists(message_like, max_size=4) | st.lists(st.text(max_size=10), max_size=3),
    max_size=5,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(rows=st.lists(row_like, min_size=1, max_size=4))
def test_arbitrary_json_rows_raise_only_input_errors(tmp_path: Path, rows: list[dict]) -> None:
    _check_only_input_errors(tmp_path, "\n".join(json.dumps(row) for row in rows))


def test_unpaired_surrogate_escape_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "sur.jsonl"
    path.write_text('{"prompt": "ok \\ud83d\\ude00"}\n{"prompt": "bad \\ud800"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="line 2"):
        load_jsonl(path)
