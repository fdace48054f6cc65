"""Goodput per point (load.slo): requests per second that met every bound, beside throughput, in the results, the
report and the CSV; an SLO with a wrong key or no bound is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from specmeter.common.errors import InputError
from specmeter.config.files import build_model
from specmeter.config.flag_text import slo as parse_slo
from specmeter.config.models import LoadSpec
from specmeter.config.slo import SLO
from specmeter.metrics.goodput import meets, summarize_goodput
from specmeter.report.csv_output import POINT_COLUMNS, point_rows
from specmeter.report.tables import throughput_table
from specmeter.rundir.store import load_summary
from specmeter.schemas.records import RequestRecord

RUN = Path(__file__).parents[2] / "fixtures" / "runs" / "20261123-180233-demo"


def record(i: int, ttft: float, e2e: float, tokens: int = 11, ok: bool = True, warmup: bool = False) -> RequestRecord:
    return RequestRecord(config_id="c", point_id="c4", conversation_id=f"q{i}", ok=ok, warmup=warmup,
                         ttft_s=ttft if ok else None, e2e_s=e2e if ok else None, output_tokens=tokens if ok else None,
                         error_kind=None if ok else "http_5xx")


def test_a_request_meets_the_slo_only_when_it_succeeded_within_every_bound() -> None:
    slo = SLO(ttft_ms=100, tpot_ms=20)
    assert meets(record(0, 0.05, 0.05 + 10 * 0.015), slo)
    assert not meets(record(1, 0.15, 0.15 + 10 * 0.015), slo)  # TTFT over
    assert not meets(record(2, 0.05, 0.05 + 10 * 0.025), slo)  # TPOT over
    assert not meets(record(3, 0.0, 0.0, ok=False), slo)  # a failed request never meets it
    assert meets(record(4, 0.5, 0.6), SLO(e2e_ms=600))


def test_goodput_counts_the_requests_that_met_it_over_the_point_wall_time() -> None:
    slo = SLO(ttft_ms=100)
    records = [record(i, 0.05 if i % 3 else 0.2, 1.0) for i in range(30)]
    records += [record(99, 0.01, 0.5, ok=False), record(100, 0.01, 0.5, warmup=True)]
    g = summarize_goodput(records, wall_s=4.0, slo=slo)
    met = sum(1 for r in records if not r.warmup and meets(r, slo))
    assert (g.met, g.measured) == (met, 31)  # the failed request counts in the share, the warm-up not
    assert g.requests_per_s == pytest.approx(met / 4.0)
    assert g.share == pytest.approx(met / 31)
    assert g.ci95_low is not None and g.ci95_high is not None
    assert g.ci95_low <= g.requests_per_s <= g.ci95_high
    assert g.slo == "ttft_ms <= 100"
    every = summarize_goodput([record(i, 0.01, 0.5) for i in range(12)], wall_s=3.0, slo=slo)
    assert every.met == every.measured == 12  # all met: the interval still says 12 requests cannot prove 100%
    assert every.ci95_low is not None and every.ci95_low < every.requests_per_s == every.ci95_high


def test_load_slo_is_checked_like_every_other_key() -> None:
    load = build_model(LoadSpec, {"concurrency": [1, 4], "slo": {"ttft_ms": 500, "tpot_ms": 50}}, "sweep.yaml: load")
    assert load.slo == SLO(ttft_ms=500, tpot_ms=50)
    with pytest.raises(InputError, match=r"sweep.yaml: load: unknown key 'slo.ttft'"):
        build_model(LoadSpec, {"slo": {"ttft": 500}}, "sweep.yaml: load")
    with pytest.raises(InputError, match="at least one bound") as err:
        build_model(LoadSpec, {"slo": {}}, "sweep.yaml: load")
    assert "\n" not in str(err.value)
    with pytest.raises(InputError, match="--slo: expected KEY=VALUE"):
        parse_slo("ttft_ms:500")


def test_the_report_and_the_csv_show_goodput_beside_throughput() -> None:
    summary = load_summary(RUN)
    slo = SLO(tpot_ms=6.0)
    summary.plan.load.slo = slo
    config = summary.configs[0]
    config.points[0].goodput = summarize_goodput([record(i, 0.05, 0.05 + 10 * 0.005 * (1 + i % 2)) for i in range(8)],
                                                 wall_s=2.0, slo=slo)
    table = throughput_table(summary)
    names = [c.name for c in table.columns]
    assert "goodput req/s" in names and "met SLO" in names and "tpot_ms <= 6" in table.title
    first = dict(zip(names, table.rows[0]))
    assert first["goodput req/s"].startswith(f"{config.points[0].goodput.requests_per_s:.2f}")
    assert dict(zip(names, table.rows[1]))["goodput req/s"] == "-"  # a point without goodput says so
    rows = point_rows(summary)
    at = POINT_COLUMNS.index("goodput_req_s")
    assert rows[0][at] == config.points[0].goodput.requests_per_s
    assert rows[1][at] is None

    summary.plan.load.slo = None  # no SLO: no goodput columns
    assert "goodput req/s" not in [c.name for c in throughput_table(summary).columns]


def test_sweep_flags_set_the_slo_and_the_ramp_over_the_file(tmp_path: Path) -> None:
    from specmeter.config.drafts import Drafts
    from specmeter.workflows.sweep import sweep_spec

    flags = Drafts(spec=['{"method": "ngram", "num_speculative_tokens": 2}'])
    plain = sweep_spec(None, flags, {"engine": {"model": "m"}, "load": {"concurrency": [1, 4]}})
    assert plain.load.slo is None and plain.load.stop_at_saturation  # the default: the ramp stops at saturation
    asked = sweep_spec(None, flags, {"engine": {"model": "m"},
                                       "load": {"concurrency": [1, 4], "slo": parse_slo("ttft_ms=500,tpot_ms=50"),
                                                "stop_at_saturation": False}})
    assert asked.load.slo == SLO(ttft_ms=500, tpot_ms=50) and not asked.load.stop_at_saturation
