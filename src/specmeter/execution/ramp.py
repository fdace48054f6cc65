"""A load ramp that stops going up once the servers saturate (load.stop_at_saturation): before each point the
runner asks whether to measure it; the step below it, the highest measured load under it against the next lower
one, is judged then (analysis/saturation.py), once, on what those points measured so far, and written to the
summary (`ramp`). Once every configuration has saturated at a load, the axis's higher points are skipped, with the
load, the numbers and why; a resumed run reads the record back and skips the same points, and a load search stays
at or below that load.

The stop is a stop condition like the others (load/stops.py): checked between the points of a ramp, on its steps.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specmeter.analysis.saturation import ramp_step
from specmeter.config.models import LoadPoint
from specmeter.load.stops import Stop
from specmeter.schemas.ramp import AxisRamp, RampStep
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary


@dataclass(frozen=True)
class Saturated:
    """The ramp's stop condition: the step judged has every configuration saturated."""

    def check(self, state: RampStep, /) -> Stop | None:
        return Stop(state.why) if state.saturated else None


class Ramp:
    """The load ramp of one execution, recorded in its summary."""

    def __init__(self, summary: RunSummary, records: Callable[[], Sequence[RequestRecord]],
                 note: Callable[[str], None] = lambda _: None) -> None:
        self.summary, self.records, self.note = summary, records, note
        self.condition = Saturated()

    @property
    def active(self) -> bool:
        return self.summary.plan.load.stop_at_saturation

    def skips(self, point: LoadPoint) -> bool:
        """Whether the point lies above a load where its axis saturated (nothing judged here: a resume asks this
        before starting any server)."""
        entry = self.summary.ramped(point.axis, point.input_len)
        return (self.active and entry is not None and entry.load is not None and point.load > entry.load
                and not self._measured(point))

    def start(self, point: LoadPoint) -> bool:
        """Whether to measure the point: the step below it is judged first (once), and a saturated one stops the
        ramp there."""
        if not self.active:
            return True
        if not self.skips(point):
            self.look(point.axis, below=point.load, input_len=point.input_len)
        return not self.skips(point)

    def look(self, axis: str, below: float | None = None, input_len: int | None = None) -> None:
        """Judge, in load order, every step between measured points of the axis at one input length (under
        `below`) not judged yet, until one finds every configuration saturated."""
        if not self.active:
            return
        entry = self._entry(axis, input_len)
        if entry.load is not None:
            return
        measured = sorted((p for p in self.summary.plan.points if p.axis == axis and p.input_len == input_len
                           and self._measured(p)
                           and (below is None or p.load < below)), key=lambda p: p.load)
        for lower, point in itertools.pairwise(measured):
            if entry.step(lower.id, point.id) is not None:
                continue
            earlier = [s for s in entry.steps if s.load <= point.load]
            step = ramp_step(self.summary, self.records(), lower, point, self.summary.plan.load.saturation, earlier)
            entry.steps.append(step)
            stop = self.condition.check(step)
            if stop is not None:
                self._stop(entry, point, stop.why)
                return

    def _stop(self, entry: AxisRamp, point: LoadPoint, why: str) -> None:
        entry.saturated_at, entry.load = point.id, point.load
        entry.skipped = [p.id for p in self.summary.plan.points
                         if p.axis == point.axis and p.input_len == point.input_len and p.load > point.load
                         and not self._measured(p)]
        entry.why = why
        skipped = ", ".join(entry.skipped) or "nothing (no higher load planned)"
        self.note(f"load ramp: saturated at {point.label()}, skipping {skipped} (load.stop_at_saturation: false "
                  f"measures them): {why}")

    def _measured(self, point: LoadPoint) -> bool:
        return any(c.repeats(point.id) for c in self.summary.configs)

    def _entry(self, axis: str, input_len: int | None) -> AxisRamp:
        found = self.summary.ramped(axis, input_len)
        if found is None:
            rule = self.summary.plan.load.saturation
            found = AxisRamp(axis="concurrency" if axis == "concurrency" else "rate", min_gain=rule.min_gain,
                             latency_rise=rule.latency_rise, input_len=input_len)
            self.summary.ramp.append(found)
        return found
