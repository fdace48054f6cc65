"""BurstGPT CSV (HPMLL/BurstGPT, README.md "Schema"): `Timestamp` in seconds from 0:00:00 on the trace's first day,
`Model` (ChatGPT or GPT-4), `Request tokens`, `Response tokens`, `Total tokens` (their sum), `Log Type`
(Conversation log or API log), and in the newer files `Session ID` (conversation mode only) and `Elapsed time`.

Arrivals count from the first request, not from midnight. `Response tokens` of 0 marks a request that failed (the
`_without_fails` files leave them out); such rows are kept as the trace has them. `Total tokens` is the sum of the
two lengths and `Elapsed time` how long the original service took, neither of which a replay sends, so neither is
read.
"""

from __future__ import annotations

from collections.abc import Iterator

from specmeter.data._rows import at
from specmeter.data.traces._fields import Stamped, cell, iter_csv, optional_cell, seconds, shown, tokens

COLUMNS = ("Timestamp", "Request tokens", "Response tokens")


def parse(text: str, source: str) -> Iterator[Stamped]:
    """The requests of a BurstGPT CSV text, in file order."""
    for line, record in iter_csv(text, source, COLUMNS, "a BurstGPT trace"):
        where = at(source, line)
        written = cell(record, "Timestamp", where)
        yield Stamped(line, seconds(written, where, "Timestamp"), shown(written), {
            "input_length": tokens(cell(record, "Request tokens", where), where, "Request tokens"),
            "output_length": tokens(cell(record, "Response tokens", where), where, "Response tokens"),
            "model": optional_cell(record, "Model"),
            "log_type": optional_cell(record, "Log Type"),
            "session_id": optional_cell(record, "Session ID"),
        })
