"""MT-Bench and Spec-Bench question files: the two classic SD evaluation sets, in one shape.

Both ship a question.jsonl with question_id, category and turns (MT-Bench: 80 two-turn questions in 8
categories; Spec-Bench: 480 questions in 13 categories, MT-Bench's plus translation, summarization, qa,
math_reasoning, rag). Other keys (reference answers) go to metadata and are never sent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from specmeter.common.errors import InputError
from specmeter.data._rows import (
    at,
    check_unique_ids,
    make_conversation,
    read_jsonl,
    require_turns,
    row_error,
)
from specmeter.data.model import Conversation

QuestionSet = Literal["mt-bench", "spec-bench"]
QUESTION_SETS: tuple[str, ...] = ("mt-bench", "spec-bench")
QUESTION_FILE = "question.jsonl"


def load_question_file(path: str | Path, name: QuestionSet = "mt-bench") -> list[Conversation]:
    """Load an MT-Bench or Spec-Bench question.jsonl (or a directory holding one); ids are <name>-<question_id>."""
    if name not in QUESTION_SETS:
        raise InputError(f"unknown question set {name!r}; choose one of {', '.join(QUESTION_SETS)}")
    data_file = Path(path)
    if data_file.is_dir():
        data_file = data_file / QUESTION_FILE
    conversations = []
    ids = []
    for line, row in read_jsonl(data_file):
        where = at(data_file, line)
        for field in ("question_id", "category", "turns"):
            if field not in row:
                raise row_error(where, field, "is missing", f"each {name} row needs question_id, category and turns")
        question_id, category = row["question_id"], row["category"]
        if isinstance(question_id, bool) or not isinstance(question_id, (int, str)) or not str(question_id).strip():
            raise row_error(where, "question_id", "must be an integer or a string")
        if not isinstance(category, str) or not category.strip():
            raise row_error(where, "category", "must be a non-blank string")
        metadata = {key: value for key, value in row.items() if key not in ("question_id", "category", "turns")}
        metadata["question_id"] = question_id
        conversation = make_conversation(
            where,
            id=f"{name}-{question_id}",
            category=category,
            turns=require_turns(row["turns"], where),
            metadata=metadata,
        )
        conversations.append(conversation)
        ids.append((conversation.id, where))
    if not conversations:
        raise InputError(f"{data_file}: no rows found; check that this is the {name} question.jsonl")
    check_unique_ids(ids, data_file)
    return conversations
