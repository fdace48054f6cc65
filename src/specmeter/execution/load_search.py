"""A load search as a run goes (`load: {concurrency: auto}`): after the points measured so far, analyze them,
decide where each searched axis measures next (placement.py, with the model's guesses from search_model.py),
write the decision into the summary (RunSummary.load_search) and add the chosen point to the plan, whose points
the runner then measures as it measures any other. Everything it decides from is in the summary and the records,
so a resumed run looks again at the same data and goes on from there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from specmeter.analysis.decide import analyze
from specmeter.analysis.headline import headline
from specmeter.config.load_search import LoadSearch
from specmeter.config.models import ConcurrencyPoint, LoadPoint
from specmeter.execution.next_point import (
    Guess,
    Measured,
    Placement,
    Reading,
    Settings,
    crossover_brackets,
    decide,
    find_brackets,
)
from specmeter.execution.search_model import SearchModel
from specmeter.schemas.plan import Plan, Role
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary
from specmeter.schemas.search import AxisSearch, Bracket, SearchStep


def describe(search: LoadSearch, load: float) -> str:
    """A load of the axis as its point ids name it (c8), or a rate with its unit."""
    return f"c{int(load)}" if search.integer else f"{load:g} req/s"


def add_point(plan: Plan, point: LoadPoint) -> None:
    """Insert a chosen point among its axis's points in load order (reports list a plan's points in its order)."""
    points = plan.load.points
    same = [i for i, p in enumerate(points) if p.axis == point.axis]
    below = [i for i in same if points[i].load < point.load]
    points.insert(below[-1] + 1 if below else same[0] if same else len(points), point)


def measured_points(summary: RunSummary, axis: str) -> list[Measured]:
    """The axis's points that have a speedup or a choice, as the placement policy reads them."""
    plan = summary.plan
    # Synthetic acceptance is a bound, not a decision: where its verdict changes places no point.
    candidates = [c.id for c in plan.configs if c.role is Role.candidate and c.workload == "main"
                  and not c.spec.synthetic]
    out = []
    for point in plan.points:
        if point.axis != axis:
            continue
        readings = {}
        for cid in candidates:
            s = next((x for x in summary.analysis.speedups if x.config_id == cid and x.point_id == point.id), None)
            if s is not None:
                r = headline(s, point)
                readings[cid] = Reading(s.verdict, r.value, r.ci95_low, r.ci95_high)
        choice = next((c for c in summary.analysis.choices if c.point_id == point.id), None)
        if readings or choice is not None:
            out.append(Measured(point.id, point.load, readings, choice.best_config_id if choice else None,
                                choice.best_k if choice else None))
    return out


class Search:
    """The searches of one run's plan, one per searched axis, recorded in its summary."""

    def __init__(self, summary: RunSummary, records: Callable[[], Sequence[RequestRecord]]) -> None:
        self.summary, self.records = summary, records
        self._model: SearchModel | str | None = None

    @property
    def active(self) -> bool:
        return bool(self.summary.plan.load.search)

    def step(self) -> list[SearchStep]:
        """Look at what is measured and choose the next point of every searched axis that goes on: each is added
        to the plan and recorded with why; none when every search has stopped (each entry says why)."""
        plan = self.summary.plan
        if not plan.load.search:
            return []
        self.summary.analysis = analyze(self.summary, self.records())
        self._model = None  # calibrated again, lazily, on what is measured now
        chosen: list[SearchStep] = []
        for search in plan.load.search:
            entry = self._entry(search)
            cap = self._ceiling(search)
            measured = [m for m in measured_points(self.summary, search.axis) if cap is None or m.load <= cap]
            taken = {p.load for p in plan.points if p.axis == search.axis}
            high = search.max if cap is None else min(search.max, cap)
            settings = Settings(search.width, search.max_points, search.integer, min(search.min, high), high)
            entry.brackets = find_brackets(measured, settings, taken)
            entry.crossovers = crossover_brackets(measured)
            decision = decide(measured, settings, taken, self._guess, partial(describe, search))
            if not isinstance(decision, Placement):
                entry.status, entry.why = decision.status, decision.why
                if cap is not None and cap < search.max:
                    entry.why += (f"; searched up to {describe(search, cap)} only, where every server saturated "
                                  "(the load ramp's stop)")
                continue
            point = self._point(search, decision.load)
            add_point(plan, point)
            step = SearchStep(point_id=point.id, load=decision.load, chosen_by=decision.chosen_by,
                              bracket=decision.bracket, predicted=decision.predicted,
                              why=f"{decision.why}; measuring {point.label()}")
            entry.steps.append(step)
            entry.status, entry.why = "searching", f"measuring {point.label()} next"
            chosen.append(step)
        return chosen

    def _ceiling(self, search: LoadSearch) -> float | None:
        """The load where the axis's ramp found every server saturated: the search measures nothing above it."""
        ramp = self.summary.ramped(search.axis)
        return ramp.load if ramp is not None and self.summary.plan.load.stop_at_saturation else None

    def _guess(self, bracket: Bracket) -> Guess | str:
        if self._model is None:
            self._model = SearchModel.of(self.summary)
        return self._model if isinstance(self._model, str) else self._model.guess(bracket)

    def _entry(self, search: LoadSearch) -> AxisSearch:
        """The axis's record, begun with its start points the first time."""
        found = self.summary.searched(search.axis)
        if found is None:
            starts = ", ".join(describe(search, s) for s in search.start)
            found = AxisSearch(axis=search.axis, width=search.width, max_points=search.max_points, steps=[
                SearchStep(point_id=p.id, load=p.load, chosen_by="start", why=f"start point ({starts})")
                for p in self.summary.plan.points if p.axis == search.axis and p.load in search.start])
            self.summary.load_search.append(found)
        return found

    def _point(self, search: LoadSearch, load: float) -> LoadPoint:
        """A new point of the axis, shaped like its start points (a rate keeps their arrival process and cap)."""
        template = next(p for p in self.summary.plan.points if p.axis == search.axis)
        if isinstance(template, ConcurrencyPoint):
            return ConcurrencyPoint(concurrency=int(load))
        return template.model_copy(update={"rate": load})
