"""benchmarks/pairing_noise.py: the order each design sends its requests in, and the ratios it reports."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "pairing_noise.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pairing_noise", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def sent(bench: ModuleType, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every request the designs send, as (server, prompt), in order; each takes 1 s for 10 tokens."""
    calls: list[tuple[str, str]] = []

    def send(url: str, model: str, prompt: str, max_tokens: int) -> tuple[int, float]:
        calls.append((url, prompt))
        return 10, 1.0

    monkeypatch.setattr(bench, "send", send)
    return calls


def test_blocked_sends_every_prompt_to_one_server_then_to_the_other(bench: ModuleType,
                                                                    sent: list[tuple[str, str]]) -> None:
    out = bench.blocked_round(["a", "b"], "m", ["p1", "p2", "p3"], [1, 0], 8)
    assert sent == [("b", "p1"), ("b", "p2"), ("b", "p3"), ("a", "p1"), ("a", "p2"), ("a", "p3")]
    assert len(out[0]) == len(out[1]) == 3


def test_alternated_sends_each_prompt_to_both_servers_first_one_then_the_other(bench: ModuleType,
                                                                              sent: list[tuple[str, str]]) -> None:
    out = bench.alternated_round(["a", "b"], "m", ["p1", "p2", "p3"], [0, 1], 8)
    assert sent == [("a", "p1"), ("b", "p1"), ("b", "p2"), ("a", "p2"), ("a", "p3"), ("b", "p3")]
    assert len(out[0]) == len(out[1]) == 3


def test_rate_is_tokens_over_summed_time_and_equal_pairs_have_no_spread(bench: ModuleType) -> None:
    assert bench.rate([(10, 1.0), (30, 1.0)]) == pytest.approx(20.0)
    a = [(10, 1.0), (20, 1.0)]
    assert bench.per_request_sd(a, [(t, 2 * s) for t, s in a]) == pytest.approx(0.0)  # each B half as fast
    assert bench.per_request_sd(a, [(10, 1.0), (20, 2.0)]) == pytest.approx(0.25)  # ratios 1 and 0.5
