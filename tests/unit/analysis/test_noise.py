"""The run's own round and instance noise (analysis/noise.py): a cell's rounds read against the run's other cells,
so two rounds that agree by chance do not make an interval the next run falls outside of, and a restart's effect,
where rounds ran on two instances, widens what the verdict reads."""

from __future__ import annotations

import math
from statistics import NormalDist

import pytest
from test_recommend import sweep

from specmeter.analysis.decide import analyze
from specmeter.analysis.headtohead import decision_bounds
from specmeter.analysis.noise import RoundNoise
from specmeter.analysis.recommend import recommend
from specmeter.analysis.student import t_quantile
from specmeter.report.recommendation import deploy_lines, range_text
from specmeter.schemas.analysis import Ratio
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary

K2, K4 = "draft_model-k2", "draft_model-k4"


def _ratio(summary: RunSummary, config: str, point: str) -> Ratio:
    return next(s.output_throughput for s in summary.analysis.speedups if s.config_id == config and s.point_id == point)


def _noisy_run(agreeing: float = 1.40) -> RunSummary:
    """K = 2 at c1 whose two rounds agree exactly, beside five cells whose rounds lie 5-8% apart."""
    summary, _ = sweep({K2: {"c1": [(agreeing,) * 3, (agreeing,) * 3], "c4": [(1.10,) * 3, (1.04,) * 3],
                             "c16": [(0.96,) * 3, (0.90,) * 3]},
                        K4: {"c1": [(1.38,) * 3, (1.30,) * 3], "c4": [(0.95,) * 3, (0.89,) * 3],
                             "c16": [(0.85,) * 3, (0.79,) * 3]}}, {"c1": 1.0, "c4": 4.0, "c16": 16.0})
    return summary


def test_a_cell_whose_rounds_agree_by_chance_reads_the_run_s_round_spread() -> None:
    summary = _noisy_run()
    agreeing = _ratio(summary, K2, "c1")
    assert agreeing.repeat_values[0] == pytest.approx(agreeing.repeat_values[1])
    assert agreeing.rounds_low is not None and agreeing.rounds_high is not None
    # The run's other cells moved 5-8% between rounds: this one's doubt is of that order, not zero.
    assert agreeing.rounds_high / agreeing.rounds_low > 1.05
    low, high = decision_bounds(agreeing)
    assert low is not None and high is not None and low <= agreeing.rounds_low and high >= agreeing.rounds_high
    assert agreeing.noise_df is not None and agreeing.noise_df >= 5  # its own round and the five others'


def test_the_rerun_interval_is_the_rounds_interval_for_two_runs_and_centred_on_the_estimate() -> None:
    ratio = _ratio(_noisy_run(), K4, "c4")
    assert ratio.value is not None and ratio.rerun_low is not None and ratio.rerun_high is not None
    assert ratio.rounds_low is not None and ratio.rounds_high is not None
    assert ratio.rerun_low < ratio.rounds_low < ratio.value < ratio.rounds_high < ratio.rerun_high
    assert math.log(ratio.rerun_high / ratio.value) == pytest.approx(math.log(ratio.value / ratio.rerun_low))
    # Two estimates of the same truth differ by sqrt(2) times one's error; where the next one lands is read with
    # Student's t on the noise's degrees of freedom, the mean's doubt (a decision's) with the normal quantile.
    assert ratio.noise_df is not None and ratio.confidence == 0.95
    widened = math.sqrt(2) * t_quantile(0.95, ratio.noise_df) / NormalDist().inv_cdf(0.975)
    assert math.log(ratio.rerun_high / ratio.value) / math.log(ratio.rounds_high / ratio.value) == pytest.approx(
        widened, rel=0.01)


def test_a_gain_inside_the_round_noise_is_no_verdict() -> None:
    """1.03x with a tight interval over requests, in a run whose rounds move 5-8%: not "pays"."""
    summary = _noisy_run(agreeing=1.03)
    speedup = next(s for s in summary.analysis.speedups if s.config_id == K2 and s.point_id == "c1")
    assert speedup.output_throughput.ci95_low is not None and speedup.output_throughput.ci95_low > 1.0
    assert speedup.verdict == "unclear"


def _instances_run(shift: float) -> tuple[RunSummary, list[RequestRecord]]:
    """Four rounds per cell alternating two instances; every instance-2 round is `shift` faster."""
    base = {K2: {"c1": 1.40, "c4": 1.10}, K4: {"c1": 1.35, "c4": 0.92}}
    wobble = [1.0, 1.0, 1.01, 1.01]  # rounds on the same instance differ by 1%
    speedups = {cid: {p: [(v * w * (shift if r % 2 else 1.0),) * 3 for r, w in enumerate(wobble)]
                      for p, v in per.items()} for cid, per in base.items()}
    summary, records = sweep(speedups, {"c1": 1.0, "c4": 4.0})  # type: ignore[arg-type]
    for config in summary.configs:
        for p in config.points:
            p.instance = p.repeat % 2
    summary.analysis = analyze(summary, records)
    return summary, records


def test_instances_that_differ_beyond_their_rounds_widen_the_interval() -> None:
    (same, _), (apart, _) = _instances_run(1.0), _instances_run(1.06)
    assert RoundNoise.of(apart.configs).pooled().between > 0
    assert RoundNoise.of(same.configs).pooled().between == pytest.approx(0.0, abs=1e-9)
    for summary in (same, apart):
        assert _ratio(summary, K2, "c1").instances == 2
    tight, wide = _ratio(same, K2, "c1"), _ratio(apart, K2, "c1")
    assert tight.rounds_low and tight.rounds_high and wide.rounds_low and wide.rounds_high
    assert math.log(wide.rounds_high / wide.rounds_low) > 3 * math.log(tight.rounds_high / tight.rounds_low)


def test_one_round_everywhere_adds_nothing_a_round_cannot_show() -> None:
    summary, _ = sweep({K2: {"c1": (1.4, 1.3, 1.5)}}, {"c1": 1.0})
    ratio = _ratio(summary, K2, "c1")
    assert ratio.rounds_low is None and ratio.rerun_low is None
    assert decision_bounds(ratio) == (ratio.ci95_low, ratio.ci95_high)


def test_a_one_run_answer_says_whether_its_intervals_hold_a_restart() -> None:
    two = recommend(*_instances_run(1.0))
    one = recommend(*sweep({K2: {"c1": [(1.4,) * 3, (1.38,) * 3]}}, {"c1": 1.0}))
    assert (two.instances, one.instances) == (2, 1)
    said = {rec.instances: " ".join(line.text for line in deploy_lines(rec)) for rec in (one, two)}
    assert "2 server starts per configuration" in said[2] and "not what a rerun's server starts" in said[1]


def test_two_rounds_each_on_an_instance_of_its_own_read_their_spread_as_a_restarts() -> None:
    """The demo's design: two rounds, one per instance. Within an instance and between instances cannot be told
    apart then, and all the spread counts: the interval is as wide as two rounds that disagree make it."""
    summary, records = sweep({K2: {"c1": [(1.40,) * 3, (1.34,) * 3], "c4": [(1.10,) * 3, (1.04,) * 3]},
                              K4: {"c1": [(1.38,) * 3, (1.30,) * 3], "c4": [(0.95,) * 3, (0.89,) * 3]}},
                             {"c1": 1.0, "c4": 4.0})
    for config in summary.configs:
        for p in config.points:
            p.instance = p.repeat
    summary.analysis = analyze(summary, records)
    ratio = _ratio(summary, K2, "c1")
    assert ratio.instances == 2 and ratio.noise_df == 4 and ratio.rounds_low and ratio.rounds_high
    assert ratio.rounds_high / ratio.rounds_low > 1.06  # the rounds lie 4-6% apart: the mean's doubt is of that order


def test_compare_check_reads_each_runs_rounds_as_its_decisions_do() -> None:
    """Two runs of identical servers differ by what their rounds say they may: the change's interval holds both
    runs' rounds' errors, not only the requests'."""
    from specmeter.analysis.regression import _with_repeats

    z = NormalDist().inv_cdf(0.975)
    run = Ratio(value=1.30, rounds_low=1.30 * math.exp(-0.04 * z), rounds_high=1.30 * math.exp(0.04 * z))
    ref = Ratio(value=1.40, rounds_low=1.40 * math.exp(-0.03 * z), rounds_high=1.40 * math.exp(0.03 * z))
    change = Ratio(value=1.30 / 1.40, ci95_low=0.92, ci95_high=0.94)  # the requests alone: a clear drop
    low, high = _with_repeats(change, run, ref, 0.95)
    assert low is not None and high is not None
    assert math.log(high / (change.value or 1.0)) == pytest.approx(z * 0.05)  # sqrt(0.04^2 + 0.03^2)
    assert high > 1.0 - 0.03  # a 3% bound: no regression the rounds cannot explain


def test_each_measured_range_says_whether_its_choice_held_on_every_server_start() -> None:
    """At c1 the second server start runs K = 4 20% faster than the first, while K = 2 runs alike on both: on one
    of the two instances' rounds alone the choice there is beaten. At c4 K = 2 wins by far on both starts, whatever
    the restart's spread at c1 does to the run's intervals: it held on each."""
    per_round = {K2: {"c1": [1.40] * 4, "c4": [2.00] * 4},
                 K4: {"c1": [1.30, 1.60, 1.30, 1.60], "c4": [0.92] * 4}}
    summary, records = sweep({cid: {p: [(v,) * 3 for v in vs] for p, vs in per.items()}  # type: ignore[misc]
                              for cid, per in per_round.items()}, {"c1": 1.0, "c4": 4.0})
    for config in summary.configs:
        for p in config.points:
            p.instance = p.repeat % 2
    summary.analysis = analyze(summary, records)
    rec = recommend(summary, records)
    assert rec.best is not None
    measured = {pid: s for s in rec.best.segments if s.basis == "measured" for pid in s.point_ids}
    assert measured["c1"].instances == measured["c4"].instances == 2
    assert measured["c1"].beaten_on and all(line.startswith("instance ") and " at c1: " in line
                                            for line in measured["c1"].beaten_on)
    assert measured["c4"].beaten_on == []
    text = {pid: range_text(next(r for r in rec.best.ranges if r.start <= s.start and s.end <= r.end),
                            rec.best.segments) for pid, s in measured.items()}
    assert "not on every server start: instance" in text["c1"]
    if measured["c4"].k != measured["c1"].k:  # a range of its own
        assert "held on each of 2 server starts" in text["c4"]


def test_one_server_start_says_nothing_of_starts() -> None:
    rec = recommend(*sweep({K2: {"c1": [(1.4,) * 3, (1.38,) * 3]}}, {"c1": 1.0}))
    assert rec.best is not None
    assert all(s.instances == 1 and not s.beaten_on for s in rec.best.segments)
    assert all("server start" not in range_text(r, rec.best.segments) for r in rec.best.ranges)
