"""The load search (`load: {concurrency: auto}`): its settings, validated in one line naming the key and the fix,
and its placement policy (execution/next_point.py) run on synthetic speedup curves as a sweep would run it."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_recommend import sweep as recommend_sweep

from specmeter.common.errors import InputError
from specmeter.config.drafts import Drafts
from specmeter.config.flag_text import levels_or_auto
from specmeter.config.load_search import LoadSearch
from specmeter.config.models import EngineSpec, LoadSpec, SpecConfig
from specmeter.execution.load_search import Search, measured_points
from specmeter.execution.next_point import (
    CLAMP,
    Guess,
    Measured,
    Placement,
    Reading,
    Settings,
    Stop,
    crossover_brackets,
    decide,
    find_brackets,
    snap,
)
from specmeter.execution.search_model import SearchModel
from specmeter.plans.run import BASELINE, compare_workloads_plan
from specmeter.plans.sweep import SweepSpec, read_sweep_file
from specmeter.rundir.store import load_summary
from specmeter.schemas.plan import WorkloadSelection
from specmeter.schemas.search import Bracket
from specmeter.workflows.sweep import sweep_spec

LAUNCH = {"model": "/models/target"}
STORED = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "20261123-180233-demo"
CANDIDATES = [{"method": "ngram", "k": [2, 4]}]


def sweep(tmp_path: Path, load: Any, **top: Any) -> SweepSpec:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"engine": LAUNCH, "candidates": CANDIDATES, "load": load, **top}))
    return read_sweep_file(path)


def sweep_error(tmp_path: Path, load: Any, **top: Any) -> str:
    with pytest.raises(InputError) as info:
        sweep(tmp_path, load, **top)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(str(tmp_path / "sweep.yaml"))
    return msg


# ---- settings ----------------------------------------------------------------------------------------------


def test_concurrency_auto_starts_at_the_ends_and_the_geometric_middle_and_implies_interleave(tmp_path: Path) -> None:
    sw = sweep(tmp_path, {"concurrency": "auto", "max_tokens": 64})
    (search,) = sw.load.search
    assert (search.axis, search.min, search.max) == ("concurrency", 1, 64)
    assert [p.id for p in sw.load.points] == ["c1", "c8", "c64"]
    assert search.width > 1 and search.max_points >= len(search.start)
    assert sw.interleave  # every configuration is compared at each point the search chose
    plan = sw.plan(WorkloadSelection(dataset="sample"))
    assert plan.interleave and plan.load.search == sw.load.search
    # The stored plan reads back the same (resume reloads it).
    assert LoadSpec.model_validate(plan.load.model_dump(mode="json")) == plan.load


def test_auto_settings_and_a_listed_axis_beside_it(tmp_path: Path) -> None:
    sw = sweep(tmp_path, {"concurrency": {"auto": {"min": 2, "max": 32, "start": [2, 32], "width": 1.3,
                                                   "max_points": 6}}, "request_rate": [1.5]})
    (search,) = sw.load.search
    assert (search.min, search.max, search.start, search.width, search.max_points) == (2, 32, [2, 32], 1.3, 6)
    assert [p.id for p in sw.load.points] == ["c2", "c32", "r1.5"]


def test_request_rate_auto_keeps_the_arrival_shape(tmp_path: Path) -> None:
    sw = sweep(tmp_path, {"request_rate": {"auto": {"min": 0.5, "max": 8}}, "arrival": "gamma", "burstiness": 0.5})
    (search,) = sw.load.search
    assert search.axis == "rate" and not search.integer
    assert [p.load for p in sw.load.points] == [0.5, 2.0, 8.0]
    assert all(p.kind == "rate" and p.arrival == "gamma" for p in sw.load.points)


@pytest.mark.parametrize(("load", "top", "needles"), [
    ({"concurrency": [1, "auto"]}, {}, ["concurrency", "cannot be mixed", "start"]),
    ({"request_rate": "auto"}, {}, ["request_rate", "min and max"]),
    ({"concurrency": {"auto": {"mn": 1}}}, {}, ["concurrency.auto", "'mn'", "min, max"]),
    ({"concurrency": {"auto": {"min": 1.5}}}, {}, ["concurrency.auto", "whole"]),
    ({"concurrency": {"auto": {"min": 8, "max": 4}}}, {}, ["concurrency.auto", "above min"]),
    ({"concurrency": {"auto": {"start": [1, 100]}}}, {}, ["concurrency.auto", "100", "outside"]),
    ({"concurrency": {"auto": {"start": [4]}}}, {}, ["concurrency.auto", "two"]),
    ({"concurrency": {"auto": {"width": 1}}}, {}, ["concurrency.auto.width"]),
    ({"concurrency": {"auto": {"max_points": 2}}}, {}, ["concurrency.auto", "max_points", "raise"]),
    ({"concurrency": {"auto": {}, "min": 2}}, {}, ["concurrency", "inside auto"]),
    ({"concurrency": "auto"}, {"interleave": False}, ["interleave", "list the points"]),
], ids=["mixed-with-list", "rate-needs-range", "unknown-key", "fractional", "empty-range", "start-outside",
        "one-start", "width", "budget-below-start", "settings-outside-auto", "not-interleaved"])
def test_auto_errors_name_the_key_and_the_fix(tmp_path: Path, load: Any, top: dict[str, Any],
                                              needles: list[str]) -> None:
    msg = sweep_error(tmp_path, load, **top)
    for needle in needles:
        assert needle in msg, (needle, msg)


def test_a_run_plan_with_a_search_needs_interleave() -> None:
    load = LoadSpec.model_validate({"concurrency": "auto"})
    with pytest.raises(InputError, match="interleave"):
        load.with_precision(interleave=False, repeats=1, default="fixed")
    assert load.with_precision(interleave=True, repeats=1, default="fixed").search == load.search


# ---- the policy on synthetic curves ----------------------------------------------------------------------

Curve = Callable[[float], float]
NOISE = 0.03  # each reading's interval: the value +- 3%


def reading(value: float) -> Reading:
    low, high = value * (1 - NOISE), value * (1 + NOISE)
    verdict = "pays" if low > 1 else "slows" if high < 1 else "unclear"
    return Reading(verdict, value, low, high)


def measure(load: float, curves: dict[str, tuple[int, Curve]]) -> Measured:
    """Every configuration's reading at `load`, and the choice: the cheapest that no costlier one beats by 5%."""
    readings = {cid: reading(curve(load)) for cid, (_, curve) in curves.items()}
    best, best_k, best_value = BASELINE, 0, 1.0
    for cid, (k, _) in sorted(curves.items(), key=lambda kv: kv[1][0]):
        r = readings[cid]
        assert r.value is not None
        if r.value > best_value * 1.05:
            best, best_k, best_value = cid, k, r.value
    return Measured(f"c{load:g}", load, readings, best, best_k)


def k4(c: float) -> float:
    """Pays at low load and slows at high: crosses 1 at concurrency 16."""
    return 2.0 * (10 + 0.5 * c) / (10 + 1.75 * c)


def k2(c: float) -> float:
    """Less at low load, more robust at high: crosses 1 at concurrency 40."""
    return 1.5 * (10 + 0.5 * c) / (10 + 0.875 * c)


def crossing(curve: Curve, lo: float, hi: float) -> float:
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if curve(mid) > 1 else (lo, mid)
    return lo


def search(curves: dict[str, tuple[int, Curve]], start: list[float], settings: Settings,
           guess: Callable[[Bracket], Guess | str] = lambda b: "no model",
           ) -> tuple[list[float], Stop, list[Placement]]:
    """The search as a sweep runs it: measure, decide, measure the chosen load, until it stops."""
    loads = list(start)
    placements: list[Placement] = []
    for _ in range(100):
        decision = decide([measure(x, curves) for x in loads], settings, set(loads), guess)
        if isinstance(decision, Stop):
            return loads, decision, placements
        assert decision.bracket is None or decision.bracket.lo < decision.load < decision.bracket.hi
        placements.append(decision)
        loads.append(decision.load)
    raise AssertionError("the search never stopped")


WIDE = Settings(width=1.5, max_points=20, integer=True)


def test_the_crossover_ends_bracketed_within_the_width() -> None:
    loads, stop, placements = search({"k4": (4, k4)}, [1, 8, 64], WIDE)
    assert stop.status == "bracketed"
    assert len(set(loads)) == len(loads)  # no load measured twice
    assert all(x == int(x) and 1 <= x <= 64 for x in loads)  # whole concurrencies inside the range
    assert all(p.chosen_by == "bisection" for p in placements)
    final = [measure(x, {"k4": (4, k4)}) for x in loads]
    (cross,) = crossover_brackets(final)
    truth = crossing(k4, 1, 64)
    assert cross.lo < truth < cross.hi
    # Every step inside it is as narrow as asked (or has no whole concurrency left); a crossover wider than that
    # has only unclear points inside: there the speedup is within noise of 1, which more points cannot narrow.
    inside = sorted(x for x in loads if cross.lo <= x <= cross.hi)
    assert all(b / a <= WIDE.width or b - a <= 1 for a, b in itertools.pairwise(inside))
    assert cross.width <= WIDE.width or cross.unclear_between == [f"c{x:g}" for x in inside[1:-1]]


def test_a_best_k_boundary_is_bracketed_too() -> None:
    curves = {"k2": (2, k2), "k4": (4, k4)}
    loads, stop, _ = search(curves, [1, 8, 64], WIDE)
    assert stop.status == "bracketed"
    final = [measure(x, curves) for x in sorted(loads)]
    boundaries = [b for b in find_brackets(final, WIDE, set(loads)) if b.chosen == ["k4", "k2"]]
    (boundary,) = boundaries
    # Where K=2 starts to beat K=4 by the choice's 5%: inside the bracket, which is narrow.
    edge = crossing(lambda c: k4(c) / (1.05 * k2(c)), 1, 64)
    assert boundary.lo <= edge <= boundary.hi and boundary.width <= WIDE.width
    crossings = {c.config_id: c for c in crossover_brackets(final)}
    assert crossings["k2"].lo < crossing(k2, 1, 64) < crossings["k2"].hi


def test_the_budget_is_respected() -> None:
    loads, stop, _ = search({"k4": (4, k4)}, [1, 8, 64], Settings(width=1.05, max_points=5, integer=True))
    assert stop.status == "budget" and len(loads) == 5
    assert "max_points (5)" in stop.why


def test_the_model_places_the_point_where_it_predicts_within_the_middle_half() -> None:
    truth = crossing(k4, 1, 64)
    loads, stop, placements = search({"k4": (4, k4)}, [1, 8, 64], WIDE,
                                     guess=lambda b: Guess(truth, "the crossover of k4"))
    assert stop.status == "bracketed" and placements[0].chosen_by == "model"
    assert placements[0].predicted == truth and "the crossover of k4" in placements[0].why
    first = placements[0]
    assert first.load == round(truth)  # inside the middle half of 8..64, so measured right there
    # A model that knows where it is finds it in fewer points than bisection.
    bisected, _, _ = search({"k4": (4, k4)}, [1, 8, 64], WIDE)
    assert len(loads) <= len(bisected)


def test_a_guess_at_the_edge_is_clamped_to_the_middle_half_in_log_load() -> None:
    b = Bracket(lo_point="c4", hi_point="c64", lo=4, hi=64, kinds=["crossover"], configs=["k4"], reasons=["x"])
    measured = [Measured("c4", 4, {"k4": reading(1.3)}), Measured("c64", 64, {"k4": reading(0.7)})]
    placed = decide(measured, WIDE, {4, 64}, lambda _: Guess(4.5, "the crossover of k4"))
    assert isinstance(placed, Placement) and placed.chosen_by == "model"
    low_edge = b.lo * (b.hi / b.lo) ** CLAMP
    assert placed.load == round(low_edge) and "middle half" in placed.why
    bisect = decide(measured, WIDE, {4, 64}, lambda _: "no model yet")
    assert isinstance(bisect, Placement) and bisect.load == 16 and "bisected" in bisect.why


def test_rounding_picks_the_nearest_free_whole_number_or_nothing() -> None:
    assert snap(9.4, 8, 16, {8, 16}, integer=True) == 9
    assert snap(9.4, 8, 16, {8, 9, 16}, integer=True) == 10
    assert snap(2.5, 2, 3, {2, 3}, integer=True) is None
    assert snap(2.8284, 2, 4, {2, 4}, integer=False) == 2.8
    assert snap(2.8284, 2, 4, {2, 2.8, 4}, integer=False) == 2.83


def test_a_bracket_with_no_whole_concurrency_left_stops_the_search() -> None:
    measured = [Measured("c2", 2, {"k4": reading(1.2)}), Measured("c3", 3, {"k4": reading(0.8)})]
    stop = decide(measured, WIDE, {2, 3}, lambda _: "no model")
    assert isinstance(stop, Stop) and stop.status == "bracketed" and "c2..c3" in stop.why


def test_nothing_changing_stops_the_search_and_says_so() -> None:
    always = {"k4": (4, lambda c: 1.5)}
    loads, stop, _ = search(always, [1, 8, 64], WIDE)
    assert loads == [1, 8, 64] and stop.status == "no_change" and "k4 pays at every load" in stop.why


def test_a_point_without_a_verdict_does_not_hide_a_change_across_it() -> None:
    measured = [Measured("c4", 4, {"k4": reading(1.3)}), Measured("c8", 8, {}),
                Measured("c16", 16, {"k4": reading(0.8)})]
    (bracket,) = find_brackets(measured, WIDE, {4, 8, 16})
    assert (bracket.lo_point, bracket.hi_point, bracket.configs) == ("c4", "c16", ["k4"])
    placed = decide(measured, WIDE, {4, 8, 16}, lambda _: "no model")
    assert isinstance(placed, Placement) and placed.load not in (4, 8, 16)


def test_unclear_points_bracket_on_both_sides_and_the_crossover_spans_them() -> None:
    measured = [Measured("c4", 4, {"k4": reading(1.3)}), Measured("c8", 8, {"k4": reading(1.0)}),
                Measured("c16", 16, {"k4": reading(0.8)})]
    assert [b.span for b in find_brackets(measured, WIDE, {4, 8, 16})] == ["c4..c8", "c8..c16"]
    (cross,) = crossover_brackets(measured)
    assert (cross.lo_point, cross.hi_point, cross.unclear_between) == ("c4", "c16", ["c8"])


def test_a_rate_search_places_rates_of_two_significant_figures() -> None:
    loads, stop, placements = search({"k4": (4, lambda r: k4(r * 4))}, [0.5, 2, 8],
                                     Settings(width=1.5, max_points=12, integer=False))
    assert stop.status == "bracketed" and placements
    assert all(float(f"{x:.2g}") == x for x in loads[3:])
    assert len(set(loads)) == len(loads)


def test_search_settings_validate_when_read_back() -> None:
    with pytest.raises(ValueError, match="whole concurrency"):
        LoadSearch(axis="concurrency", min=1, max=8, start=[1, 2.5])


# ---- the search over a run's summary -----------------------------------------------------------------------


def test_a_look_at_a_run_adds_the_chosen_point_in_load_order_and_records_why() -> None:
    summary, records = recommend_sweep({"ngram-k4": {"c1": (1.5, 1.4, 1.6), "c64": (0.8, 0.75, 0.85)}},
                                       {"c1": 1.0, "c64": 50.0})
    summary.plan.load.search = [LoadSearch(axis="concurrency", min=1, max=64, start=[1, 64], max_points=4)]
    search = Search(summary, lambda: records)
    (step,) = search.step()
    assert step.chosen_by in ("model", "bisection") and step.bracket is not None
    assert step.bracket.span == "c1..c64" and "ngram-k4 pays at c1" in step.why and "slows at c64" in step.why
    assert [p.id for p in summary.plan.points] == ["c1", step.point_id, "c64"]
    (axis,) = summary.load_search
    assert [s.chosen_by for s in axis.steps] == ["start", "start", step.chosen_by] and axis.status == "searching"
    assert axis.crossovers[0].config_id == "ngram-k4" and axis.brackets[0].open
    # The budget (4 points) allows one more; then the search stops and says why.
    search.step()
    assert search.step() == [] and axis.status == "budget" and "max_points (4)" in axis.why
    assert len(summary.plan.points) == 4


def test_a_plan_without_a_search_is_left_alone() -> None:
    summary, records = recommend_sweep({"ngram-k4": {"c1": (1.5, 1.4, 1.6)}}, {"c1": 1.0})
    assert Search(summary, lambda: records).step() == [] and summary.load_search == []


def test_compare_workloads_refuses_a_search() -> None:
    load = LoadSpec.model_validate({"concurrency": "auto"})
    with pytest.raises(InputError, match="compare-workloads"):
        compare_workloads_plan(EngineSpec(model="m"), SpecConfig(method="ngram", num_speculative_tokens=2), load,
                               vocab_size=10, excluded_token_ids=[], baseline_endpoint=None,
                               workload=WorkloadSelection(dataset="sample"))


def test_the_sweep_shorthand_takes_concurrency_auto(tmp_path: Path) -> None:
    flags = Drafts(spec=['{"method": "ngram"}'], k=[2, 4])
    sw = sweep_spec(None, flags, {"engine": {"model": "/models/target"},
                                  "load": {"concurrency": levels_or_auto("auto")}})
    assert [s.axis for s in sw.load.search] == ["concurrency"] and sw.interleave
    assert levels_or_auto("1,4") == [1, 4]


def test_start_points_inside_the_range_reach_for_its_ends_when_nothing_changes_between_them() -> None:
    settings = Settings(width=1.5, max_points=20, integer=True, low=1, high=64)
    loads, stop, placements = search({"k4": (4, k4)}, [2, 8], settings)
    assert [p.chosen_by for p in placements[:1]] == ["edge"] and placements[0].load == 64
    assert "pays at every load" in placements[0].why and placements[0].bracket is None
    assert stop.status == "bracketed" and 64 in loads
    (cross,) = crossover_brackets([measure(x, {"k4": (4, k4)}) for x in loads])
    assert cross.lo < crossing(k4, 1, 64) < cross.hi
    _, stop, placements = search({"k4": (4, lambda c: 1.5)}, [2, 8], settings)
    assert [p.load for p in placements] == [64, 1] and stop.status == "no_change"


def test_the_model_of_a_real_run_guesses_inside_a_bracket_or_says_why_not() -> None:
    summary = load_summary(STORED)
    model = SearchModel.of(summary)
    assert isinstance(model, SearchModel)
    settings = Settings(width=1.5, max_points=8, integer=True)
    brackets = {b.span: b for b in find_brackets(measured_points(summary, "concurrency"), settings, {1, 4, 16})}
    for b in brackets.values():
        hint = model.guess(b)
        if isinstance(hint, Guess):
            assert b.lo < hint.load < b.hi and hint.what.startswith("the ")
        else:  # the model's own speedups at the two ends do not cross: it says so, with them
            assert "no crossing" in hint and b.lo_point in hint and b.hi_point in hint
            assert hint.count("no crossing") == len({*b.configs, *b.chosen} - {BASELINE})
    assert SearchModel.of(summary.model_copy(update={"configs": []})) == "no model yet: no request completed"
