"""How much a round, and a server instance, move a ratio: the run's own noise, pooled over its cells.

A cell's speedup is measured over a few rounds (two to four), each a pass over the same prompts; one run starts
each configuration's server one or more times (instances). Between rounds the machine drifts, and between
instances what a start decides (where memory lands, which cores a server gets) changes too. Neither is in the
interval over requests, and two or three rounds are too few to estimate the spread from alone: a cell's own two
rounds either agree by chance (an interval too narrow, which the next run falls outside of) or are read with one
degree of freedom (an interval too wide to decide anything).

The run's other cells measure the same machine and engine, so their spread is evidence of this cell's: a cell's
round variance is its own moderated by the run's pooled one (an empirical-Bayes variance, as in limma's moderated
t), weighted by their degrees of freedom. Where rounds ran on more than one instance, the instances' spread beyond
what the rounds explain is estimated the same way (one-way random effects, method of moments) and added.

Two intervals follow, on the log of the ratio, centred on the cell's estimate:
- `rounds`: where the cell's mean over rounds and instances lies, at the ratio's confidence (the doubt decisions
  read beside the requests');
- `rerun`: where the next run's estimate of the cell lands, 95%: its own rounds and instances again, so twice the
  variance, read with Student's t on the noise's degrees of freedom. A single-instance run leaves restarts out
  of it, and says so (Ratio.instances).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

from specmeter.analysis.host import disturbed
from specmeter.analysis.student import t_quantile
from specmeter.schemas.analysis import Ratio
from specmeter.schemas.plan import Role
from specmeter.schemas.results import ConfigResult, PointResult

Cell = tuple[str, str]  # (configuration, point)
RERUN_CONFIDENCE = 0.95


@dataclass(frozen=True)
class Spread:
    """One cell's rounds: the sum of squared deviations within its instances, their degrees of freedom, and the
    instance means' part beyond them (sum of squares between, its degrees of freedom, and the effective rounds
    per instance it is read against)."""

    within: float
    within_df: int
    between: float
    between_df: int
    between_weight: float

    @classmethod
    def of(cls, logs: Mapping[int, float], instance_of: Mapping[int, int]) -> Spread:
        groups: dict[int, list[float]] = defaultdict(list)
        for repeat, y in logs.items():
            groups[instance_of.get(repeat, 0)].append(y)
        within = sum(sum((y - _mean(g)) ** 2 for y in g) for g in groups.values())
        within_df = sum(len(g) - 1 for g in groups.values())
        n = sum(len(g) for g in groups.values())
        grand = _mean([y for g in groups.values() for y in g]) if n else 0.0
        between = sum(len(g) * (_mean(g) - grand) ** 2 for g in groups.values())
        # E[between] = (m - 1) sigma_w^2 + (n - sum n_g^2 / n) sigma_b^2 (one-way random effects)
        weight = n - sum(len(g) ** 2 for g in groups.values()) / n if n else 0.0
        return cls(within, within_df, between, len(groups) - 1, weight)


@dataclass(frozen=True)
class RoundNoise:
    """The run's round spread per cell (candidate against its baseline, log of the per-round throughput ratio),
    clean rounds only, from which any cell's moderated variance is read."""

    cells: Mapping[Cell, Spread]

    @classmethod
    def of(cls, results: Sequence[ConfigResult]) -> RoundNoise:
        baselines = [r for r in results if r.role is Role.baseline]
        cells: dict[Cell, Spread] = {}
        for result in results:
            if result.role is Role.baseline or not baselines:
                continue
            for point_id in dict.fromkeys(p.point_id for p in result.points):
                mine = _rates(result.repeats(point_id))
                base = next((b for b in (_rates(b.repeats(point_id)) for b in baselines)
                             if b.keys() & mine.keys()), {})
                logs = {rep: math.log(mine[rep][0] / base[rep][0]) for rep in mine.keys() & base.keys()}
                if logs:
                    instance_of = {rep: mine[rep][1] for rep in logs}
                    cells[(result.config_id, point_id)] = Spread.of(logs, instance_of)
        return cls(cells)

    def pooled(self, leave_out: Iterable[Cell] = ()) -> Components:
        """The other cells' variance components (method of moments, pooled over cells): within an instance from
        rounds that shared one, between instances from their means beyond that. Where no cell ran two rounds on
        one instance (the demo's two rounds, one per instance) the two cannot be told apart, and all of the rounds'
        spread is read as the instances' (then a mean over one round per instance has exactly its variance)."""
        skip = set(leave_out)
        return components([s for c, s in self.cells.items() if c not in skip])


def components(spreads: Sequence[Spread]) -> Components:
    """The variance components of cells' rounds pooled (RoundNoise.pooled says how)."""
    within_df = sum(s.within_df for s in spreads)
    between_df = sum(s.between_df for s in spreads)
    within = sum(s.within for s in spreads) / within_df if within_df else 0.0
    weight = sum(s.between_weight for s in spreads)
    excess = sum(s.between for s in spreads) - within * between_df
    return Components(within, max(0.0, excess / weight) if weight > 0 else 0.0, within_df + between_df)


@dataclass(frozen=True)
class Components:
    """A round's variance within one server instance, the instances' beyond it, and the degrees of freedom both
    were estimated on (log of the ratio)."""

    within: float
    between: float
    df: int

    def of_mean(self, counts: Sequence[int]) -> float:
        """The variance of a mean over rounds, `counts` of them on each instance it ran on."""
        n = sum(counts)
        return self.within / n + self.between * sum((c / n) ** 2 for c in counts)


def with_spread(ratio: Ratio, per_repeat: Mapping[int, float | None], instance_of: Mapping[int, int],
                noise: RoundNoise, cells: Iterable[Cell]) -> Ratio:
    """Copy of `ratio` with its rounds' and rerun intervals (module doc). The components are this cell's own,
    moderated by the run's other cells' (`cells` being the run's cells this comparison is one of, left out of
    the prior so that none counts twice), each weighted by its degrees of freedom."""
    if ratio.value is None or ratio.value <= 0:
        return ratio
    logs = {rep: math.log(v) for rep, v in per_repeat.items() if v is not None and v > 0 and math.isfinite(v)}
    if not logs:
        return ratio
    own = components([Spread.of(logs, instance_of)])
    prior = noise.pooled(cells)
    df = prior.df + own.df
    if df == 0:
        return ratio  # one round in every cell: nothing says how much a round moves
    moderated = Components((prior.within * prior.df + own.within * own.df) / df,
                           (prior.between * prior.df + own.between * own.df) / df, df)
    counts = [sum(1 for r in logs if instance_of.get(r, 0) == i) for i in {instance_of.get(r, 0) for r in logs}]
    se2 = moderated.of_mean(counts)
    centre = math.log(ratio.value)
    # Decisions read the normal quantile at their confidence, as the requests' interval does (a sequential design's
    # early looks ask for 99.4% and more, where Student's t on a few degrees of freedom would let no point settle
    # within its rounds); the rerun interval, which says where one more run lands, reads Student's t.
    half = NormalDist().inv_cdf(0.5 + ratio.confidence / 2) * math.sqrt(se2)
    rerun = t_quantile(RERUN_CONFIDENCE, df) * math.sqrt(2 * se2)
    return ratio.model_copy(update={
        "rounds_low": math.exp(centre - half), "rounds_high": math.exp(centre + half),
        "rerun_low": math.exp(centre - rerun), "rerun_high": math.exp(centre + rerun),
        "instances": len(counts), "noise_df": df})


def _rates(points: Sequence[PointResult]) -> dict[int, tuple[float, int]]:
    """Per clean, measured round: output tokens per second, and the instance it ran on."""
    return {p.repeat: (p.latency.output_tokens / p.latency.wall_s, p.instance) for p in points
            if p.measured and not disturbed(p) and p.latency.wall_s > 0}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)
