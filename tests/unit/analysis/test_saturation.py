"""Saturation on constructed load curves: a closed-loop server whose engine batch is capped (beyond the cap requests
only queue) is found saturated at the first load past the cap and nowhere before it; a server that keeps gaining
throughput is never called saturated, nor is one whose latency is too noisy to show it grows; the ramp stops only
when every configuration has saturated."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from specmeter.analysis.headtohead import Side
from specmeter.analysis.saturation import judge, reading
from specmeter.config.models import SaturationRule
from specmeter.schemas.ramp import RampStep
from specmeter.schemas.records import RequestRecord

RULE = SaturationRule()
TOKENS = 64
LOADS = [1, 2, 4, 8, 16, 32, 64, 128]


def side(load: int, cap: float, *, n: int = 48, noise: float = 0.05, repeats: int = 1, step_s: float = 0.01,
         per_seq_s: float = 0.001, drift: tuple[float, ...] = (), seed: int = 0) -> Side:
    """A closed loop at concurrency `load` on an engine that runs at most `cap` requests at once: a step takes
    step_s + per_seq_s x batch, a request decodes TOKENS steps and, beyond the cap, waits its turn, so throughput
    is batch / step time and E2E = TOKENS x step x load / batch. `drift`: a factor per repeat on every time."""
    rng = np.random.default_rng(seed + load)
    batch = min(load, cap)
    e2e_mean = TOKENS * (step_s + per_seq_s * batch) * load / batch
    requests, totals = {}, {}
    for rep in range(repeats):
        factor = drift[rep] if drift else 1.0
        e2e = e2e_mean * factor * rng.lognormal(0.0, noise, size=n)
        for i, e in enumerate(e2e):
            requests[(rep, f"q{i}", 0)] = RequestRecord(config_id="c", point_id=f"c{load}", repeat=rep,
                                                        conversation_id=f"q{i}", ok=True, ttft_s=e / TOKENS,
                                                        e2e_s=float(e), output_tokens=TOKENS)
        totals[rep] = (float(n * TOKENS), float(e2e.sum()) / load)  # load streams share the wall time
    return Side("c", requests, totals)


def ramp(curves: dict[str, dict[int, Side]], loads: list[int] = LOADS) -> list[RampStep]:
    """Each load against the one below it, in order, as a ramp judges them, until one saturates."""
    steps: list[RampStep] = []
    for lo, hi in itertools.pairwise(loads):
        steps.append(judge(f"c{lo}", lo, f"c{hi}", hi, {cid: (c[lo], c[hi]) for cid, c in curves.items()}, RULE,
                           steps))
        if steps[-1].saturated:
            break
    return steps


def curve(cap: float, **kw: object) -> dict[int, Side]:
    return {load: side(load, cap, **kw) for load in LOADS}  # type: ignore[arg-type]


def test_a_capped_engine_saturates_at_the_first_load_past_its_cap() -> None:
    steps = ramp({"baseline": curve(cap=16)})
    assert [s.saturated for s in steps] == [False] * 4 + [True]  # judged up to c32, saturated there
    last = steps[-1]
    assert (last.lower_point, last.point_id) == ("c16", "c32")
    (r,) = last.readings
    assert r.throughput_low is not None and r.throughput_low <= 1 + RULE.min_gain  # no longer rising
    assert r.latency_low is not None and r.latency_low > 1 + RULE.latency_rise  # while waiting grows
    assert r.e2e_p50.value == pytest.approx(2.0, rel=0.15)  # twice the load, twice the wait
    assert "c32 against c16" in last.why and "throughput" in last.why and "E2E p50" in last.why
    for s in steps[:-1]:  # before the cap, throughput clearly rose at every step
        assert s.readings[0].throughput_low is not None and s.readings[0].throughput_low > 1 + RULE.min_gain


def test_an_engine_that_keeps_gaining_throughput_never_saturates() -> None:
    steps = ramp({"baseline": curve(cap=1e9)})
    assert len(steps) == len(LOADS) - 1 and not any(s.saturated for s in steps)
    top = steps[-1].readings[0]  # latency grows with the batch, but throughput still rises with it
    assert top.latency_low is not None and top.latency_low > 1 + RULE.latency_rise
    assert "not saturated" in steps[-1].why


def test_noise_that_hides_whether_latency_grows_is_no_saturation() -> None:
    # Past the cap, 16 -> 20 in flight: throughput flat, waiting up 25%. Six noisy requests a point cannot show
    # that rise; two hundred quiet ones can.
    noisy = reading("b", side(16, 16, n=6, noise=0.5), side(20, 16, n=6, noise=0.5), RULE)
    assert noisy.latency_low is not None and noisy.latency_high is not None
    assert noisy.latency_low <= 1 + RULE.latency_rise < noisy.latency_high
    assert not noisy.saturated
    clear = reading("b", side(16, 16, n=200, noise=0.05), side(20, 16, n=200, noise=0.05), RULE)
    assert clear.saturated


def test_repeats_that_disagree_widen_the_interval_and_keep_the_ramp_going() -> None:
    agree = reading("b", side(16, 16, repeats=2), side(32, 16, repeats=2), RULE)
    assert agree.saturated
    # The second round of c32 ran 1.8x slower than its first (the machine was busy): per round the latency rose
    # 1.1x and 2.0x, so a rise past 1.1 is not shown and the step is not called saturated.
    drifted = reading("b", side(16, 16, repeats=2), side(32, 16, repeats=2, drift=(0.55, 1.0)), RULE)
    assert len(drifted.e2e_p50.repeat_values) == 2
    assert not drifted.saturated


def test_the_ramp_stops_only_when_every_configuration_has_saturated() -> None:
    curves = {"baseline": curve(cap=16), "draft_model-k2": curve(cap=64, seed=7)}
    steps = ramp(curves)
    assert [s.point_id for s in steps][-1] == "c128" and steps[-1].saturated
    by_step = {s.point_id: {r.config_id: r.saturated for r in s.readings} for s in steps}
    assert by_step["c32"] == {"baseline": True, "draft_model-k2": False}
    assert by_step["c64"] == {"baseline": True, "draft_model-k2": False}  # the baseline stays saturated
    assert by_step["c128"] == {"baseline": True, "draft_model-k2": True}
    assert not steps[-2].saturated and "draft_model-k2" in steps[-2].why and "not saturated" in steps[-2].why


def test_a_step_nobody_measured_says_so() -> None:
    step = judge("c1", 1, "c4", 4, {}, RULE)
    assert not step.saturated and "no configuration" in step.why
