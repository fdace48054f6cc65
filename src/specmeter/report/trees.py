"""Tree drafts in the report: what a tree's acceptance is read by (the accepted length per step, its histogram,
how deep each step's accepted path reached where the engine counts it) and why its per-position chain rates are
not shown. Drawn from the stored counts; nothing is recomputed or decided here."""

from __future__ import annotations

from specmeter.report.grid import Grid, Note, fmt, grid
from specmeter.report.pooled import pooled_histogram, pooled_sd
from specmeter.schemas.results import RunSummary
from specmeter.schemas.sd import SDCounts

NOT_A_CHAIN = "- (tree)"


def _shares(values: list[float] | None) -> str:
    return " ".join(f"{v:.2f}" for v in values) if values else "-"


def tree_ids(summary: RunSummary) -> dict[str, str]:
    """Configuration id -> its tree's label, for every configuration of the plan that drafts a tree."""
    return {c.id: c.spec.tree.label() for c in summary.plan.configs if c.spec.drafts_tree and c.spec.tree is not None}


def ar_text(counts: SDCounts) -> str:
    """AR, said to be over tree nodes where the steps drafted trees."""
    text = fmt(counts.acceptance_rate)
    return f"{text} of nodes" if counts.tree and counts.acceptance_rate is not None else text


def tree_table(summary: RunSummary) -> Grid | None:
    """Per tree configuration and point: AL, the share of steps that accepted j drafts (j = 0 .. depth), the share
    whose accepted path reached each depth, and the nodes verified per step."""
    trees = tree_ids(summary)
    t = grid("Tree drafts, pooled over repeats (K is the tree's depth; a step verifies every node and accepts one "
             "path: read AL and how deep the path went, not per-position rates)",
             ("configuration", "point", "tree", "AL", "accepted per step, share of steps j = 0..K",
              "path reached depth d, share of steps", "nodes per step", "AR of nodes"),
             left={"configuration", "point", "tree", "accepted per step, share of steps j = 0..K",
                   "path reached depth d, share of steps"})
    for config in summary.configs:
        label = trees.get(config.config_id)
        if label is None:
            continue
        for point in summary.plan.points:
            counts, _ = pooled_sd(config, point.id)
            if counts is None:
                continue
            hist = pooled_histogram(config, point.id)
            depth = counts.per_depth_rate
            t.add_row(config.config_id, point.label(), label, fmt(counts.acceptance_length),
                      _shares(hist.histogram_fraction if hist is not None else None),
                      _shares(depth) if depth else "- (not counted by this engine)",
                      fmt(counts.mean_draft_length, "{:.1f}"), fmt(counts.acceptance_rate))
    return t if t.row_count else None


def tree_notes(summary: RunSummary) -> list[Note]:
    """Why a tree configuration shows no per-position or conditional rates, and what its AR means."""
    return [Note(f"{cfg.id}: drafts a token tree ({cfg.spec.tree.label()}): K = {cfg.spec.k} is its depth, the most "
                 "drafts a step can accept. Every node is verified and one path is accepted, so per-position and "
                 "conditional chain rates (a_i, c_i) are not shown for it: a depth holds several candidates, not one "
                 "drafted token. Read its AL per step, the histogram of accepted drafts and how deep each step's path "
                 "reached; its AR is accepted over tree nodes, and falls as the tree widens")
            for cfg in summary.plan.configs if cfg.spec.drafts_tree and cfg.spec.tree is not None]
