"""Data-parallel replicas in the report: each replica's share of a point's requests and its own running batch,
beside the point's SD (summed over replicas) and engine batch (one replica's, pooled) in the other tables.
Drawn from the stored shares; nothing is recomputed or decided here."""

from __future__ import annotations

from specmeter.report.grid import Grid, fmt, grid, point_label
from specmeter.schemas.results import RunSummary


def replica_table(summary: RunSummary) -> Grid | None:
    """Per configuration, point and replica: requests sent there (ok/sent), its share, its mean running batch."""
    t = grid("Replicas (requests spread over them; SD counters summed; engine batch per replica)",
             ("configuration", "point", "replica", "ok/sent", "share", "engine batch"),
             left={"configuration", "point", "replica"})
    for config in summary.configs:
        for pr in config.points:
            for i, share in enumerate(pr.replicas or []):
                if i == 0 and t.row_count:
                    t.add_section()
                rb = share.running_batch
                batch = rb.steady_mean if rb is not None and rb.steady_mean is not None else rb.mean if rb else None
                repeat = f" #{pr.repeat + 1}" if len(config.repeats(pr.point_id)) > 1 else ""
                t.add_row(config.config_id, point_label(summary, pr.point_id) + repeat, share.url,
                          f"{share.ok}/{share.requests}", fmt(share.share, "{:.0%}"), fmt(batch, "{:.1f}"))
    return t if t.row_count else None
