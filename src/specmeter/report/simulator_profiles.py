"""Acceptance profiles for the simulators users feed: what each speculative configuration of a finished run
accepted, over all its requests and per category, written in each simulator's own input shape, and specmeter's own
planner profile beside them. Every number is converted from the counts the run stored; nothing is measured or
decided here.

The field names are the simulators' own (docs/profiles.md cites where each is defined):
- BLIS (inference-sim/inference-sim, PR #1538: cmd/root.go, sim/config.go): the flags `--num-speculative-tokens K
  --speculative-acceptance-rate A [--speculative-method M]`, A the mean fraction of the K drafts accepted a step;
- AIConfigurator / AISimulate (ai-dynamo/aiconfigurator, src/aiconfigurator/sdk/speculative.py): an experiment's
  `nextn` (K) and `nextn_accepted`, the mean accepted draft tokens per step (0 <= nextn_accepted <= nextn);
- specdec_bench (NVIDIA/Model-Optimizer, PR #2247): `speculation_profile.json`, schema 1.0, with
  `conditional_accept_rates` and `marginal_accept_rates` both written, named apart;
- Dynamo's mocker (ai-dynamo/dynamo, lib/mocker/src/common/protocols.rs and speculative.rs): the
  `--extra-engine-args` keys `aic_nextn` (1 to 5) and `aic_nextn_accept_rates` (conditional, comma-separated);
- the planner (predict/acceptance.py): AcceptanceProfile's fields.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from rich.markup import escape

from specmeter.analysis.families import drafter_label
from specmeter.config.models import SpecMethod
from specmeter.metrics.sd import sum_counts
from specmeter.predict.acceptance import AcceptanceProfile, al_of
from specmeter.report.outputs import Output
from specmeter.report.pooled import pooled_histogram, pooled_sd
from specmeter.rundir.run_data import RunData
from specmeter.rundir.store import atomic_write_text
from specmeter.schemas.metrics import CategorySD
from specmeter.schemas.plan import PlannedConfig, Role
from specmeter.schemas.results import ConfigResult, RunSummary
from specmeter.schemas.sd import SDCounts

AICONFIGURATOR = "aiconfigurator.yaml"
PLANNER = "planner-profiles.json"
SPECULATION_PROFILE = "speculation_profile.json"  # specdec_bench's own file name
SPECULATION_SCHEMA = "1.0"
MOCKER_MAX_NEXTN = 5  # the mocker refuses aic_nextn outside 1..=5
# BLIS's --speculative-method labels (mtp, eagle, medusa, ngram, draft); a drafter without one goes unlabelled.
BLIS_METHODS = {SpecMethod.mtp: "mtp", SpecMethod.eagle: "eagle", SpecMethod.eagle3: "eagle",
                SpecMethod.ngram: "ngram", SpecMethod.draft_model: "draft"}
DIGITS = 6

AICONFIGURATOR_HEADER = """\
# Measured speculative-decoding acceptance, one experiment per configuration and category: merge nextn and
# nextn_accepted into an experiment of `aiconfigurator cli exp --yaml-path`, which also needs serving_mode,
# model_path, system_name and total_gpus.
"""


@dataclass(frozen=True)
class Scope:
    """What one configuration accepted over all its requests or one category's, pooled over its points and
    repeats."""

    # A simulator drafts K on every step, so its rates are over every step (1 + their sum is the measured AL); the
    # planner's are over the steps that drafted each position, where the engine counted those.
    per_step: AcceptanceProfile
    planner: AcceptanceProfile
    histogram: list[int] | None  # steps that accepted exactly j drafts, at index j
    request_mean_al: float | None

    @property
    def al(self) -> float:
        return al_of(self.per_step.per_position)

    def vectors(self) -> dict[str, Any]:
        """The acceptance specdec_bench's profile names: conditional and marginal per position, and AL."""
        return {"conditional_accept_rates": _rounded(self.per_step.conditional),
                "marginal_accept_rates": _rounded(self.per_step.per_position),
                "mean_accept_length": round(self.al, DIGITS),
                "mean_accept_length_per_request": _maybe_rounded(self.request_mean_al)}


@dataclass(frozen=True)
class Measured:
    """One speculative configuration's acceptance: over all its requests, and per category of the workload."""

    config: PlannedConfig
    result: ConfigResult
    overall: Scope
    categories: dict[str, Scope]

    @property
    def k(self) -> int:
        return self.config.k

    def scopes(self) -> list[tuple[Scope, str | None]]:
        """Every scope with the name part its files take (None: all requests; else the category's)."""
        parts = file_parts(self.categories)
        return [(self.overall, None), *((scope, parts[cat]) for cat, scope in self.categories.items())]


def _rounded(values: Iterable[float]) -> list[float]:
    return [round(v, DIGITS) for v in values]


def _maybe_rounded(value: float | None) -> float | None:
    return None if value is None else round(value, DIGITS)


def file_parts(names: Iterable[str]) -> dict[str, str]:
    """Each name as part of a file name (letters, digits, '.', '_', '-'; any other run of characters '-'), made
    unique with a counter where two names read alike."""
    out: dict[str, str] = {}
    for name in names:
        base = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "unnamed"
        part, n = base, 1
        while part in out.values():
            n += 1
            part = f"{base}-{n}"
        out[name] = part
    return out


def _exported(config: PlannedConfig) -> bool:
    """A measured chain drafter at one K: what every simulator here models. Synthetic acceptance is set, not
    measured; a tree's positions are not a chain's; a K table drafts a different K at each batch size."""
    spec = config.spec
    return (config.role is Role.candidate and config.workload == "main" and spec.enabled and not spec.synthetic
            and not spec.drafts_tree and not spec.num_speculative_tokens_per_batch_size)


def _pooled(items: list[SDCounts]) -> SDCounts | None:
    return None if not items else items[0] if len(items) == 1 else sum_counts(items, source=items[0].source)


def _request_mean(means: Iterable[tuple[float | None, int]]) -> float | None:
    """The mean over requests of their AL, from groups' means and sizes."""
    pairs = [(m, n) for m, n in means if m is not None and n > 0]
    total = sum(n for _, n in pairs)
    return sum(m * n for m, n in pairs) / total if total else None


def _scope(config: PlannedConfig, category: str | None, counts: list[SDCounts], histograms: list[SDCounts],
           means: Iterable[tuple[float | None, int]], run: str) -> Scope | None:
    pooled = _pooled(counts)
    if pooled is None or not pooled.num_steps:
        return None
    source = f"{run}: {config.id}" + (f" {category}" if category is not None else "")
    every_step = pooled.model_copy(update={"drafted_per_pos": None})
    per_step = AcceptanceProfile.from_counts([(config.k, every_step)], source, category=category)
    planner = AcceptanceProfile.from_counts([(config.k, pooled)], source, category=category)
    if per_step is None or planner is None:
        return None
    hist = _pooled(histograms)
    return Scope(per_step=per_step, planner=planner,
                 histogram=hist.histogram if hist is not None else None, request_mean_al=_request_mean(means))


def measured(summary: RunSummary, run: str) -> list[Measured]:
    """Every exported configuration that counted acceptance steps, in plan order; its categories by name."""
    out: list[Measured] = []
    for config in summary.plan.configs:
        res = summary.config(config.id)
        if res is None or not _exported(config):
            continue
        point_ids = list(dict.fromkeys(pr.point_id for pr in res.points))
        heads = [c for pid in point_ids if (c := pooled_sd(res, pid)[0]) is not None]
        hists = [c for pid in point_ids if (c := pooled_histogram(res, pid)) is not None]
        overall = _scope(config, None, heads, hists,
                         ((pr.sd.per_request_mean_al, pr.sd.requests_with_stats) for pr in res.points), run)
        if overall is None:
            continue
        rows: dict[str, list[CategorySD]] = {}
        for pr in res.points:
            for row in pr.categories.categories if pr.categories is not None else ():
                rows.setdefault(row.category, []).append(row)
        categories = {cat: s for cat, rs in sorted(rows.items())
                      if (s := _scope(config, cat, [r.counts for r in rs], [r.counts for r in rs if r.counts.histogram],
                                      ((r.al_request_mean, r.requests) for r in rs), run)) is not None}
        out.append(Measured(config=config, result=res, overall=overall, categories=categories))
    return out


def blis_args(m: Measured, scope: Scope) -> str:
    """BLIS's flags: its acceptance rate is the mean fraction of the K drafts accepted a step, so that its decode
    advancing 1 + rate x K tokens a step gives the measured AL."""
    rate = round((scope.al - 1) / m.k, DIGITS)
    words = ["--num-speculative-tokens", str(m.k), "--speculative-acceptance-rate", str(rate)]
    if (method := BLIS_METHODS.get(m.config.spec.method)) is not None:
        words += ["--speculative-method", method]
    return " ".join(words) + "\n"


def aiconfigurator_experiments(found: list[Measured]) -> dict[str, dict[str, Any]]:
    """AIConfigurator's experiments, named by configuration (and category): nextn is K, nextn_accepted the mean
    accepted draft tokens a step (AL - 1)."""
    out: dict[str, dict[str, Any]] = {}
    dirs = file_parts(m.config.id for m in found)
    for m in found:
        for scope, part in m.scopes():
            name = dirs[m.config.id] if part is None else f"{dirs[m.config.id]}--{part}"
            out[name] = {"nextn": m.k, "nextn_accepted": round(scope.al - 1, DIGITS)}
    return out


def mocker_args(m: Measured, scope: Scope) -> dict[str, Any]:
    """The mocker's --extra-engine-args keys: K and the conditional rates, P(draft i accepted | every earlier one
    was), as its comma-separated string."""
    return {"aic_nextn": m.k, "aic_nextn_accept_rates": ",".join(str(c) for c in _rounded(scope.per_step.conditional))}


def speculation_profile(m: Measured, summary: RunSummary, run: str) -> dict[str, Any]:
    """specdec_bench's speculation_profile.json of one configuration: its acceptance, per category too, and what
    was measured. The histogram is keyed by acceptance length (the target's own token counted, so j accepted
    drafts are length j + 1); keys the run cannot fill are null, as the schema's unmeasured profile has them."""
    spec, overall = m.config.spec, m.overall
    load = m.config.load or summary.plan.load
    return {
        "schema_version": SPECULATION_SCHEMA,
        "measured": True,
        "method": spec.method.value,
        "num_speculative_tokens": m.k,
        **overall.vectors(),
        "acceptance_length_histogram": ({str(j + 1): n for j, n in enumerate(overall.histogram)}
                                        if overall.histogram else None),
        # Suffix decoding and an engine's adaptive mode choose each step's draft length themselves.
        "accept_length_model": ("measured_per_k" if spec.method is SpecMethod.suffix or spec.adaptive
                                else "chain_analytic"),
        "verification_method": "longest_prefix",
        "block_size": None,
        "max_supported_k": None,
        "draft_checkpoint": {"name": spec.draft_model} if spec.draft_model else None,
        "target_model": {"name": m.result.served_model or m.config.engine.model},
        "measurement_conditions": {"dataset": summary.plan.workload.dataset, "osl": load.max_tokens,
                                   "num_samples": sum(pr.latency.num_ok for pr in m.result.points), "run": run},
        "per_category": {cat: s.vectors() for cat, s in m.categories.items()} or None,
    }


def planner_profiles(found: list[Measured], run: str) -> dict[str, Any]:
    """Specmeter's own: per configuration, the planner's AcceptanceProfile fields, overall and per category."""
    return {"run": run, "configurations": {
        m.config.id: {"drafter": drafter_label(m.config.spec), "k": m.k,
                      "profile": dataclasses.asdict(m.overall.planner),
                      "categories": {cat: dataclasses.asdict(s.planner) for cat, s in m.categories.items()}}
        for m in found}}


def _json(document: Any) -> str:
    return json.dumps(document, indent=2) + "\n"


# Each simulator, and how its files are named: told() lists what was written under these names.
SIMULATORS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("BLIS", re.compile(r"blis(-.+)?\.args")),
    ("AIConfigurator", re.compile(re.escape(AICONFIGURATOR))),
    ("specdec_bench", re.compile(re.escape(SPECULATION_PROFILE))),
    ("Dynamo mocker", re.compile(r"dynamo-mocker(-.+)?\.json")),
    ("planner", re.compile(re.escape(PLANNER))),
)


class ProfilesOutput(Output):
    """A directory of acceptance profiles: aiconfigurator.yaml and planner-profiles.json for every configuration,
    and per configuration a directory of speculation_profile.json, blis.args and dynamo-mocker.json, the last two
    again per category (blis-CATEGORY.args, dynamo-mocker-CATEGORY.json)."""

    kind = "profiles"

    def __init__(self, dest: Path | None = None) -> None:
        super().__init__(dest)
        self.skipped: list[str] = []

    @property
    def root(self) -> Path:
        return self.dest if self.dest is not None else Path("profiles")

    def write(self, run: RunData) -> list[Path]:
        found = measured(run.summary, run.run_id)
        self.skipped = [] if found else ["no chain drafter of the run counted acceptance steps"]
        files: dict[Path, str] = {}
        if found:
            files[self.root / AICONFIGURATOR] = AICONFIGURATOR_HEADER + yaml.safe_dump(
                aiconfigurator_experiments(found), sort_keys=False)
            files[self.root / PLANNER] = _json(planner_profiles(found, run.run_id))
        dirs = file_parts(m.config.id for m in found)
        for m in found:
            folder = self.root / dirs[m.config.id]
            files[folder / SPECULATION_PROFILE] = _json(speculation_profile(m, run.summary, run.run_id))
            for scope, part in m.scopes():
                suffix = "" if part is None else f"-{part}"
                files[folder / f"blis{suffix}.args"] = blis_args(m, scope)
                if m.k <= MOCKER_MAX_NEXTN:
                    files[folder / f"dynamo-mocker{suffix}.json"] = _json(mocker_args(m, scope))
            if m.k > MOCKER_MAX_NEXTN:
                self.skipped.append(f"Dynamo mocker: {m.config.id} drafts K = {m.k}, over its {MOCKER_MAX_NEXTN}")
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, text)
        return list(files)

    def told(self, written: list[Path]) -> list[str]:
        """One line: the files of each simulator, relative to the directory, and what was not written and why."""
        parts = []
        for name, pattern in SIMULATORS:
            mine = [p.relative_to(self.root).as_posix() for p in written if pattern.fullmatch(p.name)]
            if mine:
                parts.append(f"{name}: {', '.join(mine)}")
        parts += [f"not written: {why}" for why in self.skipped]
        return [f"profiles in [cyan]{escape(str(self.root))}[/]: " + escape("; ".join(parts))]
