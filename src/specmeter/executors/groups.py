"""Which configurations must run in one job, on one node: a speedup, a best-K choice or a head-to-head comparison
is only fair between configurations measured on the same hardware.

`node` puts the whole plan in one job (the default: the plan fits one node). `drafter` gives each drafter (all its
K, and its ceiling) a job of its own with its own baseline, `baseline@<group>`, so each drafter's best K is chosen
on one node and its speedups are over a baseline measured beside it."""

from __future__ import annotations

import json

from specmeter.common.errors import InputError
from specmeter.config.slurm import Grouping
from specmeter.schemas.jobs import JobGroup
from specmeter.schemas.plan import Plan, PlannedConfig, Role

NODE_GROUP = "node"


def plan_for_jobs(plan: Plan, grouping: Grouping) -> tuple[Plan, list[JobGroup]]:
    """The plan as the jobs run it (with a baseline per group where there are several groups), and its groups."""
    if grouping == "node":
        return plan, [JobGroup(name=NODE_GROUP, config_ids=[c.id for c in plan.configs])]
    if plan.load.search:
        raise InputError("--jobs drafter: a load search places each next point from comparisons of every "
                         "configuration, which must then run on one node; use --jobs node or list the loads")
    if any(c.workload != "main" or c.matched_random is not None for c in plan.configs):
        raise InputError("--jobs drafter: this plan has configurations on a derived workload; use --jobs node")
    bases = [c for c in plan.configs if c.role is Role.baseline]
    families: dict[str, list[PlannedConfig]] = {}
    for c in plan.configs:
        if c.role is not Role.baseline:
            families.setdefault(_drafter(c), []).append(c)
    if len(families) < 2:  # one drafter: one job, as --jobs node gives it
        return plan_for_jobs(plan, "node")
    configs: list[PlannedConfig] = []
    groups: list[JobGroup] = []
    for i, family in enumerate(families.values(), 1):
        name = f"j{i}-{family[0].spec.method.value}"
        own = [b.model_copy(update={"id": f"{b.id}@{name}", "server": f"{b.server}@{name}", "node_group": name})
               for b in bases]
        members = [*own, *(c.model_copy(update={"node_group": name}) for c in family)]
        configs += members
        groups.append(JobGroup(name=name, config_ids=[c.id for c in members]))
    return plan.model_copy(update={"configs": configs}), groups


def _drafter(config: PlannedConfig) -> str:
    """What a drafter is apart from its K: configurations that differ only in K (or in being its ceiling) share
    a job, so that drafter's K are compared on one node."""
    spec = config.spec.model_dump(mode="json", exclude={"num_speculative_tokens", "synthetic_acceptance"})
    return json.dumps({"spec": spec, "engine": config.engine.model_dump(mode="json")}, sort_keys=True)


def sub_plan(plan: Plan, group: JobGroup) -> Plan:
    """The part of the plan one job runs: its group's configurations, every point."""
    ids = set(group.config_ids)
    return plan.model_copy(update={"configs": [c for c in plan.configs if c.id in ids]})
