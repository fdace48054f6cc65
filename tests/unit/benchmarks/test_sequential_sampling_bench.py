"""benchmarks/sequential_sampling.py --simulate: the stopping rules compared on the same simulated points."""

from __future__ import annotations

import pytest
from bench_script import load


def test_the_simulation_reads_every_rule_off_the_same_points_and_prints_the_table(
        capsys: pytest.CaptureFixture[str]) -> None:
    bench = load("sequential_sampling")
    table = bench.simulate(points=6)
    assert set(table) == {(n, r) for n in bench.SIM_NOISES for r in bench.SIM_RATIOS}
    for rules in table.values():
        (old_n, old_w), (new_n, new_w), _ = (rules[name] for name in bench.SIM_RULES)
        assert new_n <= old_n  # the zone's futility stops wherever futility does, on the same looks
        assert 0.0 <= old_w <= 1.0 and 0.0 <= new_w <= 1.0
    assert bench.wrong_beyond_zone(1.05, chosen=False) and bench.wrong_beyond_zone(0.95, chosen=True)
    assert not bench.wrong_beyond_zone(1.02, chosen=False) and not bench.wrong_beyond_zone(0.98, chosen=True)
    bench.simulated(2)
    out = capsys.readouterr().out
    assert "| noise | true ratio | requests old / new / projected |" in out and "wrong beyond the zone" in out
