"""The step-cost model as a load search asks it: where, inside a bracket, does a configuration's predicted speedup
cross 1, or two configurations' predicted speedups cross each other?

The model is calibrated on the run's points so far and predicts at engine batch sizes; a searched axis is the
client's load (a closed loop's N, an open loop's rate). Inside a bracket the engine batch is interpolated between
the batches measured at its two ends (linearly in log-load and log-batch, per configuration), and the root is
found by bisection in log-load. The model only guesses where its own predictions at the two ends disagree in
sign, as the measurements do; otherwise it has nothing to say there and the search bisects.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

from specmeter.common.errors import InputError
from specmeter.execution.next_point import Guess
from specmeter.predict.acceptance import AcceptanceProfile
from specmeter.predict.calibration import calibrate
from specmeter.predict.observations import drafter_key, request_mix
from specmeter.predict.predict import Predictor
from specmeter.predict.profiles import drafter_profiles
from specmeter.schemas.plan import PlannedConfig
from specmeter.schemas.results import RunSummary
from specmeter.schemas.search import Bracket

RUN = "this run"
ITERATIONS = 40  # bisection steps in log-load: far below any load a person would set


class SearchModel:
    """A calibrated predictor with the batches each configuration ran at each point."""

    def __init__(self, predictor: Predictor, profiles: Mapping[str, AcceptanceProfile],
                 configs: Mapping[str, PlannedConfig], baseline_id: str,
                 batches: Mapping[tuple[str, str], float]) -> None:
        self.predictor, self.profiles, self.configs = predictor, profiles, configs
        self.baseline_id, self.batches = baseline_id, batches

    @classmethod
    def of(cls, summary: RunSummary) -> SearchModel | str:
        """Calibrated on every point of the run so far, or why no model can be had yet."""
        base = summary.plan.main_baseline
        mix = request_mix(summary)
        if base is None or mix is None:
            return "no model yet: " + ("the plan has no baseline" if base is None else "no request completed")
        try:
            cal = calibrate([(RUN, summary)])
            predictor = Predictor.calibrated(cal, mix)
        except (InputError, ValueError, np.linalg.LinAlgError) as exc:
            return f"no model yet ({str(exc).removeprefix('calibrate: ')})"
        pooled: dict[tuple[str, str], list[float]] = {}
        for o in cal.observations:
            pooled.setdefault((o.config_id, o.point_id), []).append(o.batch)
        batches = {key: float(np.mean(v)) for key, v in pooled.items()}
        return cls(predictor, drafter_profiles(summary, RUN), {c.id: c for c in summary.plan.configs}, base.id,
                   batches)

    def speedup(self, config_id: str, bracket: Bracket) -> Callable[[float], float | None] | str:
        """The configuration's predicted speedup at a load inside the bracket (1 for the baseline)."""
        if config_id == self.baseline_id:
            return lambda load: 1.0
        planned = self.configs.get(config_id)
        if planned is None or not planned.spec.enabled:
            return f"{config_id} is not a speculative configuration of the plan"
        key = drafter_key(planned.spec)
        profile = self.profiles.get(key)
        if profile is None:
            return f"no acceptance measured for {config_id}'s drafter"
        ends = [self.batches.get((cid, pid)) for cid in (config_id, self.baseline_id)
                for pid in (bracket.lo_point, bracket.hi_point)]
        if any(b is None for b in ends):
            return f"no engine batch of {config_id} or the baseline at {bracket.lo_point} and {bracket.hi_point}"
        sd_lo, sd_hi, base_lo, base_hi = (float(b) for b in ends if b is not None)
        al = profile.al(planned.k)
        span = math.log(bracket.hi / bracket.lo)

        def at(load: float) -> float | None:
            t = math.log(load / bracket.lo) / span
            batch = math.exp(math.log(sd_lo) + t * math.log(sd_hi / sd_lo))
            base_batch = math.exp(math.log(base_lo) + t * math.log(base_hi / base_lo))
            est = self.predictor.estimate(key, planned.k, al, batch, base_batch)
            return None if isinstance(est, str) else est.speedup

        return at

    def guess(self, bracket: Bracket) -> Guess | str:
        """Where the model puts the bracket's first crossover (or, failing that, its boundary between choices)."""
        asked: list[tuple[str, str, str]] = [(c, self.baseline_id, f"the crossover of {c}") for c in bracket.configs]
        if len(bracket.chosen) == 2:
            lo_choice, hi_choice = bracket.chosen
            if {lo_choice, hi_choice} not in [{a, b} for a, b, _ in asked]:  # speculation off at one end: asked
                asked.append((lo_choice, hi_choice, f"the boundary between {lo_choice} and {hi_choice}"))
        why: list[str] = []
        for a, b, what in asked:
            found = self._root(a, b, bracket)
            if isinstance(found, float):
                return Guess(found, what)
            why.append(found)
        return "; ".join(why) or "nothing in the bracket for the model to place"

    def _root(self, a: str, b: str, bracket: Bracket) -> float | str:
        """The load inside the bracket where a's predicted speedup equals b's, or why there is none."""
        fa, fb = self.speedup(a, bracket), self.speedup(b, bracket)
        for f in (fa, fb):
            if isinstance(f, str):
                return f
        assert not isinstance(fa, str) and not isinstance(fb, str)

        def gap(load: float) -> float | None:
            sa, sb = fa(load), fb(load)
            return None if sa is None or sb is None or sa <= 0 or sb <= 0 else math.log(sa / sb)

        lo, hi = bracket.lo, bracket.hi
        g_lo, g_hi = gap(lo), gap(hi)
        if g_lo is None or g_hi is None:
            return f"the model cannot predict {a} against {b} across {bracket.span}"
        if g_lo * g_hi > 0:
            return (f"the model puts no crossing of {a} and {b} inside {bracket.span} (it predicts "
                    f"{math.exp(g_lo):.2f}x at {bracket.lo_point} and {math.exp(g_hi):.2f}x at {bracket.hi_point})")
        for _ in range(ITERATIONS):
            mid = math.sqrt(lo * hi)
            g = gap(mid)
            if g is None:
                return f"the model cannot predict {a} against {b} inside {bracket.span}"
            if (g > 0) == (g_lo > 0):
                lo, g_lo = mid, g
            else:
                hi = mid
        return math.sqrt(lo * hi)
