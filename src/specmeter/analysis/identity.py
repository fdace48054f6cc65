"""Whether an attached server drafts what the run was told it runs: never more than K tokens a step, and K
exactly for a drafter that always drafts its K (a draft model, an EAGLE head, MTP; n-gram and suffix draft fewer
where nothing matches). A tree drafts many nodes a step and a per-batch-size K moves: neither is read. A
launched server runs the config specmeter gave it, so only attached ones are read.

One rule, read twice: per round, where a mismatch marks the point and withholds its verdict (a server swapped
mid-run), and over the run, where `recommend` refuses a table whose K the server does not run. A server verified
with `verify --endpoint` is read against the table it was given."""

from __future__ import annotations

from specmeter.config.models import NEEDS_DRAFT_MODEL, SpecMethod
from specmeter.schemas.plan import PlannedConfig, Role
from specmeter.schemas.results import RunSummary

# Tokens a step a counter's mean may stray from K: acceptance never changes what is drafted, so a K = 4 server
# reads 4.0; a point's last steps near max_tokens draft fewer, by far less than this.
TOLERANCE = 0.25


def read(planned: PlannedConfig) -> bool:
    """Whether the rule reads this configuration's drafting at all."""
    spec = planned.spec
    return bool(planned.engine.endpoints) and spec.enabled and spec.tree is None \
        and not spec.num_speculative_tokens_per_batch_size and not spec.synthetic


def mismatch(planned: PlannedConfig, drafted: float) -> str | None:
    """Why a server drafting `drafted` tokens a step does not run `planned`'s K, or None where it does."""
    spec = planned.spec
    fixed = spec.method in (*NEEDS_DRAFT_MODEL, SpecMethod.mtp)
    if drafted > spec.k + TOLERANCE or (fixed and abs(drafted - spec.k) > TOLERANCE):
        return (f"its server drafted {drafted:.2g} tokens a step where {spec.method.value} K = {spec.k} was "
                "given")
    return None


def point_mismatch(summary: RunSummary, config_id: str, point_id: str) -> str | None:
    """The first round of the point whose server drafted otherwise than its configuration claims, in words."""
    planned, res = summary.plan.config(config_id), summary.config(config_id)
    if res is None or not read(planned):
        return None
    for pr in res.points:
        head = pr.sd.headline
        if pr.point_id == point_id and head is not None and head.mean_draft_length is not None \
                and (why := mismatch(planned, head.mean_draft_length)) is not None:
            return f"round {pr.repeat + 1}: {why}"
    return None


# Share of a verified point's steps drafting a K its table gives no batch size the engine ran at, above which the
# server does not run the table (a static K, another table): a range edge the batch swings across moves far less.
NOT_THE_TABLE = 0.5


def table_mismatch(verify: RunSummary) -> str | None:
    """Why an attached server verified (`verify --endpoint`) does not run the table it was given, or None: at some
    point most of its steps drafted a K the table never names there. A launched one runs what specmeter gave it."""
    attached = [c for c in verify.plan.configs if c.role is Role.verification and c.engine.endpoints]
    if not attached:
        return None
    for vp in verify.analysis.verification:
        share = vp.drafted.share_unexpected
        if share is not None and share > NOT_THE_TABLE:
            return f"the server at {attached[0].engine.endpoints[0]}, at {vp.point_id}: {vp.drafted.note}"
    return None
