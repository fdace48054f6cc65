"""load_workload: one name -> loader, with clear errors for names, paths and options."""

from __future__ import annotations

from pathlib import Path

import pytest
from data_fixtures import write_jsonl

from specmeter.common.errors import InputError
from specmeter.data.registry import WORKLOADS, load_workload

EXPECTED_NAMES = {"sample", "jsonl", "speed-bench", "gsm8k", "mt-bench", "spec-bench", "sonnet", "random"}


def test_all_names_are_registered() -> None:
    assert set(WORKLOADS) == EXPECTED_NAMES


def test_unknown_name_lists_the_valid_ones() -> None:
    with pytest.raises(InputError) as caught:
        load_workload("sharegpt")
    assert all(name in str(caught.value) for name in EXPECTED_NAMES)


@pytest.mark.parametrize("name", sorted(n for n, s in WORKLOADS.items() if s.needs_path))
def test_missing_path_is_an_input_error(name: str) -> None:
    with pytest.raises(InputError, match="needs a path"):
        load_workload(name)


def test_dispatch_and_options(tmp_path: Path) -> None:
    assert load_workload("sample")
    path = write_jsonl(tmp_path / "w.jsonl", [{"prompt": "hi"}])
    assert load_workload("jsonl", str(path))[0].turns == ["hi"]
    question = write_jsonl(tmp_path / "question.jsonl", [{"question_id": 1, "category": "qa", "turns": ["Why?"]}])
    assert load_workload("spec-bench", str(question))[0].id == "spec-bench-1"
    assert len(load_workload("random", num_prompts=2, input_len=3, vocab_size=9)) == 2


def test_option_errors_name_the_accepted_options(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="vocab_size"):
        load_workload("random", vocab=100)
    with pytest.raises(InputError, match="count_tokens"):
        load_workload("sonnet", str(tmp_path / "poem.txt"))
    with pytest.raises(InputError, match="takes no path"):
        load_workload("sample", "somewhere.jsonl")
