"""What analysis decides, stored in the run summary so every report shows the same verdicts.

Reports render these; they never recompute them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

# disturbed: every round the verdict rests on shared the machine with other work (analysis.host): none is given.
# withheld: the candidate's server drafted otherwise than its configuration claims at this point (analysis.identity).
Verdict = Literal["pays", "slows", "unclear", "disturbed", "withheld"]


class Ratio(BaseModel):
    """A ratio (speedup) with its 95% interval and, with repeats, its spread across repeats."""

    value: float | None = Field(description="Point estimate over all repeats pooled (or the one run).")
    ci95_low: float | None = None
    ci95_high: float | None = None
    repeat_values: list[float] = Field(default_factory=list, description="One estimate per repeat.")
    median: float | None = Field(default=None, description="Median of repeat_values (repeats >= 2).")
    mad: float | None = Field(default=None, description="Median absolute deviation of repeat_values (raw, "
                              "not scaled by 1.4826).")
    confidence: float = Field(default=0.95, description="Level of ci95_low/ci95_high: 0.95, or less alpha where a "
                              "sequential design spent it over several looks at the data.")
    disturbed: bool = Field(default=False, description="Every round it rests on was disturbed by other work on "
                            "the machine (analysis.host): a measurement, not a clean verdict.")
    set_aside: list[int] = Field(default_factory=list, description="Repeats left out because other work disturbed "
                                 "them while clean ones exist (0-based).")
    rounds_low: float | None = Field(default=None, description="Where the mean over rounds (and server instances) "
                                     "lies, at `confidence`: the round spread, moderated by the run's other cells "
                                     "(analysis.noise). Decisions read it beside the interval over requests.")
    rounds_high: float | None = None
    rerun_low: float | None = Field(default=None, description="Where the next run's estimate lands (95%): its own "
                                    "rounds and instances again. Restarts are in it only where instances > 1.")
    rerun_high: float | None = None
    instances: int = Field(default=1, description="Server instances the rounds ran on (a restart's effect is "
                           "measured only from 2).")
    noise_df: int | None = Field(default=None, description="Degrees of freedom of the round spread the intervals "
                                 "read: this cell's rounds and the run's other cells'.")


class PhaseSpeedup(BaseModel):
    """A candidate against the baseline on one phase of a phase-shift workload: the phase's requests, paired."""

    phase: str
    tpot: Ratio = Field(description="Baseline mean TPOT / candidate mean TPOT over the phase's requests: decode "
                        "speed, what acceptance changes.")
    paired_requests: int


class Speedup(BaseModel):
    """A candidate against the baseline at one load point, on the same requests (paired by request)."""

    config_id: str
    baseline_id: str
    point_id: str
    output_throughput: Ratio = Field(description="Candidate output tok/s / baseline output tok/s.")
    tpot: Ratio = Field(description="Baseline mean TPOT / candidate mean TPOT (> 1: candidate faster).")
    ttft: Ratio = Field(description="Baseline mean TTFT / candidate mean TTFT.")
    e2e: Ratio = Field(description="Baseline mean E2E / candidate mean E2E.")
    paired_requests: int = Field(description="Requests both sides completed, the unit the bootstrap resamples.")
    same_work: bool = Field(description="Both sides completed the same requests.")
    note: str | None = None
    phases: list[PhaseSpeedup] = Field(default_factory=list, description="Per phase of a phase-shift workload, in "
                                       "the order sent ([]: none).")

    decided_on: Literal["output_throughput", "tpot"] = Field(
        default="output_throughput", description="The ratio the verdict reads: throughput under closed-loop "
        "concurrency; TPOT at a request rate, where both sides deliver the offered rate.")
    verdict: Verdict | None = Field(
        default=None, description="From the interval of `decided_on`, never from the point estimate alone; "
        "disturbed: every round it rests on shared the machine with other work (analysis.host), so none is given; "
        "withheld: the candidate's server drafted another K than its configuration claims there (the note says "
        "which round), so the point measured something else.")


class Crossover(BaseModel):
    """Where a candidate's throughput speedup falls below 1 as load grows."""

    config_id: str
    axis: Literal["concurrency", "rate"]
    input_len: int | None = Field(default=None, description="The input length whose points it was found over (an "
                                  "input-length axis has one crossover per length; None: no such axis).")
    status: Literal["crosses", "always_pays", "never_pays", "unclear"] = Field(
        description="crosses: the speedup falls below 1 between two measured loads; always_pays / never_pays: "
        "above / below 1 at every measured load; unclear: it goes up and down, or too few points.")
    load: float | None = Field(default=None, description="Interpolated load where the speedup is 1.")
    low: float | None = Field(default=None, description="Lower end of the load interval for the crossover.")
    high: float | None = Field(default=None, description="Upper end (None: beyond the largest measured load).")
    note: str = ""


Metric = Literal["output_throughput", "tpot", "goodput"]
Outcome = Literal["beats", "does_not_beat", "tie", "unsettled"]
# The indifference zone's default: a costlier configuration settled at most 3% better than a cheaper one is a tie
# (the cheaper is kept). At most the minimum gain itself (1%) is rarely provable in a few rounds on a noisy machine;
# at most 3% costs the user at most about 3%, and such a tie settles in the rounds a point has.
DEFAULT_INDIFFERENCE = 0.03


def indifference_for(min_gain: float, indifference: float | None) -> float:
    """The zone as given, or its default: 3%, or the minimum gain where that is larger (a tie straddles
    1 + min gain, so a narrower zone would hold none)."""
    return max(DEFAULT_INDIFFERENCE, min_gain) if indifference is None else indifference


class HeadToHead(BaseModel):
    """A costlier configuration against a cheaper one at one point, paired on the requests both ran.

    The challenger replaces the incumbent only when the whole interval [low, high] lies above `threshold`
    (1 + min gain); `does_not_beat` when it lies wholly below; `tie` when it straddles the threshold but ends
    below 1 + indifference: the challenger is settled at most that much better, so the incumbent (the cheaper),
    which stays, is within it of the better of the two; `unsettled` while it straddles the threshold and reaches
    past 1 + indifference, which more data could still change (sequential sampling reads this)."""

    point_id: str
    config_id: str = Field(description="The challenger (costlier: larger K, or a drafter that costs more).")
    against: str = Field(description="The incumbent (cheaper).")
    metric: Metric
    ratio: Ratio = Field(description="Challenger over incumbent (> 1: the challenger is better), paired by request.")
    low: float | None = Field(description="Lower bound the decision reads: the paired interval at `ratio.confidence`, "
                              "widened by the spread across repeats.")
    high: float | None
    threshold: float = Field(description="1 + min gain: what the challenger must clear to replace the incumbent.")
    indifference: float | None = Field(default=None, description="The indifference zone: an interval that "
                                       "straddles the threshold but ends below 1 + indifference (the challenger at "
                                       "most that much better) is a tie (None: decided before ties existed).")
    outcome: Outcome
    paired_requests: int

    def summary(self) -> str:
        """One line a person reads: who against whom, by how much, and what it decided."""
        value = "-" if self.ratio.value is None else f"{self.ratio.value:.3f}x"
        bounds = "no interval" if self.low is None or self.high is None else f"[{self.low:.3f}, {self.high:.3f}]"
        verb = {"beats": "beats", "does_not_beat": "does not beat", "tie": "ties with",
                "unsettled": "unsettled against"}[self.outcome]
        needs = f"needs > {self.threshold:.2f}"
        if self.outcome == "tie":
            needs = f"{self.at_most()}, so {self.against}, the cheaper, stays"
        aside = (f"; round{'s' * (len(self.ratio.set_aside) > 1)} {', '.join(str(r + 1) for r in self.ratio.set_aside)}"
                 " set aside: other work disturbed them") if self.ratio.set_aside else ""
        if self.ratio.disturbed:
            aside = "; disturbed: every round shared the machine with other work, so this is no clean verdict"
        return (f"{self.config_id} {verb} {self.against}: {value} {bounds} on {self.paired_requests} paired "
                f"requests ({needs}{aside})")

    def at_most(self) -> str:
        """The tie's size: how much better the challenger can be at most, e.g. 'at most 3% better'."""
        return f"at most {100 * (self.indifference or 0.0):.3g}% better"


class PointChoice(BaseModel):
    """The configuration to run at one load point, decided head to head.

    Contenders are walked from the cheapest (the baseline, K = 0) to the costliest; each replaces the current
    choice only when it beats it head to head by more than the minimum gain; on a tie the cheaper stays.
    `evidence` holds every comparison the walk read."""

    point_id: str
    best_config_id: str = Field(description="The chosen configuration (the baseline when nothing clearly wins).")
    best_k: int = Field(description="Its K (0 for the baseline).")
    leader_config_id: str = Field(description="The configuration with the highest point estimate.")
    tied_with: list[str] = Field(default_factory=list, description="Stored runs of specmeter 0.1: configurations "
                                 "whose interval overlapped the leader's (the rule before head-to-head decisions).")
    reason: str
    evidence: list[HeadToHead] = Field(default_factory=list, description="The head-to-head comparisons the "
                                       "choice read, in the order it read them.")
    min_gain: float = Field(default=0.01, description="A costlier configuration must beat a cheaper one by more "
                            "than this fraction.")
    node_group: str | None = Field(default=None, description="Slurm: the job group (one node) decided here, among "
                                   "its own configurations (None: the whole plan ran on one node).")

    @property
    def settled(self) -> bool:
        """Every comparison the choice read is decided (beats, does not beat, or a tie): more data could not
        change it."""
        return all(h.outcome != "unsettled" for h in self.evidence)


class DraftedCheck(BaseModel):
    """Did the engine follow the dynamic table? Read from vLLM's per-request `per_step_drafted`: the K drafted
    at each verify step. Steps that drafted nothing (K = 0) are not reported by the engine; they are counted
    as the decode steps left over: output tokens - 1 - (accepted + 1) per reported step."""

    point_id: str
    engine_batch: float | None = Field(description="The running batch the engine reported at the point.")
    expected_k: int | None = Field(description="The table's K at that batch size.")
    allowed_k: list[int] = Field(default_factory=list, description="Every K the table gives batch sizes 1 up to "
                                 "the largest the engine ran at the point (ramp-up and drain pass through them).")
    drafted: dict[int, int] = Field(default_factory=dict, description="K drafted -> verify steps.")
    steps: int = 0
    modal_k: int | None = None
    share_expected: float | None = Field(default=None, description="Share of steps that drafted expected_k.")
    share_unexpected: float | None = Field(default=None, description="Share of steps drafting a K outside "
                                           "allowed_k.")
    followed: bool | None = Field(default=None, description="The most drafted K is the table's K at the batch "
                                  "the engine ran (None: the engine gave no per-step stats).")
    note: str = ""


class RecoveryCheck(BaseModel):
    """After a stretch at K = 0, does acceptance come back? The requests of the dynamic server at a point whose steps
    drafted nothing for a while (its table's K = 0 ranges), against the same requests (repeat and conversation) on the
    best static server: the share of their speculative steps that accepted the first drafted token (a_0, the same
    whatever K for a chain drafter). TensorRT-LLM #16888: after a K = 0 tier acceptance collapsed for the rest of
    each affected request."""

    requests: int = Field(description="Requests paired: drafted nothing on some steps there, and ran on both.")
    after_zero: float | None = Field(default=None, description="Their mean a_0 on the dynamic server.")
    static: float | None = Field(default=None, description="The same requests' mean a_0 on the static server.")
    low: float | None = Field(default=None, description="95% interval of the paired difference (dynamic - static).")
    high: float | None = None
    recovered: bool | None = Field(default=None, description="False: a_0 fell by more than COLLAPSE for certain; "
                                   "True: by less than that for certain; None: too few requests, or unsettled.")
    note: str = ""


class VerifyPoint(BaseModel):
    """The recommended dynamic config at one point, against the baseline and the best static config there."""

    point_id: str
    config_id: str
    static_id: str | None = Field(description="The sweep's best static configuration at this point.")
    vs_baseline: Speedup | None
    vs_static: Speedup | None = Field(description="Dynamic over the best static (> 1: the dynamic config wins).")
    drafted: DraftedCheck
    static_k: int | None = Field(default=None, description="The K of the best static configuration.")
    challenge: HeadToHead | None = Field(default=None, description="The best static against the dynamic table, "
                                         "head to head (beats: the static wins by more than the minimum gain).")
    adaptive_id: str | None = Field(default=None, description="The engine's own adaptive speculation the sweep "
                                    "measured best at this point, which the table is judged against too (None: the "
                                    "sweep measured none).")
    vs_adaptive: HeadToHead | None = Field(default=None, description="That adaptive configuration against the "
                                           "table, head to head (beats: the engine's adaptive mode wins by more "
                                           "than the minimum gain).")
    disagrees: bool = Field(default=False, description="A static K other than the table's beat the table at the "
                            "batch the engine ran, or the engine's adaptive speculation beat it: the table is wrong "
                            "there.")
    recovery: RecoveryCheck | None = Field(default=None, description="Where the table has a K = 0 range and steps "
                                           "drafted nothing here: whether acceptance came back after them.")
    note: str = ""


class CapacityGap(BaseModel):
    """Two configurations compared head to head (or against the baseline) whose servers held different numbers of
    KV cache tokens: where a point's batches fill the smaller cache, that side queues or preempts, and the
    comparison measures memory as well as speculation."""

    config_id: str
    against: str
    tokens: int = Field(description="KV cache tokens of config_id's server.")
    against_tokens: int
    point_id: str | None = Field(default=None, description="The compared point that asks the most of the cache.")
    peak_tokens: int | None = Field(default=None, description="Tokens in flight at that point at most: its slots x "
                                    "the longest request (prompt and output); None: unbounded slots (a rate).")
    fills: bool = Field(description="The peak reaches half the smaller cache or more (or is unbounded): the gap can "
                        "move the numbers.")
    note: str
