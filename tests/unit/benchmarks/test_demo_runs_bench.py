"""benchmarks/demo_runs.py's handover cost: at concurrency 1 in turns, a request right after its own server's
previous one against the same configuration's same prompt right after another server's."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
from bench_script import load

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def demo_runs() -> ModuleType:
    return load("demo_runs")


def _execution(d: Path, sent: list[tuple[int, str, str, float]], turned: bool = True) -> None:
    """Records in the order sent: (repeat, configuration, prompt, seconds for 100 tokens); each cell's capture."""
    d.mkdir(parents=True)
    with (d / "requests.jsonl").open("w") as f:
        for repeat, config, prompt, seconds in sent:
            f.write(json.dumps({"point_id": "c1", "repeat": repeat, "config_id": config, "conversation_id": prompt,
                                "turn": 0, "warmup": False, "ok": True, "e2e_s": seconds,
                                "output_tokens": 100}) + "\n")
    for repeat, config in {(r, c) for r, c, _, _ in sent}:
        (d / "captures" / config).mkdir(parents=True, exist_ok=True)
        (d / "captures" / config / f"c1-r{repeat}.json").write_text(
            json.dumps({"attempts": [{"turns_with": ["other"] if turned else []}]}))


def test_a_request_after_its_own_server_is_compared_with_the_same_prompt_after_another(
        demo_runs: ModuleType, tmp_path: Path) -> None:
    # round 0: A p1, B p1, B p2 (after itself), A p2; round 1: B p1, A p1, A p2 (after itself), B p2
    # after its own server's request a request takes 1.0 s, after the other's 1.1 s
    run = tmp_path / "run"
    _execution(run, [(0, "A", "p1", 1.0), (0, "B", "p1", 1.1), (0, "B", "p2", 1.0), (0, "A", "p2", 1.1),
                     (1, "B", "p1", 1.0), (1, "A", "p1", 1.1), (1, "A", "p2", 1.0), (1, "B", "p2", 1.1)])
    cost = demo_runs.handover([run])
    assert cost is not None
    ratio, _, pairs = cost
    assert pairs == 2 and ratio == pytest.approx(1.1)  # A p2 and B p2 ran both ways; each round's first is left out
    _execution(tmp_path / "blocked", [(0, "A", "p1", 1.0), (0, "A", "p2", 1.0), (0, "B", "p1", 1.1)], turned=False)
    assert demo_runs.handover([tmp_path / "blocked"]) is None  # cells that did not take turns are not read
