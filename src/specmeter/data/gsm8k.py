"""GSM8K (grade-school math word problems): a common acceptance-length reference in SD papers.

Reads the Hugging Face parquet layout, {path}/main/test-00000-of-00001.parquet, or a parquet file given
directly. The reference answer is kept in metadata (not sent), for anyone checking output quality.
"""

from __future__ import annotations

from pathlib import Path

from specmeter.common.errors import InputError
from specmeter.data._rows import at, make_conversation, read_parquet_rows, require_columns, require_text
from specmeter.data.model import Conversation

TEST_FILE = Path("main") / "test-00000-of-00001.parquet"


def load_gsm8k(path: str | Path) -> list[Conversation]:
    """Load GSM8K test questions as single-turn math prompts, ids gsm8k-<row index>."""
    root = Path(path)
    data_file = root / TEST_FILE if root.is_dir() else root
    if root.is_dir() and not data_file.is_file():
        raise InputError(f"{data_file}: not found; give the GSM8K dataset directory or the parquet file itself")
    rows = read_parquet_rows(data_file)
    if not rows:
        raise InputError(f"{data_file}: no rows found; check that this is the GSM8K test file")
    require_columns(rows, ("question", "answer"), data_file)
    conversations = []
    for index, row in enumerate(rows):
        where = at(data_file, index + 1, "row")
        question = require_text(row["question"], where, "question")
        metadata = {"answer": row["answer"]} if row["answer"] is not None else {}
        conversations.append(
            make_conversation(where, id=f"gsm8k-{index:04d}", category="math", turns=[question], metadata=metadata)
        )
    return conversations
