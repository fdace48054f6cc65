"""benchmarks/sequential_sampling.py --simulate: the stopping rules compared on the same simulated points."""

from __future__ import annotations

import pytest
from bench_script import load
from test_recommend import sweep
from test_sequential import K2, K4


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


def test_a_replay_reads_the_zones_futility_as_the_runner_does() -> None:
    """On a run's own rounds: K = 4 about 2% better than K = 2 on a steady machine stops after the first look with
    the zone's futility (the runner's rule), keeping K = 2; without it the point runs on and shows the 2% win, a
    different choice by less than the 3% zone: what the rule gives up, as it says."""
    bench = load("sequential_sampling")
    summary, records = sweep({K2: {"c1": [(1.30, 1.29, 1.31)] * 4}, K4: {"c1": [(1.326, 1.306, 1.346)] * 4}},
                             {"c1": 1.0})
    load_ = summary.plan.load.model_copy(update={"precision": "adaptive", "min_rounds": 2, "max_rounds": 4})
    with_zone = bench.replayed(summary, records, load_, rest=True)
    without = bench.replayed(summary, records, load_, rest=True, zone=False)
    assert with_zone.stop["c1"][0] == 2 < without.stop["c1"][0]
    assert with_zone.requests < without.requests
    picks = [{c.point_id: c.best_config_id for c in run.summary.analysis.choices} for run in (with_zone, without)]
    assert picks == [{"c1": K2}, {"c1": K4}]
    gain = next(h for h in without.summary.analysis.choices[0].evidence if h.config_id == K4 and h.against == K2)
    assert gain.outcome == "beats" and gain.ratio.value is not None and gain.ratio.value < 1 + summary.plan.indifference
