"""Azure LLM inference trace CSV (Azure/AzurePublicDataset, AzureLLMInferenceDataset2023.md and 2024.md):
`TIMESTAMP`, the invocation time as an absolute date and time, `ContextTokens` and `GeneratedTokens`.

The 2023 files write the time without a zone and with seven decimals (2023-11-16 18:17:03.9799600), the 2024
files with a UTC offset and the decimals left out on a whole second (2024-05-12 00:00:00+00:00); both read, the
seventh decimal (100 ns) dropped. Arrivals are the seconds since the first row's time; a file that mixes times with
and without a zone is refused, as their difference has no meaning.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from specmeter.data._rows import at, row_error
from specmeter.data.traces._fields import Stamped, cell, iter_csv, shown, tokens

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


def parse(text: str, source: str) -> Iterator[Stamped]:
    """The requests of an Azure LLM inference CSV text, in file order."""
    first: tuple[datetime, int] | None = None
    for line, record in iter_csv(text, source, COLUMNS, "an Azure LLM inference trace"):
        where = at(source, line)
        written = cell(record, "TIMESTAMP", where)
        moment = _moment(written, where)
        if first is None:
            first = (moment, line)
        if (moment.tzinfo is None) != (first[0].tzinfo is None):
            raise row_error(where, "TIMESTAMP", f"{shown(written)} {'has no' if moment.tzinfo is None else 'has a'} "
                            f"UTC offset where line {first[1]}'s {'has one' if first[0].tzinfo else 'has none'}",
                            "write every time of the file in one form")
        yield Stamped(line, (moment - first[0]).total_seconds(), shown(written), {
            "input_length": tokens(cell(record, "ContextTokens", where), where, "ContextTokens"),
            "output_length": tokens(cell(record, "GeneratedTokens", where), where, "GeneratedTokens"),
        })


def _moment(written: str, where: str) -> datetime:
    try:
        return datetime.fromisoformat(written)
    except ValueError:
        raise row_error(where, "TIMESTAMP", f"{shown(written)} is not a date and time, e.g. "
                        "2023-11-16 18:17:03.9799600") from None
