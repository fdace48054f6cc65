"""Acceptance per phase of a phase-shift workload (metrics/phases.py), on records made here: phases in the order
they began, each round's halves by send time pooled over the rounds, warm-up and unphased requests left out."""

from __future__ import annotations

from specmeter.metrics.phases import phase_breakdown
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.sd import SDCounts


def counts(steps: int, accepted: int) -> SDCounts:
    return SDCounts(source="per_request", num_steps=steps, num_draft_tokens=steps * 2, num_accepted_tokens=accepted)


def record(i: int, phase: str | None, start: float, sd: SDCounts | None, repeat: int = 0,
           warmup: bool = False) -> RequestRecord:
    return RequestRecord(config_id="k2", point_id="c1", repeat=repeat, conversation_id=f"q{i}", ok=True,
                         phase=phase, start_s=start, sd=sd, warmup=warmup)


def test_phases_come_in_the_order_they_began_with_each_rounds_halves_pooled() -> None:
    records = []
    for rep in (0, 1):  # the chat phase is listed first, as records may be: the send times order them
        records += [record(10 + i, "chat", 10.0 + i, counts(10, 2), rep) for i in range(4)]
        records += [record(i, "code", 1.0 + i, counts(10, 16 if i < 2 else 8), rep) for i in range(4)]
    records += [record(99, "code", 0.0, counts(10, 20), warmup=True), record(98, None, 5.0, counts(10, 20))]
    found = phase_breakdown("k2", "c1", records)
    assert found is not None and [p.phase for p in found.phases] == ["code", "chat"]
    code, chat = found.phases
    assert (code.started_s, chat.started_s) == (1.0, 10.0) and code.requests == chat.requests == 8
    assert code.first_half is not None and code.second_half is not None
    assert code.first_half.acceptance_length == 1 + 16 / 10 and code.second_half.acceptance_length == 1 + 8 / 10
    assert code.acceptance.al_step_weighted == 1 + 12 / 10 and chat.acceptance.al_step_weighted == 1 + 2 / 10
    assert code.drafted_per_step == 2


def test_requests_sent_in_no_phase_give_no_breakdown() -> None:
    assert phase_breakdown("k2", "c1", [record(0, None, 0.0, counts(4, 4))]) is None
