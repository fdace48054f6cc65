"""benchmarks/client_overhead.py: the arithmetic it reports, and one real run of specmeter's driver against the
paced server (both small processes, a few seconds)."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import SimpleNamespace

import pytest
from bench_script import load

from specmeter.rundir.store import RunStore, load_summary


@pytest.fixture(scope="module")
def co() -> SimpleNamespace:
    """The names of benchmarks/client_overhead.py and its parts (benchmarks/overhead/), as one namespace."""
    main = load("client_overhead")  # benchmarks/ on the path: where the script finds its parts
    names: dict[str, object] = {}
    for part in ("measures", "tools", "processes", "output"):
        names.update(vars(importlib.import_module(f"overhead.{part}")))
    names.update(vars(main))
    return SimpleNamespace(**names)


def test_percentile_nearest_rank(co: SimpleNamespace) -> None:
    xs = [float(i) for i in range(1, 101)]
    assert co.percentile(xs, 0.5) == 50.0
    assert co.percentile(xs, 0.99) == 99.0
    assert co.percentile(xs, 1.0) == 100.0
    assert co.percentile([3.0], 0.99) == 3.0


def test_send_lag_is_zero_on_schedule_whatever_the_offset(co: SimpleNamespace) -> None:
    arrivals = [1000.0 + i / 50 for i in range(20)]
    assert max(co.send_lags(arrivals, 50.0)) == pytest.approx(0.0, abs=1e-9)
    late = list(arrivals)
    late[10] += 0.005
    lags = co.send_lags(late, 50.0)
    assert lags[10] == pytest.approx(0.005)
    assert sorted(lags)[-2] == pytest.approx(0.0, abs=1e-9)


def test_send_lag_grows_when_the_tool_falls_behind(co: SimpleNamespace) -> None:
    arrivals = [i * 0.03 for i in range(10)]  # asked for 50/s (20 ms), sent every 30 ms
    lags = co.send_lags(arrivals, 50.0)
    assert lags[0] == 0.0
    assert lags[-1] == pytest.approx(9 * 0.01)


def _entry(seq: int, arrival: float, sends: list[float], rid: str | None = None,
           marker: int | None = None) -> dict[str, object]:
    return {"seq": seq, "arrival": arrival, "sends": sends, "rid": rid, "marker": marker, "disconnected": False}


def test_compare_matches_by_every_key_and_measures_errors(co: SimpleNamespace) -> None:
    log = [_entry(0, 10.0, [10.020, 10.040, 10.060], rid="vb-0", marker=7),
           _entry(1, 11.0, [11.020, 11.040, 11.060], rid="vb-1", marker=8)]
    M = co.Measured
    records = [
        M(("rid", "vb-0"), True, 0.021, gaps_s=[0.020, 0.022]),  # TTFT 1 ms late, one gap 2 ms long
        M(("marker", 8), True, 0.020, gaps_s=[0.020, 0.020]),
        M(("seq", 1), True, 0.020, mean_gap_s=0.023),  # a GuideLLM-style record: mean gap only
        M(("rid", "nope"), True, 0.5),  # not in the log: not matched
        M(("marker", 7), False, None),  # failed: not matched
    ]
    ttft, gaps, mean_gaps, matched = co.compare(log, records)
    assert matched == 3
    assert sorted(ttft) == pytest.approx([0.0, 0.0, 0.001])
    assert sorted(gaps) == pytest.approx([0.0, 0.0, 0.0, 0.002])
    assert sorted(mean_gaps) == pytest.approx([0.0, 0.001, 0.003])


def test_sustained_rate_skips_the_ramp_and_the_drain(co: SimpleNamespace) -> None:
    steady = [i / 1000 for i in range(1000)]  # 1000 chunks/s ...
    ramp = [-5.0, -4.0]  # ... after a slow start
    assert co.sustained_rate(ramp + steady + [99.0]) == pytest.approx(1000.0, rel=0.01)
    assert co.sustained_rate([1.0]) == 0.0


def test_fit_line_is_the_marginal_for_two_points_and_least_squares_beyond(co: SimpleNamespace) -> None:
    assert co.fit_line([2000.0, 4000.0], [10.5, 10.7]) == pytest.approx((10.3, 1e-4))
    a, b = co.fit_line([1.0, 2.0, 1.0, 2.0], [1.0, 3.0, 1.2, 2.8])
    assert (a, b) == pytest.approx((-0.7, 1.8))
    assert co.fit_line([5.0, 5.0], [1.0, 2.0]) is None


def _run(co: SimpleNamespace, n: int, chunks: int, cpu: float, cps: float, server_cpu: float,
         **errors: list[float]) -> object:
    return co.Run(requests=n, cpu_s=cpu, wall_s=5, chunks=chunks, span_s=chunks / cps, sustained_cps=cps, served=n,
                  failed=0, matched=n, server_cpu_s=server_cpu, **errors)


def test_summary_takes_the_marginal_cost_and_rates(co: SimpleNamespace) -> None:
    point = co.Point("closed", 100, 0.02, 0.02, concurrency=16)
    one = _run(co, 100, 2000, 10.5, 790.0, 0.1, ttft_err=[0.001], gap_err=[0.002])
    two = _run(co, 200, 4000, 10.7, 800.0, 0.2, ttft_err=[0.003], gap_err=[0.004])
    row = co.summarize("x", point, [one, two])
    assert row.cpu_us_per_chunk == pytest.approx(100.0)  # 0.2 s over 2000 more chunks
    assert row.fixed_cpu_s == pytest.approx(10.3)
    assert row.chunks_per_s == pytest.approx(800.0)  # the larger run's sustained rate
    assert row.server_busy == pytest.approx(0.04)  # 50 µs per chunk at 800 chunks/s
    assert row.ttft_err_ms["mean"] == pytest.approx(2.0)
    assert row.gap_err_kind == "per chunk"
    base = co.summarize("specmeter", point, [one, two])
    base.cpu_us_per_chunk, base.chunks_per_s = 50.0, 1600.0
    co.add_ratios([base, row])
    assert row.cpu_ratio == pytest.approx(2.0) and row.chunks_ratio == pytest.approx(0.5)


def test_summary_of_a_tool_without_per_chunk_times_uses_mean_gaps(co: SimpleNamespace) -> None:
    point = co.Point("open", 100, 0.02, 0.02, rate=50.0)
    runs = [_run(co, 100, 2000, 10.5, 790.0, 0.1, mean_gap_err=[0.001], send_lag=[0.0, 0.002]),
            _run(co, 200, 4000, 10.7, 800.0, 0.2, mean_gap_err=[0.003], send_lag=[0.001])]
    row = co.summarize("guidellm", point, runs)
    assert row.gap_err_kind == "per-request mean"
    assert row.gap_err_ms["mean"] == pytest.approx(2.0)
    assert row.send_lag_ms["p50"] == pytest.approx(1.0) and row.send_lag_ms["p99"] == pytest.approx(2.0)


def test_markdown_has_one_row_per_result_and_explains_failures(co: SimpleNamespace) -> None:
    ok = co.Row(tool="specmeter", point="c16", requests=10, cpu_us_per_chunk=30.0, cpu_ratio=1.0,
                ttft_err_ms={"mean": 1.0, "p99": 2.0, "n": 5})
    bad = co.Row(tool="aiperf", point="c16", requests=10, error="failed: exited with 1")
    meta = {"settings": {"chunks": 5, "gap_ms": 10.0, "ttft_ms": 10.0}, "versions": {"specmeter": "0"},
            "machine": "test"}
    text = co.markdown([ok, bad], meta)
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert len(table) == 4
    assert all(line.count("|") == table[0].count("|") for line in table)
    assert "failed: exited with 1" in text and "1.00 / 2.00" in text


def test_recording_cost_is_the_recorded_run_over_the_unrecorded_one(co: SimpleNamespace) -> None:
    rec = co.Row(tool=co.Specmeter.name, point="c16", requests=10, cpu_us_per_chunk=33.0, chunks_per_s=800.0,
                 ttft_err_ms={"mean": 1.5, "p99": 6.0, "n": 5}, gap_err_ms={"mean": 0.2, "p99": 1.0, "n": 5})
    bare = co.Row(tool=co.SpecmeterUnrecorded.name, point="c16", requests=10, cpu_us_per_chunk=30.0,
                  chunks_per_s=800.0, ttft_err_ms={"mean": 1.0, "p99": 4.0, "n": 5},
                  gap_err_ms={"mean": 0.2, "p99": 2.0, "n": 5})
    alone = co.Row(tool=co.Specmeter.name, point="c64", requests=10, cpu_us_per_chunk=30.0)
    (cost,) = co.recording_costs([rec, bare, alone])  # c64 has no unrecorded run: no ratio
    assert (cost.point, cost.cpu, cost.chunks_per_s) == ("c16", pytest.approx(1.1), pytest.approx(1.0))
    assert (cost.ttft_err_mean, cost.ttft_err_p99) == (pytest.approx(1.5), pytest.approx(1.5))
    assert (cost.gap_err_mean, cost.gap_err_p99) == (pytest.approx(1.0), pytest.approx(0.5))
    meta = {"settings": {"chunks": 5, "gap_ms": 10.0, "ttft_ms": 10.0}, "versions": {}, "machine": "test"}
    assert "| c16 | 1.10 | 1.00 | 1.50 | 1.50 | 1.00 | 0.50 |" in co.markdown([rec, bare, alone], meta)


def test_specmeter_driver_against_the_paced_server(co: SimpleNamespace, tmp_path: Path) -> None:
    server = co.PacedServer(tmp_path, chunks=3)
    try:
        setup = co.Setup(url=server.url, chunks=3, api="chat", tokenizer=tmp_path)
        point = co.Point("closed", 16, 0.002, 0.002, concurrency=4)
        run = co.run_tool(co.Specmeter(), setup, server, point, 16, tmp_path / "run", timeout_s=120)
        bare = co.run_tool(co.SpecmeterUnrecorded(), setup, server, point, 16, tmp_path / "bare", timeout_s=120)
    finally:
        server.stop()
    assert (run.served, run.matched, run.failed, run.chunks) == (16, 16, 0, 48)
    assert len(run.ttft_err) == 16 and len(run.gap_err) == 32
    assert run.cpu_s > 0  # the driver's process was counted
    # The real run's path: a run directory whose requests.jsonl holds every request, which is what was compared.
    recorded = RunStore(tmp_path / "run" / "run").read_records()
    assert sorted(r.conversation_id for r in recorded) == sorted(f"req-{i}" for i in range(16))
    assert load_summary(tmp_path / "run" / "run").status == "complete"
    # Nothing recorded: the same requests measured, no requests.jsonl.
    assert (bare.served, bare.matched, bare.failed) == (16, 16, 0)
    assert not (tmp_path / "bare" / "run" / "requests.jsonl").exists()


def test_specmeter_driver_split_over_client_processes(co: SimpleNamespace, tmp_path: Path) -> None:
    import json

    server = co.PacedServer(tmp_path, chunks=3)
    try:
        setup = co.Setup(url=server.url, chunks=3, api="chat", tokenizer=tmp_path)
        point = co.Point("closed", 16, 0.002, 0.002, concurrency=4)
        tool = co.SpecmeterMultiProcess()
        assert tool.key == "specmeter-mp" and co.TOOLS[tool.key] is co.SpecmeterMultiProcess
        run = co.run_tool(tool, setup, server, point, 16, tmp_path / "run", timeout_s=120)
    finally:
        server.stop()
    assert (run.served, run.matched, run.failed, run.chunks) == (16, 16, 0, 48)
    assert len(run.ttft_err) == 16 and len(run.gap_err) == 32
    out = json.loads((tmp_path / "run" / "specmeter.json").read_text())
    assert out["client_processes"] == max(2, co.usable_cores())


def test_several_runs_render_as_median_and_range(co: SimpleNamespace) -> None:
    def run(cpu: float, bare_cpu: float) -> list[object]:
        rows = [co.Row(tool=co.Specmeter.name, point="c16", requests=10, cpu_us_per_chunk=cpu),
                co.Row(tool=co.SpecmeterUnrecorded.name, point="c16", requests=10, cpu_us_per_chunk=bare_cpu)]
        co.add_ratios(rows)
        return rows

    meta = {"settings": {"chunks": 5, "gap_ms": 10.0}, "versions": {}, "machine": "test"}
    text = co.markdown_over_runs([run(30.0, 30.0), run(20.0, 10.0), run(40.0, 20.0)], meta)
    assert "| c16 | specmeter | 30.0 (20.0-40.0) |" in text
    assert "| c16 | 2.00 (1.00-2.00) |" in text  # recording's CPU ratio in each run: 1, 2, 2
    assert co.spread([None, 1.0]) == "1.0" and co.spread([None]) == "-"


def test_a_traces_schedule_offers_its_peak_at_the_rate_asked_and_repeats_itself(co: SimpleNamespace) -> None:
    arrivals = [10.0, 10.1, 10.2, 10.3, 12.0, 14.0]  # a burst of 4 in 0.3 s, then two stragglers
    assert co.peak_rate(arrivals) == 4.0
    schedule = co.trace_schedule(arrivals, 9, peak=40.0)  # ten times as fast
    assert len(schedule) == 9
    assert co.peak_rate(schedule[:6], window_s=0.1) == pytest.approx(40.0)  # the trace's busiest second, sped up
    assert schedule[:6] == pytest.approx([0.0, 0.01, 0.02, 0.03, 0.2, 0.4])
    period = (4.0 + 4.0 / 5) / 10  # the span and one mean gap, sped up alike
    assert schedule[6:] == pytest.approx([period, period + 0.01, period + 0.02])
    assert list(schedule) == sorted(schedule)


def test_schedule_lag_is_zero_on_any_schedule_whatever_the_offset(co: SimpleNamespace) -> None:
    schedule = [0.0, 0.01, 0.02, 0.5, 0.51]
    arrivals = [100.0 + t for t in schedule]
    assert max(co.schedule_lags(arrivals, schedule)) == pytest.approx(0.0, abs=1e-9)
    late = list(arrivals)
    late[3] += 0.004
    assert co.schedule_lags(late, schedule)[3] == pytest.approx(0.004)
    assert co.send_lags(arrivals[:3], 100.0) == pytest.approx([0.0, 0.0, 0.0])  # a fixed interval is one schedule


def test_the_trace_case_is_each_tool_over_its_own_open_loop(co: SimpleNamespace) -> None:
    open_row = co.Row(tool=co.Specmeter.name, point="open 0.8x own capacity", requests=10, rate=50.0,
                      cpu_us_per_chunk=40.0, ttft_err_ms={"mean": 1.0, "p99": 2.0, "n": 5},
                      gap_err_ms={"mean": 0.1, "p99": 0.5, "n": 5}, send_lag_ms={"p50": 0.1, "p99": 0.8, "n": 5})
    trace_row = co.Row(tool=co.Specmeter.name, point="trace t.jsonl at peak 50/s", requests=10, rate=50.0,
                       cpu_us_per_chunk=44.0, ttft_err_ms={"mean": 1.0, "p99": 3.0, "n": 5},
                       gap_err_ms={"mean": 0.1, "p99": 0.5, "n": 5}, send_lag_ms={"p50": 0.2, "p99": 1.6, "n": 5})
    other = co.Row(tool="vllm bench serve", point="open 0.8x own capacity", requests=10, cpu_us_per_chunk=90.0)
    (cost,) = co.trace_costs([open_row, other, trace_row])  # vllm has no trace row: no trace case for it
    assert (cost.tool, cost.cpu, cost.ttft_err_p99, cost.gap_err_p99) == (
        co.Specmeter.name, pytest.approx(1.1), pytest.approx(1.5), pytest.approx(1.0))
    assert cost.send_lag_p99_ms == (1.6, 0.8)
    meta = {"settings": {"chunks": 5, "gap_ms": 10.0, "ttft_ms": 10.0}, "versions": {}, "machine": "test"}
    text = co.markdown([open_row, other, trace_row], meta)
    assert cost.core_share == (None, None)  # no chunks/s given
    trace_row.chunks_per_s, open_row.chunks_per_s = 5000.0, 10000.0
    assert co.trace_costs([open_row, trace_row])[0].core_share == (pytest.approx(0.22), pytest.approx(0.4))
    text = co.markdown([open_row, other, trace_row], meta)
    assert (f"| trace t.jsonl at peak 50/s | {co.Specmeter.name} | 1.10 | 1.50 | 1.00 | 1.6 / 0.8 | 0.22 / 0.40 "
            "| 0 |") in text
    over = co.markdown_over_runs([[open_row, trace_row], [open_row, trace_row]], meta)
    assert (f"| trace t.jsonl at peak 50/s | {co.Specmeter.name} | 1.10 (1.10-1.10) | 1.50 (1.50-1.50) "
            "| 1.00 (1.00-1.00) | 1.6 (1.6-1.6) |") in over


def test_specmeter_driver_replays_a_trace_schedule_against_the_paced_server(co: SimpleNamespace,
                                                                         tmp_path: Path) -> None:
    arrivals = [0.0, 0.05, 0.1, 0.12, 0.14, 0.16, 0.5, 0.9]
    point = co.Point("trace", 8, 0.002, 0.002, rate=50.0, group="trace", schedule=co.trace_schedule(arrivals, 16, 50.0))
    server = co.PacedServer(tmp_path, chunks=3)
    try:
        setup = co.Setup(url=server.url, chunks=3, api="chat", tokenizer=tmp_path)
        run = co.run_tool(co.Specmeter(), setup, server, point, 16, tmp_path / "run", timeout_s=120)
    finally:
        server.stop()
    assert (run.served, run.matched, run.failed, run.chunks) == (16, 16, 0, 48)
    assert len(run.send_lag) == 16 and min(run.send_lag) == 0.0
    recorded = RunStore(tmp_path / "run" / "run").read_records()
    assert sorted(r.scheduled_s for r in recorded if not r.warmup) == pytest.approx(sorted(point.schedule))
