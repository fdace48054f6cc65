"""Acceptance profiles from a run: per drafter (every K it ran pooled) and per category.

The configurations left out (--exclude) teach nothing here either, so a left-out K is predicted from the
drafter's other Ks alone. Synthetic-acceptance runs measure cost, not a drafter, and give no profile; their own
acceptance is known in advance, the rates they were set to (`set_profiles`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from specmeter.analysis.families import drafter_label
from specmeter.common.errors import InputError
from specmeter.engines.registry import plan_stats
from specmeter.predict.acceptance import AcceptanceProfile, accepted_variance
from specmeter.predict.observations import drafter_key
from specmeter.rundir.store import load_summary
from specmeter.schemas.metrics import CategorySD
from specmeter.schemas.plan import PlannedConfig, Role
from specmeter.schemas.results import RunSummary
from specmeter.schemas.sd import SDCounts


def _teaches(c: PlannedConfig, exclude: Sequence[str]) -> bool:
    """Whether a configuration's acceptance teaches a drafter's chain profile (a tree's steps verify many nodes per
    depth: neither its acceptance nor its cost is a chain's)."""
    return (c.role is Role.candidate and c.workload == "main" and c.spec.enabled and c.id not in exclude
            and not c.spec.num_speculative_tokens_per_batch_size
            and c.spec.synthetic_acceptance is None and not c.spec.drafts_tree)


def drafter_profiles(summary: RunSummary, run: str, exclude: Sequence[str] = ()) -> dict[str, AcceptanceProfile]:
    """Per drafter key: the profile pooled over every point of every K the drafter ran (and was not left out)."""
    pooled: dict[str, list[tuple[int, SDCounts]]] = {}
    labels: dict[str, str] = {}
    deffs: dict[str, list[float]] = {}
    for c in summary.plan.configs:
        res = summary.config(c.id)
        if res is None or not _teaches(c, exclude):
            continue
        key = drafter_key(c.spec)
        labels[key] = drafter_label(c.spec)
        for p in res.points:
            head = p.sd.headline
            if head is not None and head.num_steps:
                pooled.setdefault(key, []).append((c.k, head))
                deff = _design_effect(p.categories.pooled if p.categories else None, head, c.k)
                if deff is not None:
                    deffs.setdefault(key, []).append(deff)
    out: dict[str, AcceptanceProfile] = {}
    for key, measured in pooled.items():
        d = sorted(deffs.get(key, []))
        profile = AcceptanceProfile.from_counts(measured, f"{run}: {labels[key]}",
                                                design_effect=d[len(d) // 2] if d else 1.0)
        if profile is not None:
            out[key] = profile
    return out


def set_profiles(summary: RunSummary) -> dict[str, AcceptanceProfile]:
    """Per configuration whose acceptance was set (synthetic acceptance): the per-position rates its engine was set
    to, as a given profile. What such a configuration measured is its drafter's cost at that acceptance, so its
    points are predicted at those rates, never at what the drafter itself accepts."""
    stats = plan_stats(summary.plan)
    out: dict[str, AcceptanceProfile] = {}
    for c in summary.plan.configs:
        synth = c.spec.synthetic_acceptance
        if synth is None or not c.spec.enabled or c.id not in stats:
            continue
        out[c.id] = AcceptanceProfile.given(synth.rates_for(c.k, stats[c.id].synthetic_length_schedule),
                                            source=f"{c.id}: set ({synth.label(c.k)})")
    return out


def category_profiles(summary: RunSummary, run: str,
                      exclude: Sequence[str] = ()) -> dict[tuple[str, str], AcceptanceProfile]:
    """Per (drafter key, category): the profile from the per-request counts of that category's requests."""
    pooled: dict[tuple[str, str], list[tuple[int, SDCounts]]] = {}
    for c in summary.plan.configs:
        res = summary.config(c.id)
        if res is None or not _teaches(c, exclude):
            continue
        key = drafter_key(c.spec)
        for p in res.points:
            for cat in p.categories.categories if p.categories else []:
                if cat.counts.num_steps:
                    pooled.setdefault((key, cat.category), []).append((c.k, cat.counts))
    out: dict[tuple[str, str], AcceptanceProfile] = {}
    for (key, category), measured in pooled.items():
        profile = AcceptanceProfile.from_counts(measured, f"{run}: {category}", category=category)
        if profile is not None:
            out[(key, category)] = profile
    return out


def _design_effect(pooled: CategorySD | None, head: SDCounts, k: int) -> float | None:
    """How much wider the request bootstrap's AL interval is than independent steps would give (squared)."""
    if pooled is None:
        return None
    low, high = pooled.al_ci95_low, pooled.al_ci95_high
    if low is None or high is None or not head.num_steps:
        return None
    rates = head.per_position_rate[:k]
    se_steps = math.sqrt(accepted_variance(rates) / head.num_steps) if rates else 0.0
    if se_steps <= 0:
        return None
    return max(1.0, ((high - low) / (2 * 1.96 * se_steps)) ** 2)


def profile_of_run(run_dir: Path, config_id: str | None = None) -> AcceptanceProfile:
    """The acceptance profile of one configuration's drafter in a run (its only drafter, when not named)."""
    summary = load_summary(run_dir)
    profiles = drafter_profiles(summary, run_dir.name)
    if config_id is not None:
        planned = next((c for c in summary.plan.configs if c.id == config_id), None)
        if planned is None or not planned.spec.enabled:
            raise InputError(f"{run_dir}: no speculative configuration {config_id!r}; choose from "
                             + ", ".join(c.id for c in summary.plan.configs if c.spec.enabled))
        if planned.spec.drafts_tree:
            raise InputError(f"{run_dir}: {config_id} drafts a token tree, and the planner models chains (one "
                             "drafted token per position); pick a chain configuration")
        key = drafter_key(planned.spec)
        if key not in profiles:
            raise InputError(f"{run_dir}: {config_id} counted no acceptance; pick a configuration that drafted")
        return profiles[key]
    if len(profiles) != 1:
        names = ", ".join(p.source for p in profiles.values()) or "none"
        raise InputError(f"{run_dir}: {len(profiles)} drafters measured acceptance ({names}); name one with "
                         "RUN:CONFIG_ID")
    return next(iter(profiles.values()))


def parse_acceptance(text: str | None, k_max: int) -> AcceptanceProfile:
    """--acceptance: an iid rate (0.7), per-position unconditional rates (0.8,0.6,0.45), or a run directory (RUN
    or RUN:CONFIG_ID) whose measured profile to assume."""
    if text is None:
        raise InputError("--acceptance: give an acceptance rate (0.7), per-position rates (0.8,0.6,0.45) or a run "
                         "directory (RUN or RUN:CONFIG_ID) whose acceptance to assume")
    path, _sep, config = text.partition(":")
    if Path(path).is_dir():
        return profile_of_run(Path(path), config or None)
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"--acceptance {text!r}: give an acceptance rate (0.7), per-position rates "
                         "(0.8,0.6,0.45) or a run directory (RUN or RUN:CONFIG_ID)") from None
    try:
        if len(values) == 1:
            return AcceptanceProfile.iid(values[0], k_max)
        return AcceptanceProfile.given(values)
    except ValueError as exc:
        raise InputError(f"--acceptance {text!r}: {exc}") from None
