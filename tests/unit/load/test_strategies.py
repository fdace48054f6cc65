"""What one load point sends (load/point.py, load/kinds/), without a server: the workload cycled up to the
request floor, the registry of load kinds, and the deterministic send plan of each kind's strategy."""

from __future__ import annotations

import math

import pytest

from specmeter.config.models import REQUESTS_PER_SLOT_FLOOR, ConcurrencyPoint, LoadSpec, RatePoint
from specmeter.data.model import Conversation
from specmeter.load.arrivals import arrival_times
from specmeter.load.kinds import KINDS, kind_of
from specmeter.load.kinds.closed import ClosedLoop, ClosedLoopKind
from specmeter.load.kinds.open import OpenLoop, OpenLoopKind
from specmeter.load.point import count_requests, point_conversations


def convs(turns: list[int], prefix: str = "c") -> list[Conversation]:
    """One conversation per entry, with that many turns, ids c0, c1, ..."""
    return [Conversation(id=f"{prefix}{i}", category="qa", turns=[f"q{i}.{t}" for t in range(n)])
            for i, n in enumerate(turns)]


def ids(conversations: list[Conversation]) -> list[str]:
    return [c.id for c in conversations]


def test_count_requests_counts_turns() -> None:
    assert count_requests(convs([1, 3, 2])) == 6
    assert count_requests([]) == 0


def test_closed_loop_point_cycles_the_workload_up_to_the_floor() -> None:
    assert REQUESTS_PER_SLOT_FLOOR == 4
    six = convs([1] * 6)
    out = point_conversations(six, ConcurrencyPoint(concurrency=2), LoadSpec())
    assert ids(out) == ["c0", "c1", "c2", "c3", "c4", "c5", "c0#2", "c1#2"]
    assert count_requests(out) == 8
    # a repeated pass is the same conversation under a new id
    assert out[6].turns == six[0].turns and out[6].category == six[0].category
    # one conversation at concurrency 3: twelve passes
    one = point_conversations(convs([1]), ConcurrencyPoint(concurrency=3), LoadSpec())
    assert ids(one) == ["c0"] + [f"c0#{n}" for n in range(2, 13)]


def test_a_workload_at_or_above_the_floor_is_sent_once_whole() -> None:
    eight = convs([1] * 8)
    assert point_conversations(eight, ConcurrencyPoint(concurrency=2), LoadSpec()) == eight
    big = convs([1] * 20)
    assert point_conversations(big, ConcurrencyPoint(concurrency=1), LoadSpec()) == big  # never truncated


def test_the_floor_counts_requests_and_stops_at_the_first_conversation_that_reaches_it() -> None:
    # 1 + 3 + 2 = 6 requests in one pass; concurrency 2 needs 8: c0#2 (7), c1#2 (10) and no more
    out = point_conversations(convs([1, 3, 2]), ConcurrencyPoint(concurrency=2), LoadSpec())
    assert ids(out) == ["c0", "c1", "c2", "c0#2", "c1#2"]
    assert count_requests(out) >= 2 * REQUESTS_PER_SLOT_FLOOR
    assert count_requests(out[:-1]) < 2 * REQUESTS_PER_SLOT_FLOOR


def test_rate_points_have_a_floor_only_with_a_cap_and_a_length_with_duration() -> None:
    three = convs([1] * 3)
    assert point_conversations(three, RatePoint(rate=5), LoadSpec()) == three  # no slots: no floor
    capped = point_conversations(three, RatePoint(rate=5, max_concurrency=2), LoadSpec())
    assert count_requests(capped) == 2 * REQUESTS_PER_SLOT_FLOOR
    timed = point_conversations(three, RatePoint(rate=2.5), LoadSpec(duration_s=3))
    assert len(timed) == math.ceil(2.5 * 3)
    assert ids(timed)[:4] == ["c0", "c1", "c2", "c0#2"]
    # a closed-loop point with duration_s still gets its floor here; the strategy cycles on for the time
    assert ids(point_conversations(three, ConcurrencyPoint(concurrency=1), LoadSpec(duration_s=60))) == [
        "c0", "c1", "c2", "c0#2"]


def test_point_conversations_is_deterministic_and_empty_stays_empty() -> None:
    work = convs([2, 1, 1])
    point = ConcurrencyPoint(concurrency=4)
    assert point_conversations(work, point, LoadSpec()) == point_conversations(work, point, LoadSpec())
    assert point_conversations([], point, LoadSpec()) == []


def test_strategy_registry_and_plans() -> None:
    load = LoadSpec(seed=5)
    assert KINDS["concurrency"] is ClosedLoopKind and KINDS["rate"] is OpenLoopKind
    assert isinstance(kind_of(ConcurrencyPoint(concurrency=2)).strategy(load), ClosedLoop)
    assert isinstance(kind_of(RatePoint(rate=1.0)).strategy(load), OpenLoop)
    work = convs([1] * 5)
    closed = ClosedLoop(ConcurrencyPoint(concurrency=2), load)
    assert list(closed.plan(work, seed="x")) == [(c, None) for c in work]  # slots free up, no clock
    point = RatePoint(rate=4.0, arrival="gamma", burstiness=0.5)
    planned = list(OpenLoop(point, load).plan(work, seed="5:" + point.id))
    assert [c for c, _ in planned] == work
    times = [t for _, t in planned]
    assert times == arrival_times("gamma", 4.0, 5, "5:" + point.id, 0.5)
    assert times == [t for _, t in OpenLoop(point, load).plan(work, seed="5:" + point.id)]  # same seed, same times
    assert times != [t for _, t in OpenLoop(point, load).plan(work, seed="6:" + point.id)]


@pytest.mark.parametrize("n", [1, 2, 7])
def test_every_conversation_of_the_workload_is_in_the_point(n: int) -> None:
    work = convs([1, 2] * 3)
    out = point_conversations(work, ConcurrencyPoint(concurrency=n), LoadSpec())
    assert out[: len(work)] == work
    assert count_requests(out) >= n * REQUESTS_PER_SLOT_FLOOR
    assert len(set(ids(out))) == len(out)
