"""Request records as the metrics read them: the per-request SD stats parsed from each record's final payload
by its engine's stats. Parsing here, not in the client, keeps the client engine-free and lets a stored run be
summarized again by a newer parser."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from specmeter.engines.base import EngineStats
from specmeter.schemas.records import RequestRecord


def with_sd(record: RequestRecord, stats: EngineStats) -> RequestRecord:
    """`record` with `sd`/`sd_raw` from its final payload. A payload the engine's parser cannot read makes the
    request a malformed one (its other numbers are not to be trusted either). A record without a payload is
    returned as it is (a run of specmeter 0.1.0 stored its SD stats already parsed)."""
    if record.final_payload is None:
        return record
    try:
        sd, raw = stats.sd_from_response(record.final_payload)
    except (ValueError, TypeError, KeyError) as exc:
        if record.error_kind is not None:
            return record
        return record.model_copy(update={"ok": False, "error_kind": "malformed",
                                         "error": f"per-request SD stats unreadable: {exc}"})
    return record.model_copy(update={"sd": sd, "sd_raw": raw})


def parse_records(records: Sequence[RequestRecord], stats: Mapping[str, EngineStats]) -> list[RequestRecord]:
    """Every record parsed by the stats of the configuration that served it (`stats` by config id; a
    configuration without an engine kind keeps its records as they are)."""
    return [with_sd(r, found) if (found := stats.get(r.config_id)) is not None else r for r in records]
