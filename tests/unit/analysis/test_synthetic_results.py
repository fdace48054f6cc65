"""Synthetic acceptance in what a run decides and shows: never chosen, recommended or checked for losslessness
(analysis), and said to be synthetic wherever its numbers are shown, with measured against set (reports)."""

from __future__ import annotations

import csv
from pathlib import Path

from matplotlib.container import ErrorbarContainer
from test_recommend import BATCHES, CLEAR, recommend, spec, sweep

from specmeter.analysis.decide import lossless
from specmeter.metrics.synthetic import synthetic_check
from specmeter.report.csv_output import CsvOutput
from specmeter.report.html import page
from specmeter.report.plots_load import speedup, speedup_heatmap
from specmeter.report.tables import notes, summary_tables
from specmeter.rundir.run_data import RunData
from specmeter.schemas.records import RequestRecord
from specmeter.schemas.results import RunSummary
from specmeter.schemas.sd import SDCounts, SDSummary

SYNTH = "draft_model-k4-synth-al3.4"
CEILING = "draft_model-k4-ceiling"
# The synthetic configurations run far faster than anything verified: nothing may pick them.
FAST = {"c1": (2.5, 2.4, 2.6), "c4": (2.2, 2.1, 2.3), "c16": (1.8, 1.7, 1.9)}


def synthetic_sweep() -> tuple[RunSummary, list[RequestRecord]]:
    extra = {SYNTH: spec(4, synthetic_acceptance={"rates": [0.9, 0.7, 0.5, 0.3]}),
             CEILING: spec(4, synthetic_acceptance={"length": 5})}
    summary, records = sweep({**CLEAR, SYNTH: FAST, CEILING: FAST}, BATCHES,
                             ks={"draft_model-k2": 2, "draft_model-k4": 4, SYNTH: 4, CEILING: 4}, extra_specs=extra)
    counts = SDCounts(source="counters", num_steps=300, num_draft_tokens=1180, num_accepted_tokens=700,
                      accepted_per_pos=[270, 205, 145, 80])
    for pr in summary.config(SYNTH).points:  # type: ignore[union-attr]
        pr.sd = SDSummary(available=True, counters=counts, reference="counters",
                          synthetic=synthetic_check(counts, [0.9, 0.7, 0.5, 0.3], [], max_tokens=96,
                                                    fits_cap=False))
    for res in summary.configs:
        res.spec_label = summary.plan.config(res.config_id).label  # as the runner writes it
    return summary, records


def test_choices_and_the_recommendation_never_pick_synthetic_acceptance() -> None:
    summary, records = synthetic_sweep()
    assert {s.config_id for s in summary.analysis.speedups} >= {SYNTH, CEILING}  # measured and shown
    assert summary.analysis.choices
    for choice in summary.analysis.choices:
        assert choice.best_config_id not in (SYNTH, CEILING)
        assert not {h.config_id for h in choice.evidence} & {SYNTH, CEILING}
    rec = recommend(summary, records)
    for drafter in rec.drafters:
        assert not set(drafter.candidates) & {SYNTH, CEILING}
        for deploy in (drafter.deploy, drafter.static_deploy):
            assert deploy is None or "synthetic" not in " ".join(deploy.flags)
    assert any(SYNTH in n and "never recommended" in n for n in rec.notes)


def test_no_lossless_check_on_synthetic_acceptance_and_the_note_says_why() -> None:
    summary, records = synthetic_sweep()
    checked = {c.config_id for c in lossless(summary, records)}
    assert "draft_model-k4" in checked and not checked & {SYNTH, CEILING}
    note = summary.analysis.lossless_note or ""
    assert SYNTH in note and CEILING in note and "not the target's by design" in note


def test_tables_show_measured_against_set_and_mark_synthetic_speedups() -> None:
    summary, _ = synthetic_sweep()
    tables = {t.title.split(" (")[0].split(",")[0]: t for t in summary_tables(summary)}
    synth = tables["Synthetic acceptance"]
    row = dict(zip([c.name for c in synth.columns], synth.rows[0]))
    assert row["configuration"] == SYNTH and row["set a_i"] == "0.90 0.70 0.50 0.30"
    assert row["measured a_i"] == "0.90 0.68 0.48 0.27" and row["within sampling error"] == "yes"
    speed = tables["Speedup over the baseline"]
    for r in speed.rows:
        assert ("synthetic acceptance" in r[-1]) == (r[0] in (SYNTH, CEILING))
    plan = tables["Plan"]
    labels = {r[0]: r[2] for r in plan.rows}
    assert "synthetic AL=3.4" in labels[SYNTH] and "ceiling" in labels[CEILING]
    assert "synthetic" not in labels["draft_model-k4"]
    said = [n.text for n in notes(summary)]
    assert any(n.startswith(f"{SYNTH}: synthetic acceptance") and "never chosen" in n for n in said)


def test_html_and_csv_say_synthetic(tmp_path: Path) -> None:
    summary, _ = synthetic_sweep()
    run = RunData(tmp_path / "run", summary)
    answer = page(run).split('<section id="answer">')[1].split("</section>")[0]
    marked = [li for li in answer.split("<li>") if "not deployable" in li]
    assert len(marked) == 2 * len(summary.plan.points)  # each synthetic speedup, nothing else
    assert all(li.startswith((SYNTH, CEILING)) for li in marked)
    CsvOutput(tmp_path / "csv").write(run)
    with (tmp_path / "csv" / "points.csv").open() as fh:
        points = list(csv.DictReader(fh))
    for p in points:
        if p["config_id"] == SYNTH:
            assert p["synthetic_set_per_position"] == "0.9;0.7;0.5;0.3" and p["synthetic_within"] == "true"
            assert "synthetic AL=3.4" in p["spec"]
        elif p["config_id"] != CEILING:
            assert p["synthetic_set_per_position"] == "" and "synthetic" not in p["spec"]
    with (tmp_path / "csv" / "speedups.csv").open() as fh:
        speedups = list(csv.DictReader(fh))
    assert {s["config_id"] for s in speedups if s["synthetic"] == "true"} == {SYNTH, CEILING}


def test_the_speedup_plot_draws_the_ceiling_dashed_in_its_drafters_colour(tmp_path: Path) -> None:
    summary, _ = synthetic_sweep()
    fig = speedup(RunData(tmp_path / "run", summary))
    assert fig is not None
    ax = fig.axes[0]
    lines = {c.get_label(): c.lines[0] for c in ax.containers if isinstance(c, ErrorbarContainer)}
    ceiling = next(line for label, line in lines.items() if label.startswith("ceiling K=4 (100% acceptance)"))
    assert ceiling.get_linestyle() == "--"
    assert ceiling.get_color() == lines["draft_model-k4"].get_color()
    assert lines["draft_model-k4"].get_linestyle() == "-"
    heat = speedup_heatmap(RunData(tmp_path / "run", summary))
    assert heat is not None
    titles = [a.get_title() for a in heat.axes if a.get_title()]
    assert any("ceiling" in t for t in titles) and any("synthetic AL=3.4" in t for t in titles)
