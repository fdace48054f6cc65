"""benchmarks/pairing_noise.py: the order each design sends its requests in, which requests it marks as sent right
after the other server's, and the ratios it reports."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from bench_script import load

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "pairing_noise.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load("pairing_noise")


class Recorder:
    """A stand-in for the two servers: every request, as (side, prompt), in order; each takes 1 s for 10 tokens."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, str]] = []

    def __call__(self, side: int, prompt: str) -> tuple[int, float]:
        self.calls.append((side, prompt))
        return 10, 1.0


def test_blocked_sends_every_prompt_to_one_server_then_to_the_other(bench: ModuleType) -> None:
    send = Recorder()
    out = bench.blocked(send, ["p1", "p2", "p3"], [1, 0])
    assert send.calls == [(1, "p1"), (1, "p2"), (1, "p3"), (0, "p1"), (0, "p2"), (0, "p3")]
    assert [s[2] for s in out[1]] == [False] * 3  # the first block follows no request of this round
    assert [s[2] for s in out[0]] == [True, False, False]  # the second block's first follows the other server


def test_alternated_sends_each_prompt_to_both_servers_first_one_then_the_other(bench: ModuleType) -> None:
    send = Recorder()
    out = bench.alternated(send, ["p1", "p2", "p3"], [0, 1])
    assert send.calls == [(0, "p1"), (1, "p1"), (1, "p2"), (0, "p2"), (0, "p3"), (1, "p3")]
    assert [s[2] for s in out[1]] == [True, False, True] and [s[2] for s in out[0]] == [False, True, False]


def test_settled_pauses_after_every_request_and_marks_none_as_right_after(bench: ModuleType,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    pauses: list[float] = []
    monkeypatch.setattr(bench.time, "sleep", pauses.append)
    out = bench.alternated(Recorder(), ["p1", "p2"], [0, 1], settle_s=1.5)
    assert pauses == [1.5] * 4
    assert not any(s[2] for side in out.values() for s in side)


def test_ratios_and_the_handover_split(bench: ModuleType) -> None:
    m = bench.Measured(0, "alternated", {0: [(10, 1.0, False), (20, 1.0, True)],
                                         1: [(10, 2.0, True), (20, 1.0, False)]})
    assert bench.rate(m.sent[0]) == pytest.approx(15.0)
    assert m.ratio == pytest.approx((30 / 3.0) / 15.0)
    assert m.per_request_sd == pytest.approx(0.25)  # per-request ratios 0.5 and 1
    assert bench.handover([m]) == (pytest.approx(5.0), pytest.approx(20.0))
