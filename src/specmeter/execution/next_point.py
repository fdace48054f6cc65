"""Where a load search measures next, from what is measured: the placement policy, free of any engine.

Between two adjacent measured loads, something the sweep decides may change: a configuration's verdict against the
baseline (it pays at the lower load and slows at the higher one: the crossover lies between; an unclear verdict at
either end counts, since the speedup there is within noise of 1), or the configuration chosen head to head (a
best-K boundary). Each such pair is a bracket. The next point goes into the widest bracket in log-load that is
still wider than the target width: where the step-cost model, calibrated on the points so far, puts the crossover
or boundary, kept within the bracket's middle half in log-load (a model fitted on few points is a hint, and a
point at the bracket's edge would barely narrow it), or at its geometric middle (bisection) where the model has
nothing to say. A concurrency is rounded to a whole number not measured yet. Where nothing changes between the
measured loads but the range goes further (start points inside min..max), its ends are measured first. The search
stops when every bracket is narrower than the width or has no load left inside, when nothing changes over the
whole range, or when `max_points` points have run.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from specmeter.config.load_search import round_rate
from specmeter.schemas.analysis import Verdict
from specmeter.schemas.search import Bracket, CrossoverBracket

CLAMP = 0.25  # a model's guess is kept between 1/4 and 3/4 of the bracket's width in log-load
VERB = {"pays": "pays", "slows": "slows", "unclear": "is unclear", "disturbed": "was disturbed",
        "withheld": "was withheld"}


@dataclass(frozen=True)
class Reading:
    """One configuration against the baseline at one point: the verdict and the ratio it read."""

    verdict: Verdict | None
    value: float | None = None
    low: float | None = None
    high: float | None = None

    def text(self) -> str:
        if self.value is None:
            return "-"
        bounds = f" [{self.low:.2f}, {self.high:.2f}]" if self.low is not None and self.high is not None else ""
        return f"{self.value:.2f}x{bounds}"


@dataclass(frozen=True)
class Measured:
    """One measured point of the searched axis: each configuration's reading (in plan order) and the choice."""

    point_id: str
    load: float
    readings: Mapping[str, Reading] = field(default_factory=dict)
    best: str | None = None  # the configuration chosen head to head (the baseline where nothing wins)
    best_k: int | None = None


@dataclass(frozen=True)
class Guess:
    """Where the model puts a crossover or boundary inside a bracket, and which one."""

    load: float
    what: str  # "the crossover of ngram-k4"


GuessFn = Callable[[Bracket], "Guess | str"]  # a string: why the model has no guess there


@dataclass(frozen=True)
class Placement:
    load: float
    bracket: Bracket | None  # None: an end of the range, measured because nothing changed inside what ran
    chosen_by: Literal["model", "bisection", "edge"]
    predicted: float | None
    why: str


@dataclass(frozen=True)
class Stop:
    status: Literal["bracketed", "budget", "no_change"]
    why: str


@dataclass(frozen=True)
class Settings:
    """What the policy needs of the search: the target width, the budget, whether loads are whole numbers, and the
    range it may measure in (None: no further than the measured loads)."""

    width: float
    max_points: int
    integer: bool
    low: float | None = None
    high: float | None = None


def _transitions(pts: Sequence[Measured]) -> dict[tuple[int, int], tuple[list[str], list[str], list[str]]]:
    """Per pair of points (indices into the load-sorted `pts`) between which something changes: (configurations
    whose verdict changes, the choices at both ends where they differ, the reasons in words). Each configuration is
    followed over the points where it has a verdict, and the choice over the points that have one, so a point that
    measured nothing (its server failed) does not hide a change across it."""
    out: dict[tuple[int, int], tuple[list[str], list[str], list[str]]] = {}
    configs = list(dict.fromkeys(cid for m in pts for cid in m.readings))
    for cid in configs:
        seen = [i for i, m in enumerate(pts) if (r := m.readings.get(cid)) is not None and r.verdict is not None]
        for i, j in itertools.pairwise(seen):
            ra, rb = pts[i].readings[cid], pts[j].readings[cid]
            if ra.verdict == rb.verdict:
                continue
            assert ra.verdict is not None and rb.verdict is not None
            entry = out.setdefault((i, j), ([], [], []))
            entry[0].append(cid)
            entry[2].append(f"{cid} {VERB[ra.verdict]} at {pts[i].point_id} ({ra.text()}), {VERB[rb.verdict]} at "
                            f"{pts[j].point_id} ({rb.text()})")
    chosen = [i for i, m in enumerate(pts) if m.best is not None]
    for i, j in itertools.pairwise(chosen):
        a, b = pts[i], pts[j]
        if a.best != b.best:
            assert a.best is not None and b.best is not None
            entry = out.setdefault((i, j), ([], [], []))
            entry[1].extend([a.best, b.best])
            entry[2].append(f"the choice changes from {a.best} (K={a.best_k}) at {a.point_id} to {b.best} "
                            f"(K={b.best_k}) at {b.point_id}")
    return out


def free_loads(lo: float, hi: float, taken: Collection[float], integer: bool) -> bool:
    """Whether a load not yet measured lies strictly between lo and hi."""
    if integer:
        return any(n not in taken for n in range(math.floor(lo) + 1, math.ceil(hi)))
    return snap(math.sqrt(lo * hi), lo, hi, taken, integer) is not None


def find_brackets(measured: Sequence[Measured], settings: Settings, taken: Collection[float]) -> list[Bracket]:
    """Every pair of measured loads, adjacent where each has a verdict, between which a verdict or the choice
    changes; in load order."""
    pts = sorted(measured, key=lambda m: m.load)
    out: list[Bracket] = []
    for (i, j), (configs, chosen, reasons) in sorted(_transitions(pts).items()):
        a, b = pts[i], pts[j]
        kinds: list[Literal["crossover", "best_k"]] = []
        if configs:
            kinds.append("crossover")
        if chosen:
            kinds.append("best_k")
        wide = b.load / a.load > settings.width
        out.append(Bracket(lo_point=a.point_id, hi_point=b.point_id, lo=a.load, hi=b.load, kinds=kinds,
                           configs=configs, chosen=chosen, reasons=reasons,
                           open=wide and free_loads(a.load, b.load, taken, settings.integer)))
    return out


def crossover_brackets(measured: Sequence[Measured]) -> list[CrossoverBracket]:
    """Per configuration: from the last load where it pays to the first higher one where it slows (the first such
    turn as load grows), with the unclear points between."""
    pts = sorted(measured, key=lambda m: m.load)
    configs = list(dict.fromkeys(cid for m in pts for cid in m.readings))
    out: list[CrossoverBracket] = []
    for cid in configs:
        seen = [(m, r.verdict) for m in pts if (r := m.readings.get(cid)) is not None and r.verdict is not None]
        last_pays: int | None = None
        for i, (m, verdict) in enumerate(seen):
            if verdict == "pays":
                last_pays = i
            elif verdict == "slows" and last_pays is not None:
                lo = seen[last_pays][0]
                between = [p.point_id for p, v in seen[last_pays + 1:i] if v == "unclear"]
                out.append(CrossoverBracket(config_id=cid, lo_point=lo.point_id, hi_point=m.point_id, lo=lo.load,
                                            hi=m.load, unclear_between=between))
                break
    return out


def snap(target: float, lo: float, hi: float, taken: Collection[float], integer: bool) -> float | None:
    """The measurable load nearest `target` in log-load, strictly inside (lo, hi) and not taken: a whole number for
    a concurrency, a rate of two (else three, four) significant figures. None: nothing is left there."""
    if integer:
        free = [n for n in range(math.floor(lo) + 1, math.ceil(hi)) if n not in taken]
        if not free:
            return None
        return float(min(free, key=lambda n: (abs(math.log(n / target)), n)))
    for digits in (2, 3, 4):
        rate = round_rate(target, digits)
        if lo < rate < hi and rate not in taken:
            return rate
    return None


def decide(measured: Sequence[Measured], settings: Settings, taken: Collection[float], guess: GuessFn,
           describe: Callable[[float], str] = lambda x: f"{x:g}") -> Placement | Stop:
    """The next load to measure on the axis, or why the search stops. `taken`: every load of the axis in the plan
    (measured or failed); `describe` names a load as the reader knows it ("c8")."""
    brackets = find_brackets(measured, settings, taken)
    if not brackets:
        unchanged = "nothing changes between the measured loads (" + _verdicts(measured) + ")"
        ends = [x for x in (settings.high, settings.low) if x is not None and x not in taken]
        if ends and measured and len(taken) < settings.max_points:  # the higher end first: where SD stops paying
            return Placement(load=ends[0], bracket=None, chosen_by="edge", predicted=None,
                             why=f"{unchanged}; the range goes on to {describe(ends[0])}: measuring that end")
        return Stop("no_change", unchanged)
    wide = [b for b in brackets if b.open]
    if not wide:
        narrow = all(b.width <= settings.width for b in brackets)
        why = (f"every bracket is narrower than {settings.width:g}x" if narrow else
               f"no bracket wider than {settings.width:g}x has a load left to measure inside")
        return Stop("bracketed", why + ": " + "; ".join(f"{b.span} ({b.width:.2f}x)" for b in brackets))
    if len(taken) >= settings.max_points:
        return Stop("budget", f"max_points ({settings.max_points}) reached with brackets still wider than "
                    f"{settings.width:g}x: " + "; ".join(f"{b.span} ({b.width:.2f}x)" for b in wide))
    b = max(wide, key=lambda x: (math.log(x.width), -x.lo))
    log_lo, log_hi = math.log(b.lo), math.log(b.hi)
    middle = math.exp((log_lo + log_hi) / 2)
    head = (f"bracket {b.span} ({b.width:.2f}x wide, the widest above {settings.width:g}x): "
            + "; ".join(b.reasons))
    hint = guess(b)
    if isinstance(hint, Guess):
        inner = (math.exp(log_lo + CLAMP * (log_hi - log_lo)), math.exp(log_hi - CLAMP * (log_hi - log_lo)))
        target = min(max(hint.load, inner[0]), inner[1])
        how = f"the model predicts {hint.what} near {describe_raw(hint.load)}"
        how += "" if target == hint.load else (f", kept to the bracket's middle half in log-load at "
                                               f"{describe_raw(target)}")
        chosen_by: Literal["model", "bisection"] = "model"
        predicted: float | None = hint.load
    else:
        target, chosen_by, predicted = middle, "bisection", None
        how = f"{hint}; bisected in log-load (geometric middle {describe_raw(middle)})"
    load = snap(target, b.lo, b.hi, taken, settings.integer) or snap(middle, b.lo, b.hi, taken, settings.integer)
    assert load is not None  # an open bracket has a free load inside (free_loads)
    if load != target:
        how += f", rounded to {describe(load)}"
    return Placement(load=load, bracket=b, chosen_by=chosen_by, predicted=predicted, why=f"{head}; {how}")


def describe_raw(x: float) -> str:
    """A load before rounding, as a number."""
    return f"{x:.3g}"


def _verdicts(measured: Sequence[Measured]) -> str:
    """Each configuration's verdicts over the measured loads, in a few words."""
    pts = sorted(measured, key=lambda m: m.load)
    configs = list(dict.fromkeys(cid for m in pts for cid in m.readings))
    if not configs:
        return "no speedup measured yet"
    parts = []
    for cid in configs:
        verdicts = {r.verdict for m in pts if (r := m.readings.get(cid)) is not None and r.verdict is not None}
        span = f"{pts[0].point_id} to {pts[-1].point_id}"
        parts.append(f"{cid} {VERB[verdicts.pop()]} at every load from {span}" if len(verdicts) == 1 else
                     f"{cid} has no verdict")
    return "; ".join(parts)
