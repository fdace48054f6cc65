"""Sequential sampling: a point runs rounds until every decision there is settled, or a budget runs out.

Looking at the data after every round and stopping once an interval clears its threshold inflates the error
of a fixed-sample interval: with enough looks, noise alone clears it once. So the 5% a decision may err is
spent over the looks the plan allows (alpha spending, a power family with exponent 2): look j of L reads its
intervals at confidence 1 - alpha x ((j/L)^2 - ((j-1)/L)^2), and by the union bound the chance that any look
of a point decides wrongly stays within alpha, however the looks are correlated. The first look comes only
after `min_rounds` rounds (in alternating order), so no decision rests on one lucky round; early looks spend
little, so what stops early is what is clear beyond doubt; the last look reads nearly the fixed design's 95%.

A decision is settled when every head-to-head comparison it reads is decided at the stated confidence: its
interval lies wholly above 1 + min gain (beats), wholly below (does not beat), or, straddling it, ends below
1 + z, the plan's indifference zone (a tie: the costlier is at most z better, so the cheaper, which is kept, is
within z of the better). Without the zone a near-tie (a true ratio close to 1 + min gain) never settles and runs
every point to its budget; with it such a point stops once the interval shows the answer hardly matters. Only the
upper end is read: a costlier configuration that measures a little slower (a drafter past its crossover) settles
once it is shown not to be much faster, however much slower it might be. A tie is an interval claim like the
others, so the alpha spent over the looks bounds a wrong tie (the true ratio above 1 + z) as it bounds a wrong
beats.

A point measures only what its open decisions need: a configuration no comparison still to be settled can read,
or one that has settled against every choice still possible without beating it, rests from the next round on
(resting says which). Its settled comparisons stay settled: later looks read them
on the same rounds at a lower confidence, so the alpha spent bounds them as before.

A point also stops once more rounds are very unlikely to change what it keeps (futility, stochastic curtailment):
an open comparison ends the way "does not beat" and a tie do, with the cheaper kept, so only a win could change
the answer, and where no open comparison has more than `load.futility` predictive probability of ending as a win
at the last look the budget allows, the rounds left would be spent on a label. The probability reads the interval
as a normal posterior for the ratio and asks how likely the pooled estimate after max_rounds rounds clears the
last look's bound (Lan, Simon and Halperin's stochastic curtailment, in its predictive form, which is less eager
than the current trend while the interval is wide). It cannot add a wrong win (it never stops on one), and it
gives up only wins the remaining rounds were unlikely to show: the comparison stays "unsettled" and the point
says it stopped for futility.

The zone's futility goes one step further, on the same reading: a win changes the answer by more than the zone only
where the challenger is truly more than z better (a win at most z better replaces a cheaper that was within z of
it), so a point also stops once no open comparison has more than `load.futility` predictive probability of ending
as a win with the true ratio above 1 + z (zone_win_chance: the ratio's normal posterior, integrated above the zone's
edge, times the chance of a win given it). That probability is never above the win chance, so this stops wherever
futility does and on near-ties too (a challenger estimated 2% better on a steady machine, whose win would be real
but worth less than the zone), and what it gives up is bounded as futility's is: a win beyond the zone that the
rounds left were unlikely to show. It reads the point as futile too, so verification carries it. A stop on the
projected interval alone ("at the budget it would still straddle a zone edge") was measured and not taken: it
ignores how far the estimate may still move and doubles the wrong answers beyond the zone on a busy machine
(benchmarks/sequential_sampling.py --simulate).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

from specmeter.analysis.choice import Duel, choose, contenders
from specmeter.analysis.families import families
from specmeter.analysis.headline import headline_metric
from specmeter.analysis.headtohead import Arena
from specmeter.analysis.verify import adaptive_challenge, at_point, drafted_check, table_challenge
from specmeter.config.models import LoadSpec
from specmeter.schemas.analysis import HeadToHead
from specmeter.schemas.plan import Role
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary

ALPHA = 0.05
SPENDING_POWER = 2.0
FIXED_CONFIDENCE = 1.0 - ALPHA


def looks(load: LoadSpec) -> int:
    """How many times an adaptive point may look: after round min_rounds, and after every round up to max."""
    return load.max_rounds - load.min_rounds + 1


def look_confidence(look: int, planned: int, alpha: float = ALPHA) -> float:
    """The confidence look `look` (1-based) of `planned` reads its intervals at: 1 - the alpha it spends."""
    if not 1 <= look <= planned:
        raise ValueError(f"look {look} is outside the {planned} planned")
    spent = alpha * ((look / planned) ** SPENDING_POWER - ((look - 1) / planned) ** SPENDING_POWER)
    return float(1.0 - spent)


def confidence_after(rounds: int, load: LoadSpec) -> float:
    """The confidence of the look taken after `rounds` rounds of an adaptive point (95% for a fixed one)."""
    if load.precision != "adaptive":
        return FIXED_CONFIDENCE
    look = min(max(rounds - load.min_rounds + 1, 1), looks(load))
    return look_confidence(look, looks(load))


def point_arena(summary: RunSummary, records: Sequence[RequestRecord], point_id: str, confidence: float) -> Arena:
    """The configurations measured at the point, paired on its headline metric at `confidence`."""
    plan = summary.plan
    return Arena.of(summary.configs, records, point_id, headline_metric(plan.point(point_id)), min_gain=plan.min_gain,
                    indifference=plan.indifference, confidence=confidence)


def point_walks(summary: RunSummary, records: Sequence[RequestRecord], point_id: str,
                confidence: float, arena: Arena | None = None) -> list[list[HeadToHead]]:
    """The head-to-head comparisons the decisions at this point read, at `confidence`, as the walks that make them,
    each in its order (`arena`: the point's, where the caller has it).

    A sweep decides the best configuration at the point (every candidate from the baseline up) and each
    drafter's K (its own walk, which the recommendation reads). A verification decides whether a static K beats
    the dynamic table where the table's K differs from it: that alone can correct the table."""
    plan = summary.plan
    arena = arena or point_arena(summary, records, point_id, confidence)
    base = plan.main_baseline
    if base is None or base.id not in arena.sides:
        return []
    if plan.kind == "verify":
        walk = verify_decisions(summary, records, arena, point_id)
        return [] if walk is None else [walk]
    measured = [c for c in plan.configs if c.role is Role.candidate and c.workload == "main" and c.id in arena.sides
                and not c.spec.synthetic]  # synthetic acceptance is measured, never decided on
    return [choose(point_id, contenders(base.id, [(c, 1.0) for c in group]), arena.duel,
                   min_gain=plan.min_gain).evidence
            for group in [measured, *families(measured, [])] if group]


def distinct(walks: Sequence[Sequence[HeadToHead]]) -> list[HeadToHead]:
    """The walks' comparisons, each pair once."""
    return list({(h.config_id, h.against): h for walk in walks for h in walk}.values())


def verify_decisions(summary: RunSummary, records: Sequence[RequestRecord], arena: Arena,
                     point_id: str) -> list[HeadToHead] | None:
    """Whether the best static K beats what the table runs at the batch the engine ran
    (analysis.verify.table_challenge), and whether the engine's own adaptive speculation does, where the sweep
    measured it (adaptive_challenge): the comparisons whose outcomes correct the table. The table against the
    baseline is reported, not waited on: where the table drafts at a measured point, the sweep's walk settled that
    its K beats the baseline there (an open comparison keeps the cheaper), and where it drafts none the challenge is
    the best static K against the baseline itself. So a point whose best static K is the table's own stops after
    its first rounds, which show the engine drafting the table's K and the dynamic mode's cost (an empty walk: no
    comparison to wait on). None before the dynamic table has run there."""
    plan = summary.plan
    dynamic = next((c for c in plan.configs if c.role is Role.verification and c.id in arena.sides), None)
    if dynamic is None or plan.main_baseline is None:
        return None
    table_k = drafted_check(dynamic, point_id, at_point(summary, point_id), records).expected_k
    duels = (table_challenge(plan, arena, point_id, table_k), adaptive_challenge(plan, arena, point_id, table_k))
    return [h for h in duels if h is not None]


def resting(summary: RunSummary, walks: Sequence[Sequence[HeadToHead]], point_id: str,
            duel: Duel | None = None) -> set[str]:
    """The configurations at the point the next round can leave out, because no comparison still to be settled can
    read them. A verification's comparisons are fixed: whatever is in none still open rests. A sweep's walk goes
    from the cheapest and sets each challenger against the choice so far, so from its first open comparison on,
    the choice there and every later challenger may still be read (which later comparisons are made depends on how
    the open one ends); what the walk left behind rests, and a configuration no walk reads keeps running.

    With `duel` (the point's comparisons, at the look's confidence), a later challenger that has settled against
    every configuration the walk could have chosen by then, beating none (does not beat, or a tie, which keeps
    the cheaper), rests too: however the open comparison ends, the walk meets it with a decision already made (K = 4
    at concurrency 16, slower than both the baseline and K = 2, while K = 2 against the baseline is open)."""
    plan = summary.plan
    running = {c.id for c in plan.configs if plan.runs(c, point_id)}
    if plan.kind == "verify":
        open_ = [h for h in distinct(walks) if h.outcome == "unsettled"]
        return running - {side for h in open_ for side in (h.config_id, h.against)}
    read = {side for walk in walks for h in walk for side in (h.config_id, h.against)}
    needed: set[str] = set()
    for walk in walks:
        first = next((i for i, h in enumerate(walk) if h.outcome == "unsettled"), None)
        if first is None:
            continue
        choices = {walk[first].against, walk[first].config_id}  # what the walk may have chosen by the next one
        for h in walk[first + 1:]:
            if duel is None or any(duel(h.config_id, c).outcome in ("beats", "unsettled") for c in choices):
                choices.add(h.config_id)
        needed |= choices
    return (running & read) - needed


def outside_decisions(summary: RunSummary, walks: Sequence[Sequence[HeadToHead]], point_id: str) -> set[str]:
    """The configurations at the point that no decision the run is for reads, open or settled: min_rounds guards
    decisions, so after the first round (which shows their speedups) these rest until the looks begin. A
    verification is for its one comparison, the table against the best static K, so its baseline is reported, not
    waited on. A proposal is for its walk from the first comparison with a proposed K on: each proposed K runs
    beside the configuration the sweep's walk held when it reached that K, and the walk up to there repeats what
    the sweep decided, so what only that part reads rests (the baseline below a proposed K = 5 at batch 1). A
    sweep is for everything its walks read."""
    plan = summary.plan
    running = {c.id for c in plan.configs if plan.runs(c, point_id)}
    if plan.kind == "verify":
        return running - {side for h in distinct(walks) for side in (h.config_id, h.against)}
    if plan.kind != "propose":
        return set()
    proposed = {p.config_id for p in plan.proposed}
    behind: set[str] = set()
    ahead: set[str] = set()
    for walk in walks:
        first = next((i for i, h in enumerate(walk) if {h.config_id, h.against} & proposed), len(walk))
        behind |= {side for h in walk[:first] for side in (h.config_id, h.against)}
        ahead |= {side for h in walk[first:] for side in (h.config_id, h.against)}
    return (running & behind) - ahead


@dataclass(frozen=True)
class Predictive:
    """An open comparison read for what the rounds to come may show: the ratio's estimate, its spread (the normal
    posterior's), the share of max_rounds run, and the estimate the last look needs for a win."""

    value: float
    sigma: float
    done: float
    needed: float


def predictive(h: HeadToHead, rounds: int, load: LoadSpec) -> Predictive | None:
    """The ratio taken as normal around its estimate with the spread its lower bound shows (half-width over the
    look's z), and the end's lower bound as its half-width shrunk with the square root of the rounds, at the last
    look's confidence. None where it cannot be read (no interval, a settled comparison, no round left)."""
    value, low = h.ratio.value, h.low
    if h.outcome != "unsettled" or value is None or low is None or not 0 < rounds < load.max_rounds:
        return None
    normal = NormalDist()
    sigma = (value - low) / normal.inv_cdf(0.5 + h.ratio.confidence / 2)
    if sigma <= 0:
        return None
    done = rounds / load.max_rounds
    end_z = normal.inv_cdf(0.5 + confidence_after(load.max_rounds, load) / 2)
    return Predictive(value, sigma, done, h.threshold + end_z * sigma * math.sqrt(done))


def win_chance(h: HeadToHead, rounds: int, load: LoadSpec) -> float | None:
    """The predictive probability that the open comparison `h`, read after `rounds` rounds, ends as a win at the
    last look max_rounds allows (predictive: the pooled estimate at the end as today's and the rounds to come).
    None where it cannot be read."""
    p = predictive(h, rounds, load)
    if p is None:
        return None
    return 1.0 - NormalDist().cdf((p.needed - p.value) / (p.sigma * math.sqrt(1.0 - p.done)))


def futile(decisions: Sequence[HeadToHead], rounds: int, load: LoadSpec) -> list[tuple[HeadToHead, float]] | None:
    """The open comparisons with the chance each has of ending as a win, where every one is below
    `load.futility` (so more rounds would very likely keep what the point keeps now); None where one could still
    win, none is open, or futility is off (0)."""
    chances = [(h, win_chance(h, rounds, load)) for h in decisions if h.outcome == "unsettled"]
    if not load.futility or not chances or any(c is None or c >= load.futility for _, c in chances):
        return None
    return [(h, c) for h, c in chances if c is not None]


def zone_win_chance(h: HeadToHead, rounds: int, load: LoadSpec, steps: int = 200) -> float | None:
    """The predictive probability that the open comparison `h` ends as a win at the last look max_rounds allows
    AND the challenger is truly more than the zone better: the one way more rounds could change the answer by more
    than the zone (a win where the challenger is at most z better replaces a cheaper that was within z). Given a
    true ratio r, the pooled estimate at the end is normal around done x estimate + (1 - done) x r with variance
    sigma^2 x done x (1 - done), so the chance is the integral over r above 1 + z of the chance of a win given r
    (midpoint rule in `steps`, out to eight spreads). None where win_chance is, or where the comparison has no zone
    wider than the minimum gain (no ties: every win counts)."""
    p, zone = predictive(h, rounds, load), h.indifference
    if p is None or zone is None or 1.0 + zone <= h.threshold:
        return None
    normal = NormalDist()
    start = (1.0 + zone - p.value) / p.sigma  # the zone's edge, in spreads from the estimate
    width = max(8.0 - start, 0.0) / steps
    spread = p.sigma * math.sqrt(p.done * (1.0 - p.done))
    total = 0.0
    for i in range(steps):
        t = start + (i + 0.5) * width
        mean = p.value + (1.0 - p.done) * t * p.sigma  # done x estimate + (1 - done) x (estimate + t sigma)
        total += normal.pdf(t) * (1.0 - normal.cdf((p.needed - mean) / spread)) * width
    return total


def indifferent(decisions: Sequence[HeadToHead], rounds: int,
                load: LoadSpec) -> list[tuple[HeadToHead, float]] | None:
    """The open comparisons with the chance each has of ending as a win beyond the zone (zone_win_chance), where
    every one is below `load.futility`: more rounds would very likely change the answer by no more than the zone,
    so the cheaper stays, unsettled. None where one could still win beyond it, none is open, or futility is off."""
    chances = [(h, zone_win_chance(h, rounds, load)) for h in decisions if h.outcome == "unsettled"]
    if not load.futility or not chances or any(c is None or c >= load.futility for _, c in chances):
        return None
    return [(h, c) for h, c in chances if c is not None]


def futile_points(runs: Iterable[RunSummary]) -> frozenset[str]:
    """The points every run that measured them stopped settled or for futility, and at least one for futility: what
    such a point keeps stands as firmly as a settled decision's (a win the rounds left were unlikely to show, under
    `load.futility`, against a wrong decision's alpha), so verification carries it. A budget's stop, a fixed
    design's rounds or a run still going leave the point open."""
    stops: dict[str, set[str | None]] = {}
    for summary in runs:
        for sampled in summary.sampling:
            stops.setdefault(sampled.point_id, set()).add(sampled.stopped)
    return frozenset(p for p, found in stops.items() if "futile" in found and found <= {"settled", "futile"})


def settled(decisions: Sequence[HeadToHead]) -> bool:
    """Beats, does not beat and tie are all settled: only an interval still across the threshold and wider than
    the zone could change with more data."""
    return all(h.outcome != "unsettled" for h in decisions)
