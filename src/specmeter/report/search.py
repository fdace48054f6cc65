"""What a load search did (`load: {concurrency: auto}`): each point in the order it was measured, why it was chosen,
and where the search left the crossover and the best-K boundaries. Drawn from RunSummary.load_search as stored;
nothing here decides."""

from __future__ import annotations

import itertools
import math

from specmeter.report.grid import Grid, grid
from specmeter.schemas.results import RunSummary
from specmeter.schemas.search import AxisSearch, CrossoverBracket

STATUS = {"searching": "still searching (the run ended before the search did)",
          "bracketed": "stopped: bracketed", "budget": "stopped: max_points reached",
          "no_change": "stopped: nothing changes between the measured loads"}


def _axis(search: AxisSearch) -> str:
    return "concurrency" if search.axis == "concurrency" else "request rate"


def crossover_text(summary: RunSummary, search: AxisSearch, c: CrossoverBracket) -> str:
    """One configuration's crossover bracket, step by step through any unclear points, against the target width."""
    chain = [(c.lo_point, "pays"), *((p, "unclear") for p in c.unclear_between), (c.hi_point, "slows")]
    loads = [found.load if (found := summary.plan.load.point(p)) is not None else math.nan for p, _ in chain]
    text = " -> ".join(f"{p} ({v})" for p, v in chain) + f": {c.width:.2f}x wide"
    if c.unclear_between:
        steps = ", ".join(f"{b / a:.2f}x" for a, b in itertools.pairwise(loads))
        text += f" in steps of {steps} (target {search.width:g}x); unclear: the speedup is within noise of 1 there"
    else:
        text += f" (target {search.width:g}x)"
    return text


def engine_batch(summary: RunSummary, point_id: str) -> str:
    """The running batch the engine reported at the point, over its configurations (the axis is the client's load;
    a dynamic-K table is keyed on this)."""
    seen = [b for c in summary.configs for p in c.repeats(point_id) if p.running_batch is not None
            and (b := p.running_batch.steady_mean if p.running_batch.steady_mean is not None
                 else p.running_batch.mean) is not None]
    if not seen:
        return "-"
    lo, hi = min(seen), max(seen)
    return f"{lo:.1f}" if hi - lo < 0.05 else f"{lo:.1f}-{hi:.1f}"


def search_tables(summary: RunSummary) -> list[Grid]:
    """Per searched axis: the points in the order measured with why, then where the search ended."""
    out: list[Grid] = []
    for search in summary.load_search:
        chosen = sum(s.chosen_by != "start" for s in search.steps)
        steps = grid(f"Load search ({_axis(search)}): {len(search.steps)} points, {chosen} chosen where the "
                     f"crossover or a best-K boundary was least sure (target width {search.width:g}x, at most "
                     f"{search.max_points} points)", ("#", "point", "engine batch", "chosen by", "bracket", "why"),
                     left={"point", "chosen by", "bracket", "why"}, no_wrap={"point", "bracket", "engine batch"})
        for i, s in enumerate(search.steps, 1):
            bracket = "-" if s.bracket is None else f"{s.bracket.span} ({s.bracket.width:.2f}x)"
            steps.add_row(str(i), s.point_id, engine_batch(summary, s.point_id), s.chosen_by, bracket, s.why)
        out.append(steps)
        ended = grid(f"Load search ({_axis(search)}): where it ended", ("what", "answer"))
        ended.add_row(STATUS[search.status], search.why or "-")
        for c in search.crossovers:
            ended.add_row(f"crossover {c.config_id}", crossover_text(summary, search, c))
        for b in search.brackets:
            ended.add_row(f"bracket {b.span} ({b.width:.2f}x)", "\n".join(b.reasons))
        out.append(ended)
    return out


def search_lines(summary: RunSummary) -> list[str]:
    """The answer's lines: per searched axis, what it measured and where each crossover ended up."""
    out = []
    for search in summary.load_search:
        chosen = [s.point_id for s in search.steps if s.chosen_by != "start"]
        line = (f"the load search measured {len(search.steps)} {_axis(search)} points"
                + (f" ({', '.join(chosen)} chosen, in that order)" if chosen else "") + f"; {STATUS[search.status]}")
        out.append(line)
        out += [f"crossover of {c.config_id}: {crossover_text(summary, search, c)}" for c in search.crossovers]
    return out
