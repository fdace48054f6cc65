"""Which static configurations of a sweep are one drafter (one recommendation, one table over their Ks),
and the engine-neutral configs that drafter's recommendation deploys: the table's and the static K's.
Engines render these; nothing here names an engine's flags."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from specmeter.config.models import SpecConfig
from specmeter.schemas.plan import PlannedConfig, Role
from specmeter.schemas.recommend import KRange


def _key(spec: SpecConfig, *without: str) -> str:
    return json.dumps(spec.model_dump(mode="json", exclude=set(without)), sort_keys=True)


def families(configs: Sequence[PlannedConfig], notes: list[str]) -> list[list[PlannedConfig]]:
    """Static candidates grouped by drafter, each by K: everything but K and the engine extras equal. Extras
    that differ only as a function of K (each K once) are still one drafter; the same K twice with different
    extras is two drafters, split by extra. Synthetic acceptance is a measurement, never a drafter to deploy."""
    groups: dict[str, list[PlannedConfig]] = {}
    for c in configs:
        if c.role is not Role.candidate or c.workload != "main":
            continue
        if c.spec.synthetic:
            notes.append(f"{c.id} runs synthetic acceptance (a measurement of cost, outputs not valid text): never "
                         "recommended")
            continue
        if c.spec.num_speculative_tokens_per_batch_size:
            notes.append(f"{c.id} already runs a dynamic table; only static K configurations enter a recommendation")
            continue
        groups.setdefault(_key(c.spec, "num_speculative_tokens", "extra"), []).append(c)
    out: list[list[PlannedConfig]] = []
    for group in groups.values():
        ks = [c.k for c in group]
        if len(set(ks)) == len(ks):
            out.append(group)
            continue
        by_extra: dict[str, list[PlannedConfig]] = {}
        for c in group:
            by_extra.setdefault(_key(c.spec, "num_speculative_tokens"), []).append(c)
        out.extend(by_extra.values())
    return [sorted(g, key=lambda c: c.k) for g in out]


def deploy_specs(family: list[PlannedConfig], ranges: list[KRange], static: PlannedConfig | None, label: str,
                 dead_flags: Sequence[str], notes: list[str]) -> tuple[SpecConfig | None, SpecConfig | None]:
    """The drafter's table as a SpecConfig (None when it drafts nowhere) and its static K's (None: off).
    Each carries the extras of the configuration that ran its largest K, less `dead_flags`; a table runs one
    configuration at every K, so where the extras differ per K a note says whose it carries."""
    def live(extra: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in extra.items() if k not in dead_flags}

    dropped = sorted({k for c in family for k in c.spec.extra if k in dead_flags})
    if dropped:
        notes.append(f"{label}: dropped {', '.join(dropped)} from the emitted config (gone from vLLM; the K = 0 "
                     "range replaces it)")
    k_max = max(r.k for r in ranges)
    table = None
    if k_max > 0:
        top = next(c for c in family if c.k == k_max)  # every K of the table is one of the family's, or 0
        table = top.spec.model_copy(update={"num_speculative_tokens": k_max, "extra": live(top.spec.extra),
                                            "num_speculative_tokens_per_batch_size": [tuple(r.entry) for r in ranges]})
        table = SpecConfig.model_validate(table.model_dump())  # the launcher's validator: emit nothing it refuses
        if len({_key(c.spec, "num_speculative_tokens") for c in family}) > 1:
            notes.append(f"{label}: its configurations' engine extras differ per K, and a table runs one "
                         f"configuration at every K: the dynamic config carries K={k_max}'s extras; the static "
                         "config carries its own K's")
    static_spec = None if static is None else static.spec.model_copy(update={"extra": live(static.spec.extra)})
    return table, static_spec


def drafter_label(spec: SpecConfig) -> str:
    """Human label of a drafter, e.g. 'draft_model demo-draft', 'draft_model demo-draft p-min 0.5', 'eagle3 head
    adaptive': what tells two drafters of one model apart is in it."""
    parts = [spec.method.value]
    for model in (spec.draft_model, spec.target_model):
        if model:
            parts.append(model.rstrip("/").rsplit("/", 1)[-1])
    if spec.prompt_lookup_min is not None or spec.prompt_lookup_max is not None:
        parts.append(f"n-gram {spec.prompt_lookup_min or '-'}..{spec.prompt_lookup_max or '-'}")
    if spec.draft_p_min is not None:
        parts.append(f"p-min {spec.draft_p_min:g}")
    if spec.adaptive:
        parts.append("adaptive")
    return " ".join(parts)
