"""Whether foreign work disturbed a round: the host reading of each (configuration, point, repeat), judged.

On a machine this small, what speculation gains depends on how much CPU the run gets: other work beside it
changes the answer, not only its noise. A round in which work other than the run's own took at least
DISTURBED_SHARE of the machine's CPU (at normal priority, or stolen by a hypervisor), or in which a foreign process
ran on a GPU, is disturbed. Its evidence is set aside where the point has clean rounds (analysis.headtohead), the
sequential design runs the point again in its place (execution.rounds), and a comparison that rests on disturbed
rounds alone has no clean verdict ("disturbed").
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from specmeter.schemas.host import HostReading
from specmeter.schemas.results import HostConditions, PointResult, RunSummary

# A tenth of the machine: on 2 cores, a fifth of one kept busy. An idle machine here reads under 1%; one other
# busy core reads 50%.
DISTURBED_SHARE = 0.10


def why_disturbed(reading: HostReading | None) -> str | None:
    """What disturbed the round, in words; None where it was quiet (or not read)."""
    if reading is None:
        return None
    parts = []
    if reading.foreign_share >= DISTURBED_SHARE:
        parts.append(f"other work took {reading.foreign_share:.0%} of the {reading.cpus} CPUs")
    if reading.foreign_gpu_pids:
        parts.append(f"foreign processes on the GPU ({', '.join(map(str, reading.foreign_gpu_pids))})")
    return "; ".join(parts) or None


def disturbed(result: PointResult) -> bool:
    return why_disturbed(result.host) is not None


def disturbed_rounds(summary: RunSummary, point_id: str) -> dict[int, str]:
    """The point's disturbed rounds (0-based repeat) and what disturbed each: a round is disturbed where any
    configuration's part of it was."""
    out: dict[int, str] = {}
    for config in summary.configs:
        for pr in config.repeats(point_id):
            why = why_disturbed(pr.host)
            if why is not None:
                out.setdefault(pr.repeat, why)
    return out


def conditions(summary: RunSummary) -> HostConditions | None:
    """How quiet the machine was over the run: each round's foreign share, and the rounds that were disturbed
    (None: no round was read)."""
    rounds: dict[tuple[str, int], list[PointResult]] = {}
    for config in summary.configs:
        for pr in config.points:
            if pr.host is not None:
                rounds.setdefault((pr.point_id, pr.repeat), []).append(pr)
    if not rounds:
        return None
    shares = [max(pr.host.foreign_share for pr in prs if pr.host is not None) for prs in rounds.values()]
    noisy = {key: why for key, prs in rounds.items()
             if (why := next((w for pr in prs if (w := why_disturbed(pr.host)) is not None), None)) is not None}
    return HostConditions(
        rounds=len(rounds), disturbed_share=DISTURBED_SHARE, median_foreign_share=statistics.median(shares),
        max_foreign_share=max(shares), niced_share=_niced(pr for prs in rounds.values() for pr in prs),
        disturbed=[f"{point} r{repeat + 1}: {why}" for (point, repeat), why in sorted(noisy.items())],
        disturbed_points=sorted({point for point, _ in noisy}))


def _niced(results: Iterable[PointResult]) -> float:
    """The largest share of the machine that lowered-priority foreign work took in any round."""
    return max((pr.host.niced_cpu_s / (pr.host.wall_s * pr.host.cpus) for pr in results
                if pr.host is not None and pr.host.wall_s > 0), default=0.0)
