"""The order a plan's cells run in: a cell is (configuration, load point, repeat); a block is the set of servers up
at once and the cells they run, one server at a time or, with `interleave`, every server together with the
configurations alternating at each point (the runner has a closed-loop round's cells take turns a wave at a
time)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specmeter.config.models import LoadPoint
from specmeter.schemas.plan import Plan, PlannedConfig


@dataclass(frozen=True)
class Cell:
    config: PlannedConfig
    point: LoadPoint
    repeat: int


@dataclass
class Block:
    """Servers up together, and the cells they run in order."""

    servers: list[list[PlannedConfig]]
    cells: list[Cell]


def schedule(plan: Plan) -> list[Block]:
    """Cells in the order they run. Repeats are the outer loop, so each repeat sees the whole sweep
    once and slow drift spreads over every configuration instead of landing on one. With adaptive precision
    the rounds are the inner loop of each point (up to max_rounds; the point stops when its decisions settle)."""
    servers = plan.servers()
    if plan.interleave:
        def at(p: LoadPoint, r: int) -> list[Cell]:
            # Alternate the order each repeat: the configuration that runs first at a point (just after
            # another server's burst) changes, so order effects cancel over repeats.
            order = plan.configs if r % 2 == 0 else list(reversed(plan.configs))
            return [Cell(c, p, r) for c in _sources_first(order) if plan.runs(c, p.id)]

        if plan.load.precision == "adaptive":
            return [Block(servers, [c for p in plan.points for r in range(plan.load.max_rounds) for c in at(p, r)])]
        return [Block(servers, [c for r in range(plan.repeats) for p in plan.points for c in at(p, r)])]
    return [Block([group], [Cell(c, p, r) for r in range(plan.repeats) for p in plan.points for c in group
                            if plan.runs(c, p.id)]) for group in servers]


def _sources_first(configs: Sequence[PlannedConfig]) -> list[PlannedConfig]:
    """A configuration whose workload derives from another's records runs after it."""
    plain = [c for c in configs if c.matched_random is None]
    return plain + [c for c in configs if c.matched_random is not None]
