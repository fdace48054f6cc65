"""The report's figures (report/plots.py) on the saved demo run and on variants of it built here: which figures
exist, that the files are real images, and that each figure draws one series per configuration it is about."""

from __future__ import annotations

import statistics
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import StepPatch

from specmeter.config.models import ConcurrencyPoint, RatePoint
from specmeter.report.outputs import output
from specmeter.report.plots import PLOTS, PlotsOutput, compare_figures, figures, svg_text
from specmeter.rundir.run_data import RunData, load_run
from specmeter.schemas.plan import Role

FIXTURE = Path(__file__).parents[2] / "fixtures/runs/20261123-180233-demo"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def stored() -> RunData:
    return load_run(FIXTURE)


def copy(run: RunData, name: str | None = None) -> RunData:
    """A deep copy to alter (the loaded run stays as stored)."""
    return RunData(run.run_dir.with_name(name) if name else run.run_dir, run.summary.model_copy(deep=True),
                   run.answer, run.verification)


def with_points(run: RunData, new: dict[str, ConcurrencyPoint | RatePoint]) -> RunData:
    """The run with some load points replaced (old id -> new point) wherever a point id is stored."""
    out = copy(run)
    s = out.summary
    ids = {old: p.id for old, p in new.items()}
    s.plan.load.points = [new.get(p.id, p) for p in s.plan.load.points]
    for c in s.configs:
        for pr in c.points:
            pr.point_id = ids.get(pr.point_id, pr.point_id)
    for sp in s.analysis.speedups:
        sp.point_id = ids.get(sp.point_id, sp.point_id)
    for ch in s.analysis.choices:
        ch.point_id = ids.get(ch.point_id, ch.point_id)
    return out


def candidates(run: RunData) -> list[str]:
    return [c.id for c in run.summary.plan.configs if c.role is Role.candidate]


def measured(run: RunData) -> list[str]:
    return [c.config_id for c in run.summary.configs if c.points]


def legend_labels(fig: Figure) -> list[str]:
    return [t.get_text() for ax in fig.axes if (lg := ax.get_legend()) is not None for t in lg.get_texts()]


def plot_axes(fig: Figure) -> list[Axes]:
    """The axes that hold data (not colour bars)."""
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


def errorbar_series(ax: Axes) -> dict[str, ErrorbarContainer]:
    return {str(c.get_label()): c for c in ax.containers if isinstance(c, ErrorbarContainer)}


def bar_series(ax: Axes) -> dict[str, BarContainer]:
    return {str(c.get_label()): c for c in ax.containers if isinstance(c, BarContainer)}


def xs(line: Line2D | None) -> list[float]:
    assert line is not None
    return [float(v) for v in np.asarray(line.get_xdata())]


def ys(line: Line2D | None) -> list[float]:
    assert line is not None
    return [float(v) for v in np.asarray(line.get_ydata())]


def unity_line(ax: Axes) -> bool:
    return any(ys(line) == [1.0, 1.0] for line in ax.lines)


def footer(fig: Figure) -> list[str]:
    return [t.get_text() for t in fig.texts]


def test_every_figure_is_written_as_png_and_svg(stored: RunData, tmp_path: Path) -> None:
    dest = tmp_path / "plots"
    paths = output("plots", dest).write(stored)
    expected = set(PLOTS) - {"synthetic_vs_real"}  # not a compare-workloads run
    assert {p.stem for p in paths} == expected
    for name in expected:
        png, svg = dest / f"{name}.png", dest / f"{name}.svg"
        assert png in paths and svg in paths
        data = png.read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > 5000
        assert ET.parse(svg).getroot().tag.endswith("svg")


def test_plots_output_defaults_to_a_plots_directory(stored: RunData, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    run = copy(stored)
    run.answer = None
    run.verification = None
    run.summary.analysis.speedups = []
    paths = PlotsOutput().write(run)
    assert paths and all(p.parent == Path("plots") and p.exists() for p in paths)
    assert not {"speedup", "speedup_heatmap", "recommended_k", "verify"} & {p.stem for p in paths}


def test_each_figure_has_a_title_axis_labels_and_the_identity(stored: RunData) -> None:
    for name, fig in figures(stored).items():
        assert fig.get_suptitle(), name
        assert stored.identity() in footer(fig), name
        for ax in plot_axes(fig):
            assert ax.get_xlabel() and ax.get_ylabel(), name


def test_svg_text_is_inlinable_markup(stored: RunData) -> None:
    fig = PLOTS["throughput"](stored)
    assert fig is not None
    text = svg_text(fig)
    assert text.startswith("<svg") and "<?xml" not in text and "DOCTYPE" not in text
    assert ET.fromstring(text).tag.endswith("svg")


def test_throughput_and_tpot_draw_one_line_per_configuration(stored: RunData) -> None:
    loads = sorted(p.load for p in stored.summary.plan.points)
    for name in ("throughput", "tpot"):
        fig = PLOTS[name](stored)
        assert fig is not None
        (ax,) = plot_axes(fig)
        series = errorbar_series(ax)
        assert list(series) == measured(stored)
        assert sorted(legend_labels(fig)) == sorted(measured(stored))
        for config_id, container in series.items():
            line = container.lines[0]
            assert line is not None and sorted(xs(line)) == loads
            assert (line.get_linestyle() == "--") == (config_id == "baseline")


def test_throughput_reads_the_stored_tok_s(stored: RunData) -> None:
    fig = PLOTS["throughput"](stored)
    assert fig is not None
    series = errorbar_series(plot_axes(fig)[0])
    for c in stored.summary.configs:
        stored_tok_s = [pr.latency.output_tokens_per_s for p in sorted(stored.summary.plan.points, key=lambda p: p.load)
                        for pr in c.repeats(p.id)]
        assert ys(series[c.config_id].lines[0]) == stored_tok_s


def test_speedup_has_one_series_per_candidate_the_line_at_one_and_the_crossover(stored: RunData) -> None:
    fig = PLOTS["speedup"](stored)
    assert fig is not None
    (ax,) = plot_axes(fig)
    series = errorbar_series(ax)
    assert sorted(series) == sorted({s.config_id for s in stored.summary.analysis.speedups})
    assert all(c.has_yerr for c in series.values())
    assert unity_line(ax)
    crossing = [c for c in stored.summary.analysis.crossovers if c.status == "crosses"]
    assert crossing
    for cr in crossing:
        marks = [ln for ln in ax.lines if str(ln.get_label()).startswith(f"crossover {cr.config_id}")]
        assert len(marks) == 1 and xs(marks[0]) == [cr.load, cr.load]
    assert set(legend_labels(fig)) >= set(series)


def test_speedup_heatmap_has_a_cell_per_k_and_point_centred_at_one(stored: RunData) -> None:
    fig = PLOTS["speedup_heatmap"](stored)
    assert fig is not None
    (ax,) = plot_axes(fig)
    ks = sorted({c.k for c in stored.summary.plan.configs if c.role is Role.candidate})
    (image,) = ax.images
    cells = image.get_array()
    assert cells is not None and cells.shape == (len(ks), len(stored.summary.plan.points))
    assert [t.get_text() for t in ax.get_yticklabels()] == [str(k) for k in ks]
    assert len(ax.texts) == len(ks) * len(stored.summary.plan.points)
    low, high = image.get_clim()
    assert (float(low) + float(high)) / 2 == pytest.approx(1.0)  # diverging map centred on no change
    assert len(fig.axes) == 2  # the map and its colour bar


def test_pareto_has_a_line_per_configuration_with_every_point_labelled(stored: RunData) -> None:
    fig = PLOTS["pareto"](stored)
    assert fig is not None
    (ax,) = plot_axes(fig)
    lines = [ln for ln in ax.lines if not str(ln.get_label()).startswith("_")]
    assert [ln.get_label() for ln in lines] == measured(stored)
    n_points = len(stored.summary.plan.points)
    assert all(len(xs(ln)) == n_points for ln in lines)
    assert len(ax.texts) == n_points * len(lines)
    baseline = stored.summary.config("baseline")
    assert baseline is not None
    first = baseline.point("c1")
    assert first is not None and first.latency.tpot_s.mean
    assert 1.0 / first.latency.tpot_s.mean in xs(lines[0])


def test_acceptance_position_has_two_panels_and_k_positions_per_configuration(stored: RunData) -> None:
    fig = PLOTS["acceptance_position"](stored)
    assert fig is not None
    a, c = plot_axes(fig)
    ks = {cfg.id: cfg.k for cfg in stored.summary.plan.configs if cfg.spec.enabled}
    for ax in (a, c):
        lines = {str(ln.get_label()): ln for ln in ax.lines}
        assert set(lines) == set(ks)
        for config_id, ln in lines.items():
            assert xs(ln) == list(range(1, ks[config_id] + 1))
    assert "concurrency 1" in fig.get_suptitle()
    assert sorted(legend_labels(fig)) == sorted(ks)


def test_al_histogram_shows_fractions_of_steps(stored: RunData) -> None:
    fig = PLOTS["al_histogram"](stored)
    assert fig is not None
    (ax,) = plot_axes(fig)
    bars = bar_series(ax)
    ks = {cfg.id: cfg.k for cfg in stored.summary.plan.configs if cfg.spec.enabled}
    assert set(bars) == set(ks)
    for config_id, container in bars.items():
        assert len(container.patches) == ks[config_id] + 1  # 0..K accepted
        assert sum(p.get_height() for p in container.patches) == pytest.approx(1.0)


def test_category_al_without_stored_intervals_has_no_error_bars(stored: RunData) -> None:
    fig = PLOTS["category_al"](stored)
    assert fig is not None
    (ax,) = plot_axes(fig)
    series = errorbar_series(ax)
    assert set(series) == set(candidates(stored))
    assert not any(c.has_yerr for c in series.values())
    cats = next(pr.categories for c in stored.summary.configs for pr in c.points if pr.categories)
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == [*sorted(r.category for r in cats.categories), "all (pooled)"]


def test_category_al_draws_the_stored_intervals(stored: RunData) -> None:
    run = copy(stored)
    for c in run.summary.configs:
        for pr in c.points:
            if pr.categories is None:
                continue
            for row in [*pr.categories.categories, pr.categories.pooled]:
                assert row.al_step_weighted is not None
                row.al_ci95_low, row.al_ci95_high = row.al_step_weighted - 0.2, row.al_step_weighted + 0.3
    fig = PLOTS["category_al"](run)
    assert fig is not None
    series = errorbar_series(plot_axes(fig)[0])
    assert series and all(c.has_yerr for c in series.values())
    for container in series.values():
        (bars,) = container.lines[2]
        spans = [seg[1][1] - seg[0][1] for seg in bars.get_segments()]
        assert spans and all(s == pytest.approx(0.5) for s in spans)


def test_recommended_k_draws_the_stored_table_and_the_measured_choices(stored: RunData) -> None:
    fig = PLOTS["recommended_k"](stored)
    assert fig is not None and stored.recommendation is not None
    (ax,) = plot_axes(fig)
    steps = [p for p in ax.patches if isinstance(p, StepPatch)]
    assert len(steps) == len(stored.recommendation.drafters)
    best = stored.recommendation.drafters[0]
    values, edges, _ = steps[0].get_data()
    assert list(values) == [r.k for r in best.ranges]
    assert edges[-1] == best.ranges[-1].end + 0.5
    (markers,) = [c for c in ax.collections if isinstance(c, PathCollection)]
    offsets = np.asarray(markers.get_offsets())
    assert list(offsets[:, 1]) == [ch.best_k for ch in stored.summary.analysis.choices]
    assert ax.get_xscale() == "log"
    shaded = {seg.basis for seg in best.segments} - {"measured"}
    assert any("unmeasured" in label for label in legend_labels(fig)) == ("unmeasured" in shaded)


def test_recommended_k_needs_a_recommendation(stored: RunData) -> None:
    run = copy(stored)
    run.answer = None
    assert PLOTS["recommended_k"](run) is None
    assert "recommended_k" not in figures(run)


def test_verify_compares_the_dynamic_config_with_the_baseline_and_the_best_static(stored: RunData) -> None:
    fig = PLOTS["verify"](stored)
    assert fig is not None and stored.verification is not None
    (ax,) = plot_axes(fig)
    series = errorbar_series(ax)
    assert set(series) == {"dynamic / baseline", "dynamic / best static"}
    rows = stored.verification.summary.analysis.verification
    assert len(xs(series["dynamic / baseline"].lines[0])) == len(rows)
    assert unity_line(ax)
    assert stored.verification.identity().split(" · ")[0] in " ".join(footer(fig))
    run = copy(stored)
    run.verification = None
    assert PLOTS["verify"](run) is None


def test_synthetic_vs_real_needs_real_and_random_configurations(stored: RunData) -> None:
    assert PLOTS["synthetic_vs_real"](stored) is None
    run = copy(stored)
    real, random_id = candidates(run)
    plan = run.summary.plan
    plan.configs = [c.model_copy(update={"workload": "random"}) if c.id == random_id else c for c in plan.configs]
    result = run.summary.config(random_id)
    assert result is not None
    result.workload = "random"
    fig = PLOTS["synthetic_vs_real"](run)
    assert fig is not None
    al, speed = plot_axes(fig)
    expected = {f"real: {real}", f"random: {random_id}"}
    n_points = len(plan.points)
    for ax in (al, speed):
        bars = bar_series(ax)
        assert set(bars) == expected
        assert all(len(b.patches) == n_points for b in bars.values())
    assert unity_line(speed) and not unity_line(al)
    assert set(legend_labels(fig)) == expected


def test_mixed_load_kinds_get_one_panel_each(stored: RunData) -> None:
    run = with_points(stored, {"c16": RatePoint(rate=8.0)})
    for name in ("throughput", "tpot", "speedup", "pareto"):
        fig = PLOTS[name](run)
        assert fig is not None
        closed, opened = plot_axes(fig)
        if name == "pareto":  # x is per-user speed; the panel title names the load
            assert "concurrency" in closed.get_title() and "req/s" in opened.get_title()
        else:
            assert "concurrency" in closed.get_xlabel() and "req/s" in opened.get_xlabel()
            assert [t.get_text() for t in closed.get_xticklabels()] == ["1", "4"]
            assert [t.get_text() for t in opened.get_xticklabels()] == ["8"]
    fig = PLOTS["speedup_heatmap"](run)
    assert fig is not None and len(plot_axes(fig)) == 2


def test_request_rate_run_draws_on_a_rate_axis_with_its_crossover(stored: RunData) -> None:
    run = with_points(stored, {"c1": RatePoint(rate=0.5), "c4": RatePoint(rate=2.0), "c16": RatePoint(rate=8.0)})
    for cr in run.summary.analysis.crossovers:
        cr.axis = "rate"
    fig = PLOTS["speedup"](run)
    assert fig is not None
    (ax,) = plot_axes(fig)
    assert ax.get_xlabel() == "request rate (req/s)"
    assert len(errorbar_series(ax)) == len(candidates(run))
    assert any(str(ln.get_label()).startswith("crossover") for ln in ax.lines)


def test_repeats_plot_the_median_with_the_range(stored: RunData) -> None:
    run = copy(stored)
    run.summary.plan.repeats = 3
    for c in run.summary.configs:
        extra = []
        for pr in c.points:
            for r, scale in ((1, 1.1), (2, 0.7)):
                again = pr.model_copy(deep=True, update={"repeat": r})
                again.latency.output_tokens_per_s = (pr.latency.output_tokens_per_s or 0) * scale
                extra.append(again)
        c.points += extra
    fig = PLOTS["throughput"](run)
    assert fig is not None
    series = errorbar_series(plot_axes(fig)[0])
    points = sorted(run.summary.plan.points, key=lambda p: p.load)
    for c in run.summary.configs:
        container = series[c.config_id]
        assert container.has_yerr
        medians = [statistics.median(pr.latency.output_tokens_per_s or 0 for pr in c.repeats(p.id)) for p in points]
        assert ys(container.lines[0]) == pytest.approx(medians)
    assert "median of 3 repeats" in fig.get_suptitle()


def test_compare_overlays_runs_by_run_and_configuration(stored: RunData, tmp_path: Path) -> None:
    other = copy(stored, "20261124-090000-demo")
    figs = compare_figures([stored, other])
    assert set(figs) == {"compare_throughput", "compare_speedup"}
    thr = figs["compare_throughput"]
    (ax,) = plot_axes(thr)
    expected = {f"{run.run_id}: {c}" for run in (stored, other) for c in measured(run)}
    assert set(errorbar_series(ax)) == expected
    assert set(legend_labels(thr)) == expected
    # a configuration keeps its colour across runs; runs differ in line style
    by_label = {k: v.lines[0] for k, v in errorbar_series(ax).items()}
    a, b = by_label[f"{stored.run_id}: draft_model-k2"], by_label[f"{other.run_id}: draft_model-k2"]
    assert a is not None and b is not None
    assert a.get_color() == b.get_color() and (a.get_linestyle(), a.get_marker()) != (b.get_linestyle(),
                                                                                       b.get_marker())
    assert {stored.identity(), other.identity()} <= set(footer(thr))
    sp = figs["compare_speedup"]
    (ax,) = plot_axes(sp)
    assert set(errorbar_series(ax)) == {f"{run.run_id}: {c}" for run in (stored, other) for c in candidates(run)}
    assert unity_line(ax)
    for fig in figs.values():
        assert ET.fromstring(svg_text(fig)).tag.endswith("svg")


def test_compare_without_speedups_has_only_throughput(stored: RunData) -> None:
    run = copy(stored)
    run.summary.analysis.speedups = []
    assert set(compare_figures([run])) == {"compare_throughput"}


def test_a_series_is_a_line(stored: RunData) -> None:
    """Guards the test helpers: an errorbar series' data line is a Line2D."""
    fig = PLOTS["tpot"](stored)
    assert fig is not None
    for container in errorbar_series(plot_axes(fig)[0]).values():
        assert isinstance(container.lines[0], Line2D)
